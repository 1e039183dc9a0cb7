/* locks.c: the client's table of held locks, their reclaim after a
 * coordinator restart, and the waiting of blocking lock requests (see
 * locks_i.h). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bg_i.h"
#include "client_i.h"
#include "locks_i.h"
#include "podfs/clock.h"
#include "podfs/log.h"

/* One byte range of a POSIX lock. */
struct range {
	struct range *next;
	uint64_t start, end; /* inclusive; UINT64_MAX: to end of file */
	uint32_t type;       /* PFS_LK_RD or PFS_LK_WR */
};

/* The locks of one owner on one file, of one kind. */
struct held {
	struct held *next;
	struct pfs_fh fh;
	uint64_t owner;
	uint64_t nodeid;     /* for log lines */
	bool flock;
	bool lost;           /* POSIX: a lock was lost; close() reports EIO */
	uint32_t ftype;      /* flock: PFS_LK_RD or PFS_LK_WR */
	struct range *ranges; /* POSIX */
	struct pfs_creds cr; /* of the latest grant: the reclaim runs as it */
	uint64_t fid;
};

/* A thread in locks_setlk or locks_getlk. */
struct waiter {
	struct waiter *next;
	const struct pfs_fh *fh;
	bool woken;       /* LOCK_WAKE for fh since the last attempt */
	bool interrupted; /* FUSE INTERRUPT */
};

/* An unlock on its way to the daemon (unlock, locks_unlock_owner): lock
 * requests of the same owner and kind on the same file wait for its
 * reply. The daemon runs requests in parallel, so a lock request sent
 * while the unlock is in flight could be granted first and then dropped
 * by it: an unlock answered early for a dying process, and then resent
 * after a reconnect, beside a lock of a new process that reuses the
 * dead one's owner (the kernel's address of its file table). */
struct unlocking {
	struct unlocking *next;
	const struct pfs_fh *fh;
	uint64_t owner;
	bool flock;
};

struct locks {
	struct client *c;
	/* The reclaim thread; bg.lock guards everything below, and bg.cond
	 * wakes the waiters, the requests waiting for a reclaim and the
	 * thread. */
	struct bg bg;
	struct held *held;
	struct waiter *waiters;
	struct unlocking *unlocking;
	uint64_t boot;        /* daemon instance the table belongs to */
	bool reclaiming;      /* new lock requests wait */
	bool reclaim_pending; /* for the thread */
	/* Unlocks and the reclaim go one at a time (see locks_i.h). */
	pthread_mutex_t seq_mu;
};

/* --- the table (caller holds bg.lock) --- */

static struct held **held_find(struct locks *lk, const struct pfs_fh *fh, uint64_t owner,
			       bool flock)
{
	struct held **pp;

	for (pp = &lk->held; *pp; pp = &(*pp)->next)
		if ((*pp)->owner == owner && (*pp)->flock == flock && pfs_fh_equal(&(*pp)->fh, fh))
			return pp;
	return NULL;
}

static void held_free(struct held *h)
{
	while (h->ranges) {
		struct range *r = h->ranges;
		h->ranges = r->next;
		free(r);
	}
	free(h);
}

/* Drops an entry that no longer holds or reports anything. */
static void held_maybe_free(struct held **pp)
{
	struct held *h = *pp;

	if (h->flock ? h->ftype != PFS_LK_UN : (h->ranges || h->lost))
		return;
	*pp = h->next;
	held_free(h);
}

/* Sets [start, end] of h to type (PFS_LK_UN removes), as fcntl does for
 * one owner: the new lock replaces whatever the owner had there. Returns
 * 0 or -ENOMEM (h is then unchanged... except for ranges already cut). */
static int apply_range(struct held *h, uint32_t type, uint64_t start, uint64_t end)
{
	struct range **pp = &h->ranges, *nr = NULL;

	if (type != PFS_LK_UN) {
		nr = malloc(sizeof(*nr));
		if (!nr)
			return -ENOMEM;
	}
	while (*pp) {
		struct range *r = *pp;
		if (r->end < start || r->start > end) {
			pp = &r->next;
		} else if (r->start < start && r->end > end) {
			struct range *right = malloc(sizeof(*right));
			if (!right) {
				free(nr);
				return -ENOMEM;
			}
			*right = *r;
			right->start = end + 1;
			r->end = start - 1;
			r->next = right;
			pp = &right->next;
		} else if (r->start < start) {
			r->end = start - 1;
			pp = &r->next;
		} else if (r->end > end) {
			r->start = end + 1;
			pp = &r->next;
		} else {
			*pp = r->next;
			free(r);
		}
	}
	if (nr) {
		nr->start = start;
		nr->end = end;
		nr->type = type;
		nr->next = h->ranges;
		h->ranges = nr;
	}
	return 0;
}

/* Applies a granted or sent SETLK to the table. -ENOMEM if it cannot. */
static int table_apply(struct locks *lk, const struct pfs_lock_req *m, uint64_t nodeid)
{
	bool flock = m->flags & PFS_LKF_FLOCK;
	struct held **pp = held_find(lk, &m->fh, m->owner, flock), *h;
	int rc = 0;

	if (!pp) {
		if (m->type == PFS_LK_UN)
			return 0;
		h = calloc(1, sizeof(*h));
		if (!h)
			return -ENOMEM;
		h->fh = m->fh;
		h->owner = m->owner;
		h->flock = flock;
		h->ftype = PFS_LK_UN;
		h->next = lk->held;
		lk->held = h;
		pp = &lk->held;
	}
	h = *pp;
	if (m->type != PFS_LK_UN) {
		h->cr = m->cr;
		h->fid = m->fid;
		h->nodeid = nodeid;
	}
	if (flock)
		h->ftype = m->type;
	else
		rc = apply_range(h, m->type, m->start, m->end);
	held_maybe_free(pp);
	return rc;
}

static const char *type_name(uint32_t type)
{
	return type == PFS_LK_WR ? "write" : "read";
}

/* A lock the daemon no longer has: out of the table, said loudly. */
static void lose(struct locks *lk, const struct pfs_lock_req *m, uint64_t nodeid, const char *why)
{
	bool flock = m->flags & PFS_LKF_FLOCK;
	struct held **pp = held_find(lk, &m->fh, m->owner, flock);

	if (flock)
		pfs_warn("lock lost: flock %s lock on inode %" PRIu64 " (owner %016" PRIx64 "): %s",
			 type_name(m->type), nodeid, m->owner, why);
	else if (m->end == UINT64_MAX)
		pfs_warn("lock lost: fcntl %s lock on bytes %" PRIu64 "..EOF of inode %" PRIu64
			 " (owner %016" PRIx64 "): %s; close() will fail with EIO",
			 type_name(m->type), m->start, nodeid, m->owner, why);
	else
		pfs_warn("lock lost: fcntl %s lock on bytes %" PRIu64 "..%" PRIu64 " of inode %" PRIu64
			 " (owner %016" PRIx64 "): %s; close() will fail with EIO",
			 type_name(m->type), m->start, m->end, nodeid, m->owner, why);
	if (!pp)
		return;
	if (flock) {
		(*pp)->ftype = PFS_LK_UN;
	} else {
		(*pp)->lost = true;
		(void)apply_range(*pp, PFS_LK_UN, m->start, m->end);
	}
	held_maybe_free(pp);
}

/* The lock requests that would re-create the table. *out is malloc'd. */
static size_t snapshot(struct locks *lk, struct pfs_lock_req **out, uint64_t **nodeids)
{
	size_t n = 0, i = 0;

	for (struct held *h = lk->held; h; h = h->next) {
		if (h->flock)
			n += h->ftype != PFS_LK_UN;
		else
			for (struct range *r = h->ranges; r; r = r->next)
				n++;
	}
	*out = n ? calloc(n, sizeof(**out)) : NULL;
	*nodeids = n ? calloc(n, sizeof(**nodeids)) : NULL;
	if (n && (!*out || !*nodeids)) {
		free(*out);
		free(*nodeids);
		*out = NULL;
		*nodeids = NULL;
		return SIZE_MAX;
	}
	for (struct held *h = lk->held; h; h = h->next) {
		struct pfs_lock_req base;
		memset(&base, 0, sizeof(base));
		base.cr = h->cr;
		base.fh = h->fh;
		base.fid = h->fid;
		base.owner = h->owner;
		if (h->flock && h->ftype != PFS_LK_UN) {
			base.type = h->ftype;
			base.start = 0;
			base.end = UINT64_MAX;
			base.flags = PFS_LKF_FLOCK;
			(*nodeids)[i] = h->nodeid;
			(*out)[i++] = base;
		} else if (!h->flock) {
			for (struct range *r = h->ranges; r; r = r->next) {
				base.type = r->type;
				base.start = r->start;
				base.end = r->end;
				(*nodeids)[i] = h->nodeid;
				(*out)[i++] = base;
			}
		}
	}
	return n;
}

/* --- reclaim (the module's thread) --- */

static void reclaim_all(struct locks *lk)
{
	struct client *c = lk->c;
	struct pfs_lock_req *v;
	struct pfs_reclaim_done_req done = { 0, 0 };
	struct rpc_reply rep = { 0 };
	uint64_t *nodeids;
	size_t n;
	int rc;

	pthread_mutex_lock(&lk->seq_mu);
	pthread_mutex_lock(&lk->bg.lock);
	n = snapshot(lk, &v, &nodeids);
	if (n == SIZE_MAX) {
		/* Cannot even list them: every lock is lost. */
		pfs_err("out of memory listing the locks to reclaim");
		while (lk->held) {
			struct held *h = lk->held;
			lk->held = h->next;
			held_free(h);
		}
		n = 0;
	}
	pthread_mutex_unlock(&lk->bg.lock);
	if (n)
		pfs_notice("server restarted: reclaiming %zu lock%s", n, n == 1 ? "" : "s");
	for (size_t i = 0; i < n; i++) {
		rc = rpc_msg(c->rpc, PFS_OP_RECLAIM, lock_req, &v[i], &rep);
		rpc_reply_free(&rep);
		if (rc == 0) {
			done.reclaimed++;
			continue;
		}
		done.lost++;
		pthread_mutex_lock(&lk->bg.lock);
		lose(lk, &v[i], nodeids[i],
		     rc == -ENOLCK ? "the server's grace period is over (or it lost its list of "
				     "lock holders)"
		     : rc == -EAGAIN ? "another client reclaimed a conflicting lock"
				     : strerror(-rc));
		pthread_mutex_unlock(&lk->bg.lock);
	}
	free(v);
	free(nodeids);
	rc = rpc_msg(c->rpc, PFS_OP_RECLAIM_DONE, reclaim_done_req, &done, &rep);
	rpc_reply_free(&rep);
	if (rc < 0 && rc != -ENOSYS)
		pfs_warn("RECLAIM_DONE: %s", strerror(-rc));
	if (n)
		pfs_notice("reclaimed %u of %zu lock%s", done.reclaimed, n, n == 1 ? "" : "s");
	pthread_mutex_lock(&lk->bg.lock);
	/* Another restart meanwhile queued another round: keep the gate. */
	if (!lk->reclaim_pending)
		lk->reclaiming = false;
	bg_wake_all(&lk->bg);
	pthread_mutex_unlock(&lk->bg.lock);
	pthread_mutex_unlock(&lk->seq_mu);
}

static void *locks_main(void *arg)
{
	struct locks *lk = arg;

	pthread_mutex_lock(&lk->bg.lock);
	while (!lk->bg.stop) {
		if (lk->reclaim_pending) {
			lk->reclaim_pending = false;
			pthread_mutex_unlock(&lk->bg.lock);
			reclaim_all(lk);
			pthread_mutex_lock(&lk->bg.lock);
			continue;
		}
		bg_wait(&lk->bg);
	}
	lk->reclaiming = false;
	bg_wake_all(&lk->bg);
	pthread_mutex_unlock(&lk->bg.lock);
	return NULL;
}

/* --- lifetime --- */

int locks_new(struct client *c, struct locks **out)
{
	struct locks *lk = calloc(1, sizeof(*lk));

	if (!lk)
		return -ENOMEM;
	lk->c = c;
	if (bg_init(&lk->bg) < 0) {
		free(lk);
		return -ENOMEM;
	}
	pthread_mutex_init(&lk->seq_mu, NULL);
	*out = lk;
	return 0;
}

int locks_start(struct locks *lk)
{
	return bg_start(&lk->bg, "locks", locks_main, lk);
}

void locks_stop(struct locks *lk)
{
	if (lk)
		bg_stop(&lk->bg);
}

void locks_free(struct locks *lk)
{
	if (!lk)
		return;
	locks_stop(lk);
	while (lk->held) {
		struct held *h = lk->held;
		lk->held = h->next;
		held_free(h);
	}
	bg_fini(&lk->bg);
	pthread_mutex_destroy(&lk->seq_mu);
	free(lk);
}

/* --- connection thread --- */

void locks_connected(struct locks *lk, uint64_t boot_id, uint32_t auth_flags, bool restarted)
{
	pthread_mutex_lock(&lk->bg.lock);
	/* The same coordinator (not restarted: no reclaim) without our
	 * session: it ended (its lease ran out, or the coordinator's cap on
	 * sessions without a connection), and with it every lock it held,
	 * which others may hold now. */
	bool ended = !restarted && !(auth_flags & PFS_AUTH_RESUMED);
	if ((auth_flags & PFS_AUTH_LOCKS_LOST) || ended) {
		struct pfs_lock_req *v;
		uint64_t *nodeids;
		size_t n = snapshot(lk, &v, &nodeids);
		for (size_t i = 0; i < n && n != SIZE_MAX; i++)
			lose(lk, &v[i], nodeids[i],
			     ended ? "the server ended the session that held it (no connection "
				     "for longer than its lease)"
				   : "the server released it after its lock lease without a connection");
		free(v);
		free(nodeids);
	}
	lk->boot = boot_id;
	if (restarted) {
		lk->reclaiming = true;
		lk->reclaim_pending = true;
		bg_wake_all(&lk->bg);
	}
	pthread_mutex_unlock(&lk->bg.lock);
}

void locks_wake_push(struct locks *lk, const uint8_t *payload, size_t len)
{
	struct pfs_lock_wake_push m;

	if (!lk || pfs_dec_lock_wake_push(payload, len, &m) < 0)
		return;
	pthread_mutex_lock(&lk->bg.lock);
	for (struct waiter *w = lk->waiters; w; w = w->next)
		if (pfs_fh_equal(w->fh, &m.fh))
			w->woken = true;
	bg_wake_all(&lk->bg);
	pthread_mutex_unlock(&lk->bg.lock);
}

/* --- FUSE threads --- */

static void intr_cb(fuse_req_t req, void *data)
{
	struct client *c = fuse_req_userdata(req);
	struct locks *lk = c->lk;
	struct waiter *w = data;

	pthread_mutex_lock(&lk->bg.lock);
	w->interrupted = true;
	bg_wake_all(&lk->bg);
	pthread_mutex_unlock(&lk->bg.lock);
}

static void waiter_add(struct locks *lk, fuse_req_t req, struct waiter *w, const struct pfs_fh *fh)
{
	memset(w, 0, sizeof(*w));
	w->fh = fh;
	pthread_mutex_lock(&lk->bg.lock);
	w->next = lk->waiters;
	lk->waiters = w;
	pthread_mutex_unlock(&lk->bg.lock);
	/* Not under bg.lock: the callback runs at once if already interrupted. */
	if (req)
		fuse_req_interrupt_func(req, intr_cb, w);
}

static void waiter_del(struct locks *lk, fuse_req_t req, struct waiter *w)
{
	/* Waits for a running callback (it holds the request's lock). */
	if (req)
		fuse_req_interrupt_func(req, NULL, NULL);
	pthread_mutex_lock(&lk->bg.lock);
	for (struct waiter **pp = &lk->waiters; *pp; pp = &(*pp)->next) {
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	}
	pthread_mutex_unlock(&lk->bg.lock);
}

/* Waits (caller holds bg.lock) until w is woken or interrupted, the module
 * stops, or ms passed. */
static void wait_for(struct locks *lk, struct waiter *w, int64_t ms)
{
	int64_t end = pfs_mono_ms() + ms;

	for (int64_t left = ms; left > 0 && !w->woken && !w->interrupted && !lk->bg.stop;
	     left = end - pfs_mono_ms())
		bg_wait_ns(&lk->bg, left * 1000000);
}

static bool gone(struct locks *lk, struct waiter *w)
{
	return w->interrupted || lk->bg.stop || rpc_is_closing(lk->c->rpc);
}

/* Waits up to ms for a wake-up (takes bg.lock). false: give up (-EINTR). */
static bool wait_retry(struct locks *lk, struct waiter *w, int64_t ms)
{
	pthread_mutex_lock(&lk->bg.lock);
	wait_for(lk, w, ms);
	bool ok = !gone(lk, w);
	pthread_mutex_unlock(&lk->bg.lock);
	return ok;
}

/* Waits (caller holds bg.lock) while a reclaim runs. false: give up (-EINTR). */
static bool wait_reclaim(struct locks *lk, struct waiter *w)
{
	while (lk->reclaiming && !gone(lk, w))
		bg_wait_ns(&lk->bg, LOCKS_GRACE_RETRY_MS * 1000000LL);
	return !gone(lk, w);
}

/* u (the caller's) names an unlock of owner's locks of the kind flock on
 * fh from now until unlocking_end. Before seq_mu, which a reclaim may
 * hold for long: a lock request that comes after this call waits. */
static void unlocking_begin(struct locks *lk, struct unlocking *u, const struct pfs_fh *fh,
			    uint64_t owner, bool flock)
{
	u->fh = fh;
	u->owner = owner;
	u->flock = flock;
	pthread_mutex_lock(&lk->bg.lock);
	u->next = lk->unlocking;
	lk->unlocking = u;
	pthread_mutex_unlock(&lk->bg.lock);
}

/* The unlock u was answered (or failed): the lock requests it held go. */
static void unlocking_end(struct locks *lk, struct unlocking *u)
{
	pthread_mutex_lock(&lk->bg.lock);
	for (struct unlocking **pp = &lk->unlocking; *pp; pp = &(*pp)->next) {
		if (*pp == u) {
			*pp = u->next;
			break;
		}
	}
	bg_wake_all(&lk->bg);
	pthread_mutex_unlock(&lk->bg.lock);
}

/* Waits (caller holds bg.lock) while an unlock of m's owner, kind and
 * file is in flight. false: give up (-EINTR). */
static bool wait_unlocks(struct locks *lk, struct waiter *w, const struct pfs_lock_req *m)
{
	bool flock = m->flags & PFS_LKF_FLOCK;

	for (;;) {
		struct unlocking *u = lk->unlocking;
		while (u && !(u->owner == m->owner && u->flock == flock && pfs_fh_equal(u->fh, &m->fh)))
			u = u->next;
		if (!u || gone(lk, w))
			return !gone(lk, w);
		bg_wait_ns(&lk->bg, LOCKS_GRACE_RETRY_MS * 1000000LL);
	}
}

static int unlock(struct locks *lk, const struct pfs_lock_req *m)
{
	struct rpc_reply rep = { 0 };
	struct unlocking u;
	int rc;

	unlocking_begin(lk, &u, &m->fh, m->owner, m->flags & PFS_LKF_FLOCK);
	pthread_mutex_lock(&lk->seq_mu);
	pthread_mutex_lock(&lk->bg.lock);
	rc = table_apply(lk, m, 0);
	pthread_mutex_unlock(&lk->bg.lock);
	if (rc == 0)
		rc = rpc_msg(lk->c->rpc, PFS_OP_SETLK, lock_req, m, &rep);
	rpc_reply_free(&rep);
	pthread_mutex_unlock(&lk->seq_mu);
	unlocking_end(lk, &u);
	return rc;
}

int locks_setlk(struct locks *lk, fuse_req_t req, struct pfs_lock_req *m, bool sleep,
		uint64_t nodeid)
{
	int64_t grace_end = pfs_mono_ms() + LOCKS_GRACE_WAIT_MS;
	struct waiter w;
	int rc;

	if (m->type == PFS_LK_UN)
		return unlock(lk, m);
	waiter_add(lk, req, &w, &m->fh);
	for (;;) {
		struct rpc_reply rep = { 0 };

		pthread_mutex_lock(&lk->bg.lock);
		if (!wait_reclaim(lk, &w) || !wait_unlocks(lk, &w, m)) {
			pthread_mutex_unlock(&lk->bg.lock);
			rc = -EINTR;
			break;
		}
		w.woken = false;
		pthread_mutex_unlock(&lk->bg.lock);

		if (sleep)
			m->flags |= PFS_LKF_WAIT;
		rc = rpc_msg(lk->c->rpc, PFS_OP_SETLK, lock_req, m, &rep);
		m->flags &= ~(uint32_t)PFS_LKF_WAIT;
		if (rc == 0) {
			pthread_mutex_lock(&lk->bg.lock);
			/* Granted by an instance that restarted since: the
			 * reclaim did not know it; ask the new one. */
			bool stale = rep.boot != lk->boot;
			if (!stale)
				rc = table_apply(lk, m, nodeid);
			pthread_mutex_unlock(&lk->bg.lock);
			rpc_reply_free(&rep);
			if (stale)
				continue;
			break;
		}
		rpc_reply_free(&rep);
		if (rc == -PFS_ST_GRACE) {
			if (pfs_mono_ms() >= grace_end) {
				pfs_warn("the server stayed in its grace period for %d s: giving up "
					 "on a lock", LOCKS_GRACE_WAIT_MS / 1000);
				rc = -ENOLCK;
				break;
			}
			if (!wait_retry(lk, &w, LOCKS_GRACE_RETRY_MS)) {
				rc = -EINTR;
				break;
			}
			continue;
		}
		if (!sleep || (rc != -EAGAIN && rc != -EACCES))
			break;
		if (!wait_retry(lk, &w, (int64_t)(lk->c->lock_retry * 1000))) {
			rc = -EINTR;
			break;
		}
	}
	waiter_del(lk, req, &w);
	return rc;
}

int locks_getlk(struct locks *lk, fuse_req_t req, const struct pfs_lock_req *m,
		struct rpc_reply *rep)
{
	int64_t grace_end = pfs_mono_ms() + LOCKS_GRACE_WAIT_MS;
	struct waiter w;
	int rc;

	waiter_add(lk, req, &w, &m->fh);
	for (;;) {
		pthread_mutex_lock(&lk->bg.lock);
		if (!wait_reclaim(lk, &w)) {
			pthread_mutex_unlock(&lk->bg.lock);
			rc = -EINTR;
			break;
		}
		pthread_mutex_unlock(&lk->bg.lock);
		rc = rpc_msg(lk->c->rpc, PFS_OP_GETLK, lock_req, m, rep);
		if (rc != -PFS_ST_GRACE)
			break;
		if (pfs_mono_ms() >= grace_end) {
			rc = -ENOLCK;
			break;
		}
		if (!wait_retry(lk, &w, LOCKS_GRACE_RETRY_MS)) {
			rc = -EINTR;
			break;
		}
	}
	waiter_del(lk, req, &w);
	return rc;
}

int locks_unlock_owner(struct locks *lk, const struct pfs_creds *cr, const struct pfs_fh *fh,
		       uint64_t owner)
{
	struct pfs_unlock_owner_req m;
	struct rpc_reply rep = { 0 };
	struct unlocking u;
	struct held **pp;
	bool lost = false;
	int rc;

	m.cr = *cr;
	m.fh = *fh;
	m.owner = owner;
	unlocking_begin(lk, &u, fh, owner, false);
	pthread_mutex_lock(&lk->seq_mu);
	pthread_mutex_lock(&lk->bg.lock);
	pp = held_find(lk, fh, owner, false);
	if (pp) {
		struct held *h = *pp;
		lost = h->lost;
		*pp = h->next;
		held_free(h);
	}
	pthread_mutex_unlock(&lk->bg.lock);
	rc = rpc_msg(lk->c->rpc, PFS_OP_UNLOCK_OWNER, unlock_owner_req, &m, &rep);
	rpc_reply_free(&rep);
	pthread_mutex_unlock(&lk->seq_mu);
	unlocking_end(lk, &u);
	return lost ? -EIO : rc;
}
