/* htab.c: intrusive chained hash table (see htab.h). */
#include "podfs/htab.h"

#include <stdlib.h>
#include <string.h>

void htab_init(struct htab *t)
{
	memset(t->small, 0, sizeof(t->small));
	t->b = t->small;
	t->nb = HTAB_MIN;
	t->n = 0;
	t->pop_at = 0;
}

void htab_fini(struct htab *t)
{
	if (t->b != t->small)
		free(t->b);
	t->b = t->small;
	t->nb = HTAB_MIN;
	t->n = 0;
	memset(t->small, 0, sizeof(t->small));
}

/* Doubles the bucket array; on ENOMEM the table keeps working as is. */
static void grow(struct htab *t)
{
	size_t nb = t->nb * 2;
	struct hnode **b = calloc(nb, sizeof(*b));

	if (!b)
		return;
	for (size_t i = 0; i < t->nb; i++) {
		struct hnode *n = t->b[i];
		while (n) {
			struct hnode *next = n->next;
			size_t j = n->hash & (nb - 1);
			n->next = b[j];
			b[j] = n;
			n = next;
		}
	}
	if (t->b != t->small)
		free(t->b);
	t->b = b;
	t->nb = nb;
}

void htab_insert(struct htab *t, struct hnode *n, uint64_t hash)
{
	if (t->n >= t->nb)
		grow(t);
	n->hash = hash;
	size_t i = hash & (t->nb - 1);
	n->next = t->b[i];
	t->b[i] = n;
	t->n++;
}

void htab_remove(struct htab *t, struct hnode *n)
{
	struct hnode **pp = &t->b[n->hash & (t->nb - 1)];

	while (*pp) {
		if (*pp == n) {
			*pp = n->next;
			n->next = NULL;
			t->n--;
			return;
		}
		pp = &(*pp)->next;
	}
}

struct hnode *htab_first(const struct htab *t, uint64_t hash)
{
	struct hnode *n = t->b[hash & (t->nb - 1)];

	while (n && n->hash != hash)
		n = n->next;
	return n;
}

struct hnode *htab_next(const struct hnode *n, uint64_t hash)
{
	struct hnode *m = n->next;

	while (m && m->hash != hash)
		m = m->next;
	return m;
}

struct hnode *htab_pop(struct htab *t)
{
	/* From where the last pop found one (the buckets before it were empty
	 * then), round to the start: popping every node does not start over
	 * at bucket 0 each time. */
	for (size_t k = 0; k < t->nb && t->n; k++) {
		size_t i = (t->pop_at + k) & (t->nb - 1);
		struct hnode *n = t->b[i];
		if (n) {
			t->b[i] = n->next;
			n->next = NULL;
			t->n--;
			t->pop_at = i;
			return n;
		}
	}
	return NULL;
}

struct hnode *htab_any(const struct htab *t)
{
	for (size_t i = 0; i < t->nb && t->n; i++)
		if (t->b[i])
			return t->b[i];
	return NULL;
}

struct hnode *htab_iter(const struct htab *t, size_t *pos, const struct hnode *n)
{
	if (n && n->next)
		return n->next;
	for (size_t i = n ? *pos + 1 : 0; i < t->nb; i++) {
		if (t->b[i]) {
			*pos = i;
			return t->b[i];
		}
	}
	*pos = t->nb;
	return NULL;
}
