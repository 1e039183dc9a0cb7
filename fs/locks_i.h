/* locks_i.h: fcntl and flock locks on the client side.
 *
 * The daemon holds the locks; this module remembers which ones this client
 * holds (POSIX byte ranges per (file, owner), flocks per (file, owner)) so
 * that it can reclaim them after a coordinator restart, and runs the
 * waiting of blocking requests:
 *
 *  - SETLK: a blocking request (F_SETLKW, flock without LOCK_NB) asks with
 *    PFS_LKF_WAIT; on EAGAIN it sleeps until a LOCK_WAKE push for the file,
 *    a FUSE INTERRUPT (-EINTR) or the lock_retry mount option (default
 *    LOCKS_FALLBACK_MS: a push is lost when its connection drops), then
 *    tries again. During the server's grace
 *    period (PFS_ST_GRACE) every lock request and GETLK, blocking or not,
 *    is retried every LOCKS_GRACE_RETRY_MS: the grace period is bounded by
 *    the server (--grace), and this module gives up with ENOLCK after
 *    LOCKS_GRACE_WAIT_MS in case a server keeps answering so.
 *
 *  - Reclaim: when the connection comes back to a restarted daemon (a new
 *    boot id), new lock requests wait while the background thread sends
 *    every held lock as RECLAIM, then RECLAIM_DONE. A lock the daemon
 *    refuses is lost: it leaves the table, a warning names it, and the
 *    next close() of a file whose POSIX lock was lost by that owner fails
 *    with EIO (as NFS reports a lost lock); a lost flock is only logged.
 *    The same happens when the daemon says (PFS_AUTH_LOCKS_LOST) that it
 *    released this client's locks after its lock lease.
 *
 *  - Unlocks leave the table before they are sent, and are serialized
 *    with the reclaim, so that a lock released during a reconnect is never
 *    reclaimed after its unlock reached the daemon. A lock request of an
 *    owner waits while an unlock of that owner on that file is in flight
 *    (the daemon runs requests in parallel: the unlock, answered early
 *    for a dying process, could otherwise drop a lock the owner's next
 *    user was granted meanwhile). A grant is recorded
 *    only if it came from the daemon instance the table belongs to; a
 *    grant from an instance that has since restarted is asked for again.
 *
 * Thread-safe. FUSE handlers call locks_setlk/getlk/unlock_owner; the
 * connection thread calls locks_connected and locks_wake_push (neither
 * blocks).
 */
#ifndef PODFS_LOCKS_I_H
#define PODFS_LOCKS_I_H

#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stdint.h>

#include "podfs/codec.h"
#include "rpc_i.h"

#define LOCKS_FALLBACK_MS 1000 /* default of lock_retry */
#define LOCKS_GRACE_RETRY_MS 200
#define LOCKS_GRACE_WAIT_MS (660 * 1000) /* longer than the longest --grace */

struct client;
struct locks;

/* Creates the module; its thread starts with locks_start. 0 or -ENOMEM. */
int locks_new(struct client *c, struct locks **out);
/* Starts the reclaim thread. 0 or -errno. */
int locks_start(struct locks *lk);
/* Stops the thread; waiting requests fail with EINTR. Safe if not started. */
void locks_stop(struct locks *lk);
/* Frees the table. Safe on NULL. */
void locks_free(struct locks *lk);

/* Connection thread (or the mount's, for the first connection), before
 * the pending requests are resent: the session is up on daemon instance
 * boot_id with AUTH flags (PFS_AUTH_*). restarted: boot_id differs from
 * the previous connection's (reclaim). Never blocks but on the module's
 * lock. */
void locks_connected(struct locks *lk, uint64_t boot_id, uint32_t auth_flags, bool restarted);
/* Connection thread: a LOCK_WAKE push (payload borrowed; a malformed
 * one is ignored): wakes the requests waiting for its file. Safe on a
 * NULL lk. Never blocks but on the module's lock. */
void locks_wake_push(struct locks *lk, const uint8_t *payload, size_t len);

/* SETLK of m (filled but for PFS_LKF_WAIT; flags is 0 or PFS_LKF_FLOCK),
 * for the kernel's request req on inode nodeid (for log lines). sleep:
 * wait for a conflicting lock to go. Returns 0, -EAGAIN (conflict and
 * !sleep), -EINTR (interrupted or unmounting), -ENOLCK, or another -errno
 * of the server. req may be NULL (no FUSE INTERRUPT then). A FUSE thread;
 * may wait a long time (F_SETLKW). */
int locks_setlk(struct locks *lk, fuse_req_t req, struct pfs_lock_req *m, bool sleep,
		uint64_t nodeid);
/* GETLK of m, retried during grace (for request req, for INTERRUPT). On
 * 0 *rep holds the reply (the caller frees it); else -EINTR, -ENOLCK or
 * the server's -errno. A FUSE thread. */
int locks_getlk(struct locks *lk, fuse_req_t req, const struct pfs_lock_req *m,
		struct rpc_reply *rep);
/* close(2): drops owner's POSIX locks on fh (UNLOCK_OWNER). Returns 0,
 * -EIO if a lock of this owner on this file was lost since it was taken,
 * or the server's -errno. A FUSE thread. */
int locks_unlock_owner(struct locks *lk, const struct pfs_creds *cr, const struct pfs_fh *fh,
		       uint64_t owner);

#endif /* PODFS_LOCKS_I_H */
