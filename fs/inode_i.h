/* inode_i.h: the client inode table (FUSE nodeid <-> server handle).
 *
 * A nodeid is the address of a struct inode (as in libfuse's
 * passthrough_ll), except the root, which is FUSE_ROOT_ID. A hash table
 * keyed by the handle bytes makes one server object always map to one
 * nodeid. Lookup counts follow the FUSE rules: every entry reply the
 * kernel accepts adds one, forget subtracts, and the inode is freed at 0
 * (the root never is).
 *
 * The inode family, top down: trust.c (trust_i.h: attributes answered
 * locally, this client's own changes, the parents of directories) calls
 * inode.c (this header: the table and each inode's attributes, data
 * versions, inline content, known xattr absences) and listing.c
 * (listing_i.h: a directory's complete listing); inode.c calls
 * listing.c and names.c (names_i.h: the names the kernel may cache
 * under a directory) only to free an inode's parts.
 *
 * Locking: the table lock (t->lock) guards the table and every inode's
 * nlookup; ip->lock guards the fields of ip marked so. A function that
 * takes both takes the table lock first. Every function here may be
 * called from any thread.
 */
#ifndef PODFS_INODE_I_H
#define PODFS_INODE_I_H

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "attrtrust_i.h"
#include "podfs/codec.h"
#include "podfs/htab.h"

/* The version of a file's data as the server reports it. */
struct dver {
	int64_t mtime_s;
	int64_t ctime_s;
	uint64_t size;
	uint32_t mtime_ns;
	uint32_t ctime_ns;
};

struct fhmap;
struct listing;
struct nameset;

/* Own versions remembered per inode (struct inode's own_vers): the
 * replies of the writes in flight at once (wb_threads, 4 by default)
 * may come in any order. */
#define INODE_OWN_VERS 4

struct inode {
	struct hnode hn;      /* the table (lock: table); hn.hash: the fh hash, immutable */
	uint64_t nlookup;     /* table lock */
	fuse_ino_t nodeid;
	_Atomic unsigned dd_pending; /* its unlink or create answered here, not done yet (dirdeleg.c) */
	_Atomic uint64_t dd_cover;   /* made under this directory delegation grant (dirdeleg_make.c) */
	void *dd_item;        /* its create's item while queued, unsent (dirdeleg's lock) */
	_Atomic unsigned lazy_opens; /* its opens the daemon does not know of yet (ofile.c) */
	/* Its write-behind errors: how many so far, and the last (positive
	 * errno). Each open reports those after its own mark once
	 * (ofile_wb_err), as Linux's errseq does per open file. */
	_Atomic uint32_t wb_err_seq;
	_Atomic int wb_err;

	pthread_mutex_t lock; /* guards the fields below */
	struct pfs_attr attr; /* last attributes seen */
	struct dver cached;   /* version the kernel's pages belong to */
	bool cached_valid;
	uint8_t own_next;     /* where own_vers takes its next key */
	/* Keys (nonzero) of the versions this client's own changes made
	 * while the pages stayed current, the latest INODE_OWN_VERS of
	 * them: the pages hold each (see inode_open_version). */
	uint64_t own_vers[INODE_OWN_VERS];
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
	bool inline_own; /* this host's writes made it (inode_write_inline) */
	bool ver_unknown;     /* a push invalidated the data after attr was seen */
	/* The number (gate_i.h) of the last push that dropped its data: a
	 * reply to a request sent before it (a smaller push number) may
	 * carry the version before, and leaves the data version unknown. */
	uint64_t data_push;
	/* Local GETATTR (see trust_i.h): whether attr is trusted, from
	 * which push number, and this client's own changes of the object
	 * (their latest stamp, its writes behind pending). */
	struct attr_trust tr;
	/* The server let a caller with these ids read the file (an OPEN for
	 * reading, or LOOKUP_DATA content): see inode_note_reader. */
	uint32_t reader_uid, reader_gid;
	bool reader_ok;
	/* Attributes answered under a delegation the daemon does not have
	 * yet (deleg_i.h): shown over any it sends (inode_overlay). */
	bool dl_on;
	struct pfs_attr dl;
	/* Directories: a complete listing (LISTDIR) lookups are answered
	 * from while it is coherent; no_list once one was incomplete; none
	 * fetched before list_after (CLOCK_MONOTONIC ns) after one went
	 * stale or this client changed the directory: a directory that
	 * keeps changing is asked name by name, not listed whole again at
	 * every lookup (listing_stale). A directory too large to be listed at
 * its first lookup is listed in pages once lookups there keep going to
 * the daemon (cold_lookups). See listing_i.h. */
	struct listing *listing;
	bool no_list;
	bool list_fetching;   /* a thread is fetching it (listing_fetch_begin) */
	uint32_t cold_lookups; /* lookups sent to the daemon while it could be listed */
	int64_t list_after;
	uint64_t ls_gen;      /* this client's namespace changes in it */
	/* Its listing is queued or being fetched ahead (lsfetch_i.h):
	 * changed under lsfetch.c's lock, not ip->lock; read without it
	 * only as a hint. */
	_Atomic uint8_t ls_ahead;
	int64_t walked_at;    /* CLOCK_MONOTONIC ns: inode_note_walk */
	/* Directories: st_ino of the directory it was last looked up in
	 * (its ".."), 0 if unknown: see inode_set_parent. */
	uint64_t parent_ino;
	uint64_t parent_renames; /* the table's rename count then */
	uint64_t parent_seq;     /* push number of the request it came from */
	/* Any object: the fh hash of the directory it was last looked up or
	 * made in (0: none), whose listing holds its attributes (see
	 * inode_own_touch, inode_listed_stale). */
	uint64_t parent_hash;
	/* 1 + the push number at the request that first handed this object
	 * to the kernel under a name (0: not yet): see inode_named_seq. */
	uint64_t named_seq;
	uint64_t name_hash;   /* of its name there (name_hash) */
	char *name;           /* that name (NULL: none, or no memory), to find the
			       * object again by name (recover.c) */

	struct pfs_fh fh;     /* immutable */
	bool is_dir;          /* immutable: a handle's object keeps its type */
};

/* Where a forgotten inode may still be listed: the hashes of the
 * directory it was last looked up in and of its name there (ph 0: none
 * known), or anywhere (all: a file with several links). */
struct inode_listed {
	uint64_t ph, nh;
	bool all;
};

/* The table. inode.c owns the first part; the counters below it belong
 * to trust.c and listing.c, which read and move them with atomics. */
struct inode_table {
	pthread_mutex_t lock;          /* tab, and every inode's nlookup */
	struct htab tab;               /* struct inode, by fh hash */
	struct inode *root;
	void (*forget_cb)(void *arg, const struct pfs_fh *fh, const struct inode_listed *where);
	void *forget_arg;
	/* The server's handles after its handle secret changed (fhmap_i.h),
	 * or NULL: a handle the table does not hold is looked up there. Set
	 * before the session starts. */
	struct fhmap *fm;
	_Atomic int64_t inline_total;  /* bytes of all inline copies */

	struct own_clock clk;          /* trust.c: stamps of own changes (attrtrust_i.h) */
	_Atomic uint64_t renames;      /* trust.c: own renames (inode_note_rename) */
	_Atomic int64_t listing_total; /* listing.c: bytes of all directory listings */
};

/* Xattrs whose absence is remembered like security.capability's. */
enum {
	NOX_ACL_ACCESS = 1u << 0,  /* system.posix_acl_access */
	NOX_ACL_DEFAULT = 1u << 1, /* system.posix_acl_default */
	NOX_SELINUX = 1u << 2,     /* security.selinux */
};

/* Inline copies of all inodes together stay under this many bytes. */
#define INODE_INLINE_TOTAL_MAX (64ll << 20)

/* Creates the table with the root entry (nodeid FUSE_ROOT_ID, one
 * lookup that is never forgotten). Returns 0 with *out set, or -ENOMEM.
 * Start-up thread. */
int inode_table_new(const struct pfs_entry *root, struct inode_table **out);

/* Frees the table and every inode left in it (their listings and names
 * too). Shutdown, once no other thread uses the table. Safe on NULL. */
void inode_table_free(struct inode_table *t);

/* Sets the callback run with the handle of every inode inode_forget
 * frees and where it may be listed (on the forgetting thread, without
 * locks held; fh is valid during the call only), or none (cb NULL). Set
 * it before the session starts, clear it before the callback's owner
 * goes. */
void inode_table_on_forget(struct inode_table *t,
			   void (*cb)(void *arg, const struct pfs_fh *fh,
				      const struct inode_listed *where),
			   void *arg);
/* Marks fh's item stale in the listing of where's directory (every
 * listing if where->all; none if no directory is known), so that the
 * next lookup of it asks the daemon: call it before sending the FORGET
 * that ends the session's interest in fh (a lookup answered from the
 * listing after that would hand out an object nothing is pushed about).
 * Takes the table's and the directories' locks. */
void inode_unlist(struct inode_table *t, const struct pfs_fh *fh, const struct inode_listed *where);
/* Where ip may be listed: its last parent and name, or anywhere for a
 * file with several links (ip->lock held). */
struct inode_listed inode_listed_at_locked(const struct inode *ip);

/* The inode of a nodeid the kernel passed in (never NULL for a valid
 * one; the kernel's lookup keeps it alive while its request runs). */
struct inode *inode_get(struct inode_table *t, fuse_ino_t ino);

/* Finds or creates the inode for e->fh, adds one lookup and records
 * e->attr (inode_set_attr, for a request sent at push number seq).
 * Returns the inode, or NULL on ENOMEM; *made (if made is not NULL) says
 * whether it was created. The caller hands that lookup to the kernel or
 * gives it back with inode_forget(t, ip, 1). */
struct inode *inode_ref(struct inode_table *t, const struct pfs_entry *e, bool *made,
			uint64_t seq);

/* Finds or creates the inode of e->fh and adds one lookup, the client's
 * own (as inode_hold): a new inode takes e->attr, one the table holds
 * keeps its attributes (the kernel may have newer ones). Returns the
 * inode, or NULL on ENOMEM. Given back with inode_forget(t, ip, 1). */
struct inode *inode_hold_entry(struct inode_table *t, const struct pfs_entry *e);

/* Adds one lookup to ip, which must be in the table (a lookup the caller
 * holds keeps it there): the client's own, for work on ip that may
 * outlast the kernel's (lsfetch.c). Given back with inode_forget(t, ip,
 * 1). */
void inode_hold(struct inode_table *t, struct inode *ip);

/* The inode of fh with one lookup added (as inode_hold), or NULL if the
 * table does not hold fh. Given back with inode_forget(t, ip, 1). */
struct inode *inode_hold_fh(struct inode_table *t, const struct pfs_fh *fh);

/* Subtracts n lookups (at most as many as it has); at 0, except for the
 * root, removes the inode, passes its handle to the forget callback and
 * frees it: ip must not be used after. */
void inode_forget(struct inode_table *t, struct inode *ip, uint64_t n);

/* One cached object, as inode_snapshot reports it. */
struct inode_snap {
	fuse_ino_t nodeid;
	struct pfs_fh fh;
	struct pfs_attr attr;
};
/* Copies every inode in the table (root included) into a malloc'd array
 * (*out, *n; the caller frees it). Returns 0 or -ENOMEM. */
int inode_snapshot(struct inode_table *t, struct inode_snap **out, size_t *n);

/* One cached object and where it was last looked up, as
 * inode_snapshot_named reports it (recover.c). */
struct inode_named {
	struct pfs_fh fh;
	struct pfs_attr attr;
	uint64_t hash;        /* its fh hash (the parent_hash of its children) */
	uint64_t parent_hash; /* the fh hash of its directory, 0: none */
	char *name;           /* its name there (malloc'd), or NULL */
	bool root;
};
/* Copies every inode (root included) with its name into a malloc'd array
 * (*out, *n); free it with inode_named_free. Returns 0 or -ENOMEM. */
int inode_snapshot_named(struct inode_table *t, struct inode_named **out, size_t *n);
void inode_named_free(struct inode_named *v, size_t n);

/* Under the table lock (the inode cannot be forgotten meanwhile): if the
 * table holds fh, calls cb(arg, ip) with its inode (unless cb is NULL)
 * and returns true; false if the kernel does not know fh. cb must not
 * take the table lock. */
bool inode_with(struct inode_table *t, const struct pfs_fh *fh,
		void (*cb)(void *arg, struct inode *ip), void *arg);

/* Whether the kernel knows fh (an inode of it is in the table). */
bool inode_known(struct inode_table *t, const struct pfs_fh *fh);

/* Under the table lock, calls cb(arg, dir) for every directory in the
 * table whose fh hash is *hash, or for every directory if hash is NULL.
 * cb may take dir->lock, not the table lock. */
void inode_each_dir(struct inode_table *t, const uint64_t *hash,
		    void (*cb)(void *arg, struct inode *dir), void *arg);

/* A server reports fh changed (a: its new attributes, or NULL: gone or
 * unknown). If the table knows fh: records a, forgets the cached-pages
 * version, inline content and xattr absences, detaches the directory's
 * remembered names into *names (the caller frees them with
 * nameset_each_free; NULL if none), sets *nodeid and returns true; else
 * returns false with *names NULL. Never calls the kernel. */
bool inode_mark_changed(struct inode_table *t, const struct pfs_fh *fh, const struct pfs_attr *a,
			fuse_ino_t *nodeid, struct nameset **names);

/* The nodeid currently mapped to fh, without adding a lookup, for a
 * server push: forgets the remembered capability absence, the parent of
 * a directory and, with drop_cached, the cached-pages version and the
 * inline content (its pages are being invalidated; the data version is
 * unknown until attributes of a request sent after the push, number
 * push, come: inode_set_attr); *is_dir (if not NULL) tells whether it
 * is a directory. Returns false if the kernel does not know fh. */
bool inode_find(struct inode_table *t, const struct pfs_fh *fh, bool drop_cached,
		fuse_ino_t *nodeid, bool *is_dir, uint64_t push);

/* Whether the object fh is open here without the daemon knowing it
 * (ip->lazy_opens; ofile_i.h). Takes only the table's lock: callable
 * from the connection thread. */
bool inode_lazily_open(struct inode_table *t, const struct pfs_fh *fh);

/* The nodeid currently mapped to fh, and whether it is a directory (if
 * is_dir is not NULL), nothing else (inode_find without its side
 * effects). Returns false if the kernel does not know fh. */
bool inode_find_nodeid(struct inode_table *t, const struct pfs_fh *fh, fuse_ino_t *nodeid,
		       bool *is_dir);
/* Where the object fh was last handed to the kernel: its directory's
 * table hash and its name's hash (inode_set_parent). False if fh is not
 * in the table or its name is not known. Never calls the kernel. */
bool inode_name_of(struct inode_table *t, const struct pfs_fh *fh, uint64_t *parent_hash,
		   uint64_t *name_hash);

/* Remembers that the kernel may cache name (positive or negative) under
 * directory dir (for invalidation after a reconnect or a push, see
 * inode_mark_changed). ENOMEM is ignored: the name is then not
 * remembered, and the reconnect path invalidates the whole directory's
 * entries anyway if it can. */
void inode_note_name(struct inode *dir, const char *name);

/* Whether a push numbered after seq (0: none to ask about) dropped ip's
 * data, so that attributes from a reply to a request sent at seq may
 * carry the version before it. ip->lock held. */
static inline bool inode_pushed_after_locked(const struct inode *ip, uint64_t seq)
{
	return seq && ip->data_push > seq;
}

/* Records attributes the server returned for a request sent at push
 * number seq (gate_seq): the data version is known again, unless a push
 * numbered after seq dropped the data (their version may be the one
 * before; 0: no push to ask about). They are not trusted until the
 * caller says so (inode_trust_attr, trust_i.h). */
void inode_set_attr(struct inode *ip, const struct pfs_attr *a, uint64_t seq);
/* The same for attributes a reply carried besides its answer (RENAME's
 * of the object it moved) to a request sent at own-change count any
 * (inode_own_snap): recorded only if nothing of ours happened to ip
 * since and no write of it is pending (it was not asked for them, and
 * nothing waited for those writes). Returns whether they were. */
bool inode_set_attr_since(struct inode *ip, const struct pfs_attr *a, uint64_t seq, uint64_t any);

/* Delegations (deleg_i.h): a (mode, owner, group, times) are ip's
 * attributes until the daemon has them (NULL: it has them now). While
 * set, they replace those fields of any attributes of ip from the
 * daemon: in inode_set_attr, and for the caller in inode_overlay. */
void inode_overlay_set(struct inode *ip, const struct pfs_attr *a);
void inode_overlay(struct inode *ip, struct pfs_attr *a);

/* Inline content (LOOKUP_DATA or a listing's). Copies data[len] as the
 * content of version a, replacing any; dropped silently if the copies of
 * all inodes would pass INODE_INLINE_TOTAL_MAX or on ENOMEM. */
void inode_set_inline(struct inode *ip, const struct pfs_attr *a, const void *data, uint32_t len);

/* Copies up to size bytes at off of the inline content into buf and
 * sets *got (0 past the end), if the inline copy is of the attributes
 * last seen: returns true (a read to the end frees the copy: the
 * kernel's page cache has it now). Returns false if there is none, or it
 * is stale (it is then freed). */
bool inode_read_inline(struct inode *ip, uint64_t off, size_t size, void *buf, size_t *got);
/* Whether ip has an inline copy now (under its lock: the push thread
 * frees one meanwhile), before a read makes a buffer for it. */
bool inode_has_inline(struct inode *ip);

/* Frees the inline content, if any. */
void inode_drop_inline(struct inode *ip);

/* This host's write(2) of data[size] at off (not a page writeback: the
 * kernel serializes those calls, so they reach here in the order the
 * daemon gets them): the inline content, if any, becomes what the file
 * holds after it, while it stays within max bytes; else it is freed. Its
 * version moves with the write's own change (inode_own_change_locked),
 * so a file this host made and wrote is read back from here, while no
 * other host changed it (their pushes free it). */
void inode_write_inline(struct inode *ip, uint64_t off, const void *data, size_t size,
			uint32_t max);

/* A copy (malloc'd, *len bytes; the caller frees it) of the whole
 * content if it is at hand and belongs to the attributes last seen, else
 * NULL (also on ENOMEM). Not one this host's writes made: the kernel's
 * attributes predate them, and its first refresh of them (auto_inval
 * _data) would drop pages stored now; READ is answered from it instead. */
uint8_t *inode_inline_copy(struct inode *ip, uint32_t *len);

/* True if the absence of the xattr of NOX_* bit is known (and its time
 * has not run out). */
bool inode_noxattr(struct inode *ip, uint8_t bit);
/* Remembers the absence of the xattr of NOX_* bit for ttl seconds (all
 * bits share the earliest expiry). */
void inode_set_noxattr(struct inode *ip, uint8_t bit, double ttl);
/* As inode_set_noxattr for the bits nox, and as inode_set_nocaps if caps,
 * with ip->lock held by the caller (trust.c); nothing if ttl <= 0. */
void inode_absent_locked(struct inode *ip, uint8_t nox, bool caps, double ttl);

/* The kernel asks for security.capability before every write(2). A
 * known absence is remembered for ttl seconds (inode_set_nocaps; ttl <=
 * 0 forgets it), or until a push or this client's own xattr change on
 * the inode forgets it (inode_clear_nocaps, which forgets the other
 * xattr absences too; attribute changes only ever remove capabilities).
 * inode_nocaps: true while the absence is known. */
bool inode_nocaps(struct inode *ip);
void inode_set_nocaps(struct inode *ip, double ttl);
void inode_clear_nocaps(struct inode *ip);

/* Open (close-to-open): records a's version as the version of the pages
 * the kernel will cache (and a as the attributes) and returns true if it
 * equals the version of the pages cached before, or one that this
 * client's own changes made since they were current (the replies of
 * writes in flight together come in any order, so the last one to come
 * need not be the last one made), or if the kernel never opened the
 * file, so has no pages of it (keep_cache is then safe).
 * *attrs_stale is set if a differs from the attributes last seen, which
 * the kernel may cache (they are then not trusted until the caller says
 * so, inode_trust_attr). seq: the push number the OPEN was sent at (as
 * inode_set_attr). */
bool inode_open_version(struct inode *ip, const struct pfs_attr *a, bool *attrs_stale,
			uint64_t seq);

/* A change this client made (WRITE, SETATTR...) moved the object from
 * the last known attributes to a: if the cached pages were current
 * before (the attributes' version is theirs, or one of this client's
 * own since), they still are (the kernel updated them itself), and a's
 * version joins this client's own; the inline content stays current
 * likewise (a write updated it, inode_write_inline; a change of the
 * content that does not frees it). Records a, from the reply to a
 * request sent at push number seq (as inode_set_attr).
 * Called with ip->lock held (trust.c, which decides their trust at the
 * same time). */
void inode_own_change_locked(struct inode *ip, const struct pfs_attr *a, uint64_t seq);

/* Forgets the cached-pages version (the pages were invalidated). */
void inode_drop_cached(struct inode *ip);

/* The pages' version (pages.c), with ip->lock held by the caller:
 * inode_pages_gone_locked: the pages were dropped, or may be stale;
 * inode_pages_seen_locked: attributes a, not of our own change, are
 * about to be recorded (while writes of ours are pending their version
 * may be one of ours); inode_pages_own_locked: an own change moved the
 * file from version before to after (inode_own_change_locked). */
void inode_pages_gone_locked(struct inode *ip);
void inode_pages_seen_locked(struct inode *ip, const struct pfs_attr *a);
void inode_pages_own_locked(struct inode *ip, const struct dver *before, const struct dver *after);

/* The data version of ip for the persistent cache (pcache.c): copies it
 * into *v and returns true, or returns false while it is not known to be
 * current (a push invalidated the data and no attributes came since) or
 * ip is not a regular file. */
bool inode_data_version(struct inode *ip, struct dver *v);

/* Marks ip as having had POSIX locks; returns the previous value. */
bool inode_mark_posix_locks(struct inode *ip);
/* True once inode_mark_posix_locks was called for ip. */
bool inode_had_posix_locks(struct inode *ip);

/* Opens answered locally (ops_common.c). The kernel checks the mode bits
 * itself (default_permissions) against attributes known current; what
 * only the server knows is how it maps the caller (root_squash,
 * all_squash), which depends on the caller's ids alone. So a read-only
 * open is answered locally only for the uid and gid the server last let
 * read the file: inode_note_reader records them, inode_is_reader
 * compares. */
void inode_note_reader(struct inode *ip, uint32_t uid, uint32_t gid);
bool inode_is_reader(struct inode *ip, uint32_t uid, uint32_t gid);

/* A walk: directory dir was just read by a READDIR the daemon answered,
 * or a subdirectory was looked up in it during one (inode_note_walk);
 * inode_walked: within the last within_ns (its subdirectories looked up
 * then are the walk's next). */
void inode_note_walk(struct inode *dir);
bool inode_walked(struct inode *dir, int64_t within_ns);

/* The data version of a. */
struct dver dver_of(const struct pfs_attr *a);
/* True if a and b are the same version. */
bool dver_eq(const struct dver *a, const struct dver *b);

/* Converts wire attributes to a struct stat (st is overwritten). */
void attr_to_stat(const struct pfs_attr *a, struct stat *st);

#endif /* PODFS_INODE_I_H */
