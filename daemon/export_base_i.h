/* export_base_i.h: what the export*.c files share, below the operations
 * of export_i.h: naming and reopening the object of an O_PATH fd, making
 * entries, opening directory streams.
 *
 * For export*.c only (dispatch.c calls export_i.h). Worker threads, with
 * the caller's credentials (export_i.h); every function is safe to call
 * from several workers at once. Returns are 0 (or an fd) or -errno.
 */
#ifndef PODFSD_EXPORT_BASE_I_H
#define PODFSD_EXPORT_BASE_I_H

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "export_i.h"

#define EXPORT_PROCPATH_LEN 32

/* Writes "/proc/self/fd/N" for fd into buf: the magic link that reopens
 * or names the object of an O_PATH fd. Only for objects that are not
 * symlinks: the magic link would be followed. */
void export_procpath(char buf[EXPORT_PROCPATH_LEN], int fd);

/* The open flags a client may ask for, from its flags; the rest
 * (O_CREAT, O_EXCL, O_PATH, O_TMPFILE, O_DIRECT, O_NOATIME, O_ASYNC...)
 * are dropped, and O_CLOEXEC | O_NOCTTY are added. */
int export_open_flags(uint32_t flags);

/* Opens the object of O_PATH fd pathfd for I/O with flags (O_CLOEXEC and
 * O_NOCTTY added), as the calling thread's credentials allow. Regular
 * files and directories only. Returns the new fd (the caller closes it),
 * -EINVAL (O_ACCMODE both ways, or another file type), -ELOOP (a
 * symlink), -EISDIR (a directory opened for writing or truncation), or
 * the -errno of fstat or open. */
int export_reopen(int pathfd, int flags);

/* The directory of O_PATH fd pathfd opened for reading with the caller's
 * credentials: an fd, or -errno (export_reopen). */
int export_dir_reopen(int pathfd);
/* A directory stream over the directory of O_PATH fd pathfd, opened for
 * reading with the caller's credentials. Returns 0 with *out set (the
 * caller closedir()s it) or -errno (export_reopen, fdopendir). */
int export_dir_open(int pathfd, DIR **out);

/* True for "." and "..". */
bool export_dot_or_dotdot(const char *n);

/* Opens name in dirfd (O_PATH, never followed), makes its handle and
 * registers the session's interest in it, then stats it into *st and
 * e->attr (e->fh: its handle): the interest comes first, so a change
 * after the stat is pushed. A directory gets an inotify watch where that
 * is the watcher (watch_dir). Returns the O_PATH fd, which the caller
 * offers to the handle cache (handles_adopt) or closes; or -errno, and
 * -EACCES for a mount point inside the export (its objects are not ours
 * to hand out). */
int export_entry_open(struct xop *x, int dirfd, const char *name, struct pfs_entry *e,
		      struct stat *st);

/* export_entry_open, then the O_PATH fd goes to the handle cache: fills e.
 * Returns 0 or -errno as export_entry_open. */
int export_entry_at(struct xop *x, int dirfd, const char *name, struct pfs_entry *e);

#endif /* PODFSD_EXPORT_BASE_I_H */
