/* transport_i.h: the TCP connections to podfsd.
 *
 * c->conns connections (-o conns=N): number 0 is the main connection,
 * the others are bulk connections of the same session (PFS_CAP_BULK in
 * wire.h) that carry only READ and WRITE (rpc.c spreads those over all
 * the connections). Each has its socket, its send mutex (each frame is
 * written whole by stream.c, the bytes under the frames: one sendmsg of
 * header + payload, or TLS records; so 1 MiB frames never interleave)
 * and its connection thread that reads frames, hands replies to its
 * owner (and, on the main one, pushes to the push queue, pushq.c), and
 * on a drop reconnects on its own with exponential backoff (100 ms ..
 * 5 s), redoing the handshake (sock.c) with the same client_id. A bulk
 * connection is refused by the server until the main one has a session
 * there, and retries.
 *
 * The transport knows no module above it: what happens on the
 * connections reaches its owner (main.c wires rpc.c, locks.c, cache.c,
 * push.c) through the callbacks of struct transport_cbs.
 */
#ifndef PODFS_TRANSPORT_I_H
#define PODFS_TRANSPORT_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "podfs/codec.h"
#include "podfs/frame.h"

struct client;
struct transport;
struct pushq;

/* A connection that is up, as up_cb sees it. */
struct transport_up {
	unsigned chan;       /* 0: main, 1..conns-1: bulk */
	uint64_t gen;        /* its generation, unique across all connections */
	unsigned codecs;     /* payload codings negotiated (PFS_CAP_LZ4, PFS_CAP_ZR) */
	uint64_t boot_id;    /* the daemon instance that answered */
	uint32_t auth_flags; /* PFS_AUTH_* of the session */
	bool again;          /* main: a reconnect, not the mount's first connection */
	bool restarted;      /* main reconnect: boot_id differs from the last one's */
	/* Main reconnect: the AUTH reply names another root handle than the
	 * last main connection's. podfsd's handles are MACs under its handle
	 * secret, the root's too, so this says the secret changed (podfsd
	 * runs with another state directory): every handle held is stale
	 * (fhmap_i.h). root: the root's handle now. */
	bool handles_changed;
	struct pfs_fh root;
};

/* What the transport tells its owner. Every callback gets arg. They run
 * on the thread named, must not call transport_stop, and must never wait
 * for a reply or the kernel (the connection thread delivers the replies)
 * unless said otherwise. */
struct transport_cbs {
	void *arg;
	/* A connection is up: the mount's thread (transport_connect_first)
	 * or its connection thread, before any frame is read or sent on it
	 * (requests may be sent from the call on). u is borrowed. */
	void (*up_cb)(void *arg, const struct transport_up *u);
	/* Connection chan is down (read error, end of stream, dropped, or
	 * stopping), before its socket is closed: sends on it fail from
	 * now on. Its connection thread, or transport_stop's caller. */
	void (*down_cb)(void *arg, unsigned chan);
	/* A reply frame arrived on the connection of generation gen, from
	 * daemon instance boot_id, whose write verifier is verf
	 * (sock_session): the callee takes payload (malloc'd; NULL
	 * when empty), h->raw_len bytes, or, if h->flags has a PFS_FF_CODED
	 * bit, the h->wire_len coded bytes. Connection thread; h is
	 * borrowed. */
	void (*reply_cb)(void *arg, const struct pfs_frame_hdr *h, uint8_t *payload,
			 uint64_t boot_id, uint64_t verf, uint64_t gen);
	/* A LOCK_WAKE push (payload[len] borrowed): it is neither queued nor
	 * acknowledged. Main connection thread. */
	void (*wake_cb)(void *arg, const uint8_t *payload, size_t len);
	/* Any other push, as it is queued: returns its number (0: none),
	 * and sets *applied_first if it must be applied before it is
	 * acknowledged, and an entry invalidation's *name_key (pushq_i.h).
	 * Main connection thread; payload borrowed. */
	uint64_t (*note_cb)(void *arg, uint16_t op, const uint8_t *payload, size_t len,
			    bool *applied_first, uint64_t *name_key);
	/* Applies a push note_cb numbered seq, in arrival order. The push
	 * thread; may wait for the kernel; payload borrowed. */
	void (*apply_cb)(void *arg, uint16_t op, const uint8_t *payload, size_t len, uint64_t seq);
	/* Before a push is acknowledged: what must hold by then (the
	 * kernel's attributes of an INVAL_INODE's object dropped). The ack
	 * thread; quick; payload borrowed. NULL: nothing. */
	void (*early_cb)(void *arg, uint16_t op, const uint8_t *payload, size_t len);
	/* True once the owner is shutting down (after GOODBYE the server
	 * closes: a dropped connection is then not reconnected). Connection
	 * threads. */
	bool (*closing_cb)(void *arg);
	/* The main connection has been down for down_ms and reconnecting
	 * still fails: called at growing intervals (5 s, 15 s, 30 s, then
	 * every minute), for the owner to say so. Main connection thread. */
	void (*unreachable_cb)(void *arg, int64_t down_ms, const char *err);
};

/* Creates the transport for c (host, port, key, client_id, hostname,
 * conns, lz4 set; read while it lives), reporting through *cbs (copied).
 * Returns 0 or -ENOMEM. Start-up thread. */
int transport_new(struct client *c, const struct transport_cbs *cbs, struct transport **out);
/* Frees it; transport_stop must have been called if it was started.
 * Safe on NULL. */
void transport_free(struct transport *t);

/* Connects and authenticates the main connection synchronously on the
 * calling thread, for mount time. On success returns 0 and the export
 * root in *root; the connection is up (up_cb was called, again false).
 * On failure returns -errno and writes a one-line reason (without the
 * "podfs: " prefix) to err[errlen]: -EACCES for a failed
 * authentication. */
int transport_connect_first(struct transport *t, struct pfs_entry *root, char *err,
			    size_t errlen);

/* Starts the connection threads, the push thread and the ack thread
 * (after fuse_daemonize). Returns 0 or -errno (transport_stop then stops
 * what started). */
int transport_start(struct transport *t);
/* Stops the threads (the push thread after applying what is queued) and
 * closes the sockets. Safe to call if not started. Not from a callback. */
void transport_stop(struct transport *t);

/* A fresh request id (never 0, never reused by this process): the
 * handshakes and rpc.c's calls share one sequence. Any thread. */
uint64_t transport_next_id(struct transport *t);

/* Sends one frame on connection chan (0: main) if it is still of
 * generation gen. Thread-safe; blocks while the socket's buffer is full.
 * Returns 0, or -ENOTCONN if that connection is gone (the caller then
 * waits for the next generation and sends again), or -ENOMEM. codecs
 * (PFS_CAP_LZ4, PFS_CAP_ZR): the codings the peer accepts; payloads >=
 * PFS_LZ4_MIN are coded when that pays (pfs_frame_prepare). payload is
 * borrowed for the call. */
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
 * its caches wait until it caught up (see ops_common.c
 * ops_open_locally). Waits for the connection thread to catch up: up
 * to 20 ms while it waits for the rest of a frame, 500 ms at most.
 * Any thread. */
bool transport_quiet(struct transport *t);
/* How many times transport_quiet gave up waiting (its callers then asked
 * the server). Any thread. */
uint64_t transport_quiet_missed(struct transport *t);

/* True if the main connection's session acknowledges pushes
 * (PFS_CAP_PUSH_ACK): a change's reply then reaches its client only once
 * every other client received the push about it. Any thread. */
bool transport_push_acked(struct transport *t);
/* Whether the main connection negotiated PFS_CAP_PEER (the server
 * answers CHUNK). Any thread. */
bool transport_peer_ok(struct transport *t);
/* Whether the main connection negotiated PFS_CAP_LIST_COOKIES: the
 * format of the listings it sends (wire_list.h). */
bool transport_list_cookies(struct transport *t);
/* The address of this end of the main connection (the last one up):
 * true with it in *out, false before the first. Any thread. */
bool transport_local_addr(struct transport *t, struct sockaddr_storage *out);

/* The queue of the main connection's pushes (pushq_i.h), for
 * pushq_busy. Any thread. */
struct pushq *transport_pushq(struct transport *t);

#endif /* PODFS_TRANSPORT_I_H */
