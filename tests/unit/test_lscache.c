/* test_lscache.c: listings kept to be served again (daemon/lscache.c).
 *
 * The key tells apart what decides a listing's bytes (directory, caller,
 * groups, squashing, contents, room with contents, xattrs); a stored
 * listing is served with its bytes until the change sequence moves or it
 * expires, and never once the sequence moved, even when it moved while it
 * was being built; references keep a dropped entry's bytes valid; the
 * memory limit evicts the least recently used; a listing is worth storing
 * from the second time it is asked for under one sequence.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "lscache_i.h"

static struct pfs_fh fh_of(uint8_t v)
{
	struct pfs_fh fh;
	memset(&fh, 0, sizeof(fh));
	fh.len = 24;
	memset(fh.data, v, fh.len);
	return fh;
}

static struct pfs_creds creds(uint32_t uid, uint32_t gid, uint16_t ng)
{
	struct pfs_creds c;
	memset(&c, 0, sizeof(c));
	c.uid = uid;
	c.gid = gid;
	c.ngroups = ng;
	for (uint16_t i = 0; i < ng; i++)
		c.groups[i] = 100 + i;
	return c;
}

static bool key_eq(const struct lscache_key *a, const struct lscache_key *b)
{
	return a->len == b->len && memcmp(a->b, b->b, a->len) == 0;
}

static void test_key_tells_apart_what_decides_a_listing(void)
{
	struct pfs_fh d1 = fh_of(1), d2 = fh_of(2);
	struct pfs_creds c = creds(1000, 1000, 2), c2;
	struct lscache_key a, b;

	lscache_key_make(&a, &d1, &c, false, 65536, 1 << 20, true);
	lscache_key_make(&b, &d1, &c, false, 65536, 1 << 20, true);
	CHECK(key_eq(&a, &b));
	lscache_key_make(&b, &d2, &c, false, 65536, 1 << 20, true);
	CHECK(!key_eq(&a, &b));
	c2 = c;
	c2.uid = 1001;
	lscache_key_make(&b, &d1, &c2, false, 65536, 1 << 20, true);
	CHECK(!key_eq(&a, &b));
	c2 = c;
	c2.gid = 7;
	lscache_key_make(&b, &d1, &c2, false, 65536, 1 << 20, true);
	CHECK(!key_eq(&a, &b));
	c2 = c;
	c2.groups[1] = 9;
	lscache_key_make(&b, &d1, &c2, false, 65536, 1 << 20, true);
	CHECK(!key_eq(&a, &b));
	c2 = creds(1000, 1000, 1);
	lscache_key_make(&b, &d1, &c2, false, 65536, 1 << 20, true);
	CHECK(!key_eq(&a, &b));
	lscache_key_make(&b, &d1, NULL, false, 65536, 1 << 20, true);
	CHECK(!key_eq(&a, &b));
	lscache_key_make(&b, &d1, &c, true, 65536, 1 << 20, true);
	CHECK(!key_eq(&a, &b));
	lscache_key_make(&b, &d1, &c, false, 4096, 1 << 20, true);
	CHECK(!key_eq(&a, &b));
	lscache_key_make(&b, &d1, &c, false, 65536, 1 << 19, true);
	CHECK(!key_eq(&a, &b));
	lscache_key_make(&b, &d1, &c, false, 65536, 1 << 20, false);
	CHECK(!key_eq(&a, &b));
	/* Cookies asked or not (export_listdir's how: xattrs 1, cookies 2). */
	lscache_key_make(&b, &d1, &c, false, 65536, 1 << 20, 1 | 2);
	CHECK(!key_eq(&a, &b));
	lscache_key_make(&a, &d1, &c, false, 65536, 1 << 20, 2);
	CHECK(!key_eq(&a, &b));
	lscache_key_make(&a, &d1, &c, false, 65536, 1 << 20, 1);
	/* Groups past ngroups do not count. */
	c2 = c;
	c2.groups[5] = 12345;
	lscache_key_make(&b, &d1, &c2, false, 65536, 1 << 20, true);
	CHECK(key_eq(&a, &b));
	/* Without contents the room does not count (kept only complete). */
	lscache_key_make(&a, &d1, &c, false, 0, 1 << 20, true);
	lscache_key_make(&b, &d1, &c, false, 0, 12345, true);
	CHECK(key_eq(&a, &b));
	/* The largest key fits. */
	struct pfs_fh big;
	memset(&big, 0xab, sizeof(big));
	big.len = PFS_FH_MAX;
	c2 = creds(1, 2, PFS_GROUPS_MAX);
	lscache_key_make(&a, &big, &c2, true, 65536, 1 << 20, true);
	CHECK(a.len <= sizeof(a.b));
}

static void test_served_until_a_change(void)
{
	struct lscache *c = lscache_new(1 << 20, 10000);
	struct pfs_fh d = fh_of(1);
	struct pfs_creds cr = creds(0, 0, 0);
	struct lscache_key k, other;
	struct lsent *e;
	const uint8_t *p;
	size_t len;
	uint64_t seq;

	lscache_key_make(&k, &d, &cr, false, 65536, 1 << 20, true);
	lscache_key_make(&other, &d, &cr, false, 0, 1 << 20, true);
	CHECK(lscache_get(c, &k, 100) == NULL);
	seq = lscache_seq(c);
	lscache_store(c, &k, seq, 100, "listing-1", 9);
	e = lscache_get(c, &k, 200);
	CHECK(e != NULL);
	if (e) {
		p = lsent_data(e, &len);
		CHECK_EQ(len, 9);
		CHECK(memcmp(p, "listing-1", 9) == 0);
		CHECK_EQ(lsent_seq(e), seq);
		lscache_put(c, e);
	}
	CHECK(lscache_get(c, &other, 200) == NULL);
	/* A change: never served again, and the memory goes. */
	lscache_bump(c);
	CHECK(lscache_seq(c) != seq);
	CHECK(lscache_get(c, &k, 300) == NULL);
	struct lscache_stats st;
	lscache_stats(c, &st);
	CHECK_EQ(st.entries, 0);
	CHECK_EQ(st.bytes, 0);
	lscache_free(c);
}

static void test_change_while_building_is_not_stored(void)
{
	struct lscache *c = lscache_new(1 << 20, 10000);
	struct pfs_fh d = fh_of(3);
	struct lscache_key k;
	uint64_t seq;

	lscache_key_make(&k, &d, NULL, false, 0, 0, false);
	seq = lscache_seq(c); /* read before the directory */
	lscache_bump(c);      /* a change while it was read */
	lscache_store(c, &k, seq, 10, "stale", 5);
	CHECK(lscache_get(c, &k, 20) == NULL);
	/* Built again after it: kept. */
	seq = lscache_seq(c);
	lscache_store(c, &k, seq, 30, "fresh", 5);
	struct lsent *e = lscache_get(c, &k, 40);
	CHECK(e != NULL);
	lscache_put(c, e);
	lscache_free(c);
}

static void test_reference_outlives_a_change(void)
{
	struct lscache *c = lscache_new(1 << 20, 10000);
	struct pfs_fh d = fh_of(4);
	struct lscache_key k;
	const uint8_t *p;
	size_t len;

	lscache_key_make(&k, &d, NULL, false, 0, 0, false);
	lscache_store(c, &k, lscache_seq(c), 0, "abcdef", 6);
	struct lsent *e = lscache_get(c, &k, 1);
	CHECK(e != NULL);
	if (!e) {
		lscache_free(c);
		return;
	}
	uint64_t seq = lsent_seq(e);
	lscache_bump(c);
	/* The holder sees the sequence moved (and does not serve it)... */
	CHECK(lscache_seq(c) != seq);
	/* ...while a store or lookup drops the entry under it. */
	CHECK(lscache_get(c, &k, 2) == NULL);
	p = lsent_data(e, &len);
	CHECK_EQ(len, 6);
	CHECK(memcmp(p, "abcdef", 6) == 0);
	lscache_put(c, e);
	lscache_free(c);
}

static void test_expires(void)
{
	struct lscache *c = lscache_new(1 << 20, 1000);
	struct pfs_fh d = fh_of(5);
	struct lscache_key k;
	struct lsent *e;

	lscache_key_make(&k, &d, NULL, false, 0, 0, false);
	lscache_store(c, &k, lscache_seq(c), 5000, "x", 1);
	e = lscache_get(c, &k, 5999);
	CHECK(e != NULL);
	lscache_put(c, e);
	CHECK(lscache_get(c, &k, 6000) == NULL);
	/* A clock that went back does not keep it either. */
	lscache_store(c, &k, lscache_seq(c), 5000, "x", 1);
	CHECK(lscache_get(c, &k, 4000) == NULL);
	lscache_free(c);
}

static void test_limit_evicts_least_recently_used(void)
{
	size_t item = 1000, cost;
	uint8_t *buf = calloc(1, 8 * item);
	struct lscache_key k[6];
	struct lscache_stats st;
	struct lscache *c;
	struct lsent *e;

	for (int i = 0; i < 6; i++) {
		struct pfs_fh d = fh_of((uint8_t)(10 + i));
		lscache_key_make(&k[i], &d, NULL, false, 0, 0, false);
	}
	/* What one entry costs, key and bookkeeping included. */
	c = lscache_new(1 << 20, 10000);
	lscache_store(c, &k[0], lscache_seq(c), 0, buf, item);
	lscache_stats(c, &st);
	cost = st.bytes;
	CHECK(cost > item);
	lscache_free(c);

	/* Room for four. */
	c = lscache_new(4 * cost + cost / 2, 10000);
	for (int i = 0; i < 4; i++)
		lscache_store(c, &k[i], lscache_seq(c), 0, buf, item);
	lscache_stats(c, &st);
	CHECK_EQ(st.entries, 4);
	/* k[0] used last: k[1] goes first. */
	e = lscache_get(c, &k[0], 1);
	CHECK(e != NULL);
	lscache_put(c, e);
	lscache_store(c, &k[4], lscache_seq(c), 0, buf, item);
	lscache_stats(c, &st);
	CHECK_EQ(st.entries, 4);
	CHECK(st.bytes <= 4 * cost + cost / 2);
	CHECK((e = lscache_get(c, &k[0], 2)) != NULL);
	lscache_put(c, e);
	CHECK(lscache_get(c, &k[1], 2) == NULL);
	CHECK((e = lscache_get(c, &k[4], 2)) != NULL);
	lscache_put(c, e);
	/* An entry over a quarter of the cache is not kept. */
	lscache_store(c, &k[5], lscache_seq(c), 0, buf, 2 * item);
	CHECK(lscache_get(c, &k[5], 3) == NULL);
	/* Storing again replaces. */
	lscache_store(c, &k[4], lscache_seq(c), 0, "new", 3);
	e = lscache_get(c, &k[4], 4);
	CHECK(e != NULL);
	if (e) {
		size_t len;
		const uint8_t *p = lsent_data(e, &len);
		CHECK_EQ(len, 3);
		CHECK(memcmp(p, "new", 3) == 0);
		lscache_put(c, e);
	}
	lscache_hit(c);
	(void)lscache_miss(c, &k[0]);
	(void)lscache_miss(c, &k[0]);
	lscache_stats(c, &st);
	CHECK_EQ(st.hits, 1);
	CHECK_EQ(st.misses, 2);
	free(buf);
	lscache_free(c);
}

static void test_stored_from_the_second_ask(void)
{
	struct lscache *c = lscache_new(1 << 20, 10000);
	struct pfs_creds cr = creds(1000, 1000, 0);
	struct lscache_key k1, k2;
	struct pfs_fh d1 = fh_of(1), d2 = fh_of(2);

	lscache_key_make(&k1, &d1, &cr, false, 0, 0, false);
	lscache_key_make(&k2, &d2, &cr, false, 0, 0, false);
	/* Asked once: not worth a copy; twice: stored. */
	CHECK(!lscache_miss(c, &k1));
	CHECK(!lscache_miss(c, &k2));
	CHECK(lscache_miss(c, &k1));
	CHECK(lscache_miss(c, &k2));
	/* After a change, asked once again first. */
	lscache_bump(c);
	CHECK(!lscache_miss(c, &k1));
	CHECK(lscache_miss(c, &k1));
	lscache_free(c);
}

int main(void)
{
	test_stored_from_the_second_ask();
	test_key_tells_apart_what_decides_a_listing();
	test_served_until_a_change();
	test_change_while_building_is_not_stored();
	test_reference_outlives_a_change();
	test_expires();
	test_limit_evicts_least_recently_used();
	return check_done("test_lscache");
}
