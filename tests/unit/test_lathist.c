/* test_lathist.c: unit tests of the latency histograms (lib/lathist.c):
 * every latency falls in a bucket whose upper bound is at least it and
 * at most 25% (+1 us) above; buckets are ordered; quantiles of known
 * samples. */
#include <string.h>

#include "check.h"
#include "podfs/lathist.h"

static void test_buckets(void)
{
	CHECK_EQ(lathist_bucket(0), 0);
	unsigned prev = 0;
	for (uint64_t us = 1; us < (1ull << 33); us = us * 9 / 8 + 1) {
		unsigned b = lathist_bucket(us);
		CHECK(b >= prev);
		prev = b;
		if (b == LATHIST_BUCKETS - 1)
			continue;
		uint64_t up = lathist_upper(b);
		CHECK(up >= us);
		CHECK(up <= us + us / 4 + 1);
		/* The next microsecond after the bound is in a later bucket. */
		CHECK(lathist_bucket(up + 1) > b);
	}
	CHECK_EQ(lathist_bucket(UINT64_MAX), LATHIST_BUCKETS - 1);
	CHECK(lathist_upper(LATHIST_BUCKETS - 1) == UINT64_MAX);
}

static void test_quantiles(void)
{
	uint64_t c[LATHIST_BUCKETS];

	memset(c, 0, sizeof(c));
	CHECK_EQ(lathist_quantile(c, 0.5), 0);
	/* 98 requests of 100 us, one of 1 ms, one of 50 ms. */
	c[lathist_bucket(100)] += 98;
	c[lathist_bucket(1000)] += 1;
	c[lathist_bucket(50000)] += 1;
	uint64_t p50 = lathist_quantile(c, 0.5), p99 = lathist_quantile(c, 0.99);
	uint64_t max = lathist_quantile(c, 1.0);
	CHECK(p50 >= 100 && p50 <= 125);
	CHECK(p99 >= 1000 && p99 <= 1250);
	CHECK(max >= 50000 && max <= 62500);
	/* One sample: every quantile is its bucket. */
	memset(c, 0, sizeof(c));
	c[lathist_bucket(7)] = 1;
	CHECK(lathist_quantile(c, 0.01) >= 7 && lathist_quantile(c, 0.99) <= 9);
}

int main(void)
{
	test_buckets();
	test_quantiles();
	return check_done("test_lathist");
}
