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
/* r's holders are done (acknowledged, stalled or gone): their
 * delegations on r->recall_key end (acknowledged) or are revoked (with a
 * rate-limited warning); r->acks is emptied and r->recall cleared. */
void recall_settle(struct req *r);

#endif /* PODFSD_RECALL_I_H */
