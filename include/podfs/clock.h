/* clock.h: CLOCK_MONOTONIC in nanoseconds, for timeouts and stamps on
 * both sides. */
#ifndef PODFS_CLOCK_H
#define PODFS_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds of CLOCK_MONOTONIC; any thread. */
static inline int64_t pfs_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

#endif /* PODFS_CLOCK_H */
