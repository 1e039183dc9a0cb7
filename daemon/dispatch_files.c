/* dispatch_files.c: the handlers of operations on files and their
 * attributes (PING, GETATTR, SETATTR, READLINK, OPEN, OPENDIR, READ,
 * WRITE, RELEASE, RELEASEDIR, FSYNC, FALLOCATE, COPY_RANGE, LSEEK,
 * STATFS). Worker threads (see op_i.h). */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "podfs/crc32c.h"
#include "podfs/frame.h"
#include "podfs/log.h"
#include "deleg_i.h"
#include "handles_i.h"
#include "op_i.h"
#include "session_i.h"
#include "slots_i.h"
#include "pfsd_i.h"
#include "rights_i.h"

int op_ping(struct op *o)
{
	struct pfs_ping_rep rep = { .stamp = o->m.ping_req.stamp };

	return OP_ENCODE(o, ping_rep, &rep);
}

/* fstat needs no permission: GETATTR resolves as root, no credential
 * switch (dispatch.c). */
int op_getattr(struct op *o)
{
	struct pfs_attr_rep rep;
	int ret = export_getattr(o->obj->fd, &rep.attr);

	return ret < 0 ? ret : OP_ENCODE(o, attr_rep, &rep);
}

int op_setattr(struct op *o)
{
	const struct pfs_setattr_req *m = &o->m.setattr_req;
	struct pfs_setattr_req plain = *m;
	struct pfs_attr_rep rep;
	int ret;

	/* Answered by the client under its delegation: refused if the
	 * delegation was revoked meanwhile (another client saw the file
	 * without this change). */
	if (m->valid & PFS_SET_DELEG) {
		/* Without the capability (a daemon restarted without
		 * --delegate) it is a plain SETATTR: nothing was revoked. */
		if (o->r->deleg && o->d->deleg &&
		    (ret = deleg_check(o->d->deleg, o->r->s->client_id, handles_key(o->d->hs, &m->fh))) < 0) {
			pfs_info("session %016llx: a change under a revoked delegation refused",
				 (unsigned long long)o->r->s->client_id);
			return ret;
		}
		plain.valid &= ~(uint32_t)PFS_SET_DELEG;
	}
	/* Rights taken away reach the other clients first (rights_i.h). */
	if (plain.valid & (PFS_SET_MODE | PFS_SET_UID | PFS_SET_GID)) {
		struct stat st;
		if (fstat(o->obj->fd, &st) == 0 &&
		    rights_may_shrink(&st, plain.valid, plain.mode, plain.uid, plain.gid) &&
		    op_forewarn(o, &m->fh, &st))
			return -OP_RECALL;
	}
	ret = export_setattr(&o->x, o->obj, &plain, &rep.attr);

	if (ret < 0)
		return ret;
	/* The session's slots in a directory were made under its rights
	 * before: a change of them ends them (the client uses them no
	 * more), which frees the session's room for others. */
	if (o->r->s && S_ISDIR(rep.attr.mode) && (m->valid & (PFS_SET_MODE | PFS_SET_UID | PFS_SET_GID)))
		slots_drop(o->r->s, handles_key(o->d->hs, &m->fh));
	op_inval_inode(o, &m->fh, (m->valid & PFS_SET_SIZE) ? 0 : -1, 0);
	return OP_ENCODE(o, attr_rep, &rep);
}

int op_readlink(struct op *o)
{
	struct pfs_readlink_rep rep;
	int ret = export_readlink(o->obj->fd, &rep.target);

	if (ret < 0)
		return ret;
	op_reply_alloc(o, PFS_PATH_MAX + 16);
	return OP_ENCODE(o, readlink_rep, &rep);
}

/* OPEN and OPENDIR. */
int op_open(struct op *o)
{
	const struct pfs_open_req *m = &o->m.open_req;
	struct pfs_attr_rep rep;
	int ret;

	if (o->r->h.op == PFS_OP_OPENDIR)
		ret = export_opendir(&o->x, o->obj, m->fid, &rep.attr);
	else
		ret = export_open(&o->x, o->obj, m->fid, m->flags, &rep.attr);
	if (ret < 0)
		return ret;
	if (o->r->h.op == PFS_OP_OPEN && (m->flags & O_TRUNC)) {
		op_inval_inode(o, &m->fh, 0, 0);
		/* Run again, it would truncate what was written since: a
		 * resend after a lost reply gets this reply instead. */
		o->r->keep_reply = true;
	}
	return OP_ENCODE(o, attr_rep, &rep);
}

/* READs of at least this many bytes may go out zero-copy. */
#define SPLICE_MIN (64u * 1024)

/* Zero-copy READ: when the reply would go out uncoded anyway (a 4 KiB
 * sample from the middle of the range says so: the same trials the
 * coder runs), the file's pages move into a pipe here, where waiting for
 * the disk is fine, and from the pipe into the socket on the loop
 * (conn.c). Returns 1 if the reply is set up that way (o->w holds the
 * length of read_rep's data, the data waits in r->pipe), 0 to read by
 * copying instead: also on any trouble with the pipe, so that errors are
 * reported by the ordinary path. */
static int read_spliced(struct op *o, const struct pfs_read_req *m, uint32_t size)
{
	struct req *r = o->r;
	uint8_t sample[4096];
	int p[2];
	ssize_t n;

	if (r->codecs) {
		n = export_read(&o->x, o->obj, m->fid, m->flags, m->offset + size / 2 - sizeof(sample) / 2,
				sizeof(sample), sample);
		if (n <= 0 || pfs_frame_may_code(sample, (size_t)n, r->codecs))
			return 0;
	}
	if (pipes_get(&o->d->pipes, p) < 0)
		return 0;
	n = export_read_splice(&o->x, o->obj, m->fid, m->flags, m->offset, size, p[1]);
	if (n <= 0) {
		pipes_put(&o->d->pipes, p, false);
		return 0;
	}
	r->pipe[0] = p[0];
	r->pipe[1] = p[1];
	r->splice_len = (size_t)n;
	/* read_rep is BYTES data: only its length goes in the payload. */
	op_reply_alloc(o, 4);
	if (pfs_put_BYTES_head(&o->w, (size_t)n) < 0)
		return -EIO;
	return 1;
}

int op_read(struct op *o)
{
	const struct pfs_read_req *m = &o->m.read_req;
	uint32_t size = m->size < PFS_MAX_IO ? m->size : PFS_MAX_IO;
	size_t at;
	ssize_t n;
	int ret;

	/* The loop thread reads and encrypts small replies only (workers.c,
	 * workers_try_on_loop). */
	if (o->x.nowait && size > OP_LOOP_READ_MAX)
		return -OP_WOULD_BLOCK;
	/* Spliced pages cannot be encrypted on the way: not under TLS. */
	if (size >= SPLICE_MIN && !o->r->no_splice) {
		ret = read_spliced(o, m, size);
		if (ret != 0)
			return ret < 0 ? ret : 0;
	}
	/* read_rep is BYTES data: read straight into the reply. */
	op_reply_alloc(o, 4 + (size_t)size);
	if (pfs_bytes_open(&o->w, &at) < 0)
		return -EIO;
	n = export_read(&o->x, o->obj, m->fid, m->flags, m->offset, size, o->w.buf + o->w.len);
	if (n < 0)
		return (int)n;
	o->w.len += (size_t)n;
	return pfs_bytes_close(&o->w, at) < 0 ? -EIO : 0;
}

/* export_write's before_append: the append's record, before its data
 * (replylog_i.h). */
static void note_append(void *ctx, uint64_t at, uint32_t len, uint32_t crc)
{
	struct op *o = ctx;

	replylog_intend(&o->d->replies, &o->r->s->ha->rl, o->r->s->client_id, o->r->h.id,
			&o->m.write_req.fh, at, len, crc);
}

int op_write(struct op *o)
{
	const struct pfs_write_req *m = &o->m.write_req;
	struct pfs_write_rep rep;
	uint64_t at;

	/* An append's reply is kept (r->drc): its record goes first. */
	if (o->r->drc && o->r->s) {
		o->x.before_append = note_append;
		o->x.append_ctx = o;
	}
	/* Sent again after a restart, and found written then (server.c)? */
	if (o->r->landed && m->data.len == o->r->landed_len &&
	    pfs_crc32c(0, m->data.p, m->data.len) == o->r->landed_crc) {
		o->x.landed = true;
		o->x.landed_at = o->r->landed_at;
		/* It counts as a change: it waits as one (server.c). */
		o->r->replayed = true;
	}
	int ret = export_write(&o->x, o->obj, m->fid, m->flags, m->offset, m->data.p, m->data.len,
			       &rep.written, &at, &rep.attr);

	/* An append is not idempotent: a resend after a lost reply gets
	 * this reply, whatever it says, instead of appending again. */
	o->r->keep_reply = o->x.appended;
	if (ret < 0)
		return ret;
	/* The range the data landed in (an append's, not the offset the
	 * client sent). */
	op_inval_inode(o, &m->fh, (int64_t)at, rep.written);
	if (o->x.appended && o->r->append_at) {
		/* Where it landed, for a resend after a reboot (PFS_WR_AT). */
		struct pfs_write_at_rep arep = { .written = rep.written, .attr = rep.attr, .at = at };
		return OP_ENCODE(o, write_at_rep, &arep);
	}
	return OP_ENCODE(o, write_rep, &rep);
}

/* RELEASE and RELEASEDIR. */
int op_release(struct op *o)
{
	/* A delegation lasts while the fid its CREATE opened does. */
	if (o->d->deleg && o->r->s && o->r->h.op == PFS_OP_RELEASE)
		deleg_release(o->d->deleg, o->r->s->client_id, o->m.release_req.fid);
	return export_release(&o->x, o->m.release_req.fid);
}

int op_fsync(struct op *o)
{
	const struct pfs_fsync_req *m = &o->m.fsync_req;

	return export_fsync(&o->x, o->obj, m->fid, m->datasync != 0);
}

int op_fallocate(struct op *o)
{
	const struct pfs_fallocate_req *m = &o->m.fallocate_req;
	struct pfs_attr_rep rep;
	int ret = export_fallocate(&o->x, o->obj, m->fid, m->mode, m->offset, m->length,
				   o->r->post_attr ? &rep.attr : NULL);

	if (ret < 0)
		return ret;
	op_inval_inode(o, &m->fh, 0, 0);
	return o->r->post_attr ? OP_ENCODE(o, attr_rep, &rep) : 0;
}

int op_copy_range(struct op *o)
{
	const struct pfs_copy_range_req *m = &o->m.copy_range_req;
	struct pfs_write_rep rep;
	int ret = export_copy_range(&o->x, o->obj2, m->src_fid, m->src_flags, m->src_off, o->obj,
				    m->dst_fid, m->dst_flags, m->dst_off, m->length, &rep.written,
				    &rep.attr);

	if (ret < 0)
		return ret;
	op_inval_inode(o, &m->dst, (int64_t)m->dst_off, rep.written);
	return OP_ENCODE(o, write_rep, &rep);
}

int op_lseek(struct op *o)
{
	const struct pfs_lseek_req *m = &o->m.lseek_req;
	struct pfs_lseek_rep rep;
	int ret = export_lseek(&o->x, o->obj, m->fid, m->offset, m->whence, &rep.offset);

	return ret < 0 ? ret : OP_ENCODE(o, lseek_rep, &rep);
}

/* The export's filesystem, whichever object the request names. */
int op_statfs(struct op *o)
{
	struct pfs_statfs_rep rep;
	int ret = export_statfs(&o->x, &rep);

	return ret < 0 ? ret : OP_ENCODE(o, statfs_rep, &rep);
}
