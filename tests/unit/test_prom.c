/* test_prom.c: unit tests of the Prometheus text writer (lib/prom.c):
 * families, labels and their escaping, a histogram from latency counts
 * (cumulative, ending in +Inf, _sum in seconds, _count), a full buffer
 * never leaving a partial line; and the "key value" status lines
 * (lib/kvtext.c). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "podfs/kvtext.h"
#include "podfs/prom.h"

static void test_samples(void)
{
	char b[1024];
	struct pfs_prom p;

	pfs_prom_init(&p, b, sizeof(b));
	pfs_prom_family(&p, "podfs_x_total", "counter", "Things");
	pfs_prom_u64(&p, "podfs_x_total", 7, NULL);
	pfs_prom_u64(&p, "podfs_x_total", 8, "op", "READ", NULL);
	pfs_prom_u64(&p, "podfs_x_total", 9, "a", "q\"b\\c\nd", "b", "", NULL);
	pfs_prom_f64(&p, "podfs_y", 0.5, NULL);
	CHECK(!p.overflow);
	CHECK(strcmp(b, "# HELP podfs_x_total Things\n# TYPE podfs_x_total counter\n"
			"podfs_x_total 7\npodfs_x_total{op=\"READ\"} 8\n"
			"podfs_x_total{a=\"q\\\"b\\\\c\\nd\",b=\"\"} 9\npodfs_y 0.5\n") == 0);
	CHECK_EQ(p.len, strlen(b));
}

static void test_hist(void)
{
	uint64_t counts[LATHIST_BUCKETS] = { 0 };
	char b[4096];
	struct pfs_prom p;

	counts[lathist_bucket(3)] += 2;       /* < 16 us */
	counts[lathist_bucket(15)] += 1;      /* < 16 us */
	counts[lathist_bucket(16)] += 1;      /* < 64 us, not < 16 */
	counts[lathist_bucket(5000000)] += 1; /* 5 s */
	pfs_prom_init(&p, b, sizeof(b));
	pfs_prom_lathist(&p, "podfs_lat_seconds", "op", "READ", counts, 5000037);
	CHECK(!p.overflow);
	CHECK(strstr(b, "podfs_lat_seconds_bucket{op=\"READ\",le=\"1.6e-05\"} 3\n") != NULL);
	CHECK(strstr(b, "podfs_lat_seconds_bucket{op=\"READ\",le=\"6.4e-05\"} 4\n") != NULL);
	CHECK(strstr(b, "podfs_lat_seconds_bucket{op=\"READ\",le=\"4.194304\"} 4\n") != NULL);
	CHECK(strstr(b, "podfs_lat_seconds_bucket{op=\"READ\",le=\"16.777216\"} 5\n") != NULL);
	CHECK(strstr(b, "podfs_lat_seconds_bucket{op=\"READ\",le=\"+Inf\"} 5\n") != NULL);
	CHECK(strstr(b, "podfs_lat_seconds_sum{op=\"READ\"} 5.000037\n") != NULL);
	CHECK(strstr(b, "podfs_lat_seconds_count{op=\"READ\"} 5\n") != NULL);
	/* Cumulative: each bucket line's count is at least the one before. */
	unsigned long long prev = 0;
	for (char *l = strstr(b, "_bucket"); l; l = strstr(l + 1, "_bucket")) {
		unsigned long long v = strtoull(strchr(l, '}') + 2, NULL, 10);
		CHECK(v >= prev);
		prev = v;
	}
	pfs_prom_init(&p, b, sizeof(b));
	pfs_prom_lathist(&p, "podfs_lat_seconds", NULL, NULL, counts, 1);
	CHECK(strstr(b, "podfs_lat_seconds_bucket{le=\"+Inf\"} 5\n") != NULL);
	CHECK(strstr(b, "podfs_lat_seconds_count 5\n") != NULL);
}

static void test_overflow(void)
{
	char b[40];
	struct pfs_prom p;

	pfs_prom_init(&p, b, sizeof(b));
	pfs_prom_u64(&p, "podfs_a", 1, NULL);
	pfs_prom_u64(&p, "podfs_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", 2, "k", "v", NULL);
	CHECK(p.overflow);
	CHECK(strcmp(b, "podfs_a 1\n") == 0);
	CHECK_EQ(p.len, 10);
	pfs_prom_u64(&p, "podfs_c", 3, NULL); /* dropped once full */
	CHECK(strcmp(b, "podfs_a 1\n") == 0);
}

static void test_kv(void)
{
	struct pfs_kv kv;
	char buf[32];

	CHECK_EQ(pfs_kv_parse(&kv, strdup("a 1\nnospace\nb x=1 y=two\nc 18446744073709551615\n")),
		 0);
	CHECK_EQ(kv.n, 3);
	CHECK(strcmp(pfs_kv_get(&kv, "a"), "1") == 0);
	CHECK(pfs_kv_get(&kv, "nospace") == NULL);
	CHECK(pfs_kv_num(&kv, "c") == 18446744073709551615ull);
	CHECK_EQ(pfs_kv_num(&kv, "zz"), 0);
	CHECK(strcmp(pfs_kv_word(pfs_kv_get(&kv, "b"), "y", buf, sizeof(buf)), "two") == 0);
	CHECK(strcmp(pfs_kv_word(pfs_kv_get(&kv, "b"), "x", buf, sizeof(buf)), "1") == 0);
	CHECK(pfs_kv_word(pfs_kv_get(&kv, "b"), "z", buf, sizeof(buf)) == NULL);
	pfs_kv_free(&kv);
	CHECK(strcmp(pfs_fmt_bytes(1536, buf, sizeof(buf)), "1.5 KiB") == 0);
	CHECK(strcmp(pfs_fmt_bytes(12, buf, sizeof(buf)), "12 B") == 0);
	CHECK(strcmp(pfs_fmt_secs(3725, buf, sizeof(buf)), "1h 2m") == 0);
	CHECK(strcmp(pfs_fmt_secs(59, buf, sizeof(buf)), "59s") == 0);
	CHECK(strcmp(pfs_fmt_time(0, buf, sizeof(buf)), "-") == 0);
	CHECK(strcmp(pfs_fmt_time(86400, buf, sizeof(buf)), "1970-01-02 00:00:00 UTC") == 0);
}

int main(void)
{
	test_samples();
	test_hist();
	test_overflow();
	test_kv();
	return check_done("test_prom");
}
