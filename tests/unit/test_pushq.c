/* test_pushq.c: unit tests of the push queue's acknowledgements
 * (fs/pushq.c): attribute pushes acknowledged on receipt even while the
 * push thread is blocked, but each only after its early_cb ran, entry
 * invalidations (and what follows them) only once applied, at once while
 * their directory is busy with a local operation, after
 * PUSHQ_APPLY_WAIT_MS otherwise, a file's data (what note_cb marks) only
 * once applied, busy directories or not, a new connection
 * counting from 1 again, and the last count sent again while a push is
 * held back (the client runs), and pushq_wait_applied (what a lock
 * grant waits for) returning once the pushes queued before it were
 * applied, and not before, within its bound; a RECALL applied ahead of
 * a push the kernel holds.
 *
 * The push thread's kernel call is a fake that blocks on the pushes
 * about one handle until the test releases them; every wait is bounded.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "testfh.h"
#include "podfs/clock.h"
#include "pushq_i.h"

#define BLOCK_TAG 7 /* pushes about this handle block in apply_cb */
#define WAIT_MS 3000 /* bound of every wait for something that must happen */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static bool released;       /* apply_cb may return for BLOCK_TAG */
static unsigned applied;    /* pushes applied */
static uint64_t ack_gen, ack_count;
static unsigned ack_calls;  /* acknowledgements sent, repeated counts too */
static bool went_back;      /* a count lower than the last of its connection */
static unsigned earlies;    /* early_cb calls for INVAL_INODE pushes */
static bool early_late;     /* an early_cb after the ack that counted its push */

/* As the client's: the data of a file (offset >= 0) is applied first. */
static uint64_t note_cb(void *arg, uint16_t op, const uint8_t *payload, size_t len,
			bool *applied_first, uint64_t *name_key)
{
	struct pfs_inval_inode_push ii;
	struct pfs_inval_entry_push ie;

	(void)arg;
	/* A directory's name key: from its tag (test_busy_by_name). */
	if (op == PFS_OP_INVAL_ENTRY && pfs_dec_inval_entry_push(payload, len, &ie) == 0)
		*name_key = pushq_name_key(ie.parent.data[0], 1);
	*applied_first = op == PFS_OP_INVAL_INODE &&
			 pfs_dec_inval_inode_push(payload, len, &ii) == 0 && ii.offset >= 0;
	return 0;
}

/* The payload's first handle byte (after its length) tells the tag. */
static void apply_cb(void *arg, uint16_t op, const uint8_t *payload, size_t len, uint64_t seq)
{
	struct pfs_inval_entry_push ie;
	struct pfs_inval_inode_push ii;
	struct pfs_fh blk = fh_of(BLOCK_TAG);
	bool block = false;

	(void)arg, (void)seq;
	if (op == PFS_OP_INVAL_ENTRY && pfs_dec_inval_entry_push(payload, len, &ie) == 0)
		block = pfs_fh_equal(&ie.parent, &blk);
	if (op == PFS_OP_INVAL_INODE && pfs_dec_inval_inode_push(payload, len, &ii) == 0)
		block = pfs_fh_equal(&ii.fh, &blk);
	struct pfs_recall_push rp;
	if (op == PFS_OP_RECALL && pfs_dec_recall_push(payload, len, &rp) == 0)
		block = pfs_fh_equal(&rp.fh, &blk);
	pthread_mutex_lock(&mu);
	int64_t end = pfs_mono_ms() + WAIT_MS;
	while (block && !released && pfs_mono_ms() < end) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 10000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&cv, &mu, &ts);
	}
	applied++;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

/* In the tests that use it, the pushes of connection 1 are all INVAL_INODE
 * pushes: the nth early_cb must come before the count reaches n. */
static void early_cb(void *arg, uint16_t op, const uint8_t *payload, size_t len)
{
	(void)arg, (void)payload, (void)len;
	if (op != PFS_OP_INVAL_INODE)
		return;
	pthread_mutex_lock(&mu);
	earlies++;
	if (ack_gen == 1 && ack_count >= earlies)
		early_late = true;
	pthread_mutex_unlock(&mu);
}

static void ack_cb(void *arg, uint64_t gen, uint64_t count)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	/* A count never goes back on one connection (checked by stop: the
	 * checks count on the test's thread only). */
	if (gen == ack_gen && count < ack_count)
		went_back = true;
	ack_gen = gen;
	ack_count = count;
	ack_calls++;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

/* The count acknowledged last (the ack thread writes it under mu). */
static uint64_t acked(void)
{
	pthread_mutex_lock(&mu);
	uint64_t n = ack_count;
	pthread_mutex_unlock(&mu);
	return n;
}

static uint8_t *entry_push(uint8_t tag, size_t *len)
{
	struct pfs_inval_entry_push m = { .parent = fh_of(tag) };
	uint8_t *buf = malloc(512);
	struct pfs_wr w;

	m.name.len = 1;
	m.name.s[0] = 'x';
	pfs_wr_init(&w, buf, 512);
	CHECK_EQ(pfs_enc_inval_entry_push(&w, &m), 0);
	*len = w.len;
	return buf;
}

/* An attribute push, or (offset >= 0) one of the data from offset. */
static uint8_t *inode_push(uint8_t tag, int64_t offset, size_t *len)
{
	struct pfs_inval_inode_push m = { .fh = fh_of(tag), .offset = offset, .length = 0 };
	uint8_t *buf = malloc(512);
	struct pfs_wr w;

	pfs_wr_init(&w, buf, 512);
	CHECK_EQ(pfs_enc_inval_inode_push(&w, &m), 0);
	*len = w.len;
	return buf;
}

static void add_entry(struct pushq *q, uint64_t gen, uint8_t tag)
{
	size_t len;
	uint8_t *b = entry_push(tag, &len);
	pushq_add(q, gen, PFS_OP_INVAL_ENTRY, b, len);
}

static void add_recall(struct pushq *q, uint64_t gen, uint8_t tag)
{
	struct pfs_recall_push m = { .fh = fh_of(tag) };
	uint8_t *buf = malloc(512);
	struct pfs_wr w;

	pfs_wr_init(&w, buf, 512);
	CHECK_EQ(pfs_enc_recall_push(&w, &m), 0);
	pushq_add(q, gen, PFS_OP_RECALL, buf, w.len);
}

static void add_inode(struct pushq *q, uint64_t gen, uint8_t tag)
{
	size_t len;
	uint8_t *b = inode_push(tag, -1, &len);
	pushq_add(q, gen, PFS_OP_INVAL_INODE, b, len);
}

static void add_data(struct pushq *q, uint64_t gen, uint8_t tag)
{
	size_t len;
	uint8_t *b = inode_push(tag, 4096, &len);
	pushq_add(q, gen, PFS_OP_INVAL_INODE, b, len);
}

/* Waits up to ms for the acknowledged count of gen to reach count. */
static bool acked_within(uint64_t gen, uint64_t count, int64_t ms)
{
	int64_t end = pfs_mono_ms() + ms;
	bool ok;

	pthread_mutex_lock(&mu);
	while (!(ok = ack_gen == gen && ack_count >= count) && pfs_mono_ms() < end) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 5000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&cv, &mu, &ts);
	}
	pthread_mutex_unlock(&mu);
	return ok;
}

static bool applied_within(unsigned n, int64_t ms)
{
	int64_t end = pfs_mono_ms() + ms;
	bool ok;

	pthread_mutex_lock(&mu);
	while (!(ok = applied >= n) && pfs_mono_ms() < end) {
		pthread_mutex_unlock(&mu);
		struct timespec d = { 0, 2000000 };
		nanosleep(&d, NULL);
		pthread_mutex_lock(&mu);
	}
	pthread_mutex_unlock(&mu);
	return ok;
}

static void set_released(bool r)
{
	pthread_mutex_lock(&mu);
	released = r;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

static void *release_later(void *arg)
{
	struct timespec d = { 0, 50000000 };

	(void)arg;
	nanosleep(&d, NULL);
	set_released(true);
	return NULL;
}

static struct pushq *start(void)
{
	struct pushq_cbs cbs = { .note_cb = note_cb, .apply_cb = apply_cb, .early_cb = early_cb,
				 .ack_cb = ack_cb };
	struct pushq *q = NULL;

	pthread_mutex_lock(&mu);
	released = false;
	applied = 0;
	ack_gen = ack_count = 0;
	ack_calls = 0;
	earlies = 0;
	early_late = false;
	pthread_mutex_unlock(&mu);
	CHECK_EQ(pushq_new(&cbs, &q), 0);
	CHECK_EQ(pushq_start(q), 0);
	return q;
}

static void stop(struct pushq *q)
{
	set_released(true);
	pushq_free(q);
	CHECK(!went_back);
	went_back = false;
}

/* The push thread let go: n pushes applied in all, the count reaches
 * count, none of them acknowledged early. */
static void released_then_acked(struct pushq *q, unsigned n, uint64_t count)
{
	uint64_t busy, unapplied, alive;

	set_released(true);
	CHECK(applied_within(n, WAIT_MS));
	CHECK(acked_within(1, count, WAIT_MS));
	pushq_stats(q, &busy, &unapplied, &alive);
	CHECK_EQ(busy, 0);
	CHECK_EQ(unapplied, 0);
}

/* Attribute pushes: acknowledged on receipt, while the push thread is
 * stuck applying the first, each after its early_cb (the kernel's
 * attributes dropped) and not before. */
static void test_inode_pushes_on_receipt(void)
{
	struct pushq *q = start();
	add_inode(q, 1, BLOCK_TAG);
	add_inode(q, 1, 1);
	CHECK(acked_within(1, 2, WAIT_MS));
	CHECK_EQ(applied, 0);
	for (uint8_t t = 2; t < 50; t++)
		add_inode(q, 1, t);
	CHECK(acked_within(1, 50, WAIT_MS));
	pthread_mutex_lock(&mu);
	CHECK_EQ(earlies, 50);
	CHECK(!early_late);
	pthread_mutex_unlock(&mu);
	stop(q);
}

/* An entry invalidation holds its acknowledgement, and those of the
 * pushes after it, until applied. */
static void test_entry_push_after_apply(void)
{
	struct pushq *q = start();

	add_inode(q, 1, 1);
	CHECK(acked_within(1, 1, WAIT_MS));
	add_entry(q, 1, BLOCK_TAG);
	add_inode(q, 1, 2);
	/* Well below PUSHQ_APPLY_WAIT_MS: nothing beyond the first. */
	CHECK(!acked_within(1, 2, 100));
	CHECK_EQ(acked(), 1);
	released_then_acked(q, 2, 3);
	stop(q);
}

/* Its directory busy no more, nothing pending: the push held so far is
 * applied (n pushes applied in all), and a new entry push (ack count
 * next) is acknowledged only once applied again. */
static void waits_again(struct pushq *q, unsigned n, uint64_t next)
{
	set_released(true);
	CHECK(applied_within(n, WAIT_MS));
	set_released(false);
	add_entry(q, 1, BLOCK_TAG);
	CHECK(!acked_within(1, next, 50));
	set_released(true);
	CHECK(acked_within(1, next, WAIT_MS));
}

/* Its directory busy with a local operation: acknowledged at once (and
 * what follows), without waiting for the bound. */
static void test_busy_directory(void)
{
	struct pushq *q = start();
	struct pfs_fh d = fh_of(BLOCK_TAG);
	uint64_t busy, unapplied, alive;

	add_entry(q, 1, BLOCK_TAG);
	add_entry(q, 1, 3);
	CHECK(!acked_within(1, 1, 50));
	int64_t t0 = pfs_mono_ms();
	pushq_busy(q, pushq_lock_key(&d), 1);
	CHECK(acked_within(1, 2, WAIT_MS));
	pushq_stats(q, &busy, &unapplied, &alive);
	CHECK(busy >= 1);
	CHECK_EQ(unapplied, 0);
	/* Not by the bound: the count came before it could have. */
	if (unapplied == 0)
		CHECK(pfs_mono_ms() - t0 < WAIT_MS);
	pushq_busy(q, pushq_lock_key(&d), -1);
	waits_again(q, 2, 3);
	stop(q);
}

/* Nobody known to hold the lock: acknowledged unapplied after the bound. */
static void test_bound(void)
{
	struct pushq *q = start();
	uint64_t busy, unapplied, alive;

	int64_t t0 = pfs_mono_ms();
	add_entry(q, 1, BLOCK_TAG);
	add_inode(q, 1, 4);
	CHECK(acked_within(1, 2, WAIT_MS));
	CHECK(pfs_mono_ms() - t0 >= PUSHQ_APPLY_WAIT_MS - 1);
	CHECK_EQ(applied, 0);
	pushq_stats(q, &busy, &unapplied, &alive);
	CHECK_EQ(busy, 0);
	CHECK_EQ(unapplied, 1);
	stop(q);
}

/* While an entry invalidation is held back, the count sent last goes
 * again every PUSHQ_ALIVE_MS (the client runs); never while nothing is
 * held back. */
static void test_alive_while_held_back(void)
{
	struct pushq *q = start();
	uint64_t busy, unapplied, alive;
	unsigned calls;

	add_inode(q, 1, 1);
	CHECK(acked_within(1, 1, WAIT_MS));
	/* Nothing held back: no repeats. */
	struct timespec d = { 0, 5 * PUSHQ_ALIVE_MS * 1000000L };
	nanosleep(&d, NULL);
	pthread_mutex_lock(&mu);
	calls = ack_calls;
	pthread_mutex_unlock(&mu);
	CHECK_EQ(calls, 1);
	int64_t t0 = pfs_mono_ms();
	add_entry(q, 1, BLOCK_TAG);
	add_inode(q, 1, 2);
	/* Held back for 100 ms (well below PUSHQ_APPLY_WAIT_MS): repeats of
	 * count 1, one per PUSHQ_ALIVE_MS at most. */
	CHECK(!acked_within(1, 2, 100));
	pthread_mutex_lock(&mu);
	calls = ack_calls;
	uint64_t count = ack_count;
	pthread_mutex_unlock(&mu);
	int64_t held = pfs_mono_ms() - t0;
	CHECK_EQ(count, 1);
	CHECK(calls >= 3);
	CHECK((int64_t)calls <= 2 + held / PUSHQ_ALIVE_MS);
	set_released(true);
	CHECK(acked_within(1, 3, WAIT_MS));
	pushq_stats(q, &busy, &unapplied, &alive);
	CHECK(alive >= 2);
	CHECK_EQ(unapplied, 0);
	stop(q);
}

/* A file's data: acknowledged once applied, with what follows it; a
 * busy directory does not let it by (it waits for no directory lock);
 * the bound does. */
static void test_data_push_after_apply(void)
{
	struct pushq *q = start();
	struct pfs_fh blk = fh_of(BLOCK_TAG);
	uint64_t busy, unapplied, alive;

	add_inode(q, 1, 1);
	CHECK(acked_within(1, 1, WAIT_MS));
	add_data(q, 1, BLOCK_TAG);
	add_inode(q, 1, 2);
	pushq_busy(q, pushq_lock_key(&blk), 1);
	pushq_busy(q, 0, 1);
	CHECK(!acked_within(1, 2, 100));
	CHECK_EQ(acked(), 1);
	pushq_busy(q, 0, -1);
	pushq_busy(q, pushq_lock_key(&blk), -1);
	released_then_acked(q, 3, 3);
	/* Stuck: acknowledged unapplied after the bound. */
	set_released(false);
	int64_t t0 = pfs_mono_ms();
	add_data(q, 1, BLOCK_TAG);
	CHECK(acked_within(1, 4, WAIT_MS));
	CHECK(pfs_mono_ms() - t0 >= PUSHQ_APPLY_WAIT_MS - 1);
	pushq_stats(q, &busy, &unapplied, &alive);
	CHECK_EQ(unapplied, 1);
	stop(q);
}

/* A new connection counts from 1; pushes of the old one left in the
 * queue do not hold its acknowledgements. */
static void test_new_connection(void)
{
	struct pushq *q = start();

	add_entry(q, 1, BLOCK_TAG);
	add_inode(q, 2, 5);
	add_inode(q, 2, 6);
	CHECK(acked_within(2, 2, WAIT_MS));
	CHECK_EQ(acked(), 2);
	stop(q);
}

/* pushq_wait_applied: waits for the pushes queued before the call (not
 * for those after), at most its bound; at once with nothing queued. */
static void test_wait_applied(void)
{
	struct pushq *q = start();

	CHECK(pushq_wait_applied(q, WAIT_MS));
	add_inode(q, 1, 1);
	CHECK(pushq_wait_applied(q, WAIT_MS));
	CHECK_EQ(applied, 1);
	/* The push thread stuck on the first: the bound ends the wait. */
	add_inode(q, 1, BLOCK_TAG);
	add_inode(q, 1, 2);
	int64_t t0 = pfs_mono_ms();
	CHECK(!pushq_wait_applied(q, 100));
	CHECK(pfs_mono_ms() - t0 >= 99);
	CHECK_EQ(applied, 1);
	/* Released while waiting: done once both were applied. */
	pthread_t th;
	CHECK_EQ(pthread_create(&th, NULL, release_later, NULL), 0);
	CHECK(pushq_wait_applied(q, WAIT_MS));
	pthread_mutex_lock(&mu);
	unsigned n = applied;
	pthread_mutex_unlock(&mu);
	CHECK_EQ(n, 3);
	pthread_join(th, NULL);
	stop(q);
}

/* A RECALL (delegations) is acknowledged only once applied, past
 * PUSHQ_APPLY_WAIT_MS and with a busy directory before it too; the
 * pushes before it are acknowledged meanwhile, and the count sent last
 * goes again (the client runs). */
static void test_recall_after_apply(void)
{
	struct pushq *q = start();

	add_inode(q, 1, 1);
	add_recall(q, 1, BLOCK_TAG);
	add_inode(q, 1, 2);
	CHECK(acked_within(1, 1, WAIT_MS));
	pushq_busy(q, pushq_lock_key(&(struct pfs_fh){ .len = 1, .data = { BLOCK_TAG } }), 1);
	CHECK(!acked_within(1, 2, PUSHQ_APPLY_WAIT_MS + PUSHQ_ALIVE_MS + 200));
	CHECK_EQ(acked(), 1);
	CHECK(ack_calls >= 2); /* alive */
	set_released(true);
	CHECK(applied_within(3, WAIT_MS));
	CHECK(acked_within(1, 3, WAIT_MS));
	stop(q);
}

/* A RECALL does not wait behind a push the kernel holds (a directory
 * lock of a local operation whose reply waits, through another host, for
 * this answer): the recall thread applies it, once, and with that
 * directory busy the count covers both while the push thread is still
 * held; the push after the RECALL still waits its turn. */
static void test_recall_ahead_of_a_held_push(void)
{
	struct pushq *q = start();
	struct pfs_fh d = fh_of(BLOCK_TAG);
	uint64_t busy, unapplied, alive;

	pushq_busy(q, pushq_lock_key(&d), 1);
	add_entry(q, 1, BLOCK_TAG);
	add_recall(q, 1, 1);
	add_entry(q, 1, 2);
	CHECK(applied_within(1, WAIT_MS));
	CHECK(acked_within(1, 3, WAIT_MS));
	pthread_mutex_lock(&mu);
	unsigned n = applied;
	pthread_mutex_unlock(&mu);
	CHECK_EQ(n, 1); /* the RECALL only: the push thread is still held */
	pushq_stats(q, &busy, &unapplied, &alive);
	CHECK(busy >= 1);
	CHECK_EQ(unapplied, 0);
	set_released(true);
	CHECK(applied_within(3, WAIT_MS));
	pushq_free(q); /* joins the threads: nothing more is applied */
	pthread_mutex_lock(&mu);
	n = applied;
	pthread_mutex_unlock(&mu);
	CHECK_EQ(n, 3);
	CHECK(!went_back);
}

/* An entry invalidation in a directory the kernel holds by its name (one
 * a local rename moves or replaces, or an rmdir removes:
 * pushq_busy_name) is acknowledged at once, as one in a busy parent is;
 * busy no more, the next one waits for its application again. */
static void test_busy_by_name(void)
{
	struct pushq *q = start();
	struct pfs_fh d = fh_of(BLOCK_TAG);
	uint64_t busy, unapplied, alive, key = pushq_name_key(d.data[0], 1);

	add_entry(q, 1, BLOCK_TAG);
	CHECK(!acked_within(1, 1, 50));
	pushq_busy_name(q, pushq_name_key(d.data[0], 2), 1); /* another name */
	CHECK(!acked_within(1, 1, 50));
	pushq_busy_name(q, key, 1);
	CHECK(acked_within(1, 1, PUSHQ_APPLY_WAIT_MS / 2));
	pushq_stats(q, &busy, &unapplied, &alive);
	CHECK(busy >= 1);
	CHECK_EQ(unapplied, 0);
	pushq_busy_name(q, key, -1);
	pushq_busy_name(q, pushq_name_key(d.data[0], 2), -1);
	waits_again(q, 1, 2);
	stop(q);
}

int main(void)
{
	test_busy_by_name();
	test_recall_ahead_of_a_held_push();
	test_inode_pushes_on_receipt();
	test_recall_after_apply();
	test_entry_push_after_apply();
	test_busy_directory();
	test_bound();
	test_data_push_after_apply();
	test_new_connection();
	test_alive_while_held_back();
	test_wait_applied();
	return check_done("test_pushq");
}
