/* htab.h: an intrusive chained hash table, for the tables of both
 * programs (sessions, fids, reply cache and handles in podfsd; inodes,
 * names, pending calls and cache entries in podfs).
 *
 * The table links struct hnode members embedded in the caller's objects
 * and keeps the 64-bit hash of each; comparing keys is the caller's job:
 *
 *   for (n = htab_first(t, h); n; n = htab_next(n, h))
 *           if (key_matches(container_of(n, struct obj, hn)))
 *                   ...
 *
 * Memory: the first HTAB_MIN buckets live inside struct htab, so
 * htab_init and htab_insert never fail. The bucket array doubles once a
 * table holds as many objects as buckets; if that allocation fails the
 * table keeps its buckets (longer chains, same answers). So a struct
 * htab must not be copied or moved once initialised (it may point into
 * itself). Nothing here aborts or logs.
 *
 * Hashes: give well-mixed 64-bit values (hash.h); the bucket is chosen
 * by the low bits.
 *
 * Not thread-safe: the owner of a table serialises every call (one
 * thread, or a mutex).
 */
#ifndef PODFS_HTAB_H
#define PODFS_HTAB_H

#include <stddef.h>
#include <stdint.h>

#define HTAB_MIN 16 /* buckets inside struct htab (a power of two) */

struct hnode {
	struct hnode *next;
	uint64_t hash;
};

struct htab {
	struct hnode **b; /* nb buckets (a power of two): small, or malloc'd */
	size_t nb;
	size_t n;         /* objects in the table */
	size_t pop_at;    /* where htab_pop looks first (the bucket it last emptied from) */
	struct hnode *small[HTAB_MIN];
};

/* Makes t an empty table. Never fails. */
void htab_init(struct htab *t);
/* Frees the bucket array; the caller has removed (and freed) the nodes,
 * or does not need them linked any more. t may be initialised again. */
void htab_fini(struct htab *t);
/* Links n under hash. n must not be in a table. Never fails. */
void htab_insert(struct htab *t, struct hnode *n, uint64_t hash);
/* Unlinks n, which must be in t. */
void htab_remove(struct htab *t, struct hnode *n);
/* The first node whose hash is hash, or NULL. */
struct hnode *htab_first(const struct htab *t, uint64_t hash);
/* The next node after n whose hash is hash, or NULL. */
struct hnode *htab_next(const struct hnode *n, uint64_t hash);
/* Removes and returns some node, or NULL when t is empty (teardown).
 * Emptying a table this way costs O(buckets + nodes) in all. */
struct hnode *htab_pop(struct htab *t);
/* Returns some node without removing it, or NULL when t is empty. */
struct hnode *htab_any(const struct htab *t);
/* Visits every node, in no particular order: start with
 * n = htab_iter(t, &pos, NULL), go on with n = htab_iter(t, &pos, n)
 * until NULL. The table must not change during the walk (to empty it,
 * use htab_pop). */
struct hnode *htab_iter(const struct htab *t, size_t *pos, const struct hnode *n);

#ifndef container_of
#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))
#endif

#endif /* PODFS_HTAB_H */
