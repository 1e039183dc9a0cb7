/* pace.c: pacing a connection's READ replies (see pace_i.h). Loop
 * thread only. */
#include "podfs/wire.h"
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
	return pace_take(c);
}
