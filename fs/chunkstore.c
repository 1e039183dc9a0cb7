/* chunkstore.c: the chunks a mount holds for peer-assisted reads (see
 * chunkstore_i.h). */
#include "chunkstore_i.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "podfs/clock.h"
#include "podfs/hash.h"

struct recent {
	struct hnode hn;
	uint64_t fkey, index, seq, ver;
	uint8_t digest[PFS_DIGEST_LEN];
	uint32_t len;
	TAILQ_ENTRY(recent) order; /* oldest first */
};

/* A CHUNK question in flight (cstore_ask_begin). */
struct asking {
	uint64_t fkey, index;
	struct asking *next;
};

struct cstore {
	pthread_mutex_t mu;
	pthread_cond_t cv; /* a chunk changed mode, a slot was filled or given back */
	struct htab by_digest;
	TAILQ_HEAD(chunk_lru, chunk) lru; /* least recently used first */
	size_t bytes, max_bytes;
	uint64_t nchunks, evicted, no_room;
	uint64_t miss_gone, miss_absent, miss_late; /* cstore_serve's NULLs, by cause */
	bool closing;
	/* Digests (their first 8 bytes) of chunks dropped lately: a peer
	 * asking for one is told at once that it is not held. */
	uint64_t gone[CSTORE_GONE];
	unsigned ngone;
	struct htab recent;
	TAILQ_HEAD(, recent) rorder;
	struct asking *asking; /* a few at a time: a list will do */
};

static uint64_t digest_hash(const uint8_t d[PFS_DIGEST_LEN])
{
	uint64_t h;

	/* The digest is uniformly distributed already. */
	memcpy(&h, d, sizeof(h));
	return h;
}

static uint64_t recent_hash(uint64_t fkey, uint64_t index)
{
	return pfs_hash_u64(fkey ^ pfs_hash_u64(index));
}

int cstore_new(size_t max_bytes, struct cstore **out)
{
	struct cstore *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	if (pfs_cond_init_mono(&s->cv) != 0) {
		free(s);
		return -ENOMEM;
	}
	pthread_mutex_init(&s->mu, NULL);
	htab_init(&s->by_digest);
	htab_init(&s->recent);
	TAILQ_INIT(&s->lru);
	TAILQ_INIT(&s->rorder);
	s->max_bytes = max_bytes;
	*out = s;
	return 0;
}

/* A chunk's bytes. Chunks of 2 MiB or more are 2 MiB-aligned and asked
 * to be backed by huge pages (MADV_HUGEPAGE: transparent huge pages in
 * "madvise" mode, the usual default): a chunk is filled once, in full,
 * and a 4 MiB chunk otherwise costs 1,024 page faults as it is filled
 * (glibc maps an allocation that large afresh each time), about 11 us
 * each on a virtual machine. Measured reading 1 GiB through one mount
 * with peers (every chunk from the coordinator, 256 of them): the FUSE
 * threads spent about a sixth of the mount's CPU time in those faults. */
#define CHUNK_HUGE (2u << 20)

static uint8_t *chunk_data_alloc(uint32_t len)
{
	void *p;

	if (len < CHUNK_HUGE)
		return malloc(len);
	if (posix_memalign(&p, CHUNK_HUGE, len) != 0)
		return NULL;
	(void)madvise(p, len / CHUNK_HUGE * CHUNK_HUGE, MADV_HUGEPAGE);
	return p;
}

static void chunk_free(struct chunk *c)
{
	free(c->data);
	free(c);
}

void cstore_free(struct cstore *s)
{
	struct hnode *n;

	if (!s)
		return;
	while ((n = htab_pop(&s->by_digest)))
		chunk_free(container_of(n, struct chunk, hn));
	while ((n = htab_pop(&s->recent)))
		free(container_of(n, struct recent, hn));
	while (s->asking) {
		struct asking *a = s->asking;
		s->asking = a->next;
		free(a);
	}
	htab_fini(&s->by_digest);
	htab_fini(&s->recent);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

/* --- chunks (s->mu held) --- */

static struct chunk *find(struct cstore *s, const uint8_t d[PFS_DIGEST_LEN])
{
	uint64_t h = digest_hash(d);

	for (struct hnode *n = htab_first(&s->by_digest, h); n; n = htab_next(n, h)) {
		struct chunk *c = container_of(n, struct chunk, hn);
		if (memcmp(c->digest, d, PFS_DIGEST_LEN) == 0)
			return c;
	}
	return NULL;
}

/* The least recently used chunk that nobody uses (the LRU also holds
 * chunks being sent to peers: at most PEERSRV_CONNS are skipped), or
 * NULL. */
static struct chunk *victim(struct cstore *s)
{
	struct chunk *c;

	TAILQ_FOREACH(c, &s->lru, lru)
		if (c->refs == 0)
			return c;
	return NULL;
}

/* A reference for this mount's own use: the chunk leaves the LRU, and
 * goes back at its most recent end when unreferenced. */
static void ref(struct cstore *s, struct chunk *c)
{
	if (c->in_lru) {
		TAILQ_REMOVE(&s->lru, c, lru);
		c->in_lru = false;
	}
	c->refs++;
}

/* Takes c out of the index and the memory count (it is CK_FAILED, or
 * evicted); freed now if unreferenced. */
static void unindex(struct cstore *s, struct chunk *c)
{
	s->gone[s->ngone++ % CSTORE_GONE] = digest_hash(c->digest);
	htab_remove(&s->by_digest, &c->hn);
	if (c->in_lru) {
		TAILQ_REMOVE(&s->lru, c, lru);
		c->in_lru = false;
	}
	s->bytes -= c->len;
	s->nchunks--;
	if (c->refs == 0)
		chunk_free(c);
}

/* Whether a reader of chunk index of fh may use c: anyone once it is
 * checked (CK_READY); before, only a reader of the same chunk of the same
 * file, since its slots are READ through the file of whoever claims them
 * (cstore_claim), and a peer fetch that fails leaves them to be READ so:
 * another file or chunk with the same digest (a run of zeros) would read
 * one file's bytes as another's. Caller holds s->mu. */
static bool shares(const struct chunk *c, const struct pfs_fh *fh, uint64_t index)
{
	return c->mode == CK_READY || (c->index == index && pfs_fh_equal(&c->fh, fh));
}

struct chunk *cstore_find(struct cstore *s, const uint8_t d[PFS_DIGEST_LEN],
			  const struct pfs_fh *fh, uint64_t index)
{
	pthread_mutex_lock(&s->mu);
	struct chunk *c = find(s, d);
	if (c && fh && !shares(c, fh, index))
		c = NULL;
	if (c)
		ref(s, c);
	pthread_mutex_unlock(&s->mu);
	return c;
}

struct chunk *cstore_make(struct cstore *s, const uint8_t d[PFS_DIGEST_LEN], uint32_t len,
			  enum ck_mode mode, const struct pfs_fh *fh, uint64_t index,
			  bool *created, struct cstore_gone *gone, unsigned *ngone)
{
	struct chunk *c;

	*created = false;
	*ngone = 0;
	if (len == 0 || len > (1u << PFS_CHUNK_SHIFT_MAX) || (mode != CK_PEER && mode != CK_COORD))
		return NULL;
	pthread_mutex_lock(&s->mu);
	c = find(s, d);
	if (c) {
		if (shares(c, fh, index))
			ref(s, c);
		else
			c = NULL; /* read the usual way, until it is checked */
		goto out;
	}
	struct chunk *old;
	while (s->bytes + len > s->max_bytes && (old = victim(s))) {
		if (*ngone < CSTORE_GONE_MAX) {
			gone[*ngone].fh = old->fh;
			gone[*ngone].index = old->index;
			memcpy(gone[*ngone].digest, old->digest, PFS_DIGEST_LEN);
			(*ngone)++;
		}
		s->evicted++;
		unindex(s, old);
	}
	if (s->bytes + len > s->max_bytes) {
		s->no_room++;
		goto out;
	}
	c = calloc(1, sizeof(*c));
	if (c && !(c->data = chunk_data_alloc(len))) {
		free(c);
		c = NULL;
	}
	if (!c) {
		s->no_room++;
		goto out;
	}
	memcpy(c->digest, d, PFS_DIGEST_LEN);
	c->len = len;
	c->fh = *fh;
	c->index = index;
	c->nslots = (len + CSTORE_SLOT - 1) / CSTORE_SLOT;
	c->mode = mode;
	c->refs = 1;
	htab_insert(&s->by_digest, &c->hn, digest_hash(d));
	s->bytes += len;
	s->nchunks++;
	*created = true;
	pthread_cond_broadcast(&s->cv); /* a peer may wait for it (cstore_serve) */
out:
	pthread_mutex_unlock(&s->mu);
	return c;
}

/* Drops a reference (s->mu held). */
static void unref(struct cstore *s, struct chunk *c)
{
	if (--c->refs > 0)
		return;
	if (c->in_lru)
		return; /* only peers used it: it keeps its place (cstore_serve) */
	if (c->mode == CK_FAILED) {
		chunk_free(c);
	} else if (c->mode == CK_READY) {
		TAILQ_INSERT_TAIL(&s->lru, c, lru);
		c->in_lru = true;
	} else {
		/* Unreferenced while being filled: its owner is gone (it holds
		 * a reference until it says how the chunk ended). Nobody will
		 * finish it. */
		c->mode = CK_FAILED;
		unindex(s, c);
		pthread_cond_broadcast(&s->cv);
	}
}

void cstore_put(struct cstore *s, struct chunk *c)
{
	pthread_mutex_lock(&s->mu);
	unref(s, c);
	pthread_mutex_unlock(&s->mu);
}

/* Waits on s->cv until deadline (-1: none); false once it passed. */
static bool wait_until(struct cstore *s, int64_t deadline)
{
	if (deadline < 0) {
		pthread_cond_wait(&s->cv, &s->mu);
		return true;
	}
	int64_t left = deadline - pfs_mono_ms();
	if (left <= 0)
		return false;
	struct timespec ts = pfs_deadline_ns(left * 1000000);
	pthread_cond_timedwait(&s->cv, &s->mu, &ts);
	return true;
}

int cstore_wait(struct cstore *s, struct chunk *c, int64_t deadline)
{
	int ret;

	pthread_mutex_lock(&s->mu);
	while (c->mode == CK_PEER && wait_until(s, deadline))
		;
	ret = c->mode == CK_PEER ? -ETIMEDOUT : (int)c->mode;
	pthread_mutex_unlock(&s->mu);
	return ret;
}

void cstore_set_mode(struct cstore *s, struct chunk *c, enum ck_mode mode)
{
	pthread_mutex_lock(&s->mu);
	if (c->mode != CK_FAILED && c->mode != CK_READY) {
		if (mode == CK_COORD) {
			c->filled = 0;
			c->claimed = 0;
		}
		c->mode = mode;
		if (mode == CK_FAILED)
			unindex(s, c); /* referenced: freed at its last put */
	}
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

int cstore_claim(struct cstore *s, struct chunk *c, unsigned first, unsigned last,
		 uint64_t *mine, int64_t deadline)
{
	int ret = 0;

	if (last >= c->nslots)
		last = c->nslots - 1;
	pthread_mutex_lock(&s->mu);
	for (;;) {
		bool waiting = false;
		uint64_t want = 0;
		if (c->mode != CK_COORD) {
			ret = c->mode == CK_PEER ? -ETIMEDOUT : (int)c->mode;
			if (c->mode == CK_PEER && wait_until(s, deadline))
				continue;
			break;
		}
		/* All or nothing: a thread that kept some slots while it
		 * waited for others could wait for one that waits for it. */
		for (unsigned i = first; i <= last && !waiting; i++) {
			uint64_t b = 1ull << i;
			if ((c->filled | *mine) & b)
				continue;
			if (c->claimed & b)
				waiting = true;
			else
				want |= b;
		}
		if (!waiting) {
			c->claimed |= want;
			*mine |= want;
			ret = 0;
			break;
		}
		if (!wait_until(s, deadline)) {
			ret = -ETIMEDOUT;
			break;
		}
	}
	pthread_mutex_unlock(&s->mu);
	return ret;
}

void cstore_filled(struct cstore *s, struct chunk *c, unsigned slot, bool ok)
{
	uint64_t b = 1ull << slot;

	pthread_mutex_lock(&s->mu);
	c->claimed &= ~b;
	if (ok)
		c->filled |= b;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

bool cstore_complete(struct cstore *s, struct chunk *c)
{
	uint64_t all = c->nslots == 64 ? ~0ull : (1ull << c->nslots) - 1;

	pthread_mutex_lock(&s->mu);
	bool done = c->mode == CK_READY || (c->filled & all) == all;
	pthread_mutex_unlock(&s->mu);
	return done;
}

/* Whether a chunk of digest d was dropped lately (s->mu held). */
static bool gone_lately(const struct cstore *s, const uint8_t d[PFS_DIGEST_LEN])
{
	uint64_t h = digest_hash(d);
	unsigned n = s->ngone < CSTORE_GONE ? s->ngone : CSTORE_GONE;

	for (unsigned i = 0; i < n; i++)
		if (s->gone[i] == h)
			return true;
	return false;
}

struct chunk *cstore_serve(struct cstore *s, const uint8_t d[PFS_DIGEST_LEN], int64_t deadline)
{
	int64_t absent = pfs_mono_ms() + CSTORE_ABSENT_MS;
	struct chunk *c;

	if (absent > deadline)
		absent = deadline;
	pthread_mutex_lock(&s->mu);
	for (;;) {
		c = find(s, d);
		if (s->closing) {
			c = NULL;
			break;
		}
		if (!c) {
			/* The coordinator may have named this mount a moment
			 * before the mount learnt of the chunk itself (its CHUNK
			 * reply is on its way): wait a little for it to appear,
			 * unless it was here and went. */
			if (gone_lately(s, d)) {
				s->miss_gone++;
				break;
			}
			if (!wait_until(s, absent)) {
				s->miss_absent++;
				break;
			}
			continue;
		}
		if (c->mode == CK_READY)
			break;
		/* Being filled here: wait for it, holding a reference so that
		 * it cannot be freed under us. */
		ref(s, c);
		bool more = wait_until(s, deadline);
		unref(s, c);
		if (!more) {
			s->miss_late++;
			c = NULL;
			break;
		}
	}
	/* Sending it to a peer is no use here: a chunk this mount read a
	 * while ago and serves often must not outlive the newest ones, which
	 * nobody else may hold yet (the first reader of a file would drop
	 * them before its followers came to ask). */
	if (c)
		c->refs++;
	pthread_mutex_unlock(&s->mu);
	return c;
}

void cstore_close(struct cstore *s)
{
	pthread_mutex_lock(&s->mu);
	s->closing = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

/* --- recent answers --- */

static struct recent *recent_find(struct cstore *s, uint64_t fkey, uint64_t index)
{
	uint64_t h = recent_hash(fkey, index);

	for (struct hnode *n = htab_first(&s->recent, h); n; n = htab_next(n, h)) {
		struct recent *r = container_of(n, struct recent, hn);
		if (r->fkey == fkey && r->index == index)
			return r;
	}
	return NULL;
}

void cstore_recent_put(struct cstore *s, uint64_t fkey, uint64_t index, uint64_t ver,
		       const uint8_t d[PFS_DIGEST_LEN], uint32_t len, uint64_t seq)
{
	pthread_mutex_lock(&s->mu);
	struct recent *r = recent_find(s, fkey, index);
	if (r) {
		TAILQ_REMOVE(&s->rorder, r, order);
	} else if (s->recent.n >= CSTORE_RECENT) {
		r = TAILQ_FIRST(&s->rorder);
		TAILQ_REMOVE(&s->rorder, r, order);
		htab_remove(&s->recent, &r->hn);
		r->fkey = fkey;
		r->index = index;
		htab_insert(&s->recent, &r->hn, recent_hash(fkey, index));
	} else if ((r = calloc(1, sizeof(*r)))) {
		r->fkey = fkey;
		r->index = index;
		htab_insert(&s->recent, &r->hn, recent_hash(fkey, index));
	}
	if (r) {
		memcpy(r->digest, d, PFS_DIGEST_LEN);
		r->len = len;
		r->seq = seq;
		r->ver = ver;
		TAILQ_INSERT_TAIL(&s->rorder, r, order);
	}
	pthread_mutex_unlock(&s->mu);
}

bool cstore_recent_get(struct cstore *s, uint64_t fkey, uint64_t index, uint64_t ver,
		       uint8_t d[PFS_DIGEST_LEN], uint32_t *len, uint64_t *seq)
{
	pthread_mutex_lock(&s->mu);
	struct recent *r = recent_find(s, fkey, index);
	if (r && r->ver != ver)
		r = NULL;
	if (r) {
		memcpy(d, r->digest, PFS_DIGEST_LEN);
		*len = r->len;
		*seq = r->seq;
	}
	pthread_mutex_unlock(&s->mu);
	return r != NULL;
}

static struct asking **asking_find(struct cstore *s, uint64_t fkey, uint64_t index)
{
	struct asking **a = &s->asking;

	while (*a && ((*a)->fkey != fkey || (*a)->index != index))
		a = &(*a)->next;
	return a;
}

bool cstore_ask_begin(struct cstore *s, uint64_t fkey, uint64_t index, int64_t deadline)
{
	bool waited = false, ask = true;

	pthread_mutex_lock(&s->mu);
	while (*asking_find(s, fkey, index)) {
		waited = true;
		if (!wait_until(s, deadline))
			break;
	}
	if (!*asking_find(s, fkey, index) && waited) {
		ask = false;
	} else if (!*asking_find(s, fkey, index)) {
		struct asking *a = malloc(sizeof(*a));
		if (a) {
			*a = (struct asking){ .fkey = fkey, .index = index, .next = s->asking };
			s->asking = a;
		}
	}
	pthread_mutex_unlock(&s->mu);
	return ask;
}

void cstore_ask_done(struct cstore *s, uint64_t fkey, uint64_t index)
{
	pthread_mutex_lock(&s->mu);
	struct asking **a = asking_find(s, fkey, index), *gone = *a;
	if (gone) {
		*a = gone->next;
		free(gone);
	}
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

void cstore_stats(struct cstore *s, struct cstore_stats *st)
{
	pthread_mutex_lock(&s->mu);
	st->bytes = s->bytes;
	st->chunks = s->nchunks;
	st->max_bytes = s->max_bytes;
	st->evicted = s->evicted;
	st->no_room = s->no_room;
	st->miss_gone = s->miss_gone;
	st->miss_absent = s->miss_absent;
	st->miss_late = s->miss_late;
	pthread_mutex_unlock(&s->mu);
}
