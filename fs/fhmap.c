/* fhmap.c: handles of a server whose handle secret changed (see fhmap_i.h). */
#include "fhmap_i.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "podfs/hash.h"
#include "podfs/htab.h"
#include "podfs/wire.h"

struct fhm_ent {
	struct hnode by_old; /* fwd, by the old handle's hash */
	struct hnode by_new; /* rev, by the new handle's hash */
	struct pfs_fh old, nh;
};

struct fhmap {
	pthread_mutex_t lock;
	struct htab fwd, rev;
	_Atomic size_t n;
};

static uint64_t fh_hash(const struct pfs_fh *fh)
{
	return pfs_hash_bytes(fh->data, fh->len, 0x66686d6170ull);
}

struct fhmap *fhmap_new(void)
{
	struct fhmap *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	pthread_mutex_init(&m->lock, NULL);
	htab_init(&m->fwd);
	htab_init(&m->rev);
	return m;
}

void fhmap_free(struct fhmap *m)
{
	struct hnode *n;

	if (!m)
		return;
	while ((n = htab_pop(&m->fwd)))
		free(container_of(n, struct fhm_ent, by_old));
	htab_fini(&m->fwd);
	htab_fini(&m->rev);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

/* Under m->lock. */
static struct fhm_ent *find_old(struct fhmap *m, const struct pfs_fh *old)
{
	uint64_t h = fh_hash(old);
	for (struct hnode *n = htab_first(&m->fwd, h); n; n = htab_next(n, h)) {
		struct fhm_ent *e = container_of(n, struct fhm_ent, by_old);
		if (pfs_fh_equal(&e->old, old))
			return e;
	}
	return NULL;
}

static struct fhm_ent *find_new(struct fhmap *m, const struct pfs_fh *nh)
{
	uint64_t h = fh_hash(nh);
	for (struct hnode *n = htab_first(&m->rev, h); n; n = htab_next(n, h)) {
		struct fhm_ent *e = container_of(n, struct fhm_ent, by_new);
		if (pfs_fh_equal(&e->nh, nh))
			return e;
	}
	return NULL;
}

static void drop(struct fhmap *m, struct fhm_ent *e)
{
	htab_remove(&m->fwd, &e->by_old);
	htab_remove(&m->rev, &e->by_new);
	atomic_fetch_sub(&m->n, 1);
	free(e);
}

int fhmap_put(struct fhmap *m, const struct pfs_fh *old, const struct pfs_fh *new_fh)
{
	struct fhm_ent *e = malloc(sizeof(*e));

	if (!e)
		return -ENOMEM;
	e->old = *old;
	e->nh = *new_fh;
	pthread_mutex_lock(&m->lock);
	struct fhm_ent *x = find_old(m, old);
	if (x)
		drop(m, x);
	/* One server handle names one object: a stale pairing goes. */
	x = find_new(m, new_fh);
	if (x)
		drop(m, x);
	htab_insert(&m->fwd, &e->by_old, fh_hash(old));
	htab_insert(&m->rev, &e->by_new, fh_hash(new_fh));
	atomic_fetch_add(&m->n, 1);
	pthread_mutex_unlock(&m->lock);
	return 0;
}

void fhmap_del(struct fhmap *m, const struct pfs_fh *old)
{
	if (atomic_load_explicit(&m->n, memory_order_relaxed) == 0)
		return;
	pthread_mutex_lock(&m->lock);
	struct fhm_ent *e = find_old(m, old);
	if (e)
		drop(m, e);
	pthread_mutex_unlock(&m->lock);
}

bool fhmap_get(struct fhmap *m, const struct pfs_fh *old, struct pfs_fh *out)
{
	if (atomic_load_explicit(&m->n, memory_order_acquire) == 0)
		return false;
	pthread_mutex_lock(&m->lock);
	struct fhm_ent *e = find_old(m, old);
	if (e)
		*out = e->nh;
	pthread_mutex_unlock(&m->lock);
	return e != NULL;
}

bool fhmap_rev(struct fhmap *m, const struct pfs_fh *nh, struct pfs_fh *out)
{
	if (atomic_load_explicit(&m->n, memory_order_acquire) == 0)
		return false;
	pthread_mutex_lock(&m->lock);
	struct fhm_ent *e = find_new(m, nh);
	if (e)
		*out = e->old;
	pthread_mutex_unlock(&m->lock);
	return e != NULL;
}

size_t fhmap_count(struct fhmap *m)
{
	return atomic_load(&m->n);
}

/* ---- rewriting a request ---- */

/* The handle fields of a request, found by walking its message's fields
 * with the codec's readers (codec.h: PFS_MSG_*). */
#define FHW_MAX 4
struct fhw {
	const uint8_t *base;
	size_t at[FHW_MAX]; /* offsets of the fh fields (their length byte) */
	size_t end[FHW_MAX];
	unsigned n;
};

#define FHW_SKIP(T)                                                                    \
	__attribute__((unused)) static bool fhw_##T(struct pfs_rd *r, struct fhw *w) \
	{                                                                               \
		pfs_t_##T v;                                                            \
		(void)w;                                                                \
		return pfs_get_##T(r, &v);                                              \
	}
FHW_SKIP(U8)
FHW_SKIP(U16)
FHW_SKIP(U32)
FHW_SKIP(U64)
FHW_SKIP(I64)
FHW_SKIP(NAME)
FHW_SKIP(PATH)
FHW_SKIP(XNAME)
FHW_SKIP(HOST)
FHW_SKIP(BYTES)
FHW_SKIP(CREDS)
FHW_SKIP(NONCE)
FHW_SKIP(MAC)
FHW_SKIP(DIGEST)
FHW_SKIP(ATTR)
FHW_SKIP(ENTRY)

static bool fhw_FH(struct pfs_rd *r, struct fhw *w)
{
	struct pfs_fh v;
	size_t at = (size_t)(r->p - w->base);

	if (!pfs_get_FH(r, &v) || w->n == FHW_MAX)
		return false;
	w->at[w->n] = at;
	w->end[w->n] = (size_t)(r->p - w->base);
	w->n++;
	return true;
}

#define FHW_FIELD(T, name) if (!fhw_##T(&r, w)) return false;
#define FHW_MSG(m)                                                          \
	__attribute__((unused)) static bool fhw_msg_##m(const uint8_t *p, size_t len, struct fhw *w) \
	{                                                                   \
		struct pfs_rd r;                                            \
		pfs_rd_init(&r, p, len);                                    \
		w->base = p;                                                \
		w->n = 0;                                                   \
		PFS_MSG_##m(FHW_FIELD)                                      \
		return true;                                                \
	}
PFS_MESSAGES(FHW_MSG)

static bool fhw_msg_none(const uint8_t *p, size_t len, struct fhw *w)
{
	(void)p;
	(void)len;
	w->n = 0;
	return false;
}

/* The fh fields of op's request into w (every opcode of wire.h's table,
 * by its request message); false if it has none or does not decode. */
static bool fhw_request(uint16_t op, const uint8_t *p, size_t len, struct fhw *w)
{
	switch (op) {
#define FHW_CASE(opname, v, req, ...) \
	case PFS_OP_##opname:         \
		return fhw_msg_##req(p, len, w) && w->n > 0;
		PFS_OPS(FHW_CASE)
#undef FHW_CASE
	default:
		return false;
	}
}

int fhmap_rewrite(struct fhmap *m, uint16_t op, const uint8_t *req, size_t len, uint8_t **out,
		  size_t *outlen)
{
	struct pfs_fh nh[FHW_MAX];
	bool hit[FHW_MAX] = { false };
	struct fhw w;
	bool any = false;

	if (atomic_load_explicit(&m->n, memory_order_acquire) == 0)
		return 0;
	if (!fhw_request(op, req, len, &w))
		return 0;
	for (unsigned i = 0; i < w.n; i++) {
		struct pfs_fh old;
		old.len = req[w.at[i]];
		memcpy(old.data, req + w.at[i] + 1, old.len);
		hit[i] = fhmap_get(m, &old, &nh[i]);
		any |= hit[i];
	}
	if (!any)
		return 0;
	uint8_t *buf = malloc(len + (size_t)w.n * (PFS_FH_MAX + 1) + 1);
	if (!buf)
		return -ENOMEM;
	size_t o = 0, from = 0;
	for (unsigned i = 0; i < w.n; i++) {
		if (!hit[i])
			continue;
		memcpy(buf + o, req + from, w.at[i] - from);
		o += w.at[i] - from;
		buf[o++] = nh[i].len;
		memcpy(buf + o, nh[i].data, nh[i].len);
		o += nh[i].len;
		from = w.end[i];
	}
	memcpy(buf + o, req + from, len - from);
	o += len - from;
	*out = buf;
	*outlen = o;
	return 1;
}
