/* rlslots.c: the replies file's slots, shared fairly between the hosts
 * (see rlslots_i.h). */
#include "rlslots_i.h"

#include <stdlib.h>

#include "podfs/xalloc.h"

/* Slot k at the end of the list head..tail (a host's or the free one). */
static void link_tail(struct rlslots *s, int32_t *head, int32_t *tail, uint32_t k)
{
	s->next[k] = -1;
	if (*tail >= 0)
		s->next[*tail] = (int32_t)k;
	else
		*head = (int32_t)k;
	*tail = (int32_t)k;
}

/* Slot k, held by none, at the end of the free list. */
static void free_append(struct rlslots *s, uint32_t k)
{
	link_tail(s, &s->free_head, &s->free_tail, k);
	s->nfree++;
}

void rlslots_init(struct rlslots *s, uint32_t n)
{
	s->n = n;
	s->next = xcalloc(n, sizeof(*s->next));
	s->owner = xcalloc(n, sizeof(*s->owner));
	s->free_head = s->free_tail = -1;
	s->nfree = 0;
	for (uint32_t k = 0; k < n; k++)
		free_append(s, k);
	s->holders = 0;
	TAILQ_INIT(&s->hosts);
}

void rlslots_fini(struct rlslots *s)
{
	free(s->next);
	free(s->owner);
	s->next = NULL;
	s->owner = NULL;
	s->n = 0;
}

void rlslots_host_add(struct rlslots *s, struct rlslots_host *h)
{
	h->head = h->tail = -1;
	h->n = 0;
	TAILQ_INSERT_TAIL(&s->hosts, h, link);
}

/* Slot k, free, into h's list as its newest. */
static void give(struct rlslots *s, struct rlslots_host *h, uint32_t k)
{
	s->owner[k] = h;
	link_tail(s, &h->head, &h->tail, k);
	if (h->n++ == 0)
		s->holders++;
}

/* h's oldest slot, out of its list (h holds one). */
static uint32_t oldest(struct rlslots *s, struct rlslots_host *h)
{
	uint32_t k = (uint32_t)h->head;

	h->head = s->next[k];
	if (h->head < 0)
		h->tail = -1;
	if (--h->n == 0)
		s->holders--;
	s->owner[k] = NULL;
	return k;
}

void rlslots_clear(struct rlslots *s, struct rlslots_host *h)
{
	while (h->n)
		free_append(s, oldest(s, h));
}

void rlslots_host_remove(struct rlslots *s, struct rlslots_host *h)
{
	rlslots_clear(s, h);
	TAILQ_REMOVE(&s->hosts, h, link);
}

bool rlslots_take(struct rlslots *s, struct rlslots_host *h, const uint32_t *slot, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		if (slot[i] >= s->n || s->owner[slot[i]])
			break;
		s->owner[slot[i]] = h; /* (marks it: a second time fails) */
	}
	if (i < n) {
		while (i--)
			s->owner[slot[i]] = NULL;
		return false;
	}
	for (i = 0; i < n; i++) {
		s->owner[slot[i]] = NULL;
		give(s, h, slot[i]);
	}
	s->free_head = s->free_tail = -1;
	s->nfree = 0;
	for (uint32_t k = 0; k < s->n; k++)
		if (!s->owner[k])
			free_append(s, k);
	return true;
}

/* The host whose oldest slot h's record takes (every slot is held). */
static struct rlslots_host *victim(struct rlslots *s, struct rlslots_host *h)
{
	uint32_t share = s->n / (s->holders + (h->n == 0));

	if (h->n && h->n >= share)
		return h;
	struct rlslots_host *most = h->n ? h : NULL;
	struct rlslots_host *o;
	TAILQ_FOREACH(o, &s->hosts, link)
		if (!most || o->n > most->n)
			most = o;
	return most;
}

uint32_t rlslots_alloc(struct rlslots *s, struct rlslots_host *h)
{
	uint32_t k;

	if (s->free_head >= 0) {
		k = (uint32_t)s->free_head;
		s->free_head = s->next[k];
		if (s->free_head < 0)
			s->free_tail = -1;
		s->nfree--;
	} else {
		k = oldest(s, victim(s, h));
	}
	give(s, h, k);
	return k;
}
