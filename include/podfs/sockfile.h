/* sockfile.h: the file of a Unix socket this process bound (the status
 * sockets: the mount's for podfs status, podfsd's control socket),
 * removed at exit only if it is still that file.
 *
 * Another process may have replaced it meanwhile: a newer podfs given the
 * same device number by the kernel, a podfsd told the same path. Device
 * and inode number alone do not tell the files apart, as a filesystem
 * gives a freed inode's number to the next file at once (ext4 does, here,
 * for a socket bound at the same path a moment later). So the file is
 * marked when made: its mtime is set with random nanoseconds, which no
 * file the kernel stamps with its coarse clock is likely to share, and
 * device, inode and mark must all match.
 *
 * Any thread; no state beyond the struct.
 */
#ifndef PODFS_SOCKFILE_H
#define PODFS_SOCKFILE_H

#include <stdbool.h>
#include <sys/stat.h>

struct pfs_sockfile {
	dev_t dev;
	ino_t ino;
	struct timespec mark; /* the mtime set */
};

/* A Unix stream socket (SOCK_CLOEXEC | flags) bound at path under umask
 * mask (so it is never more open than that, not even for a moment; the
 * process's umask changes while it binds), and marked as sf's. The fd,
 * or -errno. */
int pfs_sockfile_bind(struct pfs_sockfile *sf, const char *path, mode_t mask, int flags);
/* Marks path, just bound by this process, as sf's. 0 or -errno. */
int pfs_sockfile_mark(struct pfs_sockfile *sf, const char *path);
/* Whether path is still the file sf marked. */
bool pfs_sockfile_is(const struct pfs_sockfile *sf, const char *path);
/* Removes path if it is still sf's file; leaves it otherwise. */
void pfs_sockfile_remove(const struct pfs_sockfile *sf, const char *path);

/* The check and the unlink of pfs_sockfile_remove, and another
 * process's removal of a file left at the path and its bind there, must
 * not interleave: the first would find its own file, the second replace
 * it, and the first then unlink the second's (seen: a podfs exiting just
 * as the next mount, given its device number, made its status socket).
 * So both hold an exclusive flock(2) of the path's directory across:
 * pfs_sockfile_lock returns the lock (an fd), or -1 where the directory
 * cannot be opened or locked within a second (a holder stopped while it
 * held it; the caller goes on without), which pfs_sockfile_unlock
 * releases. pfs_sockfile_remove takes it itself. */
int pfs_sockfile_lock(const char *path);
void pfs_sockfile_unlock(int lock);
/* pfs_sockfile_bind at path after removing whatever is there (a socket
 * whose owner is gone), under pfs_sockfile_lock. */
int pfs_sockfile_replace(struct pfs_sockfile *sf, const char *path, mode_t mask, int flags);

#endif
