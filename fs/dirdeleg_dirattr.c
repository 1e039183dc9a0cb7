/* dirdeleg_dirattr.c: changes of a held directory's own attributes
 * (its mode, owner and times), answered here and queued as a SETATTR
 * (see dirdeleg_i.h). */
#include "dirdeleg_i.h"
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include "client_i.h"
#include "dirdeleg_base_i.h"
#include "gate_i.h"
#include "inode_i.h"
#include "podfs/clock.h"
#include "trust_i.h"

/* The queued change of a directory's attributes that m may join: the
 * last item queued, if it is one of dir's by the same caller (tar's
 * utime, chown and chmod of each directory it made, one after the
 * other; bg.lock held). Queued, it has not left: one SETATTR then
 * carries them all, and the daemon's result is the same (a directory
 * loses no set-id bit to a chown; a set-id bit is never answered here). */
static struct ditem *setattr_to_join(struct dirdeleg *d, const struct inode *dir,
				     const struct pfs_setattr_req *m)
{
	if (d->tail == &d->head)
		return NULL;
	struct ditem *last = (struct ditem *)((char *)d->tail - offsetof(struct ditem, next));
	if (!last->setattr || last->dir != dir || !pfs_creds_equal(&last->m.cr, &m->cr))
		return NULL;
	return last;
}

/* m: the changes answered here only (dirdeleg_dir_setattr). */
static void join_setattr(struct pfs_setattr_req *to, const struct pfs_setattr_req *m)
{
	if (m->valid & PFS_SET_MODE)
		to->mode = m->mode;
	if (m->valid & PFS_SET_UID)
		to->uid = m->uid;
	if (m->valid & PFS_SET_GID)
		to->gid = m->gid;
	if (m->valid & PFS_SET_ATIME) {
		to->atime_s = m->atime_s;
		to->atime_ns = m->atime_ns;
	}
	if (m->valid & PFS_SET_MTIME) {
		to->mtime_s = m->mtime_s;
		to->mtime_ns = m->mtime_ns;
	}
	to->valid |= m->valid;
}

bool dirdeleg_dir_setattr(struct dirdeleg *d, struct inode *dir, const struct pfs_setattr_req *m,
			  const struct pfs_attr *na)
{
	struct ditem *it = calloc(1, sizeof(*it));

	if (!it)
		return false;
	it->setattr = true;
	it->sa = *m;
	it->sa.valid |= PFS_SET_DELEG; /* refused if the grant was revoked meanwhile */
	it->m.cr = m->cr;
	it->m.parent = dir->fh;
	pthread_mutex_lock(&d->bg.lock);
	struct ddir *e = dd_find(d, &dir->fh);
	if (!e || !e->held || e->err || d->queued + d->inflight >= DD_QUEUE_MAX) {
		pthread_mutex_unlock(&d->bg.lock);
		free(it);
		return false;
	}
	/* Slots were made under the old rights: none are used after. */
	if (m->valid & (PFS_SET_MODE | PFS_SET_UID | PFS_SET_GID)) {
		e->nslots = 0;
		e->rights_moved = true;
	}
	e->used_ns = pfs_mono_ns();
	struct ditem *last = setattr_to_join(d, dir, m);
	if (last) {
		/* Its stamp is the newest: the daemon's attributes after the
		 * SETATTR are trusted if nothing else of ours happened since
		 * (item_done); the older snapshot of the first change stays,
		 * which can only trust less. */
		join_setattr(&last->sa, m);
		last->at_file = e->at = inode_own_local_attr(d->c->it, dir, na);
		d->st.dir_attrs++;
		d->st.dir_attrs_joined++;
		pthread_mutex_unlock(&d->bg.lock);
		free(it);
		return true;
	}
	/* Answered: its attributes are na, trusted (under the lock: a
	 * recall sees the item queued, or ended the delegation first), and
	 * the daemon's after the item's reply if nothing else of ours
	 * happened to it since. */
	(void)inode_own_snap(d->c->it, &it->ns);
	it->seq = gate_seq(d->c->gate);
	it->at_file = inode_own_local_attr(d->c->it, dir, na);
	e->at = it->at_file; /* the daemon's after the last item there (item_done) */
	e->pending++;
	atomic_fetch_add(&dir->dd_pending, 1);
	inode_hold(d->c->it, dir);
	inode_hold(d->c->it, dir);
	it->dir = it->file = dir;
	dd_enqueue(d, it);
	d->st.dir_attrs++;
	pthread_mutex_unlock(&d->bg.lock);
	return true;
}
