/* lsfetch.c: fetching directory listings, now and ahead of a walk (see
 * lsfetch_i.h). */
#include "lsfetch_i.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bg_i.h"
#include "cache_i.h"
#include "client_i.h"
#include "gate_i.h"
#include "killable_i.h"
#include "listing_i.h"
#include "lsqueue_i.h"
#include "podfs/clock.h"
#include "podfs/log.h"
#include "rpc_i.h"
#include "transport_i.h"
#include "trust_i.h"

/* ls_ahead of an inode (under bg.lock). */
enum { AHEAD_NONE, AHEAD_QUEUED, AHEAD_FETCHING };

/* Directories at most this big (st_size) are fetched ahead: those a
 * READDIR lists whole (ops_i.h's LIST_DIR_MAX_SIZE, which this file,
 * below the ops, cannot include). */
#define LSF_DIR_MAX (64u * 1024)

/* A directory whose listing was fetched ahead, kept for the walk. */
struct parked {
	struct inode *ip; /* one lookup held */
	int64_t at;
};

/* Subdirectories of one listing fetched ahead that are queued in turn,
 * at most (the queue keeps those the walk meets first anyway). */
#define LSF_SUBDIRS 64
/* Directories asked for in one LISTDIRS, at most, and listings it may
 * bring with their subdirectories'. */
#define LSF_BATCH 16
#define LSF_DESCEND 64
_Static_assert(LSF_CREDIT_RESUME >= 1 && LSF_CREDIT_RESUME <= LSF_CREDIT_MAX, "resume");
_Static_assert(LSF_BATCH <= PFS_LISTDIRS_MAX && LSF_DESCEND <= PFS_LISTDIRS_ITEMS_MAX &&
		       LSF_BATCH <= LSF_DESCEND,
	       "a batch fits one LISTDIRS");

struct lsfetch {
	struct client *c;
	struct bg bg;           /* lock: everything below, and every ls_ahead */
	pthread_cond_t done;    /* a fetch ahead ended (CLOCK_MONOTONIC) */
	struct lsqueue q;       /* the directories queued (lsqueue_i.h) */
	struct parked park[LSF_PARK_MAX]; /* a ring, oldest at ptail */
	size_t ptail, np;
	unsigned credit;        /* fetches ahead the walk's pace allows now */
	atomic_bool started;    /* its threads run */
	_Atomic uint64_t nahead; /* st.ahead, counted without the lock */
	_Atomic uint64_t nlisted; /* st.listed */
	struct lsfetch_stats st;
};

int lsfetch_new(struct client *c, struct lsfetch **out)
{
	struct lsfetch *lf = calloc(1, sizeof(*lf));

	if (!lf)
		return -ENOMEM;
	lf->c = c;
	lf->credit = LSF_CREDIT_MAX;
	if (bg_init(&lf->bg) < 0) {
		free(lf);
		return -ENOMEM;
	}
	if (pfs_cond_init_mono(&lf->done) != 0) {
		bg_fini(&lf->bg);
		free(lf);
		return -ENOMEM;
	}
	*out = lf;
	return 0;
}

/* When and by whom dir's listing is asked for, taken before the request
 * is sent. */
static void info_now(struct lsfetch *lf, struct inode *dir, const struct pfs_creds *cr,
		     struct listing_info *li)
{
	struct client *c = lf->c;

	li->any = inode_own_snap(c->it, &li->own_ns);
	li->ns = listing_gen(dir);
	li->seq = gate_seq(c->gate);
	li->uid = cr->uid;
	li->gid = cr->gid;
	li->cookies = transport_list_cookies(c->tr);
}

/* Keeps the LISTDIR reply buf[len] (malloc'd, taken) as dir's listing,
 * fetched as li says; returns true if kept. An incomplete or malformed
 * listing makes dir listed name by name from now on; another failure
 * too unless ahead (the walk's own request decides again). */
static bool keep(struct lsfetch *lf, struct inode *dir, uint8_t *buf, size_t len,
		 const struct listing_info *li, bool ahead)
{
	struct client *c = lf->c;
	int rc;

	if (li->cookies != transport_list_cookies(c->tr)) {
		free(buf); /* a reconnect to a server of the other format */
		return false;
	}
	if (len < 4 || !(buf[0] & PFS_LS_COMPLETE)) {
		free(buf);
		listing_drop(dir); /* not again */
		return false;
	}
	rc = listing_set(c->it, dir, buf, len, li);
	if (rc == 0) /* the daemon opened and read it with the caller's ids */
		inode_note_reader(dir, li->uid, li->gid);
	if (rc == -EBADMSG)
		pfs_warn("malformed LISTDIR reply from the server");
	if (rc < 0 && rc != -ESTALE && (!ahead || rc == -EBADMSG))
		listing_drop(dir);
	return rc == 0;
}

/* The fetch itself (LISTDIR), on the calling thread. ahead: for the
 * queue (no contents; see keep). */
static bool fetch(struct lsfetch *lf, struct inode *dir, const struct pfs_creds *cr,
		  uint32_t max_inline, bool ahead)
{
	struct client *c = lf->c;
	struct pfs_listdir_req m;
	struct rpc_reply rep = { 0 };
	struct listing_info li;

	m.cr = *cr;
	m.fh = dir->fh;
	m.max_inline = max_inline;
	m.max_bytes = PFS_MAX_IO;
	info_now(lf, dir, cr, &li);
	atomic_fetch_add(&lf->nlisted, 1);
	int rc = rpc_msg(c->rpc, PFS_OP_LISTDIR, listdir_req, &m, &rep);
	if (rc == -ENOSYS) {
		pfs_info("server has no LISTDIR: lookups name by name");
		cache_set_nosys(c->cache, PFS_OP_LISTDIR);
		return false;
	}
	if (rc < 0) {
		if (!ahead)
			listing_drop(dir); /* not again */
		return false;
	}
	return keep(lf, dir, rep.buf, rep.len, &li, ahead);
}

/* A subdirectory the daemon listed on its way down (LISTDIRS): kept as
 * its listing if nobody else fetches it, no own change was made since
 * the request was sent (base->any: then no directory's ls_gen moved
 * either), and it needs one. Returns its inode (one lookup held, to
 * park) if kept, else NULL. */
static struct inode *keep_below(struct lsfetch *lf, const struct pfs_entry *e, uint8_t *buf,
				size_t len, const struct listing_info *base)
{
	struct client *c = lf->c;
	struct listing_info li = *base;
	uint64_t ns;
	struct inode *ip;
	bool kept = false;

	if (inode_own_snap(c->it, &ns) != base->any || !(ip = inode_hold_entry(c->it, e))) {
		free(buf);
		return NULL;
	}
	pthread_mutex_lock(&lf->bg.lock);
	bool mine = ip->ls_ahead == AHEAD_NONE;
	if (mine)
		ip->ls_ahead = AHEAD_FETCHING;
	pthread_mutex_unlock(&lf->bg.lock);
	if (mine && listing_may_fetch(ip, LSF_DIR_MAX)) {
		li.ns = listing_gen(ip);
		kept = keep(lf, ip, buf, len, &li, true);
	} else {
		free(buf);
	}
	if (mine) {
		pthread_mutex_lock(&lf->bg.lock);
		ip->ls_ahead = AHEAD_NONE;
		pthread_cond_broadcast(&lf->done);
		pthread_mutex_unlock(&lf->bg.lock);
	}
	if (kept)
		return ip;
	inode_forget(c->it, ip, 1);
	return NULL;
}

/* Fetches ahead with one LISTDIRS the listings of dirs[n] (1 <= n <=
 * LSF_BATCH, all being fetched by this thread, for credentials cr) and
 * of their subdirectories, max_dirs (>= n) in all. Sets answered[i] and
 * kept[i] for dirs[i]; the subdirectories' listings kept go to below[]
 * (*nbelow of them, at most max_dirs - n, each inode held). Returns 0,
 * or -errno (-ENOSYS: a daemon without LISTDIRS, remembered). */
static int fetch_batch(struct lsfetch *lf, struct inode **dirs, size_t n,
		       const struct pfs_creds *cr, uint32_t max_dirs, bool *answered,
		       bool *kept, struct inode **below, size_t *nbelow)
{
	struct client *c = lf->c;
	struct listing_info li[LSF_BATCH];
	uint8_t fhs[LSF_BATCH * (PFS_FH_MAX + 2)];
	struct rpc_reply rep = { 0 };
	struct pfs_wr w;
	struct pfs_rd rd;

	*nbelow = 0;
	pfs_wr_init(&w, fhs, sizeof(fhs));
	for (size_t i = 0; i < n; i++) {
		answered[i] = kept[i] = false;
		info_now(lf, dirs[i], cr, &li[i]);
		if (pfs_enc_fh_item(&w, &dirs[i]->fh) < 0)
			return -EINVAL;
	}
	struct pfs_listdirs_req m = { .cr = *cr, .max_bytes = PFS_MAX_IO, .max_dirs = max_dirs,
				      .fhs = { .p = fhs, .len = (uint32_t)w.len } };
	int rc = rpc_msg_heap(c->rpc, PFS_OP_LISTDIRS, listdirs_req, &m, w.len + RPC_SMALL, &rep);
	if (rc == -ENOSYS) {
		pfs_info("server has no LISTDIRS: listings fetched ahead one by one");
		cache_set_nosys(c->cache, PFS_OP_LISTDIRS);
	}
	if (rc < 0)
		return rc;
	pfs_rd_init(&rd, rep.buf, rep.len);
	while (rd.left > 0) {
		struct pfs_entry e;
		uint32_t status;
		struct pfs_bytes b;
		uint8_t *buf;
		size_t i;
		if (!pfs_get_ENTRY(&rd, &e) || !pfs_get_U32(&rd, &status) ||
		    !pfs_get_BYTES(&rd, &b)) {
			pfs_warn("malformed LISTDIRS reply from the server");
			break;
		}
		atomic_fetch_add(&lf->nlisted, 1);
		for (i = 0; i < n && !pfs_fh_equal(&e.fh, &dirs[i]->fh); i++)
			;
		if (i < n)
			answered[i] = true;
		if (status != 0 || (i == n && *nbelow + n >= max_dirs) ||
		    !(buf = malloc(b.len ? b.len : 1)))
			continue;
		memcpy(buf, b.p, b.len);
		if (i < n)
			kept[i] = keep(lf, dirs[i], buf, b.len, &li[i], true);
		else if ((below[*nbelow] = keep_below(lf, &e, buf, b.len, &li[0])) != NULL)
			(*nbelow)++;
	}
	rpc_reply_free(&rep);
	return 0;
}

/* Waits (bg.lock held) while dir's listing is being fetched ahead, and
 * takes it off the queue if it is only queued. Returns true if dir was
 * queued or fetched ahead. A caller being killed stops waiting. */
static bool settle_locked(struct lsfetch *lf, struct inode *dir)
{
	bool was = dir->ls_ahead != AHEAD_NONE;

	if (dir->ls_ahead == AHEAD_QUEUED) {
		/* Its queue item is skipped (and its lookup given back) by
		 * whoever takes it off the ring. */
		dir->ls_ahead = AHEAD_NONE;
		lf->st.taken++;
		return true;
	}
	if (dir->ls_ahead == AHEAD_FETCHING)
		lf->st.waited++;
	while (dir->ls_ahead == AHEAD_FETCHING) {
		struct timespec slice = pfs_deadline_ns((int64_t)KILLABLE_POLL_MS * 1000000);
		if (pthread_cond_timedwait(&lf->done, &lf->bg.lock, &slice) != ETIMEDOUT)
			continue;
		pthread_mutex_unlock(&lf->bg.lock);
		bool give_up = killable_poll() == KILLABLE_GIVE_UP;
		pthread_mutex_lock(&lf->bg.lock);
		if (give_up)
			break;
	}
	return was;
}

/* The fetch of a FUSE request, after settle_locked: while it runs, dir
 * counts as being fetched (others wait for it, and nothing queues it
 * again meanwhile). always: even if dir was neither queued nor fetched
 * ahead. */
static void fetch_now(struct lsfetch *lf, struct inode *dir, const struct pfs_creds *cr,
		      uint32_t max_inline, bool always, bool no_trace)
{
	pthread_mutex_lock(&lf->bg.lock);
	bool was = settle_locked(lf, dir);
	bool mine = (was || always) && dir->ls_ahead == AHEAD_NONE;
	if (mine)
		dir->ls_ahead = AHEAD_FETCHING;
	pthread_mutex_unlock(&lf->bg.lock);
	/* The caller chose to list dir (its size among the rest; a request
	 * holds listing_fetch_begin): only a listing that came meanwhile,
	 * or a refusal, spares the fetch. */
	if ((was || always) && listing_missing(dir))
		(void)fetch(lf, dir, cr, max_inline, no_trace);
	if (!mine)
		return;
	pthread_mutex_lock(&lf->bg.lock);
	dir->ls_ahead = AHEAD_NONE;
	pthread_cond_broadcast(&lf->done);
	pthread_mutex_unlock(&lf->bg.lock);
}

void lsfetch_now(struct lsfetch *lf, struct inode *dir, const struct pfs_creds *cr,
		 uint32_t max_inline)
{
	fetch_now(lf, dir, cr, max_inline, true, false);
}

void lsfetch_open(struct lsfetch *lf, struct inode *dir, const struct pfs_creds *cr)
{
	fetch_now(lf, dir, cr, 0, true, true);
}

bool lsfetch_pending(struct inode *dir)
{
	return atomic_load_explicit(&dir->ls_ahead, memory_order_relaxed) != AHEAD_NONE;
}

void lsfetch_settle(struct lsfetch *lf, struct inode *dir, const struct pfs_creds *cr)
{
	fetch_now(lf, dir, cr, 0, false, false);
}

void lsfetch_walked(struct lsfetch *lf)
{
	pthread_mutex_lock(&lf->bg.lock);
	lf->credit += LSF_CREDIT_STEP;
	if (lf->credit > LSF_CREDIT_MAX)
		lf->credit = LSF_CREDIT_MAX;
	if (lf->q.n && lf->credit >= LSF_CREDIT_RESUME)
		bg_wake(&lf->bg);
	pthread_mutex_unlock(&lf->bg.lock);
}

/* An item leaves the ring unfetched: its inode is no longer queued
 * (unless another item queued it again: then that one's state is left
 * alone, see lsfetch_ahead). bg.lock held. */
static void unqueue(struct lsfetch *lf, const struct lsq_item *it)
{
	if (!it->ip) {
		lf->st.dropped++;
	} else if (it->ip->ls_ahead == AHEAD_QUEUED) {
		it->ip->ls_ahead = AHEAD_NONE;
		lf->st.dropped++;
	}
}

/* Whether listings may be queued now. */
static bool may_queue(struct lsfetch *lf)
{
	struct client *c = lf->c;

	return atomic_load(&lf->started) && rpc_is_up(c->rpc) &&
	       !cache_nosys(c->cache, PFS_OP_LISTDIR) &&
	       listing_bytes(c->it) < LISTING_TOTAL_MAX / LSF_LISTING_SHARE;
}

/* Puts *it on the queue by its key (bg.lock held; lsq_push): if the
 * queue was full, the item of the lowest key made room (it, if its key is
 * the lowest), and is returned in *old (its lookup, if any, to give back).
 * Returns true if there was an old one. */
static bool push_locked(struct lsfetch *lf, const struct lsq_item *it, struct lsq_item *old)
{
	enum lsq_pushed r = lsq_push(&lf->q, it, old);

	if (r == LSQ_REFUSED) {
		lf->st.dropped++;
		return true;
	}
	if (r == LSQ_PUSHED_OUT)
		unqueue(lf, old);
	if (it->ip)
		it->ip->ls_ahead = AHEAD_QUEUED;
	if (lf->credit >= LSF_CREDIT_RESUME)
		bg_wake(&lf->bg);
	return r == LSQ_PUSHED_OUT;
}

void lsfetch_ahead(struct lsfetch *lf, struct inode **ips, size_t n, const struct pfs_creds *cr,
		   struct lsfetch_order *ord)
{
	struct client *c = lf->c;
	bool room = may_queue(lf);
	struct lsq_item it = { .at = pfs_mono_ns(), .cr = *cr }, old;
	struct lsfetch_order one = { 0, 0 };
	uint64_t base;
	uint32_t first;

	if (!ord)
		ord = &one;
	pthread_mutex_lock(&lf->bg.lock);
	if (ord->base == 0 || ord->next + n >= LSQ_STRIDE) {
		ord->base = lsq_new_base(&lf->q);
		ord->next = 0;
	}
	base = ord->base;
	first = ord->next;
	ord->next += (uint32_t)n;
	pthread_mutex_unlock(&lf->bg.lock);
	/* The last one first: the first ends on top, also when they are
	 * the batch's first. */
	for (size_t i = n; i-- > 0;) {
		bool want = room && listing_may_fetch(ips[i], LSF_DIR_MAX);
		bool full = false;

		pthread_mutex_lock(&lf->bg.lock);
		if (want && !lf->bg.stop && ips[i]->ls_ahead == AHEAD_NONE) {
			it.ip = ips[i];
			it.key = lsq_key(base, first + (uint32_t)i);
			full = push_locked(lf, &it, &old);
			want = true;
		} else {
			want = false;
		}
		pthread_mutex_unlock(&lf->bg.lock);
		if (!want)
			inode_forget(c->it, ips[i], 1);
		if (full && old.ip)
			inode_forget(c->it, old.ip, 1);
	}
}

/* Whether the directory of entry e needs its listing fetched: its inode
 * does not exist yet, or may fetch one (inode_with's callback). */
struct need {
	bool no;
};
static void need_cb(void *arg, struct inode *ip)
{
	struct need *nd = arg;
	nd->no = !listing_may_fetch(ip, LSF_DIR_MAX);
}

/* Queues the directories of entries e[n] that need a listing, the i-th
 * with the key of index first + i of the batch of base. */
static void queue_entries(struct lsfetch *lf, const struct pfs_entry *e, size_t n,
			  const struct pfs_creds *cr, uint64_t base, uint32_t first)
{
	struct client *c = lf->c;
	struct lsq_item it = { .ip = NULL, .at = pfs_mono_ns(), .cr = *cr }, old;

	for (size_t i = n; i-- > 0;) {
		struct need nd = { false };
		(void)inode_with(c->it, &e[i].fh, need_cb, &nd);
		if (nd.no)
			continue;
		it.e = e[i];
		it.key = lsq_key(base, first + (uint32_t)i);
		pthread_mutex_lock(&lf->bg.lock);
		bool full = !lf->bg.stop && push_locked(lf, &it, &old);
		pthread_mutex_unlock(&lf->bg.lock);
		if (full && old.ip)
			inode_forget(c->it, old.ip, 1);
	}
}

/* A new batch's base. */
static uint64_t new_base(struct lsfetch *lf)
{
	pthread_mutex_lock(&lf->bg.lock);
	uint64_t base = lsq_new_base(&lf->q);
	pthread_mutex_unlock(&lf->bg.lock);
	return base;
}

void lsfetch_walk_on(struct lsfetch *lf, struct inode *dir, struct inode *ip, const char *name,
		     const struct pfs_creds *cr)
{
	struct lsfetch_order ord = { new_base(lf), 0 };
	struct pfs_entry *e = malloc(LSF_WALK_ON * sizeof(*e));
	size_t n = 0;

	lsfetch_ahead(lf, &ip, 1, cr, &ord);
	if (e && may_queue(lf))
		n = listing_subdirs_next(dir, name, LSF_WALK_ON, LSF_DIR_MAX, e, LSF_WALK_ON);
	queue_entries(lf, e, n, cr, ord.base, 1);
	free(e);
}

/* dir's listing was fetched ahead: its subdirectories are queued in
 * turn, and dir is parked, its lookup held for the walk. */
static void fetched_ahead(struct lsfetch *lf, struct inode *dir, const struct pfs_creds *cr)
{
	struct client *c = lf->c;
	struct pfs_entry *e = malloc(LSF_SUBDIRS * sizeof(*e));
	size_t n = 0;

	if (e && may_queue(lf))
		n = listing_subdirs(dir, LSF_DIR_MAX, e, LSF_SUBDIRS);
	queue_entries(lf, e, n, cr, new_base(lf), 0);
	free(e);

	struct inode *gone = NULL;
	pthread_mutex_lock(&lf->bg.lock);
	if (lf->np == LSF_PARK_MAX) {
		gone = lf->park[lf->ptail].ip;
		lf->ptail = (lf->ptail + 1) % LSF_PARK_MAX;
		lf->np--;
	}
	lf->park[(lf->ptail + lf->np) % LSF_PARK_MAX] = (struct parked){ dir, pfs_mono_ns() };
	lf->np++;
	pthread_mutex_unlock(&lf->bg.lock);
	if (gone)
		inode_forget(c->it, gone, 1);
}

/* Gives back the parked lookups older than LSF_PARK_NS (all with
 * everything), bg.lock held (released meanwhile). Returns the ns until
 * the next one is due, or -1 if none is parked. */
static int64_t unpark_locked(struct lsfetch *lf, bool everything)
{
	for (;;) {
		if (lf->np == 0)
			return -1;
		struct parked *p = &lf->park[lf->ptail];
		int64_t due = p->at + LSF_PARK_NS - pfs_mono_ns();
		if (!everything && due > 0)
			return due;
		struct inode *ip = p->ip;
		lf->ptail = (lf->ptail + 1) % LSF_PARK_MAX;
		lf->np--;
		pthread_mutex_unlock(&lf->bg.lock);
		inode_forget(lf->c->it, ip, 1);
		pthread_mutex_lock(&lf->bg.lock);
	}
}

/* Gives k credits back (bg.lock held): those of fetches that did not
 * happen. At most LSF_CREDIT_MAX are banked, as lsfetch_walked keeps. */
static void refund_locked(struct lsfetch *lf, unsigned k)
{
	lf->credit = lf->credit + k > LSF_CREDIT_MAX ? LSF_CREDIT_MAX : lf->credit + k;
}

/* Takes the next item to fetch ahead off the ring (bg.lock held,
 * released meanwhile to make an item's inode; credit > 0): returns true
 * with *it, its inode held and marked being fetched, and one credit
 * spent; false if the top item is not one (dropped, or for other
 * credentials than cr, if not NULL: left on the ring, *stop set). The
 * credit is spent before the lock is released: other threads take items
 * meanwhile, and a credit checked before it was released may be gone
 * after (the unsigned count went below zero, and every queued listing
 * was fetched ahead). */
static bool take_locked(struct lsfetch *lf, const struct pfs_creds *cr, struct lsq_item *it,
			bool *stop)
{
	struct client *c = lf->c;

	*stop = false;
	if (cr && !pfs_creds_equal(&lsq_top(&lf->q)->cr, cr)) {
		*stop = true;
		return false;
	}
	*it = lsq_pop_top(&lf->q);
	bool go = !it->ip || it->ip->ls_ahead == AHEAD_QUEUED;
	if (go && pfs_mono_ns() - it->at > LSF_MAX_AGE_NS) {
		unqueue(lf, it);
		go = false;
	}
	if (go) {
		lf->credit--;
		if (!it->ip) {
			/* Met in a listing fetched ahead: its inode now. */
			pthread_mutex_unlock(&lf->bg.lock);
			it->ip = inode_hold_entry(c->it, &it->e);
			pthread_mutex_lock(&lf->bg.lock);
			go = it->ip && it->ip->ls_ahead == AHEAD_NONE;
			if (!go)
				refund_locked(lf, 1);
		}
	}
	if (!go) {
		if (it->ip) {
			pthread_mutex_unlock(&lf->bg.lock);
			inode_forget(c->it, it->ip, 1);
			pthread_mutex_lock(&lf->bg.lock);
		}
		return false;
	}
	it->ip->ls_ahead = AHEAD_FETCHING;
	return true;
}

static void *ahead_main(void *arg)
{
	struct lsfetch *lf = arg;
	struct client *c = lf->c;
	struct lsq_item *b = malloc(LSF_BATCH * sizeof(*b));

	pthread_mutex_lock(&lf->bg.lock);
	while (b && !lf->bg.stop) {
		int64_t due = unpark_locked(lf, false);
		if (lf->q.n == 0 || lf->credit < LSF_CREDIT_RESUME) {
			if (due > 0)
				bg_wait_ns(&lf->bg, due);
			else
				bg_wait(&lf->bg);
			continue;
		}
		/* The most recently queued first, as many as one request may
		 * carry (LISTDIRS), for one caller's credentials; the daemon
		 * adds their subdirectories, in the walk's order, as far as
		 * the walk's pace allows. */
		size_t nb = 0, max = cache_nosys(c->cache, PFS_OP_LISTDIRS) ? 1 : LSF_BATCH;
		bool stop = false;
		while (nb < max && lf->q.n > 0 && lf->credit > 0 && !stop && !lf->bg.stop)
			if (take_locked(lf, nb ? &b[0].cr : NULL, &b[nb], &stop))
				nb++;
		if (nb == 0)
			continue;
		pthread_mutex_unlock(&lf->bg.lock);

		/* Those that still need their listing (a request may have
		 * fetched one since it was queued) are asked for, with as
		 * many of their subdirectories as the walk's pace allows. */
		struct inode *dirs[LSF_BATCH], *ask[LSF_BATCH], *below[LSF_DESCEND];
		bool kept[LSF_BATCH], got[LSF_BATCH], answered[LSF_BATCH], done[LSF_BATCH];
		size_t na = 0, nbelow = 0, idx[LSF_BATCH];
		bool up = rpc_is_up(c->rpc);
		for (size_t i = 0; i < nb; i++) {
			dirs[i] = b[i].ip;
			kept[i] = false;
			done[i] = true;
			if (up && listing_may_fetch(dirs[i], LSF_DIR_MAX)) {
				atomic_fetch_add(&lf->nahead, 1);
				idx[na] = i;
				ask[na++] = dirs[i];
			}
		}
		int r = -ENOSYS;
		if (na > 0 && !cache_nosys(c->cache, PFS_OP_LISTDIRS)) {
			pthread_mutex_lock(&lf->bg.lock);
			uint32_t extra = lf->credit < LSF_DESCEND - na ? lf->credit
								     : (uint32_t)(LSF_DESCEND - na);
			lf->credit -= extra;
			pthread_mutex_unlock(&lf->bg.lock);
			r = fetch_batch(lf, ask, na, &b[0].cr, (uint32_t)na + extra, answered, got,
					below, &nbelow);
			pthread_mutex_lock(&lf->bg.lock);
			refund_locked(lf, extra - (uint32_t)nbelow);
			pthread_mutex_unlock(&lf->bg.lock);
			atomic_fetch_add(&lf->nahead, nbelow);
		}
		if (na > 0 && r == -ENOSYS) {
			got[0] = fetch(lf, ask[0], &b[0].cr, 0, true);
			answered[0] = true;
			for (size_t k = 1; k < na; k++)
				answered[k] = false;
			r = 0;
		}
		for (size_t k = 0; k < na; k++) {
			/* A failed request: nothing of it is asked again. */
			done[idx[k]] = r < 0 || answered[k];
			kept[idx[k]] = r == 0 && answered[k] && got[k];
		}
		pthread_mutex_lock(&lf->bg.lock);
		for (size_t i = 0; i < nb; i++)
			dirs[i]->ls_ahead = AHEAD_NONE;
		pthread_cond_broadcast(&lf->done);
		/* Those the daemon had no room for go back on top. */
		for (size_t i = nb; i-- > 0;) {
			struct lsq_item old;
			if (done[i])
				continue;
			refund_locked(lf, 1);
			atomic_fetch_sub(&lf->nahead, 1);
			if (!lf->bg.stop && push_locked(lf, &b[i], &old) && old.ip) {
				pthread_mutex_unlock(&lf->bg.lock);
				inode_forget(c->it, old.ip, 1);
				pthread_mutex_lock(&lf->bg.lock);
			} else if (lf->bg.stop) {
				pthread_mutex_unlock(&lf->bg.lock);
				inode_forget(c->it, b[i].ip, 1);
				pthread_mutex_lock(&lf->bg.lock);
			}
		}
		pthread_mutex_unlock(&lf->bg.lock);
		/* The last first: the first one's subdirectories end on top. */
		for (size_t k = nbelow; k-- > 0;)
			fetched_ahead(lf, below[k], &b[0].cr);
		for (size_t i = nb; i-- > 0;) {
			if (!done[i])
				continue;
			if (kept[i])
				fetched_ahead(lf, dirs[i], &b[i].cr);
			else
				inode_forget(c->it, dirs[i], 1);
		}
		pthread_mutex_lock(&lf->bg.lock);
	}
	pthread_mutex_unlock(&lf->bg.lock);
	free(b);
	return NULL;
}

int lsfetch_start(struct lsfetch *lf)
{
	for (unsigned i = 0; i < LSF_THREADS; i++) {
		int rc = bg_start(&lf->bg, "list-ahead", ahead_main, lf);
		if (rc < 0)
			return rc;
	}
	atomic_store(&lf->started, true);
	return 0;
}

void lsfetch_stop(struct lsfetch *lf)
{
	if (!lf)
		return;
	atomic_store(&lf->started, false);
	bg_stop(&lf->bg);
	pthread_mutex_lock(&lf->bg.lock);
	while (lf->q.n) {
		struct lsq_item it = lsq_pop_bottom(&lf->q);
		unqueue(lf, &it);
		if (!it.ip)
			continue;
		pthread_mutex_unlock(&lf->bg.lock);
		inode_forget(lf->c->it, it.ip, 1);
		pthread_mutex_lock(&lf->bg.lock);
	}
	(void)unpark_locked(lf, true);
	pthread_cond_broadcast(&lf->done);
	pthread_mutex_unlock(&lf->bg.lock);
}

void lsfetch_free(struct lsfetch *lf)
{
	if (!lf)
		return;
	lsfetch_stop(lf);
	pthread_cond_destroy(&lf->done);
	bg_fini(&lf->bg);
	free(lf);
}

void lsfetch_get_stats(struct lsfetch *lf, struct lsfetch_stats *st)
{
	pthread_mutex_lock(&lf->bg.lock);
	*st = lf->st;
	pthread_mutex_unlock(&lf->bg.lock);
	st->ahead = atomic_load(&lf->nahead);
	st->listed = atomic_load(&lf->nlisted);
}
