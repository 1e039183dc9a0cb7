/* clock.h: CLOCK_MONOTONIC for timeouts and stamps on both sides: the
 * time now, absolute deadlines for pthread_cond_timedwait, and condition
 * variables that wait on this clock (a wall-clock step must not stretch
 * or cut a timeout). Any thread.
 */
#ifndef PODFS_CLOCK_H
#define PODFS_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* Nanoseconds of CLOCK_MONOTONIC. */
static inline int64_t pfs_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Milliseconds of CLOCK_MONOTONIC. */
static inline int64_t pfs_mono_ms(void)
{
	return pfs_mono_ns() / 1000000;
}

/* Whether timespec a comes before timespec b (of the same clock). */
static inline int pfs_ts_before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* The CLOCK_MONOTONIC time ns nanoseconds from now (ns >= 0), as the
 * absolute deadline of pthread_cond_timedwait on a condition variable
 * made by pfs_cond_init_mono. */
static inline struct timespec pfs_deadline_ns(int64_t ns)
{
	struct timespec ts;
	int64_t t = pfs_mono_ns() + (ns > 0 ? ns : 0);

	ts.tv_sec = (time_t)(t / 1000000000LL);
	ts.tv_nsec = (long)(t % 1000000000LL);
	return ts;
}

/* Initialises *cond to time its waits by CLOCK_MONOTONIC. Returns 0 or
 * the error of pthread_cond_init (an errno value, as pthreads do). */
static inline int pfs_cond_init_mono(pthread_cond_t *cond)
{
	pthread_condattr_t ca;
	int rc = pthread_condattr_init(&ca);

	if (rc)
		return rc;
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	rc = pthread_cond_init(cond, &ca);
	pthread_condattr_destroy(&ca);
	return rc;
}

#endif /* PODFS_CLOCK_H */
