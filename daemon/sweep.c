/* sweep.c: the periodic sweep of the handle cache and of the interest
 * slots of ended sessions (see sweep_i.h). Loop thread; the sweep
 * itself runs on the thread pool. */
#include <inttypes.h>
#include <stdatomic.h>

#include "podfs/log.h"
#include "handles_i.h"
#include "interest_i.h"
#include "limits_i.h"
#include "lscache_i.h"
#include "pfsd_i.h"
#include "sweep_i.h"

static void sweep_work_cb(uv_work_t *w)
{
	struct pfsd *d = w->data;

	handles_orphans_expire(d->hs);
	/* The slots of the sessions that ended since the last tick, in one
	 * walk of the interest table (interest_i.h). */
	if (interest_sweep(d->it) && d->lc)
		lscache_bump(d->lc);
	if (++d->sweep_ticks < PFSD_SWEEP_MS / PFSD_TICK_MS)
		return;
	d->sweep_ticks = 0;
	size_t n = handles_sweep(d->hs);
	if (n)
		pfs_debug("closed %zu cached handles of deleted files", n);
}

static void sweep_done_cb(uv_work_t *w, int status)
{
	struct pfsd *d = w->data;

	d->sweeping = false;
}

static void sweep_timer_cb(uv_timer_t *t)
{
	struct pfsd *d = t->data;

	/* The clients of the instances before have had their time to send
	 * their requests again (replylog_i.h). */
	if (d->replies.n_old && uv_now(&d->loop) >= d->rl_forget_ms) {
		pfs_info("the %zu replies of changes read at start go: %" PRIu64 " requests sent "
			 "again after the restart were answered with them", d->replies.n_old,
			 d->rl_answered);
		replylog_forget(&d->replies);
	}
	if (d->sweeping || d->stopping)
		return;
	/* The handle cache grows back as sessions' files close. */
	handles_set_max(d->hs, lim_hcache_room(&d->lim, atomic_load(&d->fds)));
	d->sweep_work.data = d;
	if (uv_queue_work(&d->loop, &d->sweep_work, sweep_work_cb, sweep_done_cb) == 0)
		d->sweeping = true;
}

void sweep_start(struct pfsd *d)
{
	uv_timer_init(&d->loop, &d->sweep_timer);
	d->sweep_timer.data = d;
	d->rl_forget_ms = uv_now(&d->loop) + (uint64_t)(d->o.lease > 60 ? d->o.lease : 60) * 1000;
	uv_timer_start(&d->sweep_timer, sweep_timer_cb, PFSD_TICK_MS, PFSD_TICK_MS);
}

void sweep_stop(struct pfsd *d)
{
	if (!uv_is_closing((uv_handle_t *)&d->sweep_timer))
		uv_close((uv_handle_t *)&d->sweep_timer, NULL);
}
