/* op_i.h: one operation in a worker thread: its context (struct op),
 * the handlers of the opcodes (dispatch_*.c, one file per kind, listed
 * below), and what every handler uses (op.c): resolving handles as root
 * and becoming the caller, the reply, the invalidations for other
 * clients.
 *
 * How a handler runs (dispatch.c, the table): the request payload is
 * decoded into o->m (the message of the opcode's row in wire.h PFS_OPS);
 * then, as the opcode's row in dispatch.c says, the handles it names are
 * resolved (o->obj, o->obj2), the thread switches to the caller's
 * credentials (o->x.cr) and the session's interest in the first handle
 * is registered; then the handler runs, states what is particular to its
 * opcode (the export call, the invalidations, the reply), and returns;
 * then the thread is root again and the handles are released.
 *
 * Worker threads only. A handler returns 0, with its reply payload in
 * o->w (nothing written: an empty reply), or -errno, which the client
 * gets as the reply's status (o->w is then dropped).
 */
#ifndef PODFSD_OP_I_H
#define PODFSD_OP_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "podfs/codec.h"
#include "export_i.h"
#include "req_i.h"

/* Every message of codec.h; o->m holds the decoded request. */
#define OP_MSG_MEMBER(name) struct pfs_##name name;
union op_msg {
	PFS_MESSAGES(OP_MSG_MEMBER)
};
#undef OP_MSG_MEMBER

struct op {
	struct req *r;
	struct pfsd *d;
	struct xop x;
	const uint8_t *in;    /* raw request payload */
	size_t inlen;
	union op_msg m;       /* the request, decoded */
	struct hent *obj;     /* the object the request names first, resolved */
	struct hent *obj2;    /* the second one (RENAME, LINK, COPY_RANGE) */
	struct pfs_creds cr;  /* the caller's credentials after the export rule */
	struct pfs_wr w;      /* reply payload; w.buf is malloc'd or NULL, */
	bool w_scratch;       /* or the thread's scratch (op_reply_alloc_scratch) */
};

typedef int (*handler_fn)(struct op *o);

/* Resolves fh (and fh2, if not NULL) as root into o->obj (o->obj2), then,
 * if cr is not NULL, switches the thread to cr as the connection's export
 * rule maps it (root or all squash: o->cr, o->x.cr, o->x.squashed). Returns 0, or
 * the -errno of handles_get or creds_enter with nothing held and the
 * thread root. Pair a success with op_end. */
int op_begin(struct op *o, const struct pfs_creds *cr, const struct pfs_fh *fh,
	     const struct pfs_fh *fh2);
/* The caller-switch half of op_begin, for a handler that resolves its
 * handles itself (as root, before): the thread becomes cr as the
 * connection's export rule maps it. Returns 0 (pair it with op_end) or
 * the -errno of creds_enter, the thread root. */
int op_become(struct op *o, const struct pfs_creds *cr);
/* fh was answered ESTALE: if its MAC fails (another handle secret), the
 * session's foreign_fh is set, for the loop's warning (server.c). */
void op_note_stale(struct op *o, const struct pfs_fh *fh);
/* Undoes op_begin: root again (if it switched), handles released. */
void op_end(struct op *o);

/* Delegations (deleg_i.h). The request names fh (resolved): the session
 * joins fh's interest set (so that no delegation is granted in fh from
 * now on, see op_deleg_grant), then, if other sessions hold delegations
 * on fh or on files made in it, the request is marked to be held back
 * while they are recalled (o->r->recall...) and 1 is returned (the
 * handler must not run: return OP_RECALL). 0: no conflict. A no-op
 * unless the daemon grants delegations. */
int op_recall_check(struct op *o, const struct pfs_fh *fh);
#define OP_RECALL 100000 /* -OP_RECALL: held back for a recall */
/* -OP_WOULD_BLOCK: a request tried on the loop thread (req.nowait) would
 * have had to wait; it runs again on a worker, from its bytes. */
#define OP_WOULD_BLOCK XOP_WOULD_BLOCK
/* The largest READ the loop thread answers itself (req.nowait): below
 * the size whose reply a worker encrypts (dispatch.c, SEAL_MIN) and the
 * zero-copy reads' (dispatch_files.c, SPLICE_MIN). */
#define OP_LOOP_READ_MAX (32u * 1024)
/* The request is about to change fh's rights (st: fh now) in a way that
 * may deny an open (rights_i.h): if the caller may make the change (owner
 * or root: creds_may_own), other sessions cache fh, and it was not held
 * back for this before, it is marked to be held back while they are
 * pushed an INVAL_INODE of fh's attributes and acknowledge it (they open
 * on the daemon, first, what they opened of fh without it: fs/ofile_i.h),
 * and 1 is returned (the handler must not change anything: return
 * -OP_RECALL). 0: go on. */
struct stat;
int op_forewarn(struct op *o, const struct pfs_fh *fh, const struct stat *st);
/* A CREATE made the regular file `file` without extended attributes
 * (opened as fid) in directory parent: grants the session a delegation
 * on it if that is safe (wire_deleg.h). Returns whether it did. */
bool op_deleg_grant(struct op *o, const struct pfs_fh *parent, const struct pfs_fh *file,
		    uint64_t fid);
/* Grants the session the delegation of the directory whose handle key is
 * dkey (its parent's: pkey) if that is safe (DELEG_DIR's conditions,
 * wire_deleg.h). Returns whether it did. */
bool op_grant_dir(struct op *o, uint64_t dkey, uint64_t pkey);

/* Before a change whose second run would fail where the first made it
 * (replylog_begins): its record for the next instance, if the request's
 * reply is kept (replylog_i.h, REPLYLOG_BEGUN); was: replylog_begin's. */
void op_note_begun(struct op *o, const struct pfs_fh *was);

/* Gives o->w a buffer of cap bytes for the reply (a handler whose reply
 * can be big calls it before encoding). */
void op_reply_alloc(struct op *o, size_t cap);
/* The same for a reply whose size is known only once it is built, and
 * is mostly far below cap (listings: a client asks for up to 1 MiB,
 * most directories take a few hundred bytes): o->w is the worker
 * thread's scratch buffer, kept from one request to the next, and
 * op_reply_settle copies the reply out at its size once the handler
 * returned. (A buffer of cap bytes each time was a megabyte's
 * allocation per listing: under AddressSanitizer a mapping, its shadow
 * poisoned and unmapped again, half of podfsd's time in a walk.) */
void op_reply_alloc_scratch(struct op *o, size_t cap);
/* After the handler (dispatch.c): a reply in the scratch buffer is
 * copied to a malloc'd one of its size if keep, else dropped (o->w
 * empty); any other reply is left as it is. */
void op_reply_settle(struct op *o, bool keep);
/* Gives o->w a small buffer (OP_SMALL_REPLY) unless it has one. */
void op_reply_room(struct op *o);
#define OP_SMALL_REPLY 512

/* Encodes the reply message `name` (struct pfs_<name> *m) into o->w.
 * Evaluates to 0, or -EIO if it does not fit. */
#define OP_ENCODE(o, name, m) \
	(op_reply_room(o), pfs_enc_##name(&(o)->w, (m)) < 0 ? -EIO : 0)

/* Invalidations the loop pushes to other clients once the request is
 * done (struct inval, req_i.h), noted in the request. Any worker; they
 * only allocate. */
/* The attributes of fh (off >= 0: and its data from off, len bytes, 0:
 * to the end) changed; off -1: its attributes only. A no-op for an empty
 * handle (unknown). */
void op_inval_inode(struct op *o, const struct pfs_fh *fh, int64_t off, int64_t len);
/* The entry name of directory parent changed. */
void op_inval_entry(struct op *o, const struct pfs_fh *parent, const struct pfs_name *name);
/* A directory's entry changed: op_inval_entry, and its listing and
 * attributes (op_inval_inode from 0). */
void op_inval_dirent(struct op *o, const struct pfs_fh *parent, const struct pfs_name *name);
/* A lock on fh was released or downgraded: the sessions waiting for a
 * lock on it are woken once the reply goes out (LOCK_WAKE). */
void op_lock_wake(struct op *o, const struct pfs_fh *fh);

/* The handlers, by kind: each answers its opcode as wire.h describes,
 * with the reply named after it (on success; an error reply is empty).
 * The objects the request names are resolved as its row in dispatch.c
 * says. */

/* dispatch_names.c. With PFS_CAP_DIR_ATTR a change's reply carries the
 * directory's attributes after it. */
int op_lookup(struct op *o);       /* LOOKUP: entry_rep */
int op_lookup_data(struct op *o);  /* LOOKUP_DATA: lookup_data_rep */
int op_mknod(struct op *o);        /* MKNOD: entry_rep or entry_dir_rep */
int op_mkdir(struct op *o);        /* MKDIR: those, or mkdir_rep (PFS_CAP_NEW_DIR) */
int op_symlink(struct op *o);      /* SYMLINK: entry_rep or entry_dir_rep */
int op_unlink(struct op *o);       /* UNLINK: nothing, or dir_rep */
int op_rmdir(struct op *o);        /* RMDIR: nothing, or dir_rep */
int op_rename(struct op *o);       /* RENAME: nothing */
int op_link(struct op *o);         /* LINK: entry_rep or entry_dir_rep */
int op_create(struct op *o);       /* CREATE: entry_rep or entry_dir_rep, or mkdir_rep
				    * (PFS_CAP_DELEG) */

/* dispatch_files.c. */
int op_ping(struct op *o);         /* PING: ping_rep */
int op_getattr(struct op *o);      /* GETATTR: attr_rep (resolved as root) */
int op_setattr(struct op *o);      /* SETATTR: attr_rep */
int op_readlink(struct op *o);     /* READLINK: readlink_rep (resolved as root) */
int op_open(struct op *o);         /* OPEN and OPENDIR: attr_rep */
int op_read(struct op *o);         /* READ: read_rep, zero-copy if it goes out uncoded */
int op_write(struct op *o);        /* WRITE: write_rep */
int op_release(struct op *o);      /* RELEASE and RELEASEDIR: nothing */
int op_fsync(struct op *o);        /* FSYNC: nothing */
int op_fallocate(struct op *o);    /* FALLOCATE: nothing */
int op_copy_range(struct op *o);   /* COPY_RANGE: write_rep */
int op_lseek(struct op *o);        /* LSEEK: lseek_rep */
int op_statfs(struct op *o);       /* STATFS: statfs_rep */

/* dispatch_dirs.c. */
int op_readdir(struct op *o);      /* READDIR: u8 eof + dirents */
int op_listdir(struct op *o);      /* LISTDIR: the listing */
int op_listdir_page(struct op *o); /* LISTDIR_PAGE: a page of it */
int op_listdirs(struct op *o);     /* LISTDIRS: the listings */
int op_revalidate(struct op *o);   /* REVALIDATE: revalidate_rep (as root) */
int op_revalidated(struct op *o);  /* REVALIDATED: nothing */
int op_unlinks(struct op *o);      /* UNLINKS: unlinks_rep */
int op_slots(struct op *o);        /* SLOTS: slots_rep */
int op_creates(struct op *o);      /* CREATES: creates_rep */
int op_deleg_dir(struct op *o);    /* DELEG_DIR: nothing (granted), or EAGAIN */
int op_deleg_return(struct op *o); /* DELEG_RETURN: nothing */
int op_auth(struct op *o);         /* AUTH, once the loop accepted it: auth_rep */

/* dispatch_chunks.c: peer-assisted reads (chunks_i.h); ENOSYS where the
 * daemon serves none or the session did not negotiate PFS_CAP_PEER. */
int op_chunk(struct op *o);        /* CHUNK: chunk_rep */
int op_chunk_report(struct op *o); /* CHUNK_REPORT: nothing */

/* dispatch_xattrs.c. */
int op_setxattr(struct op *o);     /* SETXATTR: nothing */
int op_getxattr(struct op *o);     /* GETXATTR: xattr_rep */
int op_listxattr(struct op *o);    /* LISTXATTR: xattr_rep */
int op_removexattr(struct op *o);  /* REMOVEXATTR: nothing */

/* dispatch_locks.c: with the grace period and the waiters of
 * lockstate_i.h. */
int op_getlk(struct op *o);        /* GETLK: getlk_rep; PFS_ST_GRACE in grace */
int op_setlk(struct op *o);        /* SETLK: nothing; PFS_ST_GRACE in grace */
int op_unlock_owner(struct op *o); /* UNLOCK_OWNER: nothing (resolved as root) */
int op_reclaim(struct op *o);      /* RECLAIM: nothing; ENOLCK unless it may reclaim */
int op_reclaim_done(struct op *o); /* RECLAIM_DONE: nothing */

#endif /* PODFSD_OP_I_H */
