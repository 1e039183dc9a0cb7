/* session.c: the session table and the lifetime of sessions (attached,
 * lingering, the lock lease, killed, freed), their fids and lock fds, and
 * the lock wake-up fan-out (see session_i.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "podfs/log.h"
#include "podfs/hash.h"
#include "conn_i.h"
#include "handles_i.h"
#include "idtab_i.h"
#include "chunks_i.h"
#include "deleg_i.h"
#include "lockstate_i.h"
#include "revalhold_i.h"
#include "lscache_i.h"
#include "push_i.h"
#include "session_i.h"
#include "slots_i.h"

/* --- table, lifetime (loop thread) --- */

void sessions_init(struct pfsd *d)
{
	htab_init(&d->sessions);
	htab_init(&d->hosts);
	TAILQ_INIT(&d->lingering);
	drc_pool_init(&d->drcpool, d->lim.reply_cache);
}

struct session *session_find(struct pfsd *d, uint64_t client_id)
{
	return IDTAB_FIND(&d->sessions, client_id, struct session, hn, client_id);
}

static uint64_t host_hash(const struct pfs_srckey *k)
{
	return pfs_hash_bytes(k->b, sizeof(k->b), 0);
}

struct hostacct *host_find(struct pfsd *d, const struct sockaddr_storage *from)
{
	struct pfs_srckey k = { 0 };
	uint64_t h;

	pfs_hostkey_of(from, &k);
	h = host_hash(&k);
	for (struct hnode *n = htab_first(&d->hosts, h); n; n = htab_next(n, h)) {
		struct hostacct *ha = container_of(n, struct hostacct, hn);
		if (pfs_srckey_eq(&ha->addr, &k))
			return ha;
	}
	return NULL;
}

/* The account of the host at from (NULL: ::), one more session in it. */
static struct hostacct *host_get(struct pfsd *d, const struct sockaddr_storage *from)
{
	struct sockaddr_storage any = { .ss_family = AF_INET6 };
	struct hostacct *ha;

	if (!from)
		from = &any;
	ha = host_find(d, from);
	if (ha) {
		ha->refs++;
		return ha;
	}
	ha = xcalloc(1, sizeof(*ha));
	pfs_hostkey_of(from, &ha->addr);
	ha->refs = 1;
	STAILQ_INIT(&ha->waitq);
	drc_host_add(&d->drcpool, &ha->drc);
	replylog_host_add(&d->replies, &ha->rl);
	htab_insert(&d->hosts, &ha->hn, host_hash(&ha->addr));
	return ha;
}

struct hostacct *host_most(struct pfsd *d, size_t field)
{
	struct hostacct *most = NULL;
	unsigned top = 0;
	size_t pos = 0;

	for (struct hnode *n = htab_iter(&d->hosts, &pos, NULL); n; n = htab_iter(&d->hosts, &pos, n)) {
		struct hostacct *ha = container_of(n, struct hostacct, hn);
		unsigned v = *(const unsigned *)(const void *)((const char *)ha + field);
		if (!most || v > top) {
			most = ha;
			top = v;
		}
	}
	return most;
}

static void host_put(struct pfsd *d, struct hostacct *ha)
{
	if (--ha->refs)
		return;
	htab_remove(&d->hosts, &ha->hn);
	drc_host_remove(&ha->drc);
	replylog_host_remove(&d->replies, &ha->rl);
	free(ha);
}

/* c is one of s's connections from now on (main or bulk), and counts in
 * its host's connections; conn_unbind undoes it. */
static void conn_bind(struct conn *c, struct session *s)
{
	c->sess = s;
	s->ha->conns++;
}

static void conn_unbind(struct conn *c)
{
	c->sess->ha->conns--;
	c->sess = NULL;
}

struct session *session_new(struct pfsd *d, uint64_t client_id,
			    const struct sockaddr_storage *from)
{
	struct session *s = xcalloc(1, sizeof(*s));

	s->d = d;
	s->ha = host_get(d, from);
	s->client_id = client_id;
	s->since = (int64_t)time(NULL);
	uv_timer_init(&d->loop, &s->linger);
	s->linger.data = s;
	uv_timer_init(&d->loop, &s->lk_linger);
	s->lk_linger.data = s;
	s->open_timers = 2;
	pthread_mutex_init(&s->mu, NULL);
	pthread_mutex_init(&s->lk_mu, NULL);
	htab_init(&s->fids);
	htab_init(&s->locks);
	s->acct = lim_acct_new();
	s->acct->pace = &s->ha->pace;
	s->acct->host_mem = &s->ha->mem;
	drc_init(&s->drc, PFSD_DRC_MAX, &s->ha->drc);
	TAILQ_INIT(&s->inflight);
	STAILQ_INIT(&s->deferred);
	idtab_insert(&d->sessions, &s->hn, client_id);
	s->number = ++d->sessions_made;
	s->islot = interest_slot_alloc(d->it);
	if (s->islot >= 0)
		d->slot_sess[s->islot] = s;
	else
		d->nslotless++;
	return s;
}

static void fid_close(struct session *s, struct fid *f)
{
	if (f->fd >= 0)
		close(f->fd);
	if (f->dfd >= 0) { /* session_fd_take's */
		close(f->dfd);
		lim_fd_give(&s->d->fds);
	}
	pthread_mutex_destroy(&f->dmu);
	free(f);
}

/* Closes l's fd, which drops its locks, and gives back their ranges. */
static void lock_close(struct session *s, struct lockent *l)
{
	close(l->fd);
	session_ranges_give(s, l->ranges.n);
	lkranges_fini(&l->ranges);
}

static void free_cb(uv_handle_t *h)
{
	struct session *s = h->data;
	struct hnode *n;

	if (--s->open_timers)
		return;
	slots_drop(s, 0);
	while ((n = htab_pop(&s->fids))) {
		fid_close(s, container_of(n, struct fid, hn));
		lim_fd_give(&s->d->fds);
	}
	while ((n = htab_pop(&s->locks))) {
		struct lockent *l = container_of(n, struct lockent, hn);
		lock_close(s, l);
		lim_fd_give(&s->d->fds);
		session_lock_wake(s->d, &l->fh);
		free(l);
	}
	/* What it held leaves its host's account with it. */
	atomic_fetch_sub(&s->ha->fids, s->nfids);
	atomic_fetch_sub(&s->ha->locks, s->nlocks);
	drc_fini(&s->drc);
	s->acct->pace = NULL; /* its connections may keep the account */
	conn_acct_leave_host(s->d, s->acct);
	host_put(s->d, s->ha);
	push_drop_queue(s);
	lim_acct_unref(s->acct);
	htab_fini(&s->fids);
	htab_fini(&s->locks);
	pthread_mutex_destroy(&s->mu);
	pthread_mutex_destroy(&s->lk_mu);
	free(s);
}

static void maybe_free(struct session *s)
{
	if (!s->dead || s->refs || s->freeing)
		return;
	s->freeing = true;
	/* No request can register interest any more (refs == 0). Its slot
	 * is cleared by the next tick's sweep (sweep.c), one walk of the
	 * table for all the sessions that ended since. Objects that lost
	 * their last interested session may be in kept listings: a change
	 * beside podfs would no longer be pushed, nor end those listings
	 * (lscache_i.h); the sweep bumps them too. */
	if (s->islot >= 0)
		interest_slot_release(s->d->it, s->islot);
	else if (s->d->nslotless == 0)
		interest_slotless_release(s->d->it);
	/* Closing fds here is cheap (no flush on local filesystems) and keeps
	 * a session's teardown atomic with respect to a reconnect. */
	uv_close((uv_handle_t *)&s->lk_linger, free_cb);
	uv_close((uv_handle_t *)&s->linger, free_cb);
}

/* s is no longer disconnected (or dies): off the lingering list. */
static void unlinger(struct session *s)
{
	if (!s->lingering)
		return;
	TAILQ_REMOVE(&s->d->lingering, s, llink);
	s->d->nlingering--;
	s->ha->lingering--;
	s->lingering = false;
}

/* The session to end early when more than lingering=N wait for their
 * lease: the oldest of the host with the most of them, so that a key
 * holder that leaves sessions behind by the thousand ends its own, not
 * the sessions of hosts that lost their connection for a moment. */
static struct session *linger_victim(struct pfsd *d)
{
	struct hostacct *most = host_most(d, offsetof(struct hostacct, lingering));
	struct session *s;
	TAILQ_FOREACH(s, &d->lingering, llink)
		if (s->ha == most)
			return s;
	return TAILQ_FIRST(&d->lingering);
}

void session_kill(struct session *s)
{
	if (s->dead)
		return;
	s->dead = true;
	unlinger(s);
	htab_remove(&s->d->sessions, &s->hn);
	if (s->islot >= 0)
		s->d->slot_sess[s->islot] = NULL; /* no more pushes */
	else
		s->d->nslotless--;
	uv_timer_stop(&s->linger);
	uv_timer_stop(&s->lk_linger);
	/* An orderly shutdown keeps the list: the clients reclaim after the
	 * restart. Otherwise the session's locks go with it. */
	lockstate_wait_drop_client(s->d->ls, s->client_id);
	if (!s->d->stopping) {
		lockstate_drop_holder(s->d->ls, s->client_id);
		revalhold_drop_client(s->d->rh, s->client_id);
	}
	/* Peers are no longer sent to it; under mu, so that a CHUNK still
	 * running does not offer it again (dispatch_chunks.c). */
	pthread_mutex_lock(&s->mu);
	s->peer_dead = true;
	pthread_mutex_unlock(&s->mu);
	if (s->d->chunks)
		chunks_peer_gone(s->d->chunks, s->client_id);
	if (s->d->deleg)
		deleg_drop_owner(s->d->deleg, s->client_id);
	if (s->conn) {
		conn_unbind(s->conn);
		s->conn = NULL;
	}
	/* Its bulk connections end with it: their requests name its fids. */
	for (struct conn *c = LIST_FIRST(&s->d->conns), *next; c && s->nbulk; c = next) {
		next = LIST_NEXT(c, link);
		if (c->bulk && c->sess == s)
			conn_close(c, "its session ended");
	}
	pfs_debug("session %016llx (%s) dropped", (unsigned long long)s->client_id, s->host);
	maybe_free(s);
}

static void linger_cb(uv_timer_t *t)
{
	struct session *s = t->data;

	pfs_notice("session %016llx of %s expired after %u s", (unsigned long long)s->client_id,
		 s->host, s->d->o.lease);
	session_kill(s);
}

/* The lock lease of a disconnected session ran out: its client process is
 * probably dead (a live one reconnects within seconds), and its locks must
 * not block the other hosts for the whole session lease. Open files stay
 * until the session expires. */
static void lk_linger_cb(uv_timer_t *t)
{
	struct session *s = t->data;
	struct hnode *n;
	unsigned count = 0;

	/* Loop thread: closing a lock fd never blocks on a local disk. */
	struct lockent *gone = NULL;

	pthread_mutex_lock(&s->lk_mu);
	while ((n = htab_pop(&s->locks))) {
		struct lockent *l = container_of(n, struct lockent, hn);
		lock_close(s, l);
		s->nlocks--;
		atomic_fetch_sub(&s->ha->locks, 1);
		lim_fd_give(&s->d->fds);
		/* hn is free once popped: chain through it. */
		l->hn.next = gone ? &gone->hn : NULL;
		gone = l;
		count++;
	}
	pthread_mutex_unlock(&s->lk_mu);
	/* Pushes outside lk_mu: waiters on other hosts retry at once. */
	while (gone) {
		struct lockent *l = gone;
		gone = l->hn.next ? container_of(l->hn.next, struct lockent, hn) : NULL;
		session_lock_wake(s->d, &l->fh);
		free(l);
	}
	lockstate_drop_holder(s->d->ls, s->client_id);
	/* If it comes back after all, it learns that its locks are gone. */
	s->locks_lost = count > 0;
	if (count)
		pfs_notice("session %016llx of %s: released %u lock%s after %u s without a "
			   "connection", (unsigned long long)s->client_id, s->host, count,
			   count == 1 ? "" : "s", s->d->o.lock_lease);
}

void session_attach(struct session *s, struct conn *c, const char *why)
{
	if (s->conn && s->conn != c) {
		s->replacing = true;
		conn_close(s->conn, why);
		s->replacing = false;
	}
	unlinger(s);
	uv_timer_stop(&s->linger);
	uv_timer_stop(&s->lk_linger);
	s->conn = c;
	conn_bind(c, s);
}

void session_attach_bulk(struct session *s, struct conn *c)
{
	conn_bind(c, s);
	s->nbulk++;
}

void session_detach(struct session *s, struct conn *c)
{
	if (c->bulk) {
		s->nbulk--;
		conn_unbind(c);
		return;
	}
	if (s->conn != c)
		return;
	s->conn = NULL;
	conn_unbind(c);
	if (s->d->chunks)
		chunks_peer_away(s->d->chunks, s->client_id);
	if (s->replacing)
		return; /* session_attach attaches the next one now */
	if (s->d->stopping || s->d->o.lease == 0) {
		session_kill(s);
		return;
	}
	uv_timer_start(&s->linger, linger_cb, (uint64_t)s->d->o.lease * 1000, 0);
	if (s->d->o.lock_lease < s->d->o.lease)
		uv_timer_start(&s->lk_linger, lk_linger_cb, (uint64_t)s->d->o.lock_lease * 1000, 0);
	TAILQ_INSERT_TAIL(&s->d->lingering, s, llink);
	s->lingering = true;
	s->ha->lingering++;
	if (++s->d->nlingering > s->d->lim.lingering) {
		struct session *old = linger_victim(s->d);
		pfsd_warn_rl(s->d, "session %016llx of %s expired early: more than lingering=%u "
			     "disconnected sessions", (unsigned long long)old->client_id, old->host,
			     s->d->lim.lingering);
		session_kill(old);
	}
}

void session_ref(struct session *s)
{
	s->refs++;
}

void session_unref(struct session *s)
{
	s->refs--;
	maybe_free(s);
}

void sessions_stop(struct pfsd *d)
{
	struct hnode *n;

	while ((n = htab_any(&d->sessions)))
		session_kill(container_of(n, struct session, hn));
}

void session_lock_wake(struct pfsd *d, const struct pfs_fh *fh)
{
	struct pfs_lock_wake_push m = { .fh = *fh };
	uint8_t buf[PFS_FH_MAX + 8];
	uint64_t ids[64], key;
	struct pfs_wr w;
	size_t n;

	if (d->stopping || !fh->len)
		return;
	pfs_wr_init(&w, buf, sizeof(buf));
	if (pfs_enc_lock_wake_push(&w, &m) < 0)
		return;
	key = handles_key(d->hs, fh);
	do {
		n = lockstate_wait_take(d->ls, key, ids, 64);
		for (size_t i = 0; i < n; i++) {
			struct session *s = session_find(d, ids[i]);
			/* Not ordered after replies, but after the pushes
			 * waiting for them (push_unordered). */
			if (s && !s->dead)
				push_unordered(s, PFS_OP_LOCK_WAKE, buf, w.len);
		}
	} while (n == 64);
}

/* --- limits hit (loop thread) --- */

void session_note_hits(struct session *s, struct conn *c, int32_t status)
{
	unsigned hits = atomic_load_explicit(&s->hits, memory_order_relaxed) & ~s->acct->logged;
	const struct limits *l = &s->d->lim;

	/* Refused by a limit: counted in its host's pace (lim_pace), which
	 * conn_flow consults before reading the host's next requests. */
	if (status == EMFILE || status == ENFILE || status == ENOLCK)
		lim_pace_note(&s->ha->pace, uv_hrtime(), l->refusals);

	if (!s->foreign_logged && atomic_load_explicit(&s->foreign_fh, memory_order_relaxed)) {
		s->foreign_logged = true;
		pfsd_warn_rl(s->d, "session %016llx of %s (%s) sends handles from another handle "
			     "secret: was --state-dir changed, or its directory lost? They answer "
			     "ESTALE (podfs finds its files again by name; older clients must "
			     "remount)", (unsigned long long)s->client_id, c->peer, s->host);
	}
	if (!hits)
		return;
	s->acct->logged |= hits;
	for (unsigned b = 0; b < LIM_NCAPS; b++)
		if (hits & (1u << b))
			s->d->st_hits[b]++;
	if (hits & LIM_OPEN_FILES)
		pfs_notice("session %016llx of %s (%s) reached open-files=%u (its host's "
			   "sessions together): its opens fail with EMFILE",
			   (unsigned long long)s->client_id, c->peer, s->host, l->open_files);
	if (hits & LIM_LOCK_OWNERS)
		pfs_notice("session %016llx of %s (%s) reached lock-owners=%u (its host's "
			   "sessions together): its new locks fail with EMFILE",
			   (unsigned long long)s->client_id, c->peer, s->host, l->lock_owners);
	if (hits & LIM_LOCK_RANGES)
		pfs_notice("session %016llx of %s (%s) reached lock-ranges=%u (its host's "
			   "sessions together): its locks that would hold more byte ranges fail "
			   "with ENOLCK", (unsigned long long)s->client_id, c->peer, s->host,
			   l->lock_ranges);
	if (hits & LIM_LOCK_TABLE)
		pfs_warn("session %016llx of %s (%s): the clients' locks hold lock-table=%u byte "
			 "ranges: its locks that would hold more than %u fail with ENOLCK",
			 (unsigned long long)s->client_id, c->peer, s->host, l->lock_table,
			 LIM_LOCK_MIN_SHARE);
	if (hits & LIM_FDS)
		pfs_warn("session %016llx of %s (%s): the %zu file descriptors for clients' "
			 "files are all in use (fd-reserve=%u of %zu kept back): opens fail with "
			 "EMFILE", (unsigned long long)s->client_id, c->peer, s->host,
			 l->fd_budget, l->fd_reserve, l->nofile);
}

/* --- the fds of sessions' files (any thread) --- */

/* Takes one of the daemon's fds for sessions' files; under pressure the
 * handle cache gives back what they need. Returns false when the budget
 * is spent. */
bool session_fd_take(struct session *s)
{
	struct pfsd *d = s->d;

	if (!lim_fd_take(&d->fds, d->lim.fd_budget))
		return false;
	size_t room = lim_hcache_room(&d->lim, atomic_load_explicit(&d->fds, memory_order_relaxed));
	if (room < d->lim.hcache_max)
		handles_set_max(d->hs, room);
	return true;
}

/* Notes that s hit cap (logged once, on the loop: server.c). */
static int hit(struct session *s, unsigned cap)
{
	atomic_fetch_or_explicit(&s->hits, cap, memory_order_relaxed);
	return -EMFILE;
}

/* One more of a count of s's host, below max: false (nothing taken) if
 * the host holds max already. */
static bool host_take(_Atomic unsigned *n, unsigned max)
{
	unsigned v = atomic_load(n);

	do {
		if (v >= max)
			return false;
	} while (!atomic_compare_exchange_weak(n, &v, v + 1));
	return true;
}

int session_fid_reserve(struct session *s)
{
	if (!host_take(&s->ha->fids, s->d->lim.open_files))
		return hit(s, LIM_OPEN_FILES);
	if (!session_fd_take(s)) {
		atomic_fetch_sub(&s->ha->fids, 1);
		return hit(s, LIM_FDS);
	}
	pthread_mutex_lock(&s->mu);
	s->nfids++;
	pthread_mutex_unlock(&s->mu);
	return 0;
}

/* Caller holds s->mu. */
static void fid_unreserve_locked(struct session *s)
{
	s->nfids--;
	atomic_fetch_sub(&s->ha->fids, 1);
	lim_fd_give(&s->d->fds);
}

void session_fid_unreserve(struct session *s)
{
	pthread_mutex_lock(&s->mu);
	fid_unreserve_locked(s);
	pthread_mutex_unlock(&s->mu);
}

int session_lock_reserve(struct session *s)
{
	if (!host_take(&s->ha->locks, s->d->lim.lock_owners))
		return hit(s, LIM_LOCK_OWNERS);
	if (!session_fd_take(s)) {
		atomic_fetch_sub(&s->ha->locks, 1);
		return hit(s, LIM_FDS);
	}
	s->nlocks++;
	return 0;
}

void session_lock_unreserve(struct session *s)
{
	s->nlocks--;
	atomic_fetch_sub(&s->ha->locks, 1);
	lim_fd_give(&s->d->fds);
}

/* --- fids (any thread) --- */

static struct fid *fid_find(struct session *s, uint64_t id)
{
	return IDTAB_FIND(&s->fids, id, struct fid, hn, id);
}

struct fid *session_fid_get(struct session *s, uint64_t id)
{
	struct fid *f;

	pthread_mutex_lock(&s->mu);
	f = fid_find(s, id);
	if (f)
		f->refs++;
	pthread_mutex_unlock(&s->mu);
	return f;
}

struct fid *session_fid_install(struct session *s, uint64_t id, int fd, bool is_dir, int flags,
				bool replace)
{
	struct fid *f = xcalloc(1, sizeof(*f)), *old, *close_now = NULL;

	f->id = id;
	f->fd = fd;
	f->dfd = -1;
	f->is_dir = is_dir;
	f->flags = flags;
	f->refs = 2; /* table + caller */
	f->in_table = true;
	pthread_mutex_init(&f->dmu, NULL);

	pthread_mutex_lock(&s->mu);
	old = fid_find(s, id);
	if (old && !replace) {
		old->refs++;
		fid_unreserve_locked(s);
		pthread_mutex_unlock(&s->mu);
		f->refs = 0;
		fid_close(s, f);
		return old;
	}
	if (old) {
		htab_remove(&s->fids, &old->hn);
		old->in_table = false;
		fid_unreserve_locked(s); /* the new one takes its place */
		if (--old->refs == 0)
			close_now = old;
	}
	idtab_insert(&s->fids, &f->hn, id);
	pthread_mutex_unlock(&s->mu);
	if (close_now)
		fid_close(s, close_now);
	return f;
}

void session_fid_put(struct session *s, struct fid *f)
{
	bool last;

	if (!f)
		return;
	pthread_mutex_lock(&s->mu);
	last = --f->refs == 0;
	pthread_mutex_unlock(&s->mu);
	if (last)
		fid_close(s, f);
}

bool session_fid_release(struct session *s, uint64_t id)
{
	struct fid *f;
	bool last = false;

	pthread_mutex_lock(&s->mu);
	f = fid_find(s, id);
	if (f) {
		htab_remove(&s->fids, &f->hn);
		f->in_table = false;
		fid_unreserve_locked(s);
		last = --f->refs == 0;
	}
	pthread_mutex_unlock(&s->mu);
	if (last)
		fid_close(s, f);
	return f != NULL;
}

/* --- locks (caller holds s->lk_mu) --- */

static uint64_t lock_hash(uint64_t owner, bool flock, const struct pfs_fh *fh)
{
	return pfs_hash_bytes(fh->data, fh->len, owner * 2 + flock);
}

struct lockent *session_lock_find(struct session *s, uint64_t owner, bool flock,
				  const struct pfs_fh *fh)
{
	uint64_t h = lock_hash(owner, flock, fh);

	for (struct hnode *n = htab_first(&s->locks, h); n; n = htab_next(n, h)) {
		struct lockent *l = container_of(n, struct lockent, hn);
		if (l->owner == owner && l->flock == flock && l->fh.len == fh->len &&
		    memcmp(l->fh.data, fh->data, fh->len) == 0)
			return l;
	}
	return NULL;
}

struct lockent *session_lock_add(struct session *s, uint64_t owner, bool flock,
				 const struct pfs_fh *fh, int fd)
{
	struct lockent *l = xcalloc(1, sizeof(*l));

	l->owner = owner;
	l->flock = flock;
	l->fd = fd;
	l->fh = *fh;
	htab_insert(&s->locks, &l->hn, lock_hash(owner, flock, fh));
	return l;
}

void session_lock_del(struct session *s, struct lockent *l)
{
	htab_remove(&s->locks, &l->hn);
	lock_close(s, l);
	session_lock_unreserve(s);
	free(l);
}

int session_ranges_take(struct session *s, size_t n)
{
	const struct limits *lim = &s->d->lim;
	size_t host = atomic_fetch_add(&s->ha->ranges, n) + n, all;

	if (host > lim->lock_ranges) {
		atomic_fetch_sub(&s->ha->ranges, n);
		hit(s, LIM_LOCK_RANGES);
		return -ENOLCK;
	}
	all = atomic_fetch_add(&s->d->lock_ranges, n) + n;
	if (all > lim->lock_table && host > LIM_LOCK_MIN_SHARE) {
		atomic_fetch_sub(&s->d->lock_ranges, n);
		atomic_fetch_sub(&s->ha->ranges, n);
		hit(s, LIM_LOCK_TABLE);
		return -ENOLCK;
	}
	s->nranges += n;
	return 0;
}

void session_ranges_give(struct session *s, size_t n)
{
	s->nranges -= n;
	atomic_fetch_sub(&s->ha->ranges, n);
	atomic_fetch_sub(&s->d->lock_ranges, n);
}
