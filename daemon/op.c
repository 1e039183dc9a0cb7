/* op.c: what every handler uses (see op_i.h): resolving handles as root
 * and becoming the caller, the reply buffer, invalidations. Worker
 * threads. */
#include <errno.h>
#include <stdlib.h>

#include "chunks_i.h"
#include "creds_i.h"
#include "handles_i.h"
#include "op_i.h"
#include "pfsd_i.h"
#include "req_i.h"
#include "session_i.h"

void op_note_stale(struct op *o, const struct pfs_fh *fh)
{
	if (o->r->s && handles_foreign(o->d->hs, fh))
		atomic_store_explicit(&o->r->s->foreign_fh, true, memory_order_relaxed);
}

int op_begin(struct op *o, const struct pfs_creds *cr, const struct pfs_fh *fh,
	     const struct pfs_fh *fh2)
{
	int ret = handles_get(o->d->hs, fh, &o->obj);

	if (ret == -ESTALE)
		op_note_stale(o, fh);
	if (ret < 0)
		return ret;
	if (fh2) {
		ret = handles_get(o->d->hs, fh2, &o->obj2);
		if (ret == -ESTALE)
			op_note_stale(o, fh2);
		if (ret < 0)
			goto out_put;
	}
	if (cr && (ret = op_become(o, cr)) < 0)
		goto out_put;
	return 0;

out_put:
	handles_put(o->d->hs, o->obj);
	handles_put(o->d->hs, o->obj2);
	o->obj = o->obj2 = NULL;
	return ret;
}

int op_become(struct op *o, const struct pfs_creds *cr)
{
	int ret;

	o->x.squashed = export_squash_creds(&o->r->rule, cr, &o->cr);
	ret = creds_enter(&o->cr);
	if (ret < 0) {
		o->x.squashed = false;
		return ret;
	}
	o->x.cr = &o->cr;
	return 0;
}

void op_end(struct op *o)
{
	if (o->x.cr)
		creds_leave();
	o->x.cr = NULL;
	o->x.squashed = false;
	handles_put(o->d->hs, o->obj);
	handles_put(o->d->hs, o->obj2);
	o->obj = o->obj2 = NULL;
}

void op_reply_alloc(struct op *o, size_t cap)
{
	pfs_wr_init(&o->w, xmalloc(cap), cap);
}

void op_reply_room(struct op *o)
{
	if (!o->w.buf)
		op_reply_alloc(o, OP_SMALL_REPLY);
}

/* A new invalidation of fh, first in the request's list. */
static struct inval *inval_new(struct op *o, uint16_t op, const struct pfs_fh *fh)
{
	struct inval *iv = xcalloc(1, sizeof(*iv));

	iv->op = op;
	iv->fh = *fh;
	iv->next = o->r->invals;
	o->r->invals = iv;
	return iv;
}

void op_inval_inode(struct op *o, const struct pfs_fh *fh, int64_t off, int64_t len)
{
	struct inval *iv;

	if (!fh->len)
		return;
	/* Its chunks' digests go at once, before the change's reply: a CHUNK
	 * that follows it must not give out the old content's. */
	if (off >= 0 && o->d->chunks)
		chunks_drop(o->d->chunks, handles_key(o->d->hs, fh));
	iv = inval_new(o, PFS_OP_INVAL_INODE, fh);
	iv->off = off;
	iv->len = len;
}

void op_inval_entry(struct op *o, const struct pfs_fh *parent, const struct pfs_name *name)
{
	inval_new(o, PFS_OP_INVAL_ENTRY, parent)->name = *name;
}

void op_inval_dirent(struct op *o, const struct pfs_fh *parent, const struct pfs_name *name)
{
	op_inval_entry(o, parent, name);
	op_inval_inode(o, parent, 0, 0);
}

void op_lock_wake(struct op *o, const struct pfs_fh *fh)
{
	inval_new(o, PFS_OP_LOCK_WAKE, fh);
}
