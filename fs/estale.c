/* estale.c: ESTALE from OPEN, and the VFS's retry (see estale_i.h). */
#include "estale_i.h"

#include "podfs/clock.h"

void estale_arm(struct estale *es, pid_t tid)
{
	pthread_mutex_lock(&es->lock);
	es->slot[(unsigned)tid % ESTALE_SLOTS] =
		(struct estale_slot){ .tid = tid, .ino = 0, .when = pfs_mono_ns() };
	pthread_mutex_unlock(&es->lock);
}

void estale_looked(struct estale *es, pid_t tid, uint64_t ino)
{
	struct estale_slot *e = &es->slot[(unsigned)tid % ESTALE_SLOTS];
	pthread_mutex_lock(&es->lock);
	if (e->tid == tid && pfs_mono_ns() - e->when < ESTALE_RETRY_NS)
		e->ino = ino;
	pthread_mutex_unlock(&es->lock);
}

bool estale_retry(struct estale *es, pid_t tid, uint64_t ino)
{
	struct estale_slot *e = &es->slot[(unsigned)tid % ESTALE_SLOTS];
	pthread_mutex_lock(&es->lock);
	bool yes = e->tid == tid && e->ino == ino && pfs_mono_ns() - e->when < ESTALE_RETRY_NS;
	if (e->tid == tid)
		e->tid = 0;
	pthread_mutex_unlock(&es->lock);
	return yes;
}
