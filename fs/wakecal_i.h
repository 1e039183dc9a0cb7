/* wakecal_i.h: how long a thread blocked on another CPU takes to run once
 * woken, after that CPU had nothing to do for a while: a few microseconds
 * on a machine whose idle CPUs poll or sleep lightly, tens where a
 * virtual CPU halts and the host must schedule it again. loop.c decides
 * from it whether a keeper thread spins (loop_wake_latency_ns).
 */
#ifndef PODFS_WAKECAL_I_H
#define PODFS_WAKECAL_I_H

#include <stdint.h>

/* Samples taken, and the idle time before each (ns). */
#define WAKECAL_SAMPLES 9
#define WAKECAL_IDLE_NS (2 * 1000 * 1000)
/* A sample waits this long for the woken thread, then counts as this. */
#define WAKECAL_MAX_NS (100 * 1000 * 1000)

/* The median of WAKECAL_SAMPLES wake-ups of a thread pinned to the second
 * CPU this process may use, by the caller pinned to the first (its
 * affinity is restored before returning): ns, or -1 if the process may
 * run on one CPU only or a call failed. Never waits for the thread longer
 * than WAKECAL_MAX_NS per sample, however late it runs. late (NULL in
 * podfs): called by the woken thread before each of its waits, with arg
 * (tests make the thread late with it). Any thread; about 20 ms. */
int64_t wakecal_ns(void (*late)(void *), void *arg);

#endif /* PODFS_WAKECAL_I_H */
