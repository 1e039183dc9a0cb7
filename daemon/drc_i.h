/* drc_i.h: the duplicate request cache of the sessions.
 *
 * A client that loses its connection sends its unanswered requests again
 * once it reconnects; a non-idempotent one (wire.h: drc) must not run a
 * second time, and a WRITE (once) must not run while its first try still
 * runs. Each session's cache (struct drc) keeps, by request id: the
 * requests of those opcodes while they run, and the replies of the drc
 * ones once they are done, the newest PFSD_DRC_MAX (or the max given to
 * drc_init) of them. Finished replies are forgotten oldest first; running
 * requests are never forgotten by the cache itself.
 *
 * The finished replies of all sessions also share a budget of bytes (the
 * limit reply-cache; struct drc_pool), so that sessions by the thousand,
 * connected or lingering, cannot make the daemon keep 1,024 replies each.
 * Each reply counts in the account of its session's host (struct
 * drc_host, all the sessions from one address). Past the budget, the
 * oldest replies of the host that keeps the most bytes go first: a key
 * holder that makes changes without end forgets its own replies, not
 * those of hosts that may be about to send theirs again.
 *
 * Pure bookkeeping: no libuv, no sockets, no logging. Not thread-safe:
 * podfsd uses it on its loop thread only.
 */
#ifndef PODFSD_DRC_I_H
#define PODFSD_DRC_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "podfs/htab.h"
#include "podfs/wire.h"

struct drc;

/* One request: running (done false), or its reply (done true). */
struct drc_ent {
	struct hnode hn;
	TAILQ_ENTRY(drc_ent) lru;   /* in its drc, oldest begun first */
	TAILQ_ENTRY(drc_ent) hlru;  /* done: in its host's, oldest done first */
	struct drc *c;              /* the cache it is in */
	uint64_t id;
	uint16_t op;
	bool done;             /* the reply is stored below */
	bool resend;           /* a duplicate arrived while it ran: send it again */
	uint64_t resend_conn;  /* id of the connection the duplicate came on */
	/* The reply frame as it went out: its packed header and its payload
	 * (owned), wire bytes and bytes before coding. */
	uint8_t hdr[PFS_FRAME_HDR_SIZE];
	uint8_t *wire;
	size_t len;
	size_t raw;
};

/* The bytes a finished reply of len payload bytes counts. */
#define DRC_COST(len) (sizeof(struct drc_ent) + (len))

/* The budget of all the caches' finished replies. */
struct drc_pool {
	size_t bytes;       /* DRC_COST of the finished replies kept */
	size_t max;         /* at most this many (reply-cache) */
	uint64_t forgotten; /* replies forgotten early to keep within max */
	TAILQ_HEAD(, drc_host) hosts;
};

/* One host's share of the pool: its sessions' finished replies. */
struct drc_host {
	TAILQ_ENTRY(drc_host) link;
	TAILQ_HEAD(, drc_ent) done; /* oldest done first */
	size_t bytes;
	struct drc_pool *pool;
};

struct drc {
	struct htab tab;                /* id -> struct drc_ent */
	TAILQ_HEAD(, drc_ent) lru;      /* oldest begun first */
	size_t n;
	size_t max;                     /* done replies kept, at most */
	struct drc_host *host;
};

/* Makes p empty, with a budget of max bytes. */
void drc_pool_init(struct drc_pool *p, size_t max);
/* Makes h an empty account in p. */
void drc_host_add(struct drc_pool *p, struct drc_host *h);
/* Takes h out of its pool: its sessions' caches are gone (it is empty). */
void drc_host_remove(struct drc_host *h);

/* Makes c empty, a cache of host h; it keeps at most max finished
 * replies. Never fails. */
void drc_init(struct drc *c, size_t max, struct drc_host *h);
/* Frees every entry (running ones too: their requests no longer need
 * them) and the table. */
void drc_fini(struct drc *c);

/* The entry of request id, running or done, or NULL. */
struct drc_ent *drc_find(struct drc *c, uint64_t id);
/* Starts remembering request id of opcode op, running (the caller checked
 * that drc_find(c, id) is NULL), and forgets the oldest finished replies
 * beyond the maximum. Returns the entry, which stays valid until
 * drc_forget, or until drc_done and the cache or the pool forgets it.
 * Never fails. */
struct drc_ent *drc_begin(struct drc *c, uint64_t id, uint16_t op);
/* The request of e finished with this reply: hdr (PFS_FRAME_HDR_SIZE
 * bytes) and wire[len] (copied; wire may be NULL when len is 0), raw
 * payload bytes before coding. If the pool is then over its budget, the
 * oldest replies of the host keeping the most go (drc_i.h's top), and
 * that may be e itself. */
void drc_done(struct drc_ent *e, const uint8_t *hdr, const void *wire, size_t len, size_t raw);
/* Forgets e and frees it (a request that produced no reply, or whose
 * reply is not to be kept), so that a resend runs again. */
void drc_forget(struct drc *c, struct drc_ent *e);

#endif /* PODFSD_DRC_I_H */
