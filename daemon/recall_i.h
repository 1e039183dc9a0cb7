/* recall_i.h: the recall of delegations for a request held back (see
 * docs/delegation.md): the RECALL pushes to the holders, and what the
 * table makes of their answers. server.c holds the request among the
 * replies waiting for acknowledgements in between, and runs it again.
 * Also the recall of the holders of what changed beside podfs.
 *
 * Loop thread only.
 */
#ifndef PODFSD_RECALL_I_H
#define PODFSD_RECALL_I_H

#include "req_i.h"

/* Pushes RECALL of r->recall_fh to each session of r->recall_owners that
 * still exists, noting their acknowledgements in r->acks; with
 * r->forewarn, an INVAL_INODE of r->recall_fh's attributes to the other
 * sessions that cache it instead (op_forewarn). */
void recall_push_holders(struct req *r);
/* r's waits are all done (push_acks_done) at now: whether r must wait
 * on for a holder that neither acknowledged nor was silent for
 * --recall-timeout but whose connection went, while its session lives
 * (a reconnect on its way: what it answered under its delegations is
 * sent on the new connection), for at most PFSD_RECALL_WAIT_MS since
 * the first RECALL it owes. RECALL goes again to such a holder that is
 * back; for one that is not, *next (if earlier) becomes the end of its
 * silence (or of those 120 s), when r is looked at again (or sooner: its AUTH reply arms the
 * held replies' timer). */
bool recall_rearm(struct req *r, uint64_t now, uint64_t *next);
/* r's holders are done (acknowledged, stalled or gone): their
 * delegations on r->recall_key end (acknowledged) or are revoked (with a
 * rate-limited warning); r->acks is emptied and r->recall cleared. */
void recall_settle(struct req *r);

/* A change made beside podfs (watch.c) of the object key (fh): the
 * sessions holding a delegation on it or on a file made in it
 * (deleg_i.h) answer lookups, creates, unlinks and attributes there
 * from what they know, which lacks this change, and no request of
 * another session comes to recall them. Each is sent a RECALL, before
 * the change's pushes, as such a request would send it: it sends what
 * it answered, stops answering, and asks again later, its listing
 * fetched again (fs/dirdeleg.c, dd_grant_listing). Nothing waits for
 * its answer, and its entries stay in the table: a later request of
 * another session recalls them (answered at once), and a grant asked
 * again finds them. */
void recall_push_beside(struct pfsd *d, uint64_t key, const struct pfs_fh *fh);

#endif /* PODFSD_RECALL_I_H */
