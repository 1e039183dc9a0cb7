/* lkranges.c: one lock owner's byte ranges on one file (see
 * lkranges_i.h). */
#include "lkranges_i.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "podfs/codec.h"
#include "podfs/xalloc.h"

size_t lkranges_plan(const struct lkranges *r, uint64_t s, uint64_t e, uint8_t type,
		     struct lkr_change *p)
{
	size_t lo = 0, hi, n = r->n;
	bool has_left = false, has_right = false;
	struct lkrange left, right, mid;

	if (e > LKR_EOF)
		e = LKR_EOF;
	mid = (struct lkrange){ s, e, type };

	/* The first range that ends at s or later: the ranges are disjoint
	 * and sorted, so their ends are sorted too. */
	for (size_t top = n; lo < top;) {
		size_t m = lo + (top - lo) / 2;
		if (r->v[m].end < s)
			lo = m + 1;
		else
			top = m;
	}
	for (hi = lo; hi < n && r->v[hi].start <= e; hi++)
		;
	/* What is left of the first and last range the new one overlaps. */
	if (lo < hi && r->v[lo].start < s) {
		left = (struct lkrange){ r->v[lo].start, s - 1, r->v[lo].type };
		has_left = true;
	}
	if (lo < hi && r->v[hi - 1].end > e) {
		right = (struct lkrange){ e + 1, r->v[hi - 1].end, r->v[hi - 1].type };
		has_right = true;
	}
	p->nout = 0;
	if (type != PFS_LK_UN) {
		/* Merged with the owner's ranges of its type that touch it. */
		if (has_left && left.type == type) {
			mid.start = left.start;
			has_left = false;
		} else if (!has_left && lo > 0 && r->v[lo - 1].end + 1 == s &&
			   r->v[lo - 1].type == type) {
			mid.start = r->v[--lo].start;
		}
		if (has_right && right.type == type) {
			mid.end = right.end;
			has_right = false;
		} else if (!has_right && hi < n && r->v[hi].start == e + 1 &&
			   r->v[hi].type == type) {
			mid.end = r->v[hi++].end;
		}
	}
	if (has_left)
		p->out[p->nout++] = left;
	if (type != PFS_LK_UN)
		p->out[p->nout++] = mid;
	if (has_right)
		p->out[p->nout++] = right;
	p->lo = lo;
	p->hi = hi;
	return n - (hi - lo) + p->nout;
}

void lkranges_commit(struct lkranges *r, const struct lkr_change *p)
{
	size_t n = r->n - (p->hi - p->lo) + p->nout;

	if (n > r->cap) {
		r->cap = n < 4 ? 4 : n * 2;
		r->v = xreallocarray(r->v, r->cap, sizeof(*r->v));
	}
	if (r->n > p->hi && p->lo + p->nout != p->hi)
		memmove(r->v + p->lo + p->nout, r->v + p->hi, (r->n - p->hi) * sizeof(*r->v));
	if (p->nout)
		memcpy(r->v + p->lo, p->out, p->nout * sizeof(*r->v));
	r->n = n;
	if (!n)
		lkranges_fini(r);
}

void lkranges_fini(struct lkranges *r)
{
	free(r->v);
	r->v = NULL;
	r->n = r->cap = 0;
}
