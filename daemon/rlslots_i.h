/* rlslots_i.h: which slot of the replies file (replylog_i.h) a record
 * goes to, shared fairly between the hosts.
 *
 * The file was a ring: record number seq went to slot seq % slots, so
 * each record pushed out the oldest, whoever's it was. A host making
 * changes without end (an untar: thousands a second, a record or two
 * each) then pushed out, within a second or two, the records of every
 * other host, among them those of a host whose connection was down and
 * whose replies were waiting for it: had podfsd been killed then, that
 * host's changes, sent again, ran a second time. The reply cache in
 * memory already shares its budget per host (drc_i.h); this shares the
 * file the same way.
 *
 * Each host (struct rlslots_host: all the sessions from one address,
 * and one for the records an instance before this one wrote) holds its
 * slots in a list, oldest first. A record takes a free slot while there
 * is one. Then, a host holding at least its fair share (the slots over
 * the hosts holding any, itself counted) gives up its own oldest; one
 * below it takes the oldest of the host that holds the most. So a host
 * that writes without end only goes round its own share, and a host
 * that writes little keeps its newest records until it holds its share.
 *
 * Slots freed (a host gone, the records of the start forgotten) are
 * given out again oldest first, after those free before them, as each
 * host's own are: so of two records of one request (a change begun and
 * its reply, an append's and its reply's, or an append's and the record
 * that it was settled as not written) the older is overwritten first,
 * and the next instance never finds the older alone (it would settle an
 * append again, and might cut back a file that changed since).
 *
 * Pure bookkeeping: no I/O and no locks (replylog.c holds its lock
 * around every call).
 */
#ifndef PODFSD_RLSLOTS_I_H
#define PODFSD_RLSLOTS_I_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

/* A host's slots. */
struct rlslots_host {
	TAILQ_ENTRY(rlslots_host) link;
	int32_t head, tail; /* its slots, oldest first (-1: none) */
	uint32_t n;
};

struct rlslots {
	uint32_t n;                   /* slots (0: not made) */
	int32_t *next;                /* a slot's next in its host's list, or in the free list */
	struct rlslots_host **owner;  /* a slot's host, NULL while it is free */
	int32_t free_head, free_tail; /* free slots, given out from the head */
	uint32_t nfree;
	uint32_t holders;             /* hosts holding at least one slot */
	TAILQ_HEAD(, rlslots_host) hosts;
};

/* Makes s: n slots, all free (n >= 1). Aborts without memory. */
void rlslots_init(struct rlslots *s, uint32_t n);
void rlslots_fini(struct rlslots *s);

/* h, holding nothing, shares the slots from now on. */
void rlslots_host_add(struct rlslots *s, struct rlslots_host *h);
/* h's slots are free again (what they hold is of no more use), after
 * those free already, oldest first. */
void rlslots_clear(struct rlslots *s, struct rlslots_host *h);
/* h's slots are free again and h leaves. */
void rlslots_host_remove(struct rlslots *s, struct rlslots_host *h);

/* At the start, before any slot was given out or freed: h holds
 * slot[0, n), oldest first, and the free list is the others, lowest
 * first. False (and nothing changed) if one is out of range, twice in
 * slot, or already held. */
bool rlslots_take(struct rlslots *s, struct rlslots_host *h, const uint32_t *slot, uint32_t n);
/* The slot of h's next record (a free one, else one given up as the top
 * says), now h's newest. */
uint32_t rlslots_alloc(struct rlslots *s, struct rlslots_host *h);

#endif /* PODFSD_RLSLOTS_I_H */
