/* lsqueue_i.h: the queue of directories whose listings are fetched ahead
 * of a walk (lsfetch_i.h), a bounded ring ordered by key.
 *
 * A depth-first walk opens a directory's subdirectories in its order, and
 * all that lies below the first before the second. So each batch of
 * directories queued together (the subdirectories one reading of a
 * directory hands the kernel, those one listing fetched ahead names) gets
 * a base above every earlier batch's (lsq_new_base), and its i-th
 * directory the key base - i: the first of a batch is on top, a later
 * batch (the subdirectories of those, met as the walk goes down) goes
 * above the whole batch, and a batch continued later (the next reply of
 * the same reading, with its own next indexes) goes below what the
 * earlier replies queued and above all queued before them. The highest
 * key is taken first; when the ring is full the lowest gives way.
 *
 * Pure data: the caller locks (lsfetch's bg.lock) and owns what the items
 * hold. A leaf; tests/unit/test_lsqueue.c.
 */
#ifndef PODFS_LSQUEUE_I_H
#define PODFS_LSQUEUE_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "podfs/codec.h"

struct inode;

#define LSQ_MAX 512
/* Indexes in one batch, at most (the keys of two batches never meet). */
#define LSQ_STRIDE (1u << 20)

/* A directory queued: its inode (one lookup held, the caller's), or, for
 * one met in a listing fetched ahead, its entry (the inode is made when
 * it is fetched: one made for each item queued would mostly be forgotten
 * again, and a FORGET racing with the walk's own lookup of it makes its
 * listing stale). */
struct lsq_item {
	struct inode *ip; /* NULL: e names it */
	struct pfs_entry e;
	int64_t at;   /* CLOCK_MONOTONIC ns, when queued */
	uint64_t key; /* the ring's order: the highest is taken first */
	struct pfs_creds cr;
};

struct lsqueue {
	struct lsq_item q[LSQ_MAX]; /* q[head] has the highest key */
	size_t head, n;
	uint64_t base; /* the last batch's base */
};

/* The base of a new batch: above every earlier one's keys. */
uint64_t lsq_new_base(struct lsqueue *q);
/* The key of index i (< LSQ_STRIDE) of the batch of base. */
static inline uint64_t lsq_key(uint64_t base, uint32_t i)
{
	return base - i;
}

enum lsq_pushed {
	LSQ_IN,         /* *it is in */
	LSQ_PUSHED_OUT, /* *it is in; the ring was full: *out gave way */
	LSQ_REFUSED,    /* full, and *it had the lowest key: it is *out */
};
/* Puts *it in by its key, after the items of an equal or higher key. If
 * the ring was full, the item of the lowest key gives way (into *out),
 * *it itself if its key is the lowest. */
enum lsq_pushed lsq_push(struct lsqueue *q, const struct lsq_item *it, struct lsq_item *out);
/* The item of the highest key (n > 0). */
const struct lsq_item *lsq_top(const struct lsqueue *q);
/* Takes the item of the highest key off (n > 0). */
struct lsq_item lsq_pop_top(struct lsqueue *q);
/* Takes the item of the lowest key off (n > 0). */
struct lsq_item lsq_pop_bottom(struct lsqueue *q);

#endif
