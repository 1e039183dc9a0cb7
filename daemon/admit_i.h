/* admit_i.h: connections before they authenticate (server.c calls these
 * from its accept, frame and close callbacks): the export rule that
 * admits a new connection's address, and the quota of pending
 * handshakes per source address (the pending-handshake table and the
 * figures are limits.c's; docs/limits.md, "Logins"). Loop thread only.
 */
#ifndef PODFSD_ADMIT_I_H
#define PODFSD_ADMIT_I_H

#include <stdbool.h>

struct conn;
struct pfsd;
struct pfs_srckey;

/* Whether an export rule admits the peer of the new connection c: if
 * so, c takes the rule's options and true is returned; if not, c is
 * closed (conn_close) with one rate-limited log line naming the peer. */
bool admit_rule(struct conn *c);
/* The new connection c is one over PFSD_MAX_CONNS: returns true once
 * the oldest connection of the host with the most is closed to make room
 * (if that host has more than c's would have with c), else closes c and
 * returns false (docs/limits.md, "Connections"). */
bool admit_room(struct conn *c);
/* Counts the new connection c among the pending handshakes of its
 * source, first closing the oldest pending one of that source (at its
 * quota) or of the busiest source (all pending over the daemon's). */
void admit_pending(struct pfsd *d, struct conn *c);
/* Closes the oldest pending handshake from source k (NULL: any) other
 * than keep (NULL: none), if there is one. */
void admit_evict(struct pfsd *d, const struct pfs_srckey *k, struct conn *keep);
/* c authenticated or closed: it no longer counts as pending. */
void admit_done(struct conn *c);

#endif /* PODFSD_ADMIT_I_H */
