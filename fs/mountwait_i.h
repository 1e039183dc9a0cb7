/* mountwait_i.h: waiting for the coordinator at mount time, as NFS's
 * retry= and bg (nfs(5)), and the lock that makes one mount point one
 * podfs process.
 *
 * retry=MINUTES bounds how long podfs keeps trying to reach the
 * coordinator before it mounts (default 2 in the foreground, 10000 with
 * bg; 0: one attempt). Only a failure to reach it is retried (refused,
 * unreachable, timed out, name not resolved): a coordinator that answers
 * and refuses (wrong key, export rules, protocol) fails at once. With bg,
 * a first attempt that fails hands the retries to a background child and
 * the command returns 0.
 *
 * A lock file per mount point, in MOUNTWAIT_LOCK_DIR, is held (flock)
 * from the check that nothing is mounted there until the mount is made or
 * given up: a second podfs for the same point (a second mount -a while a
 * bg child still retries) sees it and does not start another mount. The
 * file holds the holder's pid and is removed with the lock. The
 * start-up thread only (before any other thread exists).
 */
#ifndef PODFS_MOUNTWAIT_I_H
#define PODFS_MOUNTWAIT_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MOUNTWAIT_LOCK_DIR "/run/podfs"
#define MOUNTWAIT_RETRY_FG 2        /* minutes: nfs(5)'s foreground default */
#define MOUNTWAIT_RETRY_BG 10000    /* minutes: its bg default */
#define MOUNTWAIT_RETRY_MAX 1000000 /* minutes (about two years) */
#define MOUNTWAIT_BACKOFF_MAX_MS 10000

/* Whether sock_connect's error (-errno) means the coordinator could not
 * be reached (worth another try) rather than that it answered and
 * refused. Pure. */
bool mountwait_transient(int err);

/* The wait before attempt n+1 after n failed ones (n >= 1): 1 s doubling
 * up to MOUNTWAIT_BACKOFF_MAX_MS, less up to a fifth by jitter (0..999,
 * per mille of that fifth), so hosts that boot together spread out. Pure. */
int64_t mountwait_backoff_ms(unsigned n, unsigned jitter);

/* The lock file's name (no directory) for mount point mnt (absolute,
 * resolved): "mount-" then the path escaped as systemd-escape --path
 * does ('/' becomes '-', bytes other than [A-Za-z0-9_.:] and a leading
 * '.' become \xNN), then ".lock"; a name that would pass 255 bytes is
 * "mount-h" and a 64-bit hash in hex instead. Writes at most len bytes,
 * NUL-terminated; len must be at least 256. Pure. */
void mountwait_lock_name(const char *mnt, char *buf, size_t len);

/* A held lock (fd -1: none). */
struct mountwait_lock {
	int fd;
	char *path;
};

/* Takes the lock for mnt in dir (created, mode 0755, if missing) without
 * waiting, and writes our pid into it. Returns 0 with *lk held; -EBUSY
 * if another process holds it (its pid in *holder, 0 if unknown); or
 * another -errno if the lock cannot be made (dir not writable: the
 * caller goes on without one), with lk->fd -1. */
int mountwait_lock(const char *dir, const char *mnt, struct mountwait_lock *lk, pid_t *holder);

/* Writes pid into the held lock file (after a fork hands it on). */
void mountwait_lock_owner(struct mountwait_lock *lk, pid_t pid);

/* Gives the lock up: removes the file and closes it. Nothing if not
 * held. */
void mountwait_unlock(struct mountwait_lock *lk);

/* Only closes this process's descriptor (the parent after handing the
 * lock to a background child, which keeps it). */
void mountwait_lock_forget(struct mountwait_lock *lk);

#endif /* PODFS_MOUNTWAIT_I_H */
