/* gate.c: the push/reply race gate (see gate_i.h). */
#include "gate_i.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "podfs/hash.h"

struct gate {
	/* seq, all_seq and the ring change only under the write side. */
	pthread_rwlock_t lock;
	_Atomic uint64_t seq;
	_Atomic uint64_t applied;   /* pushes up to this number reached the kernel */
	uint64_t all_seq;           /* last "everything" invalidation */
	uint64_t ring[GATE_RING];   /* fh hash of push number n at ring[n % GATE_RING] */
};

static uint64_t fh_key(const struct pfs_fh *fh)
{
	return pfs_hash_bytes(fh->data, fh->len, 0) | 1; /* never 0: 0 marks an empty slot */
}

int gate_new(struct gate **out)
{
	struct gate *g = calloc(1, sizeof(*g));

	if (!g)
		return -ENOMEM;
	pthread_rwlock_init(&g->lock, NULL);
	atomic_init(&g->seq, 1);
	*out = g;
	return 0;
}

void gate_free(struct gate *g)
{
	if (!g)
		return;
	pthread_rwlock_destroy(&g->lock);
	free(g);
}

uint64_t gate_seq(struct gate *g)
{
	return atomic_load(&g->seq);
}

uint64_t gate_note_push(struct gate *g, const struct pfs_fh *fh)
{
	pthread_rwlock_wrlock(&g->lock);
	uint64_t n = atomic_load(&g->seq) + 1;
	g->ring[n % GATE_RING] = fh_key(fh);
	atomic_store(&g->seq, n);
	pthread_rwlock_unlock(&g->lock);
	return n;
}

void gate_set_applied(struct gate *g, uint64_t n)
{
	if (n > atomic_load(&g->applied))
		atomic_store(&g->applied, n);
}

uint64_t gate_applied(struct gate *g)
{
	return atomic_load(&g->applied);
}

void gate_note_all(struct gate *g)
{
	pthread_rwlock_wrlock(&g->lock);
	uint64_t n = atomic_load(&g->seq) + 1;
	g->ring[n % GATE_RING] = 0;
	g->all_seq = n;
	atomic_store(&g->seq, n);
	pthread_rwlock_unlock(&g->lock);
}

void gate_enter(struct gate *g)
{
	pthread_rwlock_rdlock(&g->lock);
}

void gate_leave(struct gate *g)
{
	pthread_rwlock_unlock(&g->lock);
}

bool gate_push_pending(struct gate *g, const struct pfs_fh *fh)
{
	uint64_t now = atomic_load(&g->seq), seq = atomic_load(&g->applied);

	if (now <= seq)
		return false;
	if (now - seq >= GATE_RING)
		return true;
	uint64_t key = fh_key(fh);
	for (uint64_t n = seq + 1; n <= now; n++)
		if (g->ring[n % GATE_RING] == key)
			return true;
	return false;
}

bool gate_pushed_since(struct gate *g, uint64_t seq, const struct pfs_fh *fh)
{
	uint64_t now = atomic_load(&g->seq);
	if (now <= seq)
		return false;
	if (g->all_seq > seq || now - seq >= GATE_RING)
		return true; /* everything, or too many to tell */
	if (!fh)
		return false;
	uint64_t key = fh_key(fh);
	for (uint64_t n = seq + 1; n <= now; n++)
		if (g->ring[n % GATE_RING] == key)
			return true;
	return false;
}
