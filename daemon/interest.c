/* interest.c: the interest table, object key -> session slot bitmap (see
 * interest_i.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "podfs/htab.h"
#include "podfs/xalloc.h"
#include "interest_i.h"

struct iobj {
	struct hnode hn;   /* hash = the object key */
	unsigned nw;       /* words in bits[], 1..INTEREST_WORDS */
	uint64_t bits[];
};

struct stripe {
	pthread_mutex_t mu;
	struct htab tab;
	size_t bytes;
};

struct interest {
	struct stripe st[INTEREST_STRIPES];
	pthread_mutex_t slot_mu;
	uint64_t used[INTEREST_WORDS];
	uint64_t pending[INTEREST_WORDS]; /* released, still used until swept */
	/* INTEREST_SLOTLESS: its sessions all ended, to be cleared by the
	 * next sweep (interest_slotless_release), unless one more began
	 * first; each that begins bumps slotless_gen (interest_slot_alloc),
	 * which a sweep under way looks at before each stripe. */
	bool slotless_pending;
	uint64_t slotless_gen;
};

/* The stripe comes from the top bits, the htab bucket from the low ones. */
static struct stripe *stripe_of(struct interest *it, uint64_t key)
{
	return &it->st[key >> 58];
}
_Static_assert(INTEREST_STRIPES == 64, "stripe_of uses 6 bits");

static size_t obj_size(unsigned nw)
{
	return sizeof(struct iobj) + nw * sizeof(uint64_t);
}

struct interest *interest_new(void)
{
	struct interest *it = xcalloc(1, sizeof(*it));

	for (int i = 0; i < INTEREST_STRIPES; i++) {
		pthread_mutex_init(&it->st[i].mu, NULL);
		htab_init(&it->st[i].tab);
	}
	pthread_mutex_init(&it->slot_mu, NULL);
	it->used[INTEREST_SLOTLESS / 64] |= 1ull << (INTEREST_SLOTLESS % 64); /* never allocated */
	return it;
}

void interest_free(struct interest *it)
{
	struct hnode *n;

	if (!it)
		return;
	for (int i = 0; i < INTEREST_STRIPES; i++) {
		while ((n = htab_pop(&it->st[i].tab)))
			free(container_of(n, struct iobj, hn));
		htab_fini(&it->st[i].tab);
		pthread_mutex_destroy(&it->st[i].mu);
	}
	pthread_mutex_destroy(&it->slot_mu);
	free(it);
}

/* Caller holds the stripe's mutex. */
static struct iobj *find(struct stripe *s, uint64_t key)
{
	struct hnode *n = htab_first(&s->tab, key);

	return n ? container_of(n, struct iobj, hn) : NULL;
}

/* Unlinks and frees o (caller holds the stripe's mutex). */
static void obj_drop(struct stripe *s, struct iobj *o)
{
	htab_remove(&s->tab, &o->hn);
	s->bytes -= obj_size(o->nw);
	free(o);
}

static bool empty(const struct iobj *o)
{
	for (unsigned i = 0; i < o->nw; i++)
		if (o->bits[i])
			return false;
	return true;
}

/* Adds slot to key's set, or (add false) removes it: the object goes
 * with its last slot, and then true is returned. */
static bool set_slot(struct interest *it, uint64_t key, int slot, bool add)
{
	struct stripe *s = stripe_of(it, key);
	unsigned w;
	bool gone = false;
	uint64_t bit;
	struct iobj *o;

	if (slot < 0 && add)
		slot = INTEREST_SLOTLESS;
	if (slot < 0 || slot >= INTEREST_SLOTS)
		return false;
	w = (unsigned)slot / 64;
	bit = 1ull << (slot % 64);
	pthread_mutex_lock(&s->mu);
	o = find(s, key);
	if (add && (!o || o->nw <= w)) {
		/* New, or widened: a new allocation linked in place of the
		 * old one. */
		struct iobj *n = xcalloc(1, obj_size(w + 1));
		n->nw = w + 1;
		if (o) {
			memcpy(n->bits, o->bits, o->nw * sizeof(uint64_t));
			obj_drop(s, o);
		}
		htab_insert(&s->tab, &n->hn, key);
		s->bytes += obj_size(n->nw);
		o = n;
	}
	if (add) {
		o->bits[w] |= bit;
	} else if (o && w < o->nw) {
		o->bits[w] &= ~bit;
		if (empty(o)) {
			obj_drop(s, o);
			gone = true;
		}
	}
	pthread_mutex_unlock(&s->mu);
	return gone;
}

void interest_add(struct interest *it, uint64_t key, int slot)
{
	(void)set_slot(it, key, slot, true);
}

void interest_note(struct interest *it, uint64_t key, int slot, struct keyvec *kv)
{
	interest_add(it, key, slot);
	if (!kv)
		return;
	if (kv->n == kv->cap) {
		size_t cap = kv->cap ? kv->cap * 2 : 8;
		uint64_t *v = xmalloc(cap * sizeof(*v));
		if (kv->n)
			memcpy(v, kv->v, kv->n * sizeof(*v));
		free(kv->v);
		kv->v = v;
		kv->cap = cap;
	}
	kv->v[kv->n++] = key;
}

bool interest_del(struct interest *it, uint64_t key, int slot)
{
	return set_slot(it, key, slot, false);
}

bool interest_get(struct interest *it, uint64_t key, uint64_t bits[INTEREST_WORDS])
{
	struct stripe *s = stripe_of(it, key);
	struct iobj *o;

	memset(bits, 0, INTEREST_WORDS * sizeof(uint64_t));
	pthread_mutex_lock(&s->mu);
	o = find(s, key);
	if (o)
		memcpy(bits, o->bits, o->nw * sizeof(uint64_t));
	pthread_mutex_unlock(&s->mu);
	return o != NULL;
}

int interest_slot_alloc(struct interest *it)
{
	int slot = -1;

	pthread_mutex_lock(&it->slot_mu);
	for (unsigned w = 0; w < INTEREST_WORDS && slot < 0; w++) {
		if (it->used[w] == UINT64_MAX)
			continue;
		unsigned b = (unsigned)__builtin_ctzll(~it->used[w]);
		it->used[w] |= 1ull << b;
		slot = (int)(w * 64 + b);
	}
	if (slot < 0) { /* one more session shares INTEREST_SLOTLESS */
		it->slotless_pending = false;
		it->slotless_gen++;
	}
	pthread_mutex_unlock(&it->slot_mu);
	return slot;
}

/* Clears the slots of mask from every object (freeing those left
 * empty): one walk of the whole table, one stripe's mutex at a time.
 * INTEREST_SLOTLESS too if slotless, in each stripe only while no
 * session without a slot began since slotless_gen was gen: looked at
 * with the stripe's mutex held, so that such a session's interest,
 * which waits for that mutex, is added after the stripe is cleared or
 * in a stripe not cleared of it. */
static size_t clear_slots(struct interest *it, const uint64_t mask[INTEREST_WORDS], bool slotless,
			  uint64_t gen)
{
	const unsigned sw = INTEREST_SLOTLESS / 64;
	const uint64_t sbit = 1ull << (INTEREST_SLOTLESS % 64);
	uint64_t m[INTEREST_WORDS];
	size_t gone = 0;

	memcpy(m, mask, sizeof(m));
	for (int i = 0; i < INTEREST_STRIPES; i++) {
		struct stripe *s = &it->st[i];
		pthread_mutex_lock(&s->mu);
		if (slotless) {
			pthread_mutex_lock(&it->slot_mu);
			slotless = it->slotless_gen == gen;
			pthread_mutex_unlock(&it->slot_mu);
			m[sw] = slotless ? mask[sw] | sbit : mask[sw];
		}
		for (size_t b = 0; b < s->tab.nb; b++) {
			struct hnode **pp = &s->tab.b[b];
			while (*pp) {
				struct iobj *o = container_of(*pp, struct iobj, hn);
				for (unsigned w = 0; w < o->nw; w++)
					o->bits[w] &= ~m[w];
				if (empty(o)) {
					*pp = o->hn.next;
					s->tab.n--;
					s->bytes -= obj_size(o->nw);
					free(o);
					gone++;
				} else {
					pp = &(*pp)->next;
				}
			}
		}
		pthread_mutex_unlock(&s->mu);
	}
	return gone;
}

void interest_slot_release(struct interest *it, int slot)
{
	if (slot < 0 || slot >= INTEREST_SLOTS || slot == INTEREST_SLOTLESS)
		return;
	pthread_mutex_lock(&it->slot_mu);
	it->pending[slot / 64] |= 1ull << (slot % 64);
	pthread_mutex_unlock(&it->slot_mu);
}

size_t interest_sweep(struct interest *it)
{
	uint64_t mask[INTEREST_WORDS], any = 0, gen;
	bool slotless;

	pthread_mutex_lock(&it->slot_mu);
	for (unsigned w = 0; w < INTEREST_WORDS; w++) {
		mask[w] = it->pending[w];
		it->pending[w] = 0;
		any |= mask[w];
	}
	slotless = it->slotless_pending;
	it->slotless_pending = false;
	gen = it->slotless_gen;
	pthread_mutex_unlock(&it->slot_mu);
	if (!any && !slotless)
		return 0;
	size_t gone = clear_slots(it, mask, slotless, gen);
	/* Only now may a new session have them: none of their bits is left. */
	pthread_mutex_lock(&it->slot_mu);
	for (unsigned w = 0; w < INTEREST_WORDS; w++)
		it->used[w] &= ~mask[w];
	pthread_mutex_unlock(&it->slot_mu);
	return gone;
}

size_t interest_slot_free(struct interest *it, int slot)
{
	interest_slot_release(it, slot);
	return interest_sweep(it);
}

void interest_slotless_release(struct interest *it)
{
	pthread_mutex_lock(&it->slot_mu);
	it->slotless_pending = true;
	pthread_mutex_unlock(&it->slot_mu);
}

void interest_foreach(struct interest *it, void (*fn)(uint64_t key, void *arg), void *arg)
{
	for (int i = 0; i < INTEREST_STRIPES; i++) {
		struct stripe *s = &it->st[i];
		pthread_mutex_lock(&s->mu);
		for (size_t b = 0; b < s->tab.nb; b++)
			for (struct hnode *n = s->tab.b[b]; n; n = n->next)
				fn(n->hash, arg);
		pthread_mutex_unlock(&s->mu);
	}
}

void interest_stats(struct interest *it, size_t *objects, size_t *bytes)
{
	*objects = 0;
	*bytes = 0;
	for (int i = 0; i < INTEREST_STRIPES; i++) {
		struct stripe *s = &it->st[i];
		pthread_mutex_lock(&s->mu);
		*objects += s->tab.n;
		*bytes += s->bytes + s->tab.nb * sizeof(struct hnode *);
		pthread_mutex_unlock(&s->mu);
	}
}
