/* htab_i.h: a small intrusive chained hash table used by the daemon's tables
 * (sessions, fids, locks, reply cache, handle cache).
 *
 * The table stores struct hnode links embedded in the caller's objects and
 * the 64-bit hash of each; key comparison is the caller's job:
 *
 *   for (n = htab_first(t, h); n; n = htab_next(n, h))
 *           if (key_matches(container_of(n, ...))) ...
 *
 * Not thread-safe: the owner of a table serializes access (the loop thread or
 * a mutex). htab_init() and htab_insert() may fail only on out-of-memory:
 * the daemon's policy is to abort on OOM (see xmalloc in pfsd_i.h).
 */
#ifndef PODFSD_HTAB_I_H
#define PODFSD_HTAB_I_H

#include <stddef.h>
#include <stdint.h>

struct hnode {
	struct hnode *next;
	uint64_t hash;
};

struct htab {
	struct hnode **b; /* nb buckets, nb is a power of two */
	size_t nb;
	size_t n;
};

void htab_init(struct htab *t);
/* Frees the bucket array only; the caller frees the nodes first. */
void htab_fini(struct htab *t);
void htab_insert(struct htab *t, struct hnode *n, uint64_t hash);
void htab_remove(struct htab *t, struct hnode *n);
struct hnode *htab_first(const struct htab *t, uint64_t hash);
struct hnode *htab_next(const struct hnode *n, uint64_t hash);
/* Removes and returns any node, or NULL when empty (for teardown loops). */
struct hnode *htab_pop(struct htab *t);
/* Returns any node without removing it, or NULL when empty. */
struct hnode *htab_any(const struct htab *t);

static inline uint64_t hash_u64(uint64_t x)
{
	/* splitmix64 finalizer */
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static inline uint64_t hash_bytes(const void *p, size_t n, uint64_t seed)
{
	const uint8_t *s = p;
	uint64_t h = 0xcbf29ce484222325ull ^ seed;
	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= 0x100000001b3ull;
	}
	return hash_u64(h);
}

#ifndef container_of
#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))
#endif

#endif /* PODFSD_HTAB_I_H */
