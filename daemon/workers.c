/* workers.c: a host's share of the thread pool (see workers_i.h). */
#include "workers_i.h"

#include "podfs/log.h"
#include "dispatch_i.h"
#include "pfsd_i.h"
#include "req_i.h"
#include "session_i.h"

static int start(struct req *r, uv_after_work_cb after)
{
	struct session *s = r->s;
	int ret = uv_queue_work(&r->d->loop, &r->work, dispatch_work_cb, after);

	if (ret == 0 && s) {
		s->running++;
		s->ha->running++;
		r->pooled = true;
	}
	return ret;
}

void workers_failed(struct req *r, int ret, uv_after_work_cb after)
{
	pfs_err("conn %llu: cannot queue work: %s", (unsigned long long)r->c->id, uv_strerror(ret));
	after(&r->work, ret); /* as if cancelled: its conn closes */
}

/* A host with a deep queue never makes the others' requests wait behind
 * all of it, however many sessions it opened: they have their own share. */
int workers_submit(struct req *r, uv_after_work_cb after)
{
	struct session *s = r->s;

	if (s && (!STAILQ_EMPTY(&s->ha->waitq) || s->ha->running >= r->d->lim.workers)) {
		STAILQ_INSERT_TAIL(&s->ha->waitq, r, wlink);
		s->queued++;
		return 0;
	}
	return start(r, after);
}

void workers_left(struct session *s, const struct req *done, uv_after_work_cb after)
{
	struct hostacct *ha = s->ha;

	s->running--;
	ha->running--;
	while (ha->running < done->d->lim.workers && !STAILQ_EMPTY(&ha->waitq)) {
		struct req *r = STAILQ_FIRST(&ha->waitq);
		STAILQ_REMOVE_HEAD(&ha->waitq, wlink);
		r->s->queued--;
		int ret = start(r, after);
		if (ret < 0)
			workers_failed(r, ret, after);
	}
}
