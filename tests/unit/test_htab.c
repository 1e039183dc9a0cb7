/* test_htab.c: the intrusive hash table (lib/htab.c) and the hash and
 * little-endian helpers every table and codec builds on (hash.h, le.h).
 *
 * The table is checked against a plain array model under a random mix of
 * inserts and removals, through growth, with colliding hashes, and for
 * teardown (pop, any, iter, fini and init again).
 */
#include <stdlib.h>

#include "check.h"
#include "podfs/hash.h"
#include "podfs/htab.h"
#include "podfs/le.h"

struct obj {
	struct hnode hn;
	uint64_t key;
	bool in;
};

#define NOBJ 5000

static struct obj objs[NOBJ];

/* The hash under test: some keys share a hash on purpose. */
static uint64_t key_hash(uint64_t key)
{
	return key % 7 == 0 ? 42 : pfs_hash_u64(key);
}

static struct obj *find(const struct htab *t, uint64_t key)
{
	uint64_t h = key_hash(key);

	for (struct hnode *n = htab_first(t, h); n; n = htab_next(n, h)) {
		struct obj *o = container_of(n, struct obj, hn);
		if (o->key == key)
			return o;
	}
	return NULL;
}

static void test_empty(void)
{
	struct htab t;
	size_t pos;

	htab_init(&t);
	CHECK_EQ(t.n, 0);
	CHECK(htab_first(&t, 1) == NULL);
	CHECK(htab_pop(&t) == NULL);
	CHECK(htab_any(&t) == NULL);
	CHECK(htab_iter(&t, &pos, NULL) == NULL);
	htab_fini(&t);
	htab_fini(&t); /* twice is harmless */
}

static void test_model(void)
{
	struct htab t;
	uint64_t rs = 7;
	size_t in = 0;

	htab_init(&t);
	for (size_t i = 0; i < NOBJ; i++) {
		objs[i].key = i * 3 + 1;
		objs[i].in = false;
	}
	for (int round = 0; round < 60000; round++) {
		struct obj *o = &objs[test_rand(&rs) % NOBJ];
		if (o->in) {
			htab_remove(&t, &o->hn);
			o->in = false;
			in--;
		} else {
			htab_insert(&t, &o->hn, key_hash(o->key));
			o->in = true;
			in++;
		}
		if (!CHECK_EQ(t.n, in))
			break;
		if (round % 997 == 0) {
			for (size_t i = 0; i < NOBJ; i++) {
				struct obj *f = find(&t, objs[i].key);
				if (!CHECK(f == (objs[i].in ? &objs[i] : NULL)))
					break;
			}
		}
	}
	/* The table grew past its inline buckets. */
	CHECK(t.nb > HTAB_MIN);

	/* iter visits every node once. */
	size_t pos, seen = 0;
	for (struct hnode *n = htab_iter(&t, &pos, NULL); n; n = htab_iter(&t, &pos, n)) {
		struct obj *o = container_of(n, struct obj, hn);
		CHECK(o->in);
		seen++;
	}
	CHECK_EQ(seen, in);

	/* any + remove, then pop, empty the table. */
	for (int k = 0; k < 10 && t.n; k++) {
		struct hnode *n = htab_any(&t);
		CHECK(n != NULL);
		htab_remove(&t, n);
		container_of(n, struct obj, hn)->in = false;
		in--;
	}
	struct hnode *n;
	while ((n = htab_pop(&t))) {
		struct obj *o = container_of(n, struct obj, hn);
		CHECK(o->in);
		o->in = false;
		in--;
	}
	CHECK_EQ(in, 0);
	CHECK_EQ(t.n, 0);
	htab_fini(&t);

	/* A table can be used again after fini. */
	htab_init(&t);
	htab_insert(&t, &objs[0].hn, key_hash(objs[0].key));
	CHECK(find(&t, objs[0].key) == &objs[0]);
	CHECK(htab_pop(&t) == &objs[0].hn);
	htab_fini(&t);
}

static void test_hash(void)
{
	/* FNV-1a reference values ("" and "a"). */
	CHECK(pfs_fnv1a("", 0, PFS_FNV1A_INIT) == 0xcbf29ce484222325ull);
	CHECK(pfs_fnv1a("a", 1, PFS_FNV1A_INIT) == 0xaf63dc4c8601ec8cull);
	/* Chaining equals hashing the concatenation. */
	CHECK(pfs_fnv1a("ab", 2, PFS_FNV1A_INIT) ==
	      pfs_fnv1a("b", 1, pfs_fnv1a("a", 1, PFS_FNV1A_INIT)));
	/* The seed matters; equal input and seed give equal hashes. */
	CHECK(pfs_hash_bytes("abc", 3, 0) == pfs_hash_bytes("abc", 3, 0));
	CHECK(pfs_hash_bytes("abc", 3, 0) != pfs_hash_bytes("abc", 3, 1));
	CHECK(pfs_hash_u64(0) == 0);
	CHECK(pfs_hash_u64(1) != pfs_hash_u64(2));
	/* Low bits are mixed: consecutive keys spread over 16 buckets. */
	unsigned hits[16] = { 0 };
	for (uint64_t k = 0; k < 1600; k++)
		hits[pfs_hash_u64(k) & 15]++;
	for (int i = 0; i < 16; i++)
		CHECK(hits[i] > 50 && hits[i] < 150);

	/* pfs_hash_words: every byte counts, in the words and in the tail,
	 * and so do the length and the seed; low bits spread. */
	uint8_t a[45] = { 0 }, b[45];
	CHECK(pfs_hash_words(a, 45, 0) == pfs_hash_words(a, 45, 0));
	CHECK(pfs_hash_words(a, 45, 0) != pfs_hash_words(a, 45, 1));
	CHECK(pfs_hash_words(a, 44, 0) != pfs_hash_words(a, 45, 0));
	CHECK(pfs_hash_words(a, 8, 0) != pfs_hash_words(a, 9, 0));
	for (size_t i = 0; i < sizeof(a); i++) {
		memcpy(b, a, sizeof(a));
		b[i] ^= 0x40;
		CHECK(pfs_hash_words(a, 45, 0) != pfs_hash_words(b, 45, 0));
	}
	memset(hits, 0, sizeof(hits));
	for (uint32_t k = 0; k < 1600; k++) {
		memcpy(b, a, sizeof(a));
		memcpy(b + 20, &k, sizeof(k));
		hits[pfs_hash_words(b, 45, 0) & 15]++;
	}
	for (int i = 0; i < 16; i++)
		CHECK(hits[i] > 50 && hits[i] < 150);
}

static void test_le(void)
{
	uint8_t b[9] = { 0 };

	pfs_store_le16(b + 1, 0x0102);
	CHECK(b[1] == 0x02 && b[2] == 0x01);
	CHECK_EQ(pfs_load_le16(b + 1), 0x0102);
	pfs_store_le32(b + 1, 0x01020304u);
	CHECK(b[1] == 0x04 && b[4] == 0x01);
	CHECK_EQ(pfs_load_le32(b + 1), 0x01020304u);
	pfs_store_le64(b + 1, 0x0102030405060708ull);
	CHECK(b[1] == 0x08 && b[8] == 0x01);
	CHECK(pfs_load_le64(b + 1) == 0x0102030405060708ull);
}

int main(void)
{
	test_empty();
	test_model();
	test_hash();
	test_le();
	return check_done("test_htab");
}
