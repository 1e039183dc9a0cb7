/* chunks.c: chunk digests and holders for peer-assisted reads (see
 * chunks_i.h). */
#include "chunks_i.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "podfs/hash.h"
#include "podfs/htab.h"
#include "podfs/xalloc.h"
#include "idtab_i.h"

enum { D_NONE, D_TAKING, D_KNOWN };       /* a chunk's digest */
enum { H_FETCHING = 1, H_HOLDING = 2 };  /* a holder record */

struct holder {
	uint16_t peer;        /* its peer number */
	uint16_t src;         /* the peer it was sent to; CHUNKS_NO_PEER: the coordinator */
	uint32_t pgen;        /* the peer's generation when recorded */
	uint32_t since;       /* ms: listed as fetching then */
	uint32_t assigned_at; /* ms: the last client sent to it */
	uint16_t assigned;    /* clients sent to it and not yet reported */
	uint8_t state;
	uint8_t depth;
};

struct hlist {
	unsigned n;
	struct holder h[CHUNKS_HOLDERS];
};

struct cfile {
	struct hnode hn;           /* t->files, by key */
	TAILQ_ENTRY(cfile) lru;    /* t->lru, most recently used first */
	uint64_t key;
	struct chunk_ver v;
	uint64_t nchunks;
	uint8_t (*digest)[PFS_DIGEST_LEN];
	uint8_t *st;               /* D_* per chunk */
	struct hlist **hl;         /* per chunk, NULL until a record */
	size_t bytes;              /* counted in t->bytes while linked */
	unsigned pins;             /* tickets out */
	bool linked;               /* in t->files; else freed at the last unpin */
};

struct peer {
	struct hnode hn;           /* t->peer_ids, by client_id, while used */
	uint64_t client_id;
	uint32_t gen;              /* bumped each time the number is given out */
	bool used, away;
	uint8_t addr[16];
	uint8_t alen;
	uint16_t port;
	unsigned strikes;
	uint64_t strike_at, bad_until; /* ms */
	uint64_t strike_key, strike_index; /* the chunk of the last strike */
	unsigned nrec;
};

struct chunks {
	struct chunks_conf conf;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* a digest was taken or given up */
	struct htab files;
	TAILQ_HEAD(cfile_lru, cfile) lru;
	size_t bytes;
	struct htab peer_ids;
	struct peer peers[CHUNKS_PEERS];
	struct chunks_stats st;
};

struct chunks *chunks_new(const struct chunks_conf *conf)
{
	struct chunks *t = xcalloc(1, sizeof(*t));

	t->conf = *conf;
	if (t->conf.fanout < 1)
		t->conf.fanout = 1;
	pthread_mutex_init(&t->mu, NULL);
	pthread_cond_init(&t->cv, NULL);
	htab_init(&t->files);
	htab_init(&t->peer_ids);
	TAILQ_INIT(&t->lru);
	return t;
}

static void file_free(struct cfile *f)
{
	if (f->hl) {
		for (uint64_t i = 0; i < f->nchunks; i++)
			free(f->hl[i]);
	}
	free(f->hl);
	free(f->digest);
	free(f->st);
	free(f);
}

void chunks_free(struct chunks *t)
{
	struct hnode *n;

	if (!t)
		return;
	while ((n = htab_pop(&t->files)))
		file_free(container_of(n, struct cfile, hn));
	htab_fini(&t->files);
	htab_fini(&t->peer_ids);
	pthread_cond_destroy(&t->cv);
	pthread_mutex_destroy(&t->mu);
	free(t);
}

const struct chunks_conf *chunks_conf(const struct chunks *t)
{
	return &t->conf;
}

static bool ver_eq(const struct chunk_ver *a, const struct chunk_ver *b)
{
	return a->ino == b->ino && a->size == b->size && a->mtime_s == b->mtime_s &&
	       a->ctime_s == b->ctime_s && a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns;
}

/* --- holder records (t->mu held) --- */

/* Whether record h still names a live peer and, fetching, is not stale. */
static bool rec_live(const struct chunks *t, const struct holder *h, uint64_t now)
{
	const struct peer *p = &t->peers[h->peer];

	if (!p->used || p->gen != h->pgen)
		return false;
	return h->state == H_HOLDING || (uint32_t)((uint32_t)now - h->since) <= t->conf.fetch_ms;
}

static struct holder *rec_find(struct hlist *l, int peer)
{
	for (unsigned i = 0; l && i < l->n; i++)
		if (l->h[i].peer == peer)
			return &l->h[i];
	return NULL;
}

/* One client fewer fetches from peer src in list l. */
static void rec_unassign(struct hlist *l, unsigned src)
{
	struct holder *s = src == CHUNKS_NO_PEER ? NULL : rec_find(l, (int)src);

	if (s && s->assigned > 0)
		s->assigned--;
}

/* Removes record i of l: its source serves one client fewer. */
static void rec_del(struct chunks *t, struct hlist *l, unsigned i)
{
	struct holder h = l->h[i];

	if (t->peers[h.peer].nrec > 0 && t->peers[h.peer].gen == h.pgen)
		t->peers[h.peer].nrec--;
	l->h[i] = l->h[--l->n];
	if (h.state == H_FETCHING)
		rec_unassign(l, h.src);
}

/* Lists peer as state in chunk i of f; false if there is no room. */
static bool rec_add(struct chunks *t, struct cfile *f, uint64_t i, int peer, uint8_t state,
		    unsigned depth, unsigned src, uint64_t now)
{
	struct peer *p = &t->peers[peer];
	struct hlist *l = f->hl[i];

	if (p->nrec >= t->conf.per_peer || (l && l->n >= CHUNKS_HOLDERS))
		return false;
	if (!l) {
		l = f->hl[i] = xcalloc(1, sizeof(*l));
		f->bytes += sizeof(*l);
		t->bytes += sizeof(*l);
	}
	l->h[l->n++] = (struct holder){
		.peer = (uint16_t)peer,
		.src = (uint16_t)src,
		.pgen = p->gen,
		.since = (uint32_t)now,
		.state = state,
		.depth = depth > 255 ? 255 : (uint8_t)depth,
	};
	p->nrec++;
	return true;
}

/* Drops l's records that name dead peers or stale fetches. */
static void rec_purge(struct chunks *t, struct hlist *l, uint64_t now)
{
	for (unsigned i = 0; l && i < l->n;) {
		if (rec_live(t, &l->h[i], now))
			i++;
		else
			rec_del(t, l, i);
	}
}

/* --- files (t->mu held) --- */

static void file_unpin(struct chunks *t, struct cfile *f)
{
	if (--f->pins == 0 && !f->linked)
		file_free(f);
}

/* Takes f out of the table (its records with it); freed now, or at its
 * last unpin. */
static void file_unlink(struct chunks *t, struct cfile *f)
{
	for (uint64_t i = 0; i < f->nchunks; i++) {
		struct hlist *l = f->hl[i];
		while (l && l->n)
			rec_del(t, l, l->n - 1);
		free(l);
		f->hl[i] = NULL;
	}
	htab_remove(&t->files, &f->hn);
	TAILQ_REMOVE(&t->lru, f, lru);
	t->bytes -= f->bytes;
	f->linked = false;
	if (f->pins == 0)
		file_free(f);
}

static struct cfile *file_find(struct chunks *t, uint64_t key)
{
	uint64_t h = pfs_hash_u64(key);

	for (struct hnode *n = htab_first(&t->files, h); n; n = htab_next(n, h))
		if (container_of(n, struct cfile, hn)->key == key)
			return container_of(n, struct cfile, hn);
	return NULL;
}

/* The entry of key at version v, made (replacing another version) if
 * needed; NULL if the file is not served in chunks. */
static struct cfile *file_get(struct chunks *t, uint64_t key, const struct chunk_ver *v)
{
	struct cfile *f = file_find(t, key);
	uint64_t n;
	size_t bytes;

	if (f && ver_eq(&f->v, v)) {
		TAILQ_REMOVE(&t->lru, f, lru);
		TAILQ_INSERT_HEAD(&t->lru, f, lru);
		return f;
	}
	if (f) {
		file_unlink(t, f);
		t->st.drops++;
	}
	if (v->size < t->conf.min_size || v->size == 0)
		return NULL;
	n = ((v->size - 1) >> t->conf.shift) + 1;
	/* Its digests alone may take at most half the table. */
	if (n > (t->conf.max_bytes / 2 - sizeof(*f)) / (PFS_DIGEST_LEN + 1 + sizeof(void *)))
		return NULL;
	bytes = sizeof(*f) + (size_t)n * (PFS_DIGEST_LEN + 1 + sizeof(void *));
	while (t->bytes + bytes > t->conf.max_bytes && !TAILQ_EMPTY(&t->lru)) {
		file_unlink(t, TAILQ_LAST(&t->lru, cfile_lru));
		t->st.evictions++;
	}
	f = xcalloc(1, sizeof(*f));
	f->key = key;
	f->v = *v;
	f->nchunks = n;
	f->digest = xcalloc((size_t)n, PFS_DIGEST_LEN);
	f->st = xcalloc((size_t)n, 1);
	f->hl = xcalloc((size_t)n, sizeof(*f->hl));
	f->bytes = bytes;
	f->linked = true;
	t->bytes += bytes;
	htab_insert(&t->files, &f->hn, pfs_hash_u64(key));
	TAILQ_INSERT_HEAD(&t->lru, f, lru);
	return f;
}

void chunks_drop(struct chunks *t, uint64_t key)
{
	pthread_mutex_lock(&t->mu);
	struct cfile *f = file_find(t, key);
	if (f) {
		file_unlink(t, f);
		t->st.drops++;
		pthread_cond_broadcast(&t->cv);
	}
	pthread_mutex_unlock(&t->mu);
}

void chunks_drop_all(struct chunks *t)
{
	pthread_mutex_lock(&t->mu);
	while (!TAILQ_EMPTY(&t->lru)) {
		file_unlink(t, TAILQ_FIRST(&t->lru));
		t->st.drops++;
	}
	pthread_cond_broadcast(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

/* --- digests --- */

int chunks_digest(struct chunks *t, uint64_t key, const struct chunk_ver *v, uint64_t index,
		  uint8_t out[PFS_DIGEST_LEN], struct chunk_ticket *tk)
{
	int ret;

	pthread_mutex_lock(&t->mu);
	for (;;) {
		struct cfile *f = file_get(t, key, v);
		if (!f) {
			ret = -EOPNOTSUPP;
			break;
		}
		if (index >= f->nchunks) {
			ret = -ERANGE;
			break;
		}
		if (f->st[index] == D_KNOWN) {
			memcpy(out, f->digest[index], PFS_DIGEST_LEN);
			ret = 0;
			break;
		}
		if (f->st[index] == D_NONE) {
			f->st[index] = D_TAKING;
			f->pins++;
			tk->f = f;
			tk->index = index;
			tk->off = index << t->conf.shift;
			uint64_t left = v->size - tk->off;
			tk->len = (uint32_t)(left < (1ull << t->conf.shift) ? left : 1ull << t->conf.shift);
			ret = 1;
			break;
		}
		/* Another thread takes it: wait, then look again (the file
		 * may have changed meanwhile). */
		pthread_cond_wait(&t->cv, &t->mu);
	}
	pthread_mutex_unlock(&t->mu);
	return ret;
}

int chunks_digest_done(struct chunks *t, struct chunk_ticket *tk, const uint8_t *d,
		       const struct chunk_ver *after)
{
	struct cfile *f = tk->f;
	int ret = -EAGAIN;

	pthread_mutex_lock(&t->mu);
	if (f->linked) {
		if (d && ver_eq(&f->v, after)) {
			memcpy(f->digest[tk->index], d, PFS_DIGEST_LEN);
			f->st[tk->index] = D_KNOWN;
			t->st.digests++;
			t->st.digest_bytes += tk->len;
			ret = 0;
		} else {
			f->st[tk->index] = D_NONE;
			if (d) { /* it changed while read: this version is over */
				file_unlink(t, f);
				t->st.drops++;
			}
		}
	}
	tk->f = NULL;
	file_unpin(t, f);
	pthread_cond_broadcast(&t->cv);
	pthread_mutex_unlock(&t->mu);
	return ret;
}

/* --- where to get a chunk --- */

/* The chunk's holder list if d is its current digest (t->mu held). */
static struct cfile *file_current(struct chunks *t, uint64_t key, const struct chunk_ver *v,
				  uint64_t index, const uint8_t d[PFS_DIGEST_LEN])
{
	struct cfile *f = file_find(t, key);

	if (!f || (v && !ver_eq(&f->v, v)) || index >= f->nchunks || f->st[index] != D_KNOWN ||
	    memcmp(f->digest[index], d, PFS_DIGEST_LEN) != 0)
		return NULL;
	return f;
}

/* How many clients h serves now: its count, unless its last one was
 * sent longer ago than a fetch may take (clients that never reported). */
static unsigned assigned_now(const struct chunks *t, const struct holder *h, uint64_t now)
{
	if ((uint32_t)((uint32_t)now - h->assigned_at) > t->conf.fetch_ms)
		return 0;
	return h->assigned;
}

/* Whether a is a better source than b (b may be NULL). */
static bool better(const struct chunks *t, const struct holder *a, const struct holder *b,
		   uint64_t now)
{
	if (!b)
		return true;
	if (a->state != b->state)
		return a->state == H_HOLDING;
	if (a->state == H_FETCHING && a->depth != b->depth)
		return a->depth < b->depth;
	unsigned na = assigned_now(t, a, now), nb = assigned_now(t, b, now);
	if (na != nb)
		return na < nb;
	/* Holders as busy as each other: the one that got the chunk last,
	 * which keeps it longest (a client drops its least recently used
	 * chunks first; the first to get it, ahead of the others, drops it
	 * first, and a client behind sent there would find it gone). */
	return a->state == H_HOLDING && (int32_t)(a->since - b->since) > 0;
}

int chunks_choose(struct chunks *t, uint64_t key, const struct chunk_ver *v, uint64_t index,
		  const uint8_t d[PFS_DIGEST_LEN], int requester, bool lost, uint64_t now_ms,
		  struct chunk_source *out)
{
	struct holder *best = NULL;

	memset(out, 0, sizeof(*out));
	out->peer = CHUNKS_NO_PEER;
	pthread_mutex_lock(&t->mu);
	struct cfile *f = file_current(t, key, v, index, d);
	if (!f) {
		pthread_mutex_unlock(&t->mu);
		return -EAGAIN;
	}
	struct hlist *l = f->hl[index];
	rec_purge(t, l, now_ms);
	struct holder *mine = requester >= 0 ? rec_find(l, requester) : NULL;
	if (mine && !lost) {
		out->kind = PFS_CK_HELD;
		t->st.held++;
		pthread_mutex_unlock(&t->mu);
		return 0;
	}
	if (mine)
		rec_del(t, l, (unsigned)(mine - l->h));
	for (unsigned i = 0; l && i < l->n; i++) {
		struct holder *h = &l->h[i];
		const struct peer *p = &t->peers[h->peer];
		if (h->peer == requester || p->away || p->bad_until > now_ms ||
		    assigned_now(t, h, now_ms) >= t->conf.fanout)
			continue;
		if (better(t, h, best, now_ms))
			best = h;
	}
	unsigned depth = 0, src = CHUNKS_NO_PEER;
	if (best) {
		const struct peer *p = &t->peers[best->peer];
		best->assigned = (uint16_t)(assigned_now(t, best, now_ms) + 1);
		best->assigned_at = (uint32_t)now_ms;
		out->kind = PFS_CK_PEER;
		out->peer = best->peer;
		out->gen = p->gen;
		memcpy(out->addr, p->addr, p->alen);
		out->alen = p->alen;
		out->port = p->port;
		depth = best->depth + 1u;
		src = best->peer;
		t->st.to_peer++;
	} else {
		out->kind = PFS_CK_SERVER;
		t->st.to_server++;
	}
	/* best may move in the list as the requester is added: not used
	 * after this. */
	if (requester >= 0 && !rec_add(t, f, index, requester, H_FETCHING, depth, src, now_ms) &&
	    best)
		rec_unassign(f->hl[index], src); /* no record to end the fetch: count it done */
	pthread_mutex_unlock(&t->mu);
	return 0;
}

/* A peer did not deliver chunk index of key: three strikes within
 * CHUNKS_STRIKE_MS and it is not offered for CHUNKS_BAD_MS. The clients
 * sent to it for one chunk at once fail together: that chunk is one
 * strike, however many report it. */
static void strike(struct peer *p, uint64_t key, uint64_t index, uint64_t now)
{
	if (p->strikes == 0 || now - p->strike_at > CHUNKS_STRIKE_MS) {
		p->strikes = 0;
		p->strike_at = now;
	} else if (p->strike_key == key && p->strike_index == index) {
		return;
	}
	p->strike_key = key;
	p->strike_index = index;
	if (++p->strikes >= CHUNKS_STRIKES) {
		p->strikes = 0;
		p->bad_until = now + CHUNKS_BAD_MS;
	}
}

void chunks_report(struct chunks *t, uint64_t key, uint64_t index,
		   const uint8_t d[PFS_DIGEST_LEN], int requester, uint32_t status, uint32_t peer,
		   uint32_t gen, uint64_t now_ms)
{
	pthread_mutex_lock(&t->mu);
	bool src_live = peer < CHUNKS_PEERS && t->peers[peer].used && t->peers[peer].gen == gen;
	struct cfile *f = file_current(t, key, NULL, index, d);
	if (!f)
		goto out;
	struct hlist *l = f->hl[index];
	struct holder *mine = requester >= 0 ? rec_find(l, requester) : NULL;
	/* Only a client sent to that peer for this chunk may say it failed:
	 * any other could strike out every honest peer in turn. */
	bool was_sent = mine && mine->state == H_FETCHING && mine->src == peer;
	if (status & PFS_CKR_HAVE)
		t->st.reports_have++;
	if (status & PFS_CKR_PEER_BAD)
		t->st.reports_bad++;
	/* The fetch is over: its source serves one client fewer. */
	if (mine && mine->state == H_FETCHING) {
		rec_unassign(l, mine->src);
		mine->src = CHUNKS_NO_PEER;
	} else if (!mine && src_live) {
		rec_unassign(l, peer);
	}
	if (status & PFS_CKR_HAVE) {
		if (mine) {
			mine->state = H_HOLDING;
		} else if (requester >= 0) {
			struct holder *s = src_live ? rec_find(l, (int)peer) : NULL;
			rec_add(t, f, index, requester, H_HOLDING, s ? s->depth + 1u : 0,
				CHUNKS_NO_PEER, now_ms);
		}
	} else if (mine) {
		rec_del(t, l, (unsigned)(mine - l->h));
	}
	if ((status & (PFS_CKR_PEER_BAD | PFS_CKR_PEER_MISSING)) && src_live && was_sent &&
	    (int)peer != requester) {
		struct holder *s = rec_find(f->hl[index], (int)peer);
		if (s)
			rec_del(t, f->hl[index], (unsigned)(s - f->hl[index]->h));
		if (status & PFS_CKR_PEER_BAD)
			strike(&t->peers[peer], key, index, now_ms);
	}
out:
	pthread_mutex_unlock(&t->mu);
}

/* --- peers --- */

static struct peer *peer_lookup(struct chunks *t, uint64_t client_id)
{
	uint64_t h = idtab_hash(client_id);

	for (struct hnode *n = htab_first(&t->peer_ids, h); n; n = htab_next(n, h))
		if (container_of(n, struct peer, hn)->client_id == client_id)
			return container_of(n, struct peer, hn);
	return NULL;
}

int chunks_peer_set(struct chunks *t, uint64_t client_id, const uint8_t *addr, size_t alen,
		    uint16_t port)
{
	struct peer *p;
	int ret = -1;

	if (port == 0 || (alen != 4 && alen != 16))
		return -1;
	pthread_mutex_lock(&t->mu);
	p = peer_lookup(t, client_id);
	for (unsigned i = 0; !p && i < CHUNKS_PEERS; i++) {
		if (t->peers[i].used)
			continue;
		p = &t->peers[i];
		p->used = true;
		p->gen++;
		p->client_id = client_id;
		p->strikes = 0;
		p->bad_until = 0;
		p->nrec = 0;
		htab_insert(&t->peer_ids, &p->hn, idtab_hash(client_id));
		t->st.peers++;
	}
	if (p) {
		memcpy(p->addr, addr, alen);
		p->alen = (uint8_t)alen;
		p->port = port;
		p->away = false;
		ret = (int)(p - t->peers);
	}
	pthread_mutex_unlock(&t->mu);
	return ret;
}

int chunks_peer_find(struct chunks *t, uint64_t client_id)
{
	pthread_mutex_lock(&t->mu);
	struct peer *p = peer_lookup(t, client_id);
	int ret = p ? (int)(p - t->peers) : -1;
	pthread_mutex_unlock(&t->mu);
	return ret;
}

void chunks_peer_away(struct chunks *t, uint64_t client_id)
{
	pthread_mutex_lock(&t->mu);
	struct peer *p = peer_lookup(t, client_id);
	if (p)
		p->away = true;
	pthread_mutex_unlock(&t->mu);
}

void chunks_peer_gone(struct chunks *t, uint64_t client_id)
{
	size_t pos;

	pthread_mutex_lock(&t->mu);
	struct peer *p = peer_lookup(t, client_id);
	if (!p)
		goto out;
	int idx = (int)(p - t->peers);
	for (struct hnode *n = htab_iter(&t->files, &pos, NULL); n && p->nrec;
	     n = htab_iter(&t->files, &pos, n)) {
		struct cfile *f = container_of(n, struct cfile, hn);
		for (uint64_t i = 0; i < f->nchunks && p->nrec; i++) {
			struct holder *h = rec_find(f->hl[i], idx);
			if (h)
				rec_del(t, f->hl[i], (unsigned)(h - f->hl[i]->h));
		}
	}
	htab_remove(&t->peer_ids, &p->hn);
	p->used = false;
	p->nrec = 0;
	t->st.peers--;
out:
	pthread_mutex_unlock(&t->mu);
}

void chunks_stats(struct chunks *t, struct chunks_stats *st)
{
	pthread_mutex_lock(&t->mu);
	*st = t->st;
	st->files = t->files.n;
	st->bytes = t->bytes;
	st->records = 0;
	for (unsigned i = 0; i < CHUNKS_PEERS; i++)
		if (t->peers[i].used)
			st->records += t->peers[i].nrec;
	pthread_mutex_unlock(&t->mu);
}
