/* test_wb_file.c: unit tests of write-behind's per-file ledger
 * (fs/wb_file.c): the states of a write, what counts as pending and
 * uncommitted, overlap with pending writes, the first error kept and
 * reported once, the writer threads remembered, and the verifier's
 * verdict when a commit ends (durable, sent again, or kept after a
 * failure); writes sent again go in order, none over a later one.
 */
#include <stdlib.h>

#include "check.h"
#include "wb_file_i.h"

static struct wbe *entry(uint64_t off, uint32_t len)
{
	struct wbe *e = calloc(1, sizeof(*e));

	if (!e)
		abort();
	e->off = off;
	e->len = len;
	return e;
}

/* Queues a write and has it acknowledged by daemon instance verf. */
static struct wbe *written(struct wbf *f, uint64_t off, uint32_t len, uint64_t verf)
{
	struct wbe *e = entry(off, len);

	wbf_add(f, e);
	wbf_sending(e);
	wbf_sent(f, e, 0, verf);
	return e;
}

static unsigned list_len(const struct wbf *f)
{
	unsigned n = 0;

	for (const struct wbe *e = f->head; e; e = e->next)
		n++;
	return n;
}

static void free_all(struct wbf *f)
{
	while (f->head) {
		struct wbe *e = f->head;
		f->head = e->next;
		free(e);
	}
}

static void test_states_and_counts(void)
{
	struct wbf f = { 0 };
	CHECK(!wbf_holds(&f));

	struct wbe *a = entry(0, 100), *b = entry(100, 50);
	wbf_add(&f, a);
	wbf_add(&f, b);
	CHECK_EQ(a->st, WBE_QUEUED);
	CHECK_EQ(f.npending, 2);
	CHECK_EQ(f.uncommitted, 0);
	CHECK(f.head == a && f.tail == b && a->next == b && b->prev == a);
	CHECK(wbf_holds(&f));

	wbf_sending(a);
	CHECK_EQ(a->st, WBE_SENDING);
	CHECK_EQ(f.npending, 2); /* sending is still pending */
	wbf_sent(&f, a, 0, 7);
	CHECK_EQ(a->st, WBE_DONE);
	CHECK_EQ(a->verf, 7);
	CHECK_EQ(f.npending, 1);
	CHECK_EQ(f.uncommitted, 100);
	CHECK_EQ(f.err, 0);

	/* A DONE write removed: no longer uncommitted, out of the list. */
	wbf_remove(&f, a);
	free(a);
	CHECK_EQ(f.uncommitted, 0);
	CHECK(f.head == b && f.tail == b && b->prev == NULL);
	free_all(&f);
}

static void test_overlap(void)
{
	struct wbf f = { 0 };
	struct wbe *a = entry(100, 100); /* [100, 200) */
	wbf_add(&f, a);

	CHECK(wbf_overlaps_pending(&f, 150, 10));
	CHECK(wbf_overlaps_pending(&f, 0, 101));
	CHECK(wbf_overlaps_pending(&f, 199, 1));
	CHECK(!wbf_overlaps_pending(&f, 0, 100));  /* ends where a begins */
	CHECK(!wbf_overlaps_pending(&f, 200, 50)); /* begins where a ends */
	wbf_sending(a);
	CHECK(wbf_overlaps_pending(&f, 150, 10)); /* sending still counts */
	wbf_sent(&f, a, 0, 1);
	/* Acknowledged writes are ordered already: no wait for them. */
	CHECK(!wbf_overlaps_pending(&f, 150, 10));
	free_all(&f);
}

static void test_errors(void)
{
	struct wbf f = { 0 };
	struct wbe *a = entry(0, 10), *b = entry(10, 10), *c = entry(20, 10);
	wbf_add(&f, a);
	wbf_add(&f, b);
	wbf_add(&f, c);

	wbf_sending(b);
	wbf_sent(&f, b, -28 /* ENOSPC */, 0);
	free(b);
	CHECK_EQ(f.err, 28);
	CHECK_EQ(f.npending, 2);
	CHECK_EQ(f.uncommitted, 0);
	CHECK_EQ(list_len(&f), 2);
	CHECK(a->next == c && c->prev == a); /* the failed write left the list */
	wbf_sending(c);
	wbf_sent(&f, c, -5 /* EIO */, 0);
	free(c);
	CHECK_EQ(f.err, 28); /* the first error is the one kept */
	CHECK_EQ(list_len(&f), 1);
	CHECK(f.tail == a);

	CHECK_EQ(wbf_take_err(&f), -28);
	CHECK_EQ(wbf_take_err(&f), 0); /* reported once */
	free_all(&f);

	/* An error alone is something to hold on to (until reported). */
	struct wbf g = { 0 };
	struct wbe *d = entry(0, 1);
	wbf_add(&g, d);
	wbf_sending(d);
	wbf_sent(&g, d, -5, 0);
	free(d);
	CHECK(g.head == NULL);
	CHECK(wbf_holds(&g));
	wbf_take_err(&g);
	CHECK(!wbf_holds(&g));
}

static void test_writers(void)
{
	struct wbf f = { 0 };

	CHECK(!wbf_is_writer(&f, 1));
	for (uint32_t t = 1; t <= WBF_WRITERS; t++) {
		wbf_note_writer(&f, t);
		wbf_note_writer(&f, t); /* counted once */
	}
	CHECK_EQ(f.nwriters, WBF_WRITERS);
	CHECK(!f.many_writers);
	CHECK(wbf_is_writer(&f, 1));
	CHECK(wbf_is_writer(&f, WBF_WRITERS));
	CHECK(!wbf_is_writer(&f, 1000));
	/* One more than fit: every thread counts as a writer. */
	wbf_note_writer(&f, 1000);
	CHECK(f.many_writers);
	CHECK(wbf_is_writer(&f, 4242));
	wbf_forget_writers(&f);
	CHECK(!wbf_is_writer(&f, 1));
	CHECK(!wbf_is_writer(&f, 4242));
}

static void test_commit_same_instance(void)
{
	struct wbf f = { 0 };
	struct wbe *a = written(&f, 0, 10, 5), *b = written(&f, 10, 20, 5);
	struct wbe *q = entry(30, 40); /* written while the commit is out */
	struct wbe *rel, *res;

	CHECK_EQ(f.uncommitted, 30);
	wbf_commit_begin(&f);
	CHECK(f.committing);
	CHECK(wbf_holds(&f));
	CHECK_EQ(a->st, WBE_COMMITTING);
	CHECK_EQ(b->st, WBE_COMMITTING);
	wbf_add(&f, q);
	CHECK_EQ(q->st, WBE_QUEUED);

	wbf_commit_end(&f, 0, 5, &rel, &res);
	CHECK(!f.committing);
	CHECK(rel == a && a->qnext == b && b->qnext == NULL); /* in list order */
	CHECK(res == NULL);
	CHECK_EQ(f.uncommitted, 0);
	CHECK(f.head == q && f.tail == q); /* not covered: stays */
	CHECK_EQ(q->st, WBE_QUEUED);
	CHECK_EQ(f.npending, 1);
	free(a);
	free(b);
	free_all(&f);
}

static void test_commit_restarted_instance(void)
{
	struct wbf f = { 0 };
	/* z by the new instance before the others; a and c acknowledged by
	 * the instance that died, b by the new one. */
	struct wbe *z = written(&f, 100, 10, 6), *a = written(&f, 0, 10, 5),
		   *b = written(&f, 10, 20, 6), *c = written(&f, 30, 40, 5);
	struct wbe *rel, *res;

	wbf_commit_begin(&f);
	wbf_commit_end(&f, 0, 6, &rel, &res);
	/* Up to the first write the new instance lacks: durable. From it on,
	 * all sent again, b too: sent after a, it must land after a. */
	CHECK(rel == z && z->qnext == NULL);
	CHECK(res == a && a->qnext == b && b->qnext == c && c->qnext == NULL);
	CHECK_EQ(a->st, WBE_QUEUED);
	CHECK_EQ(b->st, WBE_QUEUED);
	CHECK_EQ(c->st, WBE_QUEUED);
	CHECK_EQ(f.npending, 3);
	CHECK_EQ(f.nagain, 3);
	CHECK_EQ(f.uncommitted, 0);
	/* Sent again, they are in the list, in order, and pending. */
	CHECK_EQ(list_len(&f), 3);
	CHECK(f.head == a && a->next == b && b->next == c && f.tail == c);
	CHECK(wbf_overlaps_pending(&f, 5, 1));
	/* None overlaps another: all may go at once. */
	CHECK(wbf_sendable(&f, a) && wbf_sendable(&f, b) && wbf_sendable(&f, c));
	free(z);

	/* Acknowledged again and committed by the new instance. */
	wbf_sending(a);
	CHECK(!wbf_sent(&f, a, 0, 6));
	wbf_sending(b);
	CHECK(!wbf_sent(&f, b, 0, 6));
	wbf_sending(c);
	CHECK(!wbf_sent(&f, c, 0, 6));
	CHECK_EQ(f.nagain, 0);
	CHECK_EQ(f.uncommitted, 70);
	wbf_commit_begin(&f);
	wbf_commit_end(&f, 0, 6, &rel, &res);
	CHECK(rel == a && a->qnext == b && b->qnext == c);
	CHECK(res == NULL);
	CHECK(f.head == NULL && f.tail == NULL);
	CHECK(!wbf_holds(&f));
	free(a);
	free(b);
	free(c);
}

/* The bytes of a write made after a restart are not undone by an
 * earlier write sent again: a [0, 100) acknowledged by the instance that
 * died, b [0, 50) by the new one, c [40, 60) being sent, d [0, 10)
 * queued when the commit ends. */
static void test_sent_again_in_order(void)
{
	struct wbf f = { 0 };
	struct wbe *a = written(&f, 0, 100, 5), *b = written(&f, 0, 50, 6);
	struct wbe *c = entry(40, 20), *d = entry(0, 10);
	struct wbe *rel, *res;

	wbf_commit_begin(&f);
	wbf_add(&f, c);
	wbf_sending(c);
	wbf_add(&f, d);
	CHECK(wbf_sendable(&f, d)); /* nothing sent again yet */
	wbf_commit_end(&f, 0, 6, &rel, &res);
	CHECK(rel == NULL);
	CHECK(res == a && a->qnext == b && b->qnext == NULL);
	CHECK(c->redo && c->again && !d->again);
	CHECK_EQ(f.nagain, 3);
	CHECK_EQ(f.npending, 4);
	/* a goes first; b, c's second send and d wait for it. */
	CHECK(wbf_sendable(&f, a));
	CHECK(!wbf_sendable(&f, b));
	CHECK(!wbf_sendable(&f, d));
	wbf_sending(a);
	CHECK(!wbf_sendable(&f, b));
	CHECK(!wbf_sent(&f, a, 0, 6));
	CHECK(wbf_sendable(&f, b));
	CHECK(!wbf_sendable(&f, d)); /* b is before it, and pending */
	/* c's first send ends: it is queued once more, still pending. */
	CHECK(wbf_sent(&f, c, 0, 6));
	CHECK_EQ(c->st, WBE_QUEUED);
	CHECK(!c->redo && c->again);
	CHECK_EQ(f.npending, 3);
	CHECK(!wbf_sendable(&f, c)); /* overlaps b, pending before it */
	wbf_sending(b);
	CHECK(!wbf_sent(&f, b, 0, 6));
	CHECK(wbf_sendable(&f, c));
	CHECK(wbf_sendable(&f, d)); /* c is not over it */
	wbf_sending(c);
	CHECK(!wbf_sent(&f, c, 0, 6));
	CHECK_EQ(f.nagain, 0);
	CHECK(wbf_sendable(&f, d));
	wbf_sending(d);
	CHECK(!wbf_sent(&f, d, 0, 6));
	CHECK_EQ(f.npending, 0);
	CHECK_EQ(f.uncommitted, 180);
	/* A failed second send: the error is kept, the write leaves. */
	struct wbf g = { 0 };
	struct wbe *x = written(&g, 0, 10, 5), *y = entry(0, 10);
	wbf_commit_begin(&g);
	wbf_add(&g, y);
	wbf_sending(y);
	wbf_commit_end(&g, 0, 6, &rel, &res);
	CHECK(res == x && y->redo);
	CHECK(!wbf_sent(&g, y, -5, 0));
	free(y);
	CHECK_EQ(g.nagain, 1);
	CHECK_EQ(g.err, 5);
	free_all(&f);
	free_all(&g);
}

static void test_uncommitted_beyond(void)
{
	struct wbf f = { 0 };
	struct wbe *q = entry(500, 100);

	CHECK(!wbf_uncommitted_beyond(&f, 0));
	(void)written(&f, 100, 100, 5); /* [100, 200) */
	wbf_add(&f, q);                 /* pending: not uncommitted */
	CHECK(wbf_uncommitted_beyond(&f, 0));
	CHECK(wbf_uncommitted_beyond(&f, 199));
	CHECK(!wbf_uncommitted_beyond(&f, 200));
	CHECK(!wbf_uncommitted_beyond(&f, 550));
	wbf_commit_begin(&f); /* committing still counts */
	CHECK(wbf_uncommitted_beyond(&f, 150));
	wbf_keep_err(&f, -28);
	wbf_keep_err(&f, -5);
	CHECK_EQ(wbf_take_err(&f), -28);
	free_all(&f);
}

static void test_commit_failed(void)
{
	struct wbf f = { 0 };
	struct wbe *a = written(&f, 0, 10, 5);
	struct wbe *rel, *res;

	wbf_commit_begin(&f);
	wbf_commit_end(&f, -5, 0, &rel, &res);
	CHECK(rel == NULL && res == NULL);
	CHECK_EQ(a->st, WBE_DONE); /* still ours; a later commit retries */
	CHECK_EQ(f.uncommitted, 10);
	CHECK(!f.committing);
	CHECK_EQ(f.err, 0); /* the commit's error is the caller's to return */
	CHECK(f.head == a);

	wbf_commit_begin(&f);
	CHECK_EQ(a->st, WBE_COMMITTING);
	wbf_commit_end(&f, 0, 5, &rel, &res);
	CHECK(rel == a);
	CHECK(!wbf_holds(&f));
	free(a);
}

int main(void)
{
	test_states_and_counts();
	test_overlap();
	test_errors();
	test_writers();
	test_commit_same_instance();
	test_commit_restarted_instance();
	test_sent_again_in_order();
	test_uncommitted_beyond();
	test_commit_failed();
	return check_done("test_wb_file");
}
