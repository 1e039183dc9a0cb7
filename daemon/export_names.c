/* export_names.c: operations on names in the backing store: lookups (with
 * a small file's content), making and removing entries, renaming,
 * linking, and creating and opening a file in one step. Worker threads
 * only (see export_i.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <sys/uio.h>
#include <unistd.h>

#include "export_base_i.h"

/* A name made and the lookup that makes its entry (mkdir, symlink, mknod,
 * link: no call makes one and returns its fd) are one step for every
 * podfs client, as are a removal or a rename and the victim looked up
 * before it: each holds its directory's stripe of these locks (a rename
 * both, in stripe order) across its calls, which never wait for anything
 * but the file system. Without them, another client's rename over a
 * symlink just made between its symlinkat and its lookup gave the maker
 * the entry of a regular file, and its kernel an EIO (three hosts
 * changing four names at random: 1 run in 16). A change made beside
 * podfs can still come between; a maker then finds another type there
 * (made_as) and answers EEXIST, as if that change had come first. */
#define NAME_STRIPES 64

static pthread_mutex_t name_stripe[NAME_STRIPES] = {
	[0 ... NAME_STRIPES - 1] = PTHREAD_MUTEX_INITIALIZER
};

static unsigned stripe_of(int dirfd)
{
	struct stat st;

	if (fstat(dirfd, &st) < 0)
		return 0;
	return (unsigned)(((uint64_t)st.st_ino ^ ((uint64_t)st.st_dev << 32)) *
			  0x9e3779b97f4a7c15ull >> 58);
}

static unsigned names_lock(int dirfd)
{
	unsigned i = stripe_of(dirfd);

	pthread_mutex_lock(&name_stripe[i]);
	return i;
}

static void names_unlock(unsigned i)
{
	pthread_mutex_unlock(&name_stripe[i]);
}

/* Both directories' stripes, the lower first: *a and *b to unlock. */
static void names_lock2(int dir1, int dir2, unsigned *a, unsigned *b)
{
	unsigned i = stripe_of(dir1), j = stripe_of(dir2);

	*a = i < j ? i : j;
	*b = i < j ? j : i;
	pthread_mutex_lock(&name_stripe[*a]);
	if (*b != *a)
		pthread_mutex_lock(&name_stripe[*b]);
}

static void names_unlock2(unsigned a, unsigned b)
{
	if (b != a)
		pthread_mutex_unlock(&name_stripe[b]);
	pthread_mutex_unlock(&name_stripe[a]);
}

/* The entry of the name just made, as type: -EEXIST if another type is
 * there (a change beside podfs replaced it meanwhile). */
static int made_as(struct xop *x, int dirfd, const char *name, mode_t type, struct pfs_entry *e)
{
	int ret = export_entry_at(x, dirfd, name, e);

	if (ret == 0 && (e->attr.mode & S_IFMT) != type)
		return -EEXIST;
	return ret;
}

int export_lookup(struct xop *x, int dirfd, const char *name, struct pfs_entry *e)
{
	return export_entry_at(x, dirfd, name, e);
}

static bool same_version(const struct stat *a, const struct stat *b)
{
	return a->st_size == b->st_size && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
	       a->st_mtim.tv_nsec == b->st_mtim.tv_nsec && a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
	       a->st_ctim.tv_nsec == b->st_ctim.tv_nsec && a->st_ino == b->st_ino;
}

/* A squashed caller asks for set-id bits in a new object's mode: refused
 * (only the bits asked for: a set-group-id parent's is still inherited). */
static bool squash_refuses(const struct xop *x, uint32_t mode)
{
	return x->squashed && (mode & (S_ISUID | S_ISGID));
}

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
	pfd = export_entry_open(x, dirfd, name, e, &st);
	if (pfd < 0)
		return pfd;
	if (!S_ISREG(st.st_mode))
		goto out_adopt;
	/* No content wanted (a listing for a walk, a file too big to ride
	 * along): the caller's leave to read it is all that is asked, and
	 * an access check with the caller's fs credentials (AT_EACCESS)
	 * makes the kernel's permission check of an open for reading
	 * without the open, its /proc path and its close. */
	if ((uint64_t)st.st_size > max_inline) {
		if (faccessat(pfd, "", R_OK, AT_EMPTY_PATH | AT_EACCESS) == 0) {
			*flags = PFS_LD_READABLE;
			goto out_adopt;
		}
		if (errno == EACCES || errno == EPERM || errno == EROFS)
			goto out_adopt;
		/* A kernel without faccessat2: open it, as below. */
	}
	/* O_NOATIME only works for the owner (or CAP_FOWNER). */
	fd = export_reopen(pfd, O_RDONLY | O_NOATIME);
	if (fd == -EPERM)
		fd = export_reopen(pfd, O_RDONLY);
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

/* The mode a new object of the caller's gets in the directory open as
 * dirfd: the caller's umask applies, unless the directory has a default
 * ACL, which takes its place (POSIX.1e, as the local file system does
 * when it makes the object: the inherited ACL then limits the mode). */
static mode_t perm(int dirfd, uint32_t mode, uint32_t umask)
{
	char p[EXPORT_PROCPATH_LEN];

	if (!(mode & umask & 0777))
		return mode & 07777; /* the umask takes nothing: no need to look */
	export_procpath(p, dirfd);
	if (getxattr(p, "system.posix_acl_default", NULL, 0) > 0)
		return mode & 07777;
	return mode & 07777 & ~(umask & 0777);
}

int export_mknod(struct xop *x, int dirfd, const char *name, uint32_t mode, uint32_t rdev,
		 uint32_t umask, struct pfs_entry *e)
{
	mode_t type = mode & S_IFMT;

	if (squash_refuses(x, mode) || (x->squashed && (type == S_IFCHR || type == S_IFBLK)))
		return -EPERM;
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
	unsigned k = names_lock(dirfd);
	int ret = mknodat(dirfd, name, type | perm(dirfd, mode, umask), (dev_t)rdev) < 0
		? -errno : made_as(x, dirfd, name, type, e);
	names_unlock(k);
	return ret;
}

/* True if the directory open as pathfd (O_PATH) has no entries; absent
 * != NULL: *absent, its PFS_MK_NO_* bits (0 if it cannot be opened). */
static bool dir_is_empty(int pathfd, uint32_t *absent)
{
	DIR *d = NULL;
	struct dirent *de;
	bool empty = true;

	if (absent)
		*absent = 0;
	if (export_dir_open(pathfd, &d) < 0)
		return false;
	if (absent)
		*absent = export_xattrs_absent(dirfd(d));
	errno = 0;
	while ((de = readdir(d)))
		if (!export_dot_or_dotdot(de->d_name)) {
			empty = false;
			break;
		}
	if (errno)
		empty = false;
	closedir(d);
	return empty;
}

int export_mkdir(struct xop *x, int dirfd, const char *name, uint32_t mode, uint32_t umask,
		 struct pfs_entry *e, bool *empty, uint32_t *absent)
{
	struct stat st;
	int fd;

	if (squash_refuses(x, mode))
		return -EPERM;
	/* The interest in the new directory is registered before it is
	 * found empty and its xattrs are read: an entry made in it since
	 * (by another client, or beside podfs), or an xattr set, is pushed
	 * to this session. */
	unsigned k = names_lock(dirfd);
	fd = mkdirat(dirfd, name, perm(dirfd, mode, umask)) < 0
		? -errno : export_entry_open(x, dirfd, name, e, &st);
	names_unlock(k);
	if (fd < 0)
		return fd;
	if (!S_ISDIR(st.st_mode)) {
		close(fd);
		return -EEXIST;
	}
	if (empty || absent) {
		bool is_empty = dir_is_empty(fd, absent);
		if (empty)
			*empty = is_empty;
	}
	handles_adopt(x->hs, &e->fh, fd);
	return 0;
}

int export_symlink(struct xop *x, int dirfd, const char *name, const char *target,
		   struct pfs_entry *e)
{
	unsigned k = names_lock(dirfd);
	int ret = symlinkat(target, dirfd, name) < 0 ? -errno
						      : made_as(x, dirfd, name, S_IFLNK, e);
	names_unlock(k);
	return ret;
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

/* The victim of an unlink, rmdir or a rename over it, open as pfd
 * (O_PATH, taken before; -1: none), lost its name. If that was its last
 * (a directory removed) and another client caches it, that client may
 * have it open without our knowing: keep it openable by handle
 * (handles_orphan). Returns true if kept; closes pfd either way. */
static bool keep_orphan(struct xop *x, const struct pfs_fh *victim, int pfd)
{
	struct stat st;

	if (pfd < 0)
		return false;
	if (fstat(pfd, &st) == 0 && (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) &&
	    st.st_nlink == 0 && others_interested(x, victim))
		return handles_orphan(x->hs, victim, pfd, PFSD_ORPHAN_MS);
	close(pfd);
	return false;
}

/* The handle of dirfd/name in *fh, and an O_PATH fd of it in *pfd (-1 if
 * it could not be opened; then *absent says whether there is no such
 * name, if absent is not NULL). Returns true if the handle is known. */
static bool victim_at(struct xop *x, int dirfd, const char *name, struct pfs_fh *fh, int *pfd,
		      bool *absent)
{
	*pfd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (*pfd < 0 && absent && errno == ENOENT) {
		*absent = true;
		return false;
	}
	if (*pfd < 0)
		return handles_encode_at(x->hs, dirfd, name, fh) == 0;
	if (handles_encode(x->hs, *pfd, fh) == 0)
		return true;
	close(*pfd);
	*pfd = -1;
	return false;
}

/* A call that failed: returns its -errno, after closing pfd (-1: none). */
static int failed_closing(int pfd)
{
	int ret = -errno;

	if (pfd >= 0)
		close(pfd);
	return ret;
}

int export_unlink(struct xop *x, int dirfd, const char *name, bool dir, struct pfs_fh *victim)
{
	int pfd = -1;
	bool known;

	/* Learn the victim's handle first, so that its cached fd does not keep
	 * a deleted file's blocks allocated. */
	unsigned k = names_lock(dirfd);
	known = victim_at(x, dirfd, name, victim, &pfd, NULL);
	int ret = unlinkat(dirfd, name, dir ? AT_REMOVEDIR : 0) < 0 ? failed_closing(pfd) : 0;
	names_unlock(k);
	if (ret < 0)
		return ret;
	if (!known)
		victim->len = 0;
	else if (!keep_orphan(x, victim, pfd))
		handles_forget(x->hs, victim);
	return 0;
}

int export_rename(struct xop *x, int olddir, const char *oldname, int newdir,
		  const char *newname, uint32_t flags, struct pfs_fh *victim,
		  struct pfs_fh *moved, bool *none)
{
	bool known = false;
	int pfd = -1;

	*none = (flags & RENAME_NOREPLACE) != 0;
	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE))
		return -EINVAL;
	/* Handles before the rename: the moved object's ctime changes, and
	 * with RENAME_EXCHANGE the "victim" is the other moved object. */
	unsigned ka, kb;
	names_lock2(olddir, newdir, &ka, &kb);
	if (flags & RENAME_EXCHANGE)
		known = handles_encode_at(x->hs, newdir, newname, victim) == 0;
	else if (!(flags & RENAME_NOREPLACE))
		known = victim_at(x, newdir, newname, victim, &pfd, none);
	if (handles_encode_at(x->hs, olddir, oldname, moved) < 0)
		moved->len = 0;
	int ret = renameat2(olddir, oldname, newdir, newname, flags) < 0 ? failed_closing(pfd) : 0;
	names_unlock2(ka, kb);
	if (ret < 0)
		return ret;
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
	char p[EXPORT_PROCPATH_LEN];
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode))
		return -EPERM;
	export_procpath(p, fd);
	/* The magic link resolves to the object itself, symlinks included
	 * (it is not followed further), and AT_EMPTY_PATH would need
	 * CAP_DAC_READ_SEARCH, which the client's fsuid does not have. */
	unsigned k = names_lock(newdir);
	int ret = linkat(AT_FDCWD, p, newdir, newname, AT_SYMLINK_FOLLOW) < 0
		? -errno : export_entry_at(x, newdir, newname, e);
	names_unlock(k);
	/* Not the file linked: a change beside podfs replaced the name. */
	if (ret == 0 && e->attr.ino != (uint64_t)st.st_ino)
		ret = -EEXIST;
	return ret;
}

int export_slot_make(struct xop *x, int dirfd, int *out, struct pfs_entry *e)
{
	char p[EXPORT_PROCPATH_LEN];
	struct stat st;
	int fd, ret;

	/* The file's mode comes later (export_slot_name); a default ACL
	 * would have set its access ACL from the mode given now. */
	export_procpath(p, dirfd);
	if (getxattr(p, "system.posix_acl_default", NULL, 0) >= 0)
		return -EAGAIN;
	fd = openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno == EISDIR || errno == EOPNOTSUPP ? -EAGAIN : -errno;
	if ((ret = handles_encode(x->hs, fd, &e->fh)) < 0 || (ret = export_fstat(fd, &st)) < 0) {
		close(fd);
		return ret == -EXDEV ? -EACCES : ret;
	}
	export_note(x, &e->fh);
	export_attr(&st, &e->attr);
	*out = fd;
	return 0;
}

/* The open of a create answered by the client is the slot's, opened as
 * the client opened it, before its mode is set: a mode without write
 * permission does not stop the writes that follow. One already open (a
 * WRITE came first and opened the slot by handle) stays. Errors are left
 * to the first request that carries the fid. */
static void slot_open_fid(struct xop *x, int fd, uint64_t fid, uint32_t flags)
{
	struct fid *f;

	if (!fid || !x->s)
		return;
	if ((f = session_fid_get(x->s, fid))) {
		session_fid_put(x->s, f);
		return;
	}
	if (session_fid_reserve(x->s) < 0)
		return;
	int fl = export_open_flags(flags & ~(uint32_t)(O_CREAT | O_EXCL | O_TRUNC));
	int ofd = export_reopen(fd, fl);
	if (ofd < 0) {
		session_fid_unreserve(x->s);
		return;
	}
	session_fid_put(x->s, session_fid_install(x->s, fid, ofd, false, fl, false));
}

int export_slot_name(struct xop *x, int fd, int dirfd, const char *name, uint32_t mode,
		     uint64_t fid, uint32_t flags, const struct pfs_setattr_req *sa,
		     struct pfs_entry *e)
{
	if (mode & ~0777u)
		return -EINVAL;
	slot_open_fid(x, fd, fid, flags);
	/* As a create would: its mode, and every time now; or the access and
	 * modification times the client answered, when it sends them. */
	const uint32_t times = PFS_SET_ATIME | PFS_SET_MTIME;
	struct timespec ts[2];
	bool own = sa && (sa->valid & times) == times;
	if (own) {
		ts[0] = (struct timespec){ .tv_sec = sa->atime_s, .tv_nsec = sa->atime_ns };
		ts[1] = (struct timespec){ .tv_sec = sa->mtime_s, .tv_nsec = sa->mtime_ns };
	}
	if (fchmod(fd, (mode_t)mode) < 0 || futimens(fd, own ? ts : NULL) < 0)
		return -errno;
	if (sa && (sa->valid & ~times)) {
		int ret = export_setattr_fd(x, fd, sa, &e->attr);
		if (ret < 0)
			return ret;
	}
	return export_link(x, fd, dirfd, name, e);
}

int export_create(struct xop *x, int dirfd, const char *name, uint64_t fid, uint32_t flags,
		  uint32_t mode, uint32_t umask, struct pfs_entry *e, bool *fresh, uint32_t *absent)
{
	int fl = export_open_flags(flags), fd, ret;
	struct stat st;
	struct fid *f;
	bool made = true;

	if (flags & O_DIRECTORY)
		return -EINVAL;
	if (squash_refuses(x, mode))
		return -EPERM;
	/* Past the session's open files nothing is created. */
	ret = session_fid_reserve(x->s);
	if (ret < 0)
		return ret;
	fd = openat(dirfd, name, fl | O_CREAT | O_EXCL | O_NOFOLLOW, perm(dirfd, mode, umask));
	if (fd < 0 && errno == EEXIST && !(flags & O_EXCL)) {
		/* It exists: open it like OPEN would, and never a FIFO or
		 * device, whose open could block or have side effects. */
		made = false;
		int pfd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (pfd < 0) {
			ret = -errno;
			goto out_unreserve;
		}
		fd = export_reopen(pfd, fl);
		close(pfd);
		if (fd < 0) {
			ret = fd;
			goto out_unreserve;
		}
	} else if (fd < 0) {
		ret = -errno;
		goto out_unreserve;
	}
	ret = handles_encode(x->hs, fd, &e->fh);
	if (ret < 0)
		goto out_close;
	export_note(x, &e->fh);
	if ((ret = export_fstat(fd, &st)) < 0)
		goto out_close;
	export_attr(&st, &e->attr);
	/* No extended attribute: no ACL inherited, no capability, no label. */
	*fresh = made && S_ISREG(st.st_mode) && flistxattr(fd, NULL, 0) == 0;
	if (absent)
		*absent = made ? export_xattrs_absent(fd) : 0;
	f = session_fid_install(x->s, fid, fd, false, fl & ~O_TRUNC, true);
	session_fid_put(x->s, f);
	return 0;

out_close:
	close(fd);
out_unreserve:
	session_fid_unreserve(x->s);
	return ret;
}
