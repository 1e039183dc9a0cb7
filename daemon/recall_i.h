/* recall_i.h: the recall of delegations for a request held back (see
 * docs/delegation.md): the RECALL pushes to the holders, and what the
 * table makes of their answers. server.c holds the request among the
 * replies waiting for acknowledgements in between, and runs it again.
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

#endif /* PODFSD_RECALL_I_H */
