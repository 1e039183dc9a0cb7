/* ops_lock.c: FUSE lock operations: getlk, setlk (fcntl) and flock; the
 * waiting and the reclaim are locks.c's (see ops_i.h). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>

#include "locks_i.h"
#include "ops_i.h"
#include "pushq_i.h"
#include "transport_i.h"
#include "trust_i.h"
#include "wb_i.h"

/* Before an unlock: the pages this host wrote through a shared mapping
 * under the lock reach the coordinator first, as NFS writes them back at
 * unlock (the kernel sends no WRITE for them until it writes back). The
 * kernel writes a dirty page back before it drops it; those WRITEs go to
 * write-behind, which the unlock then waits for (wb_wait_data). Only
 * through an open that may write: a mapping that writes needs one. */
static void unlock_writeback(fuse_req_t req, fuse_ino_t ino, const struct ofile *of)
{
	struct client *c = CL(req);

	if ((of->flags & O_ACCMODE) != O_RDONLY && c->se)
		fuse_lowlevel_notify_inval_inode(c->se, ino, 0, 0);
}

/* Returns 0, or -EINTR if the process is being killed while its writes
 * wait for the server (then nothing was filled in). */
static int lock_fill(fuse_req_t req, struct pfs_lock_req *m, struct ofile *of,
		     struct fuse_file_info *fi, const struct flock *lk)
{
	struct wb *wb = CL(req)->wb;

	/* req is read before the wait, which may answer it (answer_early). */
	ops_file_req(req, of, &m->cr, &m->fh, &m->fid);
	m->owner = fi->lock_owner;
	m->type = lk->l_type == F_RDLCK ? PFS_LK_RD : lk->l_type == F_WRLCK ? PFS_LK_WR : PFS_LK_UN;
	m->start = (uint64_t)lk->l_start;
	m->end = lk->l_len <= 0 ? UINT64_MAX : (uint64_t)lk->l_start + (uint64_t)lk->l_len - 1;
	m->pid = (uint32_t)lk->l_pid;
	m->flags = 0;
	/* Writes made under a lock reach the server before it changes. */
	return wb_wait_data(wb, of->ip) < 0 ? -EINTR : 0;
}

/* A lock was granted: what another host wrote before releasing it must
 * be seen now, so the cached pages and attributes of the file go (NFS
 * revalidates on lock too). Safe in this handler: the kernel holds no
 * inode or page lock while it waits for a lock request.
 *
 * First the invalidations of those writes, which reached this host before
 * the grant (the daemon holds a change's reply until they did, and the
 * grant comes after the other host's unlock) but which the push thread
 * may not have given to the kernel yet, are let through: applied later,
 * one would land while the kernel asks for the attributes the holder's
 * first read needs, and the kernel drops an attribute reply that an
 * invalidation overtook, keeping its old size; the read then stops at
 * that size (a counter "100" read as "10"). Bounded by PUSHQ_APPLY_WAIT_MS
 * (the push thread may wait for a directory lock). */
static void lock_revalidate(fuse_req_t req, fuse_ino_t ino)
{
	struct client *c = CL(req);
	(void)pushq_wait_applied(transport_pushq(c->tr), PUSHQ_APPLY_WAIT_MS);
	inode_own_touch(c->it, IP(req, ino), false);
	inode_drop_inline(IP(req, ino));
	fuse_lowlevel_notify_inval_inode(c->se, ino, 0, 0);
}

void ops_getlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
	       struct flock *lock)
{
	struct client *c = CL(req);
	struct pfs_lock_req m;
	struct pfs_getlk_rep r;
	struct rpc_reply rep = { 0 };
	(void)ino;

	int rc = lock_fill(req, &m, OF(fi), fi, lock);
	if (rc == 0)
		rc = locks_getlk(c->lk, req, &m, &rep);
	if (rc == 0 && (pfs_dec_getlk_rep(rep.buf, rep.len, &r) < 0 || r.type > PFS_LK_UN ||
			r.start > INT64_MAX || (r.end != UINT64_MAX && r.end < r.start)))
		rc = ops_bad_reply(req, "GETLK");
	rpc_reply_free(&rep);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	struct flock out;
	memset(&out, 0, sizeof(out));
	out.l_type = r.type == PFS_LK_RD ? F_RDLCK : r.type == PFS_LK_WR ? F_WRLCK : F_UNLCK;
	out.l_whence = SEEK_SET;
	out.l_start = (off_t)r.start;
	out.l_len = r.end == UINT64_MAX || r.end > INT64_MAX ? 0 : (off_t)(r.end - r.start + 1);
	out.l_pid = (pid_t)r.pid;
	fuse_reply_lock(req, &out);
}

void ops_setlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
	       struct flock *lock, int sleep)
{
	struct pfs_lock_req m;
	struct early_answer ea = { .req = req };
	struct locks *lk = CL(req)->lk;

	/* Mark first, so a flush racing with this lock still unlocks. */
	inode_mark_posix_locks(IP(req, ino));
	/* An unlock is done even for a process being killed (the kernel
	 * unlocks as it closes a dying process's files): answered early,
	 * it goes on waiting for the server. */
	if (lock->l_type == F_UNLCK)
		killable_finish_after(answer_early, &ea);
	if (lock->l_type == F_UNLCK)
		unlock_writeback(req, ino, OF(fi));
	int rc = lock_fill(req, &m, OF(fi), fi, lock);
	if (rc == 0)
		rc = locks_setlk(lk, req, &m, sleep != 0, ino); /* an unlock does not read req */
	killable_finish_clear();
	if (rc == 0 && m.type != PFS_LK_UN) {
		ofile_note_lock_owner(OF(fi), m.owner);
		lock_revalidate(req, ino);
	}
	if (!ea.answered)
		fuse_reply_err(req, -rc);
}

void ops_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, int op)
{
	struct ofile *of = OF(fi);
	struct pfs_lock_req m;
	struct early_answer ea = { .req = req };
	struct locks *lk = CL(req)->lk;
	struct wb *wb = CL(req)->wb;

	/* req is read before the wait, which may answer it (answer_early). */
	ops_file_req(req, of, &m.cr, &m.fh, &m.fid);
	m.owner = ofile_flock_owner(of); /* not fi->lock_owner: see there */
	m.pid = (uint32_t)fuse_req_ctx(req)->pid;
	switch (op & ~LOCK_NB) {
	case LOCK_SH:
		m.type = PFS_LK_RD;
		break;
	case LOCK_EX:
		m.type = PFS_LK_WR;
		break;
	case LOCK_UN:
		m.type = PFS_LK_UN;
		break;
	default:
		fuse_reply_err(req, EINVAL);
		return;
	}
	m.start = 0;
	m.end = UINT64_MAX;
	m.flags = PFS_LKF_FLOCK;
	if (m.type == PFS_LK_UN) {
		killable_finish_after(answer_early, &ea); /* as for F_UNLCK above */
		unlock_writeback(req, ino, of);
	}
	if (wb_wait_data(wb, of->ip) < 0) {
		fuse_reply_err(req, EINTR);
		return;
	}
	int rc = locks_setlk(lk, req, &m, !(op & LOCK_NB), ino);
	killable_finish_clear();
	if (rc == 0 && m.type != PFS_LK_UN)
		lock_revalidate(req, ino);
	if (!ea.answered)
		fuse_reply_err(req, -rc);
}
