/* test_lockstate.c: podfsd's lock state beyond the kernel's lock table
 * (daemon/lockstate.c).
 *
 * The persisted list of lock holders (STATE_DIR/lockholders: its format,
 * additions and removals), the grace period after a restart (when it is
 * due, who may reclaim, how it ends early, how it ends by time and what
 * the clients that did not come back lose, a crash within grace, an
 * unreadable list, --grace 0), an unusable state directory, and the
 * waiters of blocked locks. The state directories are private mkdtemp
 * directories under /tmp, as in test_auth.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "check.h"
#include "lockstate_i.h"
#include "statedir.h"

#define MAGIC "podfs lock holders 1\n"

static void fresh_dir(void)
{
	statedir_fresh("lockstate", "lockholders");
}

/* The list file as text ("" if missing). */
static const char *read_list(void)
{
	static char buf[4096];
	FILE *f = fopen(path, "r");
	size_t n = 0;

	buf[0] = '\0';
	if (f) {
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
	return buf;
}

static struct lockstate *open_ls(unsigned grace)
{
	struct lockstate *ls = NULL;
	char err[256] = "";

	if (!CHECK_EQ(lockstate_new(dir, grace, &ls, err, sizeof(err)), 0))
		fprintf(stderr, "  lockstate_new: %s\n", err);
	return ls;
}

static void test_holders(void)
{
	struct lockstate *ls;

	fresh_dir();
	ls = open_ls(30);
	CHECK(!lockstate_in_grace(ls));
	CHECK_STR(read_list(), MAGIC); /* written at start: the directory works */
	CHECK_EQ(lockstate_may_reclaim(ls, 0xa), -ENOLCK);

	CHECK_EQ(lockstate_note_holder(ls, 0xa, "host-a"), 0);
	CHECK_STR(read_list(), MAGIC "000000000000000a\n");
	CHECK_EQ(lockstate_note_holder(ls, 0xa, "host-a"), 0); /* listed once */
	CHECK_EQ(lockstate_note_holder(ls, 0xfedcba9876543210ull, "host-b"), 0);
	CHECK_STR(read_list(), MAGIC "000000000000000a\nfedcba9876543210\n");
	lockstate_drop_holder(ls, 0xa);
	CHECK_STR(read_list(), MAGIC "fedcba9876543210\n");
	lockstate_drop_holder(ls, 0x77); /* not listed: nothing changes */
	CHECK_STR(read_list(), MAGIC "fedcba9876543210\n");
	CHECK(!lockstate_in_grace(ls));
	lockstate_free(ls);
	lockstate_free(NULL);
}

/* A restart with holders listed: grace until each came back or left. */
static void test_grace_ends_early(void)
{
	struct lockstate *ls;

	fresh_dir();
	write_list(MAGIC "000000000000000a\n000000000000000b\n");
	ls = open_ls(30);
	CHECK(lockstate_in_grace(ls));
	CHECK_EQ(lockstate_may_reclaim(ls, 0xa), 0);
	CHECK_EQ(lockstate_may_reclaim(ls, 0xb), 0);
	CHECK_EQ(lockstate_may_reclaim(ls, 0xc), -ENOLCK); /* not listed */
	/* Listed clients stay listed through grace. */
	CHECK_STR(read_list(), MAGIC "000000000000000a\n000000000000000b\n");

	lockstate_reclaim_done(ls, 0xa, "host-a", 2, 0);
	CHECK(lockstate_in_grace(ls));
	lockstate_reclaim_done(ls, 0xa, "host-a", 0, 0); /* twice counts once */
	CHECK(lockstate_in_grace(ls));
	/* b's session ends: it has nothing left to reclaim. */
	lockstate_drop_holder(ls, 0xb);
	CHECK(!lockstate_in_grace(ls));
	CHECK_EQ(lockstate_may_reclaim(ls, 0xa), -ENOLCK); /* grace is over */
	CHECK_STR(read_list(), MAGIC "000000000000000a\n");
	lockstate_free(ls);

	/* Every holder reclaimed: grace ends, both stay listed. */
	fresh_dir();
	write_list(MAGIC "000000000000000a\n000000000000000b\n");
	ls = open_ls(30);
	lockstate_reclaim_done(ls, 0xb, "host-b", 1, 1);
	lockstate_reclaim_done(ls, 0xa, "host-a", 1, 0);
	CHECK(!lockstate_in_grace(ls));
	CHECK_STR(read_list(), MAGIC "000000000000000a\n000000000000000b\n");
	lockstate_free(ls);
}

/* A second crash within grace waits for the same clients again. */
static void test_crash_in_grace(void)
{
	struct lockstate *ls;

	fresh_dir();
	write_list(MAGIC "000000000000000a\n000000000000000b\n");
	ls = open_ls(30);
	lockstate_reclaim_done(ls, 0xa, "host-a", 1, 0);
	lockstate_free(ls); /* the crash */
	ls = open_ls(30);
	CHECK(lockstate_in_grace(ls));
	CHECK_EQ(lockstate_may_reclaim(ls, 0xa), 0);
	CHECK_EQ(lockstate_may_reclaim(ls, 0xb), 0);
	lockstate_free(ls);
}

static void test_no_grace(void)
{
	struct lockstate *ls;

	/* --grace 0: the old holders' locks are lost, the list emptied. */
	fresh_dir();
	write_list(MAGIC "000000000000000a\n");
	ls = open_ls(0);
	CHECK(!lockstate_in_grace(ls));
	CHECK_EQ(lockstate_may_reclaim(ls, 0xa), -ENOLCK);
	CHECK_STR(read_list(), MAGIC);
	lockstate_free(ls);

	/* An empty list: no grace either. */
	fresh_dir();
	write_list(MAGIC);
	ls = open_ls(30);
	CHECK(!lockstate_in_grace(ls));
	lockstate_free(ls);
}

/* An unreadable list: a full grace period in which anyone may reclaim,
 * and which cannot end early (nobody is known). */
static void test_malformed(void)
{
	static const char *bad[] = {
		"not the magic\n000000000000000a\n",
		MAGIC "zz\n",
		MAGIC "000000000000000a", /* no newline */
		MAGIC "000000000000000a trailing\n",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct lockstate *ls;

		fresh_dir();
		write_list(bad[i]);
		ls = open_ls(30);
		if (!CHECK(lockstate_in_grace(ls)))
			fprintf(stderr, "  list %zu\n", i);
		CHECK_EQ(lockstate_may_reclaim(ls, 0x1234), 0);
		lockstate_reclaim_done(ls, 0x1234, "h", 1, 0);
		lockstate_drop_holder(ls, 0x1234);
		CHECK(lockstate_in_grace(ls));
		CHECK_STR(read_list(), MAGIC); /* rewritten, trusted again next time */
		lockstate_free(ls);
	}
}

/* Grace ends when its time is up: who did not come back loses its locks
 * and leaves the list. */
static void test_grace_timer(void)
{
	struct lockstate *ls;
	uv_loop_t loop;

	fresh_dir();
	write_list(MAGIC "000000000000000a\n000000000000000b\n");
	ls = open_ls(1);
	CHECK_EQ(uv_loop_init(&loop), 0);
	lockstate_start(ls, &loop);
	lockstate_reclaim_done(ls, 0xa, "host-a", 1, 0);
	CHECK(lockstate_in_grace(ls));
	uv_run(&loop, UV_RUN_DEFAULT); /* until the one-shot timer fired */
	CHECK(!lockstate_in_grace(ls));
	CHECK_STR(read_list(), MAGIC "000000000000000a\n");
	lockstate_stop(ls);
	uv_run(&loop, UV_RUN_DEFAULT);
	CHECK_EQ(uv_loop_close(&loop), 0);
	lockstate_free(ls);

	/* Not in grace: start and stop leave nothing running. */
	fresh_dir();
	ls = open_ls(1);
	CHECK_EQ(uv_loop_init(&loop), 0);
	lockstate_start(ls, &loop);
	lockstate_stop(ls);
	uv_run(&loop, UV_RUN_DEFAULT);
	CHECK_EQ(uv_loop_close(&loop), 0);
	lockstate_free(ls);
}

static void test_bad_state_dir(void)
{
	struct lockstate *ls = NULL;
	char err[256] = "";

	CHECK(lockstate_new("/proc/no/such/dir", 30, &ls, err, sizeof(err)) < 0);
	CHECK(ls == NULL);
	CHECK(strstr(err, "lockholders") != NULL);
}

static void test_waiters(void)
{
	struct lockstate *ls;
	uint64_t ids[8];

	fresh_dir();
	ls = open_ls(30);
	lockstate_wait_add(ls, 1, 0xa);
	lockstate_wait_add(ls, 1, 0xa); /* once */
	lockstate_wait_add(ls, 1, 0xb);
	lockstate_wait_add(ls, 2, 0xa);
	CHECK_EQ(lockstate_wait_take(ls, 3, ids, 8), 0);
	CHECK_EQ(lockstate_wait_take(ls, 1, ids, 1), 1); /* at most max */
	CHECK_EQ(lockstate_wait_take(ls, 1, ids + 1, 8), 1);
	CHECK((ids[0] == 0xa && ids[1] == 0xb) || (ids[0] == 0xb && ids[1] == 0xa));
	CHECK_EQ(lockstate_wait_take(ls, 1, ids, 8), 0); /* taken: gone */
	lockstate_wait_del(ls, 2, 0xa);
	lockstate_wait_del(ls, 2, 0xa); /* not there: harmless */
	CHECK_EQ(lockstate_wait_take(ls, 2, ids, 8), 0);

	/* A session that ends waits for nothing: its registrations go,
	 * everywhere, and no one else's. */
	for (uint64_t k = 10; k < 20; k++) {
		lockstate_wait_add(ls, k, 0xc);
		lockstate_wait_add(ls, k, 0xd);
	}
	lockstate_wait_drop_client(ls, 0xc);
	lockstate_wait_drop_client(ls, 0xe); /* waits for nothing: harmless */
	for (uint64_t k = 10; k < 20; k++) {
		CHECK_EQ(lockstate_wait_take(ls, k, ids, 8), 1);
		CHECK_EQ(ids[0], 0xd);
	}

	/* One client's registrations are capped: the newest is kept in
	 * place of an older one; another client's are not touched. */
	lockstate_wait_add(ls, 7, 0xf);
	for (uint64_t k = 1000; k < 1000 + 2 * LOCKSTATE_WAITS_PER_CLIENT; k++)
		lockstate_wait_add(ls, k, 0xe);
	size_t held = 0;
	for (uint64_t k = 1000; k < 1000 + 2 * LOCKSTATE_WAITS_PER_CLIENT; k++)
		held += lockstate_wait_take(ls, k, ids, 8);
	CHECK_EQ(held, LOCKSTATE_WAITS_PER_CLIENT);
	lockstate_wait_add(ls, 2000, 0xe);
	CHECK_EQ(lockstate_wait_take(ls, 2000, ids, 8), 1); /* room again */
	CHECK_EQ(lockstate_wait_take(ls, 7, ids, 8), 1);
	CHECK_EQ(ids[0], 0xf);
	for (uint64_t k = 3000; k < 3000 + 2 * LOCKSTATE_WAITS_PER_CLIENT; k++)
		lockstate_wait_add(ls, k, 0xe);
	CHECK_EQ(lockstate_wait_take(ls, 3000 + 2 * LOCKSTATE_WAITS_PER_CLIENT - 1, ids, 8), 1);
	lockstate_wait_drop_client(ls, 0xe);

	/* Many waiters, taken in rounds. */
	for (uint64_t c = 0; c < 100; c++)
		lockstate_wait_add(ls, 5, c);
	lockstate_wait_add(ls, 6, 1);
	size_t total = 0, n;
	uint64_t sum = 0;
	while ((n = lockstate_wait_take(ls, 5, ids, 8)) > 0) {
		total += n;
		for (size_t i = 0; i < n; i++)
			sum += ids[i];
	}
	CHECK_EQ(total, 100);
	CHECK_EQ(sum, 99 * 100 / 2);
	CHECK_EQ(lockstate_wait_take(ls, 6, ids, 8), 1);
	lockstate_free(ls);
}

/* A random mix of registrations, withdrawals, releases and ends of
 * sessions against a model: which client waits for which file, and since
 * when (a release wakes a file's waiters oldest first; past the cap, a
 * client's oldest registration makes room). */
static void test_waiters_model(void)
{
	enum { CLIENTS = 3, KEYS = 600 };
	static uint64_t since[CLIENTS][KEYS]; /* 0: not waiting */
	struct lockstate *ls;
	uint64_t rnd = 99, clock = 0, ids[8], capped = 0;

	fresh_dir();
	ls = open_ls(0);
	for (int step = 0; step < 60000; step++) {
		uint64_t c = test_rand(&rnd) % CLIENTS, k = test_rand(&rnd) % KEYS;
		unsigned what = (unsigned)(test_rand(&rnd) % 16);
		if (what < 13) { /* register */
			lockstate_wait_add(ls, k, c);
			if (since[c][k])
				continue;
			unsigned n = 0, oldest = 0;
			for (unsigned j = 0; j < KEYS; j++) {
				if (!since[c][j])
					continue;
				n++;
				if (!since[c][oldest] || since[c][j] < since[c][oldest])
					oldest = j;
			}
			if (n >= LOCKSTATE_WAITS_PER_CLIENT) {
				since[c][oldest] = 0;
				capped++;
			}
			since[c][k] = ++clock;
		} else if (what < 14) { /* got its lock, or gave up */
			lockstate_wait_del(ls, k, c);
			since[c][k] = 0;
		} else if (what < 15) { /* a release: up to 3, oldest first */
			size_t n = lockstate_wait_take(ls, k, ids, 3);
			for (size_t i = 0; i < 3; i++) {
				int first = -1;
				for (int j = 0; j < CLIENTS; j++)
					if (since[j][k] && (first < 0 || since[j][k] < since[first][k]))
						first = j;
				if (first < 0) {
					if (!CHECK_EQ(n, i))
						step = 1 << 30;
					break;
				}
				if (!CHECK(i < n) || !CHECK_EQ(ids[i], (uint64_t)first)) {
					step = 1 << 30;
					break;
				}
				since[first][k] = 0;
			}
		} else if (test_rand(&rnd) % 64 == 0) { /* its session ended */
			lockstate_wait_drop_client(ls, c);
			memset(since[c], 0, sizeof(since[c]));
		}
	}
	/* What is left, file by file. */
	for (uint64_t k = 0; k < KEYS; k++) {
		size_t want = 0, got = 0, n;
		for (int j = 0; j < CLIENTS; j++)
			want += since[j][k] != 0;
		while ((n = lockstate_wait_take(ls, k, ids, 8)) > 0)
			got += n;
		CHECK_EQ(got, want);
	}
	CHECK(capped > 1000); /* the cap was at work */
	lockstate_free(ls);
}

int main(void)
{
	test_holders();
	test_grace_ends_early();
	test_crash_in_grace();
	test_no_grace();
	test_malformed();
	test_grace_timer();
	test_bad_state_dir();
	test_waiters();
	test_waiters_model();
	statedir_remove();
	return check_done("test_lockstate");
}
