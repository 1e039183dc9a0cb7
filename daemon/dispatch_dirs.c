/* dispatch_dirs.c: the handlers of directory listings and of the
 * caching requests (READDIR, LISTDIR, REVALIDATE, REVALIDATED), and the
 * worker's half of AUTH. Worker threads (see op_i.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "op_i.h"
#include "podfs/log.h"
#include "podfs/xalloc.h"
#include "pfsd_i.h"
#include "revalhold_i.h"
#include "session_i.h"

int op_readdir(struct op *o)
{
	const struct pfs_readdir_req *m = &o->m.readdir_req;
	uint32_t max_bytes = m->max_bytes < PFS_READDIR_MAX ? m->max_bytes : PFS_READDIR_MAX;

	op_reply_alloc_scratch(o, max_bytes ? max_bytes : 1);
	return export_readdir(&o->x, o->obj, m->fid, m->offset, max_bytes, m->plus != 0, &o->w);
}

/* What o's session asked its listings to carry (export_listdir's how). */
static unsigned ls_how(const struct op *o)
{
	return (o->r->list_xattr ? EXPORT_LS_XATTRS : 0) |
	       (o->r->list_cookies ? EXPORT_LS_COOKIES : 0);
}

int op_listdir(struct op *o)
{
	const struct pfs_listdir_req *m = &o->m.listdir_req;
	uint32_t max_bytes = m->max_bytes < PFS_MAX_IO ? m->max_bytes : PFS_MAX_IO;

	op_reply_alloc_scratch(o, (size_t)max_bytes + 16);
	return export_listdir(&o->x, o->obj, m->max_inline, max_bytes, NULL, ls_how(o),
			      &o->w);
}

int op_listdir_page(struct op *o)
{
	const struct pfs_listdir_page_req *m = &o->m.listdir_page_req;
	uint32_t max_bytes = m->max_bytes < PFS_MAX_IO ? m->max_bytes : PFS_MAX_IO;

	op_reply_alloc_scratch(o, (size_t)max_bytes + 16);
	return export_listdir(&o->x, o->obj, m->max_inline, max_bytes, &m->cookie, ls_how(o),
			      &o->w);
}

/* A listing after the first is stopped short of this much room: a
 * directory that may not fit waits for a request of its own. */
#define LISTDIRS_ROOM_MIN (16u * 1024)
/* Directories waiting to be listed in one LISTDIRS, at most: those
 * requested, then the subdirectories met on the way down (the others
 * are left to a later request). */
#define LISTDIRS_STACK 1024

/* A directory to list: its handle, and its cache entry once resolved. */
struct pending {
	struct pfs_fh fh;
	struct hent *obj; /* NULL: not resolved (yet, or err) */
	int err;          /* requested ones: handles_get's error as root */
	bool requested;
};

/* Puts on the stack (st[*n], at most LISTDIRS_STACK) the subdirectories
 * of the listing at buf[len] (LISTDIR's reply), the first on top. */
static void push_subdirs(struct pending *st, size_t *n, const uint8_t *buf, size_t len)
{
	size_t first = *n;
	struct pfs_rd rd;

	if (len < 4)
		return;
	pfs_rd_init(&rd, buf + 4, len - 4);
	while (rd.left > 0 && *n < LISTDIRS_STACK) {
		struct pfs_name name;
		struct pfs_entry e;
		struct pfs_bytes data;
		uint32_t fl;
		if (!pfs_get_NAME(&rd, &name) || !pfs_get_ENTRY(&rd, &e) || !pfs_get_U32(&rd, &fl) ||
		    !pfs_get_BYTES(&rd, &data))
			break;
		if (S_ISDIR(e.attr.mode))
			st[(*n)++] = (struct pending){ .fh = e.fh };
	}
	for (size_t i = first, j = *n; i + 1 < j; i++, j--) {
		struct pending t = st[i];
		st[i] = st[j - 1];
		st[j - 1] = t;
	}
}

/* One item of the reply: dir's entry, its status and its listing, the
 * item at most room bytes. Returns 1 if listed (*complete: the listing
 * is), 0 if answered with an error status, or -ENOBUFS (w unchanged). */
static int listdirs_item(struct op *o, const struct pfs_fh *fh, struct hent *obj, int err,
			 uint32_t room, bool *complete)
{
	struct pfs_entry e = { .fh = *fh };
	size_t save = o->w.len, at;
	uint32_t status = 0;
	int r = err;

	*complete = false;
	if (r == 0) {
		/* Interest in the directory before it is read, as LISTDIR's
		 * row registers it. */
		export_note(&o->x, fh);
		r = export_getattr(obj->fd, &e.attr);
	}
	if (pfs_put_ENTRY(&o->w, &e) < 0 || pfs_put_U32(&o->w, &status) < 0 ||
	    pfs_bytes_open(&o->w, &at) < 0 || o->w.len - save >= room)
		goto full;
	if (r == 0)
		r = export_listdir(&o->x, obj, 0, room - (uint32_t)(o->w.len - save),
				   NULL, ls_how(o), &o->w);
	if (r < 0) {
		o->w.len = at + 4;
		pfs_patch_U32(&o->w, at - 4, (uint32_t)-r);
	}
	if (pfs_bytes_close(&o->w, at) < 0)
		goto full;
	*complete = r == 0 && (o->w.buf[at + 4] & PFS_LS_COMPLETE);
	return r == 0;
full:
	o->w.len = save;
	return -ENOBUFS;
}

/* LISTDIRS resolves the requested handles as root, then lists as the
 * caller (one credential switch for the lot), depth first: each
 * directory, then its subdirectories, while max_dirs and the room last. */
int op_listdirs(struct op *o)
{
	const struct pfs_listdirs_req *m = &o->m.listdirs_req;
	uint32_t max_bytes = m->max_bytes < PFS_MAX_IO ? m->max_bytes : PFS_MAX_IO;
	uint32_t max_dirs = m->max_dirs < PFS_LISTDIRS_ITEMS_MAX ? m->max_dirs
								 : PFS_LISTDIRS_ITEMS_MAX;
	struct pfs_fh req[PFS_LISTDIRS_MAX];
	struct pending *st = NULL;
	size_t n = 0, ns = 0;
	uint32_t done = 0;
	struct pfs_rd rd;
	int ret;

	/* Validate and count first: nothing is resolved for a bad list. */
	pfs_rd_init(&rd, m->fhs.p, m->fhs.len);
	for (;;) {
		struct pfs_fh f;
		ret = pfs_dec_fh_item(&rd, &f);
		if (ret < 0)
			return -EINVAL;
		if (ret == 0)
			break;
		if (n == PFS_LISTDIRS_MAX)
			return -E2BIG;
		req[n++] = f;
	}
	if (n == 0 || max_bytes < 16 || max_dirs == 0)
		return -EINVAL;
	/* The stack, the first requested on top, resolved as root. */
	st = xmalloc(LISTDIRS_STACK * sizeof(*st));
	for (size_t i = n; i-- > 0;) {
		struct pending *p = &st[ns++];
		*p = (struct pending){ .fh = req[i], .requested = true };
		p->err = handles_get(o->d->hs, &req[i], &p->obj);
		if (p->err == -ESTALE)
			op_note_stale(o, &req[i]);
		if (p->err < 0)
			p->obj = NULL;
	}
	/* A requested directory with another session's delegations in it:
	 * recalled first (the whole request runs again after). Only handles
	 * that resolved: a forged one must not reach the interest table. */
	for (size_t k = 0; k < n; k++) {
		if (st[k].err == 0 && op_recall_check(o, &st[k].fh)) {
			ret = -OP_RECALL;
			goto out_put;
		}
	}
	ret = op_become(o, &m->cr);
	if (ret < 0)
		goto out_put;
	op_reply_alloc_scratch(o, (size_t)max_bytes + 16);
	while (ns > 0 && done < max_dirs) {
		struct pending *p = &st[ns - 1];
		uint32_t left = max_bytes - (uint32_t)o->w.len;
		size_t save = o->w.len;
		bool complete;

		if (done > 0 && left < LISTDIRS_ROOM_MIN)
			break;
		/* Met on the way down: its fd was just cached by its parent's
		 * listing (resolving it anew would need root): otherwise it
		 * is left to a later request. */
		if (!p->requested && handles_get(o->d->hs, &p->fh, &p->obj) < 0) {
			ns--;
			continue;
		}
		/* One met on the way with another session's delegations in
		 * it is left to a later request (which recalls them). */
		if (!p->requested && op_recall_check(o, &p->fh)) {
			o->r->recall = false;
			o->r->nrecall = 0;
			handles_put(o->d->hs, p->obj);
			ns--;
			continue;
		}
		int r = listdirs_item(o, &p->fh, p->obj, p->err, left, &complete);
		if (r < 0)
			break;
		if (r == 1 && !complete && done > 0) {
			/* Incomplete, maybe for want of room: asked again alone. */
			o->w.len = save;
			break;
		}
		done++;
		struct hent *obj = p->obj;
		ns--;
		if (r == 1 && complete) {
			/* Its subdirectories next: the listing follows the
			 * item's entry, status and length. */
			struct pfs_rd ir;
			struct pfs_entry e;
			uint32_t status, len;
			pfs_rd_init(&ir, o->w.buf + save, o->w.len - save);
			if (pfs_get_ENTRY(&ir, &e) && pfs_get_U32(&ir, &status) &&
			    pfs_get_U32(&ir, &len) && len <= ir.left)
				push_subdirs(st, &ns, ir.p, len);
		}
		handles_put(o->d->hs, obj);
	}
	ret = 0;
	op_end(o);
out_put:
	for (size_t i = 0; i < ns; i++)
		handles_put(o->d->hs, st[i].obj);
	free(st);
	return ret;
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

	atomic_store(&o->r->c->revalidated, true);
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

/* REVALIDATED: the client's revalidation after a reconnect is over; a
 * hold after a restart may end (revalhold_i.h; server.c lets the replies
 * it held go). It counts only if its REVALIDATEs came on this connection:
 * one sent after a revalidation whose connection then dropped is resent
 * on the next, before the revalidation that must follow (podfs runs them
 * one after the other), and registered nothing here. */
int op_revalidated(struct op *o)
{
	const struct pfs_revalidated_req *m = &o->m.revalidated_req;
	struct session *s = o->r->s;

	if (m->items && !atomic_load(&o->r->c->revalidated)) {
		pfs_debug("conn %llu: REVALIDATED without a REVALIDATE on it: not counted",
			  (unsigned long long)o->r->c->id);
		return 0;
	}
	revalhold_done(o->d->rh, s->client_id, s->host, m->items, m->changed);
	return 0;
}

/* The AUTH reply, once the loop accepted the client's proof: the root's
 * handle and attributes (a disk operation) and the session's flags. */
int op_auth(struct op *o)
{
	struct pfs_auth_rep rep;
	int ret;

	/* On the list of sessions before the client can cache anything: a
	 * restart then waits for it to revalidate (revalhold_i.h). */
	if (o->r->s)
		revalhold_note_client(o->d->rh, o->r->s->client_id, o->r->s->host);
	memset(&rep, 0, sizeof(rep));
	rep.root.fh = *handles_root(o->d->hs);
	export_note(&o->x, &rep.root.fh);
	ret = export_getattr(handles_export_fd(o->d->hs), &rep.root.attr);
	if (ret < 0)
		return ret;
	rep.flags = o->r->auth_flags;
	return OP_ENCODE(o, auth_rep, &rep);
}
