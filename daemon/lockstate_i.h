/* lockstate_i.h: what podfsd knows about locks beyond the kernel's lock
 * table (the locks themselves are OFD/flock locks on the daemon's own lock
 * fds, see session_i.h):
 *
 *  - Blocked waiters. A SETLK with PFS_LKF_WAIT registers (file key,
 *    client id) before it tries the lock; whoever releases a lock on the
 *    file afterwards takes the registrations and pushes LOCK_WAKE. As the
 *    registration comes before the attempt and the release before the
 *    take, a waiter that failed is always woken by the release it waits
 *    for.
 *
 *  - Recovery after a restart (see wire.h). The ids of the clients that
 *    hold locks are kept in STATE_DIR/lockholders, rewritten atomically
 *    (temp file + fsync + rename + fsync of the directory) before a
 *    client's first lock is granted. A daemon that starts with a non-empty
 *    list is in its grace period for --grace seconds, or until every listed
 *    client sent RECLAIM_DONE; a listed client that did not forfeits its
 *    locks and leaves the list. A client leaves the list when its session
 *    ends or its locks are released after --lock-lease (these rewrites are
 *    not fsync'ed: a stale entry only makes a later grace period longer).
 *    The list survives an orderly shutdown too, since that also drops the
 *    locks.
 *
 * Threads: every function may be called from any thread (one mutex),
 * except lockstate_start and lockstate_stop (loop thread).
 */
#ifndef PODFSD_LOCKSTATE_I_H
#define PODFSD_LOCKSTATE_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct lockstate;

/* Reads STATE_DIR/lockholders and decides whether a grace period of
 * grace_s seconds is due (a missing or empty list: none). An unreadable
 * or malformed list is logged and gives a full grace period with nobody
 * known (it cannot end early). Returns 0, or -errno with a one-line
 * reason in err when the state directory cannot be used. */
int lockstate_new(const char *state_dir, unsigned grace_s, struct lockstate **out, char *err,
		  size_t errlen);
/* Loop thread: starts the grace timer (if in grace). */
void lockstate_start(struct lockstate *ls, uv_loop_t *loop);
/* Loop thread: closes the timer (shutdown). */
void lockstate_stop(struct lockstate *ls);
/* After the loop closed every handle. Safe on NULL. */
void lockstate_free(struct lockstate *ls);

/* True while only reclaims are granted. */
bool lockstate_in_grace(struct lockstate *ls);
/* A lock was granted to client_id: adds it to the persisted list if it is
 * not there yet (durably, before the caller replies). Returns 0 or the
 * -errno of the write (logged; the lock stays granted). */
int lockstate_note_holder(struct lockstate *ls, uint64_t client_id, const char *host);
/* client_id holds no lock any more (session over, lock lease expired). */
void lockstate_drop_holder(struct lockstate *ls, uint64_t client_id);
/* May client_id reclaim now? 0, or -ENOLCK (no grace period, or the
 * client is not on the list). */
int lockstate_may_reclaim(struct lockstate *ls, uint64_t client_id);
/* client_id sent RECLAIM_DONE; ends grace once all listed clients did. */
void lockstate_reclaim_done(struct lockstate *ls, uint64_t client_id, const char *host,
			    uint32_t reclaimed, uint32_t lost);

/* The grace period and the lock holders, for podfsd status. */
struct lockstate_info {
	bool grace;             /* in the grace period */
	int64_t grace_until;    /* its end (wall clock, s), if in it */
	bool unknown;           /* the list was lost: the whole period is waited */
	size_t expected;        /* clients that held locks before the restart */
	size_t reclaimed;       /* of which came back and reclaimed */
	size_t holders;         /* clients on the persisted list now */
	uint64_t locks_reclaimed, locks_lost; /* locks, as the clients said */
};
/* Any thread. */
void lockstate_info(struct lockstate *ls, struct lockstate_info *out);

/* Waiters. key is handles_key() of the file. */
/* client_id waits for a lock on key (registered once, however often it
 * asks). A client registered for LOCKSTATE_WAITS_PER_CLIENT files already
 * loses its oldest registration for this one: a client retries its
 * blocked locks every lock_retry seconds anyway (docs/locks.md), and one
 * mount waits in at most 64 at once (its request threads). Registrations
 * are found by file and by client, so no call looks at other files' or
 * other clients' (each is O(LOCKSTATE_WAITS_PER_CLIENT) at most). Never
 * fails. */
#define LOCKSTATE_WAITS_PER_CLIENT 256
void lockstate_wait_add(struct lockstate *ls, uint64_t key, uint64_t client_id);
/* client_id no longer waits for key (it got its lock, or gave up). */
void lockstate_wait_del(struct lockstate *ls, uint64_t key, uint64_t client_id);
/* client_id waits for nothing any more (its session ended). */
void lockstate_wait_drop_client(struct lockstate *ls, uint64_t client_id);
/* Removes up to max registrations for key into ids; returns how many. */
size_t lockstate_wait_take(struct lockstate *ls, uint64_t key, uint64_t *ids, size_t max);

#endif /* PODFSD_LOCKSTATE_I_H */
