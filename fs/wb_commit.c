/* wb_commit.c: write-behind's commits (see wb_i.h, "Durability"): COMMIT
 * with the verifier's verdict and the re-send after a daemon restart,
 * and the commits asked for by fsync (wb_sync), by a change of a file's
 * bytes that is not a write (wb_before_change), by the release of an
 * open file and at unmount. The writes themselves are wb.c's. */
#include "wb_base_i.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client_i.h"
#include "deleg_i.h"
#include "dirdeleg_i.h"
#include "gate_i.h"
#include "inode_i.h"
#include "podfs/log.h"
#include "trust_i.h"

/* Forgets w's acknowledged writes (none pending, no commit in flight):
 * a failed commit left them, and they must not be sent again. */
static void drop_acked(struct wb *wb, struct wbi *w)
{
	for (struct wbe *e = w->f.head, *next; e; e = next) {
		next = e->next;
		if (e->st == WBE_DONE) {
			wbf_remove(&w->f, e);
			wb_free_entry(wb, e);
		}
	}
}

/* One SETATTR m of what reapply sends, as this host's own change of ip
 * (its reply's attributes are ip's after it: trust_i.h); returns 0 or
 * -errno. Unlocked. */
static int reapply_one(struct wb *wb, struct inode *ip, const struct pfs_setattr_req *m)
{
	struct client *c = wb->c;
	struct rpc_reply rep = { 0 };
	struct pfs_attr_rep ar;

	uint64_t ns;
	(void)inode_own_snap(c->it, &ns);
	uint64_t at = inode_own_touch(c->it, ip, false);
	uint64_t seq = gate_seq(c->gate);
	int rc = rpc_msg_in(c->rpc, ip, PFS_OP_SETATTR, setattr_req, m, &rep);
	if (rc == 0 && pfs_dec_attr_rep(rep.buf, rep.len, &ar) < 0)
		rc = -EIO;
	rpc_reply_free(&rep);
	inode_own_end(c->it, ip, rc == 0 ? &ar.attr : NULL, seq, at, ns);
	if (rc == 0 && c->dl)
		deleg_note_attr(c->dl, ip, &ar.attr);
	return rc;
}

/* w's writes sent again after a restart are done and committed: sets
 * again what this host set on the file after them (struct wb_after),
 * which their pwrite undid. Writes and waits of w wait meanwhile, so
 * nothing of this host's comes between. Drops the lock while sending. */
static void reapply(struct wb *wb, struct wbi *w)
{
	struct wb_after a = w->after;
	struct inode *ip = w->ip;
	int rc = 0;

	w->reapply = false;
	if (!a.mode.valid && !a.mtime.valid)
		return;
	a.mode.fh = a.mtime.fh = w->fh;
	w->reapplying = true;
	pthread_mutex_unlock(&wb->bg.lock);
	if (a.mode.valid)
		rc = reapply_one(wb, ip, &a.mode);
	if (rc == 0 && a.mtime.valid)
		rc = reapply_one(wb, ip, &a.mtime);
	if (rc < 0)
		pfs_warn("setting the mtime and mode again after writes sent again failed: %s",
			 strerror(-rc));
	/* The kernel may hold the attributes between the two. */
	if (wb->c->se)
		fuse_lowlevel_notify_inval_inode(wb->c->se, ip->nodeid, -1, 0);
	pthread_mutex_lock(&wb->bg.lock);
	w->reapplying = false;
	pthread_cond_broadcast(&w->cond);
}

void wb_note_setattr(struct wb *wb, struct inode *ip, const struct pfs_setattr_req *m)
{
	const uint32_t times = PFS_SET_MTIME | PFS_SET_MTIME_NOW;

	pthread_mutex_lock(&wb->bg.lock);
	struct wbi *w = wbi_find(wb, ip);
	if (w && w->f.head) {
		struct wb_after *a = &w->after;
		if (m->valid & PFS_SET_SIZE)
			a->mtime.valid = 0; /* moved to now, as a write would */
		if (m->valid & times)
			a->mtime = (struct pfs_setattr_req){ .cr = m->cr, .valid = m->valid & times,
							     .mtime_s = m->mtime_s,
							     .mtime_ns = m->mtime_ns };
		if (m->valid & PFS_SET_MODE)
			a->mode = (struct pfs_setattr_req){ .cr = m->cr, .valid = PFS_SET_MODE,
							    .mode = m->mode };
		else if (m->valid & (PFS_SET_UID | PFS_SET_GID))
			a->mode.valid = 0; /* a chown clears set-user-ID, as a write would */
	}
	pthread_mutex_unlock(&wb->bg.lock);
}

int wb_commit_locked(struct wb *wb, struct wbi *w, bool datasync, bool force, bool wait)
{
	int rc = 0;

	for (int tries = 0;; tries++) {
		if (wait) {
			if (wb_wait_idle(wb, w) < 0)
				return -EINTR;
		} else {
			while (w->f.committing)
				if (wb_wait_killable(wb, &w->cond) < 0)
					return -EINTR;
		}
		if (!w->f.uncommitted && !force)
			return 0;
		if (tries == WB_COMMIT_TRIES)
			return -EIO;
		wbf_commit_begin(&w->f);
		struct pfs_fsync_req m = { .cr = w->cr, .fh = w->fh, .fid = w->fid,
					   .datasync = datasync ? 1 : 0 };
		pthread_mutex_unlock(&wb->bg.lock);
		struct rpc_reply rep = { 0 };
		rc = rpc_msg(wb->c->rpc, PFS_OP_FSYNC, fsync_req, &m, &rep);
		uint64_t verf = rep.verf;
		rpc_reply_free(&rep);
		pthread_mutex_lock(&wb->bg.lock);
		wb->st.commits++;
		struct wbe *released, *resend, *next;
		wbf_commit_end(&w->f, rc, verf, &released, &resend);
		pthread_cond_broadcast(&wb->space); /* w may be committed again */
		for (struct wbe *e = released; e; e = next) {
			next = e->qnext;
			wb_free_entry(wb, e);
		}
		bool again = resend != NULL;
		if (again)
			w->reapply = true;
		for (struct wbe *e = resend; e; e = next) {
			next = e->qnext;
			wb->st.resent += e->len;
			wb_enqueue(wb, e);
		}
		pthread_cond_broadcast(&w->cond);
		if (rc < 0)
			return rc;
		if (!again) {
			if (w->reapply && !w->f.npending)
				reapply(wb, w);
			return 0;
		}
		if (!wait)
			return 0; /* the re-sent writes are committed later */
		pfs_notice("the server's machine restarted before a commit: sending uncommitted writes again");
		force = true;
	}
}

int wb_commit_unasked(struct wb *wb, struct wbi *w, bool wait)
{
	w->users++;
	int rc = wb_commit_locked(wb, w, true, false, wait);
	w->users--;
	wbi_maybe_free(wb, w);
	return rc;
}

int wb_sync(struct wb *wb, struct inode *ip, const struct pfs_creds *cr,
	    const struct pfs_fh *fh, uint64_t fid, bool datasync, bool force)
{
	int rc = 0;

	pthread_mutex_lock(&wb->bg.lock);
	struct wbi *w = wbi_find(wb, ip);
	if (!w && !force) {
		pthread_mutex_unlock(&wb->bg.lock);
		return 0;
	}
	if (!w) {
		pthread_mutex_unlock(&wb->bg.lock);
		struct pfs_fsync_req m = { .cr = *cr, .fh = *fh, .fid = fid,
					   .datasync = datasync ? 1 : 0 };
		struct rpc_reply rep = { 0 };
		rc = rpc_msg(wb->c->rpc, PFS_OP_FSYNC, fsync_req, &m, &rep);
		rpc_reply_free(&rep);
		return rc;
	}
	w->users++;
	if (wb_wait_idle(wb, w) < 0) {
		rc = -EINTR;
	} else if (!w->f.err) {
		if (!w->f.uncommitted) {
			w->cr = *cr;
			w->fh = *fh;
			w->fid = fid;
		}
		rc = wb_commit_locked(wb, w, datasync, force, true);
	}
	/* Report a failed write once, at the first sync after it. */
	if (w->f.err && rc != -EINTR)
		rc = wbf_take_err(&w->f);
	if (!w->f.head)
		wbf_forget_writers(&w->f);
	w->users--;
	wbi_maybe_free(wb, w);
	pthread_mutex_unlock(&wb->bg.lock);
	return rc;
}

int wb_before_change(struct wb *wb, struct inode *ip, uint64_t from)
{
	int rc = 0;

	if (wb->c->dd)
		dirdeleg_wait_made(wb->c->dd, ip);
	pthread_mutex_lock(&wb->bg.lock);
	struct wbi *w = wbi_find(wb, ip);
	if (w) {
		w->users++;
		rc = wb_wait_idle(wb, w);
		w->after.mtime.valid = 0; /* the change moves it to now */
		if (rc == 0 && wbf_uncommitted_beyond(&w->f, from)) {
			int crc = wb_commit_locked(wb, w, true, false, true);
			if (crc == -EINTR) {
				rc = crc;
			} else if (crc < 0) {
				/* Sent again after the change, they would undo it. */
				pfs_warn("a commit before a truncate or hole failed: %s", strerror(-crc));
				wbf_keep_err(&w->f, crc);
				wb_note_err(w->ip, crc);
				drop_acked(wb, w);
			}
		}
		w->users--;
		wbi_maybe_free(wb, w);
	}
	pthread_mutex_unlock(&wb->bg.lock);
	return rc;
}

void wb_release(struct wb *wb, struct inode *ip, const struct pfs_creds *cr,
		const struct pfs_fh *fh, uint64_t fid)
{
	int rc = wb_sync(wb, ip, cr, fh, fid, true, false);

	if (rc < 0)
		pfs_warn("a write to a closed file failed: %s", strerror(-rc));
	pthread_mutex_lock(&wb->bg.lock);
	struct wbi *w = wbi_find(wb, ip);
	if (w && !w->users && !w->f.npending && !w->f.committing) {
		/* Uncommitted data a failed commit left: nobody can be told. */
		drop_acked(wb, w);
		(void)wbf_take_err(&w->f);
		wbi_maybe_free(wb, w);
	}
	pthread_mutex_unlock(&wb->bg.lock);
}

void wb_commit_all(struct wb *wb)
{
	size_t pos;

	if (!wb)
		return;
	pthread_mutex_lock(&wb->bg.lock);
again:
	for (struct hnode *n = htab_iter(&wb->files, &pos, NULL); n;
	     n = htab_iter(&wb->files, &pos, n)) {
		struct wbi *w = container_of(n, struct wbi, hn);
		if (w->final_done || !w->f.uncommitted)
			continue;
		w->final_done = true;
		int rc = wb_commit_unasked(wb, w, true);
		if (rc < 0)
			pfs_warn("commit at unmount failed: %s", strerror(-rc));
		goto again; /* the lock was dropped: the table may have changed */
	}
	pthread_mutex_unlock(&wb->bg.lock);
}
