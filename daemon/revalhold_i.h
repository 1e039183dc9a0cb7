/* revalhold_i.h: after a restart, changes wait for the clients of the
 * instance before to revalidate what they cache.
 *
 * A new podfsd knows nothing of what the clients of the one before cache:
 * until a client's REVALIDATE registers its interest again, a change
 * pushes nothing to it, and its kernel still answers from the names and
 * attributes it cached. So the reply to a change waits until every client
 * of the instance before (other than its author) has said, with
 * REVALIDATED, that it revalidated after reconnecting, or for at most
 * --revalidate-wait seconds (docs/coherence.md, "Reconnect: revalidation").
 *
 * The clients are known from STATE_DIR/sessions: the client id of every
 * session, written durably (temp file + fsync + rename + fsync of the
 * directory; concurrent writers share one write) before the AUTH reply of
 * its first connection. A session leaves the list when it ends (GOODBYE,
 * its lease ran out), not when the daemon stops: the clients come back to
 * the next instance. These removals are not fsync'ed: a stale entry only
 * makes a later hold longer. A client listed at start that has not come
 * back when the hold ends leaves the list. An unreadable or malformed
 * list is logged and holds nothing: nobody is known to wait for.
 *
 * Threads: any (one mutex; the file is written under a second one, which
 * the loop thread only ever tries), except revalhold_start and
 * revalhold_stop (loop thread).
 */
#ifndef PODFSD_REVALHOLD_I_H
#define PODFSD_REVALHOLD_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct revalhold;

/* Reads STATE_DIR/sessions: the clients a hold of wait_s seconds (0: no
 * hold) waits for. Returns 0, or -errno with a one-line reason in err
 * when the state directory does not take the list. */
int revalhold_new(const char *state_dir, unsigned wait_s, struct revalhold **out, char *err,
		  size_t errlen);
/* Loop thread: the hold's time runs from now (uv_now, ms); a timer ends
 * it then. */
void revalhold_start(struct revalhold *rh, uv_loop_t *loop);
/* Loop thread: closes the timer (shutdown). */
void revalhold_stop(struct revalhold *rh);
/* After the loop closed every handle. Safe on NULL. */
void revalhold_free(struct revalhold *rh);

/* A session of client_id begins: it is on the persisted list, durably,
 * when this returns (a worker, before the AUTH reply). Returns 0 or the
 * -errno of the write (logged). */
int revalhold_note_client(struct revalhold *rh, uint64_t client_id, const char *host);
/* client_id's session ended (not at shutdown): it leaves the list, and
 * a hold waits for it no more. */
void revalhold_drop_client(struct revalhold *rh, uint64_t client_id);
/* client_id revalidated what it caches (REVALIDATED): items objects, of
 * which changed were invalidated. */
void revalhold_done(struct revalhold *rh, uint64_t client_id, const char *host, uint32_t items,
		    uint32_t changed);
/* Whether the reply to a change made by author must still wait at now
 * (uv_now, ms): a client of the instance before, other than author, has
 * not revalidated and the hold's time is not up. If so, *until is when
 * it is up. */
bool revalhold_waits(struct revalhold *rh, uint64_t author, uint64_t now, uint64_t *until);

/* The hold, for podfsd status. */
struct revalhold_info {
	bool active;          /* changes wait now */
	int64_t until;        /* its end (wall clock, s), if active */
	size_t expected;      /* clients of the instance before */
	size_t revalidated;   /* of which revalidated (or ended their session) */
	size_t listed;        /* clients on the persisted list now */
	uint64_t held_ms;     /* how long the hold lasted (0 while active) */
};
void revalhold_info(struct revalhold *rh, struct revalhold_info *out);

#endif /* PODFSD_REVALHOLD_I_H */
