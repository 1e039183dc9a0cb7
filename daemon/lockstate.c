/* lockstate.c: blocked-lock waiters, and lock recovery after a restart
 * (the persisted list of lock holders, the grace period). See
 * lockstate_i.h. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>

#include "podfs/log.h"
#include "podfs/xalloc.h"
#include "idfile_i.h"
#include "idtab_i.h"
#include "lockstate_i.h"

#define RECORD_NAME "lockholders"
#define RECORD_MAGIC "podfs lock holders 1"

/* A registration of a waiter: client c waits for a lock on file k. Each
 * is on its file's list and on its client's, so that a release finds its
 * file's waiters, and a registration its client's, without a look at
 * anyone else's. */
struct waiter {
	TAILQ_ENTRY(waiter) by_key, by_client;
	struct wfile *k;
	struct wclient *c;
};
struct wfile {
	struct hnode hn;
	uint64_t key;
	TAILQ_HEAD(, waiter) ws;
};
struct wclient {
	struct hnode hn;
	uint64_t id;
	unsigned n;
	TAILQ_HEAD(, waiter) ws; /* oldest registration first */
};

struct lockstate {
	pthread_mutex_t mu;

	/* The persisted list (under mu) and its version (gen: every
	 * change), written to STATE_DIR/lockholders through rec: a worker
	 * adding a holder waits for the disk, the loop thread never. */
	uint64_t *holders;
	size_t nholders, capholders;
	uint64_t gen;
	struct idfile_sync rec;

	/* Grace period. expected: the list found at start-up. */
	atomic_bool grace;
	unsigned grace_s;
	uint64_t *expected;
	bool *reclaimed;
	size_t nexpected, nreclaimed;
	bool unknown; /* the list was unreadable: wait the whole period */
	uv_timer_t timer;
	bool timer_on;
	int64_t grace_until;  /* wall clock, s (lockstate_info) */
	uint64_t locks_reclaimed, locks_lost; /* as RECLAIM_DONE said */

	struct htab wfiles;   /* key -> struct wfile (files someone waits for) */
	struct htab wclients; /* client id -> struct wclient (clients that wait) */
};

/* --- the file --- */

/* Writes the latest list unless a worker is writing (who then does). */
static void record_try(struct lockstate *ls)
{
	int ret = idfile_sync_try(&ls->rec);

	if (ret < 0)
		pfs_warn("cannot write %s: %s (lock holders may not get a grace period after a "
			 "restart)", ls->rec.file.path, strerror(-ret));
}

/* --- lifetime --- */

int lockstate_new(const char *state_dir, unsigned grace_s, struct lockstate **out, char *err,
		  size_t errlen)
{
	struct lockstate *ls = xcalloc(1, sizeof(*ls));
	long n;
	int ret;

	pthread_mutex_init(&ls->mu, NULL);
	htab_init(&ls->wfiles);
	htab_init(&ls->wclients);
	idfile_sync_init(&ls->rec, state_dir, RECORD_NAME, RECORD_MAGIC, &ls->mu, &ls->holders,
			 &ls->nholders, &ls->gen);
	ls->grace_s = grace_s;
	n = idfile_read(&ls->rec.file, &ls->expected);
	if (n < 0) {
		pfs_warn("%s is unreadable or malformed: a full grace period of %u s for every "
			 "lock holder", ls->rec.file.path, grace_s);
		ls->unknown = true;
		n = 0;
	}
	ls->nexpected = (size_t)n;
	ls->reclaimed = xcalloc(ls->nexpected ? ls->nexpected : 1, sizeof(bool));
	/* Until grace ends, the listed clients stay listed: a second crash
	 * within grace must wait for them again. */
	ls->holders = ls->nexpected ? xmalloc(ls->nexpected * sizeof(uint64_t)) : NULL;
	if (ls->nexpected)
		memcpy(ls->holders, ls->expected, ls->nexpected * sizeof(uint64_t));
	ls->nholders = ls->capholders = ls->nexpected;
	if ((ls->nexpected || ls->unknown) && grace_s > 0) {
		atomic_store(&ls->grace, true);
	} else if (ls->nexpected) {
		pfs_notice("--grace 0: the locks of %zu client%s held before the restart are lost",
			   ls->nexpected, ls->nexpected == 1 ? "" : "s");
		ls->nholders = 0;
	}
	/* Check now that the state directory takes the list. */
	ret = idfile_write(&ls->rec.file, ls->holders, ls->nholders, true);
	if (ret < 0) {
		snprintf(err, errlen, "cannot write %s: %s", ls->rec.file.path, strerror(-ret));
		lockstate_free(ls);
		return ret;
	}
	*out = ls;
	return 0;
}

/* Ends grace (caller holds mu): unlisted clients forfeit their locks.
 * Returns true if the list changed (the caller then writes it). */
static bool grace_end(struct lockstate *ls, const char *why)
{
	size_t kept = 0, gone = 0;

	/* grace changes only under mu. */
	if (!atomic_load(&ls->grace))
		return false;
	atomic_store(&ls->grace, false);
	for (size_t i = 0; i < ls->nholders; i++) {
		bool forfeit = false;
		for (size_t j = 0; j < ls->nexpected; j++)
			if (ls->expected[j] == ls->holders[i] && !ls->reclaimed[j])
				forfeit = true;
		if (forfeit) {
			pfs_notice("client %016" PRIx64 " did not come back within the grace "
				   "period: its locks are lost", ls->holders[i]);
			gone++;
		} else {
			ls->holders[kept++] = ls->holders[i];
		}
	}
	ls->nholders = kept;
	pfs_notice("grace period over (%s): %zu of %zu lock holder%s reclaimed; new locks are "
		   "granted", why, ls->nreclaimed, ls->nexpected, ls->nexpected == 1 ? "" : "s");
	if (gone)
		ls->gen++;
	return gone > 0;
}

static void timer_cb(uv_timer_t *t)
{
	struct lockstate *ls = t->data;

	pthread_mutex_lock(&ls->mu);
	bool changed = grace_end(ls, "time is up");
	pthread_mutex_unlock(&ls->mu);
	if (changed)
		record_try(ls);
}

void lockstate_start(struct lockstate *ls, uv_loop_t *loop)
{
	uv_timer_init(loop, &ls->timer);
	ls->timer.data = ls;
	ls->timer_on = true;
	if (!atomic_load(&ls->grace))
		return;
	if (ls->unknown)
		pfs_notice("grace period of %u s: only lock reclaims (the list of lock holders "
			   "is lost)", ls->grace_s);
	else
		pfs_notice("grace period of %u s: only lock reclaims until the %zu client%s that "
			   "held locks came back", ls->grace_s, ls->nexpected,
			   ls->nexpected == 1 ? "" : "s");
	ls->grace_until = (int64_t)time(NULL) + ls->grace_s;
	uv_timer_start(&ls->timer, timer_cb, (uint64_t)ls->grace_s * 1000, 0);
}

void lockstate_stop(struct lockstate *ls)
{
	if (ls->timer_on && !uv_is_closing((uv_handle_t *)&ls->timer))
		uv_close((uv_handle_t *)&ls->timer, NULL);
}

void lockstate_free(struct lockstate *ls)
{
	if (!ls)
		return;
	idfile_sync_fini(&ls->rec);
	pthread_mutex_destroy(&ls->mu);
	free(ls->holders);
	free(ls->expected);
	free(ls->reclaimed);
	struct hnode *n;
	while ((n = htab_pop(&ls->wclients))) {
		struct wclient *c = container_of(n, struct wclient, hn);
		struct waiter *w;
		while ((w = TAILQ_FIRST(&c->ws))) {
			TAILQ_REMOVE(&c->ws, w, by_client);
			free(w);
		}
		free(c);
	}
	while ((n = htab_pop(&ls->wfiles)))
		free(container_of(n, struct wfile, hn));
	htab_fini(&ls->wclients);
	htab_fini(&ls->wfiles);
	free(ls);
}

/* --- holders and reclaims --- */

bool lockstate_in_grace(struct lockstate *ls)
{
	return atomic_load_explicit(&ls->grace, memory_order_acquire);
}

static bool listed(const struct lockstate *ls, uint64_t client_id)
{
	for (size_t i = 0; i < ls->nholders; i++)
		if (ls->holders[i] == client_id)
			return true;
	return false;
}

int lockstate_note_holder(struct lockstate *ls, uint64_t client_id, const char *host)
{
	uint64_t need;
	int ret;

	pthread_mutex_lock(&ls->mu);
	if (!listed(ls, client_id)) {
		if (ls->nholders == ls->capholders) {
			ls->capholders = ls->capholders ? ls->capholders * 2 : 16;
			ls->holders = realloc(ls->holders, ls->capholders * sizeof(uint64_t));
			if (!ls->holders)
				abort(); /* policy: see podfs/xalloc.h */
		}
		ls->holders[ls->nholders++] = client_id;
		ls->gen++;
	}
	need = ls->gen;
	pthread_mutex_unlock(&ls->mu);
	/* Outside mu, which the loop thread takes on every unlock: the
	 * disk's time is this worker's alone. */
	ret = idfile_sync_write(&ls->rec, need);
	if (ret < 0)
		pfs_warn("cannot write %s: %s (the locks of %s may be lost if podfsd restarts)",
			 ls->rec.file.path, strerror(-ret), host);
	return ret;
}

/* client_id, if it held locks before the restart, has nothing more to
 * reclaim; grace ends (why) once that is true of every listed client.
 * Caller holds mu. Returns true if the list changed. */
static bool mark_reclaimed(struct lockstate *ls, uint64_t client_id, const char *why)
{
	for (size_t i = 0; i < ls->nexpected; i++) {
		if (ls->expected[i] == client_id && !ls->reclaimed[i]) {
			ls->reclaimed[i] = true;
			ls->nreclaimed++;
		}
	}
	if (atomic_load(&ls->grace) && !ls->unknown && ls->nreclaimed == ls->nexpected)
		return grace_end(ls, why);
	return false;
}

void lockstate_drop_holder(struct lockstate *ls, uint64_t client_id)
{
	bool changed = false;

	pthread_mutex_lock(&ls->mu);
	for (size_t i = 0; i < ls->nholders; i++) {
		if (ls->holders[i] == client_id) {
			ls->holders[i] = ls->holders[--ls->nholders];
			ls->gen++;
			changed = true;
			break;
		}
	}
	/* A session that ends in grace has nothing left to reclaim. */
	changed |= mark_reclaimed(ls, client_id, "every lock holder reclaimed or left");
	pthread_mutex_unlock(&ls->mu);
	if (changed)
		record_try(ls);
}

int lockstate_may_reclaim(struct lockstate *ls, uint64_t client_id)
{
	int ret = -ENOLCK;

	pthread_mutex_lock(&ls->mu);
	if (atomic_load(&ls->grace)) {
		if (ls->unknown)
			ret = 0;
		for (size_t i = 0; i < ls->nexpected; i++)
			if (ls->expected[i] == client_id)
				ret = 0;
	}
	pthread_mutex_unlock(&ls->mu);
	return ret;
}

void lockstate_reclaim_done(struct lockstate *ls, uint64_t client_id, const char *host,
			    uint32_t reclaimed, uint32_t lost)
{
	pthread_mutex_lock(&ls->mu);
	ls->locks_reclaimed += reclaimed;
	ls->locks_lost += lost;
	if (reclaimed || lost)
		pfs_notice("client %016" PRIx64 " (%s) reclaimed %u lock%s%s", client_id, host,
			   reclaimed, reclaimed == 1 ? "" : "s",
			   lost ? ", some could not be reclaimed" : "");
	bool changed = mark_reclaimed(ls, client_id, "every lock holder reclaimed");
	pthread_mutex_unlock(&ls->mu);
	if (changed)
		record_try(ls);
}

void lockstate_info(struct lockstate *ls, struct lockstate_info *out)
{
	pthread_mutex_lock(&ls->mu);
	out->grace = atomic_load(&ls->grace);
	out->grace_until = out->grace ? ls->grace_until : 0;
	out->expected = ls->nexpected;
	out->reclaimed = ls->nreclaimed;
	out->unknown = ls->unknown;
	out->holders = ls->nholders;
	out->locks_reclaimed = ls->locks_reclaimed;
	out->locks_lost = ls->locks_lost;
	pthread_mutex_unlock(&ls->mu);
}

/* --- waiters --- */

static struct wfile *wfile_get(struct lockstate *ls, uint64_t key)
{
	struct wfile *f = IDTAB_FIND(&ls->wfiles, key, struct wfile, hn, key);

	if (!f) {
		f = xcalloc(1, sizeof(*f));
		f->key = key;
		TAILQ_INIT(&f->ws);
		idtab_insert(&ls->wfiles, &f->hn, key);
	}
	return f;
}

/* Takes w off its file's list (and the file, once no one waits for it). */
static void wfile_unlink(struct lockstate *ls, struct waiter *w)
{
	struct wfile *f = w->k;

	TAILQ_REMOVE(&f->ws, w, by_key);
	if (TAILQ_EMPTY(&f->ws)) {
		htab_remove(&ls->wfiles, &f->hn);
		free(f);
	}
}

/* Takes w off both lists and frees it (and its client, once it waits for
 * nothing). */
static void waiter_free(struct lockstate *ls, struct waiter *w)
{
	struct wclient *c = w->c;

	wfile_unlink(ls, w);
	TAILQ_REMOVE(&c->ws, w, by_client);
	free(w);
	if (--c->n == 0) {
		htab_remove(&ls->wclients, &c->hn);
		free(c);
	}
}

void lockstate_wait_add(struct lockstate *ls, uint64_t key, uint64_t client_id)
{
	struct wclient *c;
	struct waiter *w;

	pthread_mutex_lock(&ls->mu);
	c = IDTAB_FIND(&ls->wclients, client_id, struct wclient, hn, id);
	if (!c) {
		c = xcalloc(1, sizeof(*c));
		c->id = client_id;
		TAILQ_INIT(&c->ws);
		idtab_insert(&ls->wclients, &c->hn, client_id);
	}
	TAILQ_FOREACH(w, &c->ws, by_client) {
		if (w->k->key == key) {
			pthread_mutex_unlock(&ls->mu);
			return;
		}
	}
	if (c->n >= LOCKSTATE_WAITS_PER_CLIENT) {
		/* Its oldest registration becomes this one. */
		w = TAILQ_FIRST(&c->ws);
		wfile_unlink(ls, w);
		TAILQ_REMOVE(&c->ws, w, by_client);
	} else {
		w = xcalloc(1, sizeof(*w));
		w->c = c;
		c->n++;
	}
	w->k = wfile_get(ls, key);
	TAILQ_INSERT_TAIL(&w->k->ws, w, by_key);
	TAILQ_INSERT_TAIL(&c->ws, w, by_client);
	pthread_mutex_unlock(&ls->mu);
}

void lockstate_wait_del(struct lockstate *ls, uint64_t key, uint64_t client_id)
{
	struct wclient *c;
	struct waiter *w;

	pthread_mutex_lock(&ls->mu);
	c = IDTAB_FIND(&ls->wclients, client_id, struct wclient, hn, id);
	if (c) {
		TAILQ_FOREACH(w, &c->ws, by_client) {
			if (w->k->key == key) {
				waiter_free(ls, w);
				break;
			}
		}
	}
	pthread_mutex_unlock(&ls->mu);
}

void lockstate_wait_drop_client(struct lockstate *ls, uint64_t client_id)
{
	struct wclient *c;

	pthread_mutex_lock(&ls->mu);
	c = IDTAB_FIND(&ls->wclients, client_id, struct wclient, hn, id);
	/* c goes with its last registration. */
	for (unsigned n = c ? c->n : 0; n; n--)
		waiter_free(ls, TAILQ_FIRST(&c->ws));
	pthread_mutex_unlock(&ls->mu);
}

size_t lockstate_wait_take(struct lockstate *ls, uint64_t key, uint64_t *ids, size_t max)
{
	struct wfile *f;
	size_t n = 0;

	pthread_mutex_lock(&ls->mu);
	f = IDTAB_FIND(&ls->wfiles, key, struct wfile, hn, key);
	while (f && n < max) {
		struct waiter *w = TAILQ_FIRST(&f->ws);
		bool last = TAILQ_NEXT(w, by_key) == NULL;
		ids[n++] = w->c->id;
		waiter_free(ls, w); /* frees f with its last waiter */
		if (last)
			break;
	}
	pthread_mutex_unlock(&ls->mu);
	return n;
}
