/* test_rlslots.c: the replies file's slots shared between hosts
 * (daemon/rlslots.c).
 *
 * Free slots first, lowest first; then a host at its share goes round
 * its own, and one below takes from the host that holds the most: a
 * flood from one host leaves another's newest records, and two floods
 * end with the halves. Slots taken at the start, cleared, and a host
 * that leaves. A model
 * under a random mix: every slot in exactly one list, the counts exact,
 * and each host's list in the order its slots were given.
 */
#include <stdlib.h>

#include "check.h"
#include "rlslots_i.h"

static uint64_t rnd_state = 88172645463325252ull;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

/* Every slot in one list or the free list; counts and owners exact. */
static bool consistent(struct rlslots *s)
{
	uint32_t seen = 0, holders = 0;
	bool ok = true;
	struct rlslots_host *h;

	uint8_t *mark = calloc(s->n, 1);
	TAILQ_FOREACH(h, &s->hosts, link) {
		uint32_t n = 0;
		int32_t last = -1;
		for (int32_t k = h->head; k >= 0; k = s->next[k]) {
			ok &= !mark[k] && s->owner[k] == h;
			mark[k] = 1;
			last = k;
			n++;
		}
		ok &= n == h->n && last == h->tail;
		seen += n;
		holders += n > 0;
	}
	uint32_t nfree = 0;
	int32_t last = -1;
	for (int32_t k = s->free_head; k >= 0; k = s->next[k]) {
		ok &= !mark[k] && s->owner[k] == NULL;
		mark[k] = 1;
		nfree++;
		last = k;
	}
	free(mark);
	return ok && nfree == s->nfree && last == s->free_tail && seen + nfree == s->n &&
	       holders == s->holders;
}

static void test_free_first(void)
{
	struct rlslots s;
	struct rlslots_host a, b;

	rlslots_init(&s, 8);
	rlslots_host_add(&s, &a);
	rlslots_host_add(&s, &b);
	CHECK_EQ(rlslots_alloc(&s, &a), 0);
	CHECK_EQ(rlslots_alloc(&s, &b), 1);
	CHECK_EQ(rlslots_alloc(&s, &a), 2);
	CHECK_EQ(a.n, 2);
	CHECK_EQ(b.n, 1);
	CHECK_EQ(s.holders, 2);
	CHECK(consistent(&s));
	/* Full: a (2 of 8, under its share of 4) takes b's oldest. */
	for (int i = 0; i < 5; i++)
		rlslots_alloc(&s, &b); /* 3..7 */
	CHECK_EQ(s.nfree, 0);
	CHECK_EQ(b.n, 6);
	CHECK_EQ(rlslots_alloc(&s, &a), 1); /* b's oldest */
	CHECK_EQ(s.owner[1], &a);
	/* b over its share: it goes round its own. */
	CHECK_EQ(rlslots_alloc(&s, &b), 3);
	CHECK_EQ(a.n, 3);
	CHECK_EQ(b.n, 5);
	CHECK(consistent(&s));
	rlslots_host_remove(&s, &a);
	CHECK_EQ(s.nfree, 3);
	CHECK_EQ(s.holders, 1);
	CHECK(consistent(&s));
	rlslots_host_remove(&s, &b);
	CHECK_EQ(s.nfree, 8);
	CHECK_EQ(s.holders, 0);
	CHECK(consistent(&s));
	rlslots_fini(&s);
}

/* A flood from one host: another's records written before it stay. */
static void test_flood(void)
{
	enum { N = 4096 };
	struct rlslots s;
	struct rlslots_host quiet, flood;
	uint32_t mine[10];

	rlslots_init(&s, N);
	rlslots_host_add(&s, &quiet);
	rlslots_host_add(&s, &flood);
	for (int i = 0; i < 10; i++)
		mine[i] = rlslots_alloc(&s, &quiet);
	for (int i = 0; i < 100000; i++)
		rlslots_alloc(&s, &flood);
	CHECK_EQ(quiet.n, 10);
	CHECK_EQ(flood.n, N - 10);
	for (int i = 0; i < 10; i++)
		CHECK(s.owner[mine[i]] == &quiet);
	/* The quiet host writing on takes from the flood until its share. */
	for (int i = 0; i < 5000; i++)
		rlslots_alloc(&s, &quiet);
	CHECK_EQ(quiet.n, N / 2);
	/* Two floods, one after the other: they end with halves. */
	for (int i = 0; i < 100000; i++)
		rlslots_alloc(&s, (i & 1) ? &flood : &quiet);
	CHECK_EQ(quiet.n, N / 2);
	CHECK_EQ(flood.n, N / 2);
	/* A third host gets its share, a third, taken from the two. */
	struct rlslots_host third;
	rlslots_host_add(&s, &third);
	for (int i = 0; i < N; i++)
		rlslots_alloc(&s, &third);
	CHECK_EQ(third.n, N / 3);
	CHECK_EQ(quiet.n + flood.n, N - N / 3);
	CHECK(quiet.n >= N / 3 && flood.n >= N / 3);
	CHECK(consistent(&s));
	rlslots_fini(&s);
}

/* Slots taken at the start (the records of the instance before), then
 * cleared: free again, and taken first. */
static void test_take_and_clear(void)
{
	struct rlslots s;
	struct rlslots_host old, a;

	rlslots_init(&s, 6);
	rlslots_host_add(&s, &old);
	rlslots_host_add(&s, &a);
	CHECK(!rlslots_take(&s, &old, (const uint32_t[]){ 4, 0, 6 }, 3)); /* out of range */
	CHECK(!rlslots_take(&s, &old, (const uint32_t[]){ 4, 0, 4 }, 3)); /* twice */
	CHECK_EQ(old.n, 0);
	CHECK_EQ(s.nfree, 6);
	CHECK(consistent(&s));
	CHECK(rlslots_take(&s, &old, (const uint32_t[]){ 4, 0, 5 }, 3));
	CHECK_EQ(old.head, 4); /* in the order given */
	CHECK_EQ(old.tail, 5);
	CHECK_EQ(s.nfree, 3);
	CHECK(consistent(&s));
	CHECK(!rlslots_take(&s, &a, (const uint32_t[]){ 5 }, 1)); /* held */
	CHECK_EQ(rlslots_alloc(&s, &a), 1);
	CHECK_EQ(rlslots_alloc(&s, &a), 2);
	CHECK_EQ(rlslots_alloc(&s, &a), 3);
	/* Full: a (3 of 6, at its share) goes round its own. */
	CHECK_EQ(rlslots_alloc(&s, &a), 1);
	rlslots_clear(&s, &old);
	CHECK_EQ(old.n, 0);
	CHECK_EQ(s.nfree, 3);
	CHECK(consistent(&s));
	/* Given out again in the order they were taken: of two records of
	 * one request, the older goes first. */
	CHECK_EQ(rlslots_alloc(&s, &a), 4);
	rlslots_clear(&s, &a); /* 2, 3, 1, 4 after 0, 5 */
	CHECK_EQ(s.nfree, 6);
	CHECK(consistent(&s));
	static const uint32_t order[] = { 0, 5, 2, 3, 1, 4 };
	for (unsigned i = 0; i < 6; i++)
		CHECK_EQ(rlslots_alloc(&s, &a), order[i]);
	CHECK_EQ(s.nfree, 0);
	CHECK(consistent(&s));
	rlslots_fini(&s);
}

/* Random allocs, clears and hosts coming and going, against a model of
 * each host's slots in order. */
static void test_model(void)
{
	enum { N = 37, H = 5 };
	struct rlslots s;
	struct rlslots_host h[H];
	bool in[H] = { false };
	uint32_t model[H][N], mn[H] = { 0 };

	rlslots_init(&s, N);
	for (int step = 0; step < 20000; step++) {
		int i = (int)(rnd() % H);
		unsigned what = (unsigned)(rnd() % 100);
		if (!in[i]) {
			rlslots_host_add(&s, &h[i]);
			in[i] = true;
			mn[i] = 0;
		} else if (what < 2) {
			rlslots_host_remove(&s, &h[i]);
			in[i] = false;
		} else if (what < 4) {
			rlslots_clear(&s, &h[i]);
			mn[i] = 0;
		} else {
			uint32_t before = s.nfree;
			uint32_t k = rlslots_alloc(&s, &h[i]);
			if (!CHECK(k < N))
				break;
			/* Taken from a list: out of the model's. */
			if (!before) {
				for (int j = 0; j < H; j++) {
					if (in[j] && mn[j] && model[j][0] == k) {
						memmove(model[j], model[j] + 1, (mn[j] - 1) * sizeof(uint32_t));
						mn[j]--;
					}
				}
			}
			model[i][mn[i]++] = k;
		}
		if (step % 97 == 0 && !CHECK(consistent(&s)))
			break;
		bool same = true;
		for (int j = 0; j < H; j++) {
			if (!in[j])
				continue;
			uint32_t n = 0;
			for (int32_t k = h[j].head; k >= 0; k = s.next[k])
				same &= n < mn[j] && model[j][n++] == (uint32_t)k;
			same &= n == mn[j];
		}
		if (!CHECK(same))
			break;
	}
	CHECK(consistent(&s));
	rlslots_fini(&s);
}

int main(void)
{
	test_free_first();
	test_flood();
	test_take_and_clear();
	test_model();
	return check_done("test_rlslots");
}
