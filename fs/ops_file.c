/* ops_file.c: FUSE operations on open files: open, create, read, write,
 * flush, release, fsync, fallocate, copy_file_range, lseek (see ops_i.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cache_i.h"
#include "deleg_i.h"
#include "dirdeleg_i.h"
#include "estale_i.h"
#include "gate_i.h"
#include "locks_i.h"
#include "ops_i.h"
#include "pcache_i.h"
#include "peer_i.h"
#include "podfs/log.h"
#include "readahead_i.h"
#include "trust_i.h"
#include "wb_i.h"

/* A read-only open of a file whose whole content is at hand (it came
 * with the lookup or the listing) and whose pages the kernel may keep
 * gives the kernel that content as pages before the open returns: the
 * reads that follow need no READ, and the next stat no GETATTR (the
 * kernel forgets a file's atime after every READ it sends). A push about
 * the file numbered after `since` (taken before the open was decided)
 * may have reached the kernel before the pages did: keep_cache=0 then
 * makes the kernel drop them as the open completes. */
static void open_store_inline(struct client *c, struct inode *ip, fuse_ino_t ino,
			      struct fuse_file_info *fi, uint64_t since)
{
	uint32_t len;
	uint8_t *data;

	if (!fi->keep_cache || (fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC) ||
	    !(data = inode_inline_copy(ip, &len)))
		return;
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(len);
	bv.buf[0].mem = data;
	int rc = len ? fuse_lowlevel_notify_store(c->se, ino, 0, &bv, 0) : -1;
	free(data);
	if (rc != 0)
		return;
	gate_enter(c->gate);
	if (gate_pushed_since(c->gate, since, &ip->fh))
		fi->keep_cache = 0;
	gate_leave(c->gate);
	if (fi->keep_cache)
		inode_drop_inline(ip); /* the kernel has it now */
}

void ops_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct client *c = CL(req);
	struct inode *ip = IP(req, ino);
	struct ops_opened o;
	struct ofile *of;

	readahead_raise(c);
	/* Is this the VFS's retry of an open answered ESTALE below? Asked at
	 * every open, so that the thread's slot is disarmed by the very next
	 * open, whatever it finds. The retry's open usually finds the file
	 * the name now holds, still named (and often opens it locally): a
	 * slot left armed then made a later open by the same thread, within
	 * ESTALE_RETRY_NS, of that same file after another host had renamed
	 * over it or removed it (the kernel's dentry not yet invalidated)
	 * pass for the retry and open the old file. */
	pid_t tid = fuse_req_ctx(req)->pid;
	bool retry = estale_retry(&c->estale, tid, ino);
	if (!(of = ofile_new(c, ip, fi->flags))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* The daemon checks the mode a delegation answered (deleg_i.h). */
	if (c->dl)
		(void)deleg_flush(c->dl, ip, false);
	/* A truncating open comes after our pending writes, and after the
	 * commit of the others (wb_before_change). */
	if ((fi->flags & O_TRUNC) && wb_before_change(c->wb, ip, 0) < 0) {
		ofile_free(of);
		fuse_reply_err(req, EINTR);
		return;
	}
	/* A truncating open is our own change of the file. */
	uint64_t trunc_at = (fi->flags & O_TRUNC) ? inode_own_touch(c->it, ip, false) : 0;
	if (trunc_at)
		inode_drop_inline(ip);
	uint64_t before = gate_seq(c->gate);
	if (ops_open_locally(req, ip, fi, false)) {
		struct pfs_creds cr;
		open_store_inline(c, ip, ino, fi, before);
		fill_creds(req, &cr, true);
		ofile_mark_local(of, &cr);
		fi->fh = (uint64_t)(uintptr_t)of;
		ops_append_direct(fi);
		if (fuse_reply_open(req, fi) != 0)
			ofile_free(of);
		return;
	}
	if (ops_open_remote(req, of, fi, PFS_OP_OPEN, &o) < 0) {
		if (trunc_at)
			inode_own_end(c->it, ip, NULL, o.seq, trunc_at, o.ns);
		return;
	}
	/* The kernel found this file under a name that another host removed
	 * or renamed another file over: ESTALE makes the VFS look the name
	 * up again (LOOKUP_REVAL) and open what it names now, as
	 * close-to-open requires. Its push may not have reached the kernel
	 * yet (the dentry still names this file), or it may have reached it
	 * while this open was already past the name (the walk holds the
	 * inode): any push about the file since the kernel was first handed
	 * it counts, not only those not yet applied. Reopening a file
	 * removed by another host through /proc/PID/fd thus fails with
	 * ESTALE, as on NFS; one this host removed opens (unless over 1,024
	 * pushes came since: the check then errs towards ESTALE). */
	if (o.attr.nlink == 0 && !S_ISDIR(o.attr.mode)) {
		uint64_t since = inode_named_seq(ip);
		if (since > o.applied)
			since = o.applied;
		gate_enter(c->gate);
		bool gone = gate_pushed_since(c->gate, since, &ip->fh);
		gate_leave(c->gate);
		if (gone && !retry) {
			if (trunc_at)
				inode_own_end(c->it, ip, NULL, o.seq, trunc_at, o.ns);
			estale_arm(&c->estale, tid);
			ofile_release(of, req, PFS_OP_RELEASE);
			ofile_free(of);
			fuse_reply_err(req, ESTALE);
			return;
		}
	}
	if ((fi->flags & O_ACCMODE) != O_WRONLY)
		inode_note_reader(ip, o.cr.uid, o.cr.gid);
	/* Close-to-open: the kernel's pages may stay only if the file has
	 * not changed since they were cached (keep_cache=0 makes the kernel
	 * drop them). Its cached attributes go too if they differ from the
	 * fresh ones (offset -1: attributes only, safe in a handler). */
	bool attrs_stale;
	fi->keep_cache = inode_open_version(ip, &o.attr, &attrs_stale, o.seq);
	if (!attrs_stale)
		open_store_inline(c, ip, ino, fi, o.applied);
	/* The version (size, mtime, ctime) misses a change made within one
	 * timestamp tick. The server's push does not: one about this file
	 * that arrived but may not have reached the kernel yet (the server
	 * sends it before the OPEN reply when the change came first) means
	 * the pages are stale. */
	gate_enter(c->gate);
	if (gate_pushed_since(c->gate, o.applied, &ip->fh)) {
		fi->keep_cache = 0;
		attrs_stale = true;
	}
	gate_leave(c->gate);
	/* A truncating open's attributes are those after it (nlink 0 aside,
	 * see above). */
	if (trunc_at && inode_own_end(c->it, ip, &o.attr, o.seq, trunc_at, o.ns) &&
	    o.attr.size == 0 && c->max_inline)
		inode_set_inline(ip, &o.attr, "", 0); /* what it holds: what we write */
	else if (!trunc_at)
		inode_trust_attr(c->it, ip, o.seq, o.any, o.ns);
	if (attrs_stale)
		fuse_lowlevel_notify_inval_inode(c->se, ino, -1, 0);
	fi->fh = (uint64_t)(uintptr_t)of;
	ops_append_direct(fi);
	if (fuse_reply_open(req, fi) != 0) {
		ofile_release(of, req, PFS_OP_RELEASE);
		ofile_free(of);
	}
}

/* ops_create's answer to a create that dirdeleg_create answered here
 * (pe: the new file's entry, ip its inode with a lookup for the kernel;
 * err: an earlier error, a positive errno, reported instead). */
/* ip was made here by the caller of creds cr, with attributes a. That
 * caller may read it while its owner may: the daemon made it under cr's
 * identity (mapped as every request of cr's is), so that identity owns
 * it and the mode's owner bits decide. Its opens for reading are then
 * answered here (ops_open_locally), as after an OPEN the daemon let
 * through, and what it reads back of what it wrote comes from the
 * inline copy its writes keep. */
static void made_here(struct client *c, struct inode *ip, const struct pfs_attr *a,
		      const struct pfs_creds *cr)
{
	if (!S_ISREG(a->mode))
		return;
	if (a->mode & S_IRUSR)
		inode_note_reader(ip, cr->uid, cr->gid);
	/* Its content is what this host writes (inode_write_inline). */
	if (a->size == 0 && c->max_inline)
		inode_set_inline(ip, a, "", 0);
}

static void create_answered(fuse_req_t req, struct inode *dir, const char *name,
			    struct ofile *of, struct inode *ip, const struct pfs_entry *pe,
			    const struct pfs_creds *cr, struct fuse_file_info *fi, int err)
{
	struct client *c = CL(req);
	struct fuse_entry_param e;

	if (err) {
		ofile_free(of);
		fuse_reply_err(req, err);
		return;
	}
	ofile_set_ip(of, ip);
	inode_set_parent(c->it, ip, dir, gate_seq(c->gate), name);
	memset(&e, 0, sizeof(e));
	e.ino = ip->nodeid;
	attr_to_stat(&pe->attr, &e.attr);
	e.attr_timeout = c->attr_timeout;
	e.entry_timeout = c->entry_timeout;
	bool attrs_stale;
	inode_open_version(ip, &pe->attr, &attrs_stale, 0);
	inode_set_nocaps(ip, c->attr_timeout);
	inode_note_name(dir, name);
	made_here(c, ip, &pe->attr, cr);
	/* Its mode, owner and explicit times are answered here too while it
	 * is open (deleg_i.h): no other host reaches it before a recall of
	 * the directory, which sends them (the daemon's table has no entry
	 * for it: nothing to revoke but the directory's). */
	if (c->dl)
		deleg_granted(c->dl, ip, &dir->fh, of->fid, &pe->attr);
	fi->fh = (uint64_t)(uintptr_t)of;
	ops_append_direct(fi);
	if (fuse_reply_create(req, &e, fi) != 0) {
		ofile_release(of, req, PFS_OP_RELEASE);
		ofile_free(of);
		inode_forget(c->it, ip, 1);
	}
}

void ops_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		struct fuse_file_info *fi)
{
	struct client *c = CL(req);
	struct pfs_create_req m;
	struct pfs_entry_rep er;
	struct fuse_entry_param e;
	struct rpc_reply rep = { 0 };
	struct inode *ip = NULL;
	struct ofile *of;
	int rc;

	if (!(of = ofile_new(c, NULL, fi->flags))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* Under a directory delegation: answered here (dirdeleg_i.h). The
	 * daemon opens the file as this fid when it names it. */
	if (c->dd && (S_ISREG(mode) || (mode & S_IFMT) == 0)) {
		struct pfs_creds cr;
		struct pfs_entry pe;
		struct inode *nip;
		int err;
		uint32_t perm = (uint32_t)(mode & ~fuse_req_ctx(req)->umask & 07777);
		fill_creds(req, &cr, true);
		if (dirdeleg_create(c->dd, IP(req, parent), name, perm, &cr, of->fid,
				    (uint32_t)fi->flags, &pe, &nip, &err)) {
			if (!err)
				(void)ofile_fid(of); /* the daemon knows it from now on */
			create_answered(req, IP(req, parent), name, of, nip, &pe, &cr, fi, err);
			return;
		}
	}
	struct ops_own o = ops_own_change(c, IP(req, parent), false);
	uint64_t seq = o.seq;
	fill_creds(req, &m.cr, true);
	m.parent = IP(req, parent)->fh;
	m.fid = ofile_fid(of);
	m.flags = (uint32_t)fi->flags;
	m.mode = mode;
	m.umask = fuse_req_ctx(req)->umask;
	ops_dir_busy(c, IP(req, parent), 1);
	if ((rc = ops_set_name(&m.name, name)) == 0)
		rc = rpc_msg_in(c->rpc, IP(req, parent), PFS_OP_CREATE, create_req, &m, &rep);
	ops_dir_busy(c, IP(req, parent), -1);
	/* The kernel sent CREATE for a name it believed absent (a cached
	 * negative entry), but another host made it a symlink, which the
	 * server never follows. ESTALE makes the VFS redo the open with
	 * LOOKUP_REVAL: a fresh lookup, and the kernel follows the link. */
	bool loop = rc == -ELOOP && !(fi->flags & O_EXCL);
	if (loop)
		rc = -ESTALE;
	struct pfs_attr da;
	bool have_da = false;
	uint32_t mkflags;
	if (rc == 0 && ops_dec_entry(&rep, &er, &da, &have_da, &mkflags) < 0)
		rc = ops_bad_reply(req, "CREATE");
	rpc_reply_free(&rep);
	ops_own_listing(IP(req, parent), name, rc == 0 ? &er.e : NULL);
	ops_own_done(c, &o);
	ops_own_dir_attr(c, IP(req, parent), rc == 0 && have_da ? &da : NULL, &o, o.at);
	bool made = false;
	if (rc == 0 && !(ip = ops_entry_param(c, NULL, NULL, 0, &er.e, &e, &made))) {
		/* The file was created and opened; the kernel will never
		 * release this fid, so do it here. */
		ofile_release_fid(c, req, &er.e.fh, of->fid, PFS_OP_RELEASE);
		rc = -ENOMEM;
	}
	if (rc < 0) {
		ofile_free(of);
		/* At the retry: ELOOP if it met the symlink again. */
		rc = ops_name_err(req, rc);
		fuse_reply_err(req, loop && rc == -ENOENT ? ELOOP : -rc);
		return;
	}
	ofile_set_ip(of, ip);
	/* A new file's attributes are current (nothing else of ours knew
	 * it). A file that existed (opened without O_EXCL, maybe truncated)
	 * is left to GETATTR, and stamped: what was read of it meanwhile
	 * goes. */
	if (made) {
		inode_trust_attr(c->it, ip, seq, o.any, o.ns_trust);
		made_here(c, ip, &er.e.attr, &m.cr);
		/* What the kernel asks a new file before its first write:
		 * its capabilities, and its ACL unless the caller owns it. */
		ops_made_absent(c, ip, mkflags, seq, o.any);
	} else {
		if (fi->flags & O_TRUNC) /* it held the bytes before */
			inode_drop_inline(ip);
		inode_own_end(c->it, ip, &er.e.attr, seq, 0, o.ns_trust);
	}
	inode_set_parent(c->it, ip, IP(req, parent), seq, name);
	/* A delegation on the new file (deleg_i.h). */
	if (c->dl && (mkflags & PFS_CR_DELEG) && made && S_ISREG(er.e.attr.mode))
		deleg_granted(c->dl, ip, &IP(req, parent)->fh, ofile_fid(of), &er.e.attr);
	/* Creates there may be answered here next (dirdeleg_i.h). */
	if (c->dd && made)
		dirdeleg_synced(c->dd, IP(req, parent), &m.cr, true);
	bool attrs_stale;
	inode_open_version(ip, &er.e.attr, &attrs_stale, seq);
	/* A new file has no capabilities (they are never inherited). */
	inode_set_nocaps(ip, c->attr_timeout);
	fi->fh = (uint64_t)(uintptr_t)of;
	inode_note_name(IP(req, parent), name);
	gate_enter(c->gate);
	if (gate_pushed_since(c->gate, seq, &IP(req, parent)->fh) ||
	    gate_pushed_since(c->gate, seq, &ip->fh)) {
		e.entry_timeout = 0;
		e.attr_timeout = 0;
	}
	ops_append_direct(fi);
	int rr = fuse_reply_create(req, &e, fi);
	gate_leave(c->gate);
	if (rr != 0) {
		ofile_release(of, req, PFS_OP_RELEASE);
		ofile_free(of);
		inode_forget(c->it, ip, 1);
	}
}

/* Answers a READ of ip (at data version v) from the persistent cache;
 * returns false (nothing replied) on a miss. */
static bool pc_serve(fuse_req_t req, struct inode *ip, const struct dver *v, size_t size,
		     off_t off)
{
	char *buf = malloc(size ? size : 1);
	ssize_t n = buf ? pcache_read(CL(req)->pc, &ip->fh, v, (uint64_t)off, size, buf) : -ENOMEM;
	if (n >= 0)
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
	return n >= 0;
}

/* The server answered a READ of ip at off with data (version v seen
 * before it was sent): the whole file is stored, a part makes the
 * background thread fetch the whole file (creds cr). The data is of v or
 * newer, and a newer one ends v, so no stale data is ever kept under v. */
static void pc_fill(struct client *c, const struct pfs_creds *cr, struct inode *ip,
		    const struct dver *v, uint64_t off, const struct pfs_bytes *data)
{
	if (off == 0 && data->len == v->size)
		pcache_offer(c->pc, &ip->fh, v, data->p, data->len);
	else
		pcache_fetch(c->pc, cr, &ip->fh, v);
}

void ops_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
	      struct fuse_file_info *fi)
{
	struct client *c = CL(req);
	struct ofile *of = OF(fi);
	struct pfs_read_req m;
	struct pfs_read_rep r;
	struct rpc_reply rep = { 0 };
	(void)ino;

	if (wb_wait_data(c->wb, of->ip) < 0) { /* see our own writes */
		fuse_reply_err(req, EINTR);
		return;
	}
	if (size <= PFS_MAX_IO && inode_has_inline(of->ip)) {
		/* The content came with the lookup (LOOKUP_DATA). */
		char *buf = malloc(size ? size : 1);
		size_t got;
		if (buf && inode_read_inline(of->ip, (uint64_t)off, size, buf, &got)) {
			fuse_reply_buf(req, buf, got);
			free(buf);
			return;
		}
		free(buf);
	}
	/* The persistent cache, for a file whose current version is known:
	 * not from a lost connection until the revalidation after it ended
	 * (pushes may have been lost meanwhile). */
	struct dver pv;
	bool pc = c->pc && cache_current(c->cache) && inode_data_version(of->ip, &pv) &&
		  pcache_wants(c->pc, pv.size);
	if (pc && pc_serve(req, of->ip, &pv, size, off))
		return;
	/* A large file, by chunks from the peers (-o peers). */
	if (c->peer && peer_read(req, of, size, off))
		return;
	ops_file_req(req, of, &m.cr, &m.fh, &m.fid);
	m.flags = of->flags;
	m.offset = (uint64_t)off;
	m.size = (uint32_t)(size > PFS_MAX_IO ? PFS_MAX_IO : size);
	uint64_t seq = pc ? gate_seq(c->gate) : 0;
	int rc = rpc_msg(c->rpc, PFS_OP_READ, read_req, &m, &rep);
	if (rc == 0 && (pfs_dec_read_rep(rep.buf, rep.len, &r) < 0 || r.data.len > m.size))
		rc = ops_bad_reply(req, "READ");
	if (rc < 0) {
		fuse_reply_err(req, -rc);
	} else {
		atomic_fetch_add_explicit(&c->st_file_read, r.data.len, memory_order_relaxed);
		/* Data read after a change pushed since the READ went out
		 * (the reply may come on another connection than the push)
		 * is not kept under the version seen before. Outside the
		 * gate: a push numbered after this check ends pv anyway
		 * (pc_fill), and the gate must not wait for disk I/O. */
		if (pc && !gate_pushed_since(c->gate, seq, &of->ip->fh))
			pc_fill(c, &m.cr, of->ip, &pv, m.offset, &r.data);
		fuse_reply_buf(req, (const char *)r.data.p, r.data.len);
	}
	rpc_reply_free(&rep);
}

void ops_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
	       struct fuse_file_info *fi)
{
	struct client *c = CL(req);
	struct ofile *of = OF(fi);
	struct pfs_creds cr;
	(void)ino;

	if (size > PFS_MAX_IO) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	/* A write of the file that failed since this open last heard of one
	 * (after its write() returned: write-behind) fails this write, once,
	 * as NFS reports ENOSPC at the next write; nothing of this one is
	 * written. The writes after it go on (space may have been freed):
	 * the error is not sticky, and the fsync or close that follows
	 * reports only what failed after. The file's writes still on their
	 * way are waited for first, and are reported with it, as NFS waits
	 * for them before it reports (nfs_wb_all): a failure of theirs that
	 * came after this reply would fail the next fsync, for writes that
	 * were made before the error was reported. */
	int werr = ofile_wb_err(of, true);
	if (werr) {
		if (wb_flush(c->wb, of->ip, (uint32_t)fuse_req_ctx(req)->pid) != -EINTR)
			(void)ofile_wb_err(of, true); /* reported: not again */
		fuse_reply_err(req, -werr);
		return;
	}
	/* After the changes of attributes a delegation answered: a write may
	 * clear set-id bits, and moves the mtime (deleg_i.h). */
	if (c->dl)
		(void)deleg_flush(c->dl, of->ip, false);
	/* wb.c ends it (inode_write_done), or the create it joins. */
	uint64_t at = inode_own_touch(c->it, of->ip, false);
	/* Our own writes are never pushed back to us: the inline copy (of a
	 * file made here, say) follows them (inode_i.h). */
	if (fi->writepage || (of->flags & O_DIRECT))
		inode_drop_inline(of->ip);
	else
		inode_write_inline(of->ip, (uint64_t)off, buf, size, c->max_inline);
	/* The first bytes of a file made here travel with its create while
	 * it is queued (dirdeleg_i.h). */
	if (c->dd && dirdeleg_write(c->dd, of->ip, of->fid, (uint64_t)off, buf, size, at)) {
		fuse_reply_write(req, size);
		return;
	}
	/* Write-behind (wb.c): the data is copied and sent by a writer
	 * thread; its errors come back at the next write, flush or fsync. */
	fill_creds(req, &cr, false);
	int rc = wb_write(c->wb, of->ip, &cr, &of->ip->fh, ofile_fid(of), of->flags, (uint64_t)off,
			  buf, size, (uint32_t)fuse_req_ctx(req)->pid);
	if (rc < 0) {
		inode_drop_inline(of->ip); /* it holds what was not written */
		fuse_reply_err(req, -rc);
	} else {
		fuse_reply_write(req, size);
	}
}

void ops_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct client *c = CL(req);
	struct inode *ip = IP(req, ino);
	struct pfs_creds cr;

	/* close(2): the file's writes are on the daemon (close-to-open),
	 * and their errors (ENOSPC, EDQUOT, EIO) are reported, as NFS does;
	 * the commit follows at release (wb_i.h). */
	bool covered = c->dd && dirdeleg_covers(c->dd, ip);
	bool reader = (OF(fi)->flags & O_ACCMODE) == O_RDONLY;
	int err = 0;
	/* A read-only open has no writes to wait for, nor errors to hear
	 * of (as NFS's flush): another open's writes are its own. An open
	 * that may write reports what failed since it was opened, whichever
	 * close took the error first (ofile_wb_err). */
	if (covered) {
		err = wb_flush_nowait(c->wb, ip); /* the delegation's end waits */
	} else if (!reader) {
		err = wb_flush(c->wb, ip, (uint32_t)fuse_req_ctx(req)->pid);
		int e = err != -EINTR ? ofile_wb_err(OF(fi), false) : 0;
		if (e)
			err = e;
	}
	struct early_answer ea = { .req = req };

	/* Then the attributes a delegation answered (after the writes: an
	 * mtime set explicitly stays), their error if none came before; for
	 * a file made under a directory delegation, when it ends. */
	if (c->dl) {
		/* A close of the file its CREATE opened ends the delegation
		 * (the release that follows comes when the kernel sends it). */
		deleg_closed(c->dl, ip, OF(fi)->fid);
		int derr = covered ? 0 : deleg_flush(c->dl, ip, true);
		if (err == 0)
			err = derr;
	}

	/* Drop this owner's POSIX locks, as close(2) must, only where this
	 * client ever took any: no round trip otherwise. A process being
	 * killed is answered first; its locks still go, whenever the server
	 * can be told (killable_i.h). */
	if (inode_had_posix_locks(ip)) {
		ofile_flushed_owner(OF(fi), fi->lock_owner);
		fill_creds(req, &cr, false);
		if (err == -EINTR)
			answer_early(&ea);
		else
			killable_finish_after(answer_early, &ea);
		int rc = locks_unlock_owner(c->lk, &cr, &ip->fh, fi->lock_owner);
		killable_finish_clear();
		if (rc == -EIO && err == 0)
			err = rc; /* a lock of this owner was lost (locks_i.h) */
		else if (rc < 0)
			pfs_debug("UNLOCK_OWNER: %s", strerror(-rc));
	}
	if (!ea.answered)
		fuse_reply_err(req, -err);
}

void ops_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct client *c = CL(req);
	struct ofile *of = OF(fi);
	struct pfs_creds cr;

	/* A file made here whose create is queued still: the item ends
	 * this open, and syncs the data it carries (dirdeleg_i.h). */
	bool handed = c->dd && !fi->flock_release &&
		      dirdeleg_release(c->dd, of->ip, of->fid, c->dl);
	/* A delegation its CREATE brought ends, what it answered sent,
	 * before the commit. */
	if (c->dl)
		deleg_release(c->dl, of->ip, of->fid);
	if (handed) {
		ofile_free(of);
		fuse_reply_err(req, 0);
		return;
	}
	/* Writes of mmap'ed pages may come after the last flush. */
	fill_creds(req, &cr, false);
	uint64_t fid = wb_holds(c->wb, of->ip) ? ofile_fid(of) : of->fid;
	wb_release(c->wb, of->ip, &cr, &of->ip->fh, fid);
	if (fi->flock_release) {
		struct pfs_lock_req m;
		ops_file_req(req, of, &m.cr, &m.fh, &m.fid);
		m.owner = ofile_flock_owner(of);
		m.type = PFS_LK_UN;
		m.start = 0;
		m.end = UINT64_MAX;
		m.pid = (uint32_t)fuse_req_ctx(req)->pid;
		m.flags = PFS_LKF_FLOCK;
		(void)locks_setlk(c->lk, NULL, &m, false, ino);
	}
	/* The OFD locks of this open (fcntl F_OFD_SETLK): it is their owner,
	 * and it ends here (ofile_i.h). */
	unsigned nown;
	uint64_t *owners = ofile_take_lock_owners(of, &nown);
	for (unsigned i = 0; i < nown; i++) {
		int rc = locks_unlock_owner(c->lk, &cr, &of->ip->fh, owners[i]);
		if (rc < 0)
			pfs_debug("UNLOCK_OWNER at release: %s", strerror(-rc));
	}
	free(owners);
	/* A create answered here opened the file as this fid when the
	 * daemon names it (dirdeleg_i.h): the RELEASE goes after. */
	if (c->dd)
		dirdeleg_wait_for(c->dd, of->ip);
	ofile_release(of, req, PFS_OP_RELEASE);
	ofile_free(of);
	fuse_reply_err(req, 0);
}

void ops_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct client *c = CL(req);
	struct ofile *of = OF(fi);
	struct pfs_creds cr;
	(void)ino;

	/* Returns once the daemon's fsync covered every write, re-sending
	 * what a restarted daemon may have lost (wb.c). */
	fill_creds(req, &cr, false);
	/* A create answered here is committed with the file's data: its
	 * name reaches the daemon first (dirdeleg_i.h). */
	if (c->dd)
		dirdeleg_wait_for(c->dd, of->ip);
	int drc = c->dl ? deleg_flush(c->dl, of->ip, true) : 0;
	int rc = wb_sync(c->wb, of->ip, &cr, &of->ip->fh, ofile_known_fid(of), datasync != 0, true);
	/* What failed since this open last reported (another open's close
	 * may have taken the error first): reported once here. */
	if (rc != -EINTR) {
		int e = ofile_wb_err(of, true);
		if (e)
			rc = e;
	}
	fuse_reply_err(req, rc < 0 ? -rc : -drc);
}

void ops_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
		   struct fuse_file_info *fi)
{
	struct client *c = CL(req);
	struct ofile *of = OF(fi);
	struct pfs_fallocate_req m;
	struct rpc_reply rep = { 0 };
	(void)ino;

	inode_drop_inline(of->ip);
	ops_file_req(req, of, &m.cr, &m.fh, &m.fid);
	/* Punch, zero, collapse and insert change bytes from offset on:
	 * after the commit of our writes there (wb_before_change). */
	if (((mode & ~FALLOC_FL_KEEP_SIZE) ? wb_before_change(c->wb, of->ip, (uint64_t)offset)
					    : wb_wait_data(c->wb, of->ip)) < 0) {
		fuse_reply_err(req, EINTR);
		return;
	}
	/* After the wait: the writes' ends would make the change look
	 * overlapped (the kernel holds the file's lock: no new write). */
	uint64_t ns;
	(void)inode_own_snap(c->it, &ns);
	uint64_t at = inode_own_touch(c->it, of->ip, false);
	uint64_t seq = gate_seq(c->gate);
	m.mode = (uint32_t)mode;
	m.offset = (uint64_t)offset;
	m.length = (uint64_t)length;
	int rc = rpc_msg(c->rpc, PFS_OP_FALLOCATE, fallocate_req, &m, &rep);
	/* With PFS_CAP_POST_ATTR the reply has the file's attributes after. */
	struct pfs_attr_rep ar;
	bool have = false;
	if (rc == 0 && rep.len > 0) {
		if (pfs_dec_attr_rep(rep.buf, rep.len, &ar) < 0)
			rc = ops_bad_reply(req, "FALLOCATE");
		else
			have = true;
	}
	rpc_reply_free(&rep);
	inode_own_end(c->it, of->ip, have ? &ar.attr : NULL, seq, at, ns);
	fuse_reply_err(req, -rc);
}

void ops_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			 struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
			 struct fuse_file_info *fi_out, size_t len, int flags)
{
	struct client *c = CL(req);
	struct ofile *src = OF(fi_in), *dst = OF(fi_out);
	struct pfs_copy_range_req m;
	struct pfs_write_rep r;
	struct rpc_reply rep = { 0 };
	(void)ino_in;
	(void)ino_out;

	if (flags != 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	/* A file made here under a directory delegation exists on the
	 * daemon already (its slot), named or not; its first bytes, which
	 * may travel with its create, are waited for below
	 * (wb_before_change: dirdeleg_wait_made); and the queue goes
	 * before any COPY_RANGE (dirdeleg.c, must_wait). dst's attributes
	 * a delegation answered are there before the copy moves its mtime,
	 * as for a write. */
	if (c->dl)
		(void)deleg_flush(c->dl, dst->ip, false);
	/* src: our writes there are on the daemon and committed, so that a
	 * daemon that restarted meanwhile has them before it copies (the
	 * copy is on its disk at the reply; nothing would send it again).
	 * dst: our writes there land before the copy, not over it. */
	if (wb_before_change(c->wb, src->ip, (uint64_t)off_in) < 0 ||
	    wb_before_change(c->wb, dst->ip, (uint64_t)off_out) < 0) {
		fuse_reply_err(req, EINTR);
		return;
	}
	inode_drop_inline(dst->ip);
	ops_file_req(req, src, &m.cr, &m.src, &m.src_fid);
	m.src_flags = (uint32_t)src->flags;
	m.src_off = (uint64_t)off_in;
	m.dst = dst->ip->fh;
	m.dst_fid = ofile_fid(dst);
	m.dst_flags = (uint32_t)dst->flags;
	m.dst_off = (uint64_t)off_out;
	m.length = len > PFS_MAX_COPY ? PFS_MAX_COPY : len;
	uint64_t ns;
	(void)inode_own_snap(c->it, &ns);
	uint64_t at = inode_own_touch(c->it, dst->ip, false);
	uint64_t seq = gate_seq(c->gate);
	int rc = rpc_msg(c->rpc, PFS_OP_COPY_RANGE, copy_range_req, &m, &rep);
	if (rc == 0 && (pfs_dec_write_rep(rep.buf, rep.len, &r) < 0 || r.written > m.length))
		rc = ops_bad_reply(req, "COPY_RANGE");
	rpc_reply_free(&rep);
	inode_own_end(c->it, dst->ip, rc == 0 ? &r.attr : NULL, seq, at, ns);
	/* ENOSYS (a daemon without COPY_RANGE) makes the kernel copy by
	 * reading and writing, now and from then on. */
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_write(req, r.written);
}

void ops_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
	       struct fuse_file_info *fi)
{
	struct client *c = CL(req);
	struct ofile *of = OF(fi);
	struct pfs_lseek_req m;
	struct pfs_lseek_rep r;
	struct rpc_reply rep = { 0 };
	(void)ino;

	ops_file_req(req, of, &m.cr, &m.fh, &m.fid);
	m.offset = (uint64_t)off;
	m.whence = (uint32_t)whence;
	if (wb_wait_data(c->wb, of->ip) < 0) {
		fuse_reply_err(req, EINTR);
		return;
	}
	int rc = rpc_msg(c->rpc, PFS_OP_LSEEK, lseek_req, &m, &rep);
	if (rc == 0 && (pfs_dec_lseek_rep(rep.buf, rep.len, &r) < 0 || r.offset > INT64_MAX))
		rc = ops_bad_reply(req, "LSEEK");
	rpc_reply_free(&rep);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_lseek(req, (off_t)r.offset);
}
