/* dispatch_locks.c: the handlers of locks (GETLK, SETLK, UNLOCK_OWNER,
 * RECLAIM, RECLAIM_DONE): the grace period after a restart, the waiters
 * of blocked locks and the persisted list of lock holders
 * (lockstate_i.h) around the lock calls of export_locks.c. Worker
 * threads (see op_i.h). */
#include <errno.h>

#include "lockstate_i.h"
#include "op_i.h"
#include "pfsd_i.h"

/* GETLK checks the grace period before it resolves anything, so it
 * resolves its handle itself (a PLAIN row in dispatch.c). */
int op_getlk(struct op *o)
{
	const struct pfs_lock_req *m = &o->m.lock_req;
	struct pfs_getlk_rep rep;
	int ret;

	/* In grace the table is not complete: "unlocked" could be a lie. */
	if (lockstate_in_grace(o->d->ls))
		return -PFS_ST_GRACE;
	ret = op_begin(o, &m->cr, &m->fh, NULL);
	if (ret < 0)
		return ret;
	ret = export_getlk(&o->x, o->obj, m, &rep);
	op_end(o);
	return ret < 0 ? ret : OP_ENCODE(o, getlk_rep, &rep);
}

/* SETLK and RECLAIM: sets m's lock; reclaim skips the grace check. The
 * waiter is registered before the attempt, and the holder listed (a
 * file written as root) after the credentials are back to root. */
static int set_lock(struct op *o, bool reclaim)
{
	struct pfs_lock_req m = o->m.lock_req;
	struct session *s = o->r->s;
	bool wait = !reclaim && (m.flags & PFS_LKF_WAIT);
	uint64_t key = handles_key(o->d->hs, &m.fh);
	int ret;

	m.flags &= ~(uint32_t)PFS_LKF_WAIT;
	/* Register before trying: a release after our failed attempt then
	 * finds us (see lockstate_i.h). */
	if (wait)
		lockstate_wait_add(o->d->ls, key, s->client_id);
	ret = op_begin(o, &m.cr, &m.fh, NULL);
	if (ret == 0) {
		ret = export_setlk(&o->x, o->obj, &m);
		op_end(o);
	}
	if (wait && ret != -EAGAIN)
		lockstate_wait_del(o->d->ls, key, s->client_id);
	if (ret < 0)
		return ret;
	if (m.type == PFS_LK_UN || m.type == PFS_LK_RD)
		op_lock_wake(o, &m.fh);
	/* Listed (durably) before the client hears it holds a lock. */
	if (m.type != PFS_LK_UN)
		lockstate_note_holder(o->d->ls, s->client_id, s->host);
	return 0;
}

int op_setlk(struct op *o)
{
	/* Unlocking is always safe; taking a lock waits for the reclaims. */
	if (o->m.lock_req.type != PFS_LK_UN && lockstate_in_grace(o->d->ls))
		return -PFS_ST_GRACE;
	return set_lock(o, false);
}

int op_reclaim(struct op *o)
{
	int ret;

	if (o->m.lock_req.type == PFS_LK_UN)
		return -EINVAL;
	ret = lockstate_may_reclaim(o->d->ls, o->r->s->client_id);
	return ret < 0 ? ret : set_lock(o, true);
}

int op_reclaim_done(struct op *o)
{
	const struct pfs_reclaim_done_req *m = &o->m.reclaim_done_req;
	struct session *s = o->r->s;

	lockstate_reclaim_done(o->d->ls, s->client_id, s->host, m->reclaimed, m->lost);
	return 0;
}

/* Closing a lock fd needs no credentials: UNLOCK_OWNER resolves as root
 * (dispatch.c). */
int op_unlock_owner(struct op *o)
{
	const struct pfs_unlock_owner_req *m = &o->m.unlock_owner_req;
	int ret = export_unlock_owner(&o->x, o->obj, m->owner);

	if (ret > 0)
		op_lock_wake(o, &m->fh);
	return ret < 0 ? ret : 0;
}
