/* sockfile.c: a bound socket's file, removed only if still ours
 * (sockfile.h). */
#include "podfs/sockfile.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <sys/file.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

int pfs_sockfile_bind(struct pfs_sockfile *sf, const char *path, mode_t mask, int flags)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, rc;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | flags, 0)) < 0)
		return -errno;
	mode_t old = umask(mask);
	rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
	umask(old);
	if (rc == 0)
		rc = pfs_sockfile_mark(sf, path);
	if (rc < 0) {
		close(fd);
		return rc;
	}
	return fd;
}

int pfs_sockfile_mark(struct pfs_sockfile *sf, const char *path)
{
	struct timespec t[2] = { { .tv_nsec = UTIME_OMIT } };
	uint32_t r = 0;
	struct stat st;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
		r = (uint32_t)getpid() * 2654435761u ^ (uint32_t)(uintptr_t)sf;
	clock_gettime(CLOCK_REALTIME, &t[1]);
	t[1].tv_nsec = (long)(r % 1000000000u);
	if (utimensat(AT_FDCWD, path, t, AT_SYMLINK_NOFOLLOW) < 0 || lstat(path, &st) < 0)
		return -errno;
	sf->dev = st.st_dev;
	sf->ino = st.st_ino;
	sf->mark = st.st_mtim;
	return 0;
}

bool pfs_sockfile_is(const struct pfs_sockfile *sf, const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 && st.st_dev == sf->dev &&
	       st.st_ino == sf->ino && st.st_mtim.tv_sec == sf->mark.tv_sec &&
	       st.st_mtim.tv_nsec == sf->mark.tv_nsec;
}

/* pfs_sockfile_lock's tries, 1 ms apart. */
#define LOCK_TRIES 1000

int pfs_sockfile_lock(const char *path)
{
	char dir[PATH_MAX];
	int fd;

	if (strlen(path) >= sizeof(dir))
		return -1;
	memcpy(dir, path, strlen(path) + 1);
	fd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	/* Held for a few system calls; a holder that was stopped right
	 * then (SIGSTOP) must not stop every mount after it: the wait is
	 * bounded, and the caller then goes on without the lock. */
	for (int tries = 0; flock(fd, LOCK_EX | LOCK_NB) < 0; tries++) {
		if ((errno != EWOULDBLOCK && errno != EINTR) || tries >= LOCK_TRIES) {
			close(fd);
			return -1;
		}
		struct timespec ms = { .tv_nsec = 1000000 };
		nanosleep(&ms, NULL);
	}
	return fd;
}

void pfs_sockfile_unlock(int lock)
{
	if (lock >= 0)
		close(lock); /* and with it the lock */
}

int pfs_sockfile_replace(struct pfs_sockfile *sf, const char *path, mode_t mask, int flags)
{
	int lock = pfs_sockfile_lock(path);

	unlink(path);
	int fd = pfs_sockfile_bind(sf, path, mask, flags);
	pfs_sockfile_unlock(lock);
	return fd;
}

void pfs_sockfile_remove(const struct pfs_sockfile *sf, const char *path)
{
	int lock = pfs_sockfile_lock(path);

	if (pfs_sockfile_is(sf, path))
		unlink(path);
	pfs_sockfile_unlock(lock);
}
