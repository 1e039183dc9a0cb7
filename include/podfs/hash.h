/* hash.h: the one hash function of both programs, for in-memory tables
 * (htab.h) and keys. Not a cryptographic hash: where a peer chooses the
 * input and a collision would matter, seed it with a secret (podfsd's
 * interest keys are).
 */
#ifndef PODFS_HASH_H
#define PODFS_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PFS_FNV1A_INIT 0xcbf29ce484222325ull

/* FNV-1a over p[n], continuing from h (start with PFS_FNV1A_INIT): the
 * raw value, whose low bits are poorly mixed. pfs_hash_bytes is what a
 * table wants; this is for formats that name its result (pcache_fmt.h). */
static inline uint64_t pfs_fnv1a(const void *p, size_t n, uint64_t h)
{
	const uint8_t *s = p;

	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* Mixes x so that every bit of the result depends on every bit of x
 * (the splitmix64 finalizer; a bijection, so distinct inputs stay
 * distinct). A hash of a 64-bit key. */
static inline uint64_t pfs_hash_u64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

/* pfs_hash_u64 under a secret key k (random, per process): for tables
 * whose keys a peer chooses (request ids, fid numbers, client ids), so
 * that it cannot pick keys that share a bucket. Two rounds of the
 * finalizer with the key between them; not a cryptographic hash. */
static inline uint64_t pfs_hash_u64_keyed(uint64_t x, const uint64_t k[2])
{
	return pfs_hash_u64(pfs_hash_u64(x ^ k[0]) ^ k[1]);
}

/* A well-mixed hash of p[n] under seed (0 where no secret is needed). */
static inline uint64_t pfs_hash_bytes(const void *p, size_t n, uint64_t seed)
{
	return pfs_hash_u64(pfs_fnv1a(p, n, PFS_FNV1A_INIT ^ seed));
}

/* The same role as pfs_hash_bytes, eight bytes at a time (a handle of
 * 40 bytes costs a fifth): for keys hashed on every request, such as
 * file handles. Its values differ from pfs_hash_bytes's; never stored
 * nor sent. */
static inline uint64_t pfs_hash_words(const void *p, size_t n, uint64_t seed)
{
	const uint8_t *s = p;
	uint64_t h = PFS_FNV1A_INIT ^ seed ^ n, w;

	for (; n >= 8; s += 8, n -= 8) {
		memcpy(&w, s, 8);
		h = (h ^ w) * 0x100000001b3ull;
		h ^= h >> 29;
	}
	w = 0;
	memcpy(&w, s, n);
	return pfs_hash_u64(h ^ w);
}

#endif /* PODFS_HASH_H */
