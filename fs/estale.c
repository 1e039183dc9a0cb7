/* estale.c: ESTALE, and the VFS's retry (see estale_i.h). */
#include "estale_i.h"

#include "podfs/clock.h"

/* Frees tid's slot (lock held). */
static void disarm(struct estale *es, struct estale_slot *e)
{
	e->tid = 0;
	es->armed--;
	if (es->armed == 0)
		for (unsigned i = 0; i < ESTALE_SEEN; i++)
			es->seen[i].ino = 0;
}

/* Arms tid's slot e (lock held). */
static void arm(struct estale *es, struct estale_slot *e, pid_t tid)
{
	if (e->tid == 0)
		es->armed++;
	*e = (struct estale_slot){ .tid = tid, .ino = 0, .when = pfs_mono_ns() };
}

void estale_arm(struct estale *es, pid_t tid)
{
	struct estale_slot *e = &es->slot[(unsigned)tid % ESTALE_SLOTS];
	pthread_mutex_lock(&es->lock);
	arm(es, e, tid);
	pthread_mutex_unlock(&es->lock);
}

bool estale_again(struct estale *es, pid_t tid)
{
	struct estale_slot *e = &es->slot[(unsigned)tid % ESTALE_SLOTS];
	bool again;

	pthread_mutex_lock(&es->lock);
	again = e->tid == tid && pfs_mono_ns() - e->when < ESTALE_RETRY_NS;
	if (again)
		disarm(es, e);
	else
		arm(es, e, tid);
	pthread_mutex_unlock(&es->lock);
	return again;
}

void estale_looked(struct estale *es, pid_t tid, uint64_t ino)
{
	struct estale_slot *e = &es->slot[(unsigned)tid % ESTALE_SLOTS];
	pthread_mutex_lock(&es->lock);
	if (es->armed) {
		int64_t now = pfs_mono_ns();
		if (e->tid == tid && now - e->when < ESTALE_RETRY_NS)
			e->ino = ino;
		es->seen[es->next] = (struct estale_seen){ .ino = ino, .when = now };
		es->next = (es->next + 1) % ESTALE_SEEN;
	}
	pthread_mutex_unlock(&es->lock);
}

bool estale_retry(struct estale *es, pid_t tid, uint64_t ino)
{
	struct estale_slot *e = &es->slot[(unsigned)tid % ESTALE_SLOTS];
	bool yes = false;

	pthread_mutex_lock(&es->lock);
	if (e->tid == tid) {
		if (pfs_mono_ns() - e->when < ESTALE_RETRY_NS) {
			yes = e->ino == ino;
			for (unsigned i = 0; i < ESTALE_SEEN && !yes; i++)
				yes = es->seen[i].ino == ino && es->seen[i].when >= e->when;
		}
		disarm(es, e);
	}
	pthread_mutex_unlock(&es->lock);
	return yes;
}
