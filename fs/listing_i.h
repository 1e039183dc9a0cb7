/* listing_i.h: directory listings (LISTDIR, wire_list.h), from which lookups
 * and READDIR in a directory are answered at a cold start.
 *
 * listing_set takes a LISTDIR reply payload, checks it and keeps it as
 * the directory's listing, with an index of its names; listing_find
 * looks a name up in it. The caller decides whether it is still coherent
 * (no push about the directory since li->seq, see gate_i.h) and calls
 * listing_stale if not (no listing is fetched for that directory for
 * LISTING_QUIET_NS); listing_drop: never again (it was incomplete).
 * This client's own namespace changes in a directory are never pushed
 * back: its own creates, unlinks and renames within the directory put
 * the listing right (listing_add, listing_remove), any other drops it
 * (listing_touch, called before sending the change), and a listing
 * fetched before it (li->ns, from listing_gen) is not kept (-ESTALE).
 * Own changes of an object listed there mark its item stale instead
 * (listing_mark, see trust_i.h).
 *
 * The listing of dir is dir->listing, under dir->lock, which every
 * function here takes itself (listing_mark excepted). All listings of a
 * table together stay under LISTING_TOTAL_MAX bytes. Any thread.
 */
#ifndef PODFS_LISTING_I_H
#define PODFS_LISTING_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "inode_i.h"
#include "podfs/codec.h"

/* When and by whom a listing was fetched. */
struct listing_info {
	uint64_t seq, any, own_ns; /* push number, inode_own_snap */
	uint64_t ns;               /* listing_gen */
	uint32_t uid, gid;
	bool cookies; /* its header and items have cookies (PFS_CAP_LIST_COOKIES) */
};

/* What listing_find found. */
enum { LS_NONE, LS_ABSENT, LS_PRESENT };

#define INODE_LS_STALE (1u << 31) /* item flag, local: changed by this client */
#define INODE_LS_GONE (1u << 30)  /* item flag, local: removed by this client */
#define LISTING_QUIET_NS (2 * 1000000000LL)
#define LISTING_TOTAL_MAX (64ll << 20)

/* Takes buf (malloc'd LISTDIR reply payload of len bytes, freed on
 * failure too), checks it and keeps it as dir's listing (replacing any),
 * fetched as li says (li->ns from listing_gen before the request was
 * sent). Returns 0, -EBADMSG (malformed), -ENOMEM, -ENOSPC (the table's
 * listings together over LISTING_TOTAL_MAX) or -ESTALE (this client
 * changed dir since li->ns: not kept, and none is fetched for
 * LISTING_QUIET_NS while the directory is busy with its changes). */
int listing_set(struct inode_table *t, struct inode *dir, uint8_t *buf, size_t len,
		const struct listing_info *li);

/* Looks name up in dir's listing. Returns LS_NONE (no listing),
 * LS_ABSENT, or LS_PRESENT with *e, the item's PFS_LD_* (and
 * INODE_LS_STALE) *flags and, if the listing carried the whole content
 * of a regular file, *data (malloc'd copy, the caller frees it; NULL if
 * none or on ENOMEM) and *dlen. *li (set unless LS_NONE) tells when and
 * by whom the listing was fetched. */
int listing_find(struct inode *dir, const char *name, struct pfs_entry *e, uint8_t **data,
		 uint32_t *dlen, uint32_t *flags, struct listing_info *li);

/* This client's own create of name (entry e) in dir: adds it to dir's
 * listing, if dir has one, instead of dropping it (the kernel holds dir's
 * lock across the create, so no lookup there used the listing meanwhile;
 * a push from another host's change since it was fetched still makes it
 * stale at its next use). Returns 0, or -errno with the listing left as
 * it was (-EEXIST: the name is in it, -ENAMETOOLONG, -ENOMEM, -EINVAL):
 * the caller then drops it (listing_touch). -ENOENT: dir has no listing;
 * one asked for before is not kept (as by listing_changing, under the
 * same lock), and none is held off: a listing fetched later has the
 * name, and this client's next creates keep it up to date. */
int listing_add(struct inode *dir, const char *name, const struct pfs_entry *e);

/* This client is about to remove a name of dir, and will tell with
 * listing_remove (or listing_touch): a listing asked for before is not
 * kept; dir's stays. */
void listing_changing(struct inode *dir);
/* This client's own unlink of name in dir, or the old name of its own
 * rename within dir (the kernel holds dir's lock across either; a push
 * from another host's change since the listing was fetched still makes
 * it stale at its next use): the item goes from dir's listing
 * (INODE_LS_GONE: lookups find no such name, READDIR skips it, the
 * others keep their cookies), which stays complete; a listing asked for
 * before is not kept. Returns 0, or -ENOENT (no listing, or the name is
 * not in it). */
int listing_remove(struct inode *dir, const char *name);

/* Drops dir's listing for good (it was incomplete): lookups there go
 * name by name. */
void listing_drop(struct inode *dir);
/* Drops dir's listing (it is not coherent any more) and fetches none for
 * LISTING_QUIET_NS. */
void listing_stale(struct inode *dir);
/* This client is about to change names in dir: as listing_stale, and a
 * listing asked for before is not kept. */
void listing_touch(struct inode *dir);
/* The count of this client's namespace changes in dir (for
 * listing_info.ns). */
uint64_t listing_gen(struct inode *dir);
/* True if a lookup in dir may fetch a listing first: dir is a directory
 * of at most max_size bytes (st_size) without a listing, never found
 * incomplete, out of its quiet period, and nobody is fetching one. */
bool listing_may_fetch(struct inode *dir, uint64_t max_size);
/* True if dir still wants a listing: a directory without one, never
 * found incomplete. For a fetch the caller chose already (after
 * listing_fetch_begin, or one queued ahead): only a listing that came
 * meanwhile, or a refusal, spares it. */
bool listing_missing(struct inode *dir);

/* As listing_may_fetch, and then the caller fetches it: no other thread
 * does until listing_fetch_end (true returned; false: do not fetch).
 * after (0: none): a lookup in dir that found no listing counts, and a
 * listing is fetched only at the after-th such lookup since the last
 * fetch, or the (st_size / per_bytes)-th if more (per_bytes 0: not):
 * a directory too large to be listed at its first lookup is listed once
 * lookups there keep missing (a stat storm, a walk), the larger the
 * later. listing_fetch_end: the fetch is over (whatever it brought); the
 * count starts again. */
bool listing_fetch_begin(struct inode *dir, uint64_t max_size, uint32_t after,
			 uint32_t per_bytes);
void listing_fetch_end(struct inode *dir);

/* Marks the item of name hash nh (name_hash) and handle fh in dir's
 * listing stale (INODE_LS_STALE) and counts a namespace change of dir (a
 * listing asked for before is not kept). A listing asked for after it is
 * not held off: its item of the object is not used while the change is
 * pending, nor after it (inode_listed_stale). The caller holds dir->lock
 * (trust.c). */
void listing_mark(struct inode *dir, uint64_t nh, const struct pfs_fh *fh);

/* Writes dir's listing as a READDIR reply payload (wire.h: eof byte 1,
 * then every listed name with its entry, and "." and "..", in the
 * server's order and with its cookies (wire_list.h); items marked stale
 * without their entry; names this client removed left out) into a new
 * buffer (*buf, *len; the caller frees it), with the listing's *li and
 * the push number *parent_seq of the request that found "..". With
 * iflags not NULL, *iflags is a new array (the caller frees it) of the
 * flags (PFS_LD_*, INODE_LS_STALE; 0 for the dots) of each entry
 * written, in order. Returns 0, -ENOENT if dir has no listing, or none
 * with the server's cookies (from a server without PFS_CAP_LIST_COOKIES,
 * or with a name this client made since, whose cookie it does not know),
 * or if its parent is not known (none recorded, or a rename of ours
 * since), -ENOMEM or -EBADMSG. The caller checks the listing is
 * coherent, as for listing_find. */
int listing_readdir(struct inode_table *t, struct inode *dir, uint8_t **buf, size_t *len,
		    uint32_t **iflags, struct listing_info *li, uint64_t *parent_seq);

/* Copies into out[max] the entries of dir's listing that are
 * directories of at most max_size bytes (st_size), in listing order,
 * items marked stale excepted. Returns how many (0 without a listing). */
size_t listing_subdirs(struct inode *dir, uint64_t max_size, struct pfs_entry *out, size_t max);

/* As listing_subdirs, among the span entries that follow name in dir's
 * listing, past those an earlier call looked at (the listing keeps how
 * far they went: each entry is looked at once per listing). Returns how
 * many (0 without a listing, or without name in it). */
size_t listing_subdirs_next(struct inode *dir, const char *name, size_t span, uint64_t max_size,
			    struct pfs_entry *out, size_t max);

/* The bytes all listings of t take now (counted against
 * LISTING_TOTAL_MAX). */
int64_t listing_bytes(struct inode_table *t);

/* Frees ls (dir->listing of an inode being freed) and its bytes' count.
 * Safe on NULL. */
void listing_free(struct listing *ls);

#endif /* PODFS_LISTING_I_H */
