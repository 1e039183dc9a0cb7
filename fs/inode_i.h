/* inode_i.h: the client inode table (FUSE nodeid <-> server handle).
 *
 * A nodeid is the address of a struct inode (as in libfuse's
 * passthrough_ll), except the root, which is FUSE_ROOT_ID. A hash table
 * keyed by the handle bytes makes one server object always map to one
 * nodeid. Lookup counts follow the FUSE rules: every entry reply the
 * kernel accepts adds one, forget subtracts, and the inode is freed at 0
 * (the root never is). Thread-safe.
 */
#ifndef PODFS_INODE_I_H
#define PODFS_INODE_I_H

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "podfs/codec.h"

/* The version of a file's data as the server reports it. */
struct dver {
	int64_t mtime_s;
	int64_t ctime_s;
	uint64_t size;
	uint32_t mtime_ns;
	uint32_t ctime_ns;
};

struct listing;

struct inode {
	struct inode *hnext;  /* table lock */
	uint64_t hash;
	uint64_t nlookup;     /* table lock */
	fuse_ino_t nodeid;

	pthread_mutex_t lock; /* guards the fields below */
	struct pfs_attr attr; /* last attributes seen */
	struct dver cached;   /* version the kernel's pages belong to */
	bool cached_valid;
	bool kopened;         /* the kernel opened it since this nodeid was made (it may hold pages) */
	bool had_posix_locks; /* this client ever set a POSIX lock here */
	int64_t nocaps_until; /* CLOCK_MONOTONIC ns: "no security.capability" known till then */
	uint8_t noxattr;      /* NOX_* bits: other xattrs known absent (cleared like nocaps) */
	int64_t noxattr_until; /* CLOCK_MONOTONIC ns: noxattr valid till then */
	struct nameset *names; /* directories: names the kernel may cache under it */
	uint8_t *inline_data; /* whole content from LOOKUP_DATA, or NULL */
	uint32_t inline_len;
	_Atomic int64_t *inline_total; /* the table's count of inline bytes */
	struct dver inline_ver; /* version inline_data belongs to */
	bool ver_unknown;     /* a push invalidated the data after attr was seen */
	/* Local GETATTR (see inode_attr_trusted): the push number at which
	 * the request that brought attr was sent (0: attr is not trusted)
	 * and the table's namespace-change count then. */
	uint64_t trust_seq;
	uint64_t trust_ns;
	/* The server let a caller with these ids read the file (an OPEN for
	 * reading, or LOOKUP_DATA content): see inode_note_reader. */
	uint32_t reader_uid, reader_gid;
	bool reader_ok;
	/* Directories: a complete listing (LISTDIR) lookups are answered
	 * from while it is coherent; no_list once one was incomplete; none
	 * fetched before list_after (CLOCK_MONOTONIC ns) after one went
	 * stale or this client changed the directory: a directory that
	 * keeps changing is asked name by name, not listed whole again at
	 * every lookup (inode_listing_stale). */
	struct listing *listing;
	bool no_list;
	int64_t list_after;
	uint64_t ls_gen;      /* this client's namespace changes in it */
	/* Directories: st_ino of the directory it was last looked up in
	 * (its ".."), 0 if unknown: see inode_set_parent. */
	uint64_t parent_ino;
	uint64_t parent_renames; /* the table's rename count then */
	uint64_t parent_seq;     /* push number of the request it came from */
	/* Any object: the fh hash of the directory it was last looked up or
	 * made in (0: none), whose listing holds its attributes, and the
	 * table's own-change count after this client last changed it (see
	 * inode_own_touch, inode_listed_stale). */
	uint64_t parent_hash;
	/* 1 + the push number at the request that first handed this object
	 * to the kernel under a name (0: not yet): see inode_named_seq. */
	uint64_t named_seq;
	uint64_t name_hash;   /* of its name there (str_hash) */
	uint64_t own_at;

	struct pfs_fh fh;     /* immutable */
};

struct inode_table;
struct nameset;

/* Xattrs whose absence is remembered like security.capability's. */
enum {
	NOX_ACL_ACCESS = 1u << 0,  /* system.posix_acl_access */
	NOX_ACL_DEFAULT = 1u << 1, /* system.posix_acl_default */
	NOX_SELINUX = 1u << 2,     /* security.selinux */
};

/* Creates the table with the root entry. Returns 0 or -ENOMEM. */
int inode_table_new(const struct pfs_entry *root, struct inode_table **out);
/* Frees the table and every inode left in it. */
void inode_table_free(struct inode_table *t);

/* The inode of a nodeid the kernel passed in (never NULL for a valid one). */
struct inode *inode_get(struct inode_table *t, fuse_ino_t ino);

/* Finds or creates the inode for e->fh, adds one lookup and records
 * e->attr. Returns NULL on ENOMEM. */
struct inode *inode_ref(struct inode_table *t, const struct pfs_entry *e);

/* Subtracts n lookups; frees the inode at 0 (except the root), after
 * passing its handle to the table's forget callback (if set). */
void inode_forget(struct inode_table *t, struct inode *ip, uint64_t n);

/* Sets the callback run (on the forgetting thread, without locks held)
 * with the handle of every inode freed by inode_forget. Set it before
 * the session starts. */
void inode_table_on_forget(struct inode_table *t, void (*cb)(void *arg, const struct pfs_fh *fh),
			   void *arg);

/* One cached object, as inode_snapshot reports it. */
struct inode_snap {
	fuse_ino_t nodeid;
	struct pfs_fh fh;
	struct pfs_attr attr;
};
/* Copies every inode in the table (root included) into a malloc'd array
 * (*out, *n; the caller frees it). Returns 0 or -ENOMEM. */
int inode_snapshot(struct inode_table *t, struct inode_snap **out, size_t *n);

/* A server reports fh changed (a: its new attributes, or NULL: gone or
 * unknown). If the table knows fh: records a, forgets the cached-pages
 * version, inline content and xattr absences, detaches the directory's
 * remembered names into *names (free with nameset_each_free; may be
 * NULL), sets *nodeid and returns true. Never calls the kernel. */
bool inode_mark_changed(struct inode_table *t, const struct pfs_fh *fh, const struct pfs_attr *a,
			fuse_ino_t *nodeid, struct nameset **names);
/* Calls cb for each name in ns, then frees ns. Safe on NULL. */
void nameset_each_free(struct nameset *ns, void (*cb)(void *arg, const char *name, size_t len),
		       void *arg);

/* Remembers that the kernel may cache name (positive or negative) under
 * directory dir (for invalidation after a reconnect). ENOMEM is ignored:
 * the name is then not remembered, and the reconnect path invalidates
 * the whole directory's entries anyway if it can. */
void inode_note_name(struct inode *dir, const char *name);
/* Forgets name under dir (the kernel dropped it). */
void inode_drop_name(struct inode *dir, const char *name);
/* Calls cb for each remembered name under dir and forgets them all. */
void inode_take_names(struct inode *dir, void (*cb)(void *arg, const char *name, size_t len),
		      void *arg);

/* Inline content (LOOKUP_DATA). inode_set_inline copies data[len] as the
 * content of version a (replacing any). inode_read_inline copies up to
 * size bytes at off into buf if the inline copy is of the inode's
 * current version, sets *got and returns true; false if there is none
 * (or it is stale: it is then dropped). inode_drop_inline frees it. */
void inode_set_inline(struct inode *ip, const struct pfs_attr *a, const void *data, uint32_t len);
/* Inline copies of all inodes together stay under this many bytes. */
#define INODE_INLINE_TOTAL_MAX (64ll << 20)
bool inode_read_inline(struct inode *ip, uint64_t off, size_t size, void *buf, size_t *got);
void inode_drop_inline(struct inode *ip);
/* A copy (malloc'd, *len bytes) of the whole content if it is at hand and
 * belongs to the attributes last seen, else NULL. */
uint8_t *inode_inline_copy(struct inode *ip, uint32_t *len);

/* Known absence of xattrs in NOX_* bits (mask): */
bool inode_noxattr(struct inode *ip, uint8_t bit);
void inode_set_noxattr(struct inode *ip, uint8_t bit, double ttl);

/* The nodeid currently mapped to fh, without adding a lookup, for a
 * server push: forgets the remembered capability absence, the parent of
 * a directory and, with drop_cached, the cached-pages version (its pages
 * are being invalidated); *is_dir (if not NULL) tells whether it is a
 * directory. Returns false if the kernel does not know fh. */
bool inode_find(struct inode_table *t, const struct pfs_fh *fh, bool drop_cached,
		fuse_ino_t *nodeid, bool *is_dir);

/* Whether the kernel knows fh (an inode of it is in the table). */
bool inode_known(struct inode_table *t, const struct pfs_fh *fh);

/* Records attributes the server returned. */
void inode_set_attr(struct inode *ip, const struct pfs_attr *a);

/* Open (close-to-open): records a's version as the version of the pages
 * the kernel will cache and returns true if it equals the version of the
 * pages cached before, or if the kernel never opened the file, so has no
 * pages of it (keep_cache is then safe). *attrs_stale is set if a
 * differs from the attributes last seen, which the kernel may cache. */
bool inode_open_version(struct inode *ip, const struct pfs_attr *a, bool *attrs_stale);

/* A change this client made (WRITE, SETATTR) moved the file from the
 * last known attributes to a: if the cached pages were current before,
 * they still are (the kernel updated them itself). */
void inode_own_change(struct inode *ip, const struct pfs_attr *a);

/* Forgets the cached-pages version (the pages were invalidated). */
void inode_drop_cached(struct inode *ip);

/* The kernel asks for security.capability before every write(2). A
 * known absence is remembered for ttl seconds, or until a push or this
 * client's own xattr change on the inode forgets it (attribute changes
 * only ever remove capabilities). */
bool inode_nocaps(struct inode *ip);
void inode_set_nocaps(struct inode *ip, double ttl);
void inode_clear_nocaps(struct inode *ip);

/* Marks ip as having had POSIX locks; returns the previous value. */
bool inode_mark_posix_locks(struct inode *ip);
bool inode_had_posix_locks(struct inode *ip);

/* Attributes answered locally. The server pushes every change of an
 * object to the clients that cache it, except changes this client made
 * itself, so attr is current while (1) it came from a reply to a request
 * sent at push number seq, with no push about the object numbered since
 * (the caller checks that with cache_pushed_since inside the gate, and a
 * dropped connection numbers an "everything" push), and (2) this client
 * changed nothing that may move the object's attributes since that
 * request was sent: its own changes of the object (write, setattr,
 * fallocate, xattrs, a granted lock) clear the trust, and namespace
 * changes (create, unlink, rename, link...: they move parents' and
 * targets' mtime, ctime and nlink) invalidate every trust at once.
 *
 * inode_own_snap: take before sending a request whose reply may be
 * trusted; returns the change count, *ns the namespace count.
 * inode_own_touch: a change by this client (ip: the object, or NULL;
 * ns: a namespace change). Call BEFORE sending the change.
 * inode_trust_attr: ip->attr came from a reply to a request sent at seq
 * with snapshot (any, ns); trusts it unless this client changed
 * something since.
 * inode_attr_trusted: copies the trusted attr and its seq; false if none. */
uint64_t inode_own_snap(struct inode_table *t, uint64_t *ns);
void inode_own_touch(struct inode_table *t, struct inode *ip, bool ns);
/* A second object the change just announced with inode_own_touch moves
 * (the other directory of a link or rename): the same, with no count. */
void inode_own_also(struct inode_table *t, struct inode *ip);
/* A directory's listing holds its entries' attributes (and small files'
 * contents) as they were when it was fetched. The server does not push
 * this client's own changes back to it, so inode_own_touch of an object
 * marks its item in the listing of the directory it was last seen in
 * stale (INODE_LS_STALE in the item's flags: lookups of it go to the
 * daemon, READDIR gives it without attributes) and keeps a new listing of
 * that directory from being fetched for a quiet period, while the change
 * may be on its way; it drops every listing for a file with several
 * links (any directory may list it). And
 * inode_listed_stale tells whether this client changed the object fh
 * since a listing taken at own-change count any (then the listing's
 * entry for it is not used): that covers an object another host moved
 * into a directory listed here. */
bool inode_listed_stale(struct inode_table *t, const struct pfs_fh *fh, uint64_t any);
void inode_trust_attr(struct inode_table *t, struct inode *ip, uint64_t seq, uint64_t any,
		      uint64_t ns);
bool inode_attr_trusted(struct inode_table *t, struct inode *ip, struct pfs_attr *a,
			uint64_t *seq);

/* Opens answered locally (ops.c). The kernel checks the mode bits
 * itself (default_permissions) against attributes known current; what
 * only the server knows is how it maps the caller (root_squash,
 * all_squash), which depends on the caller's ids alone. So a read-only
 * open is answered locally only for the uid and gid the server last let
 * read the file. */
void inode_note_reader(struct inode *ip, uint32_t uid, uint32_t gid);
bool inode_is_reader(struct inode *ip, uint32_t uid, uint32_t gid);

/* Directory listings (LISTDIR, wire.h). inode_set_listing takes buf
 * (malloc'd reply payload of len bytes, freed on failure too), checks
 * it and keeps it as dir's listing, fetched at push number seq with
 * inode_own_snap (any, ns) by a caller with ids uid/gid. Returns 0,
 * -EBADMSG, -ENOMEM or -ENOSPC (listings together over their cap).
 * inode_listing_find looks name up in it: LS_NONE (no listing),
 * LS_ABSENT, or LS_PRESENT with *e, the item's PFS_LD_* *flags and, if
 * the listing carried the content, *data (malloc'd copy, the caller
 * frees) and *dlen; *li tells
 * when and by whom the listing was fetched. The caller decides whether
 * it is still coherent (no push about dir since li->seq) and calls
 * inode_listing_stale if not (no listing is fetched for that directory
 * for INODE_LIST_QUIET_NS); inode_drop_listing: never again (it was
 * incomplete). This client's own namespace changes in dir are never pushed
 * back: inode_listing_touch (call before sending the change) drops the
 * listing, and a listing fetched before it (li->ns, from
 * inode_listing_gen) is not kept (-ESTALE). */
struct listing_info {
	uint64_t seq, any, own_ns; /* push number, inode_own_snap */
	uint64_t ns;               /* inode_listing_gen */
	uint32_t uid, gid;
};
enum { LS_NONE, LS_ABSENT, LS_PRESENT };
#define INODE_LS_STALE (1u << 31) /* item flag, local: changed by this client */
#define INODE_LIST_QUIET_NS (2 * 1000000000LL)
#define INODE_LISTING_TOTAL_MAX (64ll << 20)
int inode_set_listing(struct inode_table *t, struct inode *dir, uint8_t *buf, size_t len,
		      const struct listing_info *li);
int inode_listing_find(struct inode *dir, const char *name, struct pfs_entry *e, uint8_t **data,
		       uint32_t *dlen, uint32_t *flags, struct listing_info *li);
void inode_drop_listing(struct inode *dir);
void inode_listing_stale(struct inode *dir);
/* This client's own create of name (entry e) in dir: adds it to dir's
 * listing, if dir has one, instead of dropping it (the kernel holds dir's
 * lock across the create, so no lookup there used the listing meanwhile;
 * a push from another host's change since it was fetched still makes it
 * stale at its next use). Returns 0, or -errno with the listing left as
 * it was (-ENOENT: none, -EEXIST: the name is in it): the caller then
 * drops it (inode_listing_touch). */
int inode_listing_add(struct inode *dir, const char *name, const struct pfs_entry *e);
void inode_listing_touch(struct inode *dir);
uint64_t inode_listing_gen(struct inode *dir);
/* True if a lookup in dir may fetch a listing first. */
bool inode_may_list(struct inode *dir, uint64_t max_size);

/* ".." of directories, for READDIR answered from a listing. The server
 * pushes a change of a directory (a rename moving it changes its ctime)
 * to the other clients: the parent is used only if no push about the
 * directory came since the request that found it (seq; the caller checks,
 * inode_listing_readdir returns it), and a push forgets it (inode_find).
 * This client's own renames (inode_note_rename, before sending one) make
 * every parent recorded before unknown. inode_set_parent records dir as
 * ip's parent, found by a request sent at push number seq, if ip is a
 * directory; and for any ip, dir as the directory whose listing holds it
 * (parent_hash, see inode_own_touch). */
void inode_set_parent(struct inode_table *t, struct inode *ip, struct inode *dir, uint64_t seq,
		      const char *name);
void inode_note_rename(struct inode_table *t);
/* The push number at the request that first handed ip to the kernel
 * under a name (0 if none did): every push about ip since may have
 * removed a name the kernel still walks to it. */
uint64_t inode_named_seq(struct inode *ip);

/* True if removing or replacing a name in dir may take away the last name
 * of the regular file ip: it was last looked up or made in dir, or its
 * place is unknown, or it has other links (found under another name). */
bool inode_may_lose_name_in(struct inode *ip, const struct inode *dir);
/* inode_rename_done: the rename noted is answered (or failed).
 * inode_renames_busy: one of ours is under way. The VFS does not lock a
 * directory renamed within its parent, whose ctime the rename moves: a
 * change in it may overlap that. */
void inode_rename_done(struct inode_table *t);
bool inode_renames_busy(struct inode_table *t);

/* Writes dir's listing as a READDIR reply payload (wire.h: eof byte 1,
 * then ".", ".." and every listed name with its entry, cookies 1, 2, ...)
 * into a new buffer (*buf, *len; the caller frees it), with the listing's
 * *li and the push number *parent_seq of the request that found "..".
 * Returns 0, -ENOENT if dir has no listing or its parent is not
 * known, -ENOMEM or -EBADMSG. The caller checks the listing is coherent,
 * as for inode_listing_find. */
int inode_listing_readdir(struct inode_table *t, struct inode *dir, uint8_t **buf, size_t *len,
			  struct listing_info *li, uint64_t *parent_seq);

/* The data version of a. */
struct dver dver_of(const struct pfs_attr *a);
bool dver_eq(const struct dver *a, const struct dver *b);

/* The data version of ip for the persistent cache (pcache.c): copies it
 * into *v and returns true, or returns false while it is not known to be
 * current (a push invalidated the data and no attributes came since). */
bool inode_data_version(struct inode *ip, struct dver *v);

/* Converts wire attributes to a struct stat. */
void attr_to_stat(const struct pfs_attr *a, struct stat *st);

#endif /* PODFS_INODE_I_H */
