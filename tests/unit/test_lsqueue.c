/* test_lsqueue.c: the queue of directories listed ahead of a walk
 * (fs/lsqueue.c): taken in the order a depth-first walk meets them, the
 * lowest key giving way when it is full.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "lsqueue_i.h"

static struct lsqueue q;

/* An item told apart by its at (the tests' name for it). */
static struct lsq_item item(int64_t name, uint64_t key)
{
	struct lsq_item it;

	memset(&it, 0, sizeof(it));
	it.at = name;
	it.key = key;
	return it;
}

static void push(int64_t name, uint64_t key)
{
	struct lsq_item it = item(name, key), out;

	CHECK_EQ(lsq_push(&q, &it, &out), LSQ_IN);
}

static int64_t pop(void)
{
	return q.n ? lsq_pop_top(&q).at : -1;
}

static void test_depth_first(void)
{
	memset(&q, 0, sizeof(q));
	/* A directory's reading hands out its subdirectories 1..4 in two
	 * replies; between them the walk's fetches queued 11, 12 (below
	 * 1). The second reply's go below the first's, above nothing
	 * older. */
	uint64_t older = lsq_new_base(&q);
	push(100, lsq_key(older, 0));
	uint64_t b = lsq_new_base(&q);
	push(2, lsq_key(b, 1));
	push(1, lsq_key(b, 0));
	CHECK_EQ(pop(), 1); /* fetched; its own subdirectories follow */
	uint64_t below1 = lsq_new_base(&q);
	push(12, lsq_key(below1, 1));
	push(11, lsq_key(below1, 0));
	push(4, lsq_key(b, 3));
	push(3, lsq_key(b, 2));
	int64_t want[] = { 11, 12, 2, 3, 4, 100, -1 };
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		CHECK_EQ(pop(), want[i]);
	CHECK_EQ(q.n, 0);
}

static void test_full(void)
{
	struct lsq_item it, out;

	memset(&q, 0, sizeof(q));
	uint64_t b = lsq_new_base(&q);
	for (uint32_t i = 0; i < LSQ_MAX; i++)
		push(i, lsq_key(b, i));
	CHECK_EQ(q.n, LSQ_MAX);
	/* Below everything: refused, given back. */
	it = item(-5, lsq_key(b, LSQ_MAX));
	CHECK_EQ(lsq_push(&q, &it, &out), LSQ_REFUSED);
	CHECK_EQ(out.at, -5);
	CHECK_EQ(q.n, LSQ_MAX);
	/* Above: the lowest gives way. */
	uint64_t top = lsq_new_base(&q);
	it = item(-7, lsq_key(top, 0));
	CHECK_EQ(lsq_push(&q, &it, &out), LSQ_PUSHED_OUT);
	CHECK_EQ(out.at, (int64_t)LSQ_MAX - 1);
	/* In the middle, as the ring wraps: the lowest gives way again. */
	it = item(-9, lsq_key(b, 10));
	CHECK_EQ(lsq_push(&q, &it, &out), LSQ_PUSHED_OUT);
	CHECK_EQ(out.at, (int64_t)LSQ_MAX - 2);
	CHECK_EQ(lsq_pop_bottom(&q).at, (int64_t)LSQ_MAX - 3);
	CHECK_EQ(pop(), -7);
	for (int64_t i = 0; i <= 10; i++)
		CHECK_EQ(pop(), i);
	CHECK_EQ(pop(), -9); /* an equal key goes after the one queued first */
	CHECK_EQ(pop(), 11);
	CHECK_EQ(q.n, LSQ_MAX - 15); /* one taken from the bottom, 14 from the top */
	CHECK(lsq_top(&q)->key == lsq_key(b, 12));
}

int main(void)
{
	test_depth_first();
	test_full();
	return check_done("test_lsqueue");
}
