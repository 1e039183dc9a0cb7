/* export_files.c: file I/O on the backing store: attributes set, files
 * opened under the session's fids, read (copied or moved into a pipe),
 * written (big aligned writes with O_DIRECT), synced, allocated, sought
 * and released. Worker threads only (see export_i.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "export_base_i.h"
#include "podfs/clock.h"
#include "podfs/crc32c.h"
#include "podfs/digest.h"
#include "podfs/hash.h"

static bool writes(int flags)
{
	return (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
}

/* The session's fid, or (reopen on miss: the daemon restarted, or the
 * session expired) the object opened again under that fid. flags < 0:
 * any mode that allows writing; flags == -2: any mode at all. Read-only
 * (x->ro) reopens only for reading: O_RDWR becomes O_RDONLY, and a mode
 * that only writes is EROFS (a writable fd on the coordinator would
 * make an exec of the file there fail with ETXTBSY, and break leases). */
#define FLAGS_WRITABLE (-1)
#define FLAGS_ANY (-2)
static int fid_for(struct xop *x, struct hent *obj, uint64_t id, int flags, struct fid **out)
{
	static const int wr_modes[] = { O_RDWR, O_WRONLY };
	static const int any_modes[] = { O_RDONLY, O_WRONLY };
	struct fid *f = session_fid_get(x->s, id);
	int fd = -EBADF;

	if (f) {
		if (f->is_dir) {
			session_fid_put(x->s, f);
			return -EISDIR;
		}
		*out = f;
		return 0;
	}
	if (x->nowait) /* an open may wait for the disk */
		return -XOP_WOULD_BLOCK;
	if (x->ro) {
		if (flags == FLAGS_WRITABLE || (flags >= 0 && (flags & O_ACCMODE) == O_WRONLY))
			return -EROFS;
		if (flags >= 0)
			flags &= ~O_ACCMODE; /* O_RDONLY */
	}
	fd = session_fid_reserve(x->s);
	if (fd < 0)
		return fd;
	if (flags >= 0) {
		flags = export_open_flags((uint32_t)flags & ~(uint32_t)(O_CREAT | O_EXCL | O_TRUNC));
		fd = export_reopen(obj->fd, flags);
	} else {
		const int *modes = flags == FLAGS_WRITABLE ? wr_modes : any_modes;
		for (int i = 0; i < (x->ro ? 1 : 2); i++) {
			flags = modes[i];
			fd = export_reopen(obj->fd, flags | O_CLOEXEC);
			if (fd >= 0 || (fd != -EACCES && fd != -EPERM && fd != -ETXTBSY))
				break;
		}
	}
	if (fd < 0) {
		session_fid_unreserve(x->s);
		return fd;
	}
	*out = session_fid_install(x->s, id, fd, false, flags, false);
	if ((*out)->is_dir) {
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
	return export_setattr_fd(x, obj->fd, m, a);
}

int export_setattr_fd(struct xop *x, int fd, const struct pfs_setattr_req *m, struct pfs_attr *a)
{
	char p[EXPORT_PROCPATH_LEN];
	struct stat st;
	uint32_t v = m->valid;

	if (v & ~PFS_SET_KNOWN)
		return -EINVAL;
	if (fstat(fd, &st) < 0)
		return -errno;
	export_procpath(p, fd);
	if (!(v & ~PFS_SET_CTIME)) {
		/* Nothing but "change the ctime" (chown(f, -1, -1)). */
		if (fchownat(fd, "", (uid_t)-1, (gid_t)-1, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
	}
	if (v & PFS_SET_MODE) {
		if (S_ISLNK(st.st_mode))
			return -EOPNOTSUPP;
		/* A squashed caller keeps the set-id bits it has, adds none. */
		if (x->squashed && (m->mode & ~st.st_mode & (S_ISUID | S_ISGID)))
			return -EPERM;
		if (chmod(p, m->mode & 07777) < 0) {
			int ret = -errno;
			/* Set-id bits dropped for a write by a non-owner:
			 * after the truncate it comes with, if any. */
			if (ret != -EPERM || !only_kills_privs(&st, m->mode))
				return ret;
			if (v & ~PFS_SET_MODE) {
				struct pfs_setattr_req rest = *m;
				rest.valid &= ~PFS_SET_MODE;
				if ((ret = export_setattr_fd(x, fd, &rest, a)) < 0)
					return ret;
			}
			if ((ret = kill_privs(x, fd, p, m->mode)) < 0)
				return ret;
			return export_getattr(fd, a);
		}
	}
	if (v & (PFS_SET_UID | PFS_SET_GID)) {
		uid_t uid = (v & PFS_SET_UID) ? m->uid : (uid_t)-1;
		gid_t gid = (v & PFS_SET_GID) ? m->gid : (gid_t)-1;
		if (fchownat(fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
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
		if (f && !f->is_dir && (f->flags & O_ACCMODE) != O_RDONLY)
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
		if (utimensat(fd, "", ts, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
	}
	return export_getattr(fd, a);
}

int export_open(struct xop *x, struct hent *obj, uint64_t fid, uint32_t flags, struct pfs_attr *a)
{
	int fl = export_open_flags(flags), fd, ret;
	struct fid *f;

	if (x->ro && writes(fl))
		return -EROFS;
	ret = session_fid_reserve(x->s);
	if (ret < 0)
		return ret;
	fd = export_reopen(obj->fd, fl);
	if (fd < 0) {
		session_fid_unreserve(x->s);
		return fd;
	}
	ret = export_getattr(fd, a);
	if (ret < 0) {
		close(fd);
		session_fid_unreserve(x->s);
		return ret;
	}
	f = session_fid_install(x->s, fid, fd, false, fl, true);
	session_fid_put(x->s, f);
	return 0;
}

/* Whether a read of fd would move its access time, as touch_atime
 * decides (relatime_need_update), with the export's mode. (A client may
 * set any time: nothing here subtracts one.) */
static bool moves_atime(int fd, unsigned mode)
{
	struct stat st;
	struct timespec now;

	if (mode == XOP_ATIME_NEVER)
		return false;
	if (mode == XOP_ATIME_ALWAYS || fstat(fd, &st) < 0)
		return true;
	clock_gettime(CLOCK_REALTIME, &now);
	return !pfs_ts_before(&st.st_mtim, &st.st_atim) || !pfs_ts_before(&st.st_ctim, &st.st_atim) ||
	       st.st_atim.tv_sec <= now.tv_sec - (24 * 60 * 60 - 60); /* a day, a minute early */
}

/* READ: up to size bytes at off of the session's fid (opened again under
 * it on a miss), copied into buf, or, with buf NULL, moved into the pipe
 * pipe_w without a copy. A copy keeps what it read before an error; a
 * splice that fails anywhere fails (the caller then copies). */
static ssize_t read_fid(struct xop *x, struct hent *obj, uint64_t fid, uint32_t flags,
			uint64_t off, uint32_t size, uint8_t *buf, int pipe_w)
{
	struct fid *f;
	size_t got = 0;
	ssize_t ret;

	if (off > (uint64_t)INT64_MAX)
		return -EINVAL;
	ret = fid_for(x, obj, fid, (int)(flags & INT_MAX), &f);
	if (ret < 0)
		return ret;
	if (x->nowait && moves_atime(f->fd, x->atime)) {
		session_fid_put(x->s, f);
		return -XOP_WOULD_BLOCK;
	}
	while (got < size) {
		loff_t o = (loff_t)(off + got);
		ssize_t n;
		if (x->nowait) {
			/* What the page cache holds, or nothing: any failure
			 * (EAGAIN, a file system without RWF_NOWAIT) is
			 * left to the worker that runs it again. */
			struct iovec iov = { buf + got, size - got };
			n = preadv2(f->fd, &iov, 1, o, RWF_NOWAIT);
			if (n < 0) {
				got = (size_t)-XOP_WOULD_BLOCK;
				break;
			}
		} else {
			n = buf ? pread(f->fd, buf + got, size - got, o)
				: splice(f->fd, &o, pipe_w, NULL, size - got,
					 SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (got == 0 || !buf)
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

ssize_t export_read(struct xop *x, struct hent *obj, uint64_t fid, uint32_t flags,
		    uint64_t off, uint32_t size, uint8_t *buf)
{
	return read_fid(x, obj, fid, flags, off, size, buf, -1);
}

ssize_t export_read_splice(struct xop *x, struct hent *obj, uint64_t fid, uint32_t flags,
			   uint64_t off, uint32_t size, int pipe_w)
{
	return read_fid(x, obj, fid, flags, off, size, NULL, pipe_w);
}

/* Bytes read at once for a chunk's digest. */
#define DIGEST_PIECE (1u << 20)

int export_chunk(struct xop *x, struct hent *obj, uint64_t fid, uint32_t flags,
		 struct pfs_attr *before, uint64_t off, uint32_t len,
		 uint8_t digest[PFS_DIGEST_LEN], struct pfs_attr *after)
{
	struct pfs_sha256 *h = NULL;
	uint8_t *buf = NULL;
	struct fid *f;
	uint32_t got = 0;
	int ret;

	if (off > (uint64_t)INT64_MAX - len)
		return -EINVAL;
	ret = fid_for(x, obj, fid, (int)(flags & INT_MAX), &f);
	if (ret < 0)
		return ret;
	/* A digest stands for the bytes (peers hand them out for it): only
	 * to a caller who may read them, as READ through this file would. */
	if ((f->flags & O_ACCMODE) == O_WRONLY) {
		ret = -EBADF;
		goto out_put;
	}
	if ((ret = export_getattr(f->fd, before)) < 0 || !digest)
		goto out_put;
	buf = malloc(DIGEST_PIECE);
	if (!buf || pfs_sha256_begin(&h) < 0) {
		ret = -ENOMEM;
		goto out_put;
	}
	while (got < len) {
		uint32_t want = len - got < DIGEST_PIECE ? len - got : DIGEST_PIECE;
		ssize_t n = pread(f->fd, buf, want, (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			goto out_put;
		}
		if (pfs_sha256_add(h, buf, (size_t)n) < 0) {
			ret = -EIO;
			goto out_put;
		}
		got += (uint32_t)n;
	}
	ret = pfs_sha256_end(h, digest);
	h = NULL;
	if (ret == 0)
		ret = export_getattr(f->fd, after);
out_put:
	pfs_sha256_end(h, NULL);
	free(buf);
	session_fid_put(x->s, f);
	return ret;
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
		char p[EXPORT_PROCPATH_LEN];
		int want, expect = -1;
		/* A second fd of the session's: from the budget, or none
		 * for now (the budget's reserve is for logins). */
		if (!session_fd_take(x->s))
			return -1;
		export_procpath(p, f->fd);
		want = open(p, O_WRONLY | O_DIRECT | O_CLOEXEC | O_NOCTTY |
				       (f->flags & (O_SYNC | O_DSYNC)));
		if (want < 0)
			want = -2;
		if (!atomic_compare_exchange_strong(&f->dfd, &expect, want) || want < 0) {
			if (want >= 0)
				close(want);
			lim_fd_give(&x->s->d->fds);
		}
		d = atomic_load(&f->dfd);
	}
	return d;
}

/* Appends to one inode take one of these from before they learn where
 * the file ends until their data is written (hashed by inode). */
#define APPEND_LOCKS 64
static pthread_mutex_t append_locks[APPEND_LOCKS] = { [0 ... APPEND_LOCKS - 1] =
							      PTHREAD_MUTEX_INITIALIZER };

/* Before an append of data[len] through fd: takes its inode's lock and
 * tells x->before_append where the file ends. Returns the lock to drop
 * once the data is written, or NULL (fstat failed: nothing told). */
static pthread_mutex_t *append_lock(struct xop *x, int fd, const uint8_t *data, uint32_t len)
{
	struct stat st;
	uint32_t crc = x->before_append ? pfs_crc32c(0, data, len) : 0;

	if (fstat(fd, &st) < 0)
		return NULL;
	pthread_mutex_t *lk =
		&append_locks[pfs_hash_u64((uint64_t)st.st_ino ^ pfs_hash_u64((uint64_t)st.st_dev)) %
			      APPEND_LOCKS];
	pthread_mutex_lock(lk);
	if (x->before_append && fstat(fd, &st) == 0)
		x->before_append(x->append_ctx, (uint64_t)st.st_size, len, crc);
	return lk;
}

/* A write at off through f, an O_APPEND fid (PFS_WR_AT: an append sent
 * again to where it landed): pwritev2's RWF_NOAPPEND, or, on a kernel
 * without it, a second descriptor without O_APPEND (opened with the
 * caller's credentials; an append-only inode refuses both). Returns the
 * bytes written, or -1 with errno. */
static ssize_t write_at(struct xop *x, struct fid *f, const uint8_t *data, size_t len, off_t off)
{
	struct iovec iov = { (void *)data, len };
	ssize_t n = pwritev2(f->fd, &iov, 1, off, RWF_NOAPPEND);

	if (n >= 0 || (errno != EOPNOTSUPP && errno != EINVAL))
		return n;
	if (!session_fd_take(x->s)) {
		errno = EMFILE;
		return -1;
	}
	char p[EXPORT_PROCPATH_LEN];
	export_procpath(p, f->fd);
	int fd = open(p, O_WRONLY | O_CLOEXEC | O_NOCTTY | (f->flags & (O_SYNC | O_DSYNC)));
	if (fd >= 0) {
		n = pwrite(fd, data, len, off);
		int e = errno;
		close(fd);
		errno = e;
	} else {
		n = -1;
	}
	int e = errno;
	lim_fd_give(&x->s->d->fds);
	errno = e;
	return n;
}

int export_write(struct xop *x, struct hent *obj, uint64_t fid, uint32_t flags, uint64_t off,
		 const uint8_t *data, uint32_t len, uint32_t *written, uint64_t *at,
		 struct pfs_attr *a)
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
	/* O_APPEND: the data lands where the file ends, whatever off the
	 * client had (its size may be stale). write() moves the fid's own
	 * position to the end of what it wrote, which tells where: writes of
	 * one fid come one at a time (the client orders its appends), and
	 * other fids have positions of their own. */
	/* PFS_WR_AT: an append sent again, written where it landed before
	 * (wire.h: PFS_CAP_APPEND_AT). */
	bool at_off = (flags & PFS_WR_AT) && (f->flags & O_APPEND);
	bool append = (f->flags & O_APPEND) && !at_off;
	x->appended = append;
	*at = off;
	if (append && x->landed) {
		/* Written before a restart, found there (replylog_settle). */
		*at = x->landed_at;
		done = len;
	}
	/* Held until the data is written or the write failed (out_put). */
	pthread_mutex_t *lk = append && !done ? append_lock(x, fd, data, len) : NULL;
	while (done < len) {
		ssize_t n = append ? write(fd, data + done, len - done)
			    : at_off ? write_at(x, f, data + done, len - done, (off_t)(off + done))
				     : pwrite(fd, data + done, len - done, (off_t)(off + done));
		if (n > 0 && append) {
			off_t end = lseek(fd, 0, SEEK_CUR);
			if (end >= n && (done == 0 || (uint64_t)(end - n) < *at))
				*at = (uint64_t)(end - n);
		}
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
	if (lk)
		pthread_mutex_unlock(lk);
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
		fd = f->fd;
		ret = datasync ? fdatasync(fd) : fsync(fd);
		ret = ret < 0 ? -errno : 0;
		session_fid_put(x->s, f);
		return ret;
	}
	/* No open file (or the daemon restarted): any fd of the inode will
	 * do, fsync flushes the inode. */
	fd = export_reopen(obj->fd, O_RDONLY);
	if (fd == -EACCES && !x->ro)
		fd = export_reopen(obj->fd, O_WRONLY);
	if (fd < 0)
		return fd;
	ret = datasync ? fdatasync(fd) : fsync(fd);
	ret = ret < 0 ? -errno : 0;
	close(fd);
	return ret;
}

int export_fallocate(struct xop *x, struct hent *obj, uint64_t fid, uint32_t mode,
		     uint64_t off, uint64_t len, struct pfs_attr *a)
{
	struct fid *f;
	int ret;

	if (off > (uint64_t)INT64_MAX || len > (uint64_t)INT64_MAX)
		return -EINVAL;
	ret = fid_for(x, obj, fid, FLAGS_WRITABLE, &f);
	if (ret < 0)
		return ret;
	ret = fallocate(f->fd, (int)mode, (off_t)off, (off_t)len) < 0 ? -errno : 0;
	if (ret == 0 && a)
		ret = export_getattr(f->fd, a);
	session_fid_put(x->s, f);
	return ret;
}

int export_copy_range(struct xop *x, struct hent *src, uint64_t sfid, uint32_t sflags,
		      uint64_t soff, struct hent *dst, uint64_t dfid, uint32_t dflags, uint64_t doff,
		      uint64_t len, uint32_t *copied, struct pfs_attr *a)
{
	struct fid *in, *out;
	size_t done = 0;
	int ret, fl;

	if (soff > (uint64_t)INT64_MAX || doff > (uint64_t)INT64_MAX)
		return -EINVAL;
	if (len > PFS_MAX_COPY)
		len = PFS_MAX_COPY;
	ret = fid_for(x, src, sfid, (int)(sflags & INT_MAX), &in);
	if (ret < 0)
		return ret;
	ret = fid_for(x, dst, dfid, (int)(dflags & INT_MAX), &out);
	if (ret < 0) {
		session_fid_put(x->s, in);
		return ret;
	}
	/* copy_file_range(2) refuses an appending dst too; said plainly. */
	fl = fcntl(out->fd, F_GETFL);
	if (fl < 0 || (fl & O_APPEND)) {
		ret = fl < 0 ? -errno : -EBADF;
		goto out_put;
	}
	/* Both files are on the export's filesystem (a handle never names
	 * one beyond a mount point): the kernel copies, clones or splices. */
	while (done < len) {
		loff_t i = (loff_t)(soff + done), o = (loff_t)(doff + done);
		ssize_t n = copy_file_range(in->fd, &i, out->fd, &o, len - done, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && done == 0) {
			ret = -errno;
			goto out_put;
		}
		if (n <= 0)
			break;
		done += (size_t)n;
	}
	/* Nothing of it stays to be sent again (wb_i.h): on the disk now. */
	if (done && fdatasync(out->fd) < 0) {
		ret = -errno;
		goto out_put;
	}
	*copied = (uint32_t)done;
	ret = export_getattr(out->fd, a);
out_put:
	session_fid_put(x->s, out);
	session_fid_put(x->s, in);
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
