/* push_i.h: invalidations pushed to the clients that cache what changed
 * ("callbacks", as in AFS), in an order that never lets a push be
 * overtaken by an older reply, and the acknowledgements a change's reply
 * waits for. The race analysis and the reasons are in push.c.
 *
 * A push goes to the sessions in the interest set of the object
 * (interest_i.h) through the connection layer (conn_i.h); push.c reads
 * the sessions' fields (session_i.h) but calls nothing above the
 * connections: callers are server.c (a request's changes), watch.c
 * (changes made beside podfs) and session.c (lock wake-ups).
 *
 * Loop thread only.
 */
#ifndef PODFSD_PUSH_I_H
#define PODFSD_PUSH_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "podfs/codec.h"

struct pfsd;
struct session;
struct conn;

/* An invalidation to push once a request completes, or that watch.c
 * found. */
struct inval {
	struct inval *next;
	uint16_t op;           /* PFS_OP_INVAL_INODE, PFS_OP_INVAL_ENTRY, or
				* PFS_OP_LOCK_WAKE (session_lock_wake) */
	struct pfs_fh fh;      /* the object; the parent for INVAL_ENTRY */
	int64_t off, len;      /* INVAL_INODE: data from off (len bytes, 0: to
				* the end), or off -1: attributes only */
	struct pfs_name name;  /* INVAL_ENTRY */
};

/* A push frame held back until earlier replies of its session are
 * queued (a session's FIFO, see push.c). */
struct pushq {
	STAILQ_ENTRY(pushq) link;
	uint64_t wait;     /* send once no request with seq < wait is in flight */
	uint16_t op;
	uint16_t len;
	uint8_t p[];
};

/* An ordered request in flight (wire.h: ordered), as the push order sees
 * it: pushes to its session made while it runs wait for its reply.
 * Embedded in struct req; zero-initialised means "not in the list". */
struct inflight {
	TAILQ_ENTRY(inflight) link;
	uint64_t seq;      /* position in the session's list */
	bool ordered;      /* in the list */
	bool meta;         /* hands out metadata (wire.h: meta) */
	uint64_t key;      /* a GETATTR: its object's key, the one object its
			    * reply tells about; 0: any object */
};

/* The clients whose acknowledgement a change's reply waits for: each a
 * connection a push went out on (referenced), the count of pushes it
 * must have acknowledged, and its deadline (acklat_i.h). Times are
 * uv_now's, ms. Zero-initialised: nobody. */
struct ackwait {
	struct conn *c;
	uint64_t target;
	uint64_t since;    /* the wait began */
	uint64_t deadline; /* it is checked next */
	bool held;         /* the push waited in the session's FIFO: its wait
			    * began only when it went out (ackwait_start) */
	bool recall;       /* for a RECALL (push_recall): the holder is waited
			    * for even if behind, up to --recall-timeout of
			    * silence (acklat_recall_expired) */
	bool silent;       /* a recall's holder was silent that long: done,
			    * not acknowledged */
};
struct acks {
	struct ackwait *v;
	size_t n, cap;
	uint64_t id;   /* drawn at its first wait (d->acks_seq): a connection's
			* ackw_id says it has its wait at v[ackw_i] */
};

/* Pushes iv (INVAL_INODE or INVAL_ENTRY) to every session interested in
 * key (handles_key of iv->fh), and to the sessions without an interest
 * slot, but not to `from` unless self. Each push goes out at once or
 * waits in its session's FIFO for the replies in flight (see push.c).
 * With acks, it notes there the clients whose acknowledgement the reply
 * of `from`'s change must wait for. A no-op while the daemon stops. */
void push_inval(struct pfsd *d, struct session *from, bool self, const struct inval *iv,
		uint64_t key, struct acks *acks);
/* Whether the author s of a change gets its own push about the object of
 * key too: only while another of its metadata requests is in flight (fl:
 * the change's own entry, which does not count) whose reply may be older
 * than the change and tell about that object (a GETATTR of another
 * object does not). */
bool push_to_self(const struct session *s, const struct inflight *fl, uint64_t key);
/* Pushes one frame (op, p[len]) to s without waiting for its replies in
 * flight (LOCK_WAKE: a wake-up only makes the client retry, the sooner
 * the better): at once, or, if pushes wait in s's FIFO, right after
 * them, so that every push keeps the number on its connection that a
 * held reply waits for. Nothing if s has no connection that takes
 * pushes; a connection that does not read its pushes (PFSD_MAX_QUEUED
 * bytes waiting, or PFSD_MAX_DEFERRED in the FIFO) is closed instead. */
void push_unordered(struct session *s, uint16_t op, const uint8_t *p, size_t len);

/* Pushes RECALL (p[len], a recall_push) to s as push_unordered does,
 * and notes in acks that the request held back for it waits for s's
 * acknowledgement (which s sends once it returned its delegations), even
 * if s is behind: what s answered under them exists nowhere else.
 * Returns false if nothing was pushed (s has no connection that takes
 * pushes): nothing to wait for. */
bool push_recall(struct session *s, const uint8_t *p, size_t len, struct acks *acks);
/* Whether the client client_id acknowledged what a waits for from it
 * (false also if a does not wait for it: it was behind, or nothing was
 * pushed to it; or if it was silent past --recall-timeout). */
bool push_acks_acked(const struct acks *a, uint64_t client_id);
/* Whether a's wait for client_id's RECALL ended in its silence (past
 * --recall-timeout). */
bool push_acks_silent(const struct acks *a, uint64_t client_id);

/* A request of s of opcode op was queued: if op is ordered (wire.h), fl
 * joins s's requests in flight, so that pushes to s made from now on
 * wait for its reply. key: a GETATTR's object's key, else 0. */
void push_ordered_add(struct session *s, struct inflight *fl, uint16_t op, uint64_t key);
/* The reply of fl's request is queued (or it ends without one): fl leaves
 * the list (a no-op if it is not in it). Call push_flush after. */
void push_ordered_del(struct session *s, struct inflight *fl);
/* Sends the deferred pushes of s that no request in flight holds back any
 * more, in order (none once s is dead). */
void push_flush(struct session *s);
/* Frees the pushes waiting in s's FIFO (s is being freed). */
void push_drop_queue(struct session *s);

/* Whether every client of a is done: it acknowledged its target, or it
 * fell behind, or its connection is closing, or no longer serves a
 * session (GOODBYE). */
bool push_acks_done(const struct acks *a);
/* Notes, on each connection a waits for, the push number it waits for
 * (c->ack_need, a bound from below for this d->ack_gen): a's reply is
 * held. held_scan starts a new generation and notes every reply still
 * held again; a wait added since notes itself (ackwait_add). */
void push_acks_need(struct pfsd *d, const struct acks *a);
/* Whether c's acknowledgements may let a held reply go: only then is
 * every held reply looked at (held_scan), not at each PUSH_ACK. */
bool push_ack_releases(const struct conn *c);
/* Each client of a that is not done and past its deadline at now: if it
 * sent a frame within its deadline, it is running and gets another
 * deadline, but past PFSD_ACK_WAIT_MS its connection is closed (it then
 * revalidates what it caches); if it sent nothing, it is stalled and
 * falls behind: no change waits for it until it has acknowledged every
 * push it was sent by then, which stay queued on its connection in
 * order. One (rate-limited) warning each time. */
void push_acks_expire(struct pfsd *d, struct acks *a, uint64_t now);
/* The earliest deadline of a's clients that are not done, or
 * UINT64_MAX. */
uint64_t push_acks_next(const struct acks *a);
/* Lets go of a's connections and frees its list. */
void push_acks_free(struct acks *a);
/* A PUSH_ACK frame on c: its payload as received, c->h.wire_len bytes
 * (conn.c admits only uncoded PUSH_ACKs). Notes how many pushes the
 * client received, the delay of a push being timed (c->lat), and whether
 * a client that fell behind caught up. Returns 1 if that count grew
 * (held replies may go now), 0 if not, or -EBADMSG for a malformed ack
 * or one beyond what was sent (a protocol violation). */
int push_ack(struct conn *c, const uint8_t *payload);

/* Change notifications were lost: closes every authenticated
 * connection, so that each client reconnects and revalidates what it
 * caches. why is logged. */
void push_revalidate_all(struct pfsd *d, const char *why);

#endif /* PODFSD_PUSH_I_H */
