/* ops_i.h: the FUSE low-level operations of podfs, split by kind.
 *
 *   ops.c        the fuse_lowlevel_ops table, init, destroy, statfs
 *   ops_entry.c  lookup, forget, getattr, setattr, readlink, mknod, mkdir,
 *                symlink, unlink, rmdir, rename, link
 *   ops_file.c   open, create, read, write, flush, release, fsync,
 *                fallocate, copy_file_range, lseek
 *   ops_dir.c    opendir, readdir(plus), releasedir, fsyncdir
 *   ops_xattr.c  the xattr operations and the user.podfs.stats xattr
 *   ops_lock.c   getlk, setlk, flock
 *   ops_common.c what several kinds share (below them all)
 *
 * Each handler decodes the FUSE arguments, builds the request, calls the
 * modules below (rpc, inode, listing, trust, gate, wb, locks, pcache,
 * ofile) and replies: exactly one fuse_reply_* on every path (libfuse
 * "Valid replies"). Handlers run on the FUSE request threads (loop.c)
 * and may block in rpc_call. req's userdata is the struct client.
 */
#ifndef PODFS_OPS_I_H
#define PODFS_OPS_I_H

#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stdint.h>

#include "client_i.h"
#include "creds_i.h"
#include "inode_i.h"
#include "killable_i.h"
#include "ofile_i.h"
#include "podfs/codec.h"
#include "rpc_i.h"

/* The fuse_lowlevel_ops of podfs (ops.c), for fuse_session_new. */
extern const struct fuse_lowlevel_ops ops_fuse_ops;

/* Directories up to this size (st_size; ext4: 4 KiB blocks of names)
 * are listed whole at their first lookup (ops_entry.c) or READDIR
 * (ops_dir.c). */
#define LIST_DIR_MAX_SIZE (64u * 1024)
/* A directory read from the daemon counts as walked this long after its
 * last READDIR, or the last lookup of a subdirectory in it: those looked
 * up meanwhile get their listings fetched ahead (ops_lookup). */
#define WALK_LOOKUP_NS (2 * 1000000000LL)
/* Larger ones up to this size (about 80,000 short names on ext4) are
 * listed in pages (LISTDIR_PAGE, without contents) once LIST_STORM
 * lookups there went to the daemon since the last listing, or one per
 * LIST_STORM_BYTES of the directory's size if more (about 300 names on
 * ext4): a listing costs the daemon about one lookup per name, so the
 * larger the directory, the more lookups it must have saved already. A
 * stat storm, a walk, a `git status`; not a lone open. At most
 * LIST_PAGES_MAX pages of up to PFS_LISTDIR_ITEMS_MAX names. */
#define LIST_PAGED_MAX_SIZE (2u << 20)
#define LIST_STORM 16
#define LIST_STORM_BYTES (8u * 1024)
#define LIST_PAGES_MAX 32

/* ---- small helpers every handler uses ---- */

static inline struct client *CL(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* The inode of a nodeid of req. */
static inline struct inode *IP(fuse_req_t req, fuse_ino_t ino)
{
	return inode_get(CL(req)->it, ino);
}

static inline struct ofile *OF(const struct fuse_file_info *fi)
{
	return ofile_of(fi);
}

/* req's caller's credentials (with the supplementary groups if groups). */
static inline void fill_creds(fuse_req_t req, struct pfs_creds *cr, bool groups)
{
	creds_fill(CL(req)->cc, req, cr, groups);
}

/* The caller's ids (without groups), the handle and the fid of the open
 * file of, for a request about it (the daemon may know the fid from now
 * on: ofile_fid). */
static inline void ops_file_req(fuse_req_t req, struct ofile *of, struct pfs_creds *cr,
				struct pfs_fh *fh, uint64_t *fid)
{
	fill_creds(req, cr, false);
	*fh = of->ip->fh;
	*fid = ofile_fid(of);
}

/* ---- shared by several kinds (ops_common.c) ---- */

/* Copies name s into n. Returns 0, -ENAMETOOLONG or -EINVAL (not a
 * valid single name: "", ".", "..", a '/'...). */
int ops_set_name(struct pfs_name *n, const char *s);

/* Logs a malformed reply (what: its kind) and returns -EIO, for the
 * handler's reply. */
int ops_bad_reply(fuse_req_t req, const char *what);
/* The answer to a lookup or a name operation that failed with rc (a
 * -errno): the daemon's ESTALE, a directory it names removed, becomes
 * ENOENT at the VFS's retry (estale_i.h). */
int ops_name_err(fuse_req_t req, int rc);

/* A request whose work must reach the server even if its process dies
 * (an unlock): killable_finish_after(answer_early, &ea) answers it EINTR
 * at once if the process is being killed while the server is away;
 * ea.answered then says not to answer again. */
struct early_answer {
	fuse_req_t req;
	bool answered;
};
void answer_early(void *ea);

/* The entry parameters of pe for the kernel (timeouts of the mount) in
 * *e, and its inode with one lookup added (the caller hands it to the
 * kernel or gives it back), or NULL on ENOMEM; *made (if made is not
 * NULL): the inode is new to the table. dir: the directory pe was found
 * in under name by a request sent at push number seq (NULL: none; see
 * inode_set_parent). */
struct inode *ops_entry_param(struct client *c, struct inode *dir, const char *name,
			      uint64_t seq, const struct pfs_entry *pe,
			      struct fuse_entry_param *e, bool *made);

/* Replies to req with entry e of ip (NULL: a negative entry) found under
 * dir/name (either may be NULL) by a request sent at push number seq:
 * with timeouts 0 if a push about the directory or the object came
 * since (inside the gate). Remembers the name (inode_note_name), tells
 * the ESTALE tracker, and gives back the lookup of ip if the kernel
 * dropped the reply. */
void ops_reply_entry(fuse_req_t req, struct inode *dir, const char *name, struct inode *ip,
		     struct fuse_entry_param *e, uint64_t seq);

/* A change of ours that names objects (a namespace change, or a
 * setattr...): the snapshot taken before it is announced, the stamps it
 * gave the objects it announced (inode_own_touch, trust_i.h), and, once
 * it ended (ops_own_done), the namespace count its reply's attributes
 * are trusted at. */
struct ops_own {
	uint64_t any, ns, seq; /* inode_own_snap and gate_seq before it was sent */
	uint64_t at, at2;      /* the stamps of the first and second object */
	bool ns_change;        /* it moves objects it cannot name (unlink, rmdir, rename) */
	uint64_t ns_trust;     /* set by ops_own_done */
};
/* A change of ours that moves ip (the directory, or the object linked)
 * is about to be sent: takes the snapshot, then announces the change
 * (inode_own_touch, with ns as given). Returns the snapshot. */
struct ops_own ops_own_change(struct client *c, struct inode *ip, bool ns);

/* The change of o ended (answered or failed): sets o->ns_trust, moving
 * the namespace count again for a change made with ns. */
void ops_own_done(struct client *c, struct ops_own *o);

/* A request that the kernel sent holding dir's lock starts waiting for
 * the daemon (delta 1) or stopped (-1): pushes about names in dir are
 * then acknowledged before they are applied (pushq_i.h, "when a push is
 * acknowledged"), since applying them waits for this request. */
void ops_dir_busy(struct client *c, const struct inode *dir, int delta);
/* The same for the directory named name in dir, whose lock the kernel
 * may hold too (the one an rmdir removes, a rename moves or replaces):
 * pushq_busy_name. */
void ops_name_busy(struct client *c, const struct inode *dir, const char *name, int delta);

/* dir's attributes a (NULL: not in the reply, or it failed) right after
 * our namespace change in it of o (ended: ops_own_done), which stamped
 * dir with at: recorded, and trusted if nothing else of ours moved dir
 * meanwhile (see ops_common.c). */
void ops_own_dir_attr(struct client *c, struct inode *dir, const struct pfs_attr *a,
		      const struct ops_own *o, uint64_t at);

/* dir's listing after our own create of name there (e: the new entry, or
 * NULL if the create failed): e joins it, or it goes (listing_touch).
 * Before the reply to the kernel, which holds dir's lock till then. */
void ops_own_listing(struct inode *dir, const char *name, const struct pfs_entry *e);

/* Decodes an entry reply (entry_rep, entry_dir_rep or mkdir_rep) into
 * *er, with the directory's attributes in *dir if it carried them
 * (*have_dir) and *mkflags (PFS_MK_* of a mkdir_rep, else 0). Returns 0
 * or -EBADMSG. rep stays the caller's. */
int ops_dec_entry(const struct rpc_reply *rep, struct pfs_entry_rep *er, struct pfs_attr *dir,
		  bool *have_dir, uint32_t *mkflags);

/* ip was handed to the kernel from a listing item with flags lflags,
 * fetched at own-change count any: the xattrs its PFS_LD_NO_* bits say
 * are absent are remembered (inode_note_absent), so that `ls -l` and
 * write(2) do not ask for them. The caller holds the gate and checked
 * that no push about ip (or everything) came since the listing was asked
 * for. */
void ops_listed_absent(struct client *c, struct inode *ip, uint32_t lflags, uint64_t any);
/* The PFS_MK_NO_* bits of the reply to a MKDIR or CREATE that made ip
 * (PFS_CAP_NEW_XATTRS), sent at push number seq and own-change count
 * any: the absences remembered as a listing's, unless a push about ip
 * was numbered since. Takes the gate. */
void ops_made_absent(struct client *c, struct inode *ip, uint32_t mkflags, uint64_t seq,
		     uint64_t any);

/* Fetches dir's listing (LISTDIR) with the caller's creds cr, with the
 * content of files up to max_inline bytes, and keeps it if complete (an
 * incomplete or failed one makes dir listed name by name from now on; a
 * server without LISTDIR is remembered). Waits for the reply. */
void ops_fetch_listing(fuse_req_t req, struct inode *dir, const struct pfs_creds *cr,
		       uint32_t max_inline);

/* Fetches dir's listing in pages (LISTDIR_PAGE), without contents, with
 * the caller's creds cr, and keeps it if the pages make a complete
 * listing: no push about dir came since the first was asked for (else
 * none is fetched for a quiet period), and at most LIST_PAGES_MAX of them
 * (an incomplete or failed one makes dir listed name by name from now
 * on; a server without LISTDIR_PAGE is remembered). Waits for them. */
void ops_fetch_listing_pages(fuse_req_t req, struct inode *dir, const struct pfs_creds *cr);

/* Close-to-open without a round trip (OPEN, or OPENDIR if dir): true if
 * this read-only open of ip by req's caller may be answered locally
 * (then fi->keep_cache is set for a file), false to ask the daemon. See
 * ops_common.c. */
bool ops_open_locally(fuse_req_t req, struct inode *ip, struct fuse_file_info *fi, bool dir);
/* ip's attributes into *a if they are known current: trusted
 * (inode_attr_trusted), and no push about ip came since (as ops_getattr
 * answers them); *seq (if not NULL): the push number they are current
 * at. */
bool ops_current_attr(struct client *c, struct inode *ip, struct pfs_attr *a, uint64_t *seq);

/* What an OPEN or OPENDIR sent to the daemon brought back. */
struct ops_opened {
	struct pfs_creds cr;   /* the opener's ids, as sent */
	struct pfs_attr attr;  /* the attributes of the reply */
	uint64_t any, ns;      /* inode_own_snap before it was sent */
	uint64_t seq, applied; /* gate_seq and gate_applied then */
};
/* Sends op (PFS_OP_OPEN or PFS_OP_OPENDIR) of of->ip under of's fid with
 * fi's flags and req's caller's ids, and waits for the reply: 0 with *o
 * filled; or -errno, after replying the error to req and freeing of. */
int ops_open_remote(fuse_req_t req, struct ofile *of, struct fuse_file_info *fi, uint16_t op,
		    struct ops_opened *o);

/* ---- the handlers; ops.c's table names them ----
 *
 * Each follows its fuse_lowlevel_ops entry (fuse_lowlevel.h: arguments,
 * valid replies) and replies once; -errno of the daemon or of a module
 * becomes fuse_reply_err. Below, what podfs does besides asking the
 * daemon. Every handler runs on a FUSE request thread. */

/* ops_entry.c */
/* LOOKUP: from the directory's listing while coherent (fetching it for
 * a small directory), else LOOKUP_DATA (content of small files rides
 * along, kept inline and offered to the persistent cache) or LOOKUP;
 * ENOENT becomes a negative entry of negative_timeout. */
void ops_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
/* FORGET: drops nlookup lookups (inode_forget; the last one queues a
 * FORGET to the daemon, cache.c). No reply but fuse_reply_none. */
void ops_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void ops_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets);
/* GETATTR: from trusted attributes with no push since (trust_i.h), else
 * GETATTR after the file's pending writes. */
void ops_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
/* SETATTR after the file's pending writes, as an own change. */
void ops_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		 struct fuse_file_info *fi);
void ops_readlink(fuse_req_t req, fuse_ino_t ino);
/* MKNOD, MKDIR, SYMLINK, LINK: own namespace changes; the new entry
 * joins the directory's listing; a new empty directory gets an empty
 * listing (PFS_MK_EMPTY). */
void ops_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void ops_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void ops_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name);
/* UNLINK, RMDIR, RENAME: own namespace changes; lazy opens of files that
 * may lose their last name are made known to the daemon first. */
void ops_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void ops_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void ops_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		const char *newname, unsigned int flags);
void ops_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);

/* ops_file.c */
/* An open with O_APPEND writes past the page cache (direct_io), so that
 * each write() is one WRITE: the coordinator appends every WRITE of such
 * a file where the file ends then (it opens it O_APPEND), which is what
 * keeps appends from several hosts whole; but through the page cache the
 * kernel ends a WRITE at the first page it does not hold whole, and a
 * 9-byte line across a page boundary went as two appends, with another
 * host's line between them. Writes up to max_write (PFS_MAX_IO) stay
 * whole. Reads through such an open go to podfs too (which serves this
 * host's own writes first); a shared mmap of it fails (ENODEV), as
 * FUSE has it for direct_io. */
static inline void ops_append_direct(struct fuse_file_info *fi)
{
	if (fi->flags & O_APPEND)
		fi->direct_io = 1;
}

/* OPEN: answered locally when it may be (ops_open_locally), else OPEN;
 * close-to-open decides keep_cache; a file another host removed gets
 * ESTALE once (estale.c); inline content may go to the kernel as pages. */
void ops_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
/* CREATE: an own namespace change that opens the file too. */
void ops_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		struct fuse_file_info *fi);
/* READ after the file's pending writes: from the inline content, the
 * persistent cache, or READ (whose data may fill the persistent cache). */
void ops_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
/* WRITE: queued to write-behind and answered at once (wb.c); an earlier
 * write's error this open did not hear of yet fails it, once. */
void ops_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
	       struct fuse_file_info *fi);
/* FLUSH (close(2)): waits for the file's writes, reports their error,
 * drops the owner's POSIX locks where this client took any. */
void ops_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
/* RELEASE: commits the file's writes, drops its flocks, RELEASE if the
 * daemon knows the fid, frees the ofile. */
void ops_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
/* FSYNC: returns once the daemon's disk holds every write (wb_sync). */
void ops_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void ops_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
		   struct fuse_file_info *fi);
/* copy_file_range(2): COPY_RANGE, the bytes copied on the daemon, at
 * most PFS_MAX_COPY (the caller loops on a short count). */
void ops_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			 struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
			 struct fuse_file_info *fi_out, size_t len, int flags);
void ops_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi);

/* ops_dir.c */
/* OPENDIR: answered locally when it may be; keep_cache and cache_readdir
 * always (the daemon pushes every change). */
void ops_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
/* READDIR and READDIRPLUS: from the directory's listing at offset 0 if
 * coherent, else chunks of READDIR kept in the ofile. */
void ops_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		 struct fuse_file_info *fi);
void ops_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi);
void ops_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
/* FSYNCDIR: 0 (directory operations are synchronous on the daemon). */
void ops_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);

/* ops_xattr.c */
/* SETXATTR and REMOVEXATTR: own changes (known absences forgotten). */
void ops_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
		  size_t size, int flags);
/* GETXATTR: user.podfs.stats of the root is answered here; a known
 * absence of security.capability, ACLs or the SELinux label too. */
void ops_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void ops_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void ops_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);

/* ops_lock.c: through locks.c (waiting, grace, reclaim); a granted lock
 * makes the kernel drop the file's cached pages and attributes. */
void ops_getlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, struct flock *lock);
void ops_setlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, struct flock *lock,
	       int sleep);
void ops_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, int op);

#endif /* PODFS_OPS_I_H */
