/* deleg.c: the table of attribute delegations (see deleg_i.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "podfs/htab.h"
#include "podfs/xalloc.h"
#include "deleg_i.h"
#include "idtab_i.h"

struct dent {
	struct hnode by_file;   /* hash: file */
	struct hnode by_parent; /* hash: parent */
	struct hnode by_owner;  /* hash: owner */
	uint64_t owner, file, parent, fid;
	bool revoked;
};

struct deleg {
	pthread_mutex_t mu;
	struct htab files, parents, owners;
	unsigned max, per_owner;
	size_t n, nrevoked;
};

struct deleg *deleg_new(unsigned max, unsigned per_owner)
{
	struct deleg *t = xcalloc(1, sizeof(*t));

	pthread_mutex_init(&t->mu, NULL);
	htab_init(&t->files);
	htab_init(&t->parents);
	htab_init(&t->owners);
	t->max = max;
	t->per_owner = per_owner;
	return t;
}

void deleg_free(struct deleg *t)
{
	struct hnode *n;

	if (!t)
		return;
	while ((n = htab_pop(&t->owners)))
		free(container_of(n, struct dent, by_owner));
	htab_fini(&t->files);
	htab_fini(&t->parents);
	htab_fini(&t->owners);
	pthread_mutex_destroy(&t->mu);
	free(t);
}

/* Unlinks and frees e (mu held). */
static void drop(struct deleg *t, struct dent *e)
{
	htab_remove(&t->files, &e->by_file);
	htab_remove(&t->parents, &e->by_parent);
	htab_remove(&t->owners, &e->by_owner);
	t->n--;
	if (e->revoked)
		t->nrevoked--;
	free(e);
}

/* owner's delegation on file, or NULL (mu held). */
static struct dent *find(struct deleg *t, uint64_t owner, uint64_t file)
{
	for (struct hnode *n = htab_first(&t->files, file); n; n = htab_next(n, file)) {
		struct dent *e = container_of(n, struct dent, by_file);
		if (e->owner == owner)
			return e;
	}
	return NULL;
}

bool deleg_grant(struct deleg *t, uint64_t owner, uint64_t file, uint64_t parent, uint64_t fid)
{
	uint64_t oh = idtab_hash(owner);
	unsigned mine = 0;
	bool ok = false;

	pthread_mutex_lock(&t->mu);
	if (t->n >= t->max || htab_first(&t->files, file))
		goto out;
	for (struct hnode *n = htab_first(&t->owners, oh); n; n = htab_next(n, oh))
		if (container_of(n, struct dent, by_owner)->owner == owner && ++mine >= t->per_owner)
			goto out;
	struct dent *e = xcalloc(1, sizeof(*e));
	e->owner = owner;
	e->file = file;
	e->parent = parent;
	e->fid = fid;
	htab_insert(&t->files, &e->by_file, file);
	htab_insert(&t->parents, &e->by_parent, parent);
	htab_insert(&t->owners, &e->by_owner, oh);
	t->n++;
	ok = true;
out:
	pthread_mutex_unlock(&t->mu);
	return ok;
}

bool deleg_grant_dir(struct deleg *t, uint64_t owner, uint64_t dir, uint64_t parent, bool *fresh)
{
	*fresh = false;
	pthread_mutex_lock(&t->mu);
	struct dent *e = find(t, owner, dir);
	bool held = e && e->fid == DELEG_FID_DIR && !e->revoked && e->parent == parent;
	/* A revoked one (or one under a parent the directory left) only
	 * stands in the way: nothing is checked against it. */
	if (e && e->fid == DELEG_FID_DIR && !held)
		drop(t, e);
	pthread_mutex_unlock(&t->mu);
	if (held)
		return true;
	*fresh = deleg_grant(t, owner, dir, parent, DELEG_FID_DIR);
	return *fresh;
}

void deleg_drop_dir(struct deleg *t, uint64_t owner, uint64_t dir)
{
	struct hnode *h, *next;

	pthread_mutex_lock(&t->mu);
	for (h = htab_first(&t->files, dir); h; h = next) {
		struct dent *e = container_of(h, struct dent, by_file);
		next = htab_next(h, dir);
		if (e->file == dir && e->fid == DELEG_FID_DIR && (!owner || e->owner == owner))
			drop(t, e);
	}
	pthread_mutex_unlock(&t->mu);
}

void deleg_ungrant(struct deleg *t, uint64_t owner, uint64_t file)
{
	pthread_mutex_lock(&t->mu);
	struct dent *e = find(t, owner, file);
	if (e)
		drop(t, e);
	pthread_mutex_unlock(&t->mu);
}

bool deleg_any(struct deleg *t)
{
	pthread_mutex_lock(&t->mu);
	bool any = t->n > t->nrevoked;
	pthread_mutex_unlock(&t->mu);
	return any;
}

/* Adds id to out[*n] unless there or full (max). */
static void add_once(uint64_t *out, size_t *n, size_t max, uint64_t id)
{
	for (size_t i = 0; i < *n; i++)
		if (out[i] == id)
			return;
	if (*n < max)
		out[(*n)++] = id;
}

size_t deleg_conflicts(struct deleg *t, uint64_t self, uint64_t key, uint64_t *out, size_t max)
{
	size_t n = 0;

	pthread_mutex_lock(&t->mu);
	for (struct hnode *h = htab_first(&t->files, key); h; h = htab_next(h, key)) {
		struct dent *e = container_of(h, struct dent, by_file);
		if (e->file == key && e->owner != self && !e->revoked)
			add_once(out, &n, max, e->owner);
	}
	for (struct hnode *h = htab_first(&t->parents, key); h; h = htab_next(h, key)) {
		struct dent *e = container_of(h, struct dent, by_parent);
		if (e->parent == key && e->owner != self && !e->revoked)
			add_once(out, &n, max, e->owner);
	}
	pthread_mutex_unlock(&t->mu);
	return n;
}

/* Ends (acked) or revokes e (mu held). */
static void recall_one(struct deleg *t, struct dent *e, bool acked)
{
	if (acked) {
		drop(t, e);
	} else if (!e->revoked) {
		e->revoked = true;
		t->nrevoked++;
	}
}

size_t deleg_recalled(struct deleg *t, uint64_t owner, uint64_t key, bool acked)
{
	size_t count = 0;
	struct hnode *h, *next;

	pthread_mutex_lock(&t->mu);
	for (h = htab_first(&t->files, key); h; h = next) {
		struct dent *e = container_of(h, struct dent, by_file);
		next = htab_next(h, key);
		if (e->file == key && e->owner == owner && !e->revoked) {
			recall_one(t, e, acked);
			count++;
		}
	}
	for (h = htab_first(&t->parents, key); h; h = next) {
		struct dent *e = container_of(h, struct dent, by_parent);
		next = htab_next(h, key);
		if (e->parent == key && e->owner == owner && !e->revoked) {
			recall_one(t, e, acked);
			count++;
		}
	}
	pthread_mutex_unlock(&t->mu);
	return count;
}

int deleg_check(struct deleg *t, uint64_t owner, uint64_t file)
{
	pthread_mutex_lock(&t->mu);
	struct dent *e = find(t, owner, file);
	int ret = e && e->revoked ? -EIO : 0;
	pthread_mutex_unlock(&t->mu);
	return ret;
}

bool deleg_holds(struct deleg *t, uint64_t owner, uint64_t file)
{
	pthread_mutex_lock(&t->mu);
	struct dent *e = find(t, owner, file);
	bool held = e && !e->revoked;
	pthread_mutex_unlock(&t->mu);
	return held;
}

void deleg_release(struct deleg *t, uint64_t owner, uint64_t fid)
{
	struct hnode *h, *next;

	pthread_mutex_lock(&t->mu);
	uint64_t oh = idtab_hash(owner);
	for (h = htab_first(&t->owners, oh); h; h = next) {
		struct dent *e = container_of(h, struct dent, by_owner);
		next = htab_next(h, oh);
		if (e->owner == owner && e->fid == fid)
			drop(t, e);
	}
	pthread_mutex_unlock(&t->mu);
}

void deleg_moved(struct deleg *t, uint64_t owner, uint64_t file, uint64_t newparent)
{
	pthread_mutex_lock(&t->mu);
	struct dent *e = find(t, owner, file);
	if (e && e->parent != newparent) {
		htab_remove(&t->parents, &e->by_parent);
		e->parent = newparent;
		htab_insert(&t->parents, &e->by_parent, newparent);
	}
	pthread_mutex_unlock(&t->mu);
}

void deleg_drop_owner(struct deleg *t, uint64_t owner)
{
	struct hnode *h, *next;

	pthread_mutex_lock(&t->mu);
	uint64_t oh = idtab_hash(owner);
	for (h = htab_first(&t->owners, oh); h; h = next) {
		struct dent *e = container_of(h, struct dent, by_owner);
		next = htab_next(h, oh);
		if (e->owner == owner)
			drop(t, e);
	}
	pthread_mutex_unlock(&t->mu);
}

void deleg_counts(struct deleg *t, size_t *held, size_t *revoked)
{
	pthread_mutex_lock(&t->mu);
	*held = t->n - t->nrevoked;
	*revoked = t->nrevoked;
	pthread_mutex_unlock(&t->mu);
}
