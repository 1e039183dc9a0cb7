/* test_chunkstore.c: the client's store of chunks for peer-assisted
 * reads (fs/chunkstore.c).
 *
 * One chunk per digest (a second maker joins it), the memory bound
 * (unreferenced ready chunks go first, least recently used; no room
 * while all are in use), a peer fetch that succeeds or falls back to
 * slots, slots claimed by two threads, a failed chunk leaving the index,
 * an owner that gives up silently, the peer server waiting for a chunk
 * being filled (and not for one it does not hold), and the recent
 * answers.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "chunkstore_i.h"
#include "podfs/clock.h"

#define MB (1u << 20)

static void dg(uint8_t d[PFS_DIGEST_LEN], unsigned n)
{
	memset(d, 0, PFS_DIGEST_LEN);
	d[0] = (uint8_t)n;
	d[9] = (uint8_t)(n >> 8);
}

static struct cstore_gone gone[CSTORE_GONE_MAX];
static unsigned ngone;
static const struct pfs_fh fh7 = { .len = 1, .data = { 7 } };
/* cstore_make for chunk n of fh7 (n: the digest's first byte). */
#define MAKE(s, d, len, mode) cstore_make(s, d, len, mode, &fh7, (d)[0], &created, gone, &ngone)

static int64_t in_ms(int ms)
{
	return pfs_mono_ms() + ms;
}

static void test_make_and_bound(void)
{
	struct cstore *s;
	struct cstore_stats st;
	uint8_t d[PFS_DIGEST_LEN];
	bool created;

	CHECK_EQ(cstore_new(8 * MB, &s), 0);
	dg(d, 1);
	CHECK(cstore_find(s, d, NULL, 0) == NULL);
	struct chunk *a = MAKE(s, d, 4 * MB, CK_COORD);
	CHECK(a && created);
	CHECK_EQ(a->nslots, 4);
	struct chunk *a2 = MAKE(s, d, 4 * MB, CK_PEER);
	CHECK(a2 == a && !created); /* the same digest: joined */
	cstore_put(s, a2);
	CHECK(MAKE(s, d, 0, CK_COORD) == NULL);
	CHECK(MAKE(s, d, (1u << PFS_CHUNK_SHIFT_MAX) + 1, CK_COORD) == NULL);
	dg(d, 2);
	struct chunk *b = MAKE(s, d, 4 * MB + 1, CK_COORD);
	CHECK(b == NULL); /* a is in use: no room */
	b = MAKE(s, d, 3 * MB, CK_COORD);
	CHECK(b && created);
	CHECK_EQ(b->nslots, 3);
	/* Both ready and unreferenced: a new one evicts the older (a). */
	cstore_set_mode(s, a, CK_READY);
	cstore_set_mode(s, b, CK_READY);
	cstore_put(s, a);
	cstore_put(s, b);
	dg(d, 1);
	struct chunk *again = cstore_find(s, d, NULL, 0); /* a used again: b is now older */
	CHECK(again == a);
	cstore_put(s, again);
	dg(d, 3);
	struct chunk *c = MAKE(s, d, 2 * MB, CK_PEER);
	CHECK(c && created);
	CHECK_EQ(ngone, 1); /* b went, and says what it was */
	CHECK_EQ(gone[0].index, 2);
	CHECK(pfs_fh_equal(&gone[0].fh, &fh7));
	dg(d, 2);
	CHECK_MEM(gone[0].digest, d, PFS_DIGEST_LEN);
	CHECK(cstore_find(s, d, NULL, 0) == NULL);
	dg(d, 1);
	struct chunk *a3 = cstore_find(s, d, NULL, 0);
	CHECK(a3 == a);
	cstore_put(s, a3);
	cstore_stats(s, &st);
	CHECK_EQ(st.evicted, 1);
	CHECK_EQ(st.no_room, 1);
	CHECK_EQ(st.bytes, 6 * MB);
	/* A failed chunk leaves the index at once, and memory with its
	 * last reference. */
	cstore_set_mode(s, c, CK_FAILED);
	dg(d, 3);
	CHECK(cstore_find(s, d, NULL, 0) == NULL);
	cstore_stats(s, &st);
	CHECK_EQ(st.bytes, 4 * MB);
	cstore_put(s, c);
	/* An owner that drops its chunk while filling it: failed. */
	dg(d, 4);
	struct chunk *e = MAKE(s, d, MB, CK_COORD);
	cstore_put(s, e);
	CHECK(cstore_find(s, d, NULL, 0) == NULL);
	cstore_free(s);
	cstore_free(NULL);
}

struct waiter {
	struct cstore *s;
	struct chunk *c;
	unsigned first, last;
	int rc;
	uint64_t mine;
};

static void *claim_thread(void *arg)
{
	struct waiter *w = arg;

	w->rc = cstore_claim(w->s, w->c, w->first, w->last, &w->mine, in_ms(5000));
	for (unsigned i = 0; i < 64; i++)
		if (w->mine & (1ull << i))
			cstore_filled(w->s, w->c, i, true);
	return NULL;
}

static void *wait_thread(void *arg)
{
	struct waiter *w = arg;

	w->rc = cstore_wait(w->s, w->c, in_ms(5000));
	return NULL;
}

/* A peer fetch: waiters wait; it fails; the chunk is read in slots
 * instead, by the waiters and the owner. */
static void test_peer_then_slots(void)
{
	struct cstore *s;
	uint8_t d[PFS_DIGEST_LEN];
	bool created;
	pthread_t th;

	cstore_new(64 * MB, &s);
	dg(d, 7);
	struct chunk *c = MAKE(s, d, 4 * MB, CK_PEER);
	/* Timeout while the peer fetch runs. */
	CHECK_EQ(cstore_wait(s, c, in_ms(20)), -ETIMEDOUT);
	uint64_t mine = 0;
	CHECK_EQ(cstore_claim(s, c, 0, 0, &mine, in_ms(20)), -ETIMEDOUT);
	struct waiter w = { .s = s, .c = c };
	pthread_create(&th, NULL, wait_thread, &w);
	usleep(20000);
	cstore_set_mode(s, c, CK_COORD);
	pthread_join(th, NULL);
	CHECK_EQ(w.rc, CK_COORD);
	/* Another thread claims slot 1..2, the owner 0..3: the owner gets
	 * 0 and 3 and waits for 1, 2. */
	struct waiter w2 = { .s = s, .c = c, .first = 1, .last = 2 };
	mine = 0;
	CHECK_EQ(cstore_claim(s, c, 1, 2, &w2.mine, in_ms(100)), 0);
	CHECK_EQ(w2.mine, 6);
	pthread_create(&th, NULL, claim_thread, &w2); /* fills what it claimed */
	CHECK_EQ(cstore_claim(s, c, 0, 3, &mine, in_ms(5000)), 0);
	pthread_join(th, NULL);
	CHECK_EQ(mine, 9);
	CHECK(!cstore_complete(s, c));
	cstore_filled(s, c, 0, true);
	cstore_filled(s, c, 3, false); /* its READ failed: back to empty */
	CHECK(!cstore_complete(s, c));
	mine = 0;
	CHECK_EQ(cstore_claim(s, c, 3, 99, &mine, in_ms(100)), 0);
	CHECK_EQ(mine, 8);
	cstore_filled(s, c, 3, true);
	CHECK(cstore_complete(s, c));
	cstore_set_mode(s, c, CK_READY);
	mine = 0;
	CHECK_EQ(cstore_claim(s, c, 0, 3, &mine, in_ms(100)), CK_READY);
	cstore_put(s, c);
	cstore_free(s);
}

struct server {
	struct cstore *s;
	uint8_t d[PFS_DIGEST_LEN];
	struct chunk *got;
};

static void *serve_thread(void *arg)
{
	struct server *v = arg;

	v->got = cstore_serve(v->s, v->d, in_ms(5000));
	return NULL;
}

/* The peer server: a chunk held ready at once; one being filled once it
 * is ready; nothing for a chunk not held or one that failed. */
static void test_serve(void)
{
	struct cstore *s;
	struct server v;
	bool created;
	pthread_t th;

	cstore_new(64 * MB, &s);
	v.s = s;
	dg(v.d, 9);
	CHECK(cstore_serve(s, v.d, in_ms(10)) == NULL);
	struct chunk *c = MAKE(s, v.d, MB, CK_PEER);
	CHECK(cstore_serve(s, v.d, in_ms(10)) == NULL); /* still being fetched */
	pthread_create(&th, NULL, serve_thread, &v);
	usleep(20000);
	cstore_set_mode(s, c, CK_READY);
	pthread_join(th, NULL);
	CHECK(v.got == c);
	cstore_put(s, v.got);
	cstore_put(s, c);
	struct chunk *r = cstore_serve(s, v.d, in_ms(10));
	CHECK(r == c);
	cstore_put(s, r);

	dg(v.d, 10);
	c = MAKE(s, v.d, MB, CK_COORD);
	pthread_create(&th, NULL, serve_thread, &v);
	usleep(20000);
	cstore_set_mode(s, c, CK_FAILED);
	pthread_join(th, NULL);
	CHECK(v.got == NULL);
	cstore_put(s, c);
	cstore_free(s);
}

static void test_recent(void)
{
	struct cstore *s;
	uint8_t d[PFS_DIGEST_LEN], out[PFS_DIGEST_LEN];
	uint32_t len;
	uint64_t seq;

	cstore_new(MB, &s);
	CHECK(!cstore_recent_get(s, 1, 0, 9, out, &len, &seq));
	dg(d, 1);
	cstore_recent_put(s, 1, 0, 9, d, 5, 77);
	CHECK(cstore_recent_get(s, 1, 0, 9, out, &len, &seq));
	CHECK_MEM(out, d, PFS_DIGEST_LEN);
	CHECK_EQ(len, 5);
	CHECK_EQ(seq, 77);
	CHECK(!cstore_recent_get(s, 1, 1, 9, out, &len, &seq));
	CHECK(!cstore_recent_get(s, 2, 0, 9, out, &len, &seq));
	/* Asked for another version of the file (this host wrote it since
	 * the answer): not known. */
	CHECK(!cstore_recent_get(s, 1, 0, 10, out, &len, &seq));
	dg(d, 2);
	cstore_recent_put(s, 1, 0, 9, d, 6, 78);
	cstore_recent_get(s, 1, 0, 9, out, &len, &seq);
	CHECK_MEM(out, d, PFS_DIGEST_LEN);
	CHECK_EQ(seq, 78);
	/* Bounded: the oldest go. */
	for (unsigned i = 0; i < 2 * CSTORE_RECENT; i++)
		cstore_recent_put(s, 5, i, 9, d, 1, i);
	CHECK(!cstore_recent_get(s, 1, 0, 9, out, &len, &seq));
	CHECK(!cstore_recent_get(s, 5, 0, 9, out, &len, &seq));
	CHECK(cstore_recent_get(s, 5, 2 * CSTORE_RECENT - 1, 9, out, &len, &seq));
	cstore_free(s);
}

/* A chunk made ready and left unreferenced. */
static void make_ready(struct cstore *s, unsigned n)
{
	uint8_t d[PFS_DIGEST_LEN];
	bool created;

	dg(d, n);
	struct chunk *c = MAKE(s, d, MB, CK_COORD);
	CHECK(c && created);
	if (!c)
		return;
	cstore_set_mode(s, c, CK_READY);
	cstore_put(s, c);
}

static bool holds(struct cstore *s, unsigned n)
{
	uint8_t d[PFS_DIGEST_LEN];

	dg(d, n);
	struct chunk *c = cstore_find(s, d, NULL, 0);
	if (c)
		cstore_put(s, c);
	return c != NULL;
}

/* Serving a chunk to peers does not make it recent: the oldest of this
 * mount's own use goes first, even while it is being sent (then the
 * next one). */
static void test_serving_is_no_use(void)
{
	struct cstore *s;
	uint8_t d[PFS_DIGEST_LEN];

	CHECK_EQ(cstore_new(3 * MB, &s), 0);
	for (unsigned n = 1; n <= 3; n++)
		make_ready(s, n);
	dg(d, 1);
	struct chunk *c = cstore_serve(s, d, in_ms(100));
	CHECK(c != NULL);
	cstore_put(s, c);
	make_ready(s, 4); /* 1 goes, though a peer got it last */
	CHECK_EQ(ngone, 1);
	CHECK_EQ(gone[0].index, 1);
	dg(d, 2);
	c = cstore_serve(s, d, in_ms(100)); /* 2 is being sent: 3 goes */
	CHECK(c != NULL);
	make_ready(s, 5);
	CHECK_EQ(ngone, 1);
	CHECK_EQ(gone[0].index, 3);
	cstore_put(s, c);
	make_ready(s, 6); /* sent: 2 goes now */
	CHECK_EQ(gone[0].index, 2);
	CHECK(holds(s, 4) && holds(s, 5) && holds(s, 6));
	cstore_free(s);
}

/* A chunk not checked yet serves only readers of its own chunk of its
 * own file (its slots are READ through the file of whoever claims them):
 * another file, or another chunk, with the same digest reads the usual
 * way until it is checked. */
static void test_shared_only_with_its_chunk(void)
{
	static const struct pfs_fh fh8 = { .len = 1, .data = { 8 } };
	struct cstore *s;
	uint8_t d[PFS_DIGEST_LEN];
	bool created;
	uint64_t mine = 0;

	cstore_new(64 * MB, &s);
	dg(d, 5);
	struct chunk *c = MAKE(s, d, 4 * MB, CK_COORD); /* chunk 5 of fh7 */
	CHECK(c && created);
	CHECK(cstore_make(s, d, 4 * MB, CK_COORD, &fh8, 5, &created, gone, &ngone) == NULL);
	CHECK(cstore_make(s, d, 4 * MB, CK_COORD, &fh7, 6, &created, gone, &ngone) == NULL);
	CHECK(cstore_find(s, d, &fh8, 5) == NULL);
	CHECK(cstore_find(s, d, &fh7, 6) == NULL);
	struct chunk *same = MAKE(s, d, 4 * MB, CK_COORD);
	CHECK(same == c && !created);
	cstore_put(s, same);
	same = cstore_find(s, d, &fh7, 5);
	CHECK(same == c);
	cstore_put(s, same);
	/* Checked: anyone's. */
	CHECK_EQ(cstore_claim(s, c, 0, 3, &mine, in_ms(100)), 0);
	for (unsigned i = 0; i < 4; i++)
		cstore_filled(s, c, i, true);
	cstore_set_mode(s, c, CK_READY);
	same = cstore_find(s, d, &fh8, 5);
	CHECK(same == c);
	cstore_put(s, same);
	same = cstore_make(s, d, 4 * MB, CK_COORD, &fh8, 9, &created, gone, &ngone);
	CHECK(same == c && !created);
	cstore_put(s, same);
	cstore_put(s, c);
	cstore_free(s);
}

/* Claims are all or nothing: a thread waiting for a slot another holds
 * keeps none of the others (keeping them, two threads could each wait
 * for a slot the other holds). */
static void test_claims_all_or_nothing(void)
{
	struct cstore *s;
	uint8_t d[PFS_DIGEST_LEN];
	bool created;
	uint64_t a = 0, b = 0, x = 0;

	cstore_new(64 * MB, &s);
	dg(d, 6);
	struct chunk *c = MAKE(s, d, 4 * MB, CK_COORD);
	CHECK_EQ(cstore_claim(s, c, 1, 1, &a, in_ms(100)), 0);
	CHECK_EQ(a, 2);
	CHECK_EQ(cstore_claim(s, c, 0, 1, &b, in_ms(20)), -ETIMEDOUT);
	CHECK_EQ(b, 0);
	CHECK_EQ(cstore_claim(s, c, 0, 0, &x, in_ms(20)), 0); /* slot 0 was left free */
	CHECK_EQ(x, 1);
	cstore_filled(s, c, 0, true);
	cstore_filled(s, c, 1, true);
	b = 0;
	CHECK_EQ(cstore_claim(s, c, 0, 2, &b, in_ms(100)), 0);
	CHECK_EQ(b, 4);
	cstore_filled(s, c, 2, true);
	cstore_put(s, c);
	cstore_free(s);
}

int main(void)
{
	test_make_and_bound();
	test_serving_is_no_use();
	test_peer_then_slots();
	test_shared_only_with_its_chunk();
	test_claims_all_or_nothing();
	test_serve();
	test_recent();
	return check_done("test_chunkstore");
}
