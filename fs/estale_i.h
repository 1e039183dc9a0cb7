/* estale_i.h: ESTALE from OPEN, and the VFS's retry.
 *
 * The VFS retries an open that failed with ESTALE once, after looking
 * the name up afresh (LOOKUP_REVAL); a second ESTALE would reach the
 * application. The retry's open is recognised by its thread and by the
 * inode its fresh lookup returned: it is taken even if that file lost its
 * last name too (the removal raced with this very open, and the file it
 * found is a fair answer). Slots by thread id; a collision costs a retry.
 * An armed slot counts for ESTALE_RETRY_NS.
 *
 * Pure logic on a struct estale (embedded in struct client, initialised
 * with ESTALE_INIT). Every function may be called from any thread.
 */
#ifndef PODFS_ESTALE_I_H
#define PODFS_ESTALE_I_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define ESTALE_SLOTS 16
#define ESTALE_RETRY_NS (1000LL * 1000 * 1000)

struct estale_slot {
	pid_t tid;	/* 0: free */
	uint64_t ino;	/* the nodeid the retry's lookup returned (0: none yet) */
	int64_t when;	/* CLOCK_MONOTONIC ns of the ESTALE */
};

struct estale {
	pthread_mutex_t lock; /* the slots */
	struct estale_slot slot[ESTALE_SLOTS];
};

#define ESTALE_INIT { .lock = PTHREAD_MUTEX_INITIALIZER }

/* An OPEN is answered ESTALE to thread tid: arms its slot. */
void estale_arm(struct estale *es, pid_t tid);

/* A lookup by thread tid returned nodeid ino: recorded if tid's slot is
 * armed (the retry's fresh lookup). */
void estale_looked(struct estale *es, pid_t tid, uint64_t ino);

/* Is this open of ino by tid the VFS's retry (armed, looked up ino, in
 * time)? Disarms tid's slot either way. Called at every open, so that
 * only the first open after the ESTALE can be taken for the retry. */
bool estale_retry(struct estale *es, pid_t tid, uint64_t ino);

#endif /* PODFS_ESTALE_I_H */
