/* op.c: what every handler uses (see op_i.h): resolving handles as root
 * and becoming the caller, the reply buffer, invalidations. Worker
 * threads. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "podfs/bigbuf.h"

#include "caps_i.h"
#include "chunks_i.h"
#include "deleg_i.h"
#include "creds_i.h"
#include "handles_i.h"
#include "op_i.h"
#include "pfsd_i.h"
#include "req_i.h"
#include "session_i.h"
#include "slots_i.h"

void op_note_stale(struct op *o, const struct pfs_fh *fh)
{
	if (o->r->s && handles_foreign(o->d->hs, fh))
		atomic_store_explicit(&o->r->s->foreign_fh, true, memory_order_relaxed);
}

int op_begin(struct op *o, const struct pfs_creds *cr, const struct pfs_fh *fh,
	     const struct pfs_fh *fh2)
{
	int ret;

	/* On the loop thread only what needs no open (req.nowait), and no
	 * switch to the caller: a READ through an open fid checks no rights
	 * (its open did) and uses none of the caller's ids, as the
	 * calls it may make there (fstat, preadv2 of the fid) do not. */
	if (o->x.nowait) {
		if (fh2 || handles_get_cached(o->d->hs, fh, &o->obj) < 0)
			return -OP_WOULD_BLOCK;
		return 0;
	}
	ret = handles_get(o->d->hs, fh, &o->obj);
	if (ret == -ESTALE)
		op_note_stale(o, fh);
	if (ret < 0)
		return ret;
	if (fh2) {
		ret = handles_get(o->d->hs, fh2, &o->obj2);
		if (ret == -ESTALE)
			op_note_stale(o, fh2);
		if (ret < 0)
			goto out_put;
	}
	if (cr && (ret = op_become(o, cr)) < 0)
		goto out_put;
	return 0;

out_put:
	handles_put(o->d->hs, o->obj);
	handles_put(o->d->hs, o->obj2);
	o->obj = o->obj2 = NULL;
	return ret;
}

int op_become(struct op *o, const struct pfs_creds *cr)
{
	int ret;

	o->x.squashed = export_squash_creds(&o->r->rule, cr, &o->cr);
	ret = creds_enter(&o->cr);
	if (ret < 0) {
		o->x.squashed = false;
		return ret;
	}
	o->x.cr = &o->cr;
	return 0;
}

void op_end(struct op *o)
{
	if (o->x.cr)
		creds_leave();
	o->x.cr = NULL;
	o->x.squashed = false;
	handles_put(o->d->hs, o->obj);
	handles_put(o->d->hs, o->obj2);
	o->obj = o->obj2 = NULL;
}

void op_reply_alloc(struct op *o, size_t cap)
{
	pfs_wr_init(&o->w, pfs_big_xalloc(cap), cap);
}

/* Each worker thread's scratch buffer: made at its first listing, grown
 * to the largest cap asked, freed when the thread ends. */
struct scratch {
	size_t cap;
	uint8_t buf[];
};
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_key_make(void)
{
	if (pthread_key_create(&scratch_key, free) != 0)
		abort();
}

void op_reply_alloc_scratch(struct op *o, size_t cap)
{
	struct scratch *s;

	pthread_once(&scratch_once, scratch_key_make);
	s = pthread_getspecific(scratch_key);
	if (!s || s->cap < cap) {
		free(s);
		s = xmalloc(sizeof(*s) + cap);
		s->cap = cap;
		if (pthread_setspecific(scratch_key, s) != 0)
			abort();
	}
	pfs_wr_init(&o->w, s->buf, cap);
	o->w_scratch = true;
}

void op_note_begun(struct op *o, const struct pfs_fh *was)
{
	struct req *r = o->r;

	if (r->drc && r->s)
		replylog_begin(&r->d->replies, &r->s->ha->rl, r->s->client_id, r->h.id, r->h.op,
			       was);
}

void op_reply_settle(struct op *o, bool keep)
{
	size_t len = o->w.len;
	uint8_t *b = NULL;

	if (!o->w_scratch)
		return;
	o->w_scratch = false;
	if (keep) {
		b = xmalloc(len ? len : 1);
		memcpy(b, o->w.buf, len);
	} else {
		len = 0;
	}
	pfs_wr_init(&o->w, b, len);
	o->w.len = len;
}

void op_reply_room(struct op *o)
{
	if (!o->w.buf)
		op_reply_alloc(o, OP_SMALL_REPLY);
}

/* A new invalidation of fh, first in the request's list. */
static struct inval *inval_new(struct op *o, uint16_t op, const struct pfs_fh *fh)
{
	struct inval *iv = xcalloc(1, sizeof(*iv));

	iv->op = op;
	iv->fh = *fh;
	iv->next = o->r->invals;
	o->r->invals = iv;
	return iv;
}

void op_inval_inode(struct op *o, const struct pfs_fh *fh, int64_t off, int64_t len)
{
	struct inval *iv;

	if (!fh->len)
		return;
	/* Its chunks' digests go at once, before the change's reply: a CHUNK
	 * that follows it must not give out the old content's. */
	if (off >= 0 && o->d->chunks)
		chunks_drop(o->d->chunks, handles_key(o->d->hs, fh));
	iv = inval_new(o, PFS_OP_INVAL_INODE, fh);
	iv->off = off;
	iv->len = len;
}

void op_inval_entry(struct op *o, const struct pfs_fh *parent, const struct pfs_name *name)
{
	inval_new(o, PFS_OP_INVAL_ENTRY, parent)->name = *name;
}

void op_inval_dirent(struct op *o, const struct pfs_fh *parent, const struct pfs_name *name)
{
	op_inval_entry(o, parent, name);
	op_inval_inode(o, parent, 0, 0);
}

void op_lock_wake(struct op *o, const struct pfs_fh *fh)
{
	inval_new(o, PFS_OP_LOCK_WAKE, fh);
}

/* --- delegations --- */

/* Whether a session other than the one of slot caches key (slot -1: a
 * session without one, which shares INTEREST_SLOTLESS with the others:
 * counted as another's). */
static bool others_cache(struct interest *it, uint64_t key, int slot)
{
	uint64_t bits[INTEREST_WORDS];

	if (!interest_get(it, key, bits))
		return false;
	if (slot >= 0)
		bits[slot / 64] &= ~(1ull << (slot % 64));
	for (unsigned i = 0; i < INTEREST_WORDS; i++)
		if (bits[i])
			return true;
	return false;
}

int op_recall_check(struct op *o, const struct pfs_fh *fh)
{
	struct deleg *t = o->d->deleg;
	struct session *s = o->r->s;
	struct req *r = o->r;

	if (!t || !s || !fh || !fh->len)
		return 0;
	uint64_t key = handles_key(o->d->hs, fh);
	/* First this session caches fh (no grant in it from now on), then
	 * the table: a grant racing with this request sees one or the
	 * other (op_deleg_grant does the reverse). */
	interest_add(o->d->it, key, s->islot);
	atomic_thread_fence(memory_order_seq_cst);
	if (!deleg_any(t))
		return 0;
	r->nrecall = deleg_conflicts(t, s->client_id, key, r->recall_owners, OP_RECALL_MAX);
	if (!r->nrecall)
		return 0;
	r->recall = true;
	r->recall_fh = *fh;
	r->recall_key = key;
	return 1;
}

int op_forewarn(struct op *o, const struct pfs_fh *fh, const struct stat *st)
{
	struct req *r = o->r;

	/* Only a caller who may make the change: else any client could
	 * make every client that caches a file drop what it knows of it.
	 * Sessions without an interest slot count as caching what any of
	 * them was handed (INTEREST_SLOTLESS). */
	if (r->forewarned || !r->s || !o->x.it || !fh->len || !creds_may_own(st->st_uid))
		return 0;
	uint64_t key = handles_key(o->d->hs, fh);
	if (!others_cache(o->x.it, key, r->s->islot))
		return 0;
	r->recall = true;
	r->forewarn = true;
	r->recall_fh = *fh;
	r->recall_key = key;
	r->nrecall = 0;
	return 1;
}

bool op_deleg_grant(struct op *o, const struct pfs_fh *parent, const struct pfs_fh *file,
		    uint64_t fid)
{
	struct deleg *t = o->d->deleg;
	struct session *s = o->r->s;

	/* The client computes what the kernel here would do for the ids it
	 * sends: only where they reach the kernel as they are, and where
	 * this daemon can act as any of them. */
	if (!t || !s || !o->r->deleg || s->islot < 0 || o->r->rule.squash != EXPORT_SQUASH_NONE ||
	    !caps_can_switch())
		return false;
	uint64_t fkey = handles_key(o->d->hs, file), pkey = handles_key(o->d->hs, parent);
	if (!deleg_grant(t, s->client_id, fkey, pkey, fid))
		return false;
	atomic_thread_fence(memory_order_seq_cst);
	if (others_cache(o->d->it, pkey, s->islot) || others_cache(o->d->it, fkey, s->islot)) {
		deleg_ungrant(t, s->client_id, fkey);
		return false;
	}
	return true;
}

int op_deleg_return(struct op *o)
{
	if (o->d->deleg && o->r->s) {
		uint64_t key = handles_key(o->d->hs, &o->m.getattr_req.fh);
		deleg_drop_dir(o->d->deleg, o->r->s->client_id, key);
		slots_drop(o->r->s, key);
	}
	return 0;
}

/* As for a file's (op_deleg_grant): ids that reach the kernel as they
 * are, a daemon that can act as any of them; and an export the caller
 * may change (its unlinks would fail only later). */
static bool may_grant_dir(const struct op *o)
{
	return o->d->deleg && o->r->s && o->r->deleg && o->r->s->islot >= 0 &&
	       o->r->rule.squash == EXPORT_SQUASH_NONE && caps_can_switch() && !o->x.ro;
}

bool op_grant_dir(struct op *o, uint64_t dkey, uint64_t pkey)
{
	struct deleg *t = o->d->deleg;
	struct session *s = o->r->s;
	bool fresh;

	if (!may_grant_dir(o) || !deleg_grant_dir(t, s->client_id, dkey, pkey, &fresh))
		return false;
	/* The ladder made this session cache the directory; the others
	 * must not (op_recall_check registers, then checks the table). */
	atomic_thread_fence(memory_order_seq_cst);
	if (others_cache(o->d->it, dkey, s->islot)) {
		deleg_ungrant(t, s->client_id, dkey);
		return false;
	}
	return true;
}

int op_deleg_dir(struct op *o)
{
	const struct pfs_fh *fh = &o->m.getattr_req.fh;
	struct pfs_fh pfh;
	struct pfs_attr a;

	if (!o->d->deleg || !o->r->s || !o->r->deleg)
		return -ENOSYS;
	int ret = export_getattr(o->obj->fd, &a);
	if (ret < 0)
		return ret;
	if (!S_ISDIR(a.mode))
		return -ENOTDIR;
	if (!may_grant_dir(o))
		return -EAGAIN;
	uint64_t dkey = handles_key(o->d->hs, fh), pkey = dkey;
	/* A request naming the parent (a lookup of the directory, a listing
	 * that carries its attributes) recalls it too. */
	if (!pfs_fh_equal(fh, handles_root(o->d->hs))) {
		if (handles_encode_at(o->d->hs, o->obj->fd, "..", &pfh) < 0)
			return -EAGAIN;
		pkey = handles_key(o->d->hs, &pfh);
	}
	return op_grant_dir(o, dkey, pkey) ? 0 : -EAGAIN;
}
