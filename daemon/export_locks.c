/* export_locks.c: POSIX and flock locks, as OFD and flock locks on lock
 * fds the session keeps per (owner, inode, kind), with the ranges each
 * POSIX one holds counted (lkranges_i.h). Worker threads only (see
 * export_i.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "export_base_i.h"

/* Opens the fd that carries one owner's locks on an inode. Any access mode
 * the caller is allowed works for flock(); POSIX write locks need a
 * writable fd, so try read-write first. */
static int lock_fd_open(struct xop *x, int pathfd, bool flock_kind)
{
	static const int posix_modes[] = { O_RDWR, O_RDONLY, O_WRONLY };
	static const int flock_modes[] = { O_RDONLY, O_WRONLY };
	const int *modes = flock_kind ? flock_modes : posix_modes;
	int n = flock_kind ? 2 : 3, fd = -EINVAL;

	for (int i = 0; i < n; i++) {
		if (x->ro && modes[i] != O_RDONLY)
			continue;
		fd = export_reopen(pathfd, modes[i] | O_NONBLOCK);
		if (fd >= 0 || (fd != -EACCES && fd != -EPERM && fd != -ETXTBSY &&
				fd != -EROFS && fd != -EISDIR))
			break;
	}
	return fd;
}

static int to_flock(const struct pfs_lock_req *m, struct flock *f)
{
	memset(f, 0, sizeof(*f));
	switch (m->type) {
	case PFS_LK_RD:
		f->l_type = F_RDLCK;
		break;
	case PFS_LK_WR:
		f->l_type = F_WRLCK;
		break;
	case PFS_LK_UN:
		f->l_type = F_UNLCK;
		break;
	default:
		return -EINVAL;
	}
	if (m->start > (uint64_t)INT64_MAX || m->end < m->start)
		return -EINVAL;
	f->l_whence = SEEK_SET;
	f->l_start = (off_t)m->start;
	f->l_len = m->end >= (uint64_t)INT64_MAX ? 0 : (off_t)(m->end - m->start + 1);
	f->l_pid = 0;
	return 0;
}

/* The lock m asks about as a struct flock (*f); then, with the session's
 * lock table locked (s->lk_mu, which the caller unlocks), the lock fd of
 * m's owner and kind (PFS_LKF_FLOCK or POSIX) on obj in *l, or NULL.
 * Returns 0, or -EINVAL (flags beyond allowed, a bad type or range) with
 * nothing locked. */
static int lock_begin(struct xop *x, struct hent *obj, const struct pfs_lock_req *m,
		      uint32_t allowed, struct flock *f, struct lockent **l)
{
	int ret;

	if (m->flags & ~allowed)
		return -EINVAL;
	ret = to_flock(m, f);
	if (ret < 0)
		return ret;
	pthread_mutex_lock(&x->s->lk_mu);
	*l = session_lock_find(x->s, m->owner, (m->flags & PFS_LKF_FLOCK) != 0, &obj->fh);
	return 0;
}

int export_getlk(struct xop *x, struct hent *obj, const struct pfs_lock_req *m,
		 struct pfs_getlk_rep *r)
{
	struct lockent *l;
	struct flock f;
	int fd, ret = lock_begin(x, obj, m, 0, &f, &l);

	if (ret < 0)
		return ret;
	/* Ask through the owner's own fd so its own locks do not count. */
	fd = l ? l->fd : lock_fd_open(x, obj->fd, false);
	if (fd < 0) {
		ret = fd;
		goto out_unlock;
	}
	ret = fcntl(fd, F_OFD_GETLK, &f) < 0 ? -errno : 0;
	if (!l)
		close(fd);
	if (ret < 0)
		goto out_unlock;
	if (f.l_type == F_UNLCK) {
		r->type = PFS_LK_UN;
		r->start = m->start;
		r->end = m->end;
		r->pid = 0;
	} else {
		r->type = f.l_type == F_WRLCK ? PFS_LK_WR : PFS_LK_RD;
		r->start = (uint64_t)f.l_start;
		r->end = f.l_len == 0 ? UINT64_MAX : (uint64_t)(f.l_start + f.l_len - 1);
		r->pid = f.l_pid > 0 ? (uint32_t)f.l_pid : 0;
	}
out_unlock:
	pthread_mutex_unlock(&x->s->lk_mu);
	return ret;
}

int export_setlk(struct xop *x, struct hent *obj, const struct pfs_lock_req *m)
{
	bool fl = m->flags & PFS_LKF_FLOCK, created = false;
	struct lockent *l;
	struct flock f;
	size_t before = 0, after = 0;
	struct lkr_change change;
	int ret = lock_begin(x, obj, m, PFS_LKF_FLOCK, &f, &l);

	if (ret < 0)
		return ret;
	if (m->type == PFS_LK_UN && (!l || fl)) {
		/* Nothing held, or a flock: closing its fd drops it. */
		if (l)
			session_lock_del(x->s, l);
		ret = 0;
		goto out_unlock;
	}
	if (!l) {
		ret = session_lock_reserve(x->s);
		if (ret < 0)
			goto out_unlock;
		int fd = lock_fd_open(x, obj->fd, fl);
		if (fd < 0) {
			session_lock_unreserve(x->s);
			ret = fd;
			goto out_unlock;
		}
		l = session_lock_add(x->s, m->owner, fl, &obj->fh, fd);
		created = true;
	}
	/* Room for the ranges a POSIX lock (or an unlock that splits one)
	 * adds to the kernel's lock table, before asking for it. */
	if (!fl) {
		before = l->ranges.n;
		after = lkranges_plan(&l->ranges, m->start, m->end, m->type, &change);
		if (after > before && (ret = session_ranges_take(x->s, after - before)) < 0) {
			if (created)
				session_lock_del(x->s, l);
			goto out_unlock;
		}
	}
	if (fl)
		ret = flock(l->fd, (m->type == PFS_LK_RD ? LOCK_SH : LOCK_EX) | LOCK_NB);
	else
		ret = fcntl(l->fd, F_OFD_SETLK, &f);
	if (ret < 0) {
		ret = (errno == EWOULDBLOCK || errno == EACCES) ? -EAGAIN : -errno;
		if (after > before)
			session_ranges_give(x->s, after - before);
		if (created)
			session_lock_del(x->s, l);
	} else if (!fl) {
		lkranges_commit(&l->ranges, &change);
		if (before > after)
			session_ranges_give(x->s, before - after);
	}
out_unlock:
	pthread_mutex_unlock(&x->s->lk_mu);
	return ret;
}

int export_unlock_owner(struct xop *x, struct hent *obj, uint64_t owner)
{
	struct lockent *l;

	pthread_mutex_lock(&x->s->lk_mu);
	l = session_lock_find(x->s, owner, false, &obj->fh);
	if (l)
		session_lock_del(x->s, l);
	pthread_mutex_unlock(&x->s->lk_mu);
	return l != NULL;
}
