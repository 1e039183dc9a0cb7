/* test_revalhold.c: the persisted list of client sessions and the hold on
 * changes after a restart (daemon/revalhold.c).
 *
 * The list (STATE_DIR/sessions: its format, additions from many threads
 * at once, removals), the hold after a restart (whom a change waits for,
 * its author excepted; how it ends early, by REVALIDATED or a session's
 * end; how it ends by time and who then leaves the list; its bound at
 * the caller's clock; a second crash within it), --revalidate-wait 0, an
 * unreadable list and an unusable state directory. The state directories
 * are private mkdtemp directories under /tmp, as in test_lockstate.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
#include <uv.h>

#include "check.h"
#include "revalhold_i.h"
#include "statedir.h"

#define MAGIC "podfs sessions 1\n"

static void fresh_dir(void)
{
	statedir_fresh("revalhold", "sessions");
}

/* The number of ids in the list file, the first max of them in ids; -1
 * if it is missing or its first line is not the magic. */
static long read_ids(uint64_t *ids, size_t max)
{
	char line[128];
	long n = 0;
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	if (!fgets(line, sizeof(line), f) || strcmp(line, MAGIC) != 0) {
		fclose(f);
		return -1;
	}
	for (; fgets(line, sizeof(line), f); n++)
		if ((size_t)n < max)
			ids[n] = strtoull(line, NULL, 16);
	fclose(f);
	return n;
}

/* Whether the list file holds exactly the n ids of want, in any order. */
static bool list_is(const uint64_t *want, size_t n)
{
	uint64_t got[1024];
	long m = read_ids(got, 1024);

	if (m != (long)n)
		return false;
	for (size_t i = 0; i < n; i++) {
		bool found = false;
		for (long j = 0; j < m; j++)
			found |= got[j] == want[i];
		if (!found)
			return false;
	}
	return true;
}

#define LIST_IS(...)                                                                      \
	CHECK(list_is((const uint64_t[]){ __VA_ARGS__ },                                   \
		      sizeof((const uint64_t[]){ __VA_ARGS__ }) / sizeof(uint64_t)))

static struct revalhold *open_rh(unsigned wait_s)
{
	struct revalhold *rh = NULL;
	char err[256] = "";

	if (!CHECK_EQ(revalhold_new(dir, wait_s, &rh, err, sizeof(err)), 0))
		fprintf(stderr, "  revalhold_new: %s\n", err);
	return rh;
}

/* A hold started on loop: its time runs from the loop's now. */
static void start(struct revalhold *rh, uv_loop_t *loop)
{
	CHECK_EQ(uv_loop_init(loop), 0);
	revalhold_start(rh, loop);
}

static void finish(struct revalhold *rh, uv_loop_t *loop)
{
	revalhold_stop(rh);
	uv_run(loop, UV_RUN_DEFAULT);
	CHECK_EQ(uv_loop_close(loop), 0);
	revalhold_free(rh);
}

/* A fresh state directory listing clients a and b, and a hold of wait_s
 * started on loop: the instance after theirs. */
static struct revalhold *hold_for_a_and_b(unsigned wait_s, uv_loop_t *loop)
{
	struct revalhold *rh;

	fresh_dir();
	write_list(MAGIC "000000000000000a\n000000000000000b\n");
	rh = open_rh(wait_s);
	start(rh, loop);
	return rh;
}

static void test_list(void)
{
	struct revalhold *rh;
	struct revalhold_info in;
	uv_loop_t loop;
	uint64_t until;

	fresh_dir();
	rh = open_rh(10);
	start(rh, &loop);
	CHECK_EQ(read_ids(NULL, 0), 0); /* written at start: the directory works */
	CHECK(!revalhold_waits(rh, 0xa, uv_now(&loop), &until)); /* nobody before */
	CHECK_EQ(revalhold_note_client(rh, 0xa, "host-a"), 0);
	LIST_IS(0xa);
	CHECK_EQ(revalhold_note_client(rh, 0xa, "host-a"), 0); /* listed once */
	CHECK_EQ(revalhold_note_client(rh, 0xfedcba9876543210ull, "host-b"), 0);
	LIST_IS(0xa, 0xfedcba9876543210ull);
	revalhold_drop_client(rh, 0xa);
	LIST_IS(0xfedcba9876543210ull);
	revalhold_drop_client(rh, 0x77); /* not listed: nothing changes */
	LIST_IS(0xfedcba9876543210ull);
	revalhold_info(rh, &in);
	CHECK(!in.active);
	CHECK_EQ(in.expected, 0);
	CHECK_EQ(in.listed, 1);
	finish(rh, &loop);
	revalhold_free(NULL);
}

/* A restart with clients listed: changes wait until each of the others
 * revalidated or left. */
static void test_hold_ends_early(void)
{
	struct revalhold *rh;
	struct revalhold_info in;
	uv_loop_t loop;
	uint64_t until = 0, now;

	rh = hold_for_a_and_b(30, &loop);
	now = uv_now(&loop);
	CHECK(revalhold_waits(rh, 0xc, now, &until)); /* a new client's change */
	CHECK_EQ(until, now + 30000);
	CHECK(revalhold_waits(rh, 0xa, now, &until)); /* a's change waits for b */
	LIST_IS(0xa, 0xb); /* listed clients stay listed through the hold */
	revalhold_info(rh, &in);
	CHECK(in.active);
	CHECK_EQ(in.expected, 2);
	CHECK_EQ(in.revalidated, 0);

	revalhold_done(rh, 0xa, "host-a", 10, 2);
	CHECK(!revalhold_waits(rh, 0xb, now, &until)); /* b's own: nobody else */
	CHECK(revalhold_waits(rh, 0xc, now, &until));
	revalhold_done(rh, 0xa, "host-a", 10, 0); /* twice counts once */
	revalhold_done(rh, 0xd, "host-d", 1, 0);  /* not a client before */
	revalhold_info(rh, &in);
	CHECK_EQ(in.revalidated, 1);
	CHECK(in.active);
	/* b's session ends: it caches nothing any more. */
	revalhold_drop_client(rh, 0xb);
	CHECK(!revalhold_waits(rh, 0xc, now, &until));
	revalhold_info(rh, &in);
	CHECK(!in.active);
	CHECK_EQ(in.revalidated, 2);
	LIST_IS(0xa);
	finish(rh, &loop);

	/* Every client revalidated: the hold ends, both stay listed. */
	rh = hold_for_a_and_b(30, &loop);
	revalhold_done(rh, 0xb, "host-b", 0, 0);
	revalhold_done(rh, 0xa, "host-a", 5, 5);
	CHECK(!revalhold_waits(rh, 0xc, uv_now(&loop), &until));
	LIST_IS(0xa, 0xb);
	finish(rh, &loop);
}

/* The hold's time is up at the caller's clock, and its timer ends it:
 * who did not come back leaves the list. */
static void test_hold_timer(void)
{
	struct revalhold *rh;
	struct revalhold_info in;
	uv_loop_t loop;
	uint64_t until = 0, now;

	rh = hold_for_a_and_b(1, &loop);
	now = uv_now(&loop);
	revalhold_done(rh, 0xa, "host-a", 1, 0);
	CHECK(revalhold_waits(rh, 0xc, now + 999, &until));
	CHECK_EQ(until, now + 1000);
	CHECK(!revalhold_waits(rh, 0xc, now + 1000, &until)); /* up, timer or not */
	CHECK_EQ(revalhold_note_client(rh, 0xc, "host-c"), 0);
	uv_run(&loop, UV_RUN_DEFAULT); /* until the one-shot timer fired */
	revalhold_info(rh, &in);
	CHECK(!in.active);
	CHECK_EQ(in.revalidated, 1);
	CHECK(in.held_ms >= 900);
	LIST_IS(0xa, 0xc);
	finish(rh, &loop);

	/* Nobody before: start and stop leave nothing running. */
	fresh_dir();
	rh = open_rh(1);
	start(rh, &loop);
	finish(rh, &loop);
}

/* One that logged in again but has not revalidated when the time is up
 * stays on the list: it is alive and caches, so the next restart waits
 * for it too (it revalidates later, here, or ends its session). */
static void test_hold_timer_keeps_who_is_back(void)
{
	struct revalhold *rh;
	struct revalhold_info in;
	uv_loop_t loop;
	uint64_t until;

	rh = hold_for_a_and_b(1, &loop);
	CHECK_EQ(revalhold_note_client(rh, 0xb, "host-b"), 0); /* b is back, a is not */
	uv_run(&loop, UV_RUN_DEFAULT); /* the time is up */
	revalhold_info(rh, &in);
	CHECK(!in.active);
	CHECK_EQ(in.revalidated, 0);
	LIST_IS(0xb);
	revalhold_done(rh, 0xb, "host-b", 3, 0); /* late, and counted nowhere */
	LIST_IS(0xb);
	finish(rh, &loop); /* a crash */
	rh = open_rh(30);
	start(rh, &loop);
	CHECK(revalhold_waits(rh, 0xc, uv_now(&loop), &until)); /* for b */
	revalhold_done(rh, 0xb, "host-b", 3, 0);
	CHECK(!revalhold_waits(rh, 0xc, uv_now(&loop), &until));
	finish(rh, &loop);
}

/* A second crash within the hold waits for the same clients again. */
static void test_crash_in_hold(void)
{
	struct revalhold *rh;
	uv_loop_t loop;
	uint64_t until;

	rh = hold_for_a_and_b(30, &loop);
	revalhold_done(rh, 0xa, "host-a", 1, 0);
	finish(rh, &loop); /* the crash */
	rh = open_rh(30);
	start(rh, &loop);
	CHECK(revalhold_waits(rh, 0xb, uv_now(&loop), &until)); /* for a again */
	CHECK(revalhold_waits(rh, 0xa, uv_now(&loop), &until)); /* and b */
	finish(rh, &loop);
}

static void test_no_wait(void)
{
	struct revalhold *rh;
	uv_loop_t loop;
	uint64_t until;

	/* --revalidate-wait 0: nobody is waited for, the list starts over. */
	fresh_dir();
	write_list(MAGIC "000000000000000a\n");
	rh = open_rh(0);
	start(rh, &loop);
	CHECK(!revalhold_waits(rh, 0xc, uv_now(&loop), &until));
	CHECK_EQ(read_ids(NULL, 0), 0);
	CHECK_EQ(revalhold_note_client(rh, 0xa, "host-a"), 0);
	LIST_IS(0xa);
	finish(rh, &loop);
}

/* An unreadable list: nobody is known, so nothing waits (a client that
 * cannot be named cannot be waited for), and it is written anew. */
static void test_malformed(void)
{
	static const char *bad[] = {
		"not the magic\n000000000000000a\n",
		MAGIC "zz\n",
		MAGIC "000000000000000a", /* no newline */
		MAGIC "000000000000000a trailing\n",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct revalhold *rh;
		uv_loop_t loop;
		uint64_t until;

		fresh_dir();
		write_list(bad[i]);
		rh = open_rh(30);
		start(rh, &loop);
		if (!CHECK(!revalhold_waits(rh, 0x1234, uv_now(&loop), &until)))
			fprintf(stderr, "  list %zu\n", i);
		CHECK_EQ(read_ids(NULL, 0), 0);
		finish(rh, &loop);
	}
}

/* Sessions begin on many workers at once: each is on disk when its call
 * returns, and none is lost (the writers share writes). */
#define THREADS 8
#define PER_THREAD 40

struct noter {
	struct revalhold *rh;
	unsigned t;
	int fails;
	int missing; /* returned before its id was in the file */
};

static void *note_many(void *arg)
{
	struct noter *n = arg;
	uint64_t got[THREADS * PER_THREAD];

	for (unsigned i = 0; i < PER_THREAD; i++) {
		uint64_t id = ((uint64_t)n->t << 32) | (i + 1);
		if (revalhold_note_client(n->rh, id, "h") != 0)
			n->fails++;
		long m = read_ids(got, THREADS * PER_THREAD);
		bool found = false;
		for (long j = 0; j < m; j++)
			found |= got[j] == id;
		n->missing += !found;
	}
	return NULL;
}

static void test_concurrent_notes(void)
{
	struct revalhold *rh;
	struct revalhold_info in;
	struct noter n[THREADS];
	pthread_t th[THREADS];
	uv_loop_t loop;

	fresh_dir();
	rh = open_rh(10);
	start(rh, &loop);
	for (unsigned t = 0; t < THREADS; t++) {
		n[t] = (struct noter){ .rh = rh, .t = t };
		CHECK_EQ(pthread_create(&th[t], NULL, note_many, &n[t]), 0);
	}
	/* The loop thread's removals meanwhile, as sessions end. */
	for (unsigned i = 0; i < 50; i++)
		revalhold_drop_client(rh, 0xdead);
	for (unsigned t = 0; t < THREADS; t++) {
		CHECK_EQ(pthread_join(th[t], NULL), 0);
		CHECK_EQ(n[t].fails, 0);
		CHECK_EQ(n[t].missing, 0);
	}
	uint64_t got[THREADS * PER_THREAD + 1];
	CHECK_EQ(read_ids(got, THREADS * PER_THREAD + 1), THREADS * PER_THREAD);
	revalhold_info(rh, &in);
	CHECK_EQ(in.listed, THREADS * PER_THREAD);
	finish(rh, &loop);
}

static void test_bad_state_dir(void)
{
	struct revalhold *rh = NULL;
	char err[256] = "";

	CHECK(revalhold_new("/proc/no/such/dir", 10, &rh, err, sizeof(err)) < 0);
	CHECK(rh == NULL);
	CHECK(strstr(err, "sessions") != NULL);
}

int main(void)
{
	test_list();
	test_hold_ends_early();
	test_hold_timer();
	test_hold_timer_keeps_who_is_back();
	test_crash_in_hold();
	test_no_wait();
	test_malformed();
	test_concurrent_notes();
	test_bad_state_dir();
	statedir_remove();
	return check_done("test_revalhold");
}
