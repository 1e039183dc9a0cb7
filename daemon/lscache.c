/* lscache.c: whole listings kept to be served again (see lscache_i.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "podfs/hash.h"
#include "podfs/htab.h"
#include "podfs/le.h"
#include "podfs/xalloc.h"
#include "idtab_i.h"
#include "lscache_i.h"

struct lsent {
	struct hnode hn;
	TAILQ_ENTRY(lsent) lru; /* most recently used first */
	unsigned refs;          /* lscache_get's, not yet put */
	bool dead;              /* out of the table: freed at the last put */
	uint64_t seq;
	int64_t born_ms;
	size_t cost;            /* what it counts against the limit */
	struct lscache_key k;
	size_t len;
	uint8_t data[];
};

struct lscache {
	pthread_mutex_t mu;
	struct htab tab;
	TAILQ_HEAD(lsent_head_, lsent) lru;
	size_t max;
	/* Written under mu, read by lscache_stats without it (the loop
	 * thread never waits for a worker's lock). */
	_Atomic size_t bytes, n;
	int64_t ttl_ms;
	uint64_t clean_seq;     /* every entry is of this sequence */
	_Atomic uint64_t seq;
	_Atomic uint64_t hits, misses;
	struct {
		uint64_t hash, seq;
	} asks[LSCACHE_ASKS]; /* under mu */
};

#define KEY_SEED 0x6c7363616368656bull

static void put_u32(struct lscache_key *k, uint32_t v)
{
	pfs_store_le32(k->b + k->len, v);
	k->len += 4;
}

void lscache_key_make(struct lscache_key *k, const struct pfs_fh *dir,
		      const struct pfs_creds *cr, bool squashed, uint32_t max_inline,
		      uint32_t max_bytes, unsigned how)
{
	uint8_t flags = (uint8_t)((cr ? 1 : 0) | (squashed ? 2 : 0) | (how & 3) << 2);
	uint16_t ng = cr ? (cr->ngroups < PFS_GROUPS_MAX ? cr->ngroups : PFS_GROUPS_MAX) : 0;

	k->len = 0;
	k->b[k->len++] = dir->len;
	memcpy(k->b + k->len, dir->data, dir->len);
	k->len += dir->len;
	k->b[k->len++] = flags;
	put_u32(k, max_inline);
	put_u32(k, max_inline ? max_bytes : 0);
	put_u32(k, cr ? cr->uid : 0);
	put_u32(k, cr ? cr->gid : 0);
	put_u32(k, ng);
	for (uint16_t i = 0; i < ng; i++)
		put_u32(k, cr->groups[i]);
}

struct lscache *lscache_new(size_t max_bytes, int64_t ttl_ms)
{
	struct lscache *c = xcalloc(1, sizeof(*c));

	pthread_mutex_init(&c->mu, NULL);
	htab_init(&c->tab);
	TAILQ_INIT(&c->lru);
	c->max = max_bytes;
	c->ttl_ms = ttl_ms;
	return c;
}

/* Takes e out of the table; frees it unless referenced. Under c->mu. */
static void drop(struct lscache *c, struct lsent *e)
{
	htab_remove(&c->tab, &e->hn);
	TAILQ_REMOVE(&c->lru, e, lru);
	atomic_fetch_sub_explicit(&c->bytes, e->cost, memory_order_relaxed);
	atomic_fetch_sub_explicit(&c->n, 1, memory_order_relaxed);
	e->dead = true;
	if (e->refs == 0)
		free(e);
}

/* Drops every entry once the sequence moved past them. Under c->mu. */
static void clean(struct lscache *c, uint64_t seq)
{
	struct lsent *e;

	if (seq == c->clean_seq)
		return;
	while ((e = TAILQ_FIRST(&c->lru)))
		drop(c, e);
	c->clean_seq = seq;
}

void lscache_free(struct lscache *c)
{
	if (!c)
		return;
	clean(c, c->clean_seq + 1);
	htab_fini(&c->tab);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

uint64_t lscache_seq(struct lscache *c)
{
	return atomic_load(&c->seq);
}

void lscache_bump(struct lscache *c)
{
	atomic_fetch_add(&c->seq, 1);
}

/* Keyed with the id tables' secret: a client chooses parts of the key
 * (max_inline, max_bytes), and with a known seed could find keys that
 * share a bucket offline and make every lookup walk them. */
static uint64_t key_hash(const struct lscache_key *k)
{
	return pfs_hash_u64_keyed(pfs_fnv1a(k->b, k->len, PFS_FNV1A_INIT ^ KEY_SEED ^ idtab_key[1]),
				  idtab_key);
}

/* Under c->mu. */
static struct lsent *find(struct lscache *c, const struct lscache_key *k, uint64_t hash)
{
	for (struct hnode *n = htab_first(&c->tab, hash); n; n = htab_next(n, hash)) {
		struct lsent *e = container_of(n, struct lsent, hn);
		if (e->k.len == k->len && memcmp(e->k.b, k->b, k->len) == 0)
			return e;
	}
	return NULL;
}

struct lsent *lscache_get(struct lscache *c, const struct lscache_key *k, int64_t now_ms)
{
	uint64_t hash = key_hash(k), seq = lscache_seq(c);
	struct lsent *e;

	pthread_mutex_lock(&c->mu);
	clean(c, seq);
	e = find(c, k, hash);
	if (e && (e->seq != seq || now_ms - e->born_ms >= c->ttl_ms || now_ms < e->born_ms)) {
		drop(c, e);
		e = NULL;
	}
	if (e) {
		e->refs++;
		TAILQ_REMOVE(&c->lru, e, lru);
		TAILQ_INSERT_HEAD(&c->lru, e, lru);
	}
	pthread_mutex_unlock(&c->mu);
	return e;
}

const uint8_t *lsent_data(const struct lsent *e, size_t *len)
{
	*len = e->len;
	return e->data;
}

uint64_t lsent_seq(const struct lsent *e)
{
	return e->seq;
}

void lscache_put(struct lscache *c, struct lsent *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&c->mu);
	if (--e->refs == 0 && e->dead)
		free(e);
	pthread_mutex_unlock(&c->mu);
}

void lscache_store(struct lscache *c, const struct lscache_key *k, uint64_t seq, int64_t now_ms,
		   const void *data, size_t len)
{
	size_t cost = sizeof(struct lsent) + len;
	uint64_t hash = key_hash(k);
	struct lsent *e, *old;

	if (cost > c->max / 4 || lscache_seq(c) != seq)
		return;
	/* Copied before the lock: other workers' lookups do not wait for it. */
	e = xmalloc(sizeof(*e) + len);
	e->refs = 0;
	e->dead = false;
	e->seq = seq;
	e->born_ms = now_ms;
	e->cost = cost;
	e->k = *k;
	e->len = len;
	memcpy(e->data, data, len);

	pthread_mutex_lock(&c->mu);
	clean(c, lscache_seq(c));
	if (seq != c->clean_seq) { /* moved meanwhile */
		pthread_mutex_unlock(&c->mu);
		free(e);
		return;
	}
	if ((old = find(c, k, hash)))
		drop(c, old);
	htab_insert(&c->tab, &e->hn, hash);
	TAILQ_INSERT_HEAD(&c->lru, e, lru);
	atomic_fetch_add_explicit(&c->bytes, cost, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->n, 1, memory_order_relaxed);
	while (atomic_load_explicit(&c->bytes, memory_order_relaxed) > c->max &&
	       (old = TAILQ_LAST(&c->lru, lsent_head_)) != e)
		drop(c, old);
	pthread_mutex_unlock(&c->mu);
}

void lscache_hit(struct lscache *c)
{
	atomic_fetch_add_explicit(&c->hits, 1, memory_order_relaxed);
}

bool lscache_miss(struct lscache *c, const struct lscache_key *k)
{
	uint64_t hash = key_hash(k), seq = lscache_seq(c);
	size_t i = hash & (LSCACHE_ASKS - 1);
	bool again;

	atomic_fetch_add_explicit(&c->misses, 1, memory_order_relaxed);
	pthread_mutex_lock(&c->mu);
	again = c->asks[i].hash == hash && c->asks[i].seq == seq;
	c->asks[i].hash = hash;
	c->asks[i].seq = seq;
	pthread_mutex_unlock(&c->mu);
	return again;
}

void lscache_stats(struct lscache *c, struct lscache_stats *out)
{
	out->hits = atomic_load_explicit(&c->hits, memory_order_relaxed);
	out->misses = atomic_load_explicit(&c->misses, memory_order_relaxed);
	out->entries = atomic_load_explicit(&c->n, memory_order_relaxed);
	out->bytes = atomic_load_explicit(&c->bytes, memory_order_relaxed);
}
