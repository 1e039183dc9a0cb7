/* handshake_i.h: HELLO and AUTH on a new connection.
 *
 * HELLO: protocol version, capabilities, the client's id and nonce; the
 * reply proves that the server knows the pod key (its MAC over both
 * nonces). AUTH: the client's proof; the connection then belongs to its
 * session: a new one, the one it resumes (the old connection of the same
 * client is closed), or, for a bulk connection (PFS_CAP_BULK), the
 * session's existing main connection's. The handshake has
 * PFSD_HANDSHAKE_MS to finish. A refused connection gets its error reply
 * and is closed once it is written.
 *
 * Loop thread only; payloads are at most PFS_MAX_HANDSHAKE bytes.
 */
#ifndef PODFSD_HANDSHAKE_I_H
#define PODFSD_HANDSHAKE_I_H

#include <stdint.h>

struct conn;

/* A new connection: arms its handshake deadline (closed when it passes,
 * with a rate-limited notice). */
void handshake_start(struct conn *c);

/* A frame on c while c->st is CS_HELLO or CS_AUTH (its header c->h, its
 * payload as received; the caller keeps and frees payload). Answers it,
 * refuses it, or closes c for a protocol violation. Returns 1 when c has
 * just authenticated (c->st CS_READY, c->sess set): the caller then
 * queues the AUTH request, whose reply carries the root's attributes (a
 * disk operation), with the flags in *auth_flags (PFS_AUTH_*). Returns 0
 * otherwise. */
int handshake_frame(struct conn *c, const uint8_t *payload, uint32_t *auth_flags);

#endif /* PODFSD_HANDSHAKE_I_H */
