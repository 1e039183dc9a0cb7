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

/* How many ranges r holds after setting [start, end] (start <= end; an
 * end past LKR_EOF counts as LKR_EOF) to type: PFS_LK_RD, PFS_LK_WR, or
 * PFS_LK_UN to unlock. r is not changed. */
size_t lkranges_count_after(const struct lkranges *r, uint64_t start, uint64_t end,
			    uint8_t type);
/* Sets [start, end] to type in r, as lkranges_count_after counts it. */
void lkranges_apply(struct lkranges *r, uint64_t start, uint64_t end, uint8_t type);
/* Frees r's memory; r is then empty. */
void lkranges_fini(struct lkranges *r);

#endif /* PODFSD_LKRANGES_I_H */
