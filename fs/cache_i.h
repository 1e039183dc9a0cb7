/* cache_i.h: keeping the kernel's long-lived caches coherent.
 *
 * Three jobs, one module:
 *
 *  - The push/reply race. A reply computed by the server before a change
 *    can reach the kernel after the push for that change was applied (the
 *    push thread and the FUSE thread run independently); the kernel would
 *    then cache the stale reply for the full timeout. Every applied push
 *    is numbered and its handle remembered in a ring; a FUSE thread takes
 *    the number before it sends a request (cache_seq), and when it
 *    replies (between cache_gate_enter/leave) asks cache_pushed_since for
 *    the objects of the reply: if one was pushed meanwhile it replies
 *    with timeout 0. The push thread numbers a push (under the gate's
 *    write side) before it calls the kernel, so either the reply sees the
 *    number or the kernel sees the invalidation after the reply.
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
 * Never call fuse_lowlevel_notify_* from the connection thread:
 * invalidating pages can wait for a READ whose reply that thread must
 * deliver. This module calls them from its own thread; ops.c from the
 * push thread. Thread-safe unless noted.
 */
#ifndef PODFS_CACHE_I_H
#define PODFS_CACHE_I_H

#include <stdbool.h>
#include <stdint.h>

#include "podfs/codec.h"

struct client;
struct cache;

/* Creates the module (its thread starts with cache_start). 0 or -ENOMEM. */
int cache_new(struct client *c, struct cache **out);
/* Starts the background thread. 0 or -errno. */
int cache_start(struct cache *k);
/* Stops the thread (drops queued FORGETs); the gate keeps working. */
void cache_stop(struct cache *k);
/* Stops (if needed) and frees. Safe on NULL. */
void cache_free(struct cache *k);

/* The current push number; take it before sending a request. */
uint64_t cache_seq(struct cache *k);
/* Connection thread, as a push arrives: numbers a push about fh
 * (INVAL_INODE: the object; INVAL_ENTRY: the parent) and returns its
 * number. Numbering on arrival (not when the push thread gets to it)
 * lets an OPEN whose reply came after the push see that its cached
 * pages are about to be invalidated. */
uint64_t cache_note_push(struct cache *k, const struct pfs_fh *fh);
/* Push thread: pushes up to number n have been given to the kernel. */
void cache_set_applied(struct cache *k, uint64_t n);
/* The highest number given to the kernel: pushes after it may still be
 * queued (cache_pushed_since(k, cache_applied(k), fh) asks "is a push
 * about fh received but perhaps not applied?"). */
uint64_t cache_applied(struct cache *k);
/* Numbers an invalidation of everything (reconnect). */
void cache_note_all(struct cache *k);

/* Hold the gate while deciding a timeout and replying to the kernel. */
void cache_gate_enter(struct cache *k);
void cache_gate_leave(struct cache *k);
/* True if a push about fh (or about everything) was numbered after seq.
 * fh may be NULL (then only "everything" counts). Call inside the gate. */
bool cache_pushed_since(struct cache *k, uint64_t seq, const struct pfs_fh *fh);

/* inode_table forget callback (arg is the struct cache). */
void cache_forget_cb(void *arg, const struct pfs_fh *fh);

/* Connection thread: a connection came up again after a drop. Only
 * queues the revalidation for the background thread. */
void cache_reconnected(struct cache *k);

/* The server answered op with ENOSYS: remember it (never sent again). */
void cache_set_nosys(struct cache *k, uint16_t op);
bool cache_nosys(struct cache *k, uint16_t op);

/* Counters for tests and `podfs status` (relaxed atomics). */
struct cache_stats {
	uint64_t revalidated;  /* items sent in REVALIDATE */
	uint64_t reval_changed; /* items reported changed or gone */
	uint64_t forgets;       /* handles sent in FORGET */
};
void cache_get_stats(struct cache *k, struct cache_stats *st);

#endif /* PODFS_CACHE_I_H */
