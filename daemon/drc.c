/* drc.c: the duplicate request cache of one session (see drc_i.h). */
#include <stdlib.h>
#include <string.h>

#include "podfs/xalloc.h"
#include "drc_i.h"
#include "idtab_i.h"

void drc_init(struct drc *c, size_t max)
{
	htab_init(&c->tab);
	TAILQ_INIT(&c->lru);
	c->n = 0;
	c->max = max;
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
		TAILQ_REMOVE(&c->lru, e, lru);
		ent_free(e);
	}
	c->n = 0;
	htab_fini(&c->tab);
}

struct drc_ent *drc_find(struct drc *c, uint64_t id)
{
	return IDTAB_FIND(&c->tab, id, struct drc_ent, hn, id);
}

static void unlink_ent(struct drc *c, struct drc_ent *e)
{
	TAILQ_REMOVE(&c->lru, e, lru);
	htab_remove(&c->tab, &e->hn);
	c->n--;
}

struct drc_ent *drc_begin(struct drc *c, uint64_t id, uint16_t op)
{
	struct drc_ent *e = xcalloc(1, sizeof(*e));

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

void drc_done(struct drc_ent *e, const uint8_t *hdr, const void *wire, size_t len, size_t raw)
{
	memcpy(e->hdr, hdr, PFS_FRAME_HDR_SIZE);
	e->wire = len ? xmalloc(len) : NULL;
	if (len)
		memcpy(e->wire, wire, len);
	e->len = len;
	e->raw = raw;
	e->done = true;
}

void drc_forget(struct drc *c, struct drc_ent *e)
{
	unlink_ent(c, e);
	ent_free(e);
}
