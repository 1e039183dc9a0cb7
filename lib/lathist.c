/* lathist.c: request latency histograms (see podfs/lathist.h). */
#include "podfs/lathist.h"

unsigned lathist_bucket(uint64_t us)
{
	if (us < 1)
		return 0;
	unsigned oct = 63u - (unsigned)__builtin_clzll(us); /* us in [2^oct, 2^(oct+1)) */
	if (oct >= LATHIST_OCTAVES)
		return LATHIST_BUCKETS - 1;
	/* The two bits below the leading one pick the quarter. */
	unsigned sub = oct >= 2 ? (unsigned)(us >> (oct - 2)) & 3u
				: (unsigned)((us << (2 - oct)) & 3u);
	unsigned b = oct * LATHIST_SUB + sub;
	return b < LATHIST_BUCKETS ? b : LATHIST_BUCKETS - 1;
}

uint64_t lathist_upper(unsigned b)
{
	if (b >= LATHIST_BUCKETS - 1)
		return UINT64_MAX;
	unsigned oct = b / LATHIST_SUB, sub = b % LATHIST_SUB;
	/* The bucket starts at 2^oct * (1 + sub/4); the next one starts
	 * at 2^oct * (1 + (sub+1)/4). */
	uint64_t next = (oct >= 2) ? ((uint64_t)(4 + sub + 1) << (oct - 2))
				   : (((uint64_t)(4 + sub + 1) << oct) + 3) / 4;
	return next > 0 ? next - 1 : 0;
}

uint64_t lathist_quantile(const uint64_t counts[LATHIST_BUCKETS], double q)
{
	uint64_t total = 0, seen = 0;

	for (unsigned b = 0; b < LATHIST_BUCKETS; b++)
		total += counts[b];
	if (total == 0)
		return 0;
	/* The rank of the quantile, 1-based, rounded up. */
	uint64_t rank = (uint64_t)(q * (double)total);
	if ((double)rank < q * (double)total)
		rank++;
	if (rank < 1)
		rank = 1;
	for (unsigned b = 0; b < LATHIST_BUCKETS; b++) {
		seen += counts[b];
		if (seen >= rank)
			return lathist_upper(b);
	}
	return lathist_upper(LATHIST_BUCKETS - 1);
}
