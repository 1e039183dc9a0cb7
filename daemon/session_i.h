/* session_i.h: client sessions, their open files, locks and reply cache.
 *
 * A session is keyed by the client_id of HELLO (random per client process,
 * stable across its reconnects). It outlives its connection by --lease
 * seconds so that a reconnecting client keeps its open files and locks.
 *
 * Threads: the session table, attach/detach, refs, the duplicate request
 * cache (drc) and the push order belong to the loop thread. The fid table
 * and the lock table are used by worker threads and guarded by s->mu and
 * s->lk_mu. A session is freed on the loop once it is dead (expired,
 * GOODBYE, or shutdown) and no request references it (refs == 0).
 */
#ifndef PODFSD_SESSION_I_H
#define PODFSD_SESSION_I_H

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "podfs/codec.h"
#include "podfs/htab.h"
#include "podfs/netaddr.h"
#include "conn_i.h"
#include "drc_i.h"
#include "lkranges_i.h"
#include "pfsd_i.h"
#include "push_i.h"
#include "rlslots_i.h"

struct conn;

/* An open file or directory of a session, named by the client's fid. */
struct fid {
	struct hnode hn;
	uint64_t id;
	unsigned refs;       /* table + users, under s->mu */
	bool in_table;
	int fd;              /* owned */
	bool is_dir;         /* OPENDIR's (READDIR reads it through a stream of
				its own for the call: a DIR kept per fid held
				a 32 KiB buffer, 2 GB for one client's 65,536) */
	pthread_mutex_t dmu; /* serializes READDIRs and pos */
	uint64_t pos;        /* dir: cookie of the next entry (0: the first) */
	int flags;           /* open flags */
	_Atomic int dfd;     /* O_DIRECT twin for big writes: -1 not yet, -2 none */
	atomic_bool dio_bad; /* a write through it failed with EINVAL */
};

/* What the sessions of one host (one client address) hold, counted
 * against the limits open-files, lock-owners and lock-ranges: per host,
 * not per session, since a key holder can open as many sessions as it
 * likes (four took every fd for clients' files). The loop thread makes
 * and frees it (session_new, the session's end); workers count in it. */
struct hostacct {
	struct hnode hn;
	struct pfs_srckey addr; /* pfs_hostkey_of its address */
	unsigned refs;        /* sessions (loop thread) */
	unsigned lingering;   /* of which disconnected, waiting for their lease (loop) */
	unsigned conns;       /* their connections, main and bulk (loop) */
	_Atomic unsigned fids;  /* open files and directories, slots */
	_Atomic unsigned locks; /* lock fds */
	_Atomic size_t ranges;  /* byte ranges of their POSIX locks */
	struct drc_host drc;    /* their sessions' kept replies (loop) */
	struct rlslots_host rl; /* their share of the replies file (replylog_i.h) */
	struct lim_pace pace;   /* their requests refused by limits (loop) */
	size_t mem;             /* their accounts' bytes (lim_acct host_mem; loop) */
	/* Their requests on the thread pool, and those waiting for the
	 * host's share of it (limit "workers"; loop, workers.c). */
	unsigned running;
	STAILQ_HEAD(, req) waitq;
};

/* A lock fd: one per (owner, inode, kind) so that different owners'
 * OFD/flock locks conflict while one owner's locks merge. */
struct lockent {
	struct hnode hn;
	uint64_t owner;
	bool flock;
	int fd;
	struct pfs_fh fh;
	struct lkranges ranges; /* a POSIX one's, as the kernel holds them */
};

struct session {
	struct hnode hn;
	struct pfsd *d;
	uint64_t client_id;
	/* Its name where others may read it (the metrics): the count of
	 * sessions made before it. Never the client id, which resumes it
	 * (AUTH): whoever learns that can take the session over. */
	uint64_t number;
	char host[PFS_HOSTNAME_MAX + 1];
	uint64_t caps;
	struct conn *conn; /* attached connection, or NULL while lingering */
	unsigned nbulk;    /* bulk connections (PFS_CAP_BULK) using the session */
	unsigned refs;     /* requests in flight */
	bool dead;
	bool freeing;
	uv_timer_t linger;
	uv_timer_t lk_linger; /* lock lease after a disconnect */
	bool locks_lost;      /* lk_linger released locks: tell the client (AUTH) */
	unsigned open_timers; /* until their close_cb */
	bool lingering;       /* on d->lingering (disconnected, not dead) */
	bool replacing;       /* session_replace closes its connection: no linger */
	TAILQ_ENTRY(session) llink;

	/* Fair-use limits (limits_i.h): the requests and bytes of its
	 * connections (loop), the caps its requests hit (workers set,
	 * the loop logs each once: server.c). */
	struct lim_acct *acct;
	_Atomic unsigned hits;
	/* Its requests named handles made under another handle secret
	 * (workers set, the loop logs it once: server.c). */
	atomic_bool foreign_fh;
	bool foreign_logged;
	/* Its requests on the thread pool, and those waiting in its host's
	 * queue for the host's share of the workers (limit "workers"; loop,
	 * workers.c). */
	unsigned running;
	unsigned queued;

	struct hostacct *ha; /* its host's account (set at session_new) */
	pthread_mutex_t mu; /* fids, slots, and peer_dead */
	bool peer_dead;     /* ended: never offered to peers again (dispatch_chunks.c) */
	struct htab fids;
	unsigned nfids;     /* in the table, slots, or reserved (session_fid_reserve) */
	struct slot *slots; /* files made for its CREATES (slots_i.h) */
	unsigned nslots;
	pthread_mutex_t lk_mu; /* locks */
	struct htab locks;
	unsigned nlocks;    /* lock fds, or reserved (session_lock_reserve) */
	size_t nranges;     /* ranges of their POSIX locks (session_ranges_take) */

	struct drc drc;    /* duplicate request cache (loop thread) */

	/* What podfsd status shows of it (loop thread): when it began, its
	 * requests by opcode, the traffic of its connections closed so far
	 * (the open ones count theirs in conn->tr), connections made, times
	 * it fell behind on acknowledging pushes (push.c). */
	int64_t since;
	uint64_t st_req[PFS_OP_MAX];
	struct traffic tr_closed;
	uint64_t nconns_total;
	uint64_t st_ack_misses;
	uint64_t rx_at;           /* a frame of one of its connections last arrived */
	uint64_t recall_owed;     /* a RECALL it has not applied was asked of it
				   * since (recall.c; 0: none); a recall after it
				   * sent anything since starts anew */

	/* Interest and push ordering (loop thread; islot is read by workers,
	 * it does not change while the session has requests). */
	int islot;                 /* interest slot, -1: none (gets every push) */
	uint64_t seq_next;         /* sequence number of the next ordered request */
	TAILQ_HEAD(, inflight) inflight; /* ordered requests in flight, by seq */
	unsigned nmeta;            /* of those, requests that hand out metadata */
	STAILQ_HEAD(, pushq) deferred; /* deferred pushes, FIFO */
	unsigned ndq;
	size_t dq_bytes; /* theirs, counted in acct->mem and the daemon's */
	uint64_t forget_epoch;     /* FORGETs applied so far */
};

/* --- the table and the lifetime of sessions (loop thread) --- */

/* The live session of client_id, or NULL. */
struct session *session_find(struct pfsd *d, uint64_t client_id);
/* The account of the host at from, or NULL if no session of it lives. */
struct hostacct *host_find(struct pfsd *d, const struct sockaddr_storage *from);
/* The host whose unsigned count at offset field of struct hostacct
 * (lingering, conns) is the largest, or NULL if there is none (loop). */
struct hostacct *host_most(struct pfsd *d, size_t field);
/* Makes d's tables of sessions and hosts empty, and the budget of their
 * kept replies (d->lim.reply_cache; drc_i.h). */
void sessions_init(struct pfsd *d);
/* A new session of client_id, in the table, without a connection yet,
 * with an interest slot if one is free (else it gets every push), in the
 * account of the host at from (NULL: the address ::). The caller checked
 * that session_find finds none. Never fails. */
struct session *session_new(struct pfsd *d, uint64_t client_id,
			    const struct sockaddr_storage *from);
/* c becomes s's main connection (c->sess, s->conn); a lingering session
 * stops its lease timers. A previous main connection of s is closed
 * (why) without s lingering or dying (with --lease 0 it would die, and
 * the caller would attach c to a session about to be freed). */
void session_attach(struct session *s, struct conn *c, const char *why);
/* c becomes a bulk connection of s (PFS_CAP_BULK): it carries s's
 * requests but gets no pushes and does not keep s alive. */
void session_attach_bulk(struct session *s, struct conn *c);
/* c is closing: a bulk connection just leaves s; s's main connection
 * leaves s lingering for --lease seconds (its locks for --lock-lease),
 * then s dies (at once with --lease 0 or while the daemon stops). While
 * more than the limit "lingering" of sessions linger, the one
 * disconnected longest dies. A connection s no longer has changes
 * nothing. */
void session_detach(struct session *s, struct conn *c);
/* Ends s now (GOODBYE, lease over, shutdown): out of the table, no more
 * pushes, its bulk connections closed, its locks' holder entry dropped
 * unless the daemon stops (the clients reclaim after a restart). Its
 * memory, fids and lock fds go once no request holds it. Idempotent. */
void session_kill(struct session *s);
/* A request in flight holds s (refs): s is freed only once it is dead and
 * the last reference went. */
void session_ref(struct session *s);
/* Lets go of a session_ref; frees s (after its timers' close callbacks)
 * if it is dead and that was the last. */
void session_unref(struct session *s);
/* Kills every session (shutdown). */
void sessions_stop(struct pfsd *d);
/* A lock on fh was released: pushes LOCK_WAKE at once, unordered, to the
 * live sessions that wait for a lock on it (lockstate_wait_take). A no-op
 * while the daemon stops. */
void session_lock_wake(struct pfsd *d, const struct pfs_fh *fh);

/* A request of s on c was answered with status (an errno; 0 for a
 * success or a broken request): a refusal by a limit counts in its
 * host's pace of refusals (lim_pace); the caps s hit for the first time
 * (open files, lock owners, the daemon's fds: noted by the workers) are
 * logged, and, once, that it sent handles of another handle secret (op.c
 * notes them). Loop thread. */
void session_note_hits(struct session *s, struct conn *c, int32_t status);

/* --- fids (any thread; s->mu inside) --- */

/* The fid id of s with a reference (release it with session_fid_put),
 * or NULL. */
struct fid *session_fid_get(struct session *s, uint64_t id);
/* Reserves room for one more fid of s before its file is opened: returns
 * 0, or -EMFILE when s's host has open-files fids already or the daemon's file
 * descriptors for sessions are spent (limits_i.h; the handle cache
 * shrinks to make room first). Every reservation ends in
 * session_fid_install or session_fid_unreserve. */
int session_fid_reserve(struct session *s);
void session_fid_unreserve(struct session *s);
/* One more fd of the daemon's budget for sessions' files, for a fid's
 * O_DIRECT twin (f->dfd, given back when the fid closes): false when the
 * budget is spent. */
bool session_fd_take(struct session *s);

/* Registers fd (a directory's if is_dir) with open flags under id and
 * returns it with a reference; takes the caller's reservation
 * (session_fid_reserve). If id is taken: replace=true forgets
 * the old one (closed once unused), replace=false keeps it, closes
 * fd and returns the old one (referenced). Takes ownership of fd in
 * every case. Never fails. */
struct fid *session_fid_install(struct session *s, uint64_t id, int fd, bool is_dir, int flags,
				bool replace);
/* Drops a reference of session_fid_get/install (f may be NULL); the last
 * one closes the fid. */
void session_fid_put(struct session *s, struct fid *f);
/* Forgets fid id (closed once unused). Returns false if it was unknown. */
bool session_fid_release(struct session *s, uint64_t id);

/* --- lock fds (any thread; the caller holds s->lk_mu) --- */

/* Reserves room for one more lock fd of s (-EMFILE past its host's lock-owners or
 * the daemon's budget), which session_lock_add takes or
 * session_lock_unreserve gives back. */
int session_lock_reserve(struct session *s);
void session_lock_unreserve(struct session *s);

/* The lock fd of owner's locks of kind flock (else POSIX) on fh, or
 * NULL. */
struct lockent *session_lock_find(struct session *s, uint64_t owner, bool flock,
				  const struct pfs_fh *fh);
/* Registers fd (owned from now on) as that lock fd, taking the caller's
 * reservation, and returns it. Never fails. */
struct lockent *session_lock_add(struct session *s, uint64_t owner, bool flock,
				 const struct pfs_fh *fh, int fd);
/* Forgets l and closes its fd, which drops its locks. */
void session_lock_del(struct session *s, struct lockent *l);
/* Takes room for n more ranges of s's POSIX locks in the kernel's lock
 * table: -ENOLCK past its host's lock-ranges, or past lock-table while its
 * host holds more than LIM_LOCK_MIN_SHARE. session_ranges_give gives them back. */
int session_ranges_take(struct session *s, size_t n);
void session_ranges_give(struct session *s, size_t n);

/* When s's wait for a RECALL began: at the first RECALL it owes
 * (recall_owed), else at since (this request's): a holder that stopped
 * or died costs one wait, not one per request. */
static inline uint64_t session_recall_start(const struct session *s, uint64_t since)
{
	return s->recall_owed ? s->recall_owed : since;
}

#endif /* PODFSD_SESSION_I_H */
