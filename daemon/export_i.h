/* export_i.h: the operations on the backing store (the exported
 * directory), for the handlers of dispatch_*.c.
 *
 * Worker threads only. Every function runs with the calling thread
 * already switched to the client's credentials (dispatch.c, creds_i.h),
 * unless its handler's row says otherwise, so the kernel's own
 * permission checks apply. Objects are named by O_PATH fds from the
 * handle cache (struct hent, handles_i.h) and by single-component names
 * the codec validated; every call is an *at() call relative to such fds
 * that never follows a symlink, so nothing escapes the export. Returns
 * are 0 (or a count) or -errno, which travels to the client as is.
 * Several workers may run operations of one session at once: its fid and
 * lock tables have their own mutexes (session_i.h).
 *
 * Where the files are: names in export_names.c, file I/O in
 * export_files.c, directory listings in export_dirs.c, xattrs in
 * export_xattrs.c, locks in export_locks.c; the rest, and what they share
 * (export_base_i.h), in export.c.
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
#include "lscache_i.h"
#include "watch_i.h"

/* -XOP_WOULD_BLOCK: with xop.nowait, the call would have had to wait
 * (for the disk, an open): nothing was done. */
#define XOP_WOULD_BLOCK 100001

/* How the export's mount moves access times on a read (export_atime_mode):
 * never (noatime), when stale (relatime: older than the mtime or the
 * ctime, or a day old), or always. Moving one writes the inode, which may
 * wait for the file system's journal even when the read itself does not
 * wait (RWF_NOWAIT promises nothing about it). */
enum { XOP_ATIME_NEVER, XOP_ATIME_STALE, XOP_ATIME_ALWAYS };
/* The export's mode, from its mount's flags (fd: the export's). */
int export_atime_mode(int fd);

/* Context of one operation. */
struct xop {
	struct handles *hs;
	struct session *s;
	const struct pfs_creds *cr; /* the caller's, or NULL: running as root */
	/* cr is a squashed identity (root squash applied to uid 0, or all
	 * squash): no devices, set-id bits, security.* or trusted.* xattrs. */
	bool squashed;
	bool ro;
	/* Big aligned writes use O_DIRECT (export_write) and count their
	 * bytes here; NULL: buffered writes only. */
	_Atomic uint64_t *direct;
	struct interest *it; /* interest table, or NULL: register nothing */
	int slot;            /* the session's interest slot */
	struct keyvec *kv;   /* keys handed out by this request */
	struct watch *watch; /* inotify fallback: directories handed out */
	/* Listings kept to be served again (lscache_i.h), or NULL: every
	 * listing is built. Set only while every change to the export is
	 * pushed (fanotify watches it). */
	struct lscache *lc;
	/* The PFS_LD_NO_* bits the export's filesystem can give, asked once
	 * per request (every directory a request lists is on the export's
	 * mount, and the caller is the same): valid if xknown_set. */
	uint32_t xknown;
	bool xknown_set;
	/* Set by export_write: the write went through an O_APPEND fid, so
	 * the data landed where the file ended, and a second run would add
	 * it again (server.c keeps such a WRITE's reply for a resend). */
	bool appended;
	/* On the loop thread (req.nowait): a read only of what the page
	 * cache holds, through an open fid, that moves no access time
	 * (atime: XOP_ATIME_*); else -XOP_WOULD_BLOCK. */
	bool nowait;
	unsigned char atime;
	/* An append about to be written through an O_APPEND fid is told to
	 * before_append(append_ctx, where the file ends, its length, the
	 * CRC32C of its bytes) before its data, under a lock that keeps
	 * podfsd's other appends to the inode out until its data is written
	 * (replylog_i.h). NULL: not told. */
	void (*before_append)(void *ctx, uint64_t at, uint32_t len, uint32_t crc);
	void *append_ctx;
	/* landed: this append landed at landed_at before a restart
	 * (replylog_settle): export_write answers it without writing it
	 * again. */
	bool landed;
	uint64_t landed_at;
};

/* --- export.c --- */

/* Registers the session's interest in fh (and notes its key in x->kv).
 * Call it before reading the object's attributes or content (see the
 * race analysis in push.c). A no-op without a table or for an empty
 * handle. */
void export_note(struct xop *x, const struct pfs_fh *fh);
/* The wire attributes of a stat. */
void export_attr(const struct stat *st, struct pfs_attr *a);
/* fstat(2) of fd for attributes a client may cache: a regular file with
 * data and no blocks is read again (see export.c). Returns 0 or -errno. */
int export_fstat(int fd, struct stat *st);
/* The wire attributes of the object of fd (fstat: needs no permission).
 * Returns 0 or -errno. */
int export_getattr(int fd, struct pfs_attr *a);
/* The target of the symlink open as O_PATH fd fd into *out. Returns 0,
 * -ENAMETOOLONG (over PFS_PATH_MAX), -EIO (empty), or the -errno of
 * readlinkat (-EINVAL: not a symlink). */
int export_readlink(int fd, struct pfs_path *out);
/* The export's filesystem's figures. Returns 0 or -errno. */
int export_statfs(struct xop *x, struct pfs_statfs_rep *r);

/* --- export_names.c --- */

/* Looks name up in dirfd (never following it) into *e: its handle,
 * registered as the session's interest, and its attributes. Returns 0 or
 * -errno (-ENOENT: no such entry; -EACCES: a mount point). */
int export_lookup(struct xop *x, int dirfd, const char *name, struct pfs_entry *e);
/* LOOKUP + the whole content of a regular file of at most max_inline
 * bytes (<= PFS_INLINE_MAX) into buf (max_inline + 1 bytes), read with the
 * caller's credentials. *flags gets PFS_LD_READABLE if the caller may
 * read it, and PFS_LD_DATA with *len bytes in buf if the data is whole;
 * no data (*len 0) when it is not a regular file, too big, not readable,
 * or changed while it was read. cold (or NULL) is set when the data had
 * to come from the disk. Returns 0 (e valid) or -errno as export_lookup. */
int export_lookup_data(struct xop *x, int dirfd, const char *name, uint32_t max_inline,
		       struct pfs_entry *e, uint8_t *buf, uint32_t *len, uint32_t *flags,
		       bool *cold);
/* Makes name in dirfd: a regular file (type 0 too), FIFO or socket, or,
 * for root only, a device (rdev), with mode's permission bits less umask.
 * Fills *e as export_lookup. Returns 0, -EINVAL (another type), -EPERM (a
 * device by non-root), or the -errno of mknodat or the lookup. */
int export_mknod(struct xop *x, int dirfd, const char *name, uint32_t mode, uint32_t rdev,
		 uint32_t umask, struct pfs_entry *e);
/* Makes directory name in dirfd. empty != NULL: *empty tells whether it
 * was still empty after the session's interest in it was registered
 * (PFS_CAP_NEW_DIR); absent != NULL: *absent, its PFS_MK_NO_* bits then
 * (export_xattrs_absent). Returns 0 (e filled) or -errno. */
int export_mkdir(struct xop *x, int dirfd, const char *name, uint32_t mode, uint32_t umask,
		 struct pfs_entry *e, bool *empty, uint32_t *absent);
/* The extended attributes the kernel asks for at every entry (`ls -l`:
 * the SELinux label, the ACLs; write(2): the capabilities; a new
 * object's first create or write: its ACLs and capabilities), with the
 * bit that says one is absent in a listing's item (ld: PFS_LD_NO_*,
 * PFS_CAP_LIST_XATTR) and in the reply to MKDIR or CREATE (mk:
 * PFS_MK_NO_*, PFS_CAP_NEW_XATTRS). */
#define EXPORT_ASKED_XATTRS 4
extern const struct export_asked_xattr {
	const char *name;
	uint32_t ld, mk;
} export_asked_xattrs[EXPORT_ASKED_XATTRS];
/* The PFS_MK_NO_* bits of the object open as fd (not O_PATH): the
 * asked-for names that getxattr answers ENODATA for. A filesystem
 * without ACLs answers EOPNOTSUPP, which a client must not be told is
 * ENODATA: that bit stays clear. */
uint32_t export_xattrs_absent(int fd);
/* Makes symlink name in dirfd pointing at target (stored as is, never
 * followed by podfsd). Returns 0 (e filled) or -errno. */
int export_symlink(struct xop *x, int dirfd, const char *name, const char *target,
		   struct pfs_entry *e);
/* Removes name from dirfd (dir: a directory, AT_REMOVEDIR). *victim gets
 * the handle of the removed object when it is known (else len 0); its
 * cached fd is dropped, unless it was a file's last name (or a
 * directory) and another session caches it (handles_orphan keeps it
 * openable a while). Returns
 * 0 or -errno of unlinkat. */
int export_unlink(struct xop *x, int dirfd, const char *name, bool dir, struct pfs_fh *victim);
/* renameat2 with flags (RENAME_NOREPLACE, RENAME_EXCHANGE; others:
 * -EINVAL). *victim gets the handle of the replaced object (with
 * RENAME_EXCHANGE: the other moved one), *moved that of the renamed one
 * (len 0 where unknown); *none is true if the rename replaced nothing
 * (newname was absent as podfs clients see it: their changes in newdir
 * wait for this one). Returns 0 or -errno. */
int export_rename(struct xop *x, int olddir, const char *oldname, int newdir,
		  const char *newname, uint32_t flags, struct pfs_fh *victim,
		  struct pfs_fh *moved, bool *none);
/* Makes newname in newdir a hard link to the object of O_PATH fd fd (not
 * a directory: -EPERM). Returns 0 (e filled) or -errno. */
int export_link(struct xop *x, int fd, int newdir, const char *newname, struct pfs_entry *e);
/* Slots (wire_deleg.h). export_slot_make makes a regular file in
 * directory dirfd that no name reaches yet (O_TMPFILE, as the caller:
 * the caller's write permission on dirfd is checked, and the group
 * follows a set-group-ID directory): returns its fd (O_RDWR; the caller
 * owns it) and fills e, or -errno; -EAGAIN if dirfd has a default ACL,
 * which would give the file an ACL that its later mode must not undo.
 * export_slot_name opens slot fd as the session's fid with open flags
 * flags (the open of the create the client answered; fid 0: none, and a
 * fid already open stays), gives it the permission bits mode (nothing
 * above 0777) and the current times, then makes the change sa (NULL:
 * none; export_setattr's) and links it as name in dirfd (-EEXIST if the
 * name is taken): 0 (e filled) or -errno (of sa's change: not linked). */
int export_slot_make(struct xop *x, int dirfd, int *fd, struct pfs_entry *e);
int export_slot_name(struct xop *x, int fd, int dirfd, const char *name, uint32_t mode,
		     uint64_t fid, uint32_t flags, const struct pfs_setattr_req *sa,
		     struct pfs_entry *e);
/* Creates and opens name in dirfd (O_CREAT | O_EXCL, never following a
 * symlink), or, without O_EXCL in flags, opens the existing regular file
 * or directory; registers the open file as the session's fid. Returns 0
 * (e filled; *fresh: this call made the regular file, and it has no
 * extended attribute; absent != NULL: *absent, the PFS_MK_NO_* bits of
 * the file this call made, 0 if it made none), -EINVAL for O_DIRECTORY,
 * or -errno. */
int export_create(struct xop *x, int dirfd, const char *name, uint64_t fid, uint32_t flags,
		  uint32_t mode, uint32_t umask, struct pfs_entry *e, bool *fresh, uint32_t *absent);

/* --- export_files.c --- */

/* Changes what m->valid says of obj (mode, owner, size through the
 * session's fid m->fid if it is writable, times) and returns its new
 * attributes in *a. A mode change that only drops set-id bits, as the
 * client's kernel asks after a non-owner's write, is done as root if the
 * caller may write the file. Returns 0, -EINVAL (unknown bits, bad
 * times), -EOPNOTSUPP (mode of a symlink), -EISDIR, -EFBIG, or -errno. */
int export_setattr(struct xop *x, struct hent *obj, const struct pfs_setattr_req *m,
		   struct pfs_attr *a);
/* The same of the object open as fd (any fd of it, O_PATH too). */
int export_setattr_fd(struct xop *x, int fd, const struct pfs_setattr_req *m, struct pfs_attr *a);
/* Opens obj (a regular file or directory) with the client's flags and
 * registers it as the session's fid (replacing one of that id); *a: its
 * attributes. Returns 0, -EROFS (writing on a read-only export), or
 * -errno (export_reopen). */
int export_open(struct xop *x, struct hent *obj, uint64_t fid, uint32_t flags, struct pfs_attr *a);
/* Reads up to size bytes at off into buf, through the session's fid (or
 * obj opened again under it with flags, after a restart). Returns the
 * count (short at the end of the file), -EINVAL (off beyond INT64_MAX),
 * -EISDIR, or -errno (the first read failed). */
ssize_t export_read(struct xop *x, struct hent *obj, uint64_t fid, uint32_t flags,
		    uint64_t off, uint32_t size, uint8_t *buf);
/* As export_read, but moves the file's pages into the pipe pipe_w
 * (non-blocking; it must have room for size bytes) without copying them.
 * Returns the count, or -errno, also when it failed after some bytes (the
 * caller then reads by copying): -EAGAIN if the pipe filled up, -EINVAL
 * if the file cannot be spliced. May wait for the disk. */
ssize_t export_read_splice(struct xop *x, struct hent *obj, uint64_t fid, uint32_t flags,
			   uint64_t off, uint32_t size, int pipe_w);
/* CHUNK (peer-assisted reads): through the session's fid (or obj opened
 * again under it with flags, as for READ), the file's attributes in
 * *before; then, if digest is not NULL, the SHA-256 of the len bytes at
 * off into digest and the attributes after that read in *after. Returns
 * 0, -EBADF (a file open for writing only: a digest is as good as the
 * bytes), -EISDIR, -EIO (fewer than len bytes: the file shrank; or
 * OpenSSL failed), -ENOMEM, or -errno. May wait for the disk. */
int export_chunk(struct xop *x, struct hent *obj, uint64_t fid, uint32_t flags,
		 struct pfs_attr *before, uint64_t off, uint32_t len,
		 uint8_t digest[PFS_DIGEST_LEN], struct pfs_attr *after);
/* Writes data[len] at off through the session's fid (opened again on a
 * miss); a big aligned write goes through an O_DIRECT twin of it unless
 * x->direct is NULL. *written: the bytes written (short only after an
 * error), *at: where they start (off, or for an O_APPEND fid where the
 * file ended), *a: the attributes after. Returns 0, -EINVAL (off), or
 * -errno when nothing was written. */
int export_write(struct xop *x, struct hent *obj, uint64_t fid, uint32_t flags, uint64_t off,
		 const uint8_t *data, uint32_t len, uint32_t *written, uint64_t *at,
		 struct pfs_attr *a);
/* Forgets the session's fid (closed once unused). Returns 0, also for an
 * unknown fid. */
int export_release(struct xop *x, uint64_t fid);
/* fsync (datasync: fdatasync) of the session's fid, or, without one, of
 * obj opened for that. Returns 0 or -errno. */
int export_fsync(struct xop *x, struct hent *obj, uint64_t fid, bool datasync);
/* fallocate(mode, off, len) through the session's fid, or obj opened
 * again for writing; *a (if a is not NULL): the file's attributes after
 * it. Returns 0, -EINVAL (off or len beyond INT64_MAX), or -errno. */
int export_fallocate(struct xop *x, struct hent *obj, uint64_t fid, uint32_t mode,
		     uint64_t off, uint64_t len, struct pfs_attr *a);
/* copy_file_range(2) of up to len bytes (at most PFS_MAX_COPY) of src
 * at soff, through the session's fid sfid (or src opened again with
 * sflags, as for READ), to dst at doff, through dfid (or with dflags, as
 * for WRITE). The bytes copied are on the disk before it returns
 * (fdatasync of dst). *copied: their count (short only at src's end);
 * *a: dst's attributes after. Returns 0, -EINVAL (an offset beyond
 * INT64_MAX; overlapping ranges of one file), -EBADF (dst is opened for
 * appending, or a fid is not open for reading / writing), or -errno. */
int export_copy_range(struct xop *x, struct hent *src, uint64_t sfid, uint32_t sflags,
		      uint64_t soff, struct hent *dst, uint64_t dfid, uint32_t dflags, uint64_t doff,
		      uint64_t len, uint32_t *copied, struct pfs_attr *a);
/* lseek SEEK_DATA or SEEK_HOLE (whence; others: -EINVAL) from off through
 * the session's fid, or obj opened again. *result: the offset found.
 * Returns 0, -ENXIO (off beyond INT64_MAX, or no data/hole after it), or
 * -errno. */
int export_lseek(struct xop *x, struct hent *obj, uint64_t fid, uint64_t off, uint32_t whence,
		 uint64_t *result);

/* --- export_dirs.c --- */

/* Opens directory obj for reading and registers the stream as the
 * session's fid; *a: its attributes. Returns 0 or -errno. */
int export_opendir(struct xop *x, struct hent *obj, uint64_t fid, struct pfs_attr *a);
/* READDIR: appends to w "u8 eof" and the entries from cookie off (codec.h
 * pfs_dirent), at most max_bytes (<= PFS_READDIR_MAX) of them, through
 * the session's directory fid (opened on a miss). With plus, each entry
 * but "." and ".." carries its handle and attributes (registered as the
 * session's interest). Returns 0, -ENOTDIR (the fid is a file), -EINVAL
 * (w has less room than max_bytes, or not even one entry fits), or the
 * -errno of reading it when nothing was read. */
int export_readdir(struct xop *x, struct hent *obj, uint64_t fid, uint64_t off,
		   uint32_t max_bytes, bool plus, struct pfs_wr *w);
/* LISTDIR (wire_list.h) of directory obj: appends to w at most max_bytes (<=
 * PFS_MAX_IO): u32 flags (PFS_LS_COMPLETE or 0), then the items, small
 * files with their content (max_inline each, within the reply's data
 * budget), every item registered as the session's interest; how: with
 * EXPORT_LS_XATTRS, each item's PFS_LD_NO_* bits (PFS_CAP_LIST_XATTR),
 * with EXPORT_LS_COOKIES, the dot cookies after the header and each
 * item's cookie (PFS_CAP_LIST_COOKIES, wire_list.h). With page (not
 * NULL), LISTDIR_PAGE from cookie *page: u32 flags (PFS_LS_COMPLETE,
 * PFS_LS_MORE or 0) and u64 cookie before the items, and a page ends at
 * its limits (PFS_LISTDIR_ITEMS_MAX items, max_bytes) with PFS_LS_MORE.
 * Returns 0, -EINVAL (max_bytes < 4, or < PFS_LISTDIR_PAGE_MIN for a
 * page, or w has less room), or -errno of opening the directory; an entry
 * that cannot be listed makes the listing incomplete, not an error. */
enum {
	EXPORT_LS_XATTRS = 1u << 0,
	EXPORT_LS_COOKIES = 1u << 1,
};
int export_listdir(struct xop *x, struct hent *obj, uint32_t max_inline, uint32_t max_bytes,
		   const uint64_t *page, unsigned how, struct pfs_wr *w);

/* --- export_xattrs.c --- */

/* setxattr(name, value[size], flags: XATTR_CREATE, XATTR_REPLACE) on obj.
 * Returns 0, -EINVAL (other flags), -E2BIG (size over
 * PFS_XATTR_SIZE_MAX), -EOPNOTSUPP (trusted.*), -EPERM (security.* by
 * non-root, or a symlink), or -errno. */
int export_setxattr(struct xop *x, struct hent *obj, const char *name, const uint8_t *value,
		    uint32_t size, uint32_t flags);
/* The length of xattr name of obj; with size != 0 the value is copied to
 * buf (size bytes; -ERANGE if it does not fit). Returns it, -ENODATA
 * (none, trusted.*, or a symlink), or -errno. */
ssize_t export_getxattr(struct xop *x, struct hent *obj, const char *name, uint8_t *buf,
			uint32_t size);
/* The list of obj's xattr names (NUL-terminated each, trusted.* hidden),
 * as export_getxattr: its length, copied to buf if size != 0 (-ERANGE if
 * it does not fit). A symlink has none (0); -E2BIG if the list is over
 * PFS_XATTR_SIZE_MAX. */
ssize_t export_listxattr(struct xop *x, struct hent *obj, uint8_t *buf, uint32_t size);
/* Removes xattr name of obj. Returns 0, or as export_setxattr. */
int export_removexattr(struct xop *x, struct hent *obj, const char *name);

/* --- export_locks.c --- */

/* The first lock that conflicts with m's (owner, range, type) on obj, as
 * POSIX F_GETLK answers, asked through the owner's own lock fd so that
 * its own locks do not count; PFS_LK_UN with m's range if none. Returns
 * 0, -EINVAL (any flag, a bad type or range), or -errno. Takes the
 * session's lock table mutex. */
int export_getlk(struct xop *x, struct hent *obj, const struct pfs_lock_req *m,
		 struct pfs_getlk_rep *r);
/* Sets or clears m's lock on obj without waiting, on the lock fd of m's
 * owner and kind (PFS_LKF_FLOCK: flock, else an OFD lock), opened for it
 * if need be (and closed again if the lock is refused). Returns 0,
 * -EAGAIN for a conflict, -EINVAL (other flags, a bad type or range), or
 * -errno. Takes the session's lock table mutex. */
int export_setlk(struct xop *x, struct hent *obj, const struct pfs_lock_req *m);
/* Drops owner's POSIX locks on obj by closing its lock fd. Returns 1 if it
 * had one, else 0. Needs no credentials. */
int export_unlock_owner(struct xop *x, struct hent *obj, uint64_t owner);

#endif /* PODFSD_EXPORT_I_H */
