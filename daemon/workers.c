/* workers.c: a session's share of the thread pool (see workers_i.h). */
#include "workers_i.h"

#include "podfs/log.h"
#include "dispatch_i.h"
#include "pfsd_i.h"
#include "req_i.h"
#include "session_i.h"

/* Whether a request of s may go to the thread pool now (sync: it waits
 * for the disk). Up to the session's share of the workers (limit
 * "workers"); and when syncs hold the whole share (the commits of a
 * client's closes and creates, each a journal commit), one request that
 * does not sync still goes: otherwise the mkdir, create or lookup its
 * application waits for would wait behind the commits. */
static bool may_run(const struct session *s, bool sync, unsigned workers)
{
	return s->running < workers || (!sync && s->running == s->running_sync);
}

static int start(struct req *r, uv_after_work_cb after)
{
	struct session *s = r->s;
	int ret = uv_queue_work(&r->d->loop, &r->work, dispatch_work_cb, after);

	if (ret == 0 && s) {
		s->running++;
		s->running_sync += r->sync;
		r->pooled = true;
	}
	return ret;
}

void workers_failed(struct req *r, int ret, uv_after_work_cb after)
{
	pfs_err("conn %llu: cannot queue work: %s", (unsigned long long)r->c->id, uv_strerror(ret));
	after(&r->work, ret); /* as if cancelled: its conn closes */
}

/* A client with a deep queue never makes the others' requests wait
 * behind all of it: they have their own share. */
int workers_submit(struct req *r, uv_after_work_cb after)
{
	struct session *s = r->s;

	r->sync = r->h.op == PFS_OP_FSYNC || r->h.op == PFS_OP_CREATES;
	if (s) {
		struct reqq *q = r->sync ? &s->waitq_sync : &s->waitq;
		if (!STAILQ_EMPTY(q) || !may_run(s, r->sync, r->d->lim.workers)) {
			STAILQ_INSERT_TAIL(q, r, wlink);
			return 0;
		}
	}
	return start(r, after);
}

void workers_left(struct session *s, const struct req *done, uv_after_work_cb after)
{
	unsigned workers = done->d->lim.workers;

	s->running--;
	s->running_sync -= done->sync;
	for (;;) {
		struct req *a = STAILQ_FIRST(&s->waitq), *b = STAILQ_FIRST(&s->waitq_sync);
		if (a && !may_run(s, false, workers))
			a = NULL;
		if (b && !may_run(s, true, workers))
			b = NULL;
		struct req *r = a && b ? (b->t0 < a->t0 ? b : a) : a ? a : b;
		if (!r)
			return;
		if (r == a)
			STAILQ_REMOVE_HEAD(&s->waitq, wlink);
		else
			STAILQ_REMOVE_HEAD(&s->waitq_sync, wlink);
		int ret = start(r, after);
		if (ret < 0)
			workers_failed(r, ret, after);
	}
}
