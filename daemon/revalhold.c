/* revalhold.c: the persisted list of client sessions, and the hold on
 * changes after a restart until the clients of the instance before have
 * revalidated. See revalhold_i.h. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include "podfs/log.h"
#include "podfs/xalloc.h"
#include "idfile_i.h"
#include "revalhold_i.h"

#define RECORD_NAME "sessions"
#define RECORD_MAGIC "podfs sessions 1"

struct revalhold {
	pthread_mutex_t mu;
	/* The list (under mu) and its version (gen: every change), written
	 * to STATE_DIR/sessions through w. */
	uint64_t *ids;
	size_t nids, capids;
	uint64_t gen;
	struct idfile_sync w;

	/* The hold. expected: the list found at start-up. */
	atomic_bool active;
	unsigned wait_s;
	uint64_t *expected;
	bool *back;        /* revalidated, or its session ended */
	bool *seen;        /* authenticated on this instance (AUTH) */
	size_t nexpected, nback;
	uint64_t until;    /* uv_now ms: its time is up */
	int64_t until_wall;
	uint64_t began_ns, held_ms;
	uv_timer_t timer;
	bool timer_on;
};

/* --- the file --- */

/* The loop thread's write: it never waits for a worker's (idfile_i.h). */
static void flush_try(struct revalhold *rh)
{
	int ret = idfile_sync_try(&rh->w);
	if (ret < 0)
		pfs_warn("cannot write %s: %s (a restart may wait longer for clients that left)",
			 rh->w.file.path, strerror(-ret));
}

/* --- the list --- */

static ssize_t find(const uint64_t *v, size_t n, uint64_t id)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == id)
			return (ssize_t)i;
	return -1;
}

/* Removes id from the list (caller holds mu); true if it was there. */
static bool unlist(struct revalhold *rh, uint64_t id)
{
	ssize_t i = find(rh->ids, rh->nids, id);

	if (i < 0)
		return false;
	rh->ids[i] = rh->ids[--rh->nids];
	rh->gen++;
	return true;
}

/* --- lifetime --- */

int revalhold_new(const char *state_dir, unsigned wait_s, struct revalhold **out, char *err,
		  size_t errlen)
{
	struct revalhold *rh = xcalloc(1, sizeof(*rh));
	long n;
	int ret;

	pthread_mutex_init(&rh->mu, NULL);
	idfile_sync_init(&rh->w, state_dir, RECORD_NAME, RECORD_MAGIC, &rh->mu, &rh->ids,
			 &rh->nids, &rh->gen);
	rh->wait_s = wait_s;
	n = idfile_read(&rh->w.file, &rh->expected);
	if (n < 0) {
		pfs_warn("%s is unreadable or malformed: changes made after this restart do not "
			 "wait for the clients of the instance before to revalidate", rh->w.file.path);
		n = 0;
	}
	rh->nexpected = (size_t)n;
	rh->back = xcalloc(rh->nexpected ? rh->nexpected : 1, sizeof(bool));
	rh->seen = xcalloc(rh->nexpected ? rh->nexpected : 1, sizeof(bool));
	/* Until the hold ends, the listed clients stay listed: a second
	 * restart within it must wait for them again. */
	if (wait_s > 0 && rh->nexpected) {
		rh->ids = xmalloc(rh->nexpected * sizeof(uint64_t));
		memcpy(rh->ids, rh->expected, rh->nexpected * sizeof(uint64_t));
		rh->nids = rh->capids = rh->nexpected;
		atomic_store(&rh->active, true);
	}
	/* Check now that the state directory takes the list. */
	ret = idfile_write(&rh->w.file, rh->ids, rh->nids, true);
	if (ret < 0) {
		snprintf(err, errlen, "cannot write %s: %s", rh->w.file.path, strerror(-ret));
		revalhold_free(rh);
		return ret;
	}
	*out = rh;
	return 0;
}

/* Ends the hold (caller holds mu): the clients that did not come back
 * leave the list. One that did (it logged in here) but has not
 * revalidated yet stays: it is alive and caches, and a restart after this
 * one must wait for it too. Returns true if the list changed. */
static bool hold_end(struct revalhold *rh, const char *why)
{
	bool changed = false;

	/* active changes only under mu, and only after the lines below:
	 * revalhold_waits reads it without mu, and a change it lets through
	 * may return to its caller before a line logged afterwards. */
	if (!atomic_load(&rh->active))
		return false;
	rh->held_ms = (uv_hrtime() - rh->began_ns) / 1000000;
	for (size_t i = 0; i < rh->nexpected; i++) {
		if (rh->back[i])
			continue;
		if (rh->seen[i]) {
			pfs_notice("client %016" PRIx64 " is back but did not revalidate within %u s "
				   "after the restart: changes wait for it no more", rh->expected[i],
				   rh->wait_s);
			continue;
		}
		pfs_notice("client %016" PRIx64 " did not come back within %u s after the "
			   "restart: changes wait for it no more", rh->expected[i], rh->wait_s);
		changed |= unlist(rh, rh->expected[i]);
	}
	pfs_notice("changes wait no more (%s): %zu of %zu client%s of the instance before "
		   "revalidated, after %" PRIu64 " ms", why, rh->nback, rh->nexpected,
		   rh->nexpected == 1 ? "" : "s", rh->held_ms);
	atomic_store(&rh->active, false);
	return changed;
}

static void timer_cb(uv_timer_t *t)
{
	struct revalhold *rh = t->data;
	bool changed;

	pthread_mutex_lock(&rh->mu);
	changed = hold_end(rh, "time is up");
	pthread_mutex_unlock(&rh->mu);
	if (changed)
		flush_try(rh);
}

void revalhold_start(struct revalhold *rh, uv_loop_t *loop)
{
	uv_timer_init(loop, &rh->timer);
	rh->timer.data = rh;
	rh->timer_on = true;
	pthread_mutex_lock(&rh->mu);
	rh->began_ns = uv_hrtime();
	rh->until = uv_now(loop) + (uint64_t)rh->wait_s * 1000;
	rh->until_wall = (int64_t)time(NULL) + rh->wait_s;
	pthread_mutex_unlock(&rh->mu);
	if (!atomic_load(&rh->active))
		return;
	pfs_notice("after the restart, changes wait up to %u s for the %zu client%s of the "
		   "instance before to revalidate what they cache", rh->wait_s, rh->nexpected,
		   rh->nexpected == 1 ? "" : "s");
	uv_timer_start(&rh->timer, timer_cb, (uint64_t)rh->wait_s * 1000, 0);
}

void revalhold_stop(struct revalhold *rh)
{
	if (rh->timer_on && !uv_is_closing((uv_handle_t *)&rh->timer))
		uv_close((uv_handle_t *)&rh->timer, NULL);
}

void revalhold_free(struct revalhold *rh)
{
	if (!rh)
		return;
	pthread_mutex_destroy(&rh->mu);
	idfile_sync_fini(&rh->w);
	free(rh->ids);
	free(rh->expected);
	free(rh->back);
	free(rh->seen);
	free(rh);
}

/* --- clients --- */

int revalhold_note_client(struct revalhold *rh, uint64_t client_id, const char *host)
{
	uint64_t need;
	int ret;

	pthread_mutex_lock(&rh->mu);
	ssize_t i = find(rh->expected, rh->nexpected, client_id);
	if (i >= 0)
		rh->seen[i] = true;
	if (find(rh->ids, rh->nids, client_id) < 0) {
		if (rh->nids == rh->capids) {
			rh->capids = rh->capids ? rh->capids * 2 : 16;
			rh->ids = realloc(rh->ids, rh->capids * sizeof(uint64_t));
			if (!rh->ids)
				abort(); /* policy: see podfs/xalloc.h */
		}
		rh->ids[rh->nids++] = client_id;
		rh->gen++;
	}
	need = rh->gen;
	pthread_mutex_unlock(&rh->mu);
	ret = idfile_sync_write(&rh->w, need);
	if (ret < 0)
		pfs_warn("cannot write %s: %s (if podfsd restarts, changes will not wait for %s "
			 "to revalidate)", rh->w.file.path, strerror(-ret), host);
	return ret;
}

/* client_id, if a client of the instance before, is back (or gone for
 * good); the hold ends (why) once that is true of them all. Caller holds
 * mu. Returns true if the list changed. */
static bool mark_back(struct revalhold *rh, uint64_t client_id, const char *why)
{
	ssize_t i = find(rh->expected, rh->nexpected, client_id);

	if (i < 0 || rh->back[i])
		return false;
	rh->back[i] = true;
	rh->nback++;
	if (atomic_load(&rh->active) && rh->nback == rh->nexpected)
		return hold_end(rh, why);
	return false;
}

void revalhold_drop_client(struct revalhold *rh, uint64_t client_id)
{
	pthread_mutex_lock(&rh->mu);
	bool changed = unlist(rh, client_id);
	changed |= mark_back(rh, client_id, "every client revalidated or left");
	pthread_mutex_unlock(&rh->mu);
	if (changed)
		flush_try(rh);
}

void revalhold_done(struct revalhold *rh, uint64_t client_id, const char *host, uint32_t items,
		    uint32_t changed)
{
	pthread_mutex_lock(&rh->mu);
	if (atomic_load(&rh->active) && find(rh->expected, rh->nexpected, client_id) >= 0)
		pfs_info("client %016" PRIx64 " (%s) revalidated %" PRIu32 " cached object%s, "
			 "%" PRIu32 " changed", client_id, host, items, items == 1 ? "" : "s",
			 changed);
	/* Every client is back when the hold ends here: the list stays. */
	mark_back(rh, client_id, "every client revalidated");
	pthread_mutex_unlock(&rh->mu);
}

bool revalhold_waits(struct revalhold *rh, uint64_t author, uint64_t now, uint64_t *until)
{
	bool wait = false;

	if (!atomic_load_explicit(&rh->active, memory_order_acquire))
		return false;
	pthread_mutex_lock(&rh->mu);
	if (atomic_load(&rh->active) && now < rh->until) {
		for (size_t i = 0; i < rh->nexpected && !wait; i++)
			wait = !rh->back[i] && rh->expected[i] != author;
		*until = rh->until;
	}
	pthread_mutex_unlock(&rh->mu);
	return wait;
}

void revalhold_info(struct revalhold *rh, struct revalhold_info *out)
{
	pthread_mutex_lock(&rh->mu);
	out->active = atomic_load(&rh->active);
	out->until = out->active ? rh->until_wall : 0;
	out->expected = rh->nexpected;
	out->revalidated = rh->nback;
	out->listed = rh->nids;
	out->held_ms = out->active ? 0 : rh->held_ms;
	pthread_mutex_unlock(&rh->mu);
}
