/* sweep_i.h: every PFSD_TICK_MS, podfsd lets go of deleted files it kept
 * openable by handle past PFSD_ORPHAN_MS, clears the interest slots of
 * the sessions that ended since (interest_sweep), sets the handle cache's size
 * to the file descriptors sessions leave free (limits_i.h), and every
 * PFSD_SWEEP_MS closes the cached handles of deleted files
 * (handles_i.h). Loop thread.
 */
#ifndef PODFSD_SWEEP_I_H
#define PODFSD_SWEEP_I_H

struct pfsd;

/* Starts the timer (server_listen). */
void sweep_start(struct pfsd *d);
/* Closes it (server_stop); a sweep running on the pool ends on its own. */
void sweep_stop(struct pfsd *d);

#endif /* PODFSD_SWEEP_I_H */
