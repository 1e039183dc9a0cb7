/* gate_i.h: the push/reply race gate.
 *
 * A reply computed by the server before a change can reach the kernel
 * after the push for that change was applied (the push thread and the
 * FUSE thread run independently); the kernel would then cache the stale
 * reply for the full timeout. Every push is numbered and its handle
 * remembered in a ring; a FUSE thread takes the number before it sends a
 * request (gate_seq), and when it replies (between gate_enter and
 * gate_leave) asks gate_pushed_since for the objects of the reply: if one
 * was pushed meanwhile it replies with timeout 0. Pushes are numbered
 * under the gate's write side before the push thread calls the kernel,
 * so either the reply sees the number or the kernel sees the
 * invalidation after the reply.
 *
 * Pure logic: no I/O, no kernel, no other module. Every function may be
 * called from any thread.
 */
#ifndef PODFS_GATE_I_H
#define PODFS_GATE_I_H

#include <stdbool.h>
#include <stdint.h>

#include "podfs/codec.h"

struct gate;

/* Pushes remembered one by one: a question about more than this many
 * pushes back is answered "pushed". */
#define GATE_RING 1024

/* Creates the gate; the first number is 1 (gate_seq), none applied.
 * Returns 0 with *out set, or -ENOMEM. */
int gate_new(struct gate **out);
/* Frees it. Safe on NULL. */
void gate_free(struct gate *g);

/* The current push number; take it before sending a request. */
uint64_t gate_seq(struct gate *g);

/* Numbers a push about fh (INVAL_INODE: the object; INVAL_ENTRY: the
 * parent) and returns its number. The connection thread calls it as the
 * push arrives: numbering on arrival (not when the push thread gets to
 * it) lets an OPEN whose reply came after the push see that its cached
 * pages are about to be invalidated. Takes the gate's write side. */
uint64_t gate_note_push(struct gate *g, const struct pfs_fh *fh);

/* Numbers an invalidation of everything (a connection dropped: pushes
 * may be lost; a reconnect's revalidation). Takes the write side. */
void gate_note_all(struct gate *g);

/* Push thread: pushes up to number n have been given to the kernel
 * (the highest n given so far counts). */
void gate_set_applied(struct gate *g, uint64_t n);

/* The highest number given to the kernel: pushes after it may still be
 * queued (gate_pushed_since(g, gate_applied(g), fh) asks "is a push
 * about fh received but perhaps not applied?"). */
uint64_t gate_applied(struct gate *g);

/* True if a push about fh itself was numbered after the last one given
 * to the kernel (gate_applied): received, perhaps acknowledged, maybe not
 * applied yet. Invalidations of everything (gate_note_all) do not count:
 * what they stand for is not in the push thread's queue. More than
 * GATE_RING pushes not applied count as one about fh. Call inside the
 * gate for an answer that holds until gate_leave. */
bool gate_push_pending(struct gate *g, const struct pfs_fh *fh);

/* Hold the gate (its read side) while deciding a timeout and replying to
 * the kernel. Never across a request to the daemon or disk I/O: pushes
 * wait for it. */
void gate_enter(struct gate *g);
void gate_leave(struct gate *g);

/* True if a push about fh (or about everything) was numbered after seq,
 * or if more than GATE_RING pushes were. fh may be NULL (then only
 * "everything" and the ring's overflow count). Call inside the gate for
 * an answer that holds until gate_leave; outside it, the answer may be
 * old at once. */
bool gate_pushed_since(struct gate *g, uint64_t seq, const struct pfs_fh *fh);

#endif /* PODFS_GATE_I_H */
