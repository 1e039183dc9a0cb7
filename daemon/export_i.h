/* export_i.h: operations on the backing store (the exported directory).
 *
 * Worker threads only. Every function runs with the calling thread already
 * switched to the client's credentials (dispatch.c), so the kernel's own
 * permission checks apply; objects are named by O_PATH fds from the handle
 * cache and by validated single-component names, and every call is an
 * *at() call relative to such fds that never follows a symlink. Returns
 * 0 (or a byte count) or -errno; the errno travels to the client as is.
 */
#ifndef PODFSD_EXPORT_I_H
#define PODFSD_EXPORT_I_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "podfs/codec.h"
#include "handles_i.h"
#include "session_i.h"
#include "watch_i.h"

/* Context of one operation. */
struct xop {
	struct handles *hs;
	struct session *s;
	const struct pfs_creds *cr;
	bool ro;
	/* Big aligned writes use O_DIRECT (export_write) and count their
	 * bytes here; NULL: buffered writes only. */
	_Atomic uint64_t *direct;
	struct interest *it; /* interest table, or NULL: register nothing */
	int slot;            /* the session's interest slot */
	struct keyvec *kv;   /* keys handed out by this request */
	struct watch *watch; /* inotify fallback: directories handed out */
};

/* Registers the session's interest in fh. Call it before reading the
 * object's attributes or content (see the race analysis in server.c). */
void export_note(struct xop *x, const struct pfs_fh *fh);

void export_attr(const struct stat *st, struct pfs_attr *a);
int export_getattr(int fd, struct pfs_attr *a);
int export_lookup(struct xop *x, int dirfd, const char *name, struct pfs_entry *e);
/* LOOKUP + the whole content of a regular file of at most max_inline
 * bytes (<= PFS_INLINE_MAX) into buf (max_inline + 1 bytes), read with the
 * caller's credentials. *len and *flags (PFS_LD_DATA) are 0 when there is
 * no data: not a regular file, too big, not readable, or changed while it
 * was read. The entry is valid in every case. cold (or NULL) is set when
 * the data had to come from the disk. */
int export_lookup_data(struct xop *x, int dirfd, const char *name, uint32_t max_inline,
		       struct pfs_entry *e, uint8_t *buf, uint32_t *len, uint32_t *flags,
		       bool *cold);
int export_setattr(struct xop *x, struct hent *obj, const struct pfs_setattr_req *m,
		   struct pfs_attr *a);
int export_readlink(int fd, struct pfs_path *out);
int export_mknod(struct xop *x, int dirfd, const char *name, uint32_t mode, uint32_t rdev,
		 uint32_t umask, struct pfs_entry *e);
/* empty != NULL: *empty tells whether the new directory was still empty
 * after the session's interest in it was registered (PFS_CAP_NEW_DIR). */
int export_mkdir(struct xop *x, int dirfd, const char *name, uint32_t mode, uint32_t umask,
		 struct pfs_entry *e, bool *empty);
int export_symlink(struct xop *x, int dirfd, const char *name, const char *target,
		   struct pfs_entry *e);
/* *victim gets the handle of the removed object when it is known. */
int export_unlink(struct xop *x, int dirfd, const char *name, bool dir, struct pfs_fh *victim);
/* *moved gets the handle of the renamed object (len 0 if unknown). */
int export_rename(struct xop *x, int olddir, const char *oldname, int newdir,
		  const char *newname, uint32_t flags, struct pfs_fh *victim,
		  struct pfs_fh *moved);
int export_link(struct xop *x, int fd, int newdir, const char *newname, struct pfs_entry *e);
int export_open(struct xop *x, struct hent *obj, uint64_t fid, uint32_t flags, struct pfs_attr *a);
int export_create(struct xop *x, int dirfd, const char *name, uint64_t fid, uint32_t flags,
		  uint32_t mode, uint32_t umask, struct pfs_entry *e);
/* Reads up to size bytes into buf; returns the count. */
ssize_t export_read(struct xop *x, struct hent *obj, uint64_t fid, uint32_t flags,
		    uint64_t off, uint32_t size, uint8_t *buf);
/* As export_read, but moves the file's pages into the pipe pipe_w
 * (non-blocking; it must have room for size bytes) without copying them.
 * Returns the count, or -errno; -EAGAIN if the pipe filled up, -EINVAL if
 * the file cannot be spliced. Worker thread: may wait for the disk. */
ssize_t export_read_splice(struct xop *x, struct hent *obj, uint64_t fid, uint32_t flags,
			   uint64_t off, uint32_t size, int pipe_w);
int export_write(struct xop *x, struct hent *obj, uint64_t fid, uint32_t flags, uint64_t off,
		 const uint8_t *data, uint32_t len, uint32_t *written, struct pfs_attr *a);
int export_release(struct xop *x, uint64_t fid);
int export_fsync(struct xop *x, struct hent *obj, uint64_t fid, bool datasync);
int export_opendir(struct xop *x, struct hent *obj, uint64_t fid, struct pfs_attr *a);
/* Appends "u8 eof" and entries to w (see codec.h READDIR). */
/* LISTDIR (wire.h) of directory obj (its O_PATH fd), appended to w
 * (at most max_bytes): u32 flags, then the items. Returns 0 or -errno. */
int export_listdir(struct xop *x, struct hent *obj, uint32_t max_inline, uint32_t max_bytes,
		   struct pfs_wr *w);
int export_readdir(struct xop *x, struct hent *obj, uint64_t fid, uint64_t off,
		   uint32_t max_bytes, bool plus, struct pfs_wr *w);
int export_statfs(struct xop *x, struct pfs_statfs_rep *r);
int export_setxattr(struct xop *x, struct hent *obj, const char *name, const uint8_t *value,
		    uint32_t size, uint32_t flags);
/* Returns the value's length; copies it to buf if size != 0 (-ERANGE if
 * it does not fit). */
ssize_t export_getxattr(struct xop *x, struct hent *obj, const char *name, uint8_t *buf,
			uint32_t size);
ssize_t export_listxattr(struct xop *x, struct hent *obj, uint8_t *buf, uint32_t size);
int export_removexattr(struct xop *x, struct hent *obj, const char *name);
int export_fallocate(struct xop *x, struct hent *obj, uint64_t fid, uint32_t mode,
		     uint64_t off, uint64_t len);
int export_lseek(struct xop *x, struct hent *obj, uint64_t fid, uint64_t off, uint32_t whence,
		 uint64_t *result);
int export_getlk(struct xop *x, struct hent *obj, const struct pfs_lock_req *m,
		 struct pfs_getlk_rep *r);
/* Non-blocking: a conflict is -EAGAIN. m->flags: PFS_LKF_FLOCK only. */
int export_setlk(struct xop *x, struct hent *obj, const struct pfs_lock_req *m);
/* Drops owner's POSIX locks on obj: 1 if it had any, else 0. */
int export_unlock_owner(struct xop *x, struct hent *obj, uint64_t owner);

#endif /* PODFSD_EXPORT_I_H */
