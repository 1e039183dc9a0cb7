/* check.h: the tiny assertion kit of the podfs C unit tests.
 *
 * Each CHECK counts one check; a failing one prints file:line and the
 * expression (and, for the _EQ forms, both values) to stderr and counts a
 * failure. A test program ends with `return check_done("name");`, which
 * prints the totals and returns the exit status for meson (1 if any check
 * failed). KNOWN_BUG marks a check that documents a library defect already
 * reported: it prints but does not fail the run, and says so once the
 * defect is fixed so it can become a plain CHECK.
 *
 * Header-only; every test program is one process. The counts are atomic:
 * a test's threads may CHECK at once (test_limits' fd workers do).
 */
#ifndef PODFS_TEST_CHECK_H
#define PODFS_TEST_CHECK_H

#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static _Atomic unsigned long check_count;
static _Atomic unsigned long check_failures;
static _Atomic unsigned long check_known;

/* Prints at most this many failures; the count stays exact. */
#define CHECK_MAX_REPORTS 100

static inline bool check_report(bool ok, const char *file, int line, const char *expr)
{
	atomic_fetch_add(&check_count, 1);
	if (ok)
		return true;
	if (atomic_fetch_add(&check_failures, 1) < CHECK_MAX_REPORTS)
		fprintf(stderr, "%s:%d: CHECK failed: %s\n", file, line, expr);
	return false;
}

static inline bool check_report_eq(long long a, long long b, const char *file, int line,
				   const char *ea, const char *eb)
{
	atomic_fetch_add(&check_count, 1);
	if (a == b)
		return true;
	if (atomic_fetch_add(&check_failures, 1) < CHECK_MAX_REPORTS)
		fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%lld != %lld)\n", file, line, ea,
			eb, a, b);
	return false;
}

/* Each macro evaluates to true when the check passed, so a caller can add
 * context: if (!CHECK(x)) fprintf(stderr, "  while ...\n"); */
#define CHECK(cond) check_report(!!(cond), __FILE__, __LINE__, #cond)
#define CHECK_EQ(a, b) \
	check_report_eq((long long)(a), (long long)(b), __FILE__, __LINE__, #a, #b)
#define CHECK_MEM(a, b, n) check_report(memcmp((a), (b), (n)) == 0, __FILE__, __LINE__, \
					"memcmp(" #a ", " #b ", " #n ") == 0")
#define CHECK_STR(a, b) check_report(strcmp((a), (b)) == 0, __FILE__, __LINE__, \
				     "strcmp(" #a ", " #b ") == 0")

#define KNOWN_BUG(cond, what)                                                          \
	do {                                                                           \
		atomic_fetch_add(&check_known, 1);                                     \
		if (cond)                                                              \
			fprintf(stderr, "%s:%d: known bug now FIXED (make it a CHECK): %s\n", \
				__FILE__, __LINE__, what);                             \
		else                                                                   \
			fprintf(stderr, "%s:%d: known lib bug (reported): %s\n", __FILE__, \
				__LINE__, what);                                       \
	} while (0)

static inline int check_done(const char *prog)
{
	unsigned long failed = atomic_load(&check_failures);

	fprintf(stderr, "%s: %lu checks, %lu failed, %lu known bugs\n", prog,
		atomic_load(&check_count), failed, atomic_load(&check_known));
	return failed ? 1 : 0;
}

/* Deterministic pseudo-random numbers (splitmix64): tests must be
 * reproducible, so nothing here is seeded from the clock. */
static inline uint64_t test_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15u);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
	return z ^ (z >> 31);
}

static inline void test_fill_random(uint64_t *state, void *buf, size_t n)
{
	uint8_t *p = buf;
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(test_rand(state) >> 24);
}

#endif /* PODFS_TEST_CHECK_H */
