/* dirdeleg_make.c: creates answered under directory delegations: the
 * slots the daemon made ahead, the answer, and the files made under a
 * grant, whose close does not wait for their writes (see dirdeleg_i.h,
 * dirdeleg_base_i.h, docs/delegation.md). */
#include "dirdeleg_i.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "bg_i.h"
#include "client_i.h"
#include "deleg_i.h"
#include "dirdeleg_base_i.h"
#include "gate_i.h"
#include "inode_i.h"
#include "listing_i.h"
#include "podfs/clock.h"
#include "podfs/le.h"
#include "podfs/log.h"
#include "rpc_i.h"
#include "trust_i.h"
#include "wb_i.h"

/* Moves e's made files to mv (bg.lock held); they are no longer
 * covered. On ENOMEM the rest are let go unwaited, with a warning: a
 * wait here, lock held, would deadlock with a write waiting for its
 * file's item. */
void dd_take_made(struct dirdeleg *d, struct ddir *e, struct madev *mv)
{
	unsigned lost = 0;

	for (unsigned i = 0; i < e->nmade; i++) {
		struct inode *ip = e->made[i];
		atomic_store(&ip->dd_cover, 0);
		if (mv->n == mv->cap) {
			size_t cap = mv->cap ? 2 * mv->cap : 64;
			struct inode **v = realloc(mv->v, cap * sizeof(*v));
			if (!v) {
				inode_forget(d->c->it, ip, 1);
				lost++;
				continue;
			}
			mv->v = v;
			mv->cap = cap;
		}
		mv->v[mv->n++] = ip;
	}
	e->nmade = 0;
	if (lost)
		pfs_warn("out of memory: the end of a directory delegation does not wait for the "
			 "writes of %u files made there",
			 lost);
}

/* The end of a delegation: waits for the writes of the files made under
 * it (wait: not when the client is freed), and lets them go. (After a
 * reconnect, on the connection thread, nothing waits: those files go to
 * d->unsettled, which the next RECALL settles.) bg.lock not held. */
void dd_settle(struct dirdeleg *d, struct madev *mv, bool wait)
{
	for (size_t i = 0; i < mv->n; i++) {
		/* Its data, then what was answered of its attributes (an mtime
		 * set after the writes stays); nothing more is answered here:
		 * no recall of the directory covers it any more, and the
		 * daemon has no entry of it to recall. */
		if (wait) {
			(void)wb_wait(d->c->wb, mv->v[i]);
			if (d->c->dl)
				deleg_end(d->c->dl, mv->v[i]);
		}
		inode_forget(d->c->it, mv->v[i], 1);
	}
	free(mv->v);
	mv->v = NULL;
	mv->n = mv->cap = 0;
}

/* Still writing, or attributes answered here not sent: a made file the
 * end of its delegation must wait for. */
static bool still_unsettled(struct dirdeleg *d, struct inode *ip)
{
	return wb_holds(d->c->wb, ip) || (d->c->dl && deleg_has(d->c->dl, ip));
}

/* Drops from e's made files those write-behind and the attribute
 * delegations hold nothing for: a close of them waits for its writes
 * again (bg.lock held). */
void dd_prune_made(struct dirdeleg *d, struct ddir *e)
{
	unsigned k = 0;

	for (unsigned i = 0; i < e->nmade; i++) {
		struct inode *ip = e->made[i];
		atomic_store(&ip->dd_cover, 0);
		if (still_unsettled(d, ip)) {
			atomic_store(&ip->dd_cover, e->grant);
			e->made[k++] = ip;
			continue;
		}
		inode_forget(d->c->it, ip, 1);
	}
	e->nmade = k;
}

void dd_prune_unsettled(struct dirdeleg *d)
{
	struct madev *mv = &d->unsettled;
	size_t k = 0;

	for (size_t i = 0; i < mv->n; i++) {
		struct inode *ip = mv->v[i];
		if (still_unsettled(d, ip))
			mv->v[k++] = ip;
		else
			inode_forget(d->c->it, ip, 1);
	}
	mv->n = k;
}

/* A file made here whose close did not wait for its writes has no
 * attributes to trust while they are on their way: if name in dir is
 * one, waits for them. Returns whether it waited. */
bool dd_writes_settled(struct dirdeleg *d, struct inode *dir, const char *name)
{
	struct client *c = d->c;
	struct pfs_entry pe;
	struct listing_info li;
	uint8_t *data;
	uint32_t dlen, lflags;

	if (listing_find(dir, name, &pe, &data, &dlen, &lflags, &li) != LS_PRESENT)
		return false;
	free(data);
	struct inode *ip = inode_hold_fh(c->it, &pe.fh);
	if (!ip)
		return false;
	bool made = atomic_load(&ip->dd_cover) != 0 &&
		    (atomic_load(&ip->dd_pending) > 0 || wb_holds(c->wb, ip));
	if (made) {
		dirdeleg_wait_made(d, ip); /* its first bytes may ride with it */
		(void)wb_wait(c->wb, ip);
	}
	inode_forget(c->it, ip, 1);
	return made;
}

/* A sender's SLOTS for dir (held) by cr: what comes is kept if dir is
 * still held as of ended (end_all calls). d->ask held, so that a return
 * never overtakes it. */
void dd_get_slots(struct dirdeleg *d, struct inode *dir, const struct pfs_creds *cr,
		      uint64_t ended)
{
	struct client *c = d->c;
	struct pfs_slots_req m = { .cr = *cr, .dir = dir->fh, .count = DD_SLOTS_FIRST };
	struct pfs_slots_rep sr;
	struct rpc_reply rep = { 0 };
	struct pfs_entry got[DD_SLOTS];
	unsigned n = 0;

	/* Few at first (a directory may see one create), more each time. */
	pthread_mutex_lock(&d->bg.lock);
	struct ddir *e = dd_find(d, &dir->fh);
	if (e && e->slot_batches)
		m.count = DD_SLOTS_FIRST << (e->slot_batches < 3 ? e->slot_batches : 3);
	if (m.count > DD_SLOTS)
		m.count = DD_SLOTS;
	pthread_mutex_unlock(&d->bg.lock);

	int rc = rpc_msg(c->rpc, PFS_OP_SLOTS, slots_req, &m, &rep);
	if (rc == 0 && pfs_dec_slots_rep(rep.buf, rep.len, &sr) == 0) {
		struct pfs_rd rd;
		pfs_rd_init(&rd, sr.entries.p, sr.entries.len);
		while (rd.left > 0 && n < DD_SLOTS && pfs_get_ENTRY(&rd, &got[n]) &&
		       S_ISREG(got[n].attr.mode))
			n++;
	}
	rpc_reply_free(&rep);
	pthread_mutex_lock(&d->bg.lock);
	if (rc == -ENOSYS)
		d->no_slots = true;
	e = dd_find(d, &dir->fh);
	if (e) {
		e->slots_asking = false;
		e->slot_batches++;
		/* None (a default ACL there, the session's limit): not asked
		 * again for a while. */
		if (n == 0)
			e->slots_retry_ns = pfs_mono_ns() + DD_RETRY_NS;
		if (!e->held || d->ended != ended || e->rights_moved)
			n = 0; /* the daemon frees them once it sees them unused */
		dd_add_slots(d, e, got, n, cr);
	}
	pthread_cond_broadcast(&d->slots_came);
	pthread_mutex_unlock(&d->bg.lock);
}

void dd_add_slots(struct dirdeleg *d, struct ddir *e, const struct pfs_entry *got, unsigned n,
		  const struct pfs_creds *cr)
{
	if (n && e->nslots && !pfs_creds_equal(&e->scr, cr))
		n = 0; /* the daemon frees them once it sees them unused */
	if (n && !e->slots && !(e->slots = malloc(DD_SLOTS_MAX * sizeof(*e->slots))))
		n = 0;
	for (unsigned i = 0; i < n && e->nslots < DD_SLOTS_MAX; i++)
		e->slots[e->nslots++] = got[i];
	/* The next batch is asked for when half of this one is used: in
	 * time for it to come before the last is (a SLOTS takes about as
	 * long as 8 creates at 2,000 a second), and not at all in the many
	 * directories that get only a few files (a package's). */
	if (n) {
		e->scr = *cr;
		e->slots_low = n / 2;
	}
	d->st.slots += n;
}

bool dd_spare_slots(struct dirdeleg *d, const struct ddir *keep, unsigned more,
		    struct pfs_fh *ret)
{
	unsigned held = 0;
	struct ddir **victim = NULL;

	for (struct ddir **pp = &d->dirs; *pp; pp = &(*pp)->next) {
		struct ddir *x = *pp;
		held += x->nslots;
		if (x == keep || !x->held || !x->nslots)
			continue;
		if (x->nmade)
			dd_prune_made(d, x);
		if (x->err || x->pending || x->nmade)
			continue;
		if (!victim || x->used_ns < (*victim)->used_ns)
			victim = pp;
	}
	if (held + more <= DD_SLOTS_HELD || !victim)
		return false;
	struct ddir *gone = *victim;
	*victim = gone->next;
	*ret = gone->fh;
	free(gone->slots);
	free(gone->made);
	free(gone);
	d->ndirs--;
	return true;
}

/* Queues a SLOTS for e (held, dir) by cr, unless one is on its way
 * (bg.lock held); first the return of a directory whose slots lie idle,
 * if this client holds too many (dd_spare_slots). */
static void want_slots(struct dirdeleg *d, struct ddir *e, struct inode *dir,
		       const struct pfs_creds *cr)
{
	if (e->slots_asking || d->no_slots || d->bg.stop || e->rights_moved ||
	    pfs_mono_ns() < e->slots_retry_ns)
		return;
	struct dask *a = calloc(1, sizeof(*a));
	if (!a)
		return;
	a->has_ret = dd_spare_slots(d, e, DD_SLOTS, &a->ret);
	e->slots_asking = true;
	inode_hold(d->c->it, dir);
	a->dir = dir;
	a->cr = *cr;
	a->slots = true;
	dd_ask(d, a);
}

/* None left in dir, more asked for: waits for them (bg.lock held,
 * dropped meanwhile), DD_SLOTS_WAIT_NS at most. The create the usual way
 * instead would queue at the daemon behind the creates already sent, and
 * its close would wait for a sync there. Returns dir's entry, if any. */
static struct ddir *wait_slots(struct dirdeleg *d, struct inode *dir)
{
	struct timespec ts = pfs_deadline_ns(DD_SLOTS_WAIT_NS);
	struct ddir *e;

	d->st.slot_waits++;
	while ((e = dd_find(d, &dir->fh)) && e->held && !e->nslots && e->slots_asking &&
	       !d->bg.stop)
		if (pthread_cond_timedwait(&d->slots_came, &d->bg.lock, &ts) == ETIMEDOUT) {
			d->st.slot_timeouts++;
			break;
		}
	return e;
}

bool dirdeleg_create(struct dirdeleg *d, struct inode *dir, const char *name, uint32_t perm,
		     const struct pfs_creds *cr, uint64_t fid, uint32_t flags, struct pfs_entry *pe,
		     struct inode **out, int *err)
{
	struct client *c = d->c;
	struct pfs_entry pe0;
	struct listing_info li;
	uint8_t *data;
	uint32_t dlen, lflags;

	bool held;
	*out = NULL;
	pthread_mutex_lock(&d->bg.lock);
	struct ddir *e = dd_enter_dir(d, dir, err, &held);
	if (*err) {
		pthread_mutex_unlock(&d->bg.lock);
		return true;
	}
	/* Another caller's ids than the slots' are another caller's rights:
	 * the usual way. Too few left: more are asked for. */
	bool mine = held && (!e->nslots || pfs_creds_equal(&e->scr, cr));
	if (mine && e->nslots <= e->slots_low)
		want_slots(d, e, dir, cr);
	if (mine && !e->nslots && e->slots_asking) {
		e = wait_slots(d, dir);
		mine = e && e->held && e->nslots && pfs_creds_equal(&e->scr, cr);
	}
	bool ok = mine && e->nslots > 0 && !(perm & ~0777u) && strlen(name) <= PFS_NAME_MAX;
	pthread_mutex_unlock(&d->bg.lock);
	/* The name must be known absent: the listing (coherent under the
	 * delegation: dd_grant_listing) does not have it. */
	if (!ok)
		return false;
	data = NULL;
	int r = listing_find(dir, name, &pe0, &data, &dlen, &lflags, &li);
	if (r == LS_PRESENT)
		free(data);
	if (r != LS_ABSENT)
		return false;

	struct ditem *it = dd_item_new(cr, dir, name);
	if (!it)
		return false;
	it->create = true;
	it->mode = perm;
	it->fid = fid;
	it->flags = flags;

	pthread_mutex_lock(&d->bg.lock);
	while (d->queued + d->inflight >= DD_QUEUE_MAX)
		pthread_cond_wait(&d->idle, &d->bg.lock);
	/* Recalled meanwhile, or the slots went: the usual way. */
	if (!(e = dd_find(d, &dir->fh)) || !e->held || e->err || !e->nslots ||
	    !pfs_creds_equal(&e->scr, cr)) {
		pthread_mutex_unlock(&d->bg.lock);
		free(it);
		return false;
	}
	/* The file as the daemon will make it: the slot's handle, inode
	 * number, owner and group, this host's clock for its times. */
	*pe = e->slots[--e->nslots];
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	struct pfs_attr *a = &pe->attr;
	a->mode = S_IFREG | perm;
	a->nlink = 1;
	a->size = a->blocks = 0;
	a->rdev = 0;
	a->atime_s = a->mtime_s = a->ctime_s = now.tv_sec;
	a->atime_ns = a->mtime_ns = a->ctime_ns = (uint32_t)now.tv_nsec;
	it->slot = pe->fh;
	bool made = false;
	uint64_t any = inode_own_snap(c->it, &it->ns);
	it->seq = gate_seq(c->gate);
	struct inode *file = inode_ref(c->it, pe, &made, 0);
	if (!file || !made) { /* a slot's handle is new: not for us */
		pthread_mutex_unlock(&d->bg.lock);
		if (file)
			inode_forget(c->it, file, 1);
		free(it);
		return false;
	}
	/* Answered: the name joins the listing; the directory changed by
	 * us (its times this host's clock until the daemon's come); the new
	 * file's attributes trusted as made here, until the daemon's. Under
	 * the lock, so that a recall either sees it queued or ended the
	 * delegation first. */
	(void)inode_trust_attr(c->it, file, it->seq, any, it->ns);
	it->at_file = inode_own_local(c->it, file, now.tv_sec, (uint32_t)now.tv_nsec);
	e->at = inode_own_local(c->it, dir, now.tv_sec, (uint32_t)now.tv_nsec);
	if (listing_add(dir, name, pe) < 0)
		listing_touch(dir);
	e->pending++;
	atomic_fetch_add(&file->dd_pending, 1);
	inode_hold(c->it, dir);
	inode_hold(c->it, file);
	it->dir = dir;
	it->file = file;
	/* Covered: its close need not wait for its writes. */
	if (e->nmade == e->made_cap && e->made_cap < DD_MADE_MAX) {
		unsigned cap = e->made_cap ? 2 * e->made_cap : 64;
		struct inode **v = realloc(e->made, cap * sizeof(*v));
		if (v) {
			e->made = v;
			e->made_cap = cap;
		}
	}
	if (e->nmade < e->made_cap) {
		inode_hold(c->it, file);
		e->made[e->nmade++] = file;
		atomic_store(&file->dd_cover, e->grant);
	}
	it->since_ns = pfs_mono_ns();
	it->attr = pe->attr;
	file->dd_item = it;
	dd_enqueue(d, it);
	d->st.creates++;
	pthread_mutex_unlock(&d->bg.lock);
	*out = file; /* with the lookup of inode_ref, for the kernel */
	return true;
}

bool dirdeleg_covers(struct dirdeleg *d, struct inode *ip)
{
	uint64_t g = atomic_load(&ip->dd_cover);

	if (!g)
		return false;
	bool held = false;
	pthread_mutex_lock(&d->bg.lock);
	for (struct ddir *e = d->dirs; e && !held; e = e->next)
		held = e->held && e->grant == g;
	pthread_mutex_unlock(&d->bg.lock);
	return held;
}

void dirdeleg_settle_all(struct dirdeleg *d)
{
	struct madev mv = { 0 };

	if (dd_in_sender)
		return;
	pthread_mutex_lock(&d->bg.lock);
	for (struct ddir *e = d->dirs; e; e = e->next) {
		if (!e->nmade)
			continue;
		dd_prune_made(d, e);
		for (unsigned i = 0; i < e->nmade; i++) {
			if (mv.n == mv.cap) {
				size_t cap = mv.cap ? 2 * mv.cap : 64;
				struct inode **v = realloc(mv.v, cap * sizeof(*v));
				if (!v)
					break;
				mv.v = v;
				mv.cap = cap;
			}
			inode_hold(d->c->it, e->made[i]);
			mv.v[mv.n++] = e->made[i];
		}
	}
	pthread_mutex_unlock(&d->bg.lock);
	dd_settle(d, &mv, true);
}

bool dirdeleg_write(struct dirdeleg *d, struct inode *ip, uint64_t fid, uint64_t off,
		    const void *buf, size_t size, uint64_t at)
{
	if (atomic_load(&ip->dd_pending) == 0)
		return false;
	pthread_mutex_lock(&d->bg.lock);
	struct ditem *it = ip->dd_item;
	bool ok = it && !it->no_inline && !it->closed && it->fid == fid && off == it->dlen &&
		  size <= DD_INLINE_MAX - it->dlen && d->inline_held + size <= DD_INLINE_HELD;
	if (ok && it->dlen + size > it->dcap) {
		uint32_t cap = it->dcap ? it->dcap : 4096;
		while (cap < it->dlen + size)
			cap *= 2;
		uint8_t *p = realloc(it->data, cap);
		if (p) {
			it->data = p;
			it->dcap = cap;
		} else {
			ok = false;
		}
	}
	if (ok) {
		struct timespec now;
		memcpy(it->data + it->dlen, buf, size);
		it->dlen += (uint32_t)size;
		d->inline_held += size;
		it->at_file = at; /* its reply's attributes are the file's after this */
		/* As the daemon's write will leave them, its clock aside. */
		clock_gettime(CLOCK_REALTIME, &now);
		it->attr.size = it->dlen;
		it->attr.blocks = (it->dlen + 511) / 512;
		it->attr.mtime_s = it->attr.ctime_s = now.tv_sec;
		it->attr.mtime_ns = it->attr.ctime_ns = (uint32_t)now.tv_nsec;
	} else if (it) {
		/* This write goes the usual way, once the file is named:
		 * the later ones after it. */
		it->no_inline = true;
		bg_wake(&d->bg);
	}
	pthread_mutex_unlock(&d->bg.lock);
	return ok;
}

bool dirdeleg_release(struct dirdeleg *d, struct inode *ip, uint64_t fid, struct deleg *dl)
{
	/* Writes the usual way are committed by the release itself. */
	if (atomic_load(&ip->dd_pending) == 0 || wb_holds(d->c->wb, ip))
		return false;
	pthread_mutex_lock(&d->bg.lock);
	struct ditem *it = ip->dd_item;
	bool ok = it && !it->closed && it->fid == fid;
	if (ok) {
		it->closed = true;
		/* What comes right after a close (a rename into place, the
		 * next file's create) has DD_LINGER_NS from now to join it. */
		it->since_ns = pfs_mono_ns();
		/* What tar does before its close (the mtime, the owner, the
		 * mode): made before the name; the reply's attributes are the
		 * file's after it. */
		if (dl && deleg_take(dl, ip, fid, &it->m.cr, &it->sa)) {
			it->has_sa = true;
			it->at_file = inode_own_touch(d->c->it, ip, false);
		}
		bg_wake(&d->bg);
	}
	pthread_mutex_unlock(&d->bg.lock);
	return ok;
}

/* ip's queued create's attributes into *a, if every byte went with it
 * and, for a change (setattr), it is still open; for a stat, if no change
 * answered here went with it. */
static bool item_attr(struct dirdeleg *d, struct inode *ip, struct pfs_attr *a, bool stat)
{
	if (atomic_load(&ip->dd_pending) == 0)
		return false;
	pthread_mutex_lock(&d->bg.lock);
	struct ditem *it = ip->dd_item;
	bool ok = it && !it->no_inline && !(stat ? it->has_sa : it->closed);
	if (ok)
		*a = it->attr;
	pthread_mutex_unlock(&d->bg.lock);
	return ok;
}

bool dirdeleg_attr(struct dirdeleg *d, struct inode *ip, struct pfs_attr *a)
{
	return item_attr(d, ip, a, false);
}

void dd_made_changed(struct inode *ip, const struct timespec *now, bool unlinked)
{
	struct ditem *made = ip->dd_item;

	if (made) {
		if (unlinked)
			made->attr.nlink = 0;
		made->attr.ctime_s = now->tv_sec;
		made->attr.ctime_ns = (uint32_t)now->tv_nsec;
	}
}

bool dirdeleg_stat(struct dirdeleg *d, struct inode *ip, struct pfs_attr *a)
{
	return item_attr(d, ip, a, true);
}

uint32_t dirdeleg_mkdir_ask(struct dirdeleg *d, uint64_t *ended)
{
	pthread_mutex_lock(&d->bg.lock);
	bool ask = d->started && !d->off && !d->bg.stop;
	*ended = d->ended;
	pthread_mutex_unlock(&d->bg.lock);
	return ask ? DD_SLOTS_NEW_DIR : 0;
}

void dirdeleg_made_dir(struct dirdeleg *d, struct inode *dir, const struct pfs_creds *cr,
		       uint64_t ended, const uint8_t *p, size_t len)
{
	struct pfs_entry got[DD_SLOTS_NEW_DIR];
	unsigned n = 0;
	struct pfs_rd rd;
	struct dask *a = calloc(1, sizeof(*a));

	pfs_rd_init(&rd, p, len);
	while (rd.left > 0 && n < DD_SLOTS_NEW_DIR && pfs_get_ENTRY(&rd, &got[n]) &&
	       S_ISREG(got[n].attr.mode))
		n++;
	dd_grant_listing(d->c, dir);
	pthread_mutex_lock(&d->bg.lock);
	struct ddir *e = NULL;
	if (a && d->started && !d->off && !d->bg.stop && d->ended == ended)
		e = dd_find_or_add(d, &dir->fh, &a->ret, &a->has_ret);
	if (e && !e->held) {
		e->held = true;
		e->asking = false;
		e->syncs = 0;
		e->rights_moved = false;
		e->grant = ++d->grants;
		e->used_ns = pfs_mono_ns();
		e->slot_batches = 1; /* the next SLOTS asks for more */
		d->st.asked++;
		d->st.granted++;
		dd_add_slots(d, e, got, n, cr);
		if (!a->has_ret)
			a->has_ret = dd_spare_slots(d, e, 0, &a->ret);
	} else if (!e && a && !a->has_ret) {
		/* Not held here: the daemon gets it back. */
		a->ret = dir->fh;
		a->has_ret = true;
	}
	if (a && a->has_ret) {
		dd_ask(d, a);
		a = NULL;
	}
	pthread_mutex_unlock(&d->bg.lock);
	free(a);
}
