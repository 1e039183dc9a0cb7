/* export.c: the operations on the backing store, relative to O_PATH fds of
 * objects inside the export (see export_i.h). Worker threads only. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "export_i.h"

#define PROCPATH_LEN 32

/* "/proc/self/fd/N": reopens or names the object of an O_PATH fd. Only for
 * objects that are not symlinks: the magic link would be followed. */
static void procpath(char buf[PROCPATH_LEN], int fd)
{
	snprintf(buf, PROCPATH_LEN, "/proc/self/fd/%d", fd);
}

void export_attr(const struct stat *st, struct pfs_attr *a)
{
	a->ino = st->st_ino;
	a->size = st->st_size;
	a->blocks = st->st_blocks;
	a->atime_s = st->st_atim.tv_sec;
	a->mtime_s = st->st_mtim.tv_sec;
	a->ctime_s = st->st_ctim.tv_sec;
	a->atime_ns = st->st_atim.tv_nsec;
	a->mtime_ns = st->st_mtim.tv_nsec;
	a->ctime_ns = st->st_ctim.tv_nsec;
	a->mode = st->st_mode;
	a->nlink = st->st_nlink;
	a->uid = st->st_uid;
	a->gid = st->st_gid;
	a->rdev = (uint32_t)st->st_rdev;
	a->blksize = st->st_blksize;
}

int export_getattr(int fd, struct pfs_attr *a)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	export_attr(&st, a);
	return 0;
}

void export_note(struct xop *x, const struct pfs_fh *fh)
{
	if (x->it && fh->len)
		interest_note(x->it, handles_key(x->hs, fh), x->slot, x->kv);
}

/* Opens name in dirfd (O_PATH, not followed), makes its handle and
 * registers interest in it, then stats it: the interest comes first, so
 * a change after the stat is pushed. A mount point inside the export is
 * refused: its objects would not be ours to hand out. Returns the O_PATH
 * fd (the caller adopts or closes it) or -errno. */
static int entry_open(struct xop *x, int dirfd, const char *name, struct pfs_entry *e,
		      struct stat *st)
{
	int fd, ret;

	fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = handles_encode(x->hs, fd, &e->fh);
	if (ret == -EXDEV)
		ret = -EACCES;
	if (ret < 0)
		goto out_close;
	export_note(x, &e->fh);
	if (fstat(fd, st) < 0) {
		ret = -errno;
		goto out_close;
	}
	export_attr(st, &e->attr);
	if (S_ISDIR(st->st_mode))
		watch_dir(x->watch, fd, &e->fh);
	return fd;

out_close:
	close(fd);
	return ret;
}

/* Looks name up in dirfd without following it: fills e and offers the
 * O_PATH fd to the handle cache. */
static int entry_at(struct xop *x, int dirfd, const char *name, struct pfs_entry *e)
{
	struct stat st;
	int fd = entry_open(x, dirfd, name, e, &st);

	if (fd < 0)
		return fd;
	handles_adopt(x->hs, &e->fh, fd);
	return 0;
}

int export_lookup(struct xop *x, int dirfd, const char *name, struct pfs_entry *e)
{
	return entry_at(x, dirfd, name, e);
}

static bool same_version(const struct stat *a, const struct stat *b)
{
	return a->st_size == b->st_size && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
	       a->st_mtim.tv_nsec == b->st_mtim.tv_nsec && a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
	       a->st_ctim.tv_nsec == b->st_ctim.tv_nsec && a->st_ino == b->st_ino;
}

static int reopen(int pathfd, int flags);

/* Reads the whole of fd (size bytes expected, at most max + 1 read) into
 * buf; returns the bytes read or -1. With cold != NULL it first tries
 * RWF_NOWAIT, and sets *cold if the data was not all in the page cache. */
static ssize_t read_whole(int fd, uint8_t *buf, size_t size, size_t max, bool *cold)
{
	size_t got = 0;

	if (cold) {
		struct iovec iov = { buf, max + 1 };
		ssize_t n = preadv2(fd, &iov, 1, 0, RWF_NOWAIT);
		if (n >= 0)
			got = (size_t)n;
		if (n < 0 ? errno == EAGAIN : got < size)
			*cold = true;
	}
	/* One byte more than the size: a file that grew is caught too. */
	while (got < max + 1) {
		ssize_t n = pread(fd, buf + got, max + 1 - got, (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

int export_lookup_data(struct xop *x, int dirfd, const char *name, uint32_t max_inline,
		       struct pfs_entry *e, uint8_t *buf, uint32_t *len, uint32_t *flags,
		       bool *cold)
{
	struct stat st, st2;
	ssize_t got;
	int pfd, fd;

	*len = 0;
	*flags = 0;
	if (max_inline > PFS_INLINE_MAX)
		max_inline = PFS_INLINE_MAX;
	pfd = entry_open(x, dirfd, name, e, &st);
	if (pfd < 0)
		return pfd;
	if (!S_ISREG(st.st_mode))
		goto out_adopt;
	/* O_NOATIME only works for the owner (or CAP_FOWNER). */
	fd = reopen(pfd, O_RDONLY | O_NOATIME);
	if (fd == -EPERM)
		fd = reopen(pfd, O_RDONLY);
	if (fd < 0)
		goto out_adopt; /* not readable by the caller: no data */
	*flags = PFS_LD_READABLE;
	if ((uint64_t)st.st_size > max_inline) {
		close(fd);
		goto out_adopt;
	}
	got = read_whole(fd, buf, (size_t)st.st_size, max_inline, cold);
	/* Whole and consistent only if nothing changed while we read. */
	if (got == st.st_size && fstat(fd, &st2) == 0 && same_version(&st, &st2)) {
		*len = (uint32_t)got;
		*flags |= PFS_LD_DATA;
	}
	close(fd);
out_adopt:
	handles_adopt(x->hs, &e->fh, pfd);
	return 0;
}

/* Open flags a client may ask for; the rest (O_CREAT, O_EXCL, O_NOCTTY,
 * O_PATH, O_TMPFILE, O_DIRECT, O_NOATIME, O_ASYNC...) are dropped. */
static int clean_flags(uint32_t flags)
{
	return (int)(flags & (O_ACCMODE | O_APPEND | O_TRUNC | O_SYNC | O_DSYNC)) | O_CLOEXEC |
	       O_NOCTTY;
}

static bool writes(int flags)
{
	return (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
}

/* Opens the object of O_PATH fd pathfd for I/O with flags. Regular files
 * and directories only. */
static int reopen(int pathfd, int flags)
{
	char p[PROCPATH_LEN];
	struct stat st;
	int fd;

	if ((flags & O_ACCMODE) == O_ACCMODE)
		return -EINVAL;
	if (fstat(pathfd, &st) < 0)
		return -errno;
	if (S_ISLNK(st.st_mode))
		return -ELOOP;
	if (S_ISDIR(st.st_mode)) {
		if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC))
			return -EISDIR;
		flags |= O_DIRECTORY;
	} else if (!S_ISREG(st.st_mode)) {
		return -EINVAL;
	}
	procpath(p, pathfd);
	fd = open(p, flags | O_CLOEXEC | O_NOCTTY);
	return fd < 0 ? -errno : fd;
}

/* The session's fid, or (reopen on miss: the daemon restarted, or the
 * session expired) the object opened again under that fid. flags < 0:
 * any mode that allows writing; flags == -2: any mode at all. */
#define FLAGS_WRITABLE (-1)
#define FLAGS_ANY (-2)
static int fid_for(struct xop *x, struct hent *obj, uint64_t id, int flags, struct fid **out)
{
	static const int wr_modes[] = { O_RDWR, O_WRONLY };
	static const int any_modes[] = { O_RDONLY, O_WRONLY };
	struct fid *f = session_fid_get(x->s, id);
	int fd = -EBADF;

	if (f) {
		if (f->dir) {
			session_fid_put(x->s, f);
			return -EISDIR;
		}
		*out = f;
		return 0;
	}
	if (flags >= 0) {
		flags = clean_flags((uint32_t)flags & ~(uint32_t)(O_CREAT | O_EXCL | O_TRUNC));
		fd = reopen(obj->fd, flags);
	} else {
		const int *modes = flags == FLAGS_WRITABLE ? wr_modes : any_modes;
		for (int i = 0; i < 2; i++) {
			flags = modes[i];
			fd = reopen(obj->fd, flags | O_CLOEXEC);
			if (fd >= 0 || (fd != -EACCES && fd != -EPERM && fd != -ETXTBSY))
				break;
		}
	}
	if (fd < 0)
		return fd;
	*out = session_fid_install(x->s, id, fd, NULL, flags, false);
	if ((*out)->dir) {
		session_fid_put(x->s, *out);
		return -EISDIR;
	}
	return 0;
}

/* True if mode only drops some of the set-id bits of a regular file st that a
 * write, truncate or chown by a caller without CAP_FSETID drops: the
 * client's kernel asks for that with the writer's identity, who need
 * not own the file (FUSE without handle_killpriv). */
static bool only_kills_privs(const struct stat *st, uint32_t mode)
{
	mode_t old = st->st_mode & 07777, new = mode & 07777;
	mode_t kill = S_ISUID | ((st->st_mode & S_IXGRP) ? S_ISGID : 0);

	return S_ISREG(st->st_mode) && new != old && (old & ~kill) == (new & ~kill) &&
	       (new & kill & ~old) == 0;
}

/* Drops set-id bits as the kernel does on a write by a non-owner: if the
 * caller may write the file, as root (the caller's identity is restored
 * after). Returns 0 or -errno. */
static int kill_privs(struct xop *x, int fd, const char *path, uint32_t mode)
{
	int ret = 0;

	if (faccessat(fd, "", W_OK, AT_EACCESS | AT_EMPTY_PATH) < 0)
		return -EPERM;
	syscall(SYS_setfsuid, 0);
	if (chmod(path, mode & 07777) < 0)
		ret = -errno;
	syscall(SYS_setfsuid, x->cr ? x->cr->uid : 0);
	return ret;
}

int export_setattr(struct xop *x, struct hent *obj, const struct pfs_setattr_req *m,
		   struct pfs_attr *a)
{
	char p[PROCPATH_LEN];
	struct stat st;
	uint32_t v = m->valid;

	if (v & ~PFS_SET_KNOWN)
		return -EINVAL;
	if (fstat(obj->fd, &st) < 0)
		return -errno;
	procpath(p, obj->fd);
	if (!(v & ~PFS_SET_CTIME)) {
		/* Nothing but "change the ctime" (chown(f, -1, -1)). */
		if (fchownat(obj->fd, "", (uid_t)-1, (gid_t)-1, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
	}
	if (v & PFS_SET_MODE) {
		if (S_ISLNK(st.st_mode))
			return -EOPNOTSUPP;
		if (chmod(p, m->mode & 07777) < 0) {
			int ret = -errno;
			/* Set-id bits dropped for a write by a non-owner:
			 * after the truncate it comes with, if any. */
			if (ret != -EPERM || !only_kills_privs(&st, m->mode))
				return ret;
			if (v & ~PFS_SET_MODE) {
				struct pfs_setattr_req rest = *m;
				rest.valid &= ~PFS_SET_MODE;
				if ((ret = export_setattr(x, obj, &rest, a)) < 0)
					return ret;
			}
			if ((ret = kill_privs(x, obj->fd, p, m->mode)) < 0)
				return ret;
			return export_getattr(obj->fd, a);
		}
	}
	if (v & (PFS_SET_UID | PFS_SET_GID)) {
		uid_t uid = (v & PFS_SET_UID) ? m->uid : (uid_t)-1;
		gid_t gid = (v & PFS_SET_GID) ? m->gid : (gid_t)-1;
		if (fchownat(obj->fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
	}
	if (v & PFS_SET_SIZE) {
		struct fid *f = NULL;
		int ret;

		if (S_ISDIR(st.st_mode))
			return -EISDIR;
		if (!S_ISREG(st.st_mode))
			return -EINVAL;
		if (m->size > (uint64_t)INT64_MAX)
			return -EFBIG;
		if (m->fid)
			f = session_fid_get(x->s, m->fid);
		/* The client's fid when it is writable (ftruncate semantics:
		 * no second permission check), else by path. */
		if (f && !f->dir && (f->flags & O_ACCMODE) != O_RDONLY)
			ret = ftruncate(f->fd, (off_t)m->size);
		else
			ret = truncate(p, (off_t)m->size);
		ret = ret < 0 ? -errno : 0;
		session_fid_put(x->s, f);
		if (ret < 0)
			return ret;
	}
	if (v & (PFS_SET_ATIME | PFS_SET_MTIME | PFS_SET_ATIME_NOW | PFS_SET_MTIME_NOW)) {
		struct timespec ts[2] = { { 0, UTIME_OMIT }, { 0, UTIME_OMIT } };

		if (v & PFS_SET_ATIME_NOW)
			ts[0].tv_nsec = UTIME_NOW;
		else if (v & PFS_SET_ATIME)
			ts[0] = (struct timespec){ m->atime_s, m->atime_ns };
		if (v & PFS_SET_MTIME_NOW)
			ts[1].tv_nsec = UTIME_NOW;
		else if (v & PFS_SET_MTIME)
			ts[1] = (struct timespec){ m->mtime_s, m->mtime_ns };
		if (((v & PFS_SET_ATIME) && !(v & PFS_SET_ATIME_NOW) && m->atime_ns > 999999999) ||
		    ((v & PFS_SET_MTIME) && !(v & PFS_SET_MTIME_NOW) && m->mtime_ns > 999999999))
			return -EINVAL;
		if (utimensat(obj->fd, "", ts, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
	}
	return export_getattr(obj->fd, a);
}

int export_readlink(int fd, struct pfs_path *out)
{
	ssize_t n = readlinkat(fd, "", out->s, PFS_PATH_MAX + 1);

	if (n < 0)
		return -errno;
	if (n > PFS_PATH_MAX)
		return -ENAMETOOLONG;
	if (n == 0)
		return -EIO;
	out->s[n] = '\0';
	out->len = (uint16_t)n;
	return 0;
}

static mode_t perm(uint32_t mode, uint32_t umask)
{
	return mode & 07777 & ~(umask & 0777);
}

int export_mknod(struct xop *x, int dirfd, const char *name, uint32_t mode, uint32_t rdev,
		 uint32_t umask, struct pfs_entry *e)
{
	mode_t type = mode & S_IFMT;

	switch (type) {
	case 0:
		type = S_IFREG;
		break;
	case S_IFREG:
	case S_IFIFO:
	case S_IFSOCK:
		rdev = 0;
		break;
	case S_IFCHR:
	case S_IFBLK:
		if (x->cr->uid != 0)
			return -EPERM;
		break;
	default:
		return -EINVAL;
	}
	if (mknodat(dirfd, name, type | perm(mode, umask), (dev_t)rdev) < 0)
		return -errno;
	return entry_at(x, dirfd, name, e);
}

static int dir_open(int pathfd, DIR **out);
static bool dot_or_dotdot(const char *n);

/* True if the directory open as pathfd (O_PATH) has no entries. */
static bool dir_is_empty(int pathfd)
{
	DIR *d = NULL;
	struct dirent *de;
	bool empty = true;

	if (dir_open(pathfd, &d) < 0)
		return false;
	errno = 0;
	while ((de = readdir(d)))
		if (!dot_or_dotdot(de->d_name)) {
			empty = false;
			break;
		}
	if (errno)
		empty = false;
	closedir(d);
	return empty;
}

int export_mkdir(struct xop *x, int dirfd, const char *name, uint32_t mode, uint32_t umask,
		 struct pfs_entry *e, bool *empty)
{
	struct stat st;
	int fd;

	if (mkdirat(dirfd, name, perm(mode, umask)) < 0)
		return -errno;
	/* The interest in the new directory is registered before it is
	 * found empty: an entry made in it since (by another client, or
	 * beside podfs) is pushed to this session. */
	fd = entry_open(x, dirfd, name, e, &st);
	if (fd < 0)
		return fd;
	if (empty)
		*empty = S_ISDIR(st.st_mode) && dir_is_empty(fd);
	handles_adopt(x->hs, &e->fh, fd);
	return 0;
}

int export_symlink(struct xop *x, int dirfd, const char *name, const char *target,
		   struct pfs_entry *e)
{
	if (symlinkat(target, dirfd, name) < 0)
		return -errno;
	return entry_at(x, dirfd, name, e);
}

/* True if a session other than ours caches fh (and gets its pushes). */
static bool others_interested(struct xop *x, const struct pfs_fh *fh)
{
	uint64_t bits[INTEREST_WORDS];

	if (!x->it || !interest_get(x->it, handles_key(x->hs, fh), bits))
		return false;
	if (x->slot >= 0)
		bits[x->slot / 64] &= ~(1ull << (x->slot % 64));
	for (unsigned i = 0; i < INTEREST_WORDS; i++)
		if (bits[i])
			return true;
	return false;
}

/* The victim of an unlink or a rename over it, open as pfd (O_PATH, taken
 * before; -1: none), lost its name. If that was its last and another
 * client caches it, that client may have it open without our knowing:
 * keep it openable by handle (handles_orphan). Returns true if kept;
 * closes pfd either way. */
static bool keep_orphan(struct xop *x, const struct pfs_fh *victim, int pfd)
{
	struct stat st;

	if (pfd < 0)
		return false;
	if (fstat(pfd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 0 &&
	    others_interested(x, victim))
		return handles_orphan(x->hs, victim, pfd, PFSD_ORPHAN_MS);
	close(pfd);
	return false;
}

/* The handle of dirfd/name in *fh, and an O_PATH fd of it in *pfd if it
 * is not a directory (else -1). Returns true if the handle is known. */
static bool victim_at(struct xop *x, int dirfd, const char *name, struct pfs_fh *fh, int *pfd)
{
	*pfd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (*pfd < 0)
		return handles_encode_at(x->hs, dirfd, name, fh) == 0;
	if (handles_encode(x->hs, *pfd, fh) == 0)
		return true;
	close(*pfd);
	*pfd = -1;
	return false;
}

int export_unlink(struct xop *x, int dirfd, const char *name, bool dir, struct pfs_fh *victim)
{
	int pfd = -1;
	bool known;

	/* Learn the victim's handle first, so that its cached fd does not keep
	 * a deleted file's blocks allocated. */
	if (dir)
		known = handles_encode_at(x->hs, dirfd, name, victim) == 0;
	else
		known = victim_at(x, dirfd, name, victim, &pfd);
	if (unlinkat(dirfd, name, dir ? AT_REMOVEDIR : 0) < 0) {
		int ret = -errno;
		if (pfd >= 0)
			close(pfd);
		return ret;
	}
	if (!known)
		victim->len = 0;
	else if (!keep_orphan(x, victim, pfd))
		handles_forget(x->hs, victim);
	return 0;
}

int export_rename(struct xop *x, int olddir, const char *oldname, int newdir,
		  const char *newname, uint32_t flags, struct pfs_fh *victim,
		  struct pfs_fh *moved)
{
	bool known = false;
	int pfd = -1;

	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE))
		return -EINVAL;
	/* Handles before the rename: the moved object's ctime changes, and
	 * with RENAME_EXCHANGE the "victim" is the other moved object. */
	if (flags & RENAME_EXCHANGE)
		known = handles_encode_at(x->hs, newdir, newname, victim) == 0;
	else if (!(flags & RENAME_NOREPLACE))
		known = victim_at(x, newdir, newname, victim, &pfd);
	if (handles_encode_at(x->hs, olddir, oldname, moved) < 0)
		moved->len = 0;
	if (renameat2(olddir, oldname, newdir, newname, flags) < 0) {
		int ret = -errno;
		if (pfd >= 0)
			close(pfd);
		return ret;
	}
	/* The replaced file's cached handle stays (the periodic sweep closes
	 * it): a client whose name cache still points at it until our
	 * invalidation arrives opens the old file, whole, instead of getting
	 * ESTALE. That makes rename-over an atomic publish for readers on
	 * other hosts: they see the old file or the new one. A client that
	 * caches it may have it open unknown to us: it stays openable by
	 * handle until that client had the push (keep_orphan). */
	if (!known)
		victim->len = 0;
	if (known && pfd >= 0)
		keep_orphan(x, victim, pfd);
	else if (pfd >= 0)
		close(pfd);
	return 0;
}

int export_link(struct xop *x, int fd, int newdir, const char *newname, struct pfs_entry *e)
{
	char p[PROCPATH_LEN];
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode))
		return -EPERM;
	procpath(p, fd);
	/* The magic link resolves to the object itself, symlinks included
	 * (it is not followed further), and AT_EMPTY_PATH would need
	 * CAP_DAC_READ_SEARCH, which the client's fsuid does not have. */
	if (linkat(AT_FDCWD, p, newdir, newname, AT_SYMLINK_FOLLOW) < 0)
		return -errno;
	return entry_at(x, newdir, newname, e);
}

int export_open(struct xop *x, struct hent *obj, uint64_t fid, uint32_t flags, struct pfs_attr *a)
{
	int fl = clean_flags(flags), fd, ret;
	struct fid *f;

	if (x->ro && writes(fl))
		return -EROFS;
	fd = reopen(obj->fd, fl);
	if (fd < 0)
		return fd;
	ret = export_getattr(fd, a);
	if (ret < 0) {
		close(fd);
		return ret;
	}
	f = session_fid_install(x->s, fid, fd, NULL, fl, true);
	session_fid_put(x->s, f);
	return 0;
}

int export_create(struct xop *x, int dirfd, const char *name, uint64_t fid, uint32_t flags,
		  uint32_t mode, uint32_t umask, struct pfs_entry *e)
{
	int fl = clean_flags(flags), fd, ret;
	struct stat st;
	struct fid *f;

	if (flags & O_DIRECTORY)
		return -EINVAL;
	fd = openat(dirfd, name, fl | O_CREAT | O_EXCL | O_NOFOLLOW, perm(mode, umask));
	if (fd < 0 && errno == EEXIST && !(flags & O_EXCL)) {
		/* It exists: open it like OPEN would, and never a FIFO or
		 * device, whose open could block or have side effects. */
		int pfd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (pfd < 0)
			return -errno;
		fd = reopen(pfd, fl);
		close(pfd);
		if (fd < 0)
			return fd;
	} else if (fd < 0) {
		return -errno;
	}
	ret = handles_encode(x->hs, fd, &e->fh);
	if (ret < 0)
		goto out_close;
	export_note(x, &e->fh);
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		goto out_close;
	}
	export_attr(&st, &e->attr);
	f = session_fid_install(x->s, fid, fd, NULL, fl & ~O_TRUNC, true);
	session_fid_put(x->s, f);
	return 0;

out_close:
	close(fd);
	return ret;
}

ssize_t export_read(struct xop *x, struct hent *obj, uint64_t fid, uint32_t flags,
		    uint64_t off, uint32_t size, uint8_t *buf)
{
	struct fid *f;
	size_t got = 0;
	ssize_t ret;

	if (off > (uint64_t)INT64_MAX)
		return -EINVAL;
	ret = fid_for(x, obj, fid, (int)(flags & INT_MAX), &f);
	if (ret < 0)
		return ret;
	while (got < size) {
		ssize_t n = pread(f->fd, buf + got, size - got, (off_t)(off + got));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (got == 0)
				got = (size_t)-errno;
			break;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	session_fid_put(x->s, f);
	return (ssize_t)got;
}

ssize_t export_read_splice(struct xop *x, struct hent *obj, uint64_t fid, uint32_t flags,
			   uint64_t off, uint32_t size, int pipe_w)
{
	struct fid *f;
	size_t got = 0;
	ssize_t ret;

	if (off > (uint64_t)INT64_MAX)
		return -EINVAL;
	ret = fid_for(x, obj, fid, (int)(flags & INT_MAX), &f);
	if (ret < 0)
		return ret;
	while (got < size) {
		loff_t o = (loff_t)(off + got);
		ssize_t n = splice(f->fd, &o, pipe_w, NULL, size - got,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			got = (size_t)-errno;
			break;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	session_fid_put(x->s, f);
	return (ssize_t)got;
}

/* Big writes bypass this host's page cache: a checkpoint streamed to the
 * export would otherwise copy every byte once more (into the cache) and
 * push out what clients read (a venv). O_DIRECT needs the offset, length
 * and buffer aligned to the logical block size, which Linux keeps at or
 * below 4 KiB; a filesystem that still refuses (EINVAL) gets buffered
 * writes for that file from then on. The kernel keeps the page cache
 * coherent (a direct write writes back and drops cached pages of its
 * range). Durability is unchanged: data and metadata are committed by
 * FSYNC as before. */
#define DIO_MIN (256u * 1024)
#define DIO_ALIGN 4096u

/* The O_DIRECT twin of f's fd for a write of len bytes at off, or -1. */
static int direct_fd(struct xop *x, struct fid *f, uint64_t off, uint32_t len)
{
	if (!x->direct || len < DIO_MIN || (off | len) % DIO_ALIGN || (f->flags & O_APPEND) ||
	    (f->flags & O_ACCMODE) == O_RDONLY || atomic_load(&f->dio_bad))
		return -1;
	int d = atomic_load(&f->dfd);
	if (d == -1) {
		/* Opened once per fid, with the writer's flags that matter
		 * (O_SYNC, O_DSYNC) and its credentials; a failure (tmpfs has
		 * no O_DIRECT, a mode changed since the open) means buffered
		 * writes for this fid. */
		char p[PROCPATH_LEN];
		int want, expect = -1;
		procpath(p, f->fd);
		want = open(p, O_WRONLY | O_DIRECT | O_CLOEXEC | O_NOCTTY |
				       (f->flags & (O_SYNC | O_DSYNC)));
		if (want < 0)
			want = -2;
		if (!atomic_compare_exchange_strong(&f->dfd, &expect, want) && want >= 0)
			close(want);
		d = atomic_load(&f->dfd);
	}
	return d;
}

int export_write(struct xop *x, struct hent *obj, uint64_t fid, uint32_t flags, uint64_t off,
		 const uint8_t *data, uint32_t len, uint32_t *written, struct pfs_attr *a)
{
	uint8_t *bounce = NULL;
	struct fid *f;
	size_t done = 0;
	int ret, fd;

	if (off > (uint64_t)INT64_MAX)
		return -EINVAL;
	ret = fid_for(x, obj, fid, (int)(flags & INT_MAX), &f);
	if (ret < 0)
		return ret;
	fd = direct_fd(x, f, off, len);
	if (fd >= 0 && (uintptr_t)data % DIO_ALIGN) {
		/* The payload sits where the frame put it. */
		if (posix_memalign((void **)&bounce, DIO_ALIGN, len) == 0) {
			memcpy(bounce, data, len);
			data = bounce;
		} else {
			fd = -1;
		}
	}
	if (fd < 0)
		fd = f->fd;
	while (done < len) {
		ssize_t n = pwrite(fd, data + done, len - done, (off_t)(off + done));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EINVAL && fd != f->fd) {
				/* Not aligned enough for this filesystem (or a
				 * short write left the rest unaligned). */
				if (done == 0)
					atomic_store(&f->dio_bad, true);
				fd = f->fd;
				continue;
			}
			if (done == 0) {
				ret = -errno;
				goto out_put;
			}
			break;
		}
		done += (size_t)n;
	}
	*written = (uint32_t)done;
	if (fd != f->fd)
		atomic_fetch_add(x->direct, (uint64_t)done);
	ret = export_getattr(f->fd, a);
out_put:
	free(bounce);
	session_fid_put(x->s, f);
	return ret;
}

int export_release(struct xop *x, uint64_t fid)
{
	session_fid_release(x->s, fid);
	return 0;
}

int export_fsync(struct xop *x, struct hent *obj, uint64_t fid, bool datasync)
{
	struct fid *f = fid ? session_fid_get(x->s, fid) : NULL;
	int fd, ret;

	if (f) {
		fd = f->dir ? dirfd(f->dir) : f->fd;
		ret = datasync ? fdatasync(fd) : fsync(fd);
		ret = ret < 0 ? -errno : 0;
		session_fid_put(x->s, f);
		return ret;
	}
	/* No open file (or the daemon restarted): any fd of the inode will
	 * do, fsync flushes the inode. */
	fd = reopen(obj->fd, O_RDONLY);
	if (fd == -EACCES)
		fd = reopen(obj->fd, O_WRONLY);
	if (fd < 0)
		return fd;
	ret = datasync ? fdatasync(fd) : fsync(fd);
	ret = ret < 0 ? -errno : 0;
	close(fd);
	return ret;
}

static int dir_open(int pathfd, DIR **out)
{
	int fd = reopen(pathfd, O_RDONLY | O_DIRECTORY);
	DIR *d = NULL;

	if (fd < 0)
		return fd;
	d = fdopendir(fd);
	if (!d) {
		int ret = -errno;
		close(fd);
		return ret;
	}
	*out = d;
	return 0;
}

int export_opendir(struct xop *x, struct hent *obj, uint64_t fid, struct pfs_attr *a)
{
	struct fid *f;
	DIR *d = NULL;
	int ret;

	ret = dir_open(obj->fd, &d);
	if (ret < 0)
		return ret;
	ret = export_getattr(dirfd(d), a);
	if (ret < 0) {
		closedir(d);
		return ret;
	}
	f = session_fid_install(x->s, fid, dirfd(d), d, O_RDONLY, true);
	session_fid_put(x->s, f);
	return 0;
}

static bool dot_or_dotdot(const char *n)
{
	return n[0] == '.' && (n[1] == '\0' || (n[1] == '.' && n[2] == '\0'));
}

/* Listing read-ahead. A listing reads its small files one after the other;
 * when they are not in the page cache (a cold server), each read waits
 * for the disk in turn. Once one did, a second stream over the directory
 * runs LISTING_RA entries ahead and asks for the small files there with
 * POSIX_FADV_WILLNEED, so the disk fetches them side by side while the
 * listing goes on. Its opens are for reading only, non-blocking, never
 * follow a link, and are made with the caller's credentials. */
#define LISTING_RA 48

struct listing_ra {
	DIR *d;	   /* the read-ahead stream, or NULL */
	long pos;  /* entries it has passed */
	bool done; /* it reached the end (or failed) */
};

/* Prefetches the small files among the entries past from, up to upto
 * (positions in readdir order, counting from 1). */
static void listing_ra_advance(struct listing_ra *ra, int dirfd, long from, long upto,
			       uint32_t max_size)
{
	if (ra->done)
		return;
	if (!ra->d && dir_open(dirfd, &ra->d) < 0) {
		ra->done = true;
		return;
	}
	while (ra->pos < from && readdir(ra->d))
		ra->pos++;
	while (ra->pos < upto) {
		struct dirent *de = readdir(ra->d);
		struct stat st;
		int fd;

		if (!de) {
			ra->done = true;
			return;
		}
		ra->pos++;
		if (de->d_type != DT_REG)
			continue;
		fd = openat(dirfd, de->d_name,
			    O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC | O_NOATIME);
		if (fd < 0 && errno == EPERM)
			fd = openat(dirfd, de->d_name,
				    O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
		    (uint64_t)st.st_size <= max_size)
			(void)posix_fadvise(fd, 0, st.st_size, POSIX_FADV_WILLNEED);
		close(fd);
	}
}

/* How much of a listing's reply goes to file contents: up to
 * PFS_LISTDIR_DATA_MAX, less the room its items are likely to need, so
 * that the listing stays complete. dir_size is the directory's st_size:
 * about 16-40 bytes per entry on ext4, xfs, tmpfs and btrfs, against
 * about 160 for an item on the wire (name, handle, attributes). */
static uint32_t listing_data_budget(uint64_t dir_size, uint32_t max_bytes)
{
	uint64_t reserve = dir_size * 10;
	if (reserve < 64 * 1024)
		reserve = 64 * 1024;
	if (reserve + 4 >= max_bytes)
		return 0;
	uint64_t b = max_bytes - 4 - reserve;
	return b < PFS_LISTDIR_DATA_MAX ? (uint32_t)b : PFS_LISTDIR_DATA_MAX;
}

/* Python content a listing does not spend its budget on (the file is
 * listed as usual, and read if it is read):
 *  - optimized bytecode (name.cpython-311.opt-1.pyc, .opt-2.pyc), read
 *    only by `python -O`/`-OO`, yet two thirds of a __pycache__ that
 *    holds it (the standard library's);
 *  - a source (name.py) in a directory with a __pycache__: an import
 *    reads the compiled module from there and only stats the source
 *    (a traceback, or a .pyc that is stale or missing, reads it then).
 * In a cold import they were most of what listings carried. */
static bool python_unread(const char *name, size_t nl, bool has_pycache)
{
	if (nl > 3 && has_pycache && memcmp(name + nl - 3, ".py", 3) == 0)
		return true;
	return nl > 10 && memcmp(name + nl - 4, ".pyc", 4) == 0 &&
	       memcmp(name + nl - 10, ".opt-", 5) == 0;
}

static int put_item(struct pfs_wr *w, const struct pfs_name *name, const struct pfs_entry *e,
		    uint32_t flags, const struct pfs_bytes *data)
{
	if (pfs_put_NAME(w, name) < 0 || pfs_put_ENTRY(w, e) < 0 || pfs_put_U32(w, &flags) < 0 ||
	    pfs_put_BYTES(w, data) < 0)
		return -ENOSPC;
	return 0;
}

int export_listdir(struct xop *x, struct hent *obj, uint32_t max_inline, uint32_t max_bytes,
		   struct pfs_wr *w)
{
	struct listing_ra ra = { 0 };
	long pos = 0;
	bool cold = false;
	uint32_t data_left, data_taken = 0, flags = PFS_LS_COMPLETE, n = 0;
	unsigned restarts = 0;
	struct stat dst;
	bool has_pycache;
	struct pfs_wr lim;
	size_t at, start;
	uint8_t *buf;
	DIR *d = NULL;
	int ret;

	if (max_bytes > PFS_MAX_IO)
		max_bytes = PFS_MAX_IO;
	if (max_inline > PFS_INLINE_MAX)
		max_inline = PFS_INLINE_MAX;
	if (max_bytes < 4 || w->cap - w->len < max_bytes)
		return -EINVAL;
	ret = dir_open(obj->fd, &d);
	if (ret < 0)
		return ret;
	data_left = listing_data_budget(fstat(dirfd(d), &dst) == 0 ? (uint64_t)dst.st_size : 0,
					max_bytes);
	has_pycache = fstatat(dirfd(d), "__pycache__", &dst, AT_SYMLINK_NOFOLLOW) == 0 &&
		      S_ISDIR(dst.st_mode);
	buf = xmalloc((size_t)max_inline + 1);
	/* Items go into a cursor limited to max_bytes, after the flags. */
	pfs_wr_init(&lim, w->buf + w->len, max_bytes);
	pfs_wr_skip(&lim, 4, &at);
	start = lim.len;
	for (;;) {
		struct pfs_name name;
		struct pfs_entry e;
		struct pfs_bytes data;
		uint32_t iflags = 0, len = 0, mi;
		struct dirent *de;
		size_t nl, save;

		errno = 0;
		if (!(de = readdir(d))) {
			if (errno)
				flags = 0;
			break;
		}
		pos++;
		if (dot_or_dotdot(de->d_name))
			continue;
		nl = strlen(de->d_name);
		/* A name the protocol cannot carry, an entry that cannot be
		 * looked up, or no room: the listing is not complete. */
		if (nl > PFS_NAME_MAX || !pfs_name_valid(de->d_name, nl) ||
		    n >= PFS_LISTDIR_ITEMS_MAX) {
			flags = 0;
			break;
		}
		mi = max_inline < data_left ? max_inline : data_left;
		if (python_unread(de->d_name, nl, has_pycache))
			mi = 0;
		if (cold && mi > 0)
			listing_ra_advance(&ra, obj->fd, pos, pos + LISTING_RA, mi);
		if (export_lookup_data(x, obj->fd, de->d_name, mi, &e, buf, &len, &iflags,
				       &cold) < 0) {
			flags = 0;
			break;
		}
		name.len = (uint16_t)nl;
		memcpy(name.s, de->d_name, nl + 1);
		data.p = buf;
		data.len = (iflags & PFS_LD_DATA) ? len : 0;
		save = lim.len;
		if (put_item(&lim, &name, &e, iflags, &data) < 0) {
			lim.len = save;
			if (data_taken == 0 && data.len == 0) {
				flags = 0;
				break;
			}
			/* Out of room because of the contents taken (the budget's
			 * guess of the room the items need fell short): the names
			 * matter more, a complete listing answers misses. Start
			 * again with half the contents, the third time without. */
			rewinddir(d);
			pos = 0;
			n = 0;
			lim.len = start;
			data_left = ++restarts < 3 ? data_taken / 2 : 0;
			data_taken = 0;
			continue;
		}
		data_taken += data.len;
		data_left -= data.len;
		n++;
	}
	closedir(d);
	if (ra.d)
		closedir(ra.d);
	free(buf);
	pfs_patch_U32(&lim, at, flags);
	w->len += lim.len;
	return 0;
}

int export_readdir(struct xop *x, struct hent *obj, uint64_t fid, uint64_t off,
		   uint32_t max_bytes, bool plus, struct pfs_wr *w)
{
	struct fid *f = session_fid_get(x->s, fid);
	struct pfs_wr lim;
	unsigned count = 0;
	uint8_t eof = 0;
	size_t at;
	int ret = 0;

	if (!f) {
		DIR *d = NULL;
		ret = dir_open(obj->fd, &d);
		if (ret < 0)
			return ret;
		f = session_fid_install(x->s, fid, dirfd(d), d, O_RDONLY, false);
	}
	if (!f->dir) {
		session_fid_put(x->s, f);
		return -ENOTDIR;
	}
	if (max_bytes > PFS_READDIR_MAX)
		max_bytes = PFS_READDIR_MAX;
	if (max_bytes < 1 || w->cap - w->len < max_bytes) {
		session_fid_put(x->s, f);
		return -EINVAL;
	}
	/* Entries go into a cursor limited to max_bytes, after eof. */
	pfs_wr_init(&lim, w->buf + w->len, max_bytes);
	pfs_wr_skip(&lim, 1, &at);

	pthread_mutex_lock(&f->dmu);
	if (off != f->pos) {
		if (off == 0)
			rewinddir(f->dir);
		else
			seekdir(f->dir, (long)off);
		f->pos = off;
	}
	for (;;) {
		struct pfs_dirent de;
		struct dirent *d;
		size_t nl;

		errno = 0;
		d = readdir(f->dir);
		if (!d) {
			if (errno) {
				ret = -errno;
				break;
			}
			eof = 1;
			break;
		}
		nl = strlen(d->d_name);
		if (nl > PFS_NAME_MAX)
			continue;
		memset(&de.e, 0, sizeof(de.e));
		memcpy(de.name.s, d->d_name, nl + 1);
		de.name.len = (uint16_t)nl;
		de.next_off = (uint64_t)d->d_off;
		de.ino = d->d_ino;
		de.mode = d->d_type == DT_UNKNOWN ? 0 : DTTOIF(d->d_type);
		de.flags = 0;
		if (plus && !dot_or_dotdot(d->d_name) &&
		    entry_at(x, dirfd(f->dir), d->d_name, &de.e) == 0) {
			de.flags = PFS_DE_HAS_ENTRY;
			de.mode = de.e.attr.mode;
		}
		ret = pfs_enc_dirent(&lim, &de);
		if (ret == -EINVAL) { /* a name the protocol cannot carry */
			ret = 0;
			f->pos = de.next_off;
			continue;
		}
		if (ret < 0) {
			ret = 0;
			/* Full: give the entry back for the next call. */
			seekdir(f->dir, (long)f->pos);
			if (count == 0)
				ret = -EINVAL;
			break;
		}
		f->pos = de.next_off;
		count++;
	}
	pthread_mutex_unlock(&f->dmu);
	session_fid_put(x->s, f);
	if (ret < 0 && count == 0)
		return ret;
	pfs_patch_U8(&lim, at, eof);
	w->len += lim.len;
	return 0;
}

int export_statfs(struct xop *x, struct pfs_statfs_rep *r)
{
	struct statvfs sv;

	if (fstatvfs(handles_export_fd(x->hs), &sv) < 0)
		return -errno;
	r->bsize = sv.f_bsize;
	r->frsize = sv.f_frsize;
	r->blocks = sv.f_blocks;
	r->bfree = sv.f_bfree;
	r->bavail = sv.f_bavail;
	r->files = sv.f_files;
	r->ffree = sv.f_ffree;
	r->favail = sv.f_favail;
	r->namemax = sv.f_namemax;
	return 0;
}

/* --- xattrs: through the magic link, which needs a non-symlink --- */

static bool is_trusted(const char *name)
{
	return strncmp(name, "trusted.", 8) == 0;
}

static int xattr_target(struct hent *obj, char p[PROCPATH_LEN], bool *symlink)
{
	struct stat st;

	if (fstat(obj->fd, &st) < 0)
		return -errno;
	*symlink = S_ISLNK(st.st_mode);
	procpath(p, obj->fd);
	return 0;
}

int export_setxattr(struct xop *x, struct hent *obj, const char *name, const uint8_t *value,
		    uint32_t size, uint32_t flags)
{
	char p[PROCPATH_LEN];
	bool lnk = false;
	int ret;

	if (flags & ~(uint32_t)(XATTR_CREATE | XATTR_REPLACE))
		return -EINVAL;
	if (size > PFS_XATTR_SIZE_MAX)
		return -E2BIG;
	if (is_trusted(name))
		return -EOPNOTSUPP;
	if (strncmp(name, "security.", 9) == 0 && x->cr->uid != 0)
		return -EPERM;
	ret = xattr_target(obj, p, &lnk);
	if (ret < 0)
		return ret;
	if (lnk)
		return -EPERM; /* user.* is not allowed on symlinks either */
	if (setxattr(p, name, value, size, (int)flags) < 0)
		return -errno;
	return 0;
}

ssize_t export_getxattr(struct xop *x, struct hent *obj, const char *name, uint8_t *buf,
			uint32_t size)
{
	char p[PROCPATH_LEN];
	ssize_t n;
	bool lnk = false;
	int ret;

	if (is_trusted(name))
		return -ENODATA;
	ret = xattr_target(obj, p, &lnk);
	if (ret < 0)
		return ret;
	if (lnk)
		return -ENODATA;
	if (size > PFS_XATTR_SIZE_MAX)
		size = PFS_XATTR_SIZE_MAX;
	n = getxattr(p, name, size ? buf : NULL, size);
	return n < 0 ? -errno : n;
}

ssize_t export_listxattr(struct xop *x, struct hent *obj, uint8_t *buf, uint32_t size)
{
	char p[PROCPATH_LEN];
	char *all;
	ssize_t n, out = 0;
	bool lnk = false;
	int ret;

	ret = xattr_target(obj, p, &lnk);
	if (ret < 0)
		return ret;
	if (lnk)
		return 0;
	all = xmalloc(PFS_XATTR_SIZE_MAX);
	n = listxattr(p, all, PFS_XATTR_SIZE_MAX);
	if (n < 0) {
		out = errno == ERANGE ? -E2BIG : -errno;
		goto out_free;
	}
	/* Hide the trusted namespace, which clients can never use. */
	for (ssize_t i = 0; i < n;) {
		size_t l = strnlen(all + i, (size_t)(n - i));
		if (l && !is_trusted(all + i)) {
			if (size) {
				if ((size_t)out + l + 1 > size) {
					out = -ERANGE;
					goto out_free;
				}
				memcpy(buf + out, all + i, l);
				buf[out + (ssize_t)l] = '\0';
			}
			out += (ssize_t)l + 1;
		}
		i += (ssize_t)l + 1;
	}
out_free:
	free(all);
	return out;
}

int export_removexattr(struct xop *x, struct hent *obj, const char *name)
{
	char p[PROCPATH_LEN];
	bool lnk = false;
	int ret;

	if (is_trusted(name))
		return -EOPNOTSUPP;
	if (strncmp(name, "security.", 9) == 0 && x->cr->uid != 0)
		return -EPERM;
	ret = xattr_target(obj, p, &lnk);
	if (ret < 0)
		return ret;
	if (lnk)
		return -EPERM;
	if (removexattr(p, name) < 0)
		return -errno;
	return 0;
}

int export_fallocate(struct xop *x, struct hent *obj, uint64_t fid, uint32_t mode,
		     uint64_t off, uint64_t len)
{
	struct fid *f;
	int ret;

	if (off > (uint64_t)INT64_MAX || len > (uint64_t)INT64_MAX)
		return -EINVAL;
	ret = fid_for(x, obj, fid, FLAGS_WRITABLE, &f);
	if (ret < 0)
		return ret;
	ret = fallocate(f->fd, (int)mode, (off_t)off, (off_t)len) < 0 ? -errno : 0;
	session_fid_put(x->s, f);
	return ret;
}

int export_lseek(struct xop *x, struct hent *obj, uint64_t fid, uint64_t off, uint32_t whence,
		 uint64_t *result)
{
	struct fid *f;
	off_t r;
	int ret;

	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return -EINVAL;
	if (off > (uint64_t)INT64_MAX)
		return -ENXIO;
	ret = fid_for(x, obj, fid, FLAGS_ANY, &f);
	if (ret < 0)
		return ret;
	r = lseek(f->fd, (off_t)off, (int)whence);
	ret = r < 0 ? -errno : 0;
	if (r >= 0)
		*result = (uint64_t)r;
	session_fid_put(x->s, f);
	return ret;
}

/* --- locks --- */

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
		fd = reopen(pathfd, modes[i] | O_NONBLOCK);
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

int export_getlk(struct xop *x, struct hent *obj, const struct pfs_lock_req *m,
		 struct pfs_getlk_rep *r)
{
	struct lockent *l;
	struct flock f;
	int fd, ret;

	if (m->flags & PFS_LKF_FLOCK)
		return -EINVAL;
	if (m->flags)
		return -EINVAL;
	ret = to_flock(m, &f);
	if (ret < 0)
		return ret;
	pthread_mutex_lock(&x->s->lk_mu);
	/* Ask through the owner's own fd so its own locks do not count. */
	l = session_lock_find(x->s, m->owner, false, &obj->fh);
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
	int ret;

	if (m->flags & ~(uint32_t)PFS_LKF_FLOCK)
		return -EINVAL;
	ret = to_flock(m, &f);
	if (ret < 0)
		return ret;
	pthread_mutex_lock(&x->s->lk_mu);
	l = session_lock_find(x->s, m->owner, fl, &obj->fh);
	if (m->type == PFS_LK_UN && (!l || fl)) {
		/* Nothing held, or a flock: closing its fd drops it. */
		if (l)
			session_lock_del(x->s, l);
		ret = 0;
		goto out_unlock;
	}
	if (!l) {
		int fd = lock_fd_open(x, obj->fd, fl);
		if (fd < 0) {
			ret = fd;
			goto out_unlock;
		}
		l = session_lock_add(x->s, m->owner, fl, &obj->fh, fd);
		created = true;
	}
	if (fl)
		ret = flock(l->fd, (m->type == PFS_LK_RD ? LOCK_SH : LOCK_EX) | LOCK_NB);
	else
		ret = fcntl(l->fd, F_OFD_SETLK, &f);
	if (ret < 0) {
		ret = (errno == EWOULDBLOCK || errno == EACCES) ? -EAGAIN : -errno;
		if (created)
			session_lock_del(x->s, l);
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
