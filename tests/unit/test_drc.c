/* test_drc.c: the duplicate request cache of podfsd's sessions
 * (daemon/drc.c).
 *
 * Finding, remembering and forgetting requests; replies stored as copies;
 * the bound on finished replies (oldest go first, running requests never);
 * a model check under a random mix; teardown with entries in every state
 * (the sanitizer build checks that nothing leaks). The pool of all
 * caches: its bytes exact, within the budget after every reply, and the
 * host keeping the most forgetting first, so that a flood from one host
 * leaves the others' replies.
 */
#include <stdlib.h>

#include "check.h"
#include "drc_i.h"

static void fake_hdr(uint8_t hdr[PFS_FRAME_HDR_SIZE], uint8_t v)
{
	memset(hdr, v, PFS_FRAME_HDR_SIZE);
}

/* A pool too big to matter, for the tests of one cache. */
static struct drc_pool big_pool;
static struct drc_host big_host;

static void test_basics(void)
{
	struct drc c;
	uint8_t hdr[PFS_FRAME_HDR_SIZE];
	uint8_t payload[5] = { 1, 2, 3, 4, 5 };
	struct drc_ent *e, *f;

	drc_init(&c, 8, &big_host);
	CHECK(drc_find(&c, 1) == NULL);
	e = drc_begin(&c, 1, PFS_OP_MKDIR);
	CHECK(e != NULL);
	CHECK(drc_find(&c, 1) == e);
	CHECK_EQ(e->id, 1);
	CHECK_EQ(e->op, PFS_OP_MKDIR);
	CHECK(!e->done);
	CHECK(!e->resend);
	CHECK_EQ(c.n, 1);

	/* The reply is a copy: the caller's buffers may go. */
	fake_hdr(hdr, 0xab);
	drc_done(e, hdr, payload, sizeof(payload), 7);
	memset(hdr, 0, sizeof(hdr));
	payload[0] = 99;
	CHECK(e->done);
	CHECK_EQ(e->len, 5);
	CHECK_EQ(e->raw, 7);
	CHECK_EQ(e->wire[0], 1);
	CHECK_EQ(e->hdr[0], 0xab);
	CHECK_EQ(e->hdr[PFS_FRAME_HDR_SIZE - 1], 0xab);

	/* An empty reply stores no payload. */
	f = drc_begin(&c, 2, PFS_OP_UNLINK);
	fake_hdr(hdr, 1);
	drc_done(f, hdr, NULL, 0, 0);
	CHECK(f->done);
	CHECK(f->wire == NULL);
	CHECK_EQ(f->len, 0);

	drc_forget(&c, e);
	CHECK(drc_find(&c, 1) == NULL);
	CHECK(drc_find(&c, 2) == f);
	CHECK_EQ(c.n, 1);
	drc_forget(&c, f);
	CHECK_EQ(c.n, 0);
	CHECK(TAILQ_EMPTY(&c.lru));
	drc_fini(&c);
}

/* Beyond max, the oldest finished replies go; running requests stay,
 * however old. */
static void test_bound(void)
{
	struct drc c;
	uint8_t hdr[PFS_FRAME_HDR_SIZE] = { 0 };
	struct drc_ent *running;

	drc_init(&c, 4, &big_host);
	running = drc_begin(&c, 100, PFS_OP_WRITE); /* oldest, never done */
	for (uint64_t id = 1; id <= 4; id++)
		drc_done(drc_begin(&c, id, PFS_OP_CREATE), hdr, "x", 1, 1);
	/* 5 entries > 4: the oldest done one (1) went, the running one stays. */
	CHECK_EQ(c.n, 4);
	CHECK(drc_find(&c, 100) == running);
	CHECK(drc_find(&c, 1) == NULL);
	for (uint64_t id = 2; id <= 4; id++)
		CHECK(drc_find(&c, id) != NULL);

	/* A new running request pushes out the next oldest done reply. */
	drc_begin(&c, 5, PFS_OP_RENAME);
	CHECK_EQ(c.n, 4);
	CHECK(drc_find(&c, 2) == NULL);
	CHECK(drc_find(&c, 5) != NULL);

	/* Only running requests left beyond the bound: all stay. */
	drc_forget(&c, drc_find(&c, 3));
	drc_forget(&c, drc_find(&c, 4));
	for (uint64_t id = 10; id < 20; id++)
		drc_begin(&c, id, PFS_OP_WRITE);
	CHECK_EQ(c.n, 12);
	CHECK(drc_find(&c, 100) == running);
	CHECK(drc_find(&c, 19) != NULL);

	/* Teardown with running and finished entries (leak-checked). */
	drc_done(drc_find(&c, 10), hdr, "abc", 3, 3);
	drc_fini(&c);
}

/* A random mix against a model of which ids are known and done. */
#define MODEL_IDS 64
static void test_model(void)
{
	struct drc c;
	uint8_t hdr[PFS_FRAME_HDR_SIZE] = { 0 };
	int state[MODEL_IDS] = { 0 }; /* 0 absent, 1 running, 2 done */
	uint64_t seq[MODEL_IDS] = { 0 }; /* when each id began */
	uint64_t clock = 0, rnd = 42;
	size_t max = 16;

	drc_init(&c, max, &big_host);
	for (int step = 0; step < 20000; step++) {
		uint64_t id = test_rand(&rnd) % MODEL_IDS;
		struct drc_ent *e = drc_find(&c, id + 1);
		size_t n = 0;

		if (!CHECK_EQ(e != NULL, state[id] != 0))
			break;
		switch (test_rand(&rnd) % 3) {
		case 0:
			if (e)
				break;
			drc_begin(&c, id + 1, (uint16_t)(id % 50));
			state[id] = 1;
			seq[id] = ++clock;
			/* The model evicts the oldest done ones beyond max. */
			for (int k = 0; k < MODEL_IDS; k++)
				n += state[k] != 0;
			while (n > max) {
				int oldest = -1;
				for (int k = 0; k < MODEL_IDS; k++)
					if (state[k] == 2 && (oldest < 0 || seq[k] < seq[oldest]))
						oldest = k;
				if (oldest < 0)
					break;
				state[oldest] = 0;
				n--;
			}
			break;
		case 1:
			if (e && !e->done) {
				drc_done(e, hdr, &id, sizeof(id), sizeof(id));
				state[id] = 2;
			}
			break;
		default:
			if (e) {
				drc_forget(&c, e);
				state[id] = 0;
			}
			break;
		}
		n = 0;
		for (int k = 0; k < MODEL_IDS; k++)
			n += state[k] != 0;
		if (!CHECK_EQ(c.n, n))
			break;
	}
	for (int k = 0; k < MODEL_IDS; k++) {
		struct drc_ent *e = drc_find(&c, (uint64_t)k + 1);
		CHECK_EQ(e != NULL, state[k] != 0);
		if (e)
			CHECK_EQ(e->done, state[k] == 2);
		if (e && e->done)
			CHECK_EQ(*(const uint64_t *)(const void *)e->wire, (uint64_t)k);
	}
	drc_fini(&c);
}

/* --- the pool --- */

static void reply(struct drc *c, uint64_t id, size_t len)
{
	static uint8_t payload[512];
	uint8_t hdr[PFS_FRAME_HDR_SIZE] = { 0 };

	drc_done(drc_begin(c, id, PFS_OP_MKDIR), hdr, payload, len, len);
}

/* Bytes follow replies in and out, through each way out of a cache. */
static void test_pool_bytes(void)
{
	struct drc_pool p;
	struct drc_host h;
	struct drc c;

	drc_pool_init(&p, 1u << 20);
	drc_host_add(&p, &h);
	drc_init(&c, 3, &h);
	struct drc_ent *running = drc_begin(&c, 1, PFS_OP_WRITE);
	CHECK_EQ(p.bytes, 0); /* a running request counts nothing */
	reply(&c, 2, 100);
	reply(&c, 3, 10);
	CHECK_EQ(h.bytes, DRC_COST(100) + DRC_COST(10));
	CHECK_EQ(p.bytes, h.bytes);
	reply(&c, 4, 0); /* the cache's own bound: 2 (the oldest done) goes */
	CHECK(drc_find(&c, 2) == NULL);
	CHECK_EQ(p.bytes, DRC_COST(10) + DRC_COST(0));
	CHECK_EQ(p.forgotten, 0);
	drc_forget(&c, drc_find(&c, 3));
	CHECK_EQ(p.bytes, DRC_COST(0));
	drc_forget(&c, running);
	CHECK_EQ(p.bytes, DRC_COST(0));
	reply(&c, 5, 7);
	drc_fini(&c);
	CHECK_EQ(p.bytes, 0);
	CHECK_EQ(h.bytes, 0);
	CHECK(TAILQ_EMPTY(&h.done));
	drc_host_remove(&h);
	CHECK(TAILQ_EMPTY(&p.hosts));
}

/* One host makes changes without end over many sessions; two others
 * made a few. The pool stays within its budget, the flood forgets its
 * own oldest replies, and the others keep every one of theirs. */
static void test_pool_flood(void)
{
	enum { SESS = 8 };
	struct drc_pool p;
	struct drc_host flood, a, b;
	struct drc fc[SESS], ac, bc;
	size_t max = 64 * DRC_COST(200);

	drc_pool_init(&p, max);
	drc_host_add(&p, &a);
	drc_host_add(&p, &flood);
	drc_host_add(&p, &b);
	drc_init(&ac, 1024, &a);
	drc_init(&bc, 1024, &b);
	for (int i = 0; i < SESS; i++)
		drc_init(&fc[i], 1024, &flood);
	for (uint64_t id = 1; id <= 10; id++) {
		reply(&ac, id, 300);
		reply(&bc, id, 10);
	}
	for (uint64_t id = 1; id <= 5000; id++) {
		reply(&fc[id % SESS], id, 200);
		if (!CHECK(p.bytes <= max))
			break;
	}
	for (uint64_t id = 1; id <= 10; id++) {
		CHECK(drc_find(&ac, id) != NULL);
		CHECK(drc_find(&bc, id) != NULL);
	}
	CHECK(drc_find(&fc[5000 % SESS], 5000) != NULL); /* its newest stays */
	CHECK(drc_find(&fc[1], 1) == NULL);               /* its oldest went */
	CHECK(p.forgotten > 4000);
	CHECK_EQ(p.bytes, a.bytes + b.bytes + flood.bytes);
	CHECK(flood.bytes > max / 2);
	for (int i = 0; i < SESS; i++)
		drc_fini(&fc[i]);
	drc_fini(&ac);
	drc_fini(&bc);
	CHECK_EQ(p.bytes, 0);
	drc_host_remove(&flood);
	drc_host_remove(&a);
	drc_host_remove(&b);
}

/* Random replies, forgets and session ends over four hosts of two
 * sessions each: after every step the pool's bytes are the sum of what
 * the caches hold and within the budget, and a host that lost replies
 * to the budget was, before the step, within an eighth of the host
 * keeping the most. */
static void test_pool_model(void)
{
	enum { HOSTS = 4, PER = 2 };
	struct drc_pool p;
	struct drc_host h[HOSTS];
	struct drc c[HOSTS * PER];
	uint64_t rnd = 7, next_id = 1;
	size_t max = 40 * DRC_COST(256);

	drc_pool_init(&p, max);
	for (int i = 0; i < HOSTS; i++)
		drc_host_add(&p, &h[i]);
	for (int i = 0; i < HOSTS * PER; i++)
		drc_init(&c[i], 16, &h[i / PER]);
	for (int step = 0; step < 30000; step++) {
		int k = (int)(test_rand(&rnd) % (HOSTS * PER));
		/* Host 0 is busier than the others: its skew makes evictions. */
		if (test_rand(&rnd) % 3 == 0)
			k = (int)(test_rand(&rnd) % PER);
		size_t before[HOSTS], top = 0;
		for (int i = 0; i < HOSTS; i++)
			before[i] = h[i].bytes;
		uint64_t forgotten = p.forgotten;
		switch (test_rand(&rnd) % 8) {
		case 0: { /* forget one of c[k]'s */
			struct drc_ent *e = TAILQ_FIRST(&c[k].lru);
			if (e)
				drc_forget(&c[k], e);
			break;
		}
		case 1: /* the session ends, another begins */
			if (test_rand(&rnd) % 16 == 0) {
				drc_fini(&c[k]);
				drc_init(&c[k], 16, &h[k / PER]);
			}
			break;
		default: {
			size_t len = (size_t)(test_rand(&rnd) % 257);
			before[k / PER] += DRC_COST(len);
			reply(&c[k], next_id++, len);
			break;
		}
		}
		size_t sum = 0;
		for (int i = 0; i < HOSTS * PER; i++) {
			struct drc_ent *e;
			TAILQ_FOREACH(e, &c[i].lru, lru)
				sum += e->done ? DRC_COST(e->len) : 0;
		}
		if (!CHECK_EQ(p.bytes, sum) || !CHECK(p.bytes <= max))
			break;
		if (p.forgotten == forgotten)
			continue;
		for (int i = 0; i < HOSTS; i++)
			top = before[i] > top ? before[i] : top;
		for (int i = 0; i < HOSTS; i++)
			if (h[i].bytes + DRC_COST(256) < before[i] && !CHECK(before[i] >= top - top / 8))
				step = 1 << 30;
	}
	CHECK(p.forgotten > 1000); /* the budget was at work */
	for (int i = 0; i < HOSTS * PER; i++)
		drc_fini(&c[i]);
	CHECK_EQ(p.bytes, 0);
	for (int i = 0; i < HOSTS; i++)
		drc_host_remove(&h[i]);
}

int main(void)
{
	drc_pool_init(&big_pool, (size_t)1 << 40);
	drc_host_add(&big_pool, &big_host);
	test_basics();
	test_bound();
	test_model();
	test_pool_bytes();
	test_pool_flood();
	test_pool_model();
	return check_done("test_drc");
}
