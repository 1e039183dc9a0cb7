/* test_bigbuf.c: unit tests of the large buffers kept for reuse in the
 * sanitized builds (bigbuf.h): which are kept, how many, that a kept one
 * comes back for the next request of any large size, and, under
 * AddressSanitizer, that its bytes past the size asked for and the whole
 * of a kept one are poisoned. A buffer freed twice stops the program (in
 * a child). Without a sanitizer, that nothing is kept.
 */
#include <malloc.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "podfs/bigbuf.h"

#ifdef PFS_BIG_ASAN
#include <sanitizer/asan_interface.h>
#endif

#ifdef PFS_BIG_KEEPS
/* Empties the kept buffers (whatever an earlier test left) into buf[]. */
static void drain(void *buf[PFS_BIG_KEEP + 2])
{
	for (int i = 0; i < PFS_BIG_KEEP + 2; i++)
		buf[i] = pfs_big_alloc(PFS_BIG_MIN);
}

static void test_small_and_huge_are_plain(void)
{
	/* Below PFS_BIG_MIN and above PFS_BIG_CAP: malloc's, freed as such. */
	void *a = pfs_big_alloc(100);
	void *b = pfs_big_alloc(0);
	void *c = pfs_big_alloc((size_t)PFS_BIG_CAP * 2);

	CHECK(a && b && c);
	CHECK(malloc_usable_size(a) < PFS_BIG_MIN);
	CHECK(malloc_usable_size(c) >= (size_t)PFS_BIG_CAP * 2);
	memset(a, 1, 100);
	memset(c, 2, (size_t)PFS_BIG_CAP * 2);
	pfs_big_free(a);
	pfs_big_free(b);
	pfs_big_free(c);
	pfs_big_free(NULL);
	CHECK_EQ(pfs_big_kept(), 0); /* none of them */
}

static void test_reused_up_to_keep(void)
{
	void *buf[PFS_BIG_KEEP + 2], *again[PFS_BIG_KEEP];

	drain(buf);
	for (int i = 0; i < PFS_BIG_KEEP + 2; i++) {
		CHECK(buf[i] != NULL);
		CHECK(malloc_usable_size(buf[i]) >= PFS_BIG_CAP);
		memset(buf[i], i, PFS_BIG_MIN); /* its pages touched */
	}
	CHECK_EQ(pfs_big_kept(), 0);
	/* All freed: PFS_BIG_KEEP are kept, the last two go back to malloc. */
	for (int i = 0; i < PFS_BIG_KEEP + 2; i++)
		pfs_big_free(buf[i]);
	CHECK_EQ(pfs_big_kept(), PFS_BIG_KEEP);
	/* The kept ones come back, last freed first, for any large size. */
	size_t sizes[] = { PFS_BIG_MIN, PFS_MAX_IO + 4096, PFS_BIG_CAP };
	for (int i = 0; i < PFS_BIG_KEEP; i++) {
		void *p = pfs_big_alloc(sizes[i % 3]);
		CHECK(p == buf[PFS_BIG_KEEP - 1 - i]);
		memset(p, 0x5a, sizes[i % 3]);
		again[i] = p;
	}
	CHECK_EQ(pfs_big_kept(), 0);
	for (int i = 0; i < PFS_BIG_KEEP; i++)
		pfs_big_free(again[i]);
	/* A buffer of another's making of PFS_BIG_CAP bytes is kept too. */
	drain(buf);
	void *m = malloc(PFS_BIG_CAP);
	pfs_big_free(m);
	CHECK_EQ(pfs_big_kept(), 1);
	CHECK(pfs_big_alloc(PFS_BIG_MIN + 1) == m);
	pfs_big_free(m);
	for (int i = 0; i < PFS_BIG_KEEP + 2; i++)
		pfs_big_free(buf[i]);
}

static void test_realloc_and_free_of_a_kept_one(void)
{
	/* A buffer from here may go to realloc() and free() as any other. */
	char *p = pfs_big_alloc(PFS_BIG_MIN);

	memset(p, 7, PFS_BIG_MIN);
	char *q = realloc(p, (size_t)PFS_BIG_CAP * 2);
	CHECK(q != NULL);
	CHECK(q[0] == 7 && q[PFS_BIG_MIN - 1] == 7);
	free(q);
	free(pfs_big_alloc(PFS_BIG_CAP));
}

static void test_poisoned(void)
{
#ifdef PFS_BIG_ASAN
	size_t n = PFS_BIG_MIN + 3;
	char *p = pfs_big_alloc(n);

	CHECK(!__asan_address_is_poisoned(p));
	CHECK(!__asan_address_is_poisoned(p + n - 1));
	CHECK(__asan_address_is_poisoned(p + n));
	CHECK(__asan_address_is_poisoned(p + PFS_BIG_CAP - 1));
	pfs_big_free(p);
	/* Kept: all of it. */
	CHECK(__asan_address_is_poisoned(p));
	CHECK(__asan_address_is_poisoned(p + n - 1));
	/* Handed out again, to a larger size: just that much is usable. */
	char *q = pfs_big_alloc(PFS_MAX_IO);
	CHECK(q == p);
	CHECK(!__asan_address_is_poisoned(q + PFS_MAX_IO - 1));
	CHECK(__asan_address_is_poisoned(q + PFS_MAX_IO));
	pfs_big_free(q);
#endif
}

static void test_freed_twice_stops(void)
{
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		close(2); /* its message is expected */
		void *p = pfs_big_alloc(PFS_BIG_MIN);
		pfs_big_free(p);
		pfs_big_free(p);
		_exit(0);
	}
	int st = 0;
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
}

#else
/* Without a sanitizer: malloc and free, nothing kept. */
static void test_plain(void)
{
	void *p = pfs_big_alloc(PFS_BIG_MIN);
	void *q = pfs_big_alloc(PFS_BIG_CAP);

	CHECK(p && q);
	memset(p, 1, PFS_BIG_MIN);
	memset(q, 2, PFS_BIG_CAP);
	pfs_big_free(p);
	pfs_big_free(q);
	pfs_big_free(NULL);
	CHECK_EQ(pfs_big_kept(), 0);
}
#endif

int main(void)
{
#ifdef PFS_BIG_KEEPS
	test_small_and_huge_are_plain();
	test_reused_up_to_keep();
	test_realloc_and_free_of_a_kept_one();
	test_poisoned();
	test_freed_twice_stops();
#else
	test_plain();
#endif
	return check_done("test_bigbuf");
}
