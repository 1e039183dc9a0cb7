/* pushq.c: the push queue, the push thread and the ack thread (see
 * pushq_i.h). */
#include "pushq_i.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "bg_i.h"

struct push_item {
	struct push_item *next;
	uint64_t seq; /* note_cb's number, 0 if none */
	uint64_t gen; /* connection it came on */
	uint16_t op;
	size_t len;
	uint8_t *buf;
};

struct pushq {
	struct pushq_cbs cb;

	/* The push and ack threads; bg.lock guards everything below, and
	 * bg.cond wakes both threads (a push queued, or stopping). */
	struct bg bg;
	struct push_item *push_head, **push_tail;

	/* Acknowledgements (PUSH_ACK): pushes received on connection
	 * ack_gen (numbered, not necessarily applied yet) and what the ack
	 * thread sent last. */
	uint64_t ack_gen, ack_count, sent_gen, sent_count;
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

void pushq_add(struct pushq *q, uint64_t gen, uint16_t op, uint8_t *buf, size_t len)
{
	struct push_item *p = malloc(sizeof(*p));
	if (!p) {
		free(buf);
		return;
	}
	p->next = NULL;
	p->seq = q->cb.note_cb(q->cb.arg, op, buf, len);
	p->gen = gen;
	p->op = op;
	p->buf = buf;
	p->len = len;
	pthread_mutex_lock(&q->bg.lock);
	*q->push_tail = p;
	q->push_tail = &p->next;
	count_locked(q, gen);
	bg_wake_all(&q->bg);
	pthread_mutex_unlock(&q->bg.lock);
}

void pushq_count(struct pushq *q, uint64_t gen)
{
	pthread_mutex_lock(&q->bg.lock);
	count_locked(q, gen);
	bg_wake_all(&q->bg);
	pthread_mutex_unlock(&q->bg.lock);
}

static void *ack_main(void *arg)
{
	struct pushq *q = arg;

	pthread_mutex_lock(&q->bg.lock);
	for (;;) {
		while (!q->bg.stop && q->ack_gen == q->sent_gen && q->ack_count == q->sent_count)
			bg_wait(&q->bg);
		if (q->bg.stop)
			break;
		uint64_t gen = q->ack_gen, count = q->ack_count;
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
		struct push_item *p = q->push_head;
		q->push_head = p->next;
		if (!q->push_head)
			q->push_tail = &q->push_head;
		pthread_mutex_unlock(&q->bg.lock);
		q->cb.apply_cb(q->cb.arg, p->op, p->buf, p->len, p->seq);
		free(p->buf);
		free(p);
		pthread_mutex_lock(&q->bg.lock);
	}
	pthread_mutex_unlock(&q->bg.lock);
	return NULL;
}

int pushq_start(struct pushq *q)
{
	int rc = bg_start(&q->bg, push_main, q);
	if (rc == 0)
		rc = bg_start(&q->bg, ack_main, q);
	return rc;
}

void pushq_stop(struct pushq *q)
{
	bg_stop(&q->bg);
}
