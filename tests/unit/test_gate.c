/* test_gate.c: unit tests of the push/reply race gate (fs/gate.c):
 * numbering, "pushed since" per handle, "everything" pushes, the ring's
 * limit, the applied mark, a push pending about an object, and that a
 * push cannot be numbered while a
 * reply holds the gate.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "testfh.h"
#include "gate_i.h"

static void test_numbering(void)
{
	struct gate *g;
	struct pfs_fh a = fh_of(1), b = fh_of(2);

	CHECK_EQ(gate_new(&g), 0);
	uint64_t s0 = gate_seq(g);
	CHECK_EQ(s0, 1);
	CHECK_EQ(gate_applied(g), 0);
	/* Nothing pushed: nothing is stale. */
	CHECK(!gate_pushed_since(g, s0, &a));
	CHECK(!gate_pushed_since(g, s0, NULL));

	uint64_t n = gate_note_push(g, &a);
	CHECK_EQ(n, s0 + 1);
	CHECK_EQ(gate_seq(g), n);
	CHECK(gate_pushed_since(g, s0, &a));
	CHECK(!gate_pushed_since(g, s0, &b));
	CHECK(!gate_pushed_since(g, s0, NULL)); /* only "everything" counts without fh */
	CHECK(!gate_pushed_since(g, n, &a));    /* a request sent after the push */

	uint64_t m = gate_note_push(g, &b);
	CHECK(gate_pushed_since(g, s0, &b));
	CHECK(gate_pushed_since(g, n, &b));
	CHECK(!gate_pushed_since(g, n, &a));
	CHECK(!gate_pushed_since(g, m, &b));
	gate_free(g);
}

static void test_everything(void)
{
	struct gate *g;
	struct pfs_fh a = fh_of(3);

	CHECK_EQ(gate_new(&g), 0);
	uint64_t s0 = gate_seq(g);
	gate_note_all(g);
	uint64_t s1 = gate_seq(g);
	CHECK_EQ(s1, s0 + 1);
	CHECK(gate_pushed_since(g, s0, &a));
	CHECK(gate_pushed_since(g, s0, NULL));
	CHECK(!gate_pushed_since(g, s1, &a));
	CHECK(!gate_pushed_since(g, s1, NULL));
	/* A push about a after "everything" still counts for a request
	 * sent before either. */
	gate_note_push(g, &a);
	CHECK(gate_pushed_since(g, s0, &a));
	CHECK(gate_pushed_since(g, s1, &a));
	gate_free(g);
}

static void test_ring_limit(void)
{
	struct gate *g;
	struct pfs_fh a = fh_of(4), b = fh_of(5);

	CHECK_EQ(gate_new(&g), 0);
	uint64_t s0 = gate_seq(g);
	/* GATE_RING - 1 pushes about b: a's question can still be told. */
	for (int i = 0; i < GATE_RING - 1; i++)
		gate_note_push(g, &b);
	CHECK(!gate_pushed_since(g, s0, &a));
	CHECK(gate_pushed_since(g, s0, &b));
	/* One more: too many to tell, every question is answered "pushed". */
	gate_note_push(g, &b);
	CHECK(gate_pushed_since(g, s0, &a));
	CHECK(gate_pushed_since(g, s0, NULL));
	/* A recent request is told exactly again. */
	uint64_t s1 = gate_seq(g);
	gate_note_push(g, &b);
	CHECK(!gate_pushed_since(g, s1, &a));
	gate_free(g);
}

static void test_applied(void)
{
	struct gate *g;
	struct pfs_fh a = fh_of(6);

	CHECK_EQ(gate_new(&g), 0);
	uint64_t n1 = gate_note_push(g, &a);
	uint64_t n2 = gate_note_push(g, &a);
	gate_set_applied(g, n2);
	CHECK_EQ(gate_applied(g), n2);
	gate_set_applied(g, n1); /* never goes back */
	CHECK_EQ(gate_applied(g), n2);
	/* "Received but perhaps not applied": nothing after n2. */
	CHECK(!gate_pushed_since(g, gate_applied(g), &a));
	gate_note_push(g, &a);
	CHECK(gate_pushed_since(g, gate_applied(g), &a));
	gate_free(g);
}

/* A push about an object pending (numbered, not applied): the object's
 * own only; an invalidation of everything (a dropped connection) is not
 * one; too many pending count as one. */
static void test_push_pending(void)
{
	struct gate *g;
	struct pfs_fh a = fh_of(8), b = fh_of(9);

	CHECK_EQ(gate_new(&g), 0);
	CHECK(!gate_push_pending(g, &a));
	uint64_t n = gate_note_push(g, &a);
	CHECK(gate_push_pending(g, &a));
	CHECK(!gate_push_pending(g, &b));
	gate_set_applied(g, n);
	CHECK(!gate_push_pending(g, &a));
	gate_note_all(g);
	CHECK(!gate_push_pending(g, &a));
	CHECK(gate_pushed_since(g, gate_applied(g), &a)); /* where they differ */
	gate_note_push(g, &b);
	CHECK(gate_push_pending(g, &b) && !gate_push_pending(g, &a));
	for (unsigned i = 0; i < GATE_RING; i++)
		gate_note_push(g, &b);
	CHECK(gate_push_pending(g, &a));
	gate_free(g);
}

struct pusher {
	struct gate *g;
	struct pfs_fh fh;
	atomic_bool done;
};

static void *push_thread(void *arg)
{
	struct pusher *p = arg;

	gate_note_push(p->g, &p->fh);
	atomic_store(&p->done, true);
	return NULL;
}

/* A push is numbered under the gate's write side: while a reply holds
 * the gate, the number a reply looks at cannot move, so either it sees
 * the push or the push comes after the reply. */
static void test_gate_excludes_pushes(void)
{
	struct pusher p;
	pthread_t thr;

	CHECK_EQ(gate_new(&p.g), 0);
	p.fh = fh_of(7);
	atomic_init(&p.done, false);
	uint64_t s0 = gate_seq(p.g);
	gate_enter(p.g);
	CHECK_EQ(pthread_create(&thr, NULL, push_thread, &p), 0);
	struct timespec ts = { 0, 30 * 1000 * 1000 };
	nanosleep(&ts, NULL);
	CHECK(!atomic_load(&p.done));
	CHECK_EQ(gate_seq(p.g), s0);
	CHECK(!gate_pushed_since(p.g, s0, &p.fh));
	gate_leave(p.g);
	pthread_join(thr, NULL);
	CHECK(atomic_load(&p.done));
	CHECK(gate_pushed_since(p.g, s0, &p.fh));
	gate_free(p.g);
}

int main(void)
{
	test_numbering();
	test_everything();
	test_ring_limit();
	test_applied();
	test_push_pending();
	test_gate_excludes_pushes();
	return check_done("test_gate");
}
