/* dirdeleg.c: directory delegations held by this client: the
 * directories, asking and giving back, the barrier, the unlinks answered
 * here, recalls and waits (see dirdeleg_i.h; the senders are in
 * dirdeleg_send.c, the creates in dirdeleg_make.c). */
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

__thread bool dd_in_sender;

static void give_back(struct dirdeleg *d, const struct pfs_fh *fh);

/* --- the directories --- */

struct ddir *dd_find(struct dirdeleg *d, const struct pfs_fh *fh)
{
	for (struct ddir *e = d->dirs; e; e = e->next)
		if (pfs_fh_equal(&e->fh, fh))
			return e;
	return NULL;
}

struct ddir *dd_find_or_add(struct dirdeleg *d, const struct pfs_fh *fh, struct pfs_fh *ret,
			    bool *has_ret)
{
	struct ddir *e = dd_find(d, fh);

	*has_ret = false;
	if (e)
		return e;
	if (d->ndirs >= DD_DIRS) {
		struct ddir **victim = NULL;
		for (struct ddir **pp = &d->dirs; *pp; pp = &(*pp)->next) {
			struct ddir *x = *pp;
			if (x->nmade)
				dd_prune_made(d, x);
			if (x->err || x->pending || x->nmade)
				continue;
			if (!victim || (x->held == (*victim)->held ? x->used_ns < (*victim)->used_ns
								    : !x->held))
				victim = pp;
		}
		if (!victim)
			return NULL;
		struct ddir *gone = *victim;
		*victim = gone->next;
		if (gone->held) {
			*ret = gone->fh;
			*has_ret = true;
		}
		free(gone->slots);
		free(gone->made);
		free(gone);
		d->ndirs--;
	}
	if (!(e = calloc(1, sizeof(*e))))
		return NULL;
	e->fh = *fh;
	e->next = d->dirs;
	d->dirs = e;
	d->ndirs++;
	return e;
}

/* Every delegation ends (bg.lock held); the files made under them go to
 * mv (dd_settle). */
static void end_all(struct dirdeleg *d, struct madev *mv)
{
	int64_t now = pfs_mono_ns();

	d->ended++;
	for (struct ddir *e = d->dirs; e; e = e->next) {
		if (e->held) {
			e->held = false;
			d->st.recalls++;
		}
		dd_take_made(d, e, mv);
		e->nslots = 0; /* the daemon frees them once it sees them unused */
		e->syncs = 0;
		e->retry_ns = now + DD_RETRY_NS;
	}
	pthread_cond_broadcast(&d->slots_came); /* a create waiting for slots goes the usual way */
}

struct ditem *dd_item_new(const struct pfs_creds *cr, const struct inode *dir, const char *name)
{
	struct ditem *it = calloc(1, sizeof(*it));

	if (!it)
		return NULL;
	it->m.cr = *cr;
	it->m.parent = dir->fh;
	it->m.name.len = (uint16_t)strlen(name);
	memcpy(it->m.name.s, name, it->m.name.len + 1);
	return it;
}

void dd_answered(struct dirdeleg *d, struct ddir *e, struct ditem *it, struct inode *dir,
		 struct inode *file)
{
	struct client *c = d->c;
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	(void)inode_own_snap(c->it, &it->ns);
	it->seq = gate_seq(c->gate);
	e->at = inode_own_local(c->it, dir, now.tv_sec, (uint32_t)now.tv_nsec);
	e->pending++;
	it->dir = dir;
	it->file = file;
	atomic_fetch_add(&file->dd_pending, 1);
	it->at_file = inode_own_also(c->it, file);
	dd_enqueue(d, it);
}

void dd_ask(struct dirdeleg *d, struct dask *a)
{
	a->next = d->asks;
	d->asks = a;
	bg_wake(&d->bg);
}

void dd_enqueue(struct dirdeleg *d, struct ditem *it)
{
	it->next = NULL;
	*d->tail = it;
	d->tail = &it->next;
	d->queued++;
	atomic_fetch_add(&d->pending, 1);
	bg_wake(&d->bg);
}

void dd_hurry(struct dirdeleg *d)
{
	if (d->hurry++ == 0)
		bg_wake_all(&d->bg);
}

void dd_hurry_end(struct dirdeleg *d)
{
	d->hurry--;
}

/* Waits until nothing is queued or in flight (bg.lock held). */
static void wait_empty(struct dirdeleg *d)
{
	if (!d->queued && !d->inflight)
		return;
	d->st.waits++;
	dd_hurry(d);
	while (d->queued || d->inflight)
		pthread_cond_wait(&d->idle, &d->bg.lock);
	dd_hurry_end(d);
}

/* A sender's DELEG_DIR and DELEG_RETURN (dirdeleg_unlinked). */
void dd_do_ask(struct dirdeleg *d, struct dask *a)
{
	struct client *c = d->c;

	pthread_mutex_lock(&d->ask);
	if (a->has_ret)
		give_back(d, &a->ret);
	if (!a->dir)
		goto out;
	pthread_mutex_lock(&d->bg.lock);
	uint64_t ended = d->ended;
	pthread_mutex_unlock(&d->bg.lock);
	if (a->slots && !a->has_ask) { /* more for a directory held */
		dd_get_slots(d, a->dir, &a->cr, ended);
		inode_forget(c->it, a->dir, 1);
		goto out;
	}
	struct pfs_getattr_req m = { .cr = a->cr, .fh = a->dir->fh };
	struct rpc_reply rep = { 0 };
	int rc = rpc_msg(c->rpc, PFS_OP_DELEG_DIR, getattr_req, &m, &rep);
	rpc_reply_free(&rep);
	if (rc == 0)
		dd_grant_listing(c, a->dir);
	pthread_mutex_lock(&d->bg.lock);
	if (rc == -ENOSYS)
		d->off = true;
	/* Looked up again: it may have been forgotten meanwhile. After a
	 * recall or a reconnect meanwhile (one may have raced with the
	 * grant), it is not held; neither is it without an entry: then the
	 * daemon may still count it, and gets it back. */
	bool held = false;
	struct ddir *e = dd_find(d, &a->dir->fh);
	if (e) {
		e->asking = false;
		e->syncs = 0;
		e->slots_asking = false; /* asked next, if held (dd_get_slots) */
		if (rc == 0 && d->ended == ended) {
			e->held = held = true;
			e->rights_moved = false;
			e->grant = ++d->grants;
			d->st.granted++;
		} else {
			e->retry_ns = pfs_mono_ns() + DD_RETRY_NS;
		}
	}
	pthread_mutex_unlock(&d->bg.lock);
	if (rc == 0 && !held)
		give_back(d, &a->dir->fh);
	if (held && a->slots) {
		pthread_mutex_lock(&d->bg.lock);
		if ((e = dd_find(d, &a->dir->fh)))
			e->slots_asking = true;
		pthread_mutex_unlock(&d->bg.lock);
		dd_get_slots(d, a->dir, &a->cr, ended);
	}
	inode_forget(c->it, a->dir, 1);
out:
	pthread_mutex_unlock(&d->ask);
	free(a);
}

/* Requests that neither read nor change what a queued unlink changes
 * (names, the attributes of the directory and of the file) go at once;
 * the others wait until the queue is sent. READ and WRITE go too: the
 * removed file, if open here, is the same file either way. */
static bool must_wait(uint16_t op)
{
	switch (op) {
	case PFS_OP_HELLO: case PFS_OP_AUTH: case PFS_OP_GOODBYE: case PFS_OP_PING:
	case PFS_OP_READ: case PFS_OP_WRITE: case PFS_OP_RELEASE: case PFS_OP_RELEASEDIR:
	case PFS_OP_FSYNC: case PFS_OP_GETLK: case PFS_OP_SETLK: case PFS_OP_UNLOCK_OWNER:
	case PFS_OP_LSEEK: case PFS_OP_FORGET: case PFS_OP_RECLAIM: case PFS_OP_RECLAIM_DONE:
	case PFS_OP_PUSH_ACK: case PFS_OP_CHUNK: case PFS_OP_CHUNK_REPORT: case PFS_OP_DELEG_DIR:
	case PFS_OP_DELEG_RETURN:
	case PFS_OP_GETATTR: /* dirdeleg_wait_for: only its own object's unlinks */
		return false;
	default:
		return true;
	}
}

static void barrier(void *arg, uint16_t op, struct inode *in)
{
	struct dirdeleg *d = arg;

	if (must_wait(op)) {
		if (in)
			dirdeleg_wait_in(d, in);
		else
			dirdeleg_drain(d);
	}
	/* A made file given a name elsewhere is reachable without a
	 * recall: its writes are on the daemon first. (A rename within a
	 * held directory, in, gives none.) */
	if ((op == PFS_OP_RENAME || op == PFS_OP_LINK) && !in)
		dirdeleg_settle_all(d);
}

int dirdeleg_new(struct client *c, struct dirdeleg **out)
{
	struct dirdeleg *d = calloc(1, sizeof(*d));
	int rc;

	if (!d)
		return -ENOMEM;
	d->c = c;
	d->tail = &d->head;
	if ((rc = bg_init(&d->bg)) < 0) {
		free(d);
		return rc;
	}
	/* slots_came: its waits are timed (dirdeleg_make.c's wait_slots). */
	if ((rc = pfs_cond_init_mono(&d->slots_came)) != 0) {
		bg_fini(&d->bg);
		free(d);
		return -rc;
	}
	pthread_cond_init(&d->idle, NULL);
	pthread_mutex_init(&d->ask, NULL);
	*out = d;
	return 0;
}

int dirdeleg_start(struct dirdeleg *d)
{
	int rc;

	for (unsigned i = 0; i < DD_SENDERS; i++)
		if ((rc = bg_start(&d->bg, "dir-send", dd_sender_main, d)) < 0)
			return rc; /* dirdeleg_stop stops those started */
	/* Only now: an unlink is answered here only once a grant came,
	 * which a sender asks for. */
	pthread_mutex_lock(&d->bg.lock);
	d->started = true;
	pthread_mutex_unlock(&d->bg.lock);
	rpc_set_barrier(d->c->rpc, barrier, d);
	return 0;
}

void dirdeleg_stop(struct dirdeleg *d)
{
	if (!d)
		return;
	/* The senders send what is queued before they see stop. */
	bg_stop(&d->bg);
}

void dirdeleg_free(struct dirdeleg *d)
{
	if (!d)
		return;
	bg_stop(&d->bg);
	while (d->dirs) {
		struct ddir *e = d->dirs;
		d->dirs = e->next;
		for (unsigned i = 0; i < e->nmade; i++)
			inode_forget(d->c->it, e->made[i], 1);
		free(e->made);
		free(e->slots);
		free(e);
	}
	dd_settle(d, &d->unsettled, false);
	pthread_cond_destroy(&d->idle);
	pthread_cond_destroy(&d->slots_came);
	pthread_mutex_destroy(&d->ask);
	bg_fini(&d->bg);
	free(d);
}

/* --- answering --- */

struct inode *dd_known_file(struct client *c, struct inode *dir, const char *name, unsigned how,
			    struct pfs_attr *a)
{
	bool held = how & KF_HELD;
	struct pfs_entry pe;
	struct listing_info li;
	uint8_t *data;
	uint32_t dlen, lflags;
	uint64_t aseq;

	if (listing_find(dir, name, &pe, &data, &dlen, &lflags, &li) != LS_PRESENT)
		return NULL;
	free(data);
	struct inode *ip = inode_hold_fh(c->it, &pe.fh);
	if (!ip)
		return NULL;
	/* A file made here under the delegation held is reached by no other
	 * host: a push about it is its own change coming back (a write's,
	 * while another request of this client was in flight). */
	bool mine = held && dirdeleg_covers(c->dd, ip);
	gate_enter(c->gate);
	bool ok = inode_attr_trusted(c->it, ip, a, &aseq) &&
		  (mine || !gate_pushed_since(c->gate, aseq, &ip->fh)) &&
		  (held || !gate_pushed_since(c->gate, li.seq, &dir->fh));
	gate_leave(c->gate);
	/* One link and not a directory: no other name of it elsewhere that
	 * another host could reach without a recall, and no other object's
	 * attributes move with its removal. Answered here (held): nothing
	 * pending on it under an attribute delegation. A directory (rmdir:
	 * empty) moves only its parent's. */
	bool isdir = ok && S_ISDIR(a->mode);
	if ((how & KF_ANY) && !(how & KF_DIR))
		how |= isdir ? KF_DIR : 0;
	if (ok && ((how & KF_DIR) ? !isdir
				  : a->nlink != 1 || isdir ||
					    ((how & KF_ANSWER) && c->dl && deleg_has(c->dl, ip))))
		ok = false;
	if (!ok) {
		inode_forget(c->it, ip, 1);
		return NULL;
	}
	return ip;
}

struct inode *dirdeleg_victim(struct client *c, struct inode *dir, const char *name, bool isdir)
{
	struct pfs_attr a;

	return dd_known_file(c, dir, name, isdir ? KF_DIR : 0, &a);
}

void dd_grant_listing(struct client *c, struct inode *dir)
{
	struct pfs_entry pe;
	struct listing_info li;
	uint8_t *data;
	uint32_t dlen, lflags;

	if (listing_find(dir, "", &pe, &data, &dlen, &lflags, &li) == LS_NONE)
		return;
	free(data);
	gate_enter(c->gate);
	bool stale = gate_pushed_since(c->gate, li.seq, &dir->fh);
	gate_leave(c->gate);
	if (stale)
		listing_stale(dir);
}

/* dir's entry, with bg.lock held, and in *held whether dir is held now
 * (its use noted). An earlier item's error not reported yet is taken
 * into *err (a positive errno; else 0): the caller answers with it. */
struct ddir *dd_enter_dir(struct dirdeleg *d, struct inode *dir, int *err, bool *held)
{
	struct ddir *e = dd_find(d, &dir->fh);

	*err = 0;
	*held = false;
	if (e && e->err) {
		*err = -e->err;
		e->err = 0;
		return e;
	}
	*held = e && e->held && !d->bg.stop;
	if (*held)
		e->used_ns = pfs_mono_ns();
	return e;
}

bool dirdeleg_unlink(struct dirdeleg *d, struct inode *dir, const char *name,
		     const struct pfs_creds *cr, int *err)
{
	struct client *c = d->c;
	struct pfs_attr a;

	bool held;
	pthread_mutex_lock(&d->bg.lock);
	struct ddir *e = dd_enter_dir(d, dir, err, &held);
	pthread_mutex_unlock(&d->bg.lock);
	if (*err)
		return true;
	if (!held || strlen(name) > PFS_NAME_MAX)
		return false;
	struct inode *file = dd_known_file(c, dir, name, KF_HELD | KF_ANSWER, &a);
	if (!file && dd_writes_settled(d, dir, name))
		file = dd_known_file(c, dir, name, KF_HELD | KF_ANSWER, &a);
	if (!file)
		return false;
	struct ditem *it = dd_item_new(cr, dir, name);
	if (!it) {
		inode_forget(c->it, file, 1);
		return false;
	}
	inode_hold(c->it, dir);

	pthread_mutex_lock(&d->bg.lock);
	while (d->queued + d->inflight >= DD_QUEUE_MAX)
		pthread_cond_wait(&d->idle, &d->bg.lock);
	/* Recalled meanwhile: the usual way. */
	if (!(e = dd_find(d, &dir->fh)) || !e->held || e->err) {
		pthread_mutex_unlock(&d->bg.lock);
		inode_forget(c->it, file, 1);
		inode_forget(c->it, dir, 1);
		free(it);
		return false;
	}
	/* Answered: the name leaves the listing; the directory and the file
	 * changed by us (their attributes are asked for again, once the
	 * queue is sent); no other object moves (one link): the namespace
	 * count stays. Under the lock, so that a recall either sees it
	 * queued or ends the delegation first. */
	(void)listing_remove(dir, name);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	dd_made_changed(file, &now, true);
	dd_answered(d, e, it, dir, file);
	d->st.local++;
	pthread_mutex_unlock(&d->bg.lock);
	return true;
}

/* Tells the daemon this client no longer holds directory fh (nothing is
 * pending there). d->ask held. */
static void give_back(struct dirdeleg *d, const struct pfs_fh *fh)
{
	struct pfs_getattr_req m = { .fh = *fh };
	struct rpc_reply rep = { 0 };

	(void)rpc_msg(d->c->rpc, PFS_OP_DELEG_RETURN, getattr_req, &m, &rep);
	rpc_reply_free(&rep);
}

/* dirdeleg_synced, counting as weight of them. */
static void synced(struct dirdeleg *d, struct inode *dir, const struct pfs_creds *cr, bool create,
		   unsigned weight)
{
	int64_t now = pfs_mono_ns();
	struct dask *a = calloc(1, sizeof(*a));

	if (!a)
		return;
	pthread_mutex_lock(&d->bg.lock);
	struct ddir *e = d->off || d->bg.stop || !d->started ? NULL
							     : dd_find_or_add(d, &dir->fh, &a->ret, &a->has_ret);
	if (e)
		e->syncs += weight - 1;
	bool ask = e && !e->held && !e->asking && ++e->syncs >= DD_ASK_AFTER && now >= e->retry_ns;
	if (e)
		e->used_ns = now;
	if (ask) {
		/* Asked by a sender: this request's reply does not wait for it. */
		e->asking = true;
		d->st.asked++;
		inode_hold(d->c->it, dir);
		a->dir = dir;
		a->cr = *cr;
		a->has_ask = true;
		a->slots = create && !d->no_slots;
		e->slots_asking = a->slots;
	}
	if (ask || a->has_ret) {
		dd_ask(d, a);
		a = NULL;
	}
	pthread_mutex_unlock(&d->bg.lock);
	free(a);
}

void dirdeleg_synced(struct dirdeleg *d, struct inode *dir, const struct pfs_creds *cr, bool create)
{
	synced(d, dir, cr, create, 1);
}

void dirdeleg_new_dir(struct dirdeleg *d, struct inode *dir, const struct pfs_creds *cr)
{
	/* Without slots: they come with the first create there. Slots
	 * with the grant made untar's first creates in each directory
	 * local too, but untar at +500 us went from 11.4 s to 11.1 s only
	 * (its SETATTRs wait), and the slots of directories that get no
	 * file cost the coordinator's CPU. */
	synced(d, dir, cr, false, DD_ASK_AFTER);
}

void dirdeleg_dir_changed(struct dirdeleg *d, struct inode *dir)
{
	pthread_mutex_lock(&dir->lock);
	bool isdir = S_ISDIR(dir->attr.mode);
	pthread_mutex_unlock(&dir->lock);
	if (!isdir)
		return;
	struct madev mv = { 0 };
	pthread_mutex_lock(&d->bg.lock);
	struct ddir *e = dd_find(d, &dir->fh);
	bool ret = e && e->held;
	if (ret) {
		/* A grant on its way is given back too (dd_do_ask). */
		d->ended++;
		e->held = false;
		e->nslots = 0;
		e->syncs = 0;
		e->retry_ns = 0; /* our own change: asked again as usual */
		pthread_cond_broadcast(&d->slots_came);
		dd_take_made(d, e, &mv);
		wait_empty(d);
	}
	pthread_mutex_unlock(&d->bg.lock);
	dd_settle(d, &mv, true);
	if (ret) {
		pthread_mutex_lock(&d->ask);
		give_back(d, &dir->fh);
		pthread_mutex_unlock(&d->ask);
	}
}

bool dirdeleg_holds(struct dirdeleg *d, const struct inode *dir)
{
	pthread_mutex_lock(&d->bg.lock);
	struct ddir *e = dd_find(d, &dir->fh);
	bool held = e && e->held;
	pthread_mutex_unlock(&d->bg.lock);
	return held;
}

/* Waits for the queue (bg.lock held); dir's entry, or NULL, and in *err
 * its first error not reported yet, forgotten now. */
static struct ddir *drained(struct dirdeleg *d, struct inode *dir, int *err)
{
	wait_empty(d);
	struct ddir *e = dd_find(d, &dir->fh);
	*err = 0;
	if (e && e->err) {
		*err = e->err;
		e->err = 0;
	}
	return e;
}

int dirdeleg_error(struct dirdeleg *d, struct inode *dir)
{
	int err;

	pthread_mutex_lock(&d->bg.lock);
	(void)drained(d, dir, &err);
	pthread_mutex_unlock(&d->bg.lock);
	return err;
}

int dirdeleg_sync(struct dirdeleg *d, struct inode *dir)
{
	struct inode **made = NULL;
	unsigned n = 0;
	int err;

	pthread_mutex_lock(&d->bg.lock);
	struct ddir *e = drained(d, dir, &err);
	/* Those made there now, held: a recall meanwhile takes them off
	 * the list (dd_take_made). */
	if (e && e->nmade) {
		made = malloc(e->nmade * sizeof(*made));
		for (unsigned i = 0; made && i < e->nmade; i++) {
			inode_hold(d->c->it, e->made[i]);
			made[n++] = e->made[i];
		}
		if (!made && !err)
			err = -ENOMEM;
	}
	pthread_mutex_unlock(&d->bg.lock);
	for (unsigned i = 0; i < n; i++) {
		int r = err ? 0 : wb_wait_data(d->c->wb, made[i]);
		if (r < 0)
			err = r;
		inode_forget(d->c->it, made[i], 1);
	}
	free(made);
	return err;
}

void dirdeleg_wait_for(struct dirdeleg *d, struct inode *ip)
{
	if (dd_in_sender || atomic_load(&d->pending) == 0)
		return;
	/* A directory may be one with items queued; a file, one removed
	 * or made here (its own item is enough). */
	pthread_mutex_lock(&ip->lock);
	bool dir = S_ISDIR(ip->attr.mode);
	pthread_mutex_unlock(&ip->lock);
	if (dir)
		dirdeleg_drain(d);
	else
		dirdeleg_wait_made(d, ip);
}

void dirdeleg_wait_in(struct dirdeleg *d, struct inode *ip)
{
	if (dd_in_sender || atomic_load(&d->pending) == 0)
		return;
	pthread_mutex_lock(&ip->lock);
	bool dir = S_ISDIR(ip->attr.mode);
	pthread_mutex_unlock(&ip->lock);
	if (!dir) {
		dirdeleg_wait_made(d, ip);
		return;
	}
	pthread_mutex_lock(&d->bg.lock);
	struct ddir *e = dd_find(d, &ip->fh);
	if (e && e->pending) {
		d->st.waits++;
		dd_hurry(d);
		while ((e = dd_find(d, &ip->fh)) && e->pending)
			pthread_cond_wait(&d->idle, &d->bg.lock);
		dd_hurry_end(d);
	}
	pthread_mutex_unlock(&d->bg.lock);
}

void dirdeleg_wait_made(struct dirdeleg *d, struct inode *ip)
{
	if (dd_in_sender || atomic_load(&ip->dd_pending) == 0)
		return;
	pthread_mutex_lock(&d->bg.lock);
	d->st.waits++;
	dd_hurry(d);
	while (atomic_load(&ip->dd_pending) > 0)
		pthread_cond_wait(&d->idle, &d->bg.lock);
	dd_hurry_end(d);
	pthread_mutex_unlock(&d->bg.lock);
}

void dirdeleg_drain(struct dirdeleg *d)
{
	if (dd_in_sender || atomic_load(&d->pending) == 0)
		return;
	pthread_mutex_lock(&d->bg.lock);
	wait_empty(d);
	pthread_mutex_unlock(&d->bg.lock);
}

void dirdeleg_recall(struct dirdeleg *d)
{
	pthread_mutex_lock(&d->bg.lock);
	end_all(d, &d->unsettled);
	wait_empty(d);
	struct madev mv = d->unsettled;
	d->unsettled = (struct madev){ 0 };
	pthread_mutex_unlock(&d->bg.lock);
	/* The other host sees what this one wrote to the files it made,
	 * whose close did not wait: also those of delegations a lost
	 * connection ended here, which the daemon's session kept. (Their
	 * recall once came right after the reconnect and was acknowledged
	 * before those writes, sent again, were answered: the other host
	 * read an empty file.) */
	dd_settle(d, &mv, true);
}

void dirdeleg_reconnected(struct dirdeleg *d)
{
	/* The connection thread: the writes are sent again once it is back,
	 * and the next RECALL waits for them. Those done since the last
	 * reconnect are let go. */
	pthread_mutex_lock(&d->bg.lock);
	dd_prune_unsettled(d);
	end_all(d, &d->unsettled);
	pthread_mutex_unlock(&d->bg.lock);
}

void dirdeleg_get_stats(struct dirdeleg *d, struct dirdeleg_stats *st)
{
	pthread_mutex_lock(&d->bg.lock);
	*st = d->st;
	pthread_mutex_unlock(&d->bg.lock);
}
