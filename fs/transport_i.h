/* transport_i.h: the TCP connections to podfsd.
 *
 * c->conns connections (-o conns=N): number 0 is the main connection,
 * the others are bulk connections of the same session (PFS_CAP_BULK in
 * wire.h) that carry only READ and WRITE (rpc.c spreads those over all
 * the connections). Each has its socket,
 * its send mutex (each frame is written whole with one sendmsg of
 * header + payload, so 1 MiB frames never interleave) and its
 * connection thread that reads frames, hands replies to rpc.c (and, on
 * the main one, pushes to the push thread), and on a drop reconnects on
 * its own with exponential backoff (100 ms .. 5 s), redoing the
 * handshake with the same client_id. A bulk connection is refused by the
 * server until the main one has a session there, and retries.
 */
#ifndef PODFS_TRANSPORT_I_H
#define PODFS_TRANSPORT_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "podfs/codec.h"

struct client;
struct transport;

/* Creates the transport for c (host, port, key, client_id set). Returns
 * 0 or -errno. */
int transport_new(struct client *c, struct transport **out);
/* Frees it; transport_stop must have been called if it was started. */
void transport_free(struct transport *t);

/* Connects and authenticates synchronously on the calling thread, for
 * mount time. On success returns 0 and the export root in *root; the
 * connection counts as up (rpc_connected is called). On failure returns
 * -errno and writes a one-line reason (without the "podfs: " prefix) to
 * err[errlen]: -EACCES for a failed authentication. */
int transport_connect_first(struct transport *t, struct pfs_entry *root, char *err,
			    size_t errlen);

/* Starts the connection threads and the push thread. Returns 0 or
 * -errno. */
int transport_start(struct transport *t);
/* Stops the threads and closes the sockets. Safe to call if not
 * started. */
void transport_stop(struct transport *t);

/* Sends one frame on connection chan (0: main) if it is still of
 * generation gen. Thread-safe.
 * Returns 0, or -ENOTCONN if that connection is gone (the caller then
 * waits for the next generation and sends again), or -ENOMEM. codecs
 * (PFS_CAP_LZ4, PFS_CAP_ZR): the codings the peer accepts; payloads >=
 * PFS_LZ4_MIN are coded when that pays (pfs_frame_prepare). */
int transport_send(struct transport *t, unsigned chan, uint64_t gen, uint64_t id, uint16_t op,
		   const void *payload, size_t len, unsigned codecs);

/* Closes the connection of generation gen if it is still live (a peer
 * that broke the protocol); its connection thread reconnects.
 * Thread-safe. */
void transport_drop(struct transport *t, uint64_t gen);

/* True if every frame the server sent so far was received and handled
 * (pushes numbered): the connection thread waits at a frame boundary and
 * the socket has nothing to read, not even an end of stream. A client
 * that was stopped or starved may hold unread invalidations, or a
 * connection the server closed for not acknowledging them; answers from
 * its caches wait until it caught up (see fs/ops.c open_locally). */
bool transport_quiet(struct transport *t);

#endif /* PODFS_TRANSPORT_I_H */
