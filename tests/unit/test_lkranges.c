/* test_lkranges.c: one lock owner's byte ranges (daemon/lkranges.c).
 *
 * Random lock and unlock sequences against two references: a model that
 * keeps the owner's lock type of every byte of a small file (plus one
 * cell for "from byte 63 to the end of the file"), whose maximal runs of
 * one type are the ranges; and the kernel itself, holding the same
 * locks as OFD locks on a scratch file, whose lock table for that file
 * /proc/self/fdinfo lists. After every call the count lkranges predicted
 * must be what it then holds, its ranges those of the model, and their
 * number the kernel's.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "podfs/codec.h"
#include "lkranges_i.h"

#define CELLS 64 /* bytes 0..62, and cell 63: byte 63 to the end */

/* The count a change would leave; the change made. */
static size_t count_after(const struct lkranges *r, uint64_t s, uint64_t e, uint8_t type)
{
	struct lkr_change c;

	return lkranges_plan(r, s, e, type, &c);
}

static void apply(struct lkranges *r, uint64_t s, uint64_t e, uint8_t type)
{
	struct lkr_change c;

	lkranges_plan(r, s, e, type, &c);
	lkranges_commit(r, &c);
}

static uint8_t cell_of(const struct lkranges *r, unsigned c)
{
	uint64_t at = c;

	for (size_t i = 0; i < r->n; i++)
		if (r->v[i].start <= at && at <= r->v[i].end)
			return r->v[i].type;
	return PFS_LK_UN;
}

/* r is sorted, disjoint, merged, within bounds, and holds what the model
 * holds. */
static bool same_as_model(const struct lkranges *r, const uint8_t *model)
{
	bool ok = true;

	for (size_t i = 0; i < r->n; i++) {
		const struct lkrange *a = &r->v[i];
		ok &= CHECK(a->start <= a->end && a->end <= LKR_EOF);
		ok &= CHECK(a->end == LKR_EOF || a->end < CELLS - 1);
		if (i > 0) {
			const struct lkrange *b = &r->v[i - 1];
			ok &= CHECK(b->end < a->start);
			ok &= CHECK(b->end + 1 < a->start || b->type != a->type);
		}
	}
	for (unsigned c = 0; c < CELLS; c++)
		ok &= CHECK_EQ(cell_of(r, c), model[c]);
	return ok;
}

static size_t model_runs(const uint8_t *model)
{
	size_t n = 0;

	for (unsigned c = 0; c < CELLS; c++)
		if (model[c] != PFS_LK_UN && (c == 0 || model[c - 1] != model[c]))
			n++;
	return n;
}

/* The kernel's lock table entries on fd's file (its fdinfo "lock:" lines). */
static long kernel_locks(int fd)
{
	char path[64], line[512];
	long n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "lock:", 5) == 0)
			n++;
	fclose(f);
	return n;
}

static void test_basics(void)
{
	struct lkranges r = { 0 };

	CHECK_EQ(count_after(&r, 0, 9, PFS_LK_UN), 0);
	CHECK_EQ(count_after(&r, 0, 9, PFS_LK_WR), 1);
	apply(&r, 0, 9, PFS_LK_WR);
	/* Touching, same type: merged. */
	CHECK_EQ(count_after(&r, 10, 19, PFS_LK_WR), 1);
	/* Touching, other type: two. */
	CHECK_EQ(count_after(&r, 10, 19, PFS_LK_RD), 2);
	/* A hole: two. */
	CHECK_EQ(count_after(&r, 11, 19, PFS_LK_WR), 2);
	/* The same lock again, or a part of it: nothing changes. */
	CHECK_EQ(count_after(&r, 3, 5, PFS_LK_WR), 1);
	/* Another type in the middle, or an unlock there: split. */
	CHECK_EQ(count_after(&r, 3, 5, PFS_LK_RD), 3);
	CHECK_EQ(count_after(&r, 3, 5, PFS_LK_UN), 2);
	apply(&r, 3, 5, PFS_LK_UN);
	CHECK_EQ(r.n, 2);
	/* Every other byte, then the whole range: one. */
	for (uint64_t b = 20; b < 40; b += 2)
		apply(&r, b, b, PFS_LK_RD);
	CHECK_EQ(r.n, 12);
	CHECK_EQ(count_after(&r, 0, UINT64_MAX, PFS_LK_RD), 1);
	CHECK_EQ(count_after(&r, 0, UINT64_MAX, PFS_LK_UN), 0);
	apply(&r, 0, UINT64_MAX, PFS_LK_WR);
	CHECK_EQ(r.n, 1);
	CHECK_EQ(r.v[0].end, LKR_EOF);
	apply(&r, 5, UINT64_MAX, PFS_LK_UN);
	CHECK_EQ(r.n, 1);
	CHECK_EQ(r.v[0].end, 4);
	apply(&r, 0, 4, PFS_LK_UN);
	CHECK_EQ(r.n, 0);
	CHECK(r.v == NULL);
	lkranges_fini(&r);
}

static void test_random(int fd, unsigned seed, unsigned ops)
{
	struct lkranges r = { 0 };
	uint8_t model[CELLS];
	bool ok = true;

	memset(model, PFS_LK_UN, sizeof(model));
	srandom(seed);
	for (unsigned i = 0; i < ops && ok; i++) {
		uint64_t s = (uint64_t)(random() % (CELLS - 1)), e;
		uint8_t type = (uint8_t)(random() % 3);
		long len = random() % 6 == 0 ? 0 : 1 + random() % 12; /* 0: to the end */

		e = len == 0 ? UINT64_MAX : s + (uint64_t)len - 1;
		if (e != UINT64_MAX && e >= CELLS - 1)
			e = CELLS - 2;
		size_t want = count_after(&r, s, e, type);
		for (unsigned c = (unsigned)s; c < CELLS && (e == UINT64_MAX || c <= e); c++)
			model[c] = type;
		apply(&r, s, e, type);
		ok &= CHECK_EQ(r.n, want);
		ok &= CHECK_EQ(r.n, model_runs(model));
		ok &= same_as_model(&r, model);
		if (fd >= 0) {
			struct flock fl = {
				.l_type = type == PFS_LK_RD ? F_RDLCK : type == PFS_LK_WR ? F_WRLCK : F_UNLCK,
				.l_whence = SEEK_SET,
				.l_start = (off_t)s,
				.l_len = e == UINT64_MAX ? 0 : (off_t)(e - s + 1),
			};
			ok &= CHECK_EQ(fcntl(fd, F_OFD_SETLK, &fl), 0);
			ok &= CHECK_EQ(kernel_locks(fd), (long)r.n);
		}
		if (!ok)
			fprintf(stderr, "  seed %u, op %u: [%llu, %llu] type %u\n", seed, i,
				(unsigned long long)s, (unsigned long long)e, type);
	}
	lkranges_fini(&r);
}

int main(void)
{
	char path[] = "/tmp/test_lkranges.XXXXXX";
	int fd = mkstemp(path);

	test_basics();
	CHECK(fd >= 0);
	if (fd >= 0) {
		unlink(path);
		/* The kernel lists the locks of an fd in fdinfo since 4.14. */
		CHECK_EQ(kernel_locks(fd), 0);
	}
	for (unsigned seed = 1; seed <= 200; seed++) {
		int kfd = -1;
		if (fd >= 0) {
			struct flock all = { .l_type = F_UNLCK, .l_whence = SEEK_SET };
			CHECK_EQ(fcntl(fd, F_OFD_SETLK, &all), 0);
			kfd = fd;
		}
		test_random(kfd, seed, 300);
	}
	if (fd >= 0)
		close(fd);
	return check_done("test_lkranges");
}
