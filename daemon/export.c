/* export.c: what the operations on the backing store share (see
 * export_base_i.h): naming and reopening objects of O_PATH fds, entries,
 * directory streams, attributes and interest; and the operations that
 * need nothing else (readlink, statfs). Worker threads only. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "export_base_i.h"

void export_procpath(char buf[EXPORT_PROCPATH_LEN], int fd)
{
	snprintf(buf, EXPORT_PROCPATH_LEN, "/proc/self/fd/%d", fd);
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

/* Reads of a regular file that showed data but no blocks, with a yield
 * between them; then, for one written in the last NOBLOCKS_RECENT_S
 * seconds, reads NOBLOCKS_NAP_US apart for NOBLOCKS_WAIT_US at most. */
#define NOBLOCKS_READS 3
#define NOBLOCKS_RECENT_S 2
#define NOBLOCKS_NAP_US 200
#define NOBLOCKS_WAIT_US 5000

/* Whether st was modified less than NOBLOCKS_RECENT_S seconds ago. */
static bool written_lately(const struct stat *st)
{
	struct timespec now;

	if (clock_gettime(CLOCK_REALTIME, &now) < 0)
		return false;
	/* Not now - mtime: any client may set an mtime as far from now as
	 * the filesystem keeps (tmpfs, btrfs: the whole 64-bit range). */
	return st->st_mtim.tv_sec > now.tv_sec - NOBLOCKS_RECENT_S;
}

int export_fstat(int fd, struct stat *st)
{
	/* With delayed allocation (ext4), a block written but not yet
	 * allocated counts as reserved; when writeback allocates it (at
	 * once for a file rewritten after O_TRUNC, when it is closed) the
	 * filesystem takes it out of the reserved count a moment before it
	 * adds it to the inode's: a stat in between shows st_blocks 0 for a
	 * file with data (a 300-byte file rewritten and closed in a loop
	 * shows it about once in 200 rewrites). Locally the next stat
	 * corrects it; a client trusts attributes until a change is pushed,
	 * so that moment would stay for an hour. It is read again, after
	 * letting the allocating thread run on. Preempted in between, that
	 * thread holds the moment until it runs again, which on a loaded
	 * machine can take longer than two yields (the CI saw it): a file
	 * written in the last seconds is read again a while longer, 5 ms at
	 * most. A file that really has no blocks (sparse, or inline data)
	 * costs two more reads, and that wait only just after a write. */
	for (int i = 1, waited = 0;; i++) {
		if (fstat(fd, st) < 0)
			return -errno;
		if (!S_ISREG(st->st_mode) || st->st_size == 0 || st->st_blocks != 0)
			return 0;
		if (i < NOBLOCKS_READS) {
			sched_yield();
			continue;
		}
		if (waited >= NOBLOCKS_WAIT_US || !written_lately(st))
			return 0;
		usleep(NOBLOCKS_NAP_US);
		waited += NOBLOCKS_NAP_US;
	}
}

int export_getattr(int fd, struct pfs_attr *a)
{
	struct stat st;
	int ret = export_fstat(fd, &st);

	if (ret < 0)
		return ret;
	export_attr(&st, a);
	return 0;
}

void export_note(struct xop *x, const struct pfs_fh *fh)
{
	if (x->it && fh->len)
		interest_note(x->it, handles_key(x->hs, fh), x->slot, x->kv);
}

int export_entry_open(struct xop *x, int dirfd, const char *name, struct pfs_entry *e,
		      struct stat *st)
{
	int fd, ret;

	fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = handles_encode(x->hs, fd, &e->fh);
	if (ret == -EXDEV) /* a mount point inside the export */
		ret = -EACCES;
	if (ret < 0)
		goto out_close;
	export_note(x, &e->fh);
	if ((ret = export_fstat(fd, st)) < 0)
		goto out_close;
	export_attr(st, &e->attr);
	if (S_ISDIR(st->st_mode))
		watch_dir(x->watch, fd, &e->fh);
	return fd;

out_close:
	close(fd);
	return ret;
}

int export_entry_at(struct xop *x, int dirfd, const char *name, struct pfs_entry *e)
{
	struct stat st;
	int fd = export_entry_open(x, dirfd, name, e, &st);

	if (fd < 0)
		return fd;
	handles_adopt(x->hs, &e->fh, fd);
	return 0;
}

int export_open_flags(uint32_t flags)
{
	return (int)(flags & (O_ACCMODE | O_APPEND | O_TRUNC | O_SYNC | O_DSYNC)) | O_CLOEXEC |
	       O_NOCTTY;
}

int export_reopen(int pathfd, int flags)
{
	char p[EXPORT_PROCPATH_LEN];
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
	export_procpath(p, pathfd);
	fd = open(p, flags | O_CLOEXEC | O_NOCTTY);
	return fd < 0 ? -errno : fd;
}

int export_dir_reopen(int pathfd)
{
	return export_reopen(pathfd, O_RDONLY | O_DIRECTORY);
}

int export_dir_open(int pathfd, DIR **out)
{
	int fd = export_dir_reopen(pathfd);
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

bool export_dot_or_dotdot(const char *n)
{
	return n[0] == '.' && (n[1] == '\0' || (n[1] == '.' && n[2] == '\0'));
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

int export_atime_mode(int fd)
{
	struct statvfs sv;

	if (fstatvfs(fd, &sv) < 0)
		return XOP_ATIME_ALWAYS;
	if (sv.f_flag & ST_NOATIME)
		return XOP_ATIME_NEVER;
	return (sv.f_flag & ST_RELATIME) ? XOP_ATIME_STALE : XOP_ATIME_ALWAYS;
}
