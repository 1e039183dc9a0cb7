/* ops_attr.c: FUSE operations on attributes: getattr, setattr (see
 * ops_i.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "deleg_i.h"
#include "deleg_rules_i.h"
#include "dirdeleg_i.h"
#include "gate_i.h"
#include "ops_i.h"
#include "podfs/log.h"
#include "readahead_i.h"
#include "transport_i.h"
#include "trust_i.h"
#include "wb_i.h"

/* Replies to a GETATTR of ip sent at push number seq with snapshot
 * (any, ns); or, with own (the stamp it gave ip), to our own change of
 * ip sent then, whose reply carries ip's attributes after it. */
static void finish_attr(fuse_req_t req, struct inode *ip, int rc, struct rpc_reply *rep,
			uint64_t own, uint64_t seq, uint64_t any, uint64_t ns)
{
	struct client *c = CL(req);
	struct pfs_attr_rep ar;
	struct stat st;

	if (rc == 0 && pfs_dec_attr_rep(rep->buf, rep->len, &ar) < 0)
		rc = ops_bad_reply(req, "attr");
	rpc_reply_free(rep);
	if (rc < 0) {
		if (own)
			inode_own_end(c->it, ip, NULL, seq, own, ns);
		fuse_reply_err(req, -rc);
		return;
	}
	if (own) {
		/* The attributes right after our own change are current if
		 * nothing else of ours moved ip meanwhile (trust_i.h). */
		inode_own_end(c->it, ip, &ar.attr, seq, own, ns);
		if (c->dl)
			deleg_note_attr(c->dl, ip, &ar.attr);
	} else {
		inode_set_attr(ip, &ar.attr, seq);
		inode_trust_attr(c->it, ip, seq, any, ns);
	}
	inode_overlay(ip, &ar.attr); /* what a delegation answered (deleg_i.h) */
	attr_to_stat(&ar.attr, &st);
	gate_enter(c->gate);
	double t = gate_pushed_since(c->gate, seq, &ip->fh) ? 0 : c->attr_timeout;
	fuse_reply_attr(req, &st, t);
	gate_leave(c->gate);
}

void ops_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct client *c = CL(req);
	struct inode *ip = IP(req, ino);
	struct pfs_getattr_req m;
	struct rpc_reply rep = { 0 };
	(void)fi;

	readahead_raise(c);
	/* The kernel asks again after every read (atime) and after its
	 * attribute timeout: answer from attributes known to be current
	 * (see inode_attr_trusted), with no round trip, once every frame
	 * the server sent was handled (transport_quiet); for a directory
	 * this host holds, at once: no other host changes it before a
	 * recall, and what is in flight is this host's own (as the kernel
	 * asks after each create there, this keeps the queue of creates
	 * from being hurried: dirdeleg_i.h). */
	struct pfs_attr a;
	uint64_t aseq;
	if (inode_attr_trusted(c->it, ip, &a, &aseq) &&
	    (transport_quiet(c->tr) || (c->dd && dirdeleg_holds(c->dd, ip)))) {
		gate_enter(c->gate);
		if (!gate_pushed_since(c->gate, aseq, &ip->fh)) {
			struct stat st;
			attr_to_stat(&a, &st);
			fuse_reply_attr(req, &st, c->attr_timeout);
			gate_leave(c->gate);
			return;
		}
		gate_leave(c->gate);
	}
	/* A file made here whose create is queued still, with every byte
	 * written: its attributes are the item's (pip stats each compiled
	 * file it renamed into place), not the daemon's after the queue. */
	if (c->dd && dirdeleg_stat(c->dd, ip, &a)) {
		struct stat st;
		inode_overlay(ip, &a); /* what a delegation answered (deleg_i.h) */
		attr_to_stat(&a, &st);
		fuse_reply_attr(req, &st, c->attr_timeout);
		return;
	}
	if (wb_wait_data(c->wb, ip) < 0) { /* the size includes our pending writes */
		fuse_reply_err(req, EINTR);
		return;
	}
	/* A directory, or a file, whose unlink answered here is not sent
	 * yet: after it (other objects need not wait: dirdeleg_i.h). */
	if (c->dd)
		dirdeleg_wait_for(c->dd, ip);
	fill_creds(req, &m.cr, false);
	m.fh = ip->fh;
	uint64_t ns, any = inode_own_snap(c->it, &ns);
	uint64_t seq = gate_seq(c->gate);
	int rc = rpc_msg(c->rpc, PFS_OP_GETATTR, getattr_req, &m, &rep);
	finish_attr(req, ip, rc, &rep, 0, seq, any, ns);
}

/* The SETATTR of what the kernel asks (fid not set). */
static void setattr_of(fuse_req_t req, struct inode *ip, const struct stat *attr, int to_set,
		       struct pfs_setattr_req *m)
{
	memset(m, 0, sizeof(*m));
	fill_creds(req, &m->cr, true);
	m->fh = ip->fh;
	if (to_set & FUSE_SET_ATTR_MODE) {
		m->valid |= PFS_SET_MODE;
		m->mode = attr->st_mode;
	}
	if (to_set & FUSE_SET_ATTR_UID) {
		m->valid |= PFS_SET_UID;
		m->uid = attr->st_uid;
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		m->valid |= PFS_SET_GID;
		m->gid = attr->st_gid;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		m->valid |= PFS_SET_SIZE;
		m->size = (uint64_t)attr->st_size;
	}
	if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
		m->valid |= PFS_SET_ATIME_NOW;
	} else if (to_set & FUSE_SET_ATTR_ATIME) {
		m->valid |= PFS_SET_ATIME;
		m->atime_s = attr->st_atim.tv_sec;
		m->atime_ns = (uint32_t)attr->st_atim.tv_nsec;
	}
	if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
		m->valid |= PFS_SET_MTIME_NOW;
	} else if (to_set & FUSE_SET_ATTR_MTIME) {
		m->valid |= PFS_SET_MTIME;
		m->mtime_s = attr->st_mtim.tv_sec;
		m->mtime_ns = (uint32_t)attr->st_mtim.tv_nsec;
	}
	if (to_set & FUSE_SET_ATTR_CTIME)
		m->valid |= PFS_SET_CTIME;
}

/* A change of a directory this host holds, that the caller may make
 * (its mode, owner or explicit times: deleg_rules_i.h), while its
 * attributes are known current: answered here, the SETATTR queued behind
 * what is queued there (dirdeleg_dir_setattr). Returns whether it was. */
static bool held_dir_setattr(struct client *c, fuse_req_t req, struct inode *ip,
			     const struct pfs_setattr_req *m)
{
	struct pfs_attr base, na;
	struct dl_attr cur, out;
	struct stat st;

	if (!c->dd || (m->valid & ~(uint32_t)DL_LOCAL_BITS) || !ops_current_attr(c, ip, &base, NULL) ||
	    !S_ISDIR(base.mode) || !dirdeleg_holds(c->dd, ip))
		return false;
	dl_attr_of(&base, &cur);
	if (!dl_setattr_dir(&cur, &m->cr, m, &out))
		return false;
	dl_answer(&base, &out, &na);
	if (!dirdeleg_dir_setattr(c->dd, ip, m, &na))
		return false;
	attr_to_stat(&na, &st);
	fuse_reply_attr(req, &st, c->attr_timeout);
	return true;
}

void ops_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		 struct fuse_file_info *fi)
{
	struct client *c = CL(req);
	struct inode *ip = IP(req, ino);
	struct pfs_setattr_req m;
	struct rpc_reply rep = { 0 };

	setattr_of(req, ip, attr, to_set, &m);
	/* Rights are checked at open: what this host opened without the
	 * daemon is opened there while the opener may still (ofile_i.h). */
	if (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID))
		ofile_attach_lazy(c, NULL, false, &ip->fh, 0);
	/* A directory this host holds: after what is queued there, and
	 * nothing to wait for. */
	if (held_dir_setattr(c, req, ip, &m))
		return;
	/* A file made here whose create is queued still, with every byte
	 * written: its attributes are known without it (dirdeleg_attr), and
	 * a change of its mode, owner or times answered here goes with it
	 * (dirdeleg_release), as tar makes them before the close. */
	struct pfs_attr base;
	bool queued = c->dd && c->dl && !(to_set & FUSE_SET_ATTR_SIZE) && deleg_has(c->dl, ip) &&
		      dirdeleg_attr(c->dd, ip, &base);
	/* A truncate comes after our pending writes, and after the commit
	 * of those it cuts (wb_before_change). */
	int wrc = (to_set & FUSE_SET_ATTR_SIZE) ? wb_before_change(c->wb, ip, (uint64_t)attr->st_size)
		  : queued ? wb_wait(c->wb, ip) : wb_wait_data(c->wb, ip);
	if (wrc < 0) {
		fuse_reply_err(req, EINTR);
		return;
	}
	/* A directory's rights are those its slots were made under. */
	if (c->dd && (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)))
		dirdeleg_dir_changed(c->dd, ip);
	/* Under a delegation, a change answered here carries the file's other
	 * attributes (its size...): only if they are known current
	 * (trust_i.h; e.g. not while the replies of writes that were in
	 * flight together may have come in any order). Taken before this
	 * change stamps ip. */
	bool local = c->dl && deleg_has(c->dl, ip) && (queued || ops_current_attr(c, ip, &base, NULL));
	uint64_t ns;
	(void)inode_own_snap(c->it, &ns);
	uint64_t at = inode_own_touch(c->it, ip, false);
	inode_drop_inline(ip); /* our own changes are never pushed back to us */
	m.fid = fi && fi->fh ? ofile_known_fid(OF(fi)) : 0;
	uint64_t seq = gate_seq(c->gate);
	/* Under a delegation: answered here if it can be (deleg_i.h), else
	 * sent after what was. */
	if (c->dl && deleg_has(c->dl, ip)) {
		struct pfs_attr na;
		if (local && deleg_setattr(c->dl, ip, &m.cr, &m, &base, &na)) {
			struct stat st;
			wb_note_setattr(c->wb, ip, &m);
			inode_own_end(c->it, ip, &na, seq, at, ns);
			attr_to_stat(&na, &st);
			fuse_reply_attr(req, &st, c->attr_timeout);
			return;
		}
		(void)deleg_flush(c->dl, ip, false);
	}
	ops_dir_busy(c, ip, 1); /* the kernel holds ip's lock: a directory's too */
	int rc = rpc_msg_in(c->rpc, ip, PFS_OP_SETATTR, setattr_req, &m, &rep);
	ops_dir_busy(c, ip, -1);
	if (rc == 0)
		wb_note_setattr(c->wb, ip, &m);
	finish_attr(req, ip, rc, &rep, at, seq, 0, ns);
}
