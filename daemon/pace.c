/* pace.c: pacing a connection's READ replies (see pace_i.h). Loop
 * thread only. */
#include <stdlib.h>

#include "podfs/wire.h"
#include "podfs/xalloc.h"
#include "limits_i.h"
#include "pace_i.h"
#include "pfsd_i.h"
#include "req_i.h"

/* Bytes of c's READ replies in the making or not taken by its socket. */
static size_t busy(const struct conn *c)
{
	return c->pace_busy + conn_queued(c);
}

bool pace_hold(struct req *r)
{
	struct conn *c = r->c;

	if (r->h.op != PFS_OP_READ ||
	    lim_read_may_start(busy(c), c->npaced > 0, c->d->lim.read_queue))
		return false;
	STAILQ_INSERT_TAIL(&c->paceq, r, wlink);
	c->npaced++;
	c->d->npaced++;
	r->paced = true;
	return true;
}

void pace_start(struct req *r)
{
	if (r->h.op != PFS_OP_READ || r->pacing)
		return;
	r->c->pace_busy += r->pace;
	r->pacing = true;
}

void pace_done(struct req *r)
{
	if (!r->pacing)
		return;
	r->c->pace_busy -= r->pace;
	r->pacing = false;
}

struct req *pace_take(struct conn *c)
{
	struct req *r = STAILQ_FIRST(&c->paceq);

	if (!r)
		return NULL;
	STAILQ_REMOVE_HEAD(&c->paceq, wlink);
	c->npaced--;
	c->d->npaced--;
	r->paced = false;
	return r;
}

struct req *pace_next(struct conn *c)
{
	if (STAILQ_EMPTY(&c->paceq) || !lim_read_may_start(busy(c), false, c->d->lim.read_queue))
		return NULL;
	if (lim_over_share(&c->d->lim, c->acct, c->d->mem)) {
		if (!c->reads_held) {
			LIST_INSERT_HEAD(&c->d->reads_held, c, rlink);
			c->reads_held = true;
		}
		return NULL;
	}
	return pace_take(c);
}

void pace_unhold(struct conn *c)
{
	if (!c->reads_held)
		return;
	LIST_REMOVE(c, rlink);
	c->reads_held = false;
}

void pace_resume(struct pfsd *d, const size_t *host_mem)
{
	struct conn *o, **v;
	size_t n = 0, i = 0;

	LIST_FOREACH(o, &d->reads_held, rlink)
		n++;
	/* Taken off the list before any starts: a start may end in a
	 * walk like this one, and one held again goes back on the list. */
	v = xmalloc(n * sizeof(*v) + 1);
	for (o = LIST_FIRST(&d->reads_held); o; ) {
		struct conn *next = LIST_NEXT(o, rlink);
		if (!host_mem || (o->acct && o->acct->host_mem == host_mem)) {
			pace_unhold(o);
			conn_ref(o);
			v[i++] = o;
		}
		o = next;
	}
	for (size_t k = 0; k < i; k++) {
		if (!v[k]->closing && v[k]->drain_cb)
			v[k]->drain_cb(v[k]);
		conn_unref(v[k]);
	}
	free(v);
}
