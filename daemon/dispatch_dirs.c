/* dispatch_dirs.c: the handlers of directory listings and of the
 * caching requests (READDIR, LISTDIR, REVALIDATE), and the worker's half
 * of AUTH. Worker threads (see op_i.h). */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "op_i.h"
#include "pfsd_i.h"

int op_readdir(struct op *o)
{
	const struct pfs_readdir_req *m = &o->m.readdir_req;
	uint32_t max_bytes = m->max_bytes < PFS_READDIR_MAX ? m->max_bytes : PFS_READDIR_MAX;

	op_reply_alloc(o, max_bytes ? max_bytes : 1);
	return export_readdir(&o->x, o->obj, m->fid, m->offset, max_bytes, m->plus != 0, &o->w);
}

int op_listdir(struct op *o)
{
	const struct pfs_listdir_req *m = &o->m.listdir_req;
	uint32_t max_bytes = m->max_bytes < PFS_MAX_IO ? m->max_bytes : PFS_MAX_IO;

	op_reply_alloc(o, (size_t)max_bytes + 16);
	return export_listdir(&o->x, o->obj, m->max_inline, max_bytes, NULL, &o->w);
}

int op_listdir_page(struct op *o)
{
	const struct pfs_listdir_page_req *m = &o->m.listdir_page_req;
	uint32_t max_bytes = m->max_bytes < PFS_MAX_IO ? m->max_bytes : PFS_MAX_IO;

	op_reply_alloc(o, (size_t)max_bytes + 16);
	return export_listdir(&o->x, o->obj, m->max_inline, max_bytes, &m->cookie, &o->w);
}

static bool version_differs(const struct pfs_reval_item *it, const struct pfs_attr *a)
{
	return it->size != a->size || it->mtime_s != a->mtime_s || it->mtime_ns != a->mtime_ns ||
	       it->ctime_s != a->ctime_s || it->ctime_ns != a->ctime_ns;
}

#define RESULT_WIRE (4 + 4 + PFS_ATTR_WIRE_SIZE)

/* One item: its result, or 1 if it is unchanged (nothing to say). */
static int revalidate_one(struct op *o, const struct pfs_reval_item *it, struct pfs_reval_result *res)
{
	struct hent *e;
	int ret;

	/* fstat needs no permission: no credential switch. */
	ret = handles_get(o->d->hs, &it->fh, &e);
	if (ret == -ESTALE)
		op_note_stale(o, &it->fh);
	if (ret == 0) {
		/* Trusted again from now on: interest before the stat. */
		export_note(&o->x, &it->fh);
		ret = export_getattr(e->fd, &res->attr);
		if (ret == 0 && S_ISDIR(res->attr.mode))
			watch_dir(o->x.watch, e->fd, &it->fh);
		/* Unlinked (we held it open): gone from the namespace. */
		if (ret == 0 && res->attr.nlink == 0) {
			ret = -ESTALE;
			handles_forget(o->d->hs, &it->fh);
		}
		handles_put(o->d->hs, e);
	}
	if (ret < 0) {
		memset(&res->attr, 0, sizeof(res->attr));
		res->status = (uint32_t)-ret;
		return 0;
	}
	return version_differs(it, &res->attr) ? 0 : 1;
}

/* REVALIDATE runs without a credential switch (its row in dispatch.c):
 * every item is resolved as root, one after the other. */
int op_revalidate(struct op *o)
{
	const struct pfs_revalidate_req *m = &o->m.revalidate_req;
	struct pfs_reval_item it;
	struct pfs_rd rd;
	uint32_t count = 0, idx = 0;
	size_t at;
	int ret;

	/* Validate and count first: nothing is registered for a bad list. */
	pfs_rd_init(&rd, m->items.p, m->items.len);
	while ((ret = pfs_dec_reval_item(&rd, &it)) == 1)
		if (++count > PFS_BATCH_MAX)
			return -E2BIG;
	if (ret < 0)
		return -EINVAL;
	op_reply_alloc(o, 4 + (size_t)count * RESULT_WIRE);
	if (pfs_bytes_open(&o->w, &at) < 0)
		return -EIO;
	pfs_rd_init(&rd, m->items.p, m->items.len);
	while (pfs_dec_reval_item(&rd, &it) == 1) {
		struct pfs_reval_result res;

		memset(&res, 0, sizeof(res));
		res.index = idx++;
		if (revalidate_one(o, &it, &res) == 0 && pfs_enc_reval_result(&o->w, &res) < 0)
			return -EIO;
	}
	return pfs_bytes_close(&o->w, at) < 0 ? -EIO : 0;
}

/* The AUTH reply, once the loop accepted the client's proof: the root's
 * handle and attributes (a disk operation) and the session's flags. */
int op_auth(struct op *o)
{
	struct pfs_auth_rep rep;
	int ret;

	memset(&rep, 0, sizeof(rep));
	rep.root.fh = *handles_root(o->d->hs);
	export_note(&o->x, &rep.root.fh);
	ret = export_getattr(handles_export_fd(o->d->hs), &rep.root.attr);
	if (ret < 0)
		return ret;
	rep.flags = o->r->auth_flags;
	return OP_ENCODE(o, auth_rep, &rep);
}
