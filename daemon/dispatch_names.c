/* dispatch_names.c: the handlers of operations on names (LOOKUP,
 * LOOKUP_DATA, MKNOD, MKDIR, SYMLINK, UNLINK, RMDIR, RENAME, LINK,
 * CREATE): the export call, the invalidations its change makes for other
 * clients, the reply. Worker threads (see op_i.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "podfs/le.h"
#include "podfs/log.h"

#include "deleg_i.h"
#include "handles_i.h"
#include "op_i.h"
#include "pfsd_i.h"
#include "session_i.h"
#include "slots_i.h"

/* The attributes of dir after a change in it, if the session takes them
 * (PFS_CAP_DIR_ATTR): the client then knows them without a GETATTR. */
static bool dir_attr(struct op *o, struct hent *dir, struct pfs_attr *a)
{
	return o->r->dir_attr && export_getattr(dir->fd, a) == 0;
}

/* The reply to an entry made: entry_dir_rep with dir, the directory's
 * attributes after the change, else entry_rep. */
static int reply_entry(struct op *o, const struct pfs_entry *e, const struct pfs_attr *dir)
{
	if (dir) {
		struct pfs_entry_dir_rep rep = { .e = *e, .dir = *dir };
		return OP_ENCODE(o, entry_dir_rep, &rep);
	}
	struct pfs_entry_rep rep = { .e = *e };
	return OP_ENCODE(o, entry_rep, &rep);
}

/* reply_entry for an entry made in dir, with its attributes if the
 * session takes them. */
static int reply_entry_in(struct op *o, const struct pfs_entry *e, struct hent *dir)
{
	struct pfs_attr a;

	return reply_entry(o, e, dir_attr(o, dir, &a) ? &a : NULL);
}

int op_lookup(struct op *o)
{
	const struct pfs_lookup_req *m = &o->m.lookup_req;
	struct pfs_entry_rep rep;
	int ret = export_lookup(&o->x, o->obj->fd, m->name.s, &rep.e);

	return ret < 0 ? ret : OP_ENCODE(o, entry_rep, &rep);
}

int op_lookup_data(struct op *o)
{
	const struct pfs_lookup_data_req *m = &o->m.lookup_data_req;
	struct pfs_lookup_data_rep rep;
	uint32_t max_inline = m->max_inline < PFS_INLINE_MAX ? m->max_inline : PFS_INLINE_MAX;
	uint8_t *buf = xmalloc((size_t)max_inline + 1);
	int ret;

	ret = export_lookup_data(&o->x, o->obj->fd, m->name.s, max_inline, &rep.e, buf,
				 &rep.data.len, &rep.flags, NULL);
	if (ret == 0) {
		rep.data.p = buf;
		op_reply_alloc(o, 64 + PFS_FH_MAX + PFS_ATTR_WIRE_SIZE + rep.data.len);
		ret = OP_ENCODE(o, lookup_data_rep, &rep);
	}
	free(buf);
	return ret;
}

/* A change sent again after a restart that the instance before began
 * (req_i.h: begun) and that fails now as made: name in dirfd is an object
 * of type fmt (S_IFMT bits; 0: any). Its entry into *e and 0, or err.
 * (MKDIR, MKNOD, SYMLINK, LINK, RENAME; UNLINK, RMDIR and CREATE below,
 * the xattrs in dispatch_xattrs.c.) */
static int made_before(struct op *o, int err, int dirfd, const char *name, uint32_t fmt,
		       struct pfs_entry *e)
{
	if (!o->r->begun || export_lookup(&o->x, dirfd, name, e) < 0 ||
	    (fmt && (e->attr.mode & S_IFMT) != fmt))
		return err;
	pfs_debug("%s: made by the instance before, found made", pfs_op_name(o->r->h.op));
	return 0;
}

int op_mknod(struct op *o)
{
	const struct pfs_mknod_req *m = &o->m.mknod_req;
	struct pfs_entry e;
	int ret = export_mknod(&o->x, o->obj->fd, m->name.s, m->mode, m->rdev, m->umask, &e);

	if (ret == -EEXIST)
		ret = made_before(o, ret, o->obj->fd, m->name.s, m->mode & S_IFMT, &e);
	if (ret < 0)
		return ret;
	op_inval_dirent(o, &m->parent, &m->name);
	return reply_entry_in(o, &e, o->obj);
}

static int make_slots(struct op *o, int dirfd, uint64_t dkey, unsigned want, struct pfs_wr *w,
		      unsigned *made);

int op_mkdir(struct op *o)
{
	const struct pfs_mkdir_req *m = &o->m.mkdir_req;
	struct pfs_mkdir_rep rep = { 0 };
	bool have_da, empty = false;
	uint32_t absent = 0;
	int ret = export_mkdir(&o->x, o->obj->fd, m->name.s, m->mode, m->umask, &rep.e,
			       o->r->new_dir ? &empty : NULL,
			       o->r->new_dir && o->r->new_xattrs ? &absent : NULL);

	if (ret == -EEXIST) /* (not known empty: no delegation) */
		ret = made_before(o, ret, o->obj->fd, m->name.s, S_IFDIR, &rep.e);
	if (ret < 0)
		return ret;
	op_inval_dirent(o, &m->parent, &m->name);
	have_da = dir_attr(o, o->obj, &rep.dir);
	if (!have_da || !o->r->new_dir)
		return reply_entry(o, &rep.e, have_da ? &rep.dir : NULL);
	rep.flags = (empty ? PFS_MK_EMPTY : 0) | absent;
	/* Asked for: the new directory's delegation, and slots there, so
	 * that the first creates in it are answered by the client too. */
	uint64_t dkey = handles_key(o->d->hs, &rep.e.fh);
	struct hent *h = NULL;
	if (m->slots && empty && !o->x.squashed &&
	    op_grant_dir(o, dkey, handles_key(o->d->hs, &m->parent))) {
		rep.flags |= PFS_MK_DELEG;
		unsigned want = m->slots < PFS_SLOTS_MAX ? m->slots : PFS_SLOTS_MAX, n;
		size_t cap = 64 + (size_t)want * (2 + PFS_FH_MAX + PFS_ATTR_WIRE_SIZE);
		struct pfs_wr w;
		uint8_t *buf = xmalloc(cap);
		pfs_wr_init(&w, buf, cap);
		/* Its fd was kept by export_mkdir (handles_adopt). */
		if (handles_get(o->d->hs, &rep.e.fh, &h) == 0)
			(void)make_slots(o, h->fd, dkey, want, &w, &n);
		handles_put(o->d->hs, h);
		rep.slots.p = buf;
		rep.slots.len = (uint32_t)w.len;
		op_reply_alloc(o, 1024 + cap);
	}
	ret = OP_ENCODE(o, mkdir_rep, &rep);
	free((void *)rep.slots.p);
	return ret;
}

int op_symlink(struct op *o)
{
	const struct pfs_symlink_req *m = &o->m.symlink_req;
	struct pfs_entry e;
	int ret = export_symlink(&o->x, o->obj->fd, m->name.s, m->target.s, &e);

	if (ret == -EEXIST)
		ret = made_before(o, ret, o->obj->fd, m->name.s, S_IFLNK, &e);
	if (ret < 0)
		return ret;
	op_inval_dirent(o, &m->parent, &m->name);
	return reply_entry_in(o, &e, o->obj);
}

/* UNLINK and RMDIR. */
static int unlink_name(struct op *o, bool dir)
{
	const struct pfs_unlink_req *m = &o->m.unlink_req;
	struct pfs_dir_rep rep;
	struct pfs_fh victim;
	int ret = export_unlink(&o->x, o->obj->fd, m->name.s, dir, &victim);

	if (ret == -ENOENT && o->r->begun) {
		/* Removed by the instance before (req_i.h: begun); what it
		 * removed is not known. */
		pfs_debug("%s: made by the instance before, found made", pfs_op_name(o->r->h.op));
		victim.len = 0;
		ret = 0;
	}
	if (ret < 0)
		return ret;
	op_inval_dirent(o, &m->parent, &m->name);
	op_inval_inode(o, &victim, -1, 0);
	/* A directory delegation of what is gone ends with it. */
	if (dir && victim.len && o->d->deleg)
		deleg_drop_dir(o->d->deleg, 0, handles_key(o->d->hs, &victim));
	/* What was removed (PFS_CAP_UNLINK_VICTIM): the client then knows
	 * which object lost a link (its listing said which it expected). */
	if (o->r->unlink_victim) {
		struct pfs_unlink_rep ur = { 0 };
		if (dir_attr(o, o->obj, &ur.dir))
			ur.flags |= PFS_UR_DIR;
		if (victim.len) {
			ur.flags |= PFS_UR_VICTIM;
			ur.victim = (struct pfs_bytes){ victim.data, victim.len };
		}
		return OP_ENCODE(o, unlink_rep, &ur);
	}
	return dir_attr(o, o->obj, &rep.dir) ? OP_ENCODE(o, dir_rep, &rep) : 0;
}

int op_unlinks(struct op *o)
{
	const struct pfs_unlinks_req *m = &o->m.unlinks_req;
	struct pfs_unlinks_rep rep = { 0 };
	struct pfs_name name;
	struct pfs_fh victim;
	struct pfs_rd rd;
	uint8_t status[PFS_UNLINKS_MAX * 4];
	size_t n = 0;

	/* The whole list is checked before any name is removed. */
	pfs_rd_init(&rd, m->names.p, m->names.len);
	while (rd.left > 0) {
		if (n == PFS_UNLINKS_MAX)
			return -E2BIG;
		if (!pfs_get_NAME(&rd, &name))
			return -EINVAL;
		n++;
	}
	if (n == 0)
		return -EINVAL;
	/* Answered by the client under its directory delegation: refused
	 * if it was revoked meanwhile (another client saw the names before
	 * them; wire_deleg.h). One the table does not know (ended
	 * at a recall the holder acknowledged, or a restart) does not
	 * refuse them. */
	if (o->d->deleg && o->r->s &&
	    deleg_check(o->d->deleg, o->r->s->client_id, handles_key(o->d->hs, &m->parent)) < 0) {
		pfs_info("session %016llx: unlinks under a revoked directory delegation refused",
			 (unsigned long long)o->r->s->client_id);
		return -EIO;
	}
	pfs_rd_init(&rd, m->names.p, m->names.len);
	for (size_t i = 0; i < n; i++) {
		(void)pfs_get_NAME(&rd, &name);
		int ret = export_unlink(&o->x, o->obj->fd, name.s, false, &victim);
		pfs_store_le32(status + 4 * i, ret < 0 ? (uint32_t)-ret : 0);
		if (ret < 0)
			continue;
		op_inval_entry(o, &m->parent, &name);
		op_inval_inode(o, &victim, -1, 0);
	}
	op_inval_inode(o, &m->parent, 0, 0);
	if (export_getattr(o->obj->fd, &rep.dir) == 0)
		rep.flags = PFS_UL_DIR_ATTR;
	rep.status.p = status;
	rep.status.len = (uint32_t)(4 * n);
	op_reply_alloc(o, 1024);
	return OP_ENCODE(o, unlinks_rep, &rep);
}

/* Makes up to want slots of the session in directory dirfd (handle key
 * dkey), as many as its room allows, their entries put in w; *made says
 * how many. Returns 0, or the error that stopped it. */
static int make_slots(struct op *o, int dirfd, uint64_t dkey, unsigned want, struct pfs_wr *w,
		      unsigned *made)
{
	struct session *s = o->r->s;
	struct pfs_entry e;
	unsigned n = 0;
	int ret = 0;

	want = slots_room(s, o->d->deleg, want);
	for (; n < want; n++) {
		int fd;
		if ((ret = session_fid_reserve(s)) < 0)
			break;
		if ((ret = export_slot_make(&o->x, dirfd, &fd, &e)) < 0) {
			session_fid_unreserve(s);
			break;
		}
		if (pfs_put_ENTRY(w, &e) < 0 || !slots_add(s, fd, &e.fh, dkey, o->x.cr->uid)) {
			close(fd);
			session_fid_unreserve(s);
			ret = -ENOMEM;
			break;
		}
	}
	*made = n;
	return ret;
}

int op_slots(struct op *o)
{
	const struct pfs_slots_req *m = &o->m.slots_req;
	struct deleg *t = o->d->deleg;
	struct session *s = o->r->s;
	struct pfs_slots_rep rep = { 0 };
	struct pfs_wr w;
	unsigned n = 0;
	int ret = 0;

	if (!t || !s || !o->r->deleg)
		return -ENOSYS;
	/* The client answers creates with these as the caller would make
	 * them: ids that reach the kernel as they are (op_deleg_dir). */
	if (o->r->rule.squash != EXPORT_SQUASH_NONE || o->x.squashed)
		return -EPERM;
	uint64_t dkey = handles_key(o->d->hs, &m->dir);
	if (!deleg_holds(t, s->client_id, dkey))
		return -EAGAIN;
	unsigned want = m->count < PFS_SLOTS_MAX ? m->count : PFS_SLOTS_MAX;
	size_t cap = 64 + (size_t)want * (2 + PFS_FH_MAX + PFS_ATTR_WIRE_SIZE);
	uint8_t *buf = xmalloc(cap);
	pfs_wr_init(&w, buf, cap);
	ret = make_slots(o, o->obj->fd, dkey, want, &w, &n);
	/* Fewer than asked is an answer; none, the reason. */
	if (n == 0 && want > 0) {
		free(buf);
		return ret < 0 ? ret : -EAGAIN;
	}
	rep.entries.p = buf;
	rep.entries.len = (uint32_t)w.len;
	op_reply_alloc(o, cap + 64);
	ret = OP_ENCODE(o, slots_rep, &rep);
	free(buf);
	return ret;
}

/* One item of a CREATES: FH slot, U64 fid, U32 flags, U32 mode, NAME,
 * U32 how (PFS_CI_*), BYTES data, and with PFS_CI_ATTRS a change of
 * attributes: U32 valid, U32 mode, U32 uid, U32 gid, I64 atime_s, U32
 * atime_ns, I64 mtime_s, U32 mtime_ns (wire.h). */
struct create_item {
	struct pfs_fh fh;
	uint64_t fid;
	uint32_t flags, mode, how;
	struct pfs_name name;
	pfs_t_BYTES data;
	struct pfs_setattr_req sa;
};

static bool get_create_item(struct pfs_rd *rd, struct create_item *ci)
{
	struct pfs_setattr_req *sa = &ci->sa;

	if (!(pfs_get_FH(rd, &ci->fh) && pfs_get_U64(rd, &ci->fid) && pfs_get_U32(rd, &ci->flags) &&
	      pfs_get_U32(rd, &ci->mode) && pfs_get_NAME(rd, &ci->name) &&
	      pfs_get_U32(rd, &ci->how) && pfs_get_BYTES(rd, &ci->data)) ||
	    (ci->mode & ~0777u) || (ci->how & ~(uint32_t)(PFS_CI_CLOSE | PFS_CI_SYNC | PFS_CI_ATTRS)))
		return false;
	memset(sa, 0, sizeof(*sa));
	if (!(ci->how & PFS_CI_ATTRS))
		return true;
	/* Only what a client may answer under a delegation (no size, no
	 * "now"); export_setattr checks the rest as for a SETATTR. */
	return pfs_get_deleg_attrs(rd, sa) && sa->valid &&
	       !(sa->valid & ~(uint32_t)(PFS_SET_MODE | PFS_SET_UID | PFS_SET_GID | PFS_SET_ATIME |
					 PFS_SET_MTIME | PFS_SET_CTIME));
}

/* Names the slot fd as ci says, its data written first (so the name
 * never shows the file without it). Returns 0 with *e, or -errno. */
static int name_slot(struct op *o, int fd, const struct create_item *ci, struct pfs_entry *e)
{
	size_t done = 0;

	while (done < ci->data.len) {
		ssize_t n = pwrite(fd, ci->data.p + done, ci->data.len - done, (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		done += (size_t)n;
	}
	/* Closed by the client already: no open file of it is made. */
	uint64_t fid = ci->how & PFS_CI_CLOSE ? 0 : ci->fid;
	return export_slot_name(&o->x, fd, o->obj->fd, ci->name.s, ci->mode, fid, ci->flags,
				(ci->how & PFS_CI_ATTRS) ? &ci->sa : NULL, e);
}

int op_creates(struct op *o)
{
	const struct pfs_creates_req *m = &o->m.creates_req;
	struct session *s = o->r->s;
	struct pfs_creates_rep rep = { 0 };
	struct create_item ci;
	struct pfs_rd rd;
	struct pfs_wr w;
	uint8_t status[PFS_CREATES_MAX * 4];
	uint8_t attrs[PFS_CREATES_MAX * PFS_ATTR_WIRE_SIZE];
	struct pfs_entry made[PFS_CREATES_MAX];
	int err[PFS_CREATES_MAX], sync_fd[PFS_CREATES_MAX];
	size_t sync_at[PFS_CREATES_MAX], n = 0, nsync = 0;

	if (!o->d->deleg || !s)
		return -ENOSYS;
	/* The whole list is checked before anything is named. */
	pfs_rd_init(&rd, m->items.p, m->items.len);
	while (rd.left > 0) {
		if (n == PFS_CREATES_MAX)
			return -E2BIG;
		if (!get_create_item(&rd, &ci))
			return -EINVAL;
		n++;
	}
	if (n == 0)
		return -EINVAL;
	uint64_t dkey = handles_key(o->d->hs, &m->parent);
	/* As UNLINKS: refused if the delegation was revoked meanwhile. */
	if (deleg_check(o->d->deleg, s->client_id, dkey) < 0) {
		pfs_info("session %016llx: creates under a revoked directory delegation refused",
			 (unsigned long long)s->client_id);
		return -EIO;
	}
	pfs_rd_init(&rd, m->items.p, m->items.len);
	for (size_t i = 0; i < n; i++) {
		(void)get_create_item(&rd, &ci);
		int ret = slots_take(s, &ci.fh, dkey, o->x.cr ? o->x.cr->uid : 0);
		if (ret >= 0) {
			int fd = ret;
			ret = name_slot(o, fd, &ci, &made[i]);
			/* Synced below, all at once: their writeback starts
			 * now, and the first commit of the journal carries
			 * the others. */
			if (ret == 0 && (ci.how & PFS_CI_SYNC)) {
				(void)sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
				sync_fd[nsync] = fd;
				sync_at[nsync++] = i;
			} else {
				close(fd);
				session_fid_unreserve(s);
			}
		}
		err[i] = ret;
		if (ret == 0)
			op_inval_entry(o, &m->parent, &ci.name);
	}
	for (size_t k = 0; k < nsync; k++) {
		/* Named but not durable: the client holds nothing to send
		 * again, so it hears of it. */
		if (fdatasync(sync_fd[k]) < 0)
			err[sync_at[k]] = -errno;
		close(sync_fd[k]);
		session_fid_unreserve(s);
	}
	pfs_wr_init(&w, attrs, sizeof attrs);
	for (size_t i = 0; i < n; i++) {
		pfs_store_le32(status + 4 * i, err[i] < 0 ? (uint32_t)-err[i] : 0);
		if (err[i] == 0)
			(void)pfs_put_ATTR(&w, &made[i].attr);
	}
	op_inval_inode(o, &m->parent, 0, 0);
	if (export_getattr(o->obj->fd, &rep.dir) == 0)
		rep.flags = PFS_UL_DIR_ATTR;
	rep.status.p = status;
	rep.status.len = (uint32_t)(4 * n);
	rep.attrs.p = attrs;
	rep.attrs.len = (uint32_t)w.len;
	op_reply_alloc(o, 1024 + w.len);
	return OP_ENCODE(o, creates_rep, &rep);
}

int op_unlink(struct op *o)
{
	return unlink_name(o, false);
}

int op_rmdir(struct op *o)
{
	return unlink_name(o, true);
}

int op_rename(struct op *o)
{
	const struct pfs_rename_req *m = &o->m.rename_req;
	struct pfs_fh victim, moved;
	uint32_t flags = m->flags & ~(uint32_t)PFS_RN_DELEG;
	bool none;

	/* Answered by the client under its directory delegation: as
	 * UNLINKS, refused if it was revoked meanwhile. */
	if (m->flags & PFS_RN_DELEG) {
		if (!o->d->deleg || !o->r->s || !pfs_fh_equal(&m->parent, &m->newparent))
			return -EINVAL;
		if (deleg_check(o->d->deleg, o->r->s->client_id,
				handles_key(o->d->hs, &m->parent)) < 0) {
			pfs_info("session %016llx: a rename under a revoked directory delegation refused",
				 (unsigned long long)o->r->s->client_id);
			return -EIO;
		}
	}
	int ret;
	if (flags & RENAME_EXCHANGE) {
		/* A second run would swap the names back: the record says
		 * what is at the old name now, and the exchange sent again
		 * runs only if that is still there (req_i.h: begun_was). */
		struct pfs_entry was;
		bool known = export_lookup(&o->x, o->obj->fd, m->name.s, &was) == 0;
		if (o->r->begun_was && known && !pfs_fh_equal(&was.fh, o->r->begun_was)) {
			pfs_debug("RENAME: exchanged by the instance before, found made");
			moved = *o->r->begun_was;
			victim = was.fh;
			none = false;
			ret = 0;
			goto made;
		}
		op_note_begun(o, known ? &was.fh : NULL);
	} else {
		op_note_begun(o, NULL);
	}
	ret = export_rename(&o->x, o->obj->fd, m->name.s, o->obj2->fd, m->newname.s, flags,
			    &victim, &moved, &none);

	if (ret == -ENOENT && !(flags & RENAME_EXCHANGE)) {
		/* Moved by the instance before (req_i.h: begun): what it
		 * replaced is not known. */
		struct pfs_entry e;
		ret = made_before(o, ret, o->obj2->fd, m->newname.s, 0, &e);
		if (ret == 0) {
			moved = e.fh;
			victim.len = 0;
			none = false;
		}
	}
	if (ret < 0)
		return ret;
made:
	/* A file of ours under delegation now lives in newparent: a request
	 * naming that directory recalls it. */
	if (o->d->deleg && o->r->s && moved.len && !pfs_fh_equal(&m->newparent, &m->parent))
		deleg_moved(o->d->deleg, o->r->s->client_id, handles_key(o->d->hs, &moved),
			    handles_key(o->d->hs, &m->newparent));
	op_inval_dirent(o, &m->parent, &m->name);
	op_inval_entry(o, &m->newparent, &m->newname);
	if (!pfs_fh_equal(&m->newparent, &m->parent))
		op_inval_inode(o, &m->newparent, 0, 0);
	op_inval_inode(o, &victim, -1, 0); /* nlink, or (exchange) ctime */
	op_inval_inode(o, &moved, -1, 0);  /* ctime */
	/* Within one directory (an atomic replace, pip's compiled files):
	 * its attributes after, as UNLINK's reply has them; and the moved
	 * object's (PFS_CAP_RENAME_ATTR). */
	bool same = pfs_fh_equal(&m->newparent, &m->parent);
	struct hent *h = NULL;
	if (o->r->rename_attr && moved.len && !(flags & RENAME_EXCHANGE) &&
	    !(m->flags & PFS_RN_DELEG) &&
	    handles_get(o->d->hs, &moved, &h) == 0) {
		struct pfs_rename_rep rr = { .moved.fh = moved };
		int got = export_getattr(h->fd, &rr.moved.attr);
		handles_put(o->d->hs, h);
		if (got == 0) {
			if (same && dir_attr(o, o->obj, &rr.dir))
				rr.flags = PFS_RR_DIR;
			if (none) {
				rr.flags |= PFS_RR_NONE;
			} else if (victim.len) {
				rr.flags |= PFS_RR_VICTIM;
				rr.victim = (struct pfs_bytes){ victim.data, victim.len };
			}
			return OP_ENCODE(o, rename_rep, &rr);
		}
	}
	struct pfs_dir_rep rep;
	if (same && dir_attr(o, o->obj, &rep.dir))
		return OP_ENCODE(o, dir_rep, &rep);
	return 0;
}

int op_link(struct op *o)
{
	const struct pfs_link_req *m = &o->m.link_req;
	struct pfs_entry e;
	int ret = export_link(&o->x, o->obj->fd, o->obj2->fd, m->newname.s, &e);

	/* (Made before if the name is the file's.) */
	if (ret == -EEXIST && made_before(o, ret, o->obj2->fd, m->newname.s, 0, &e) == 0 &&
	    pfs_fh_equal(&e.fh, &m->fh))
		ret = 0;
	if (ret < 0)
		return ret;
	op_inval_dirent(o, &m->newparent, &m->newname);
	op_inval_inode(o, &m->fh, -1, 0);
	return reply_entry_in(o, &e, o->obj2);
}

int op_create(struct op *o)
{
	const struct pfs_create_req *m = &o->m.create_req;
	struct pfs_mkdir_rep rep = { 0 };
	bool fresh = false;
	uint32_t absent = 0;
	int ret = export_create(&o->x, o->obj->fd, m->name.s, m->fid, m->flags, m->mode, m->umask,
				&rep.e, &fresh, o->r->new_xattrs ? &absent : NULL);

	if (ret == -EEXIST && (m->flags & O_EXCL) && o->r->begun) {
		/* Made by the instance before (req_i.h: begun): opened. */
		pfs_debug("CREATE: made by the instance before, found made");
		ret = export_create(&o->x, o->obj->fd, m->name.s, m->fid,
				    m->flags & ~(uint32_t)(O_EXCL | O_TRUNC), m->mode, m->umask, &rep.e,
				    &fresh, o->r->new_xattrs ? &absent : NULL);
		fresh = false;
	}
	if (ret < 0)
		return ret;
	op_inval_dirent(o, &m->parent, &m->name);
	/* With PFS_CAP_NEW_XATTRS or PFS_CAP_DELEG the reply is mkdir_rep:
	 * the xattrs the new file lacks, and PFS_CR_DELEG saying whether a
	 * delegation was granted (wire_deleg.h). */
	if (!(o->r->deleg || o->r->new_xattrs) || !dir_attr(o, o->obj, &rep.dir))
		return reply_entry_in(o, &rep.e, o->obj);
	rep.flags = absent;
	if (o->r->deleg && fresh && op_deleg_grant(o, &m->parent, &rep.e.fh, m->fid))
		rep.flags |= PFS_CR_DELEG;
	return OP_ENCODE(o, mkdir_rep, &rep);
}
