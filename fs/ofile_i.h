/* ofile_i.h: the state of one file or directory the kernel opened
 * (fi->fh), and the client's list of them.
 *
 * Lazy opens. A file or directory opened without the daemon
 * (ops_open_locally) stays unknown to it until a request carries its fid
 * (ofile_fid); the daemon then opens it by handle. Once the file's last
 * name is gone (the directory removed) that fails with ESTALE, where a
 * local filesystem keeps an open file readable to its close: `open;
 * unlink; read`, or a running program whose mapped library an upgrade
 * replaced; and an open directory removed reads as empty, its fstat
 * with link count 0. So such an open is made known to the daemon (an
 * OPEN or OPENDIR under its fid, with the opener's ids) whenever it may
 * be losing a name (ofile_attach_lazy):
 *   - before this client removes or replaces a name in a directory, for
 *     files that may have their last name there, and before an rmdir or
 *     a rename over a name, directories that may be removed there
 *     (inode_may_lose_name_in);
 *   - when a push says another client changed its attributes (an unlink
 *     changes a link count, an rmdir makes it 0), as the push is
 *     applied: the daemon keeps a deleted file or removed directory
 *     openable by handle meanwhile (daemon/handles.c handles_orphan);
 *   - before this client changes its mode, owner or access ACL: rights
 *     are checked at open, and the daemon's open by handle would check
 *     the new ones. Another client's change that may take rights away
 *     is pushed before it is made too (daemon/rights_i.h), so the push
 *     above opens these while the old rights hold.
 * At most one OPEN per open file, and none while no file is open locally.
 * The open-file list stays locked meanwhile, so that none is released
 * under us, and each one's lock keeps its RELEASE behind its OPEN.
 *
 * The list (c->open_files, c->of_lock) and the count of lazy opens
 * (c->lazy_opens) live in struct client; only this module touches them.
 * Every function may be called from any FUSE thread (ofile_attach_lazy
 * also from the push thread).
 */
#ifndef PODFS_OFILE_I_H
#define PODFS_OFILE_I_H

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "lsfetch_i.h"
#include "podfs/codec.h"
#include "rpc_i.h"

struct client;
struct inode;

/* State of one open file or directory (fi->fh). */
struct ofile {
	struct client *c;
	struct ofile *prev, *next; /* the client's list of open files */
	uint64_t fid;     /* client-chosen id the daemon knows the open by */
	/* The daemon may know fid: the open went to it, or a request
	 * carried fid (the daemon opens the file again by handle under an
	 * unknown fid), so RELEASE must be sent. See ofile_fid. */
	atomic_bool remote;
	bool local;       /* opened locally (counted in lazy_opens while !remote);
			   * set with cr under c->of_lock (ofile_mark_local) */
	uint32_t flags;   /* open flags, for a reopen by handle */
	struct inode *ip; /* pinned by the kernel while the file is open */
	struct pfs_creds cr; /* the opener's, if opened locally (ofile_attach_lazy) */
	/* The owners of the fcntl locks taken through this open and not
	 * seen in a FLUSH of it since (under lock): an OFD lock's owner is
	 * the open itself, which no close(2) flushes and whose release the
	 * kernel does not unlock, so what is left here at RELEASE is unlocked
	 * then (ofile_take_lock_owners). A process's own (POSIX) owner is
	 * flushed by each of its close(2)s of the open. */
	uint64_t *lk_owners;
	unsigned nlk_owners, lk_cap;
	_Atomic uint32_t err_seen; /* ip->wb_err_seq reported (at open: then) */

	/* Directories: the last READDIR reply and the position in it. */
	pthread_mutex_t lock;
	struct rpc_reply dir;
	struct pfs_rd rd;
	uint64_t rd_off;  /* cookie of the position rd is at */
	bool rd_valid;
	bool rd_eof;
	bool rd_plus;
	bool rd_synth;    /* the chunk is the whole listing (readdir_listed) */
	bool rd_paged;    /* read in pages: from the daemon, or a listing too big
			   * to be listed whole (a walk's, see do_readdir) */
	size_t rd_idx;    /* rd_synth: entries of the chunk before rd */
	uint64_t rd_seq;  /* push number when the chunk was requested */
	uint64_t rd_any, rd_ns; /* inode_own_snap then */
	uint32_t *rd_iflags; /* rd_synth: its entries' flags (listing_readdir), or NULL */
	struct lsfetch_order rd_order; /* this reading's subdirectories queued ahead */
};

/* The ofile of a FUSE request's file info. */
static inline struct ofile *ofile_of(const struct fuse_file_info *fi)
{
	return (struct ofile *)(uintptr_t)fi->fh;
}

/* A new open of ip (NULL: set later, for a create) with open flags
 * flags (kept without O_CREAT, O_EXCL, O_TRUNC, O_NOCTTY, for a reopen
 * by handle), a fresh fid, on the client's list. Returns NULL on ENOMEM.
 * The caller frees it with ofile_free unless the kernel took it (then
 * RELEASE or RELEASEDIR frees it). */
struct ofile *ofile_new(struct client *c, struct inode *ip, int flags);

/* Takes of off the list and frees it (and its READDIR chunk). */
void ofile_free(struct ofile *of);

/* Frees every open file the kernel never released (at exit, no FUSE
 * thread left). */
void ofile_free_all(struct client *c);

/* of was opened locally (the daemon does not know its fid) by a caller
 * with ids cr: counts it as a lazy open. Before the kernel gets it. Takes
 * c->of_lock: of is on the list, where ofile_attach_lazy may read it. */
void ofile_mark_local(struct ofile *of, const struct pfs_creds *cr);

/* of is an open of ip (set once): its write-behind errors reported from
 * those after now (ofile_wb_err). */
static inline void ofile_set_ip(struct ofile *of, struct inode *ip)
{
	of->ip = ip;
	atomic_store(&of->err_seen, atomic_load(&ip->wb_err_seq));
}

/* An fcntl lock of owner was taken through of. */
void ofile_note_lock_owner(struct ofile *of, uint64_t owner);
/* A FLUSH of of by owner (its POSIX locks on the file are dropped). */
void ofile_flushed_owner(struct ofile *of, uint64_t owner);
/* At RELEASE: the owners noted and not flushed since (malloc'd, *n of
 * them; NULL if none). */
uint64_t *ofile_take_lock_owners(struct ofile *of, unsigned *n);

/* The fid of of, for a request about to carry it to the daemon: from
 * now on the daemon may know it (no longer a lazy open). */
uint64_t ofile_fid(struct ofile *of);

/* The write-behind error of of's file since of last reported one
 * (-errno, 0 if none): what happened after it was opened, whoever wrote
 * it. advance: reported now (fsync), else (close) reported again at the
 * next close or fsync, so that a copy of the descriptor closed elsewhere
 * (a forked child's, at its exec) does not take the writer's error. */
static inline int ofile_wb_err(struct ofile *of, bool advance)
{
	uint32_t s = atomic_load(&of->ip->wb_err_seq);
	if (s == atomic_load(&of->err_seen))
		return 0;
	int e = atomic_load(&of->ip->wb_err);
	if (advance)
		atomic_store(&of->err_seen, s);
	return -e;
}

/* The fid of of if the daemon may know it, else 0 (no open file: the
 * daemon uses the inode), for a request that does not make the daemon
 * open the file under its fid (FSYNC, SETATTR): a lazy open stays one,
 * so that it is still attached before its file loses its last name
 * (ofile_attach_lazy). Marking it remote there made a read-only open
 * that was fsync'ed or fchmod'ed unreadable (ESTALE) once its file was
 * unlinked: the daemon held no open file for it. */
static inline uint64_t ofile_known_fid(struct ofile *of)
{
	return atomic_load(&of->remote) ? of->fid : 0;
}

/* The owner, on the wire, of the flock locks taken through of: its fid,
 * unique for the mount's life. Not the kernel's lock_owner: for a flock
 * that names the struct file, whose memory the next open(2) of the
 * process often gets again while the RELEASE of the one it replaces
 * (which drops that file's flock, after committing its writes) is still
 * on its way; under the kernel's owner that late unlock dropped the new
 * open's lock on the daemon, and another host took it (a lost update
 * under flock). The kernel hands every flock and the RELEASE of one open
 * file description the same ofile, so its fid names that description
 * exactly, as flock(2) wants. */
static inline uint64_t ofile_flock_owner(const struct ofile *of)
{
	return of->fid;
}

/* RELEASE or RELEASEDIR (op) of fid on the server with req's caller's
 * ids; errors are only logged. Waits for the reply. */
void ofile_release_fid(struct client *c, fuse_req_t req, const struct pfs_fh *fh, uint64_t fid,
		       uint16_t op);

/* The same for of, if the daemon may know its fid (after any OPEN of it
 * by ofile_attach_lazy). */
void ofile_release(struct ofile *of, fuse_req_t req, uint16_t op);

/* Sends OPEN (OPENDIR) for the lazy opens that may lose a name: of files
 * that may lose their last name in dir (fh NULL; with dirs, directories
 * that may be removed there too: inode_may_lose_name_in), or of the file
 * or directory fh (dir unused). timeout_ms: how long each OPEN may wait
 * for its reply (0: like any call; a hard mount waits for the server).
 * Errors are only logged. */
void ofile_attach_lazy(struct client *c, struct inode *dir, bool dirs, const struct pfs_fh *fh,
		       int timeout_ms);

#endif /* PODFS_OFILE_I_H */
