/* deleg.c: attribute delegations held by this client (see deleg_i.h). */
#include "deleg_i.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "client_i.h"
#include "deleg_rules_i.h"
#include "gate_i.h"
#include "inode_i.h"
#include "podfs/log.h"
#include "rpc_i.h"
#include "trust_i.h"

struct dent {
	struct dent *next;
	struct inode *ip;       /* held open by the kernel while the entry lives */
	struct pfs_fh fh, parent;
	uint64_t fid;           /* the CREATE's */
	bool active;            /* changes are answered here */
	bool flushing;          /* a thread sends the pending change */
	unsigned users;         /* threads in send_pending: no free before 0 */
	bool pending;           /* answered here, not sent yet */
	struct pfs_creds cr;    /* of the pending change */
	uint32_t valid;         /* its PFS_SET_* bits */
	struct dl_attr cur;     /* the file's attributes, as answered here */
	int err;                /* not reported yet */
};

struct deleg {
	struct client *c;
	pthread_mutex_t mu;
	pthread_cond_t cond;    /* a flush ended */
	struct dent *head;
	struct deleg_stats st;
};

int deleg_new(struct client *c, struct deleg **out)
{
	struct deleg *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	d->c = c;
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cond, NULL);
	*out = d;
	return 0;
}

void deleg_free(struct deleg *d)
{
	if (!d)
		return;
	while (d->head) {
		struct dent *e = d->head;
		d->head = e->next;
		free(e);
	}
	pthread_cond_destroy(&d->cond);
	pthread_mutex_destroy(&d->mu);
	free(d);
}

static struct dent *find(struct deleg *d, struct inode *ip)
{
	for (struct dent *e = d->head; e; e = e->next)
		if (e->ip == ip)
			return e;
	return NULL;
}

/* e's pending change as a SETATTR (valid without PFS_SET_DELEG); e no
 * longer has it (mu held). */
static void take_pending(struct dent *e, struct pfs_setattr_req *m)
{
	memset(m, 0, sizeof(*m));
	m->cr = e->cr;
	m->fh = e->fh;
	m->valid = e->valid;
	m->mode = e->cur.mode;
	m->uid = e->cur.uid;
	m->gid = e->cur.gid;
	m->atime_s = e->cur.atime_s;
	m->atime_ns = e->cur.atime_ns;
	m->mtime_s = e->cur.mtime_s;
	m->mtime_ns = e->cur.mtime_ns;
	e->pending = false;
	e->valid = 0;
}

void deleg_granted(struct deleg *d, struct inode *ip, const struct pfs_fh *parent, uint64_t fid,
		   const struct pfs_attr *a)
{
	struct dent *e = calloc(1, sizeof(*e));

	if (!e)
		return; /* answered by the daemon, as without one */
	e->ip = ip;
	e->fh = ip->fh;
	e->parent = *parent;
	e->fid = fid;
	e->active = true;
	dl_attr_of(a, &e->cur);
	pthread_mutex_lock(&d->mu);
	e->next = d->head;
	d->head = e;
	d->st.granted++;
	pthread_mutex_unlock(&d->mu);
}

bool deleg_has(struct deleg *d, struct inode *ip)
{
	pthread_mutex_lock(&d->mu);
	bool has = find(d, ip) != NULL;
	pthread_mutex_unlock(&d->mu);
	return has;
}

bool deleg_setattr(struct deleg *d, struct inode *ip, const struct pfs_creds *cr,
		   const struct pfs_setattr_req *m, const struct pfs_attr *base, struct pfs_attr *a)
{
	struct dl_attr out;
	bool ok = false;

	pthread_mutex_lock(&d->mu);
	struct dent *e = find(d, ip);
	/* One pending change per caller: another caller's waits for it. */
	if (!e || !e->active || (e->pending && !pfs_creds_equal(&e->cr, cr)))
		goto out;
	/* Times not set here move with reads and writes: the latest known. */
	if (!(e->valid & PFS_SET_ATIME)) {
		e->cur.atime_s = base->atime_s;
		e->cur.atime_ns = base->atime_ns;
	}
	if (!(e->valid & PFS_SET_MTIME)) {
		e->cur.mtime_s = base->mtime_s;
		e->cur.mtime_ns = base->mtime_ns;
	}
	if (!dl_setattr(&e->cur, cr, m, &out))
		goto out;
	e->cur = out;
	if (!e->pending)
		e->cr = *cr;
	e->pending = true;
	e->valid |= m->valid & (PFS_SET_MODE | PFS_SET_UID | PFS_SET_GID | PFS_SET_ATIME |
				PFS_SET_MTIME);
	d->st.local++;
	dl_answer(base, &out, a);
	inode_overlay_set(ip, a);
	ok = true;
out:
	pthread_mutex_unlock(&d->mu);
	return ok;
}

/* Sends e's pending change (d->mu held on entry and on return; dropped
 * meanwhile). Returns 0 or the daemon's error. */
static int send_pending(struct deleg *d, struct dent *e)
{
	struct pfs_setattr_req m;
	struct rpc_reply rep = { 0 };
	struct pfs_attr_rep ar;
	int rc;

	e->users++;
	while (e->flushing)
		pthread_cond_wait(&d->cond, &d->mu);
	if (!e->pending) {
		e->users--;
		pthread_cond_broadcast(&d->cond);
		return 0;
	}
	take_pending(e, &m);
	m.valid |= PFS_SET_DELEG;
	e->flushing = true;
	d->st.sent++;
	pthread_mutex_unlock(&d->mu);
	/* Our own change of the file, as any (trust_i.h): what was read of
	 * it before its reply, a listing taken meanwhile, is not trusted. */
	uint64_t ns;
	(void)inode_own_snap(d->c->it, &ns);
	uint64_t at = inode_own_touch(d->c->it, e->ip, false);
	uint64_t seq = gate_seq(d->c->gate);
	rc = rpc_msg_in(d->c->rpc, e->ip, PFS_OP_SETATTR, setattr_req, &m, &rep);
	if (rc == 0 && pfs_dec_attr_rep(rep.buf, rep.len, &ar) < 0)
		rc = -EIO;
	rpc_reply_free(&rep);
	pthread_mutex_lock(&d->mu);
	e->flushing = false;
	if (rc < 0) {
		d->st.errors++;
		pfs_warn("a change of attributes answered under a delegation was refused: %s",
			 strerror(-rc));
		e->active = false; /* the daemon no longer takes them */
	}
	/* The daemon has them (or refused them): its attributes (its
	 * ctime) from now on, unless more were answered here meanwhile. */
	if (!e->pending)
		inode_overlay_set(e->ip, NULL);
	inode_own_end(d->c->it, e->ip, rc == 0 ? &ar.attr : NULL, seq, at, ns);
	e->users--;
	pthread_cond_broadcast(&d->cond);
	return rc;
}

int deleg_flush(struct deleg *d, struct inode *ip, bool report)
{
	int rc = 0;

	pthread_mutex_lock(&d->mu);
	struct dent *e = find(d, ip);
	if (e) {
		rc = send_pending(d, e);
		if (rc < 0 && !e->err)
			e->err = rc;
		rc = 0;
		if (report) {
			rc = e->err;
			e->err = 0;
		}
	}
	pthread_mutex_unlock(&d->mu);
	return rc;
}

void deleg_note_attr(struct deleg *d, struct inode *ip, const struct pfs_attr *a)
{
	pthread_mutex_lock(&d->mu);
	struct dent *e = find(d, ip);
	if (e && !e->pending && !e->flushing)
		dl_attr_of(a, &e->cur);
	pthread_mutex_unlock(&d->mu);
}

void deleg_end(struct deleg *d, struct inode *ip)
{
	pthread_mutex_lock(&d->mu);
	struct dent *e = find(d, ip);
	if (e) {
		e->active = false;
		int rc = send_pending(d, e);
		if (rc < 0 && !e->err)
			e->err = rc;
	}
	pthread_mutex_unlock(&d->mu);
}

void deleg_closed(struct deleg *d, struct inode *ip, uint64_t fid)
{
	pthread_mutex_lock(&d->mu);
	struct dent *e = find(d, ip);
	if (e && e->fid == fid)
		e->active = false;
	pthread_mutex_unlock(&d->mu);
}

bool deleg_take(struct deleg *d, struct inode *ip, uint64_t fid, const struct pfs_creds *cr,
		struct pfs_setattr_req *m)
{
	bool ok = false;

	pthread_mutex_lock(&d->mu);
	struct dent *e = find(d, ip);
	if (e && e->fid == fid && e->pending && !e->flushing && pfs_creds_equal(&e->cr, cr)) {
		take_pending(e, m);
		d->st.sent++;
		ok = true;
	}
	pthread_mutex_unlock(&d->mu);
	return ok;
}

void deleg_release(struct deleg *d, struct inode *ip, uint64_t fid)
{
	pthread_mutex_lock(&d->mu);
	for (struct dent **pp = &d->head, *e; (e = *pp); pp = &e->next) {
		if (e->ip != ip || e->fid != fid)
			continue;
		e->active = false;
		(void)send_pending(d, e);
		/* The list may have changed while the lock was dropped. Out
		 * of it first (nobody finds it any more), then freed once no
		 * other thread is inside send_pending with it. */
		for (pp = &d->head; *pp && *pp != e; pp = &(*pp)->next)
			;
		if (*pp)
			*pp = e->next;
		while (e->users || e->flushing)
			pthread_cond_wait(&d->cond, &d->mu);
		inode_overlay_set(ip, NULL);
		free(e);
		break;
	}
	pthread_mutex_unlock(&d->mu);
}

void deleg_recall(struct deleg *d, const struct pfs_fh *fh)
{
	pthread_mutex_lock(&d->mu);
	/* Every delegation of this client ends, not only those on fh or in
	 * directory fh: the daemon follows a file we renamed into another
	 * directory, and this client does not know which file a rename
	 * moved. First nothing more is answered here, then what was is sent. */
	(void)fh;
	for (struct dent *e = d->head; e; e = e->next)
		if (e->active) {
			e->active = false;
			d->st.recalls++;
		}
again:
	for (struct dent *e = d->head; e; e = e->next) {
		if (e->pending || e->flushing) {
			/* Returns once what was pending, or a flush under way
			 * by another thread, was answered (no change is added
			 * to an entry that is not active). */
			int rc = send_pending(d, e);
			if (rc < 0 && !e->err)
				e->err = rc;
			goto again; /* the list may have changed meanwhile */
		}
	}
	pthread_mutex_unlock(&d->mu);
}

void deleg_reconnected(struct deleg *d)
{
	pthread_mutex_lock(&d->mu);
	for (struct dent *e = d->head; e; e = e->next)
		e->active = false;
	pthread_mutex_unlock(&d->mu);
}

void deleg_get_stats(struct deleg *d, struct deleg_stats *st)
{
	pthread_mutex_lock(&d->mu);
	*st = d->st;
	pthread_mutex_unlock(&d->mu);
}
