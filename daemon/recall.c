/* recall.c: the recall of delegations for a request held back, and for
 * a change made beside podfs (see recall_i.h). Loop thread. */
#include <stdint.h>

#include "podfs/codec.h"
#include "podfs/log.h"
#include "deleg_i.h"
#include "pfsd_i.h"
#include "push_i.h"
#include "recall_i.h"
#include "acklat_i.h"
#include "session_i.h"

#define RECALL_BUF (PFS_FH_MAX + 8)

/* The RECALL push of fh into buf[RECALL_BUF]: its length, or 0. */
static size_t recall_encode(const struct pfs_fh *fh, uint8_t *buf)
{
	struct pfs_recall_push m = { .fh = *fh };
	struct pfs_wr w;

	pfs_wr_init(&w, buf, RECALL_BUF);
	return pfs_enc_recall_push(&w, &m) < 0 ? 0 : w.len;
}

void recall_push_holders(struct req *r)
{
	struct pfsd *d = r->d;
	uint8_t buf[RECALL_BUF];
	size_t len;

	if (r->forewarn) {
		struct inval iv = { .op = PFS_OP_INVAL_INODE, .fh = r->recall_fh, .off = -1 };
		d->st_forewarns++;
		r->forewarned = true;
		push_inval(d, r->s, false, &iv, r->recall_key, &r->acks);
		return;
	}
	d->st_recalls++;
	r->recalls++;
	if (!(len = recall_encode(&r->recall_fh, buf)))
		return;
	for (size_t i = 0; i < r->nrecall; i++) {
		struct session *h = session_find(d, r->recall_owners[i]);
		if (!h || h->dead)
			continue;
		/* A new episode, unless it has been silent since the last one
		 * began (stopped or dead: it costs one wait, not one per
		 * request). */
		if (!h->recall_owed || h->rx_at > h->recall_owed)
			h->recall_owed = r->recall_since;
		push_recall(h, buf, len, &r->acks);
	}
}

bool recall_rearm(struct req *r, uint64_t now, uint64_t *next)
{
	struct pfsd *d = r->d;
	uint8_t buf[RECALL_BUF];
	size_t len;
	bool wait = false;

	if (r->forewarn || !(len = recall_encode(&r->recall_fh, buf)))
		return false;
	for (size_t i = 0; i < r->nrecall; i++) {
		uint64_t owner = r->recall_owners[i];
		if (push_acks_acked(&r->acks, owner) || push_acks_silent(&r->acks, owner))
			continue;
		struct session *h = session_find(d, owner);
		if (!h || h->dead || !(h->caps & PFS_CAP_PUSH_ACK))
			continue;
		uint64_t owed = session_recall_start(h, r->recall_since), t;
		/* Silent that long, or back again and again without ever
		 * applying it (each return is a sign of life): done. */
		if (acklat_recall_expired(now, owed, h->rx_at, d->o.recall_timeout,
					  PFSD_RECALL_WAIT_MS, &t) != ACKEXP_EXTEND)
			continue;
		wait = true;
		if (push_recall(h, buf, len, &r->acks))
			continue;
		if (t < *next)
			*next = t;
	}
	return wait;
}

void recall_settle(struct req *r)
{
	struct pfsd *d = r->d;

	for (size_t i = 0; i < r->nrecall; i++) {
		uint64_t owner = r->recall_owners[i];
		bool acked = push_acks_acked(&r->acks, owner);
		if (deleg_recalled(d->deleg, owner, r->recall_key, acked) && !acked) {
			d->st_revoked++;
			pfsd_warn_rl(d, "session %016llx did not return a delegation (it sent nothing for "
				     "--recall-timeout, %u ms, or its connection closed): revoked (its "
				     "changes under it will fail)", (unsigned long long)owner,
				     d->o.recall_timeout);
		}
	}
	push_acks_free(&r->acks);
	r->recall = false;
	r->forewarn = false;
	r->nrecall = 0;
}

#define RECALLS_BESIDE 8 /* holders recalled per change, at most */

void recall_push_beside(struct pfsd *d, uint64_t key, const struct pfs_fh *fh)
{
	uint64_t owners[RECALLS_BESIDE];
	uint8_t buf[RECALL_BUF];
	struct acks acks = { 0 };
	size_t len, n;

	if (!d->deleg || !deleg_any(d->deleg) ||
	    !(n = deleg_conflicts(d->deleg, 0, key, owners, RECALLS_BESIDE)) ||
	    !(len = recall_encode(fh, buf)))
		return;
	for (size_t i = 0; i < n; i++) {
		struct session *h = session_find(d, owners[i]);
		if (h && !h->dead && push_recall(h, buf, len, &acks))
			d->st_recalls_beside++;
	}
	push_acks_free(&acks); /* nothing waits for them */
}
