/* pushq.c: the push queue, the push thread and the ack thread (see
 * pushq_i.h). */
#include "pushq_i.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

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

	/* Push queue. */
	pthread_mutex_t lock;
	pthread_cond_t push_cond;
	struct push_item *push_head, **push_tail;
	bool push_stop;
	pthread_t push_thr;
	bool push_started;

	/* Acknowledgements (PUSH_ACK), under lock: pushes received on
	 * connection ack_gen (numbered, not necessarily applied yet) and
	 * what the ack thread sent last. */
	pthread_cond_t ack_cond;
	uint64_t ack_gen, ack_count, sent_gen, sent_count;
	pthread_t ack_thr;
	bool ack_started;
};

int pushq_new(const struct pushq_cbs *cbs, struct pushq **out)
{
	struct pushq *q = calloc(1, sizeof(*q));

	if (!q)
		return -ENOMEM;
	q->cb = *cbs;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->push_cond, NULL);
	pthread_cond_init(&q->ack_cond, NULL);
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
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->push_cond);
	pthread_cond_destroy(&q->ack_cond);
	free(q);
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
	pthread_mutex_lock(&q->lock);
	*q->push_tail = p;
	q->push_tail = &p->next;
	if (p->gen != q->ack_gen) {
		q->ack_gen = p->gen;
		q->ack_count = 0;
	}
	q->ack_count++;
	pthread_cond_signal(&q->push_cond);
	pthread_cond_signal(&q->ack_cond);
	pthread_mutex_unlock(&q->lock);
}

static void *ack_main(void *arg)
{
	struct pushq *q = arg;

	pthread_mutex_lock(&q->lock);
	for (;;) {
		while (!q->push_stop && q->ack_gen == q->sent_gen && q->ack_count == q->sent_count)
			pthread_cond_wait(&q->ack_cond, &q->lock);
		if (q->push_stop)
			break;
		uint64_t gen = q->ack_gen, count = q->ack_count;
		pthread_mutex_unlock(&q->lock);
		q->cb.ack_cb(q->cb.arg, gen, count);
		pthread_mutex_lock(&q->lock);
		q->sent_gen = gen;
		q->sent_count = count;
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

static void *push_main(void *arg)
{
	struct pushq *q = arg;

	pthread_mutex_lock(&q->lock);
	for (;;) {
		while (!q->push_head && !q->push_stop)
			pthread_cond_wait(&q->push_cond, &q->lock);
		if (!q->push_head)
			break;
		struct push_item *p = q->push_head;
		q->push_head = p->next;
		if (!q->push_head)
			q->push_tail = &q->push_head;
		pthread_mutex_unlock(&q->lock);
		q->cb.apply_cb(q->cb.arg, p->op, p->buf, p->len, p->seq);
		free(p->buf);
		free(p);
		pthread_mutex_lock(&q->lock);
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

int pushq_start(struct pushq *q)
{
	int rc = pthread_create(&q->push_thr, NULL, push_main, q);
	if (rc)
		return -rc;
	q->push_started = true;
	rc = pthread_create(&q->ack_thr, NULL, ack_main, q);
	if (rc)
		return -rc;
	q->ack_started = true;
	return 0;
}

/* Stops one of the threads: sets the stop flag, wakes it on cond and
 * joins it. */
static void stop_one(struct pushq *q, pthread_cond_t *cond, pthread_t thr, bool *started)
{
	if (!*started)
		return;
	pthread_mutex_lock(&q->lock);
	q->push_stop = true;
	pthread_cond_signal(cond);
	pthread_mutex_unlock(&q->lock);
	pthread_join(thr, NULL);
	*started = false;
}

void pushq_stop(struct pushq *q)
{
	stop_one(q, &q->push_cond, q->push_thr, &q->push_started);
	stop_one(q, &q->ack_cond, q->ack_thr, &q->ack_started);
}
