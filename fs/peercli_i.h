/* peercli_i.h: a mount fetching chunks from its peers (wire_peer.h):
 * connections to other clients (peernet.c), kept for the next chunk,
 * and the peers that failed lately.
 *
 * A fetch asks for the whole chunk (PEER_GETs of PFS_MAX_IO bytes, sent
 * at once) and checks it against its digest (SHA-256) before it says it
 * has it: a peer can delay a read, never change it.
 *
 * Limits: PEERCLI_PER_PEER connections to one peer at once (a fetch
 * waits for one, within its deadline), PEERCLI_IDLE of them kept idle,
 * PEERCLI_PEERS peers remembered (the least recently used one that is
 * not in use goes).
 *
 * Thread-safe: any thread, many fetches at once.
 */
#ifndef PODFS_PEERCLI_I_H
#define PODFS_PEERCLI_I_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "podfs/wire.h"

#define PEERCLI_PER_PEER 4
#define PEERCLI_IDLE 2
#define PEERCLI_PEERS 64
#define PEERCLI_BAD_MS 30000 /* a peer that sent wrong bytes is not asked for this long */
#define PEERCLI_SLOW_MS 3000 /* nor one that was slow, gone or without the chunk */

struct client;
struct peercli;

/* For c (key, TLS context). 0 or -ENOMEM. */
int peercli_new(struct client *c, struct peercli **out);
/* Cuts every fetch short (-ECANCELED) from now on. */
void peercli_stop(struct peercli *pc);
/* Frees it; no fetch may be running. Safe on NULL. */
void peercli_free(struct peercli *pc);

/* Fetches chunk d (len bytes) from the peer at sa into buf[len], within
 * deadline (CLOCK_MONOTONIC ms). Returns 0 (buf holds it, checked), or
 * -EAGAIN (the peer failed lately: not asked), -EBADMSG (its bytes do
 * not match the digest, or it broke the protocol), -ENOENT (it does not
 * hold the chunk), -ETIMEDOUT, -ECANCELED, -EACCES (it does not hold the
 * pod key) or the error of the connection. */
int peercli_fetch(struct peercli *pc, const struct sockaddr_storage *sa,
		  const uint8_t d[PFS_DIGEST_LEN], uint32_t len, uint8_t *buf, int64_t deadline);

/* The peer at sa failed: it is not asked for ms milliseconds
 * (PEERCLI_BAD_MS or PEERCLI_SLOW_MS; a longer mark stays). Returns true
 * if it was not marked already (the caller logs it then). */
bool peercli_mark_bad(struct peercli *pc, const struct sockaddr_storage *sa, int ms);
/* Whether the peer at sa is marked (not to be asked now). */
bool peercli_is_bad(struct peercli *pc, const struct sockaddr_storage *sa);

#endif /* PODFS_PEERCLI_I_H */
