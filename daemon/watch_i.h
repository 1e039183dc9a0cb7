/* watch_i.h: changes made beside podfs (directly in the exported
 * directory on the coordinator's host) turned into invalidation pushes.
 *
 * podfsd watches the export's filesystem with fanotify (a filesystem mark,
 * FAN_REPORT_DFID_NAME + FAN_REPORT_FID [+ FAN_REPORT_TARGET_FID]): event
 * file handles are the kernel handles name_to_handle_at() gives, so they
 * map to interest keys (handles_key_kernel) without any lookup. Events made
 * by podfsd itself are skipped: its own operations are pushed precisely by
 * dispatch.c. Events on objects nobody caches cost one hash and one table
 * probe. The queue is unlimited; should events still be lost
 * (FAN_Q_OVERFLOW), every client reconnects and revalidates.
 *
 * Without fanotify (no CAP_SYS_ADMIN, or a kernel/filesystem without FID
 * reporting), podfsd logs one notice and runs without it: changes made
 * beside podfs are then seen by clients only through revalidation.
 *
 * Loop thread only.
 */
#ifndef PODFSD_WATCH_I_H
#define PODFSD_WATCH_I_H

struct pfsd;

/* Starts watching d's export (after daemonizing: it records our pid).
 * Never fails: without a watcher it logs why and returns. */
void watch_start(struct pfsd *d);
/* Stops watching (closes the poll handle; freed in its close callback). */
void watch_stop(struct pfsd *d);

#endif /* PODFSD_WATCH_I_H */
