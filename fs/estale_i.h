/* estale_i.h: ESTALE, and the VFS's retry.
 *
 * The VFS retries a call on a path that failed with ESTALE once, after
 * looking the path up afresh (LOOKUP_REVAL); a second ESTALE would
 * reach the application.
 *
 * A lookup or a name operation (MKNOD, MKDIR, SYMLINK, LINK, UNLINK,
 * RMDIR, RENAME, CREATE) is answered ESTALE by the daemon when a
 * directory it names was removed. The pushes of a removal are
 * acknowledged before the removal returns, so a removal that another
 * host had finished before the call began has already dropped the
 * kernel's entries: the call ran at the same time as the removal. The
 * retry then finds the directory the name holds now. If the retry meets
 * a removed directory too (the path changed again while it ran), the
 * answer is ENOENT, as a local file system gives for a name in a
 * directory removed while the call ran (estale_again).
 *
 * An open is answered ESTALE when the file it found lost its name to
 * another host's change. The retry's open is recognised by its thread
 * and by the inode a lookup returned since the ESTALE: it is taken even
 * if that file lost its last name too (the removal raced with this very
 * open, and the file it found is a fair answer). The lookup is usually the
 * retry's own, by the same thread; but a thread whose lookup finds
 * another thread's lookup of the same name in flight waits for that one
 * and uses its answer (the kernel's d_alloc_parallel): so while a slot is
 * armed, the last ESTALE_SEEN inodes any lookup returned count too.
 * Slots by thread id; a collision costs a retry. An armed slot counts
 * for ESTALE_RETRY_NS.
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
#define ESTALE_SEEN 8

struct estale_slot {
	pid_t tid;	/* 0: free */
	uint64_t ino;	/* the nodeid the retry's lookup returned (0: none yet) */
	int64_t when;	/* CLOCK_MONOTONIC ns of the ESTALE */
};

struct estale_seen {
	uint64_t ino;	/* a nodeid a lookup returned (0: none) */
	int64_t when;	/* CLOCK_MONOTONIC ns of that lookup */
};

struct estale {
	pthread_mutex_t lock; /* everything below */
	struct estale_slot slot[ESTALE_SLOTS];
	unsigned armed;	/* slots armed (maybe expired): lookups noted if > 0 */
	struct estale_seen seen[ESTALE_SEEN]; /* ring: the latest lookups */
	unsigned next;	/* where the next lookup goes in seen[] */
};

#define ESTALE_INIT { .lock = PTHREAD_MUTEX_INITIALIZER }

/* An OPEN is answered ESTALE to thread tid: arms its slot. */
void estale_arm(struct estale *es, pid_t tid);

/* The daemon answered a lookup or a name operation of thread tid
 * ESTALE. Returns true if tid's slot is armed and in time: this is the
 * VFS's retry meeting a removed directory again (answer ENOENT), and
 * the slot is disarmed. Else arms the slot (answer ESTALE) and returns
 * false. */
bool estale_again(struct estale *es, pid_t tid);

/* A lookup by thread tid returns nodeid ino (called before the reply,
 * which the retry's OPEN may follow at once): recorded in tid's slot if
 * armed (the retry's own fresh lookup), and in the ring while any slot
 * is armed. */
void estale_looked(struct estale *es, pid_t tid, uint64_t ino);

/* Is this open of ino by tid the VFS's retry (armed, in time, and ino
 * returned by tid's lookup or by any lookup since the ESTALE)? Disarms
 * tid's slot either way. Called at every open, so that
 * only the first open after the ESTALE can be taken for the retry. */
bool estale_retry(struct estale *es, pid_t tid, uint64_t ino);

#endif /* PODFS_ESTALE_I_H */
