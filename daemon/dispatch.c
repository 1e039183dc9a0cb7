/* dispatch.c: the opcode table and the per-opcode glue that runs in worker
 * threads: decode the request, resolve handles (as root), switch to the
 * caller's credentials, call export.c, switch back, encode the reply. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "podfs/codec.h"
#include "podfs/frame.h"
#include "podfs/log.h"
#include "dispatch_i.h"
#include "export_i.h"
#include "handles_i.h"
#include "lockstate_i.h"
#include "server_i.h"
#include "session_i.h"

struct op {
	struct req *r;
	struct pfsd *d;
	struct xop x;
	const uint8_t *in; /* raw request payload */
	size_t inlen;
	struct pfs_wr w;   /* reply payload; w.buf is malloc'd or NULL */
};

typedef int (*handler_fn)(struct op *o);

/* --- credentials (per thread) --- */

/* Switches this thread's filesystem identity to the caller. The raw
 * syscalls act on the calling thread only; glibc's setgroups() would
 * change every thread of the process. */
static int creds_enter(const struct pfs_creds *cr)
{
	gid_t groups[PFS_GROUPS_MAX];

	/* (uid_t)-1 means "unchanged" to setfsuid: never let it keep root. */
	if (cr->uid == (uint32_t)-1 || cr->gid == (uint32_t)-1)
		return -EINVAL;
	for (unsigned i = 0; i < cr->ngroups; i++)
		groups[i] = cr->groups[i];
	if (syscall(SYS_setgroups, (size_t)cr->ngroups, groups) < 0)
		return -errno;
	syscall(SYS_setfsgid, cr->gid);
	syscall(SYS_setfsuid, cr->uid);
	/* An invalid id asks for the current one without changing it. */
	if ((uint32_t)syscall(SYS_setfsuid, (uid_t)-1) != cr->uid ||
	    (uint32_t)syscall(SYS_setfsgid, (gid_t)-1) != cr->gid) {
		syscall(SYS_setfsuid, 0);
		syscall(SYS_setfsgid, 0);
		syscall(SYS_setgroups, (size_t)0, NULL);
		return -EPERM;
	}
	return 0;
}

static void creds_leave(void)
{
	/* fsuid 0 first: it restores the capabilities dropped for the
	 * caller (CAP_DAC_READ_SEARCH is needed by open_by_handle_at). */
	syscall(SYS_setfsuid, 0);
	syscall(SYS_setfsgid, 0);
	syscall(SYS_setgroups, (size_t)0, NULL);
}

/* Resolves fh as root, then becomes the caller. */
static int begin(struct op *o, const struct pfs_creds *cr, const struct pfs_fh *fh,
		 struct hent **e)
{
	int ret = handles_get(o->d->hs, fh, e);

	if (ret < 0)
		return ret;
	ret = creds_enter(cr);
	if (ret < 0) {
		handles_put(o->d->hs, *e);
		*e = NULL;
		return ret;
	}
	o->x.cr = cr;
	return 0;
}

static int begin2(struct op *o, const struct pfs_creds *cr, const struct pfs_fh *fh1,
		  struct hent **e1, const struct pfs_fh *fh2, struct hent **e2)
{
	int ret = handles_get(o->d->hs, fh1, e1);

	if (ret < 0)
		return ret;
	ret = begin(o, cr, fh2, e2);
	if (ret < 0) {
		handles_put(o->d->hs, *e1);
		*e1 = NULL;
	}
	return ret;
}

static void end(struct op *o, struct hent *e1, struct hent *e2)
{
	creds_leave();
	handles_put(o->d->hs, e1);
	handles_put(o->d->hs, e2);
}

static void reply_alloc(struct op *o, size_t cap)
{
	pfs_wr_init(&o->w, xmalloc(cap), cap);
}

#define SMALL_REPLY 512
#define DECODE(name, m)                                          \
	do {                                                     \
		if (pfs_dec_##name(o->in, o->inlen, (m)) < 0)    \
			return -EINVAL;                          \
	} while (0)
#define ENCODE(name, m)                                          \
	do {                                                     \
		if (!o->w.buf)                                   \
			reply_alloc(o, SMALL_REPLY);             \
		if (pfs_enc_##name(&o->w, (m)) < 0)              \
			return -EIO;                             \
	} while (0)

/* --- invalidations for other clients --- */

static void inval_inode(struct op *o, const struct pfs_fh *fh, int64_t off, int64_t len)
{
	struct inval *iv;

	if (!fh->len)
		return;
	iv = xcalloc(1, sizeof(*iv));
	iv->op = PFS_OP_INVAL_INODE;
	iv->fh = *fh;
	iv->off = off;
	iv->len = len;
	iv->next = o->r->invals;
	o->r->invals = iv;
}

static void inval_entry(struct op *o, const struct pfs_fh *parent, const struct pfs_name *name)
{
	struct inval *iv = xcalloc(1, sizeof(*iv));

	iv->op = PFS_OP_INVAL_ENTRY;
	iv->fh = *parent;
	iv->name = *name;
	iv->next = o->r->invals;
	o->r->invals = iv;
}

/* A directory's entry changed: its name cache and listing are stale. */
static void inval_dirent(struct op *o, const struct pfs_fh *parent, const struct pfs_name *name)
{
	inval_entry(o, parent, name);
	inval_inode(o, parent, 0, 0);
}

/* --- replies to namespace changes --- */

/* The attributes of dir after a change in it, if the session takes them
 * (PFS_CAP_DIR_ATTR): the client then knows them without a GETATTR. Call
 * before end() lets dir go. */
static bool dir_attr(struct op *o, struct hent *dir, struct pfs_attr *a)
{
	return o->r->dir_attr && export_getattr(dir->fd, a) == 0;
}

static int reply_entry(struct op *o, const struct pfs_entry *e, const struct pfs_attr *dir)
{
	if (dir) {
		struct pfs_entry_dir_rep rep = { .e = *e, .dir = *dir };
		ENCODE(entry_dir_rep, &rep);
	} else {
		struct pfs_entry_rep rep = { .e = *e };
		ENCODE(entry_rep, &rep);
	}
	return 0;
}

/* --- handlers --- */

static int op_auth(struct op *o)
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
	ENCODE(auth_rep, &rep);
	return 0;
}

static int op_ping(struct op *o)
{
	struct pfs_ping_req m;
	struct pfs_ping_rep rep;

	DECODE(ping_req, &m);
	rep.stamp = m.stamp;
	ENCODE(ping_rep, &rep);
	return 0;
}

static int op_lookup(struct op *o)
{
	struct pfs_lookup_req m;
	struct pfs_entry_rep rep;
	struct hent *dir;
	int ret;

	DECODE(lookup_req, &m);
	ret = begin(o, &m.cr, &m.parent, &dir);
	if (ret < 0)
		return ret;
	/* The parent too: a negative entry is cached in it. */
	export_note(&o->x, &m.parent);
	ret = export_lookup(&o->x, dir->fd, m.name.s, &rep.e);
	end(o, dir, NULL);
	if (ret < 0)
		return ret;
	ENCODE(entry_rep, &rep);
	return 0;
}

static int op_getattr(struct op *o)
{
	struct pfs_getattr_req m;
	struct pfs_attr_rep rep;
	struct hent *e;
	int ret;

	DECODE(getattr_req, &m);
	/* fstat needs no permission: no credential switch. */
	ret = handles_get(o->d->hs, &m.fh, &e);
	if (ret < 0)
		return ret;
	export_note(&o->x, &m.fh);
	ret = export_getattr(e->fd, &rep.attr);
	handles_put(o->d->hs, e);
	if (ret < 0)
		return ret;
	ENCODE(attr_rep, &rep);
	return 0;
}

static int op_setattr(struct op *o)
{
	struct pfs_setattr_req m;
	struct pfs_attr_rep rep;
	struct hent *e;
	int ret;

	DECODE(setattr_req, &m);
	ret = begin(o, &m.cr, &m.fh, &e);
	if (ret < 0)
		return ret;
	export_note(&o->x, &m.fh);
	ret = export_setattr(&o->x, e, &m, &rep.attr);
	end(o, e, NULL);
	if (ret < 0)
		return ret;
	inval_inode(o, &m.fh, (m.valid & PFS_SET_SIZE) ? 0 : -1, 0);
	ENCODE(attr_rep, &rep);
	return 0;
}

static int op_readlink(struct op *o)
{
	struct pfs_readlink_req m;
	struct pfs_readlink_rep rep;
	struct hent *e;
	int ret;

	DECODE(readlink_req, &m);
	ret = handles_get(o->d->hs, &m.fh, &e);
	if (ret < 0)
		return ret;
	export_note(&o->x, &m.fh);
	ret = export_readlink(e->fd, &rep.target);
	handles_put(o->d->hs, e);
	if (ret < 0)
		return ret;
	reply_alloc(o, PFS_PATH_MAX + 16);
	ENCODE(readlink_rep, &rep);
	return 0;
}

static int op_mknod(struct op *o)
{
	struct pfs_mknod_req m;
	struct pfs_entry_rep rep;
	struct pfs_attr da;
	struct hent *dir;
	bool have_da;
	int ret;

	DECODE(mknod_req, &m);
	ret = begin(o, &m.cr, &m.parent, &dir);
	if (ret < 0)
		return ret;
	ret = export_mknod(&o->x, dir->fd, m.name.s, m.mode, m.rdev, m.umask, &rep.e);
	have_da = ret == 0 && dir_attr(o, dir, &da);
	end(o, dir, NULL);
	if (ret < 0)
		return ret;
	inval_dirent(o, &m.parent, &m.name);
	return reply_entry(o, &rep.e, have_da ? &da : NULL);
}

static int op_mkdir(struct op *o)
{
	struct pfs_mkdir_req m;
	struct pfs_mkdir_rep rep = { 0 };
	struct hent *dir;
	bool have_da, empty = false;
	int ret;

	DECODE(mkdir_req, &m);
	ret = begin(o, &m.cr, &m.parent, &dir);
	if (ret < 0)
		return ret;
	ret = export_mkdir(&o->x, dir->fd, m.name.s, m.mode, m.umask, &rep.e,
			   o->r->new_dir ? &empty : NULL);
	have_da = ret == 0 && dir_attr(o, dir, &rep.dir);
	end(o, dir, NULL);
	if (ret < 0)
		return ret;
	inval_dirent(o, &m.parent, &m.name);
	if (!have_da || !o->r->new_dir)
		return reply_entry(o, &rep.e, have_da ? &rep.dir : NULL);
	rep.flags = empty ? PFS_MK_EMPTY : 0;
	ENCODE(mkdir_rep, &rep);
	return 0;
}

static int op_symlink(struct op *o)
{
	struct pfs_symlink_req m;
	struct pfs_entry_rep rep;
	struct pfs_attr da;
	struct hent *dir;
	bool have_da;
	int ret;

	DECODE(symlink_req, &m);
	ret = begin(o, &m.cr, &m.parent, &dir);
	if (ret < 0)
		return ret;
	ret = export_symlink(&o->x, dir->fd, m.name.s, m.target.s, &rep.e);
	have_da = ret == 0 && dir_attr(o, dir, &da);
	end(o, dir, NULL);
	if (ret < 0)
		return ret;
	inval_dirent(o, &m.parent, &m.name);
	return reply_entry(o, &rep.e, have_da ? &da : NULL);
}

static int do_unlink(struct op *o, bool dir)
{
	struct pfs_unlink_req m;
	struct pfs_dir_rep rep;
	struct pfs_fh victim;
	struct hent *e;
	bool have_da;
	int ret;

	DECODE(unlink_req, &m);
	ret = begin(o, &m.cr, &m.parent, &e);
	if (ret < 0)
		return ret;
	ret = export_unlink(&o->x, e->fd, m.name.s, dir, &victim);
	have_da = ret == 0 && dir_attr(o, e, &rep.dir);
	end(o, e, NULL);
	if (ret < 0)
		return ret;
	inval_dirent(o, &m.parent, &m.name);
	inval_inode(o, &victim, -1, 0);
	if (have_da)
		ENCODE(dir_rep, &rep);
	return 0;
}

static int op_unlink(struct op *o)
{
	return do_unlink(o, false);
}

static int op_rmdir(struct op *o)
{
	return do_unlink(o, true);
}

static int op_rename(struct op *o)
{
	struct pfs_rename_req m;
	struct hent *from, *to;
	struct pfs_fh victim, moved;
	int ret;

	DECODE(rename_req, &m);
	ret = begin2(o, &m.cr, &m.parent, &from, &m.newparent, &to);
	if (ret < 0)
		return ret;
	ret = export_rename(&o->x, from->fd, m.name.s, to->fd, m.newname.s, m.flags, &victim,
			    &moved);
	end(o, from, to);
	if (ret < 0)
		return ret;
	inval_dirent(o, &m.parent, &m.name);
	inval_entry(o, &m.newparent, &m.newname);
	if (m.newparent.len != m.parent.len ||
	    memcmp(m.newparent.data, m.parent.data, m.parent.len) != 0)
		inval_inode(o, &m.newparent, 0, 0);
	inval_inode(o, &victim, -1, 0); /* nlink, or (exchange) ctime */
	inval_inode(o, &moved, -1, 0);  /* ctime */
	return 0;
}

static int op_link(struct op *o)
{
	struct pfs_link_req m;
	struct pfs_entry_rep rep;
	struct pfs_attr da;
	struct hent *e, *dir;
	bool have_da;
	int ret;

	DECODE(link_req, &m);
	ret = begin2(o, &m.cr, &m.fh, &e, &m.newparent, &dir);
	if (ret < 0)
		return ret;
	ret = export_link(&o->x, e->fd, dir->fd, m.newname.s, &rep.e);
	have_da = ret == 0 && dir_attr(o, dir, &da);
	end(o, e, dir);
	if (ret < 0)
		return ret;
	inval_dirent(o, &m.newparent, &m.newname);
	inval_inode(o, &m.fh, -1, 0);
	return reply_entry(o, &rep.e, have_da ? &da : NULL);
}

static int op_open(struct op *o)
{
	struct pfs_open_req m;
	struct pfs_attr_rep rep;
	struct hent *e;
	int ret;

	DECODE(open_req, &m);
	ret = begin(o, &m.cr, &m.fh, &e);
	if (ret < 0)
		return ret;
	export_note(&o->x, &m.fh);
	if (o->r->h.op == PFS_OP_OPENDIR)
		ret = export_opendir(&o->x, e, m.fid, &rep.attr);
	else
		ret = export_open(&o->x, e, m.fid, m.flags, &rep.attr);
	end(o, e, NULL);
	if (ret < 0)
		return ret;
	if (o->r->h.op == PFS_OP_OPEN && (m.flags & O_TRUNC))
		inval_inode(o, &m.fh, 0, 0);
	ENCODE(attr_rep, &rep);
	return 0;
}

static int op_create(struct op *o)
{
	struct pfs_create_req m;
	struct pfs_entry_rep rep;
	struct pfs_attr da;
	struct hent *dir;
	bool have_da;
	int ret;

	DECODE(create_req, &m);
	ret = begin(o, &m.cr, &m.parent, &dir);
	if (ret < 0)
		return ret;
	ret = export_create(&o->x, dir->fd, m.name.s, m.fid, m.flags, m.mode, m.umask, &rep.e);
	have_da = ret == 0 && dir_attr(o, dir, &da);
	end(o, dir, NULL);
	if (ret < 0)
		return ret;
	inval_dirent(o, &m.parent, &m.name);
	return reply_entry(o, &rep.e, have_da ? &da : NULL);
}

/* READs of at least this many bytes may go out zero-copy. */
#define SPLICE_MIN (64u * 1024)

/* Zero-copy READ: when the reply would go out uncoded anyway (a 4 KiB
 * sample from the middle of the range says so: the same trials the
 * coder runs), the file's pages move into a pipe here, where waiting for
 * the disk is fine, and from the pipe into the socket on the loop
 * (server.c send_spliced). Returns 1 if the reply is set up that way
 * (o->w holds the u32 length, the data waits in r->pipe), 0 to read
 * by copying instead: also on any trouble with the pipe, so that errors
 * are reported by the ordinary path. */
static int read_spliced(struct op *o, struct hent *e, const struct pfs_read_req *m)
{
	struct req *r = o->r;
	uint8_t sample[4096];
	int p[2];
	ssize_t n;

	if (r->codecs) {
		n = export_read(&o->x, e, m->fid, m->flags, m->offset + m->size / 2 - sizeof(sample) / 2,
				sizeof(sample), sample);
		if (n <= 0 || pfs_frame_may_code(sample, (size_t)n, r->codecs))
			return 0;
	}
	if (pipes_get(&o->d->pipes, p) < 0)
		return 0;
	n = export_read_splice(&o->x, e, m->fid, m->flags, m->offset, m->size, p[1]);
	if (n <= 0) {
		pipes_put(&o->d->pipes, p, false);
		return 0;
	}
	r->pipe[0] = p[0];
	r->pipe[1] = p[1];
	r->splice_len = (size_t)n;
	/* read_rep is BYTES data: only its length goes in the payload. */
	reply_alloc(o, 4);
	if (pfs_put_BYTES_head(&o->w, (size_t)n) < 0)
		return -EIO;
	return 1;
}

static int op_read(struct op *o)
{
	struct pfs_read_req m;
	struct hent *e;
	size_t at;
	ssize_t n;
	int ret;

	DECODE(read_req, &m);
	if (m.size > PFS_MAX_IO)
		m.size = PFS_MAX_IO;
	ret = begin(o, &m.cr, &m.fh, &e);
	if (ret < 0)
		return ret;
	export_note(&o->x, &m.fh);
	if (m.size >= SPLICE_MIN) {
		ret = read_spliced(o, e, &m);
		if (ret != 0) {
			end(o, e, NULL);
			return ret < 0 ? ret : 0;
		}
	}
	/* read_rep is BYTES data: read straight into the reply. */
	reply_alloc(o, 4 + (size_t)m.size);
	if (pfs_bytes_open(&o->w, &at) < 0) {
		end(o, e, NULL);
		return -EIO;
	}
	n = export_read(&o->x, e, m.fid, m.flags, m.offset, m.size, o->w.buf + o->w.len);
	end(o, e, NULL);
	if (n < 0)
		return (int)n;
	o->w.len += (size_t)n;
	return pfs_bytes_close(&o->w, at) < 0 ? -EIO : 0;
}

static int op_write(struct op *o)
{
	struct pfs_write_req m;
	struct pfs_write_rep rep;
	struct hent *e;
	int ret;

	DECODE(write_req, &m);
	ret = begin(o, &m.cr, &m.fh, &e);
	if (ret < 0)
		return ret;
	export_note(&o->x, &m.fh);
	ret = export_write(&o->x, e, m.fid, m.flags, m.offset, m.data.p, m.data.len, &rep.written,
			   &rep.attr);
	end(o, e, NULL);
	if (ret < 0)
		return ret;
	inval_inode(o, &m.fh, (int64_t)m.offset, rep.written);
	ENCODE(write_rep, &rep);
	return 0;
}

static int op_release(struct op *o)
{
	struct pfs_release_req m;

	DECODE(release_req, &m);
	return export_release(&o->x, m.fid);
}

static int op_fsync(struct op *o)
{
	struct pfs_fsync_req m;
	struct hent *e;
	int ret;

	DECODE(fsync_req, &m);
	ret = begin(o, &m.cr, &m.fh, &e);
	if (ret < 0)
		return ret;
	ret = export_fsync(&o->x, e, m.fid, m.datasync != 0);
	end(o, e, NULL);
	return ret;
}

static int op_readdir(struct op *o)
{
	struct pfs_readdir_req m;
	struct hent *e;
	int ret;

	DECODE(readdir_req, &m);
	if (m.max_bytes > PFS_READDIR_MAX)
		m.max_bytes = PFS_READDIR_MAX;
	ret = begin(o, &m.cr, &m.fh, &e);
	if (ret < 0)
		return ret;
	export_note(&o->x, &m.fh);
	reply_alloc(o, m.max_bytes ? m.max_bytes : 1);
	ret = export_readdir(&o->x, e, m.fid, m.offset, m.max_bytes, m.plus != 0, &o->w);
	end(o, e, NULL);
	return ret;
}

static int op_statfs(struct op *o)
{
	struct pfs_statfs_req m;
	struct pfs_statfs_rep rep;
	int ret;

	DECODE(statfs_req, &m);
	ret = export_statfs(&o->x, &rep);
	if (ret < 0)
		return ret;
	ENCODE(statfs_rep, &rep);
	return 0;
}

static int op_setxattr(struct op *o)
{
	struct pfs_setxattr_req m;
	struct hent *e;
	int ret;

	DECODE(setxattr_req, &m);
	ret = begin(o, &m.cr, &m.fh, &e);
	if (ret < 0)
		return ret;
	ret = export_setxattr(&o->x, e, m.name.s, m.value.p, m.value.len, m.flags);
	end(o, e, NULL);
	if (ret == 0)
		inval_inode(o, &m.fh, -1, 0);
	return ret;
}

/* Encodes xattr_rep{size = n, value = buf[n] if want}. */
static int xattr_reply(struct op *o, ssize_t n, const uint8_t *buf, bool want)
{
	struct pfs_xattr_rep rep;

	rep.size = (uint32_t)n;
	rep.value.p = buf;
	rep.value.len = want ? (uint32_t)n : 0;
	reply_alloc(o, 16 + rep.value.len);
	ENCODE(xattr_rep, &rep);
	return 0;
}

/* GETXATTR (name) or LISTXATTR (name NULL); size 0 asks for the length. */
static int xattr_query(struct op *o, const struct pfs_creds *cr, const struct pfs_fh *fh,
		       const char *name, uint32_t size)
{
	uint8_t *buf = NULL;
	struct hent *e;
	ssize_t n;
	int ret;

	if (size > PFS_XATTR_SIZE_MAX)
		size = PFS_XATTR_SIZE_MAX;
	ret = begin(o, cr, fh, &e);
	if (ret < 0)
		return ret;
	export_note(&o->x, fh);
	if (size)
		buf = xmalloc(size);
	n = name ? export_getxattr(&o->x, e, name, buf, size)
		 : export_listxattr(&o->x, e, buf, size);
	end(o, e, NULL);
	ret = n < 0 ? (int)n : xattr_reply(o, n, buf, size != 0);
	free(buf);
	return ret;
}

static int op_getxattr(struct op *o)
{
	struct pfs_getxattr_req m;

	DECODE(getxattr_req, &m);
	return xattr_query(o, &m.cr, &m.fh, m.name.s, m.size);
}

static int op_listxattr(struct op *o)
{
	struct pfs_listxattr_req m;

	DECODE(listxattr_req, &m);
	return xattr_query(o, &m.cr, &m.fh, NULL, m.size);
}

static int op_removexattr(struct op *o)
{
	struct pfs_removexattr_req m;
	struct hent *e;
	int ret;

	DECODE(removexattr_req, &m);
	ret = begin(o, &m.cr, &m.fh, &e);
	if (ret < 0)
		return ret;
	ret = export_removexattr(&o->x, e, m.name.s);
	end(o, e, NULL);
	if (ret == 0)
		inval_inode(o, &m.fh, -1, 0);
	return ret;
}

static int op_fallocate(struct op *o)
{
	struct pfs_fallocate_req m;
	struct hent *e;
	int ret;

	DECODE(fallocate_req, &m);
	ret = begin(o, &m.cr, &m.fh, &e);
	if (ret < 0)
		return ret;
	ret = export_fallocate(&o->x, e, m.fid, m.mode, m.offset, m.length);
	end(o, e, NULL);
	if (ret == 0)
		inval_inode(o, &m.fh, 0, 0);
	return ret;
}

static int op_lseek(struct op *o)
{
	struct pfs_lseek_req m;
	struct pfs_lseek_rep rep;
	struct hent *e;
	int ret;

	DECODE(lseek_req, &m);
	ret = begin(o, &m.cr, &m.fh, &e);
	if (ret < 0)
		return ret;
	ret = export_lseek(&o->x, e, m.fid, m.offset, m.whence, &rep.offset);
	end(o, e, NULL);
	if (ret < 0)
		return ret;
	ENCODE(lseek_rep, &rep);
	return 0;
}

static int op_getlk(struct op *o)
{
	struct pfs_lock_req m;
	struct pfs_getlk_rep rep;
	struct hent *e;
	int ret;

	DECODE(lock_req, &m);
	/* In grace the table is not complete: "unlocked" could be a lie. */
	if (lockstate_in_grace(o->d->ls))
		return -PFS_ST_GRACE;
	ret = begin(o, &m.cr, &m.fh, &e);
	if (ret < 0)
		return ret;
	ret = export_getlk(&o->x, e, &m, &rep);
	end(o, e, NULL);
	if (ret < 0)
		return ret;
	ENCODE(getlk_rep, &rep);
	return 0;
}

/* A lock on fh was released or downgraded: wake the waiters once the
 * reply goes out (server_lock_wake, loop thread). */
static void lock_wake(struct op *o, const struct pfs_fh *fh)
{
	struct inval *iv = xcalloc(1, sizeof(*iv));

	iv->op = PFS_OP_LOCK_WAKE;
	iv->fh = *fh;
	iv->next = o->r->invals;
	o->r->invals = iv;
}

/* SETLK and RECLAIM: sets m's lock; reclaim skips the grace check. */
static int do_setlk(struct op *o, struct pfs_lock_req *m, bool reclaim)
{
	struct session *s = o->r->s;
	bool wait = !reclaim && (m->flags & PFS_LKF_WAIT);
	uint64_t key = handles_key(o->d->hs, &m->fh);
	struct hent *e;
	int ret;

	m->flags &= ~(uint32_t)PFS_LKF_WAIT;
	/* Register before trying: a release after our failed attempt then
	 * finds us (see lockstate_i.h). */
	if (wait)
		lockstate_wait_add(o->d->ls, key, s->client_id);
	ret = begin(o, &m->cr, &m->fh, &e);
	if (ret == 0) {
		ret = export_setlk(&o->x, e, m);
		end(o, e, NULL);
	}
	if (wait && ret != -EAGAIN)
		lockstate_wait_del(o->d->ls, key, s->client_id);
	if (ret < 0)
		return ret;
	if (m->type == PFS_LK_UN || m->type == PFS_LK_RD)
		lock_wake(o, &m->fh);
	/* Listed (durably) before the client hears it holds a lock. */
	if (m->type != PFS_LK_UN)
		lockstate_note_holder(o->d->ls, s->client_id, s->host);
	return 0;
}

static int op_setlk(struct op *o)
{
	struct pfs_lock_req m;

	DECODE(lock_req, &m);
	/* Unlocking is always safe; taking a lock waits for the reclaims. */
	if (m.type != PFS_LK_UN && lockstate_in_grace(o->d->ls))
		return -PFS_ST_GRACE;
	return do_setlk(o, &m, false);
}

static int op_reclaim(struct op *o)
{
	struct pfs_lock_req m;
	int ret;

	DECODE(lock_req, &m);
	if (m.type == PFS_LK_UN)
		return -EINVAL;
	ret = lockstate_may_reclaim(o->d->ls, o->r->s->client_id);
	if (ret < 0)
		return ret;
	return do_setlk(o, &m, true);
}

static int op_reclaim_done(struct op *o)
{
	struct pfs_reclaim_done_req m;
	struct session *s = o->r->s;

	DECODE(reclaim_done_req, &m);
	lockstate_reclaim_done(o->d->ls, s->client_id, s->host, m.reclaimed, m.lost);
	return 0;
}

static int op_unlock_owner(struct op *o)
{
	struct pfs_unlock_owner_req m;
	struct hent *e;
	int ret;

	DECODE(unlock_owner_req, &m);
	/* Closing an fd needs no credentials. */
	ret = handles_get(o->d->hs, &m.fh, &e);
	if (ret < 0)
		return ret;
	ret = export_unlock_owner(&o->x, e, m.owner);
	handles_put(o->d->hs, e);
	if (ret > 0)
		lock_wake(o, &m.fh);
	return ret < 0 ? ret : 0;
}

/* --- caching: LOOKUP_DATA, REVALIDATE, FORGET --- */

static int op_lookup_data(struct op *o)
{
	struct pfs_lookup_data_req m;
	struct pfs_lookup_data_rep rep;
	uint8_t *buf;
	struct hent *dir;
	int ret;

	DECODE(lookup_data_req, &m);
	ret = begin(o, &m.cr, &m.parent, &dir);
	if (ret < 0)
		return ret;
	export_note(&o->x, &m.parent);
	if (m.max_inline > PFS_INLINE_MAX)
		m.max_inline = PFS_INLINE_MAX;
	buf = xmalloc((size_t)m.max_inline + 1);
	ret = export_lookup_data(&o->x, dir->fd, m.name.s, m.max_inline, &rep.e, buf,
				 &rep.data.len, &rep.flags, NULL);
	end(o, dir, NULL);
	if (ret == 0) {
		rep.data.p = buf;
		reply_alloc(o, 64 + PFS_FH_MAX + PFS_ATTR_WIRE_SIZE + rep.data.len);
		if (pfs_enc_lookup_data_rep(&o->w, &rep) < 0)
			ret = -EIO;
	}
	free(buf);
	return ret;
}

static int op_listdir(struct op *o)
{
	struct pfs_listdir_req m;
	struct hent *dir;
	int ret;

	DECODE(listdir_req, &m);
	if (m.max_bytes > PFS_MAX_IO)
		m.max_bytes = PFS_MAX_IO;
	ret = begin(o, &m.cr, &m.fh, &dir);
	if (ret < 0)
		return ret;
	export_note(&o->x, &m.fh); /* its names: pushes follow */
	reply_alloc(o, (size_t)m.max_bytes + 16);
	ret = export_listdir(&o->x, dir, m.max_inline, m.max_bytes, &o->w);
	end(o, dir, NULL);
	return ret;
}

static bool version_differs(const struct pfs_reval_item *it, const struct pfs_attr *a)
{
	return it->size != a->size || it->mtime_s != a->mtime_s || it->mtime_ns != a->mtime_ns ||
	       it->ctime_s != a->ctime_s || it->ctime_ns != a->ctime_ns;
}

#define RESULT_WIRE (4 + 4 + PFS_ATTR_WIRE_SIZE)

static int op_revalidate(struct op *o)
{
	struct pfs_revalidate_req m;
	struct pfs_reval_item it;
	struct pfs_rd rd;
	uint32_t count = 0, idx = 0;
	size_t at;
	int ret;

	DECODE(revalidate_req, &m);
	/* Validate and count first: nothing is registered for a bad list. */
	pfs_rd_init(&rd, m.items.p, m.items.len);
	while ((ret = pfs_dec_reval_item(&rd, &it)) == 1)
		if (++count > PFS_BATCH_MAX)
			return -E2BIG;
	if (ret < 0)
		return -EINVAL;
	reply_alloc(o, 4 + (size_t)count * RESULT_WIRE);
	if (pfs_bytes_open(&o->w, &at) < 0)
		return -EIO;
	pfs_rd_init(&rd, m.items.p, m.items.len);
	while (pfs_dec_reval_item(&rd, &it) == 1) {
		struct pfs_reval_result res;
		struct hent *e;

		memset(&res, 0, sizeof(res));
		res.index = idx++;
		/* fstat needs no permission: no credential switch. */
		ret = handles_get(o->d->hs, &it.fh, &e);
		if (ret == 0) {
			/* Trusted again from now on: interest before the stat. */
			export_note(&o->x, &it.fh);
			ret = export_getattr(e->fd, &res.attr);
			if (ret == 0 && S_ISDIR(res.attr.mode))
				watch_dir(o->x.watch, e->fd, &it.fh);
			/* Unlinked (we held it open): gone from the namespace. */
			if (ret == 0 && res.attr.nlink == 0) {
				ret = -ESTALE;
				handles_forget(o->d->hs, &it.fh);
			}
			handles_put(o->d->hs, e);
		}
		if (ret < 0) {
			memset(&res.attr, 0, sizeof(res.attr));
			res.status = (uint32_t)-ret;
		} else if (!version_differs(&it, &res.attr)) {
			continue;
		}
		if (pfs_enc_reval_result(&o->w, &res) < 0)
			return -EIO;
	}
	return pfs_bytes_close(&o->w, at) < 0 ? -EIO : 0;
}

int dispatch_forget(struct pfsd *d, struct session *s, const struct pfs_frame_hdr *h,
		    const uint8_t *wire)
{
	struct pfs_forget_req m;
	struct pfs_fh fh;
	struct pfs_rd rd;
	uint8_t *dec = NULL;
	const uint8_t *in = wire;
	unsigned count = 0;
	int ret;

	if (h->flags & PFS_FF_CODED) {
		dec = xmalloc(h->raw_len ? h->raw_len : 1);
		if (pfs_payload_decode(h->flags, wire, h->wire_len, dec, h->raw_len) < 0) {
			free(dec);
			return -EBADMSG;
		}
		in = dec;
	}
	ret = -EINVAL;
	if (pfs_dec_forget_req(in, h->raw_len, &m) < 0)
		goto out_free;
	pfs_rd_init(&rd, m.fhs.p, m.fhs.len);
	while ((ret = pfs_dec_fh_item(&rd, &fh)) == 1) {
		if (++count > PFS_BATCH_MAX) {
			ret = -E2BIG;
			goto out_free;
		}
	}
	if (ret < 0) {
		ret = -EINVAL;
		goto out_free;
	}
	pfs_rd_init(&rd, m.fhs.p, m.fhs.len);
	while (pfs_dec_fh_item(&rd, &fh) == 1)
		interest_del(d->it, handles_key(d->hs, &fh), s->islot);
	s->forget_epoch++;
	pfs_debug("session %016llx: forgot %u objects", (unsigned long long)s->client_id, count);
	ret = 0;
out_free:
	free(dec);
	return ret;
}

/* --- the table --- */

/* Handlers by opcode; what else is known of an opcode is its row in
 * wire.h PFS_OPS. */
static const handler_fn ops[PFS_OP_MAX] = {
	[PFS_OP_PING] = op_ping,
	[PFS_OP_LOOKUP] = op_lookup,
	[PFS_OP_GETATTR] = op_getattr,
	[PFS_OP_SETATTR] = op_setattr,
	[PFS_OP_READLINK] = op_readlink,
	[PFS_OP_MKNOD] = op_mknod,
	[PFS_OP_MKDIR] = op_mkdir,
	[PFS_OP_SYMLINK] = op_symlink,
	[PFS_OP_UNLINK] = op_unlink,
	[PFS_OP_RMDIR] = op_rmdir,
	[PFS_OP_RENAME] = op_rename,
	[PFS_OP_LINK] = op_link,
	[PFS_OP_OPEN] = op_open,
	[PFS_OP_CREATE] = op_create,
	[PFS_OP_READ] = op_read,
	[PFS_OP_WRITE] = op_write,
	[PFS_OP_RELEASE] = op_release,
	[PFS_OP_FSYNC] = op_fsync,
	[PFS_OP_OPENDIR] = op_open,
	[PFS_OP_READDIR] = op_readdir,
	[PFS_OP_RELEASEDIR] = op_release,
	[PFS_OP_STATFS] = op_statfs,
	[PFS_OP_SETXATTR] = op_setxattr,
	[PFS_OP_GETXATTR] = op_getxattr,
	[PFS_OP_LISTXATTR] = op_listxattr,
	[PFS_OP_REMOVEXATTR] = op_removexattr,
	[PFS_OP_FALLOCATE] = op_fallocate,
	[PFS_OP_GETLK] = op_getlk,
	[PFS_OP_SETLK] = op_setlk,
	[PFS_OP_UNLOCK_OWNER] = op_unlock_owner,
	[PFS_OP_RECLAIM] = op_reclaim,
	[PFS_OP_RECLAIM_DONE] = op_reclaim_done,
	[PFS_OP_LSEEK] = op_lseek,
	[PFS_OP_REVALIDATE] = op_revalidate,
	[PFS_OP_LOOKUP_DATA] = op_lookup_data,
	[PFS_OP_LISTDIR] = op_listdir,
};

/* Errors that point at the server rather than at the request. */
static bool unexpected(int err)
{
	return err == EIO || err == ENOMEM || err == EBADF || err == EFAULT || err == EMFILE ||
	       err == ENFILE || err == EUCLEAN;
}

void dispatch_work_cb(uv_work_t *w)
{
	struct req *r = w->data;
	struct op o;
	uint8_t *dec = NULL;
	void *scratch = NULL;
	size_t cap = 0;
	unsigned opc = r->h.op;
	int ret;

	memset(&o, 0, sizeof(o));
	o.r = r;
	o.d = r->d;
	o.x.hs = r->d->hs;
	o.x.s = r->s;
	o.x.ro = r->d->o.ro;
	o.x.direct = r->d->o.buffered ? NULL : &r->d->direct;
	if (r->s) {
		o.x.it = r->d->it;
		o.x.slot = r->s->islot;
		o.x.kv = &r->keys;
	}
	o.x.watch = r->d->watch;
	o.in = r->in;
	o.inlen = r->h.wire_len;
	/* The reply's codings, now that it is about to be made (link.h). */
	r->codecs = pfs_link_codecs(r->codecs, r->d->o.lz4,
				    atomic_load_explicit(&r->c->backlog, memory_order_relaxed));
	if (r->h.flags & PFS_FF_CODED) {
		dec = xmalloc(r->h.raw_len);
		if (pfs_payload_decode(r->h.flags, r->in, r->h.wire_len, dec, r->h.raw_len) < 0) {
			free(dec);
			r->violation = true;
			return;
		}
		o.in = dec;
		o.inlen = r->h.raw_len;
	}

	if (opc == PFS_OP_AUTH)
		ret = op_auth(&o);
	else if (opc >= PFS_OP_MAX || !ops[opc])
		ret = -ENOSYS;
	else if (o.x.ro && (pfs_op_flags(opc) & PFS_OPF_MODIFY))
		ret = -EROFS;
	else
		ret = ops[opc](&o);

	/* The request's bytes are no longer needed (decoded views die here). */
	free(dec);
	free(r->in);
	r->in = NULL;

	if (ret < 0) {
		if (unexpected(-ret))
			pfs_warn("conn %llu req %llu %s: %s", (unsigned long long)r->c->id,
				 (unsigned long long)r->h.id, pfs_op_name(opc), strerror(-ret));
		else
			pfs_debug("conn %llu req %llu %s: %s", (unsigned long long)r->c->id,
				  (unsigned long long)r->h.id, pfs_op_name(opc), strerror(-ret));
		free(o.w.buf);
		o.w.buf = NULL;
		o.w.len = 0;
		r->status = -ret;
		if (r->splice_len) {
			pipes_put(&r->d->pipes, r->pipe, false);
			r->splice_len = 0;
		}
	} else {
		pfs_debug("conn %llu req %llu %s: ok, %zu bytes", (unsigned long long)r->c->id,
			  (unsigned long long)r->h.id, pfs_op_name(opc), o.w.len);
		r->status = 0;
	}
	if (r->splice_len) {
		/* Header for the whole payload; its tail is in the pipe. */
		pfs_frame_prepare(r->hdr, r->h.id, (uint16_t)opc, PFS_FF_REPLY, 0, o.w.buf,
				  o.w.len + r->splice_len, 0, NULL, 0, &r->wire);
		r->wirelen = o.w.len;
		r->outlen = o.w.len + r->splice_len;
		r->out = o.w.buf;
		r->scratch = NULL;
		return;
	}
	if (r->codecs && o.w.len >= PFS_LZ4_MIN) {
		cap = pfs_lz4_bound(o.w.len);
		scratch = xmalloc(cap);
	}
	r->wirelen = pfs_frame_prepare(r->hdr, r->h.id, (uint16_t)opc, PFS_FF_REPLY, r->status,
				       o.w.buf, o.w.len, r->codecs, scratch, cap, &r->wire);
	if (scratch && r->wire == scratch) {
		free(o.w.buf); /* only the compressed bytes go out */
		o.w.buf = NULL;
	} else {
		free(scratch);
		scratch = NULL;
	}
	r->outlen = o.w.len;
	r->out = o.w.buf;
	r->scratch = scratch;
}
