/* lkranges_i.h: the byte ranges one lock owner's POSIX locks hold on one
 * file, kept as the kernel keeps them, so that podfsd knows how many
 * entries of the kernel's lock table a lock fd takes before it asks for
 * one more (limits lock-ranges and lock-table, limits_i.h).
 *
 * Each range costs the kernel a struct file_lock (about 200 bytes of
 * memory no limit of the process counts), and every lock call on the
 * file walks the file's list of them: without a count, one client
 * setting locks on every other byte filled kernel memory and slowed
 * every other host's locks on that file.
 *
 * One owner's ranges never overlap, and two of the same type never touch
 * (the kernel merges them): a lock replaces what the owner held in its
 * range, and is merged with the owner's ranges of its type right beside
 * it; an unlock cuts its range out, which may split one range in two.
 * A lock of the same type as the range it falls in changes nothing.
 *
 * Pure logic, no locking: the caller serializes (the session's lk_mu).
 */
#ifndef PODFSD_LKRANGES_I_H
#define PODFSD_LKRANGES_I_H

#include <stddef.h>
#include <stdint.h>

/* The end of a lock "to the end of the file" (the kernel's OFFSET_MAX). */
#define LKR_EOF ((uint64_t)INT64_MAX)

struct lkrange {
	uint64_t start, end; /* inclusive; end <= LKR_EOF */
	uint8_t type;        /* PFS_LK_RD or PFS_LK_WR */
};

/* Sorted by start; NULL/0 when empty. */
struct lkranges {
	struct lkrange *v;
	size_t n, cap;
};

/* What setting a range does to an owner's ranges: [lo, hi) of them go,
 * and the nout of out take their place. */
struct lkr_change {
	size_t lo, hi;
	struct lkrange out[3];
	size_t nout;
};

/* Plans setting [start, end] (start <= end; an end past LKR_EOF counts as
 * LKR_EOF) to type in r: PFS_LK_RD, PFS_LK_WR, or PFS_LK_UN to unlock,
 * into *c, and returns how many ranges r would hold then. r is not
 * changed. */
size_t lkranges_plan(const struct lkranges *r, uint64_t start, uint64_t end, uint8_t type,
		     struct lkr_change *c);
/* Makes the change c planned on r, which has not changed since. */
void lkranges_commit(struct lkranges *r, const struct lkr_change *c);
/* Frees r's memory; r is then empty. */
void lkranges_fini(struct lkranges *r);

#endif /* PODFSD_LKRANGES_I_H */
