/* lsqueue.c: the ordered ring of directories to list ahead (see
 * lsqueue_i.h). */
#include "lsqueue_i.h"

static size_t at(const struct lsqueue *q, size_t i)
{
	return (q->head + i) % LSQ_MAX;
}

uint64_t lsq_new_base(struct lsqueue *q)
{
	q->base += LSQ_STRIDE;
	return q->base;
}

enum lsq_pushed lsq_push(struct lsqueue *q, const struct lsq_item *it, struct lsq_item *out)
{
	bool full = q->n == LSQ_MAX;
	size_t p = 0;

	/* Most go on top (a walk's newest batch): the scan stops at once. */
	while (p < q->n && q->q[at(q, p)].key >= it->key)
		p++;
	if (full) {
		if (p == q->n) {
			*out = *it;
			return LSQ_REFUSED;
		}
		*out = lsq_pop_bottom(q);
	}
	if (p == 0) {
		q->head = (q->head + LSQ_MAX - 1) % LSQ_MAX;
	} else {
		for (size_t i = q->n; i > p; i--)
			q->q[at(q, i)] = q->q[at(q, i - 1)];
	}
	q->q[at(q, p)] = *it;
	q->n++;
	return full ? LSQ_PUSHED_OUT : LSQ_IN;
}

const struct lsq_item *lsq_top(const struct lsqueue *q)
{
	return &q->q[q->head];
}

struct lsq_item lsq_pop_top(struct lsqueue *q)
{
	struct lsq_item it = q->q[q->head];

	q->head = (q->head + 1) % LSQ_MAX;
	q->n--;
	return it;
}

struct lsq_item lsq_pop_bottom(struct lsqueue *q)
{
	q->n--;
	return q->q[at(q, q->n)];
}
