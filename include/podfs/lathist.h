/* lathist.h: request latency histograms, cheap enough for every call.
 *
 * A latency in microseconds falls into one of LATHIST_BUCKETS buckets:
 * four per power of two (so a bucket is at most 19% wide), from 1 us to
 * about an hour; the first bucket holds everything under 1 us and the
 * last everything above. A quantile is answered with the upper bound of
 * the bucket it falls in: never lower than the true value, at most 19%
 * higher. Pure logic; the counters are the caller's (atomic in client_i.h).
 */
#ifndef PODFS_LATHIST_H
#define PODFS_LATHIST_H

#include <stdint.h>

#define LATHIST_SUB 4     /* buckets per power of two */
#define LATHIST_OCTAVES 32 /* 1 us .. 2^32 us (71 min) */
#define LATHIST_BUCKETS (LATHIST_SUB * LATHIST_OCTAVES)

/* The bucket of a latency of us microseconds. */
unsigned lathist_bucket(uint64_t us);

/* The largest latency (us) that falls into bucket b. */
uint64_t lathist_upper(unsigned b);

/* The q-quantile (0 < q <= 1) of the latencies counted in counts[]
 * (LATHIST_BUCKETS of them), in us; 0 if none was counted. */
uint64_t lathist_quantile(const uint64_t counts[LATHIST_BUCKETS], double q);

#endif /* PODFS_LATHIST_H */
