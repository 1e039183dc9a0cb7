/* test_deleg.c: podfsd's table of attribute delegations (daemon/deleg.c).
 *
 * Grants (one per file, the limits in all and per session), conflicts
 * (on the file and on files made in a directory, never the holder's own,
 * each holder once), recall (acknowledged: gone; not: revoked, and a
 * change under it refused), the end at the release of the CREATE's fid,
 * a rename into another directory, a session's end; directory
 * delegations (recalled by a request naming the directory or its parent,
 * granted again after a revocation).
 */
#include <errno.h>

#include "check.h"
#include "deleg_i.h"

enum { A = 101, B = 202, C = 303 };
enum { DIR1 = 1000, DIR2 = 2000, F1 = 11, F2 = 12, F3 = 13 };

static void test_grant_and_conflicts(void)
{
	struct deleg *t = deleg_new(16, 4);
	uint64_t out[8];

	CHECK(!deleg_any(t));
	CHECK(deleg_grant(t, A, F1, DIR1, 7));
	CHECK(!deleg_grant(t, B, F1, DIR1, 8)); /* one per file */
	CHECK(deleg_grant(t, A, F2, DIR1, 8));
	CHECK(deleg_grant(t, B, F3, DIR2, 9));
	CHECK(deleg_any(t));
	/* The file itself, and its directory; never the holder's own. */
	CHECK_EQ(deleg_conflicts(t, B, F1, out, 8), 1);
	CHECK_EQ(out[0], A);
	CHECK_EQ(deleg_conflicts(t, B, DIR1, out, 8), 1); /* A once, for two files */
	CHECK_EQ(deleg_conflicts(t, A, DIR1, out, 8), 0);
	CHECK_EQ(deleg_conflicts(t, A, F1, out, 8), 0);
	CHECK_EQ(deleg_conflicts(t, C, DIR2, out, 8), 1);
	CHECK_EQ(out[0], B);
	CHECK_EQ(deleg_conflicts(t, C, 4242, out, 8), 0);
	/* Bounded output. */
	CHECK(deleg_grant(t, C, 21, DIR1, 1));
	CHECK_EQ(deleg_conflicts(t, B, DIR1, out, 1), 1);
	CHECK_EQ(deleg_conflicts(t, B, DIR1, out, 8), 2);
	deleg_free(t);
}

static void test_limits(void)
{
	struct deleg *t = deleg_new(5, 3);
	size_t held, revoked;

	CHECK(deleg_grant(t, A, 1, DIR1, 1));
	CHECK(deleg_grant(t, A, 2, DIR1, 2));
	CHECK(deleg_grant(t, A, 3, DIR1, 3));
	CHECK(!deleg_grant(t, A, 4, DIR1, 4)); /* per session */
	CHECK(deleg_grant(t, B, 5, DIR1, 1));
	CHECK(deleg_grant(t, B, 6, DIR1, 2));
	CHECK(!deleg_grant(t, C, 7, DIR1, 1)); /* in all */
	deleg_counts(t, &held, &revoked);
	CHECK_EQ(held, 5);
	CHECK_EQ(revoked, 0);
	deleg_release(t, A, 2);
	CHECK(deleg_grant(t, C, 7, DIR1, 1));
	deleg_ungrant(t, C, 7);
	deleg_counts(t, &held, &revoked);
	CHECK_EQ(held, 4);
	deleg_free(t);
}

static void test_recall(void)
{
	struct deleg *t = deleg_new(16, 16);
	uint64_t out[8];
	size_t held, revoked;

	CHECK(deleg_grant(t, A, F1, DIR1, 1));
	CHECK(deleg_grant(t, A, F2, DIR1, 2));
	CHECK(deleg_grant(t, A, F3, DIR2, 3));
	/* Acknowledged: gone, changes under it applied as any. */
	CHECK_EQ(deleg_recalled(t, A, F1, true), 1);
	CHECK_EQ(deleg_conflicts(t, B, F1, out, 8), 0);
	CHECK_EQ(deleg_check(t, A, F1), 0);
	/* Not acknowledged: revoked, no conflict any more, changes refused. */
	CHECK_EQ(deleg_recalled(t, A, DIR1, false), 1);
	CHECK_EQ(deleg_conflicts(t, B, DIR1, out, 8), 0);
	CHECK_EQ(deleg_check(t, A, F2), -EIO);
	CHECK_EQ(deleg_check(t, B, F2), 0);
	CHECK_EQ(deleg_check(t, A, F3), 0);
	deleg_counts(t, &held, &revoked);
	CHECK_EQ(held, 1);
	CHECK_EQ(revoked, 1);
	/* Revoked ones end with their fid too. */
	deleg_release(t, A, 2);
	CHECK_EQ(deleg_check(t, A, F2), 0);
	/* Another session's recall does not touch A's. */
	CHECK_EQ(deleg_recalled(t, B, DIR2, false), 0);
	CHECK_EQ(deleg_conflicts(t, B, DIR2, out, 8), 1);
	deleg_free(t);
}

static void test_moved_and_dropped(void)
{
	struct deleg *t = deleg_new(16, 16);
	uint64_t out[8];

	CHECK(deleg_grant(t, A, F1, DIR1, 1));
	CHECK(deleg_grant(t, B, F2, DIR1, 1));
	deleg_moved(t, A, F1, DIR2);
	CHECK_EQ(deleg_conflicts(t, C, DIR2, out, 8), 1);
	CHECK_EQ(out[0], A);
	CHECK_EQ(deleg_conflicts(t, C, DIR1, out, 8), 1);
	CHECK_EQ(out[0], B);
	deleg_moved(t, C, F2, DIR2); /* not C's: nothing */
	CHECK_EQ(deleg_conflicts(t, A, DIR2, out, 8), 0);
	deleg_drop_owner(t, A);
	CHECK_EQ(deleg_conflicts(t, C, DIR2, out, 8), 0);
	CHECK_EQ(deleg_conflicts(t, C, F1, out, 8), 0);
	CHECK(deleg_any(t));
	deleg_drop_owner(t, B);
	CHECK(!deleg_any(t));
	deleg_free(t);
}

static void test_directory(void)
{
	enum { ROOT = 1, SUB = 2, FILE_IN_SUB = 3 };
	struct deleg *t = deleg_new(16, 16);
	uint64_t out[8];
	bool fresh;

	CHECK(deleg_grant_dir(t, A, SUB, ROOT, &fresh));
	CHECK(fresh);
	CHECK(deleg_grant_dir(t, A, SUB, ROOT, &fresh)); /* held already */
	CHECK(!fresh);
	CHECK(!deleg_grant_dir(t, B, SUB, ROOT, &fresh)); /* one holder */
	/* Named by another session: the directory, or its parent. */
	CHECK_EQ(deleg_conflicts(t, B, SUB, out, 8), 1);
	CHECK_EQ(out[0], A);
	CHECK_EQ(deleg_conflicts(t, B, ROOT, out, 8), 1);
	CHECK_EQ(deleg_conflicts(t, A, ROOT, out, 8), 0); /* never the holder's own */
	CHECK_EQ(deleg_conflicts(t, B, FILE_IN_SUB, out, 8), 0);
	/* Recalled through the parent without an answer: revoked; asked
	 * again, granted again. */
	CHECK_EQ(deleg_recalled(t, A, ROOT, false), 1);
	CHECK_EQ(deleg_conflicts(t, B, SUB, out, 8), 0);
	CHECK(deleg_grant_dir(t, A, SUB, ROOT, &fresh));
	CHECK(fresh);
	/* Acknowledged: gone. */
	CHECK_EQ(deleg_recalled(t, A, SUB, true), 1);
	CHECK(!deleg_any(t));
	/* Returned by its holder (not by another session), or the
	 * directory removed (anyone's). */
	CHECK(deleg_grant_dir(t, A, SUB, ROOT, &fresh));
	CHECK(deleg_grant(t, A, FILE_IN_SUB, SUB, 9));
	deleg_drop_dir(t, B, SUB);
	CHECK_EQ(deleg_conflicts(t, B, ROOT, out, 8), 1);
	deleg_drop_dir(t, A, SUB);
	CHECK_EQ(deleg_conflicts(t, B, ROOT, out, 8), 0);
	CHECK_EQ(deleg_conflicts(t, B, SUB, out, 8), 1); /* the file's stays */
	deleg_drop_dir(t, A, FILE_IN_SUB);              /* not a directory's */
	CHECK_EQ(deleg_conflicts(t, B, FILE_IN_SUB, out, 8), 1);
	deleg_release(t, A, 9);
	CHECK(deleg_grant_dir(t, A, SUB, ROOT, &fresh));
	deleg_drop_dir(t, 0, SUB);
	CHECK(!deleg_any(t));
	/* The export root is its own parent. */
	CHECK(deleg_grant_dir(t, B, ROOT, ROOT, &fresh));
	CHECK_EQ(deleg_conflicts(t, A, ROOT, out, 8), 1);
	deleg_release(t, B, 7); /* another fid: no effect */
	CHECK(deleg_any(t));
	deleg_drop_owner(t, B);
	CHECK(!deleg_any(t));
	deleg_free(t);
}

int main(void)
{
	test_directory();
	test_grant_and_conflicts();
	test_limits();
	test_recall();
	test_moved_and_dropped();
	return check_done("test_deleg");
}
