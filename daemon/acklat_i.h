/* acklat_i.h: how long a change's reply waits for one client's
 * acknowledgement of its invalidation, and what happens when that
 * client is late.
 *
 * A client's deadline follows its own record: a few times the largest
 * push -> PUSH_ACK delay it showed lately (a maximum that halves every
 * ACKLAT_HALF_MS, but never below the smoothed delay, so a slow link
 * keeps its long deadline while idle), never under the floor (podfsd
 * --ack-timeout) nor over the cap (PFSD_ACK_WAIT_MS). A client that is
 * slow under load thus gets more time than one that was quick and
 * stopped. At the deadline, a client that sent a frame within its
 * deadline is running: it gets another deadline, up to the cap, past which it is cut
 * off (its connection closed: it revalidates); one that sent nothing is
 * stalled: it falls behind (push.c: changes stop waiting for it until it
 * has acknowledged what was pushed to it).
 *
 * Pure logic over the caller's clock (milliseconds, never going back);
 * no libuv. Not thread-safe: podfsd uses it on its loop thread.
 */
#ifndef PODFSD_ACKLAT_I_H
#define PODFSD_ACKLAT_I_H

#include <stdbool.h>
#include <stdint.h>

#define ACKLAT_MULT 3          /* deadline: this many times the delay */
#define ACKLAT_HALF_MS 4000    /* the maximum's half-life */
#define ACKLAT_SAMPLE_MAX 60000 /* a longer delay counts as this */

/* One connection's record. Zero-initialised: no delay seen yet. */
struct acklat {
	uint32_t srtt8;  /* smoothed delay, ms, times 8 (each new sample moves
			  * the delay by an eighth of the difference: TCP's srtt) */
	uint32_t max;    /* the largest delay seen, ms, as of max_at */
	uint64_t max_at; /* when max was last set */
	uint32_t samples; /* delays noted */
};

/* Notes a push -> acknowledgement delay of ms (also a handshake's round
 * trip, the first hint of a link's delay) measured at now. */
void acklat_sample(struct acklat *l, uint64_t now, uint64_t ms);
/* The smoothed delay, ms. */
static inline uint32_t acklat_srtt(const struct acklat *l)
{
	return l->srtt8 / 8;
}
/* The largest recent delay at now: max decayed by its age (halving every
 * ACKLAT_HALF_MS), and at least the smoothed delay. */
uint32_t acklat_recent(const struct acklat *l, uint64_t now);
/* The client's deadline at now, ms from the push: ACKLAT_MULT times
 * acklat_recent, at least floor_ms, at most cap_ms (floor_ms <= cap_ms). */
uint32_t acklat_deadline(const struct acklat *l, uint64_t now, uint32_t floor_ms, uint32_t cap_ms);

/* When a wait for a client's acknowledgement began (acklat_wait_began). */
enum ackstart {
	ACKSTART_NOT_YET, /* the client cannot be late yet: look again at *next */
	ACKSTART_BEGAN,   /* at *since: judge it (acklat_expired) */
};

/* When a wait for a client's acknowledgement of push number target,
 * noted at noted, began. A push that went out at once (held false)
 * began then. One that was held in its session's FIFO, behind requests
 * of that client in flight on the daemon (the client must see their
 * replies first), begins when it goes out: until then the client cannot
 * acknowledge it, and while those requests run on the daemon's workers
 * (working) its silence is the daemon's own delay, up to cap_ms from
 * noted. Held by requests that wait for something else (another client
 * returning its delegations, a listing another client's request is
 * making), or past cap_ms, it began when noted, as a push sent at once
 * (the client is judged by its frames: running or silent). sent:
 * the pushes written on the connection by now; flushed: when pushes held
 * there last went out (a later flush than this push's only gives more
 * time). wait: the client's deadline (acklat_deadline). */
enum ackstart acklat_wait_began(bool held, uint64_t target, uint64_t sent, bool working,
				uint64_t flushed, uint64_t noted, uint64_t now, uint32_t wait,
				uint32_t cap_ms, uint64_t *since, uint64_t *next);

/* What a wait past its deadline turns into (acklat_expired). */
enum ackexp {
	ACKEXP_EXTEND, /* the client is running: wait another deadline */
	ACKEXP_BEHIND, /* stalled: stop waiting for it */
	ACKEXP_CUTOFF, /* running, but silent past the cap: close it */
};

/* A wait for one client's acknowledgement, begun at since, is past its
 * deadline at now; the client's last frame arrived at rx (0: none), and
 * window (ms) is its deadline now (acklat_deadline). A client that sent
 * a frame within the last window is running. Returns ACKEXP_EXTEND for a
 * running client before since + cap_ms, ACKEXP_CUTOFF for one at or past
 * it, ACKEXP_BEHIND for a silent one. */
enum ackexp acklat_expired(uint64_t now, uint64_t since, uint64_t rx, uint32_t window,
			   uint32_t cap_ms);

/* A recall's wait for a delegation's holder (docs/delegation.md,
 * "Recall"), begun at since, checked at now. last: the holder's last sign
 * of life, at least since (its last frame on any of its connections, or
 * now while one of its requests runs: its silence is then the daemon's).
 * The holder's changes exist nowhere else, so it is given far longer than
 * an invalidation's deadline: ACKEXP_BEHIND if it has been silent for
 * silent_ms (its delegations are revoked), else ACKEXP_CUTOFF at or past
 * since + cap_ms (a holder that runs but never returns them), else
 * ACKEXP_EXTEND, with *next the time to check again. silent_ms <= cap_ms. */
enum ackexp acklat_recall_expired(uint64_t now, uint64_t since, uint64_t last, uint32_t silent_ms,
				  uint32_t cap_ms, uint64_t *next);

#endif /* PODFSD_ACKLAT_I_H */
