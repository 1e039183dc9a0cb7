/* drc.c: the duplicate request cache of one session (see drc_i.h). */
#include <stdlib.h>
#include <string.h>

#include "podfs/hash.h"
#include "podfs/xalloc.h"
#include "drc_i.h"

void drc_init(struct drc *c, size_t max)
{
	htab_init(&c->tab);
	c->oldest = c->newest = NULL;
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
	while (c->oldest) {
		struct drc_ent *e = c->oldest;
		c->oldest = e->newer;
		ent_free(e);
	}
	c->newest = NULL;
	c->n = 0;
	htab_fini(&c->tab);
}

struct drc_ent *drc_find(struct drc *c, uint64_t id)
{
	uint64_t h = pfs_hash_u64(id);

	for (struct hnode *n = htab_first(&c->tab, h); n; n = htab_next(n, h)) {
		struct drc_ent *e = container_of(n, struct drc_ent, hn);
		if (e->id == id)
			return e;
	}
	return NULL;
}

static void unlink_ent(struct drc *c, struct drc_ent *e)
{
	if (e->older)
		e->older->newer = e->newer;
	else
		c->oldest = e->newer;
	if (e->newer)
		e->newer->older = e->older;
	else
		c->newest = e->older;
	htab_remove(&c->tab, &e->hn);
	c->n--;
}

struct drc_ent *drc_begin(struct drc *c, uint64_t id, uint16_t op)
{
	struct drc_ent *e = xcalloc(1, sizeof(*e));

	e->id = id;
	e->op = op;
	e->older = c->newest;
	if (c->newest)
		c->newest->newer = e;
	else
		c->oldest = e;
	c->newest = e;
	htab_insert(&c->tab, &e->hn, pfs_hash_u64(id));
	c->n++;

	/* Forget the oldest finished replies; running ones stay. */
	for (struct drc_ent *o = c->oldest; o && c->n > c->max;) {
		struct drc_ent *next = o->newer;
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
