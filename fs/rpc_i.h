/* rpc_i.h: the pending-request table and the synchronous call API.
 *
 * A FUSE thread calls rpc_call(); it blocks on its own condition variable
 * until the reply with its request id arrives (many FUSE threads, many
 * requests in flight on one connection). Each caller sends its own
 * request, and sends it again with the SAME id whenever the connection
 * generation changes while it waits (hard mount: after a reconnect the
 * daemon's reply cache answers retried non-idempotent requests without
 * running them twice). A soft mount fails a call that waited longer than
 * the timeo option with -EIO. A call whose process is being killed is
 * given up with -EINTR, hard or soft (killable_i.h).
 *
 * Thread-safety: every function may be called from any thread.
 */
#ifndef PODFS_RPC_I_H
#define PODFS_RPC_I_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "podfs/bigbuf.h"
#include "podfs/codec.h"
#include "podfs/frame.h"

struct client;
struct inode;
struct rpc;

/* A successful reply's payload: buf is malloc'd (NULL when len == 0) and
 * owned by the caller, who releases it with rpc_reply_free(). Decoded
 * `bytes` fields point into buf. */
struct rpc_reply {
	uint8_t *buf;
	size_t len;
	uint64_t verf; /* the write verifier of the daemon that answered (pfs_hello_rep) */
	uint64_t boot; /* the boot_id of the daemon instance that answered (locks) */
};

/* Frees r's payload and empties r (safe on an empty one). */
static inline void rpc_reply_free(struct rpc_reply *r)
{
	pfs_big_free(r->buf);
	r->buf = NULL;
	r->len = 0;
}

/* The reply r to a change that carries its directory's attributes after
 * it with PFS_CAP_DIR_ATTR (dir_rep: UNLINK, RMDIR, a RENAME within one
 * directory), or nothing: 1 with them in *dir, 0 if it has none,
 * -EBADMSG if it is malformed. */
static inline int rpc_dir_rep(const struct rpc_reply *r, struct pfs_attr *dir)
{
	struct pfs_dir_rep dr;

	if (r->len == 0)
		return 0;
	if (pfs_dec_dir_rep(r->buf, r->len, &dr) < 0)
		return -EBADMSG;
	*dir = dr.dir;
	return 1;
}

/* Creates the table for c (which it reads: conns, soft, timeo, tr,
 * hostport; and counts requests in c->st_req). Returns 0 or -ENOMEM.
 * Start-up thread. */
int rpc_new(struct client *c, struct rpc **out);
/* Frees the table; no call may be in progress. Safe on NULL. */
void rpc_free(struct rpc *rpc);

/* Sends op with payload req[len] (transport_send, on the connection
 * rpc picks: READ and WRITE on the least loaded one, the rest on the
 * main one) and waits for its reply, sending it again under the same id
 * on every new connection generation while it waits. Returns 0 with
 * *rep holding the reply payload (LZ4 decoded here), or -errno: the
 * server's status (negated), -EIO on a soft-mount timeout, on shutdown
 * (rpc_closing with no connection, rpc_kill), or for a reply that breaks
 * the protocol (its connection is dropped), -ENOMEM. On failure *rep is
 * empty. req is only borrowed, for the duration of the call. Any thread
 * but a connection thread (which delivers the replies). */
int rpc_call(struct rpc *rpc, uint16_t op, const void *req, size_t len, struct rpc_reply *rep);
/* As rpc_call, for a request whose order matters only against what this
 * host did to one object, in: a directory whose names it makes or
 * changes (MKDIR, CREATE), or the object whose attributes it changes
 * (SETATTR). The barrier then waits only for that (rpc_set_barrier). */
int rpc_call_in(struct rpc *rpc, struct inode *in, uint16_t op, const void *req, size_t len,
		struct rpc_reply *rep);

/* As rpc_call, but gives up after timeout_ms (> 0) with -ETIMEDOUT, and
 * fails at once with -ENOTCONN when not connected (for GOODBYE). */
int rpc_call_timeout(struct rpc *rpc, uint16_t op, const void *req, size_t len,
		     struct rpc_reply *rep, int timeout_ms);

/* Holds every call's (re)send for up to ms milliseconds, or until
 * rpc_release, except the calls of a thread that called
 * rpc_hold_exempt(true) and calls during shutdown: after the server's
 * handle secret changed, requests wait while the objects they name are
 * found again by name (recover.c), instead of failing with ESTALE. Any
 * thread. */
void rpc_hold(struct rpc *rpc, int ms);
void rpc_release(struct rpc *rpc);
void rpc_hold_exempt(bool on);

/* fn(arg, op, in) is called first in every call of op, on the caller's
 * thread (not in a thread exempt from holds, see rpc_hold_exempt), with
 * the object of rpc_call_in or NULL: it may block until op may be sent
 * (dirdeleg.c: the unlinks and creates answered under a directory
 * delegation go first). Start-up thread, before any call. */
void rpc_set_barrier(struct rpc *rpc, void (*fn)(void *arg, uint16_t op, struct inode *in),
		     void *arg);

/* Connection thread of connection chan (0: main, 1..conns-1: bulk, which
 * carry READ and WRITE only): a new authenticated connection of
 * generation gen (unique across all connections) is up; waiting callers
 * (re)send their requests on it. codecs: the payload codings
 * (PFS_CAP_LZ4, PFS_CAP_ZR) negotiated on it. */
void rpc_connected(struct rpc *rpc, unsigned chan, uint64_t gen, unsigned codecs);
/* Connection thread: connection chan is down; callers whose request was
 * on it send it again (same id) on another live connection that may
 * carry it, or keep waiting (hard) or until their deadline (soft). */
void rpc_disconnected(struct rpc *rpc, unsigned chan);
/* Connection thread: a reply frame arrived on the connection of
 * generation gen, from daemon instance boot_id with write verifier
 * verf. Takes ownership of
 * payload (malloc'd, may be NULL when empty): h->raw_len bytes, or, if
 * h->flags has a PFS_FF_CODED bit, the h->wire_len coded bytes, which
 * the caller waiting for the reply decodes (a malformed block fails that
 * call with -EIO and drops the connection). A reply nobody waits for (a
 * call that timed out, a duplicate) is dropped. Never blocks but on
 * rpc's lock. */
void rpc_complete(struct rpc *rpc, const struct pfs_frame_hdr *h, uint8_t *payload,
		  uint64_t boot_id, uint64_t verf, uint64_t gen);

/* Shutdown has begun: calls that wait for a connection fail with -EIO
 * from now on; calls on a live connection still get their replies. Any
 * thread (the signal thread, main). */
void rpc_closing(struct rpc *rpc);
/* Fails every waiting and future call with -EIO (a shutdown that waited
 * 10 s for a lost server). Any thread. */
void rpc_kill(struct rpc *rpc);
/* True once rpc_closing or rpc_kill was called. Any thread. */
bool rpc_is_closing(struct rpc *rpc);
/* True while the main connection is up. Any thread. */
bool rpc_is_up(struct rpc *rpc);
/* How many calls wait for a reply now, and how many were given up
 * since the start because their process was being killed. Any thread. */
void rpc_waiting(struct rpc *rpc, size_t *waiting, uint64_t *abandoned);
/* How many of the mount's connections (main and bulk) are up. Any
 * thread. */
unsigned rpc_conns_up(struct rpc *rpc);

/* Encodes message `name` (*m, a struct pfs_<name>) into a stack buffer of
 * cap bytes and calls rpc_call with it. Evaluates to 0 or -errno; an
 * unencodable message (bad name, too long) gives -EINVAL. */
#define RPC_SMALL 8192
#define rpc_msg(rpc, op, name, m, rep) rpc_msg_in(rpc, NULL, op, name, m, rep)

/* rpc_msg through rpc_call_in. */
#define rpc_msg_in(rpc, in, op, name, m, rep)                                  \
	({                                                                     \
		uint8_t rpc_b_[RPC_SMALL];                                     \
		struct pfs_wr rpc_w_;                                          \
		pfs_wr_init(&rpc_w_, rpc_b_, sizeof(rpc_b_));                  \
		pfs_enc_##name(&rpc_w_, (m)) < 0                               \
			? -EINVAL                                              \
			: rpc_call_in((rpc), (in), (op), rpc_b_, rpc_w_.len,   \
				      (rep));                                  \
	})

/* As rpc_msg with a malloc'd buffer of cap bytes (WRITE, SETXATTR);
 * -ENOMEM if it cannot be allocated. */
#define rpc_msg_heap(rpc, op, name, m, cap, rep)                               \
	({                                                                     \
		size_t rpc_cap_ = (cap);                                       \
		uint8_t *rpc_h_ = malloc(rpc_cap_);                            \
		int rpc_rc_ = -ENOMEM;                                         \
		if (rpc_h_) {                                                  \
			struct pfs_wr rpc_w_;                                  \
			pfs_wr_init(&rpc_w_, rpc_h_, rpc_cap_);                \
			rpc_rc_ = pfs_enc_##name(&rpc_w_, (m)) < 0             \
					  ? -EINVAL                            \
					  : rpc_call((rpc), (op), rpc_h_,       \
						     rpc_w_.len, (rep));        \
			free(rpc_h_);                                          \
		}                                                              \
		rpc_rc_;                                                       \
	})

#endif /* PODFS_RPC_I_H */
