/* workers.c: a host's share of the thread pool, and the small READs the
 * loop runs itself (see workers_i.h). */
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

/* The window over which the loop's share of small READs is counted. */
#define LOOP_READ_WINDOW_MS 10

/* A small READ of a client that waits for it alone runs here, on the
 * loop thread, when it needs no wait: its data in the page cache
 * (RWF_NOWAIT), its file open, its handle cached (req.nowait). That
 * saves the two hand-offs between threads, to a worker and back, which
 * on a virtual machine cost more than the read (docs/limits.md, "Reads
 * answered on the loop"). Only while the client's host has nothing on
 * the workers or waiting for them: a host that sends many requests at
 * once gets them run side by side there, and cannot keep the loop from
 * the other connections. */
bool workers_try_on_loop(struct req *r, uv_after_work_cb after)
{
	struct session *s = r->s;
	struct pfsd *d = r->d;
	unsigned codecs = r->codecs;

	if (r->h.op != PFS_OP_READ || !s || r->replay || r->drc || r->c->npaced ||
	    (r->h.flags & PFS_FF_CODED) || d->stopping || s->ha->running ||
	    !STAILQ_EMPTY(&s->ha->waitq))
		return false;
	/* Many hosts reading at once: the loop spends at most half its time
	 * on their reads, and the rest go to the workers, on every core. */
	uint64_t now = uv_now(&d->loop);
	if (now - d->loop_read_window >= LOOP_READ_WINDOW_MS) {
		d->loop_read_window = now;
		d->loop_read_ns = 0;
	}
	if (d->loop_read_ns >= LOOP_READ_WINDOW_MS * 1000000 / 2)
		return false;
	uint64_t t0 = uv_hrtime();
	r->nowait = true;
	dispatch_work_cb(&r->work);
	r->nowait = false;
	if (r->blocked) {
		r->blocked = false;
		r->codecs = codecs;
		d->loop_read_ns += uv_hrtime() - t0;
		return false;
	}
	d->st_loop_reads++;
	after(&r->work, 0); /* its reply, encrypted here */
	d->loop_read_ns += uv_hrtime() - t0;
	return true;
}
