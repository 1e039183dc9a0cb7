/* ratelimit_i.h: a token bucket for log lines about hostile input.
 *
 * A flood of bad connections (wrong keys, malformed frames) must not turn
 * into a flood of log lines: RL_BURST lines may go at once, then
 * RL_PER_SEC a second; the lines held back are counted and reported by
 * the next line let through ("N similar log lines suppressed").
 *
 * Pure logic over the caller's clock; no libuv. Not thread-safe: podfsd
 * uses one bucket on its loop thread (pfsd_warn_rl in pfsd_i.h), and one
 * under a mutex for its workers' warnings (warn_allowed in dispatch.c).
 */
#ifndef PODFSD_RATELIMIT_I_H
#define PODFSD_RATELIMIT_I_H

#include <stdbool.h>
#include <stdint.h>

#define RL_BURST 100
#define RL_PER_SEC 20

/* Zero-initialised: a full bucket at the first call. */
struct ratelimit {
	uint64_t stamp;       /* ms: last refill */
	unsigned tokens;
	unsigned suppressed;  /* lines held back since the last one let through */
};

/* Takes a token at time now_ms (any monotonic milliseconds, never going
 * back). Returns true if the caller may log its line; then, if lines were
 * held back before it, it has logged "N similar log lines suppressed"
 * (warning) first. Returns false, and counts the line, when the bucket is
 * empty. */
bool ratelimit_allow(struct ratelimit *rl, uint64_t now_ms);

#endif /* PODFSD_RATELIMIT_I_H */
