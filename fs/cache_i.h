/* cache_i.h: keeping the daemon's interest and the kernel's long-lived
 * caches coherent across forgets and reconnects.
 *
 *  - FORGET: handles of inodes the kernel forgot are batched and sent to
 *    the server asynchronously (it stops pushing for them).
 *
 *  - Reconnect: pushes sent while the connection was down are lost, so
 *    after every reconnect the background thread sends the version of
 *    every cached inode with REVALIDATE (PFS_BATCH_MAX per request) and
 *    invalidates what the server reports changed or gone; a server
 *    without REVALIDATE (ENOSYS) gets everything invalidated.
 *
 *  - What the server lacks: an operation it answered with ENOSYS is
 *    never sent again (cache_set_nosys / cache_nosys).
 *
 * Never call fuse_lowlevel_notify_* from the connection thread:
 * invalidating pages can wait for a READ whose reply that thread must
 * deliver. This module calls them from its own thread; push.c from the
 * push thread. The push/reply race gate is gate.c (gate_i.h).
 * Thread-safe unless noted.
 */
#ifndef PODFS_CACHE_I_H
#define PODFS_CACHE_I_H

#include <stdbool.h>
#include <stdint.h>

#include "podfs/codec.h"

struct client;
struct cache;
struct inode_listed;

/* Creates the module for c (which must hold the gate, the inode table
 * and the rpc table before the thread starts). Its thread starts with
 * cache_start. Returns 0 or -ENOMEM. Start-up thread. */
int cache_new(struct client *c, struct cache **out);
/* Starts the background thread (after fuse_daemonize). Returns 0 or
 * -errno. */
int cache_start(struct cache *k);
/* Stops the thread (queued FORGETs are dropped; a revalidation under way
 * finishes first); FORGETs arriving later are dropped too. Safe if not
 * started, and twice. Not from the module's own thread. */
void cache_stop(struct cache *k);
/* Stops (if needed) and frees. Safe on NULL. */
void cache_free(struct cache *k);

/* inode_table forget callback (arg is the struct cache): queues fh for
 * a FORGET (dropped on ENOMEM, past FORGET_MAX queued, once stopped, or
 * if the server has no FORGET). Any thread, no locks of the inode table
 * held. */
void cache_forget_cb(void *arg, const struct pfs_fh *fh, const struct inode_listed *where);

/* The main connection dropped: pushes may be lost from now until the
 * revalidation after the reconnect ends (cache_current). Any thread. */
void cache_disconnected(struct cache *k);
/* A connection came up again after a drop: only queues the revalidation
 * for the background thread (never blocks; the connection thread calls
 * it). */
void cache_reconnected(struct cache *k);
/* True unless the main connection dropped since the last revalidation
 * ended: the kernel's caches may then hold what another host changed
 * meanwhile (ops_opendir then drops a directory's cached listing). */
bool cache_current(struct cache *k);
/* The reconnect found the server's handles changed (fhmap_i.h): the
 * cache thread finds the cached objects again by name (recover.c), then
 * revalidates. Any thread. */
void cache_handles_changed(struct cache *k);

/* The server answered op with ENOSYS: remember it (never sent again).
 * Only ops 40..71 (caching and data path) are remembered. */
void cache_set_nosys(struct cache *k, uint16_t op);
/* True if the server answered op with ENOSYS before. */
bool cache_nosys(struct cache *k, uint16_t op);

#endif /* PODFS_CACHE_I_H */
