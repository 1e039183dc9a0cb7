/* drc.c: the duplicate request cache of the sessions (see drc_i.h). */
#include <stdlib.h>
#include <string.h>

#include "podfs/xalloc.h"
#include "drc_i.h"
#include "idtab_i.h"

/* --- the pool and its hosts --- */

void drc_pool_init(struct drc_pool *p, size_t max)
{
	memset(p, 0, sizeof(*p));
	p->max = max;
	TAILQ_INIT(&p->hosts);
}

void drc_host_add(struct drc_pool *p, struct drc_host *h)
{
	TAILQ_INIT(&h->done);
	h->bytes = 0;
	h->pool = p;
	TAILQ_INSERT_TAIL(&p->hosts, h, link);
}

void drc_host_remove(struct drc_host *h)
{
	TAILQ_REMOVE(&h->pool->hosts, h, link);
	h->pool = NULL;
}

/* --- one cache --- */

void drc_init(struct drc *c, size_t max, struct drc_host *h)
{
	htab_init(&c->tab);
	TAILQ_INIT(&c->lru);
	c->n = 0;
	c->max = max;
	c->host = h;
}

/* Takes e out of c, and its reply out of its host's and pool's bytes. */
static void unlink_ent(struct drc *c, struct drc_ent *e)
{
	TAILQ_REMOVE(&c->lru, e, lru);
	htab_remove(&c->tab, &e->hn);
	c->n--;
	if (e->done) {
		struct drc_host *h = c->host;
		TAILQ_REMOVE(&h->done, e, hlru);
		h->bytes -= DRC_COST(e->len);
		h->pool->bytes -= DRC_COST(e->len);
	}
}

static void ent_free(struct drc_ent *e)
{
	free(e->wire);
	free(e);
}

void drc_fini(struct drc *c)
{
	struct drc_ent *e;

	while ((e = TAILQ_FIRST(&c->lru))) {
		unlink_ent(c, e);
		ent_free(e);
	}
	htab_fini(&c->tab);
}

struct drc_ent *drc_find(struct drc *c, uint64_t id)
{
	return IDTAB_FIND(&c->tab, id, struct drc_ent, hn, id);
}

struct drc_ent *drc_begin(struct drc *c, uint64_t id, uint16_t op)
{
	struct drc_ent *e = xcalloc(1, sizeof(*e));

	e->c = c;
	e->id = id;
	e->op = op;
	TAILQ_INSERT_TAIL(&c->lru, e, lru);
	idtab_insert(&c->tab, &e->hn, id);
	c->n++;

	/* Forget the oldest finished replies; running ones stay. */
	for (struct drc_ent *o = TAILQ_FIRST(&c->lru); o && c->n > c->max;) {
		struct drc_ent *next = TAILQ_NEXT(o, lru);
		if (o->done) {
			unlink_ent(c, o);
			ent_free(o);
		}
		o = next;
	}
	return e;
}

/* The pool is over its budget: the oldest replies of the host that keeps
 * the most go, down to a little below the next host's bytes (an eighth
 * of them) so that one look at the hosts serves several replies, and to
 * 1/256 of the budget below it, where the next reply does not start over. */
static void pool_trim(struct drc_pool *p)
{
	while (p->bytes > p->max) {
		struct drc_host *h, *big = NULL;
		size_t second = 0;

		TAILQ_FOREACH(h, &p->hosts, link) {
			if (!big || h->bytes > big->bytes) {
				if (big)
					second = big->bytes;
				big = h;
			} else if (h->bytes > second) {
				second = h->bytes;
			}
		}
		size_t stop = second - second / 8, low = p->max - p->max / 256;
		struct drc_ent *e;
		while ((e = TAILQ_FIRST(&big->done))) {
			unlink_ent(e->c, e);
			ent_free(e);
			p->forgotten++;
			if (p->bytes <= low || big->bytes <= stop)
				break;
		}
	}
}

void drc_done(struct drc_ent *e, const uint8_t *hdr, const void *wire, size_t len, size_t raw)
{
	struct drc_host *h = e->c->host;

	memcpy(e->hdr, hdr, PFS_FRAME_HDR_SIZE);
	e->wire = len ? xmalloc(len) : NULL;
	if (len)
		memcpy(e->wire, wire, len);
	e->len = len;
	e->raw = raw;
	e->done = true;
	TAILQ_INSERT_TAIL(&h->done, e, hlru);
	h->bytes += DRC_COST(len);
	h->pool->bytes += DRC_COST(len);
	if (h->pool->bytes > h->pool->max)
		pool_trim(h->pool);
}

void drc_forget(struct drc *c, struct drc_ent *e)
{
	unlink_ent(c, e);
	ent_free(e);
}
