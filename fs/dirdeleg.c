/* dirdeleg.c: directory delegations and the unlinks answered under them
 * (see dirdeleg_i.h). */
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
#include "gate_i.h"
#include "inode_i.h"
#include "listing_i.h"
#include "podfs/clock.h"
#include "podfs/le.h"
#include "podfs/log.h"
#include "rpc_i.h"
#include "trust_i.h"
#include "wb_i.h"

/* A directory this client asked for, holds, or has an error to report in. */
struct ddir {
	struct ddir *next;
	struct pfs_fh fh;
	bool held;          /* unlinks there are answered here */
	unsigned syncs;     /* unlinks sent the usual way since the last ask */
	int64_t retry_ns;   /* no ask before (a refusal, a recall) */
	int err;            /* an unlink answered here failed; not reported yet */
	unsigned pending;   /* unlinks answered here, not answered by the daemon yet */
	uint64_t at;        /* the directory's stamp after the last one (0: not trusted) */
	int64_t used_ns;    /* for the choice of the one to forget */
	bool asking;        /* a DELEG_DIR for it is queued or in flight */
	/* Slots (SLOTS): files the daemon made there for creates answered
	 * here, for callers with ids scr; a SLOTS is queued or in flight. */
	struct pfs_entry *slots;
	unsigned nslots;
	struct pfs_creds scr;
	bool slots_asking;
	int64_t slots_retry_ns; /* no SLOTS before (one brought none) */
	unsigned slot_batches;  /* SLOTS answered: the next asks for more */
	/* Files made here under the grant (one lookup held each, dd_cover
	 * = grant): their close does not wait for their writes, which the
	 * end of the delegation does (settle). */
	uint64_t grant;     /* while held: this grant's number */
	struct inode **made;
	unsigned nmade, made_cap;
};

/* Files whose writes the end of a delegation waits for. */
struct madev {
	struct inode **v;
	size_t n, cap;
};

/* Work for the senders besides the queue: a DELEG_DIR to send (dir, held
 * with inode_hold, and cr) or with slots, a SLOTS for dir; a directory to
 * give back (ret); or both. */
struct dask {
	struct dask *next;
	struct inode *dir;
	struct pfs_creds cr;
	bool has_ask;   /* DELEG_DIR (else: only SLOTS, or only the return) */
	bool slots;     /* SLOTS after it (creates were asking) */
	bool has_ret;
	struct pfs_fh ret;
};

/* An unlink or (create) a create answered here, to send. */
struct ditem {
	struct ditem *next;
	struct inode *dir, *file;  /* one lookup each held (inode_hold) */
	struct pfs_unlink_req m;   /* ids, directory, name */
	bool create;
	uint32_t mode;             /* create: its permission bits */
	uint64_t fid;              /* create: the open it made, and its flags */
	uint32_t flags;
	struct pfs_fh slot;        /* create: the slot it names */
	uint64_t seq, ns;          /* push number, namespace count: when it was answered */
	uint64_t at_file;          /* the stamp it gave the file (trust_i.h) */
};

struct dirdeleg {
	struct client *c;
	struct bg bg;               /* lock: all below; cond: the senders' work */
	pthread_cond_t idle;        /* an unlink was answered by the daemon */
	pthread_mutex_t ask;        /* held across DELEG_DIR and DELEG_RETURN: a
				     * return never overtakes a later grant */
	struct ddir *dirs;
	unsigned ndirs;
	struct ditem *head, **tail;
	struct dask *asks;          /* LIFO: their order does not matter */
	unsigned queued, inflight;
	unsigned inflight_kind[2];  /* of them unlinks [0], creates [1] */
	_Atomic unsigned pending;   /* queued + inflight, read without the lock */
	uint64_t ended;             /* end_all calls: a grant asked for before one is not held */
	uint64_t grants;            /* grants numbered so far */
	bool off;                   /* the daemon does not grant them (ENOSYS) */
	bool no_batch;              /* the daemon does not know UNLINKS (ENOSYS) */
	bool no_slots;              /* nor SLOTS (ENOSYS) */
	bool started;               /* the senders run (dirdeleg_start) */
	struct dirdeleg_stats st;
};

static __thread bool in_sender;

/* --- the directories --- */

static struct ddir *find(struct dirdeleg *d, const struct pfs_fh *fh)
{
	for (struct ddir *e = d->dirs; e; e = e->next)
		if (pfs_fh_equal(&e->fh, fh))
			return e;
	return NULL;
}

/* Moves e's made files to mv (bg.lock held); they are no longer
 * covered. On ENOMEM they are waited for at once, lock held. */
static void take_made(struct dirdeleg *d, struct ddir *e, struct madev *mv)
{
	for (unsigned i = 0; i < e->nmade; i++) {
		struct inode *ip = e->made[i];
		atomic_store(&ip->dd_cover, 0);
		if (mv->n == mv->cap) {
			size_t cap = mv->cap ? 2 * mv->cap : 64;
			struct inode **v = realloc(mv->v, cap * sizeof(*v));
			if (!v) {
				(void)wb_wait(d->c->wb, ip);
				inode_forget(d->c->it, ip, 1);
				continue;
			}
			mv->v = v;
			mv->cap = cap;
		}
		mv->v[mv->n++] = ip;
	}
	e->nmade = 0;
}

/* The end of a delegation: waits for the writes of the files made under
 * it (wait; not after a reconnect, where they are sent again anyway),
 * and lets them go. bg.lock not held. */
static void settle(struct dirdeleg *d, struct madev *mv, bool wait)
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

/* Drops from e's made files those write-behind and the attribute
 * delegations hold nothing for: a close of them waits for its writes
 * again (bg.lock held). */
static void prune_made(struct dirdeleg *d, struct ddir *e)
{
	unsigned k = 0;

	for (unsigned i = 0; i < e->nmade; i++) {
		struct inode *ip = e->made[i];
		atomic_store(&ip->dd_cover, 0);
		/* Still writing, or attributes answered here not sent: covered. */
		if (wb_holds(d->c->wb, ip) || (d->c->dl && deleg_has(d->c->dl, ip))) {
			atomic_store(&ip->dd_cover, e->grant);
			e->made[k++] = ip;
			continue;
		}
		inode_forget(d->c->it, ip, 1);
	}
	e->nmade = k;
}

/* fh's entry, made if needed: when DD_DIRS are tracked, the least
 * recently used one without an error to report or unlinks pending goes,
 * one not held first; if it was held, its handle is put in *ret (the
 * caller returns it to the daemon, DELEG_RETURN) and *has_ret set. NULL:
 * ENOMEM, or none can go. bg.lock held. */
static struct ddir *find_or_add(struct dirdeleg *d, const struct pfs_fh *fh, struct pfs_fh *ret,
				bool *has_ret)
{
	struct ddir *e = find(d, fh);

	*has_ret = false;
	if (e)
		return e;
	if (d->ndirs >= DD_DIRS) {
		struct ddir **victim = NULL;
		for (struct ddir **pp = &d->dirs; *pp; pp = &(*pp)->next) {
			struct ddir *x = *pp;
			if (x->nmade)
				prune_made(d, x);
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
 * mv (settle). */
static void end_all(struct dirdeleg *d, struct madev *mv)
{
	int64_t now = pfs_mono_ns();

	d->ended++;
	for (struct ddir *e = d->dirs; e; e = e->next) {
		if (e->held) {
			e->held = false;
			d->st.recalls++;
		}
		take_made(d, e, mv);
		e->nslots = 0; /* the daemon frees them once it sees them unused */
		e->syncs = 0;
		e->retry_ns = now + DD_RETRY_NS;
	}
}

/* Waits until nothing is queued or in flight (bg.lock held). */
static void wait_empty(struct dirdeleg *d)
{
	if (d->queued || d->inflight)
		d->st.waits++;
	while (d->queued || d->inflight)
		pthread_cond_wait(&d->idle, &d->bg.lock);
}

/* --- the senders --- */

/* it was answered by the daemon: rc (0, or -errno); fa: a created file's
 * attributes after it, da: the directory's, if the reply had them. */
static void item_done(struct dirdeleg *d, struct ditem *it, int rc, const struct pfs_attr *fa,
		      const struct pfs_attr *da)
{
	struct client *c = d->c;

	/* A removed file's attributes are not known: asked for again; a
	 * created one's are the daemon's. */
	inode_own_end(c->it, it->file, rc == 0 ? fa : NULL, it->seq, it->at_file, it->ns);
	/* Refused: an unlinked name is still there, a created one is not;
	 * the listing that says otherwise goes. ENOENT of an unlink: the
	 * name is gone either way (another host removed it before the
	 * grant, and the kernel here still had it). */
	if (it->create)
		rc = rc == -ENOENT ? -EIO : rc;
	else if (rc == -ENOENT)
		rc = 0;
	if (rc < 0)
		listing_touch(it->dir);
	atomic_fetch_sub(&it->file->dd_pending, 1);
	pthread_mutex_lock(&d->bg.lock);
	struct ddir *de = find(d, &it->m.parent);
	/* After the directory's last one, its attributes are the daemon's
	 * (its clock), if nothing else of ours happened to it since: a
	 * request about it waits for the queue (dirdeleg_drain). */
	if (de && de->pending && --de->pending == 0 && de->at)
		inode_own_end(c->it, it->dir, da, it->seq, de->at, it->ns);
	if (rc < 0) {
		d->st.errors++;
		if (de) { /* there: its items pending kept it */
			de->held = false; /* the rest goes the usual way */
			de->nslots = 0;
			if (!de->err)
				de->err = rc;
		}
		pfs_warn("%s answered under a directory delegation failed: %s: %s",
			 it->create ? "a create" : "an unlink", it->m.name.s, strerror(-rc));
	}
	pthread_mutex_unlock(&d->bg.lock);
	inode_forget(c->it, it->file, 1);
	inode_forget(c->it, it->dir, 1);
	free(it);
}

static void send_one(struct dirdeleg *d, struct ditem *it)
{
	struct rpc_reply rep = { 0 };
	struct pfs_dir_rep dr;
	bool have_da = false;

	int rc = rpc_msg(d->c->rpc, PFS_OP_UNLINK, unlink_req, &it->m, &rep);
	if (rc == 0 && rep.len > 0) {
		if (pfs_dec_dir_rep(rep.buf, rep.len, &dr) < 0)
			rc = -EIO;
		else
			have_da = true;
	}
	rpc_reply_free(&rep);
	item_done(d, it, rc, NULL, have_da ? &dr.dir : NULL);
}

/* Sends items v[n] (one directory, one caller) in one UNLINKS: the daemon
 * refuses it (EIO) if it revoked the delegation meanwhile. */
static void send_batch(struct dirdeleg *d, struct ditem **v, size_t n)
{
	struct pfs_unlinks_req m = { .cr = v[0]->m.cr, .parent = v[0]->m.parent };
	struct pfs_unlinks_rep ur;
	struct rpc_reply rep = { 0 };
	size_t cap = n * (2 + PFS_NAME_MAX);
	uint8_t *names = malloc(cap);
	bool listed = names != NULL;
	struct pfs_wr w;
	int rc = -ENOMEM;

	if (listed) {
		pfs_wr_init(&w, names, cap);
		for (size_t i = 0; i < n; i++)
			(void)pfs_put_NAME(&w, &v[i]->m.name);
		m.names.p = names;
		m.names.len = (uint32_t)w.len;
		rc = rpc_msg_heap(d->c->rpc, PFS_OP_UNLINKS, unlinks_req, &m, w.len + 1024, &rep);
		free(names);
	}
	if (rc == 0 && (pfs_dec_unlinks_rep(rep.buf, rep.len, &ur) < 0 || ur.status.len != 4 * n))
		rc = -EIO;
	/* A daemon without UNLINKS, or no memory here for the list: one by
	 * one. (The daemon's own ENOMEM is its answer: a plain UNLINK would
	 * not be refused under a revoked delegation.) */
	if (rc == -ENOSYS || !listed) {
		rpc_reply_free(&rep);
		if (rc == -ENOSYS)
			d->no_batch = true;
		for (size_t i = 0; i < n; i++)
			send_one(d, v[i]);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		int r = rc < 0 ? rc : -(int)pfs_load_le32(ur.status.p + 4 * i);
		/* The directory's attributes are those after the last. */
		bool da = rc == 0 && i == n - 1 && (ur.flags & PFS_UL_DIR_ATTR);
		item_done(d, v[i], r, NULL, da ? &ur.dir : NULL);
	}
	rpc_reply_free(&rep);
}

/* Sends creates v[n] (one directory, one caller) in one CREATES. */
static void send_creates(struct dirdeleg *d, struct ditem **v, size_t n)
{
	struct pfs_creates_req m = { .cr = v[0]->m.cr, .parent = v[0]->m.parent };
	struct pfs_creates_rep cr;
	struct rpc_reply rep = { 0 };
	size_t cap = n * (2 + PFS_FH_MAX + 8 + 4 + 4 + 2 + PFS_NAME_MAX);
	uint8_t *items = malloc(cap);
	struct pfs_wr w;
	struct pfs_rd ar;
	int rc = -ENOMEM;

	if (items) {
		pfs_wr_init(&w, items, cap);
		for (size_t i = 0; i < n; i++)
			if (pfs_put_FH(&w, &v[i]->slot) < 0 || pfs_put_U64(&w, &v[i]->fid) < 0 ||
			    pfs_put_U32(&w, &v[i]->flags) < 0 || pfs_put_U32(&w, &v[i]->mode) < 0 ||
			    pfs_put_NAME(&w, &v[i]->m.name) < 0)
				break;
		m.items.p = items;
		m.items.len = (uint32_t)w.len;
		rc = rpc_msg_heap(d->c->rpc, PFS_OP_CREATES, creates_req, &m, w.len + 1024, &rep);
		free(items);
	}
	if (rc == 0 && (pfs_dec_creates_rep(rep.buf, rep.len, &cr) < 0 || cr.status.len != 4 * n))
		rc = -EIO;
	if (rc == 0)
		pfs_rd_init(&ar, cr.attrs.p, cr.attrs.len);
	for (size_t i = 0; i < n; i++) {
		int r = rc < 0 ? rc : -(int)pfs_load_le32(cr.status.p + 4 * i);
		struct pfs_attr fa = { 0 };
		if (r == 0 && !pfs_get_ATTR(&ar, &fa))
			r = -EIO;
		bool da = rc == 0 && i == n - 1 && (cr.flags & PFS_UL_DIR_ATTR);
		item_done(d, v[i], r, &fa, da ? &cr.dir : NULL);
	}
	rpc_reply_free(&rep);
}

static bool same_creds(const struct pfs_creds *x, const struct pfs_creds *y)
{
	return x->uid == y->uid && x->gid == y->gid && x->ngroups == y->ngroups &&
	       memcmp(x->groups, y->groups, x->ngroups * sizeof(x->groups[0])) == 0;
}

/* Whether b may go in the UNLINKS or CREATES of a: the same kind, the
 * same directory and caller. */
static bool same_batch(const struct ditem *a, const struct ditem *b)
{
	const struct pfs_creds *x = &a->m.cr, *y = &b->m.cr;

	return a->create == b->create && pfs_fh_equal(&a->m.parent, &b->m.parent) &&
	       same_creds(x, y);
}

static void give_back(struct dirdeleg *d, const struct pfs_fh *fh);
static void grant_listing(struct client *c, struct inode *dir);
static void get_slots(struct dirdeleg *d, struct inode *dir, const struct pfs_creds *cr,
		      uint64_t ended);

/* A sender's DELEG_DIR and DELEG_RETURN (dirdeleg_unlinked). */
static void do_ask(struct dirdeleg *d, struct dask *a)
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
		get_slots(d, a->dir, &a->cr, ended);
		inode_forget(c->it, a->dir, 1);
		goto out;
	}
	struct pfs_getattr_req m = { .cr = a->cr, .fh = a->dir->fh };
	struct rpc_reply rep = { 0 };
	int rc = rpc_msg(c->rpc, PFS_OP_DELEG_DIR, getattr_req, &m, &rep);
	rpc_reply_free(&rep);
	if (rc == 0)
		grant_listing(c, a->dir);
	pthread_mutex_lock(&d->bg.lock);
	if (rc == -ENOSYS)
		d->off = true;
	/* Looked up again: it may have been forgotten meanwhile. After a
	 * recall or a reconnect meanwhile (one may have raced with the
	 * grant), it is not held; neither is it without an entry: then the
	 * daemon may still count it, and gets it back. */
	bool held = false;
	struct ddir *e = find(d, &a->dir->fh);
	if (e) {
		e->asking = false;
		e->syncs = 0;
		e->slots_asking = false; /* asked next, if held (get_slots) */
		if (rc == 0 && d->ended == ended) {
			e->held = held = true;
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
		if ((e = find(d, &a->dir->fh)))
			e->slots_asking = true;
		pthread_mutex_unlock(&d->bg.lock);
		get_slots(d, a->dir, &a->cr, ended);
	}
	inode_forget(c->it, a->dir, 1);
out:
	pthread_mutex_unlock(&d->ask);
	free(a);
}

/* A sender's SLOTS for dir (held) by cr: what comes is kept if dir is
 * still held as of ended (end_all calls). d->ask held, so that a return
 * never overtakes it. */
static void get_slots(struct dirdeleg *d, struct inode *dir, const struct pfs_creds *cr,
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
	struct ddir *e = find(d, &dir->fh);
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
	e = find(d, &dir->fh);
	if (e) {
		e->slots_asking = false;
		e->slot_batches++;
		/* None (a default ACL there, the session's limit): not asked
		 * again for a while. */
		if (n == 0)
			e->slots_retry_ns = pfs_mono_ns() + DD_RETRY_NS;
		if (!e->held || d->ended != ended || (e->nslots && !same_creds(&e->scr, cr)))
			n = 0; /* the daemon frees them once it sees them unused */
		if (n && !e->slots && !(e->slots = malloc(DD_SLOTS_MAX * sizeof(*e->slots))))
			n = 0;
		for (unsigned i = 0; i < n && e->nslots < DD_SLOTS_MAX; i++)
			e->slots[e->nslots++] = got[i];
		if (n)
			e->scr = *cr;
		d->st.slots += n;
	}
	pthread_mutex_unlock(&d->bg.lock);
}

static void *sender_main(void *arg)
{
	struct dirdeleg *d = arg;
	struct ditem *v[PFS_UNLINKS_MAX];

	in_sender = true;
	pthread_mutex_lock(&d->bg.lock);
	for (;;) {
		if (d->asks) {
			struct dask *a = d->asks;
			d->asks = a->next;
			pthread_mutex_unlock(&d->bg.lock);
			do_ask(d, a);
			pthread_mutex_lock(&d->bg.lock);
			continue;
		}
		/* Creates and unlinks are never in flight together: one may
		 * name what the other made or removed (a file made here and
		 * removed again); creates of different names, or unlinks,
		 * do not depend on each other. */
		if (d->head && d->inflight_kind[!d->head->create] == 0) {
			/* The items at the head of the queue of one kind, in one
			 * directory by one caller go together, up to
			 * PFS_UNLINKS_MAX. */
			size_t n = 0, max = d->no_batch && !d->head->create ? 1 : PFS_UNLINKS_MAX;
			while (d->head && n < max && (n == 0 || same_batch(v[0], d->head))) {
				v[n++] = d->head;
				d->head = d->head->next;
			}
			if (!d->head)
				d->tail = &d->head;
			bool create = v[0]->create;
			d->queued -= (unsigned)n;
			d->inflight += (unsigned)n;
			d->inflight_kind[create] += (unsigned)n;
			d->st.sent++;
			pthread_mutex_unlock(&d->bg.lock);
			if (v[0]->create)
				send_creates(d, v, n);
			else if (d->no_batch)
				send_one(d, v[0]);
			else
				send_batch(d, v, n);
			pthread_mutex_lock(&d->bg.lock);
			d->inflight -= (unsigned)n;
			d->inflight_kind[create] -= (unsigned)n;
			atomic_fetch_sub(&d->pending, (unsigned)n);
			pthread_cond_broadcast(&d->idle);
			if (d->head)
				bg_wake(&d->bg); /* a sender may have waited for this kind */
			continue;
		}
		if (d->bg.stop)
			break;
		bg_wait(&d->bg);
	}
	pthread_mutex_unlock(&d->bg.lock);
	return NULL;
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

static void barrier(void *arg, uint16_t op)
{
	struct dirdeleg *d = arg;

	if (must_wait(op))
		dirdeleg_drain(d);
	/* A made file given a name elsewhere is reachable without a
	 * recall: its writes are on the daemon first. */
	if (op == PFS_OP_RENAME || op == PFS_OP_LINK)
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
	pthread_cond_init(&d->idle, NULL);
	pthread_mutex_init(&d->ask, NULL);
	*out = d;
	return 0;
}

int dirdeleg_start(struct dirdeleg *d)
{
	int rc;

	for (unsigned i = 0; i < DD_SENDERS; i++)
		if ((rc = bg_start(&d->bg, sender_main, d)) < 0)
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
	pthread_cond_destroy(&d->idle);
	pthread_mutex_destroy(&d->ask);
	bg_fini(&d->bg);
	free(d);
}

/* --- answering --- */

/* The file named name in dir, held, if dir's listing knows it and this
 * client trusts the file's attributes (*a), current as of now. NULL: not
 * known here. The listing only names the file: its item may be marked
 * stale (this client wrote the file since: the inode has its
 * attributes), and a push about the directory since it was fetched does
 * not matter. Under a delegation no other session changes the directory
 * without a recall first, and the listing was coherent at the grant
 * (grant_listing): such a push is this client's own change coming back
 * (the daemon sends one to its author when other requests of it were in
 * flight). Otherwise (!held: dirdeleg_victim) the listing must be
 * coherent: no push about dir since it was fetched. */
static struct inode *known_file(struct client *c, struct inode *dir, const char *name,
				bool held, bool isdir, struct pfs_attr *a)
{
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
	if (ok && (isdir ? !S_ISDIR(a->mode)
			 : a->nlink != 1 || S_ISDIR(a->mode) ||
				   (held && c->dl && deleg_has(c->dl, ip))))
		ok = false;
	if (!ok) {
		inode_forget(c->it, ip, 1);
		return NULL;
	}
	return ip;
}

struct inode *dirdeleg_victim(struct dirdeleg *d, struct inode *dir, const char *name, bool isdir)
{
	struct pfs_attr a;

	return known_file(d->c, dir, name, false, isdir, &a);
}

/* A grant of dir arrived: a listing of it fetched before, that a push
 * about it since may have made stale, is dropped (the one fetched next
 * is coherent: nobody else changes dir any more). */
static void grant_listing(struct client *c, struct inode *dir)
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

/* A file made here whose close did not wait for its writes has no
 * attributes to trust while they are on their way: if name in dir is
 * one, waits for them. Returns whether it waited. */
static bool writes_settled(struct dirdeleg *d, struct inode *dir, const char *name)
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
	bool made = atomic_load(&ip->dd_cover) != 0 && wb_holds(c->wb, ip);
	if (made)
		(void)wb_wait(c->wb, ip);
	inode_forget(c->it, ip, 1);
	return made;
}

/* dir's entry, with bg.lock held, and in *held whether dir is held now
 * (its use noted). An earlier item's error not reported yet is taken
 * into *err (a positive errno; else 0): the caller answers with it. */
static struct ddir *enter_dir(struct dirdeleg *d, struct inode *dir, int *err, bool *held)
{
	struct ddir *e = find(d, &dir->fh);

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
	struct ddir *e = enter_dir(d, dir, err, &held);
	pthread_mutex_unlock(&d->bg.lock);
	if (*err)
		return true;
	if (!held || strlen(name) > PFS_NAME_MAX)
		return false;
	struct inode *file = known_file(c, dir, name, true, false, &a);
	if (!file && writes_settled(d, dir, name))
		file = known_file(c, dir, name, true, false, &a);
	if (!file)
		return false;
	struct ditem *it = calloc(1, sizeof(*it));
	if (!it) {
		inode_forget(c->it, file, 1);
		return false;
	}
	it->m.cr = *cr;
	it->m.parent = dir->fh;
	it->m.name.len = (uint16_t)strlen(name);
	memcpy(it->m.name.s, name, it->m.name.len + 1);
	inode_hold(c->it, dir);
	it->dir = dir;
	it->file = file;

	pthread_mutex_lock(&d->bg.lock);
	while (d->queued + d->inflight >= DD_QUEUE_MAX)
		pthread_cond_wait(&d->idle, &d->bg.lock);
	/* Recalled meanwhile: the usual way. */
	if (!(e = find(d, &dir->fh)) || !e->held || e->err) {
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
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	(void)listing_remove(dir, name);
	(void)inode_own_snap(c->it, &it->ns);
	it->seq = gate_seq(c->gate);
	e->at = inode_own_local(c->it, dir, now.tv_sec, (uint32_t)now.tv_nsec);
	e->pending++;
	atomic_fetch_add(&file->dd_pending, 1);
	it->at_file = inode_own_also(c->it, file);
	*d->tail = it;
	d->tail = &it->next;
	d->queued++;
	atomic_fetch_add(&d->pending, 1);
	d->st.local++;
	bg_wake(&d->bg);
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
							     : find_or_add(d, &dir->fh, &a->ret, &a->has_ret);
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
		a->next = d->asks;
		d->asks = a;
		bg_wake(&d->bg);
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

/* Queues a SLOTS for e (held, dir) by cr, unless one is on its way
 * (bg.lock held). */
static void want_slots(struct dirdeleg *d, struct ddir *e, struct inode *dir,
		       const struct pfs_creds *cr)
{
	if (e->slots_asking || d->no_slots || d->bg.stop || pfs_mono_ns() < e->slots_retry_ns)
		return;
	struct dask *a = calloc(1, sizeof(*a));
	if (!a)
		return;
	e->slots_asking = true;
	inode_hold(d->c->it, dir);
	a->dir = dir;
	a->cr = *cr;
	a->slots = true;
	a->next = d->asks;
	d->asks = a;
	bg_wake(&d->bg);
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
	struct ddir *e = enter_dir(d, dir, err, &held);
	if (*err) {
		pthread_mutex_unlock(&d->bg.lock);
		return true;
	}
	/* Another caller's ids than the slots' are another caller's rights:
	 * the usual way. Too few left: more are asked for. */
	bool mine = held && (!e->nslots || same_creds(&e->scr, cr));
	if (mine && e->nslots <= DD_SLOTS_LOW)
		want_slots(d, e, dir, cr);
	bool ok = mine && e->nslots > 0 && !(perm & ~0777u) && strlen(name) <= PFS_NAME_MAX;
	pthread_mutex_unlock(&d->bg.lock);
	/* The name must be known absent: the listing (coherent under the
	 * delegation: grant_listing) does not have it. */
	if (!ok)
		return false;
	data = NULL;
	int r = listing_find(dir, name, &pe0, &data, &dlen, &lflags, &li);
	if (r == LS_PRESENT)
		free(data);
	if (r != LS_ABSENT)
		return false;

	struct ditem *it = calloc(1, sizeof(*it));
	if (!it)
		return false;
	it->create = true;
	it->mode = perm;
	it->fid = fid;
	it->flags = flags;
	it->m.cr = *cr;
	it->m.parent = dir->fh;
	it->m.name.len = (uint16_t)strlen(name);
	memcpy(it->m.name.s, name, it->m.name.len + 1);

	pthread_mutex_lock(&d->bg.lock);
	while (d->queued + d->inflight >= DD_QUEUE_MAX)
		pthread_cond_wait(&d->idle, &d->bg.lock);
	/* Recalled meanwhile, or the slots went: the usual way. */
	if (!(e = find(d, &dir->fh)) || !e->held || e->err || !e->nslots ||
	    !same_creds(&e->scr, cr)) {
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
	struct inode *file = inode_ref(c->it, pe, &made);
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
	*d->tail = it;
	d->tail = &it->next;
	d->queued++;
	atomic_fetch_add(&d->pending, 1);
	d->st.creates++;
	bg_wake(&d->bg);
	pthread_mutex_unlock(&d->bg.lock);
	*out = file; /* with the lookup of inode_ref, for the kernel */
	return true;
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
	struct ddir *e = find(d, &dir->fh);
	bool ret = e && e->held;
	if (ret) {
		/* A grant on its way is given back too (do_ask). */
		d->ended++;
		e->held = false;
		e->nslots = 0;
		e->syncs = 0;
		e->retry_ns = 0; /* our own change: asked again as usual */
		take_made(d, e, &mv);
		wait_empty(d);
	}
	pthread_mutex_unlock(&d->bg.lock);
	settle(d, &mv, true);
	if (ret) {
		pthread_mutex_lock(&d->ask);
		give_back(d, &dir->fh);
		pthread_mutex_unlock(&d->ask);
	}
}

bool dirdeleg_holds(struct dirdeleg *d, const struct inode *dir)
{
	pthread_mutex_lock(&d->bg.lock);
	struct ddir *e = find(d, &dir->fh);
	bool held = e && e->held;
	pthread_mutex_unlock(&d->bg.lock);
	return held;
}

int dirdeleg_error(struct dirdeleg *d, struct inode *dir)
{
	int err = 0;

	pthread_mutex_lock(&d->bg.lock);
	wait_empty(d);
	struct ddir *e = find(d, &dir->fh);
	if (e && e->err) {
		err = e->err;
		e->err = 0;
	}
	pthread_mutex_unlock(&d->bg.lock);
	return err;
}

void dirdeleg_wait_for(struct dirdeleg *d, struct inode *ip)
{
	if (in_sender || atomic_load(&d->pending) == 0)
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

void dirdeleg_wait_made(struct dirdeleg *d, struct inode *ip)
{
	if (in_sender || atomic_load(&ip->dd_pending) == 0)
		return;
	pthread_mutex_lock(&d->bg.lock);
	d->st.waits++;
	while (atomic_load(&ip->dd_pending) > 0)
		pthread_cond_wait(&d->idle, &d->bg.lock);
	pthread_mutex_unlock(&d->bg.lock);
}

void dirdeleg_drain(struct dirdeleg *d)
{
	if (in_sender || atomic_load(&d->pending) == 0)
		return;
	pthread_mutex_lock(&d->bg.lock);
	wait_empty(d);
	pthread_mutex_unlock(&d->bg.lock);
}

void dirdeleg_recall(struct dirdeleg *d)
{
	struct madev mv = { 0 };

	pthread_mutex_lock(&d->bg.lock);
	end_all(d, &mv);
	wait_empty(d);
	pthread_mutex_unlock(&d->bg.lock);
	/* The other host sees what this one wrote to the files it made,
	 * whose close did not wait. */
	settle(d, &mv, true);
}

void dirdeleg_reconnected(struct dirdeleg *d)
{
	struct madev mv = { 0 };

	pthread_mutex_lock(&d->bg.lock);
	end_all(d, &mv);
	pthread_mutex_unlock(&d->bg.lock);
	settle(d, &mv, false);
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

	if (in_sender)
		return;
	pthread_mutex_lock(&d->bg.lock);
	for (struct ddir *e = d->dirs; e; e = e->next) {
		if (!e->nmade)
			continue;
		prune_made(d, e);
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
	settle(d, &mv, true);
}

void dirdeleg_get_stats(struct dirdeleg *d, struct dirdeleg_stats *st)
{
	pthread_mutex_lock(&d->bg.lock);
	*st = d->st;
	pthread_mutex_unlock(&d->bg.lock);
}
