/* test_drc.c: the duplicate request cache of a podfsd session
 * (daemon/drc.c).
 *
 * Finding, remembering and forgetting requests; replies stored as copies;
 * the bound on finished replies (oldest go first, running requests never);
 * a model check under a random mix; teardown with entries in every state
 * (the sanitizer build checks that nothing leaks).
 */
#include <stdlib.h>

#include "check.h"
#include "drc_i.h"

static void fake_hdr(uint8_t hdr[PFS_FRAME_HDR_SIZE], uint8_t v)
{
	memset(hdr, v, PFS_FRAME_HDR_SIZE);
}

static void test_basics(void)
{
	struct drc c;
	uint8_t hdr[PFS_FRAME_HDR_SIZE];
	uint8_t payload[5] = { 1, 2, 3, 4, 5 };
	struct drc_ent *e, *f;

	drc_init(&c, 8);
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

	drc_init(&c, 4);
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

	drc_init(&c, max);
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

int main(void)
{
	test_basics();
	test_bound();
	test_model();
	return check_done("test_drc");
}
