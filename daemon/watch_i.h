/* watch_i.h: changes made beside podfs (directly in the exported
 * directory on the coordinator's host) turned into invalidation pushes.
 *
 * podfsd watches the export's filesystem with fanotify (a filesystem mark,
 * FAN_REPORT_DFID_NAME + FAN_REPORT_FID [+ FAN_REPORT_TARGET_FID]): event
 * file handles are the kernel handles name_to_handle_at() gives, so they
 * map to interest keys (handles_key_kernel) without any lookup. Events made
 * by podfsd itself are skipped: its own operations are pushed precisely
 * as they complete (server.c, push.c). Events on objects nobody caches
 * cost one hash and one table probe. The queue is unlimited; should
 * events still be lost (FAN_Q_OVERFLOW), every client reconnects and
 * revalidates.
 *
 * Without fanotify (no CAP_SYS_ADMIN, or a kernel/filesystem without FID
 * reporting), podfsd falls back to inotify on every directory a client
 * was handed (watch_dir): entry changes in those directories and content
 * or attribute changes of their children are pushed. inotify cannot tell
 * podfsd's own changes from others', so there the originator of a change
 * gets its push too. If inotify fails as well, podfsd logs one notice and
 * runs without a watcher: clients then see changes made beside podfs only
 * when they revalidate. PODFSD_WATCH=inotify|none forces a fallback.
 *
 * The pushes go through push.c (push_inval, push_revalidate_all).
 * Loop thread, except watch_dir().
 */
#ifndef PODFSD_WATCH_I_H
#define PODFSD_WATCH_I_H

#include <stdbool.h>
#include <stdint.h>

struct pfsd;
struct watch;
struct pfs_fh;

/* Starts watching d's export (after daemonizing: it records our pid) and
 * sets d->watch. Never fails: without a watcher it logs why and returns
 * (d->watch stays NULL). */
void watch_start(struct pfsd *d);
/* Stops watching (closes the poll handle; shutdown). Idempotent; a
 * no-op without a watcher. */
void watch_stop(struct pfsd *d);
/* Frees the watcher, once the loop is closed and no worker runs. Safe
 * without one. */
void watch_free(struct pfsd *d);
/* inotify fallback: watch directory pathfd (any fd, O_PATH is fine), whose
 * wire handle is fh. A no-op with fanotify or without a watcher. Any
 * thread (w may be NULL). */
void watch_dir(struct watch *w, int pathfd, const struct pfs_fh *fh);
/* Keeps the events of podfsd's own file fd (what, for the log) out of
 * w's queue: the replies file, written twice for each change a client
 * makes. The mark covers the export's whole filesystem, where the state
 * directory usually is too (/var/lib/podfs beside /srv/podfs), and each
 * of those writes woke the loop thread to read an event it then skipped
 * as its own. A no-op without fanotify (w NULL, or inotify, which watches
 * only the export's directories). Loop thread. */
void watch_ignore(struct watch *w, int fd, const char *what);
/* True if w watches the whole export's filesystem (fanotify): every change
 * made beside podfs is pushed. False for the inotify fallback and without
 * a watcher (w NULL). Any thread. */
bool watch_whole(const struct watch *w);

#endif /* PODFSD_WATCH_I_H */
