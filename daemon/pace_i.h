/* pace_i.h: pacing a connection's READ replies.
 *
 * A READ's reply exists in podfsd's memory from the moment a worker
 * reads its data until the connection's socket takes the last byte. A
 * client that reads its socket slower than the workers read the disk
 * (64 hosts on a few CPUs, a slow link, a client that stopped) would
 * otherwise have every READ it has in flight read, coded and queued at
 * once: about its readahead window per connection, all of it resident.
 * So a connection's READ starts only while the reply bytes of its READs
 * being made (their asked size) and the bytes queued on it but not yet
 * taken by its socket (conn_queued) are under read-queue (limits_i.h:
 * lim_read_may_start); the others wait on the connection's FIFO, in the
 * order they came, and start as its socket drains. They wait: no error,
 * no retry. The kernel's socket buffer beside it keeps the client fed
 * meanwhile.
 *
 * A paced READ has not run: it registered no interest and read nothing,
 * so it is not among its session's ordered requests (push.c) until it
 * starts, and a push need not wait for it; its reply bound (lim_reply_
 * bound) is charged to the connection's memory only when it starts.
 * Other requests are not paced (their replies are small or rare).
 *
 * Loop thread only. Callers: server.c (above). Below: conn.c, limits.c.
 */
#ifndef PODFSD_PACE_I_H
#define PODFSD_PACE_I_H

#include <stdbool.h>
#include <stddef.h>

#include "conn_i.h"

struct req;

/* Whether r must wait for its turn: r is a READ (reply bound r->pace)
 * and its connection's READ replies fill read-queue or paced READs wait
 * already. If so, r is put at the tail of its connection's FIFO. */
bool pace_hold(struct req *r);
/* r starts: its reply bound counts in its connection's busy bytes until
 * pace_done (nothing for a request that is not a READ). */
void pace_start(struct req *r);
/* r's reply was queued (or dropped): it no longer counts as being
 * made. Idempotent. */
void pace_done(struct req *r);
/* The next paced READ of c that may start now, taken off the FIFO, or
 * NULL. None starts while the daemon is over its memory and c's host
 * over its share (lim_over_share): c then waits on d->reads_held for
 * pace_resume. Otherwise a key holder's READs, charged only their own
 * bytes while they wait, started past the budget: read-queue on each of
 * its connections. */
struct req *pace_next(struct conn *c);
/* Memory was let go: the daemon is under its budget (host_mem NULL), or
 * the host whose memory host_mem counts fell below its share. The
 * connections of d->reads_held concerned start their paced READs again
 * (their drain callback). */
void pace_resume(struct pfsd *d, const size_t *host_mem);
/* c is off d->reads_held (it closes). Idempotent. */
void pace_unhold(struct conn *c);
/* Any paced READ of c, taken off the FIFO (c closes: they are dropped),
 * or NULL. */
struct req *pace_take(struct conn *c);

#endif /* PODFSD_PACE_I_H */
