/* pushq.c: the push queue, the push thread and the ack thread (see
 * pushq_i.h). */
#include "pushq_i.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bg_i.h"
#include "podfs/clock.h"
#include "podfs/codec.h"
#include "podfs/hash.h"
#include "podfs/log.h"

struct push_item {
	struct push_item *next;
	uint64_t seq; /* note_cb's number, 0 if none */
	uint64_t gen; /* connection it came on */
	uint64_t num; /* its place in gen's acknowledged count (from 1) */
	/* Acknowledged once applied (see "when a push is acknowledged",
	 * pushq_i.h): an entry invalidation (entry; key: its directory's
	 * lock key), or what note_cb said so of. */
	bool gated, entry;
	bool early; /* early_cb ran (or is running) for it */
	uint64_t key;
	uint64_t name_key; /* an entry invalidation's directory's own name (0: unknown) */
	/* A RECALL: acknowledged only once applied, whatever else happens
	 * (the daemon must have what the delegations answered first). The
	 * recall thread may apply it before the pushes ahead of it (taken,
	 * then done); the push thread unlinks it in its turn. */
	bool strict, taken, done;
	int64_t t_ms; /* received (CLOCK_MONOTONIC) */
	uint16_t op;
	size_t len;
	uint8_t *buf;
};

struct pushq {
	struct pushq_cbs cb;

	/* The push, recall and ack threads; bg.lock guards everything
	 * below, and bg.cond wakes the push and ack threads (a push queued
	 * or applied, a directory busy while pushes are queued, or stopping;
	 * the recall thread has recall_cond). */
	struct bg bg;
	/* Pushes not applied yet, in arrival order; the push thread applies
	 * the head and only then unlinks it. How many were queued and how
	 * many applied since the start (pushq_wait_applied). */
	struct push_item *push_head, **push_tail;
	uint64_t n_queued, n_applied;
	unsigned recalls_waiting; /* RECALLs queued that no thread took yet */
	/* The recall thread waits here, under bg.lock, for a RECALL or
	 * recall_stop: not on bg.cond, which busy marks wake while pushes
	 * are queued (a third thread woken at every unlink made
	 * scripts/bench's smallfiles unlinks 0.91x as fast). */
	pthread_cond_t recall_cond;
	bool recall_stop;
	unsigned apply_waiters; /* threads in pushq_wait_applied */

	/* Acknowledgements (PUSH_ACK): pushes received on connection
	 * ack_gen (numbered, not necessarily applied yet), what the ack
	 * thread sent last, and when (CLOCK_MONOTONIC ms). */
	uint64_t ack_gen, ack_count, sent_gen, sent_count;
	int64_t sent_ms;

	/* Local operations under way per directory lock key (pushq_busy),
	 * counted per bucket: two directories sharing a bucket only make an
	 * acknowledgement come early. */
	uint32_t busy[PUSHQ_BUSY_BUCKETS];
	/* The same, per directory name key (pushq_busy_name). */
	uint32_t busy_name[PUSHQ_BUSY_BUCKETS];
	/* Acknowledgements sent past an entry invalidation not applied yet:
	 * its directory busy, or after PUSHQ_APPLY_WAIT_MS (pushq_stats);
	 * counts sent again while one is (PUSHQ_ALIVE_MS). */
	uint64_t st_busy, st_unapplied, st_alive;
	int64_t unapplied_logged_ms; /* the last notice of one (once a minute) */

	/* Bytes of large replies received on the main connection
	 * (pushq_note_rx), outside the lock: when the last came and on
	 * which connection; when the ack thread is due to send again
	 * (sent_ms + PUSHQ_ALIVE_MS); whether the connection thread woke it
	 * for that already. */
	_Atomic int64_t rx_ms, alive_due_ms;
	_Atomic uint64_t rx_gen;
	atomic_bool rx_woke;
};

int pushq_new(const struct pushq_cbs *cbs, struct pushq **out)
{
	struct pushq *q = calloc(1, sizeof(*q));

	if (!q)
		return -ENOMEM;
	if (bg_init(&q->bg) < 0) {
		free(q);
		return -ENOMEM;
	}
	if (pthread_cond_init(&q->recall_cond, NULL) != 0) {
		bg_fini(&q->bg);
		free(q);
		return -ENOMEM;
	}
	q->cb = *cbs;
	q->push_tail = &q->push_head;
	*out = q;
	return 0;
}

void pushq_free(struct pushq *q)
{
	if (!q)
		return;
	pushq_stop(q);
	while (q->push_head) {
		struct push_item *p = q->push_head;
		q->push_head = p->next;
		free(p->buf);
		free(p);
	}
	pthread_cond_destroy(&q->recall_cond);
	bg_fini(&q->bg);
	free(q);
}

/* Counts one push received on connection gen for its acknowledgement (a
 * new gen starts the count again). Called with q->bg.lock held. */
static void count_locked(struct pushq *q, uint64_t gen)
{
	if (gen != q->ack_gen) {
		q->ack_gen = gen;
		q->ack_count = 0;
	}
	q->ack_count++;
}

uint64_t pushq_lock_key(const struct pfs_fh *dir)
{
	return pfs_hash_bytes(dir->data, dir->len, 0);
}

void pushq_add(struct pushq *q, uint64_t gen, uint16_t op, uint8_t *buf, size_t len)
{
	struct push_item *p = malloc(sizeof(*p));
	struct pfs_inval_entry_push ie;

	if (!p) {
		free(buf);
		return;
	}
	bool first = false;
	p->next = NULL;
	p->name_key = 0;
	p->seq = q->cb.note_cb(q->cb.arg, op, buf, len, &first, &p->name_key);
	p->gen = gen;
	p->early = false;
	p->entry = op == PFS_OP_INVAL_ENTRY && pfs_dec_inval_entry_push(buf, len, &ie) == 0;
	p->gated = p->entry || first;
	p->key = p->entry ? pushq_lock_key(&ie.parent) : 0;
	p->strict = op == PFS_OP_RECALL;
	p->taken = p->done = false;
	p->t_ms = pfs_mono_ms();
	p->op = op;
	p->buf = buf;
	p->len = len;
	pthread_mutex_lock(&q->bg.lock);
	*q->push_tail = p;
	q->push_tail = &p->next;
	q->n_queued++;
	q->recalls_waiting += p->strict;
	if (p->strict)
		pthread_cond_signal(&q->recall_cond);
	count_locked(q, gen);
	p->num = q->ack_count;
	bg_wake_all(&q->bg);
	pthread_mutex_unlock(&q->bg.lock);
}

/* Moves key's bucket of counts by delta (pushq_busy, pushq_busy_name).
 * A directory becoming busy can only let the ack thread acknowledge a
 * push held back (ack_limit_gated), which is still queued: with none
 * queued, nobody is woken. Every namespace change made here marks its
 * directories busy; waking the push and ack threads for each cost a
 * mkdir four context switches of its 28 on a 2-vCPU VM. */
static void busy_move(struct pushq *q, uint32_t *counts, uint64_t key, int delta)
{
	pthread_mutex_lock(&q->bg.lock);
	counts[key % PUSHQ_BUSY_BUCKETS] += (uint32_t)delta;
	if (delta > 0 && q->push_head)
		bg_wake_all(&q->bg);
	pthread_mutex_unlock(&q->bg.lock);
}

void pushq_busy(struct pushq *q, uint64_t key, int delta)
{
	busy_move(q, q->busy, key, delta);
}

void pushq_busy_name(struct pushq *q, uint64_t key, int delta)
{
	busy_move(q, q->busy_name, key, delta);
}

/* How many pushes of connection ack_gen may be acknowledged at now: all
 * received, but not the first gated push (an entry invalidation, a
 * file's data) that was not applied yet, nor any after it (the count is
 * cumulative), unless one of these holds (see pushq_i.h):
 *   - an entry invalidation's directory is busy with a local operation
 *     (as a parent, or by its name: pushq_busy_name): applying it waits
 *     for that operation, which may wait for another client's
 *     acknowledgement; then everything received is acknowledged, since
 *     nothing behind it can be applied first either;
 *   - it was received PUSHQ_APPLY_WAIT_MS ago: it is skipped.
 * *wake: when the answer may change without a wake-up (INT64_MAX:
 * never); *held: since when the first push held back was received
 * (INT64_MAX: none is). Called with q->bg.lock held. */
static uint64_t ack_limit_gated(const struct pushq *q, int64_t now, int64_t *wake,
				 int64_t *held, bool *busy, bool *unapplied);

/* ack_limit_gated, and never past a RECALL not applied yet (pushq_i.h):
 * the count stops before the first one. */
static uint64_t ack_limit_locked(const struct pushq *q, int64_t now, int64_t *wake,
				 int64_t *held, bool *busy, bool *unapplied)
{
	uint64_t lim = ack_limit_gated(q, now, wake, held, busy, unapplied);

	for (const struct push_item *p = q->push_head; p; p = p->next) {
		if (!p->strict || p->done || p->gen != q->ack_gen)
			continue;
		if (p->num - 1 < lim)
			lim = p->num - 1;
		if (p->t_ms < *held)
			*held = p->t_ms; /* the count sent last goes again meanwhile */
		break;
	}
	return lim;
}

static uint64_t ack_limit_gated(const struct pushq *q, int64_t now, int64_t *wake,
				 int64_t *held, bool *busy, bool *unapplied)
{
	*wake = *held = INT64_MAX;
	*busy = *unapplied = false;
	for (const struct push_item *p = q->push_head; p; p = p->next) {
		if (!p->gated || p->gen != q->ack_gen)
			continue;
		if (p->entry && (q->busy[p->key % PUSHQ_BUSY_BUCKETS] ||
				 (p->name_key && q->busy_name[p->name_key % PUSHQ_BUSY_BUCKETS]))) {
			*busy = true;
			return q->ack_count;
		}
		if (now - p->t_ms >= PUSHQ_APPLY_WAIT_MS) {
			*unapplied = true;
			continue;
		}
		*wake = p->t_ms + PUSHQ_APPLY_WAIT_MS;
		*held = p->t_ms;
		return p->num - 1;
	}
	return q->ack_count;
}

void pushq_stats(struct pushq *q, uint64_t *busy, uint64_t *unapplied, uint64_t *alive)
{
	pthread_mutex_lock(&q->bg.lock);
	*busy = q->st_busy;
	*unapplied = q->st_unapplied;
	*alive = q->st_alive;
	pthread_mutex_unlock(&q->bg.lock);
}

void pushq_note_rx(struct pushq *q, uint64_t gen)
{
	int64_t now = pfs_mono_ms();

	atomic_store_explicit(&q->rx_gen, gen, memory_order_relaxed);
	atomic_store_explicit(&q->rx_ms, now, memory_order_relaxed);
	if (now >= atomic_load_explicit(&q->alive_due_ms, memory_order_relaxed) &&
	    !atomic_exchange(&q->rx_woke, true)) {
		pthread_mutex_lock(&q->bg.lock);
		bg_wake_all(&q->bg);
		pthread_mutex_unlock(&q->bg.lock);
	}
}

void pushq_count(struct pushq *q, uint64_t gen)
{
	pthread_mutex_lock(&q->bg.lock);
	count_locked(q, gen);
	bg_wake_all(&q->bg);
	pthread_mutex_unlock(&q->bg.lock);
}

/* Runs early_cb for every push of connection gen numbered up to count
 * that is still queued and did not have it yet. Returns false if there
 * was none. Called with q->bg.lock held; drops it around each call. */
static bool run_early_locked(struct pushq *q, uint64_t gen, uint64_t count)
{
	uint8_t copy[PUSHQ_EARLY_MAX];
	bool ran = false;

	if (!q->cb.early_cb)
		return false;
	for (struct push_item *p = q->push_head; p;) {
		if (p->early || p->gen != gen || p->num > count) {
			p = p->next;
			continue;
		}
		p->early = true;
		if (p->len > sizeof(copy)) {
			p = p->next;
			continue;
		}
		/* The push thread may free p meanwhile: a copy goes. */
		uint16_t op = p->op;
		size_t len = p->len;
		if (len)
			memcpy(copy, p->buf, len);
		pthread_mutex_unlock(&q->bg.lock);
		q->cb.early_cb(q->cb.arg, op, copy, len);
		pthread_mutex_lock(&q->bg.lock);
		ran = true;
		p = q->push_head; /* the list may have changed */
	}
	return ran;
}

/* For the notice of a push acknowledged unapplied: what the oldest such
 * one is, and where it stood, which tells a lock podfs does not see (the
 * kernel holds the push thread in it) from a thread short of CPU. Called
 * with q->bg.lock held. */
static void describe_late(const struct pushq *q, int64_t now, char *buf, size_t len)
{
	const struct push_item *head = q->push_head;
	unsigned ahead = 0;

	for (const struct push_item *p = head; p; p = p->next, ahead++) {
		if (!p->gated || p->gen != q->ack_gen || now - p->t_ms < PUSHQ_APPLY_WAIT_MS)
			continue;
		const char *what = p->entry ? "a directory entry" : "a file's data";
		if (p->taken)
			snprintf(buf, len, "%s; the kernel had not returned from applying it", what);
		else if (ahead)
			snprintf(buf, len, "%s; behind %u pushes not applied yet, the first %s", what,
				 ahead, head->taken ? "in the kernel" : "not begun");
		else
			snprintf(buf, len, "%s; not begun", what);
		return;
	}
	snprintf(buf, len, "applied by now");
}

static void *ack_main(void *arg)
{
	struct pushq *q = arg;

	pthread_mutex_lock(&q->bg.lock);
	for (;;) {
		if (q->bg.stop)
			break;
		int64_t now = pfs_mono_ms(), wake, held;
		bool busy, unapplied;
		uint64_t gen = q->ack_gen,
			 count = ack_limit_locked(q, now, &wake, &held, &busy, &unapplied),
			 sent = gen == q->sent_gen ? q->sent_count : 0;
		if (count > sent && run_early_locked(q, gen, count))
			continue; /* the lock was dropped: look again */
		if (count <= sent) {
			/* A push held back since PUSHQ_ALIVE_MS: the count sent
			 * last goes again (the daemon ignores it), every
			 * PUSHQ_ALIVE_MS, to tell this client runs. */
			int64_t alive = held == INT64_MAX ? INT64_MAX
				      : (held > q->sent_ms ? held : q->sent_ms) + PUSHQ_ALIVE_MS;
			/* So too while frames keep coming on the main
			 * connection: a push the daemon waits for may be behind
			 * them (READ replies of a big file), which this host is
			 * reading through. On the connection they came on (0:
			 * none counted there yet, which the daemon ignores). */
			atomic_store(&q->rx_woke, false);
			bool reading = now - atomic_load(&q->rx_ms) < PUSHQ_ALIVE_MS;
			if (reading && q->sent_ms + PUSHQ_ALIVE_MS < alive)
				alive = q->sent_ms + PUSHQ_ALIVE_MS;
			if (now < alive) {
				/* Bytes that come from then on wake this thread. */
				atomic_store(&q->alive_due_ms, q->sent_ms + PUSHQ_ALIVE_MS);
				if (alive < wake)
					wake = alive;
				if (wake == INT64_MAX)
					bg_wait(&q->bg);
				else
					bg_wait_ns(&q->bg, (wake - now) * 1000000);
				continue;
			}
			count = sent;
			if (held == INT64_MAX) {
				uint64_t g = atomic_load(&q->rx_gen);
				if (g != gen) {
					gen = g;
					count = g == q->sent_gen ? q->sent_count : 0;
				}
			}
			q->st_alive++;
		} else {
			q->st_busy += busy;
			q->st_unapplied += unapplied;
			if (unapplied && (q->unapplied_logged_ms == 0 ||
					  now - q->unapplied_logged_ms >= 60000)) {
				char late[160];
				describe_late(q, now, late, sizeof(late));
				q->unapplied_logged_ms = now;
				pfs_notice("an invalidation waited %d ms for the kernel (a lock "
					   "podfs does not see, or a stalled thread): acknowledged "
					   "before it was applied (%llu so far; %s)",
					   PUSHQ_APPLY_WAIT_MS,
					   (unsigned long long)q->st_unapplied, late);
			}
		}
		q->sent_ms = now;
		atomic_store(&q->alive_due_ms, now + PUSHQ_ALIVE_MS);
		pthread_mutex_unlock(&q->bg.lock);
		q->cb.ack_cb(q->cb.arg, gen, count);
		pthread_mutex_lock(&q->bg.lock);
		q->sent_gen = gen;
		q->sent_count = count;
	}
	pthread_mutex_unlock(&q->bg.lock);
	return NULL;
}

static void *push_main(void *arg)
{
	struct pushq *q = arg;

	pthread_mutex_lock(&q->bg.lock);
	for (;;) {
		/* Stopping, it still applies what is queued. */
		while (!q->push_head && !q->bg.stop)
			bg_wait(&q->bg);
		if (!q->push_head)
			break;
		/* Only this thread unlinks, so the head stays p. */
		struct push_item *p = q->push_head;
		if (p->taken) {
			/* The recall thread applies it: its turn waits for that. */
			while (!p->done)
				bg_wait(&q->bg);
		} else {
			p->taken = true;
			q->recalls_waiting -= p->strict;
			pthread_mutex_unlock(&q->bg.lock);
			q->cb.apply_cb(q->cb.arg, p->op, p->buf, p->len, p->seq);
			pthread_mutex_lock(&q->bg.lock);
			p->done = true;
		}
		q->push_head = p->next;
		if (!q->push_head)
			q->push_tail = &q->push_head;
		q->n_applied++;
		/* The ack thread may go further (an entry invalidation), or
		 * a pushq_wait_applied be done. */
		if (p->gated || p->strict || q->apply_waiters)
			bg_wake_all(&q->bg);
		free(p->buf);
		free(p);
	}
	pthread_mutex_unlock(&q->bg.lock);
	return NULL;
}

/* Applies each RECALL as soon as it comes, ahead of the pushes before it
 * (pushq_i.h): the push thread may be held in the kernel by a local
 * operation whose reply waits, through another host, for this answer. */
static void *recall_main(void *arg)
{
	struct pushq *q = arg;

	pthread_mutex_lock(&q->bg.lock);
	for (;;) {
		struct push_item *p = q->recalls_waiting ? q->push_head : NULL;
		while (p && (!p->strict || p->taken))
			p = p->next;
		if (!p) {
			if (q->recall_stop)
				break;
			pthread_cond_wait(&q->recall_cond, &q->bg.lock);
			continue;
		}
		/* The push thread frees p only once it is done. */
		p->taken = true;
		q->recalls_waiting--;
		pthread_mutex_unlock(&q->bg.lock);
		q->cb.apply_cb(q->cb.arg, p->op, p->buf, p->len, p->seq);
		pthread_mutex_lock(&q->bg.lock);
		p->done = true;
		bg_wake_all(&q->bg);
	}
	pthread_mutex_unlock(&q->bg.lock);
	return NULL;
}

bool pushq_wait_applied(struct pushq *q, int64_t ms)
{
	int64_t end = pfs_mono_ms() + ms;

	pthread_mutex_lock(&q->bg.lock);
	uint64_t target = q->n_queued;
	q->apply_waiters++;
	for (int64_t left = ms; q->n_applied < target && !q->bg.stop && left > 0;
	     left = end - pfs_mono_ms())
		bg_wait_ns(&q->bg, left * 1000000);
	q->apply_waiters--;
	bool done = q->n_applied >= target;
	pthread_mutex_unlock(&q->bg.lock);
	return done;
}

int pushq_start(struct pushq *q)
{
	int rc = bg_start(&q->bg, "push", push_main, q);
	if (rc == 0)
		rc = bg_start(&q->bg, "recall", recall_main, q);
	if (rc == 0)
		rc = bg_start(&q->bg, "ack", ack_main, q);
	return rc;
}

void pushq_stop(struct pushq *q)
{
	pthread_mutex_lock(&q->bg.lock);
	q->recall_stop = true;
	pthread_cond_broadcast(&q->recall_cond);
	pthread_mutex_unlock(&q->bg.lock);
	bg_stop(&q->bg);
}
