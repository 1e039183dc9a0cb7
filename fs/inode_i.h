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

struct inode {
	struct inode *hnext;  /* table lock */
	uint64_t hash;
	uint64_t nlookup;     /* table lock */
	fuse_ino_t nodeid;

	pthread_mutex_t lock; /* guards the fields below */
	struct pfs_attr attr; /* last attributes seen */
	struct dver cached;   /* version the kernel's pages belong to */
	bool cached_valid;
	bool had_posix_locks; /* this client ever set a POSIX lock here */
	int64_t nocaps_until; /* CLOCK_MONOTONIC ns: "no security.capability" known till then */

	struct pfs_fh fh;     /* immutable */
};

struct inode_table;

/* Creates the table with the root entry. Returns 0 or -ENOMEM. */
int inode_table_new(const struct pfs_entry *root, struct inode_table **out);
/* Frees the table and every inode left in it. */
void inode_table_free(struct inode_table *t);

/* The inode of a nodeid the kernel passed in (never NULL for a valid one). */
struct inode *inode_get(struct inode_table *t, fuse_ino_t ino);

/* Finds or creates the inode for e->fh, adds one lookup and records
 * e->attr. Returns NULL on ENOMEM. */
struct inode *inode_ref(struct inode_table *t, const struct pfs_entry *e);

/* Subtracts n lookups; frees the inode at 0 (except the root). */
void inode_forget(struct inode_table *t, struct inode *ip, uint64_t n);

/* The nodeid currently mapped to fh, without adding a lookup, for a
 * server push: forgets the remembered capability absence and, with
 * drop_cached, the cached-pages version (its pages are being
 * invalidated). Returns false if the kernel does not know fh. */
bool inode_find(struct inode_table *t, const struct pfs_fh *fh, bool drop_cached,
		fuse_ino_t *nodeid);

/* Records attributes the server returned. */
void inode_set_attr(struct inode *ip, const struct pfs_attr *a);

/* Open (close-to-open): records a's version as the version of the pages
 * the kernel will cache and returns true if it equals the version of the
 * pages cached before (keep_cache is then safe). *attrs_stale is set if a
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

/* Converts wire attributes to a struct stat. */
void attr_to_stat(const struct pfs_attr *a, struct stat *st);

#endif /* PODFS_INODE_I_H */
