/* bg_i.h: the skeleton every background thread of podfs shares.
 *
 * A module that runs a loop in the background (cache.c: FORGET and
 * REVALIDATE; locks.c: reclaim; wb.c: writers; pcache.c: worker and
 * start-up scan) embeds a struct bg: one mutex that guards the module's
 * own state and the stop flag, one condition variable timed by
 * CLOCK_MONOTONIC (a wall-clock step must not stretch or cut a wait), and
 * the threads it started, which all run until bg_stop.
 *
 *   pthread_mutex_lock(&m->bg.lock);
 *   while (!m->bg.stop) {
 *           if (work) { ...drop the lock, do it, take it again...; continue; }
 *           bg_wait(&m->bg);
 *   }
 *   pthread_mutex_unlock(&m->bg.lock);
 *
 * The module may wait on conditions of its own with bg.lock as their
 * mutex. Nothing here logs.
 */
#ifndef PODFS_BG_I_H
#define PODFS_BG_I_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct bg {
	pthread_mutex_t lock; /* the owner's state, and stop */
	pthread_cond_t cond;  /* CLOCK_MONOTONIC; the owner's threads wait here */
	bool stop;            /* set by bg_stop (under lock), never cleared */
	pthread_t *thr;       /* threads started and not joined yet */
	unsigned nthr;
};

/* Initialises b: no thread, stop false. Returns 0, or -errno if the
 * mutex or the condition variable cannot be made (b is then unusable and
 * needs no bg_fini). Any thread, before b is shared. */
int bg_init(struct bg *b);

/* Destroys b's mutex and condition variable and frees its thread list.
 * The threads must have been stopped (bg_stop), or never started. */
void bg_fini(struct bg *b);

/* Starts one more thread running fn(arg), named "pfs:" + name (at most
 * 11 characters: what top -H, ps -L, perf and gdb show). Returns 0, or
 * -errno (no thread started: -ENOMEM, or pthread_create's error,
 * negated). The thread ends
 * when fn returns; fn should return once it sees b->stop. Called by the
 * owner's start-up (one thread at a time, not concurrently with bg_stop). */
int bg_start(struct bg *b, const char *name, void *(*fn)(void *), void *arg);
/* Names thread t "pfs:" + name, as bg_start does (a longer name is cut). */
void bg_name(pthread_t t, const char *name);

/* Sets b->stop under b->lock, wakes every waiter on b->cond and joins
 * every thread started. Safe to call with no thread started and more
 * than once. Must not be called by one of b's threads, nor with b->lock
 * held. */
void bg_stop(struct bg *b);

/* Wakes one (bg_wake) or every (bg_wake_all) thread waiting on b->cond.
 * The caller holds b->lock (so that no wake-up is lost between a
 * waiter's check and its wait). */
void bg_wake(struct bg *b);
void bg_wake_all(struct bg *b);

/* Waits on b->cond, the caller holding b->lock (released meanwhile, held
 * again on return): until a wake-up (bg_wait), or at most ns nanoseconds
 * (bg_wait_ns; ns <= 0 returns at once). Wake-ups may be spurious: the
 * caller checks its condition again. */
void bg_wait(struct bg *b);
void bg_wait_ns(struct bg *b, int64_t ns);

#endif /* PODFS_BG_I_H */
