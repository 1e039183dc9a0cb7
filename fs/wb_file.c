/* wb_file.c: the ledger of one file's writes in write-behind: their
 * states, what is pending or uncommitted, the verifier's verdict at the
 * end of a commit (see wb_file_i.h). */
#include "wb_file_i.h"

#include <assert.h>

static void unlink_entry(struct wbf *f, struct wbe *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		f->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		f->tail = e->prev;
	e->next = e->prev = NULL;
}

/* True if e's bytes and the size bytes at off overlap. */
static bool overlaps(const struct wbe *e, uint64_t off, uint64_t size)
{
	return e->off < off + size && off < e->off + e->len;
}

void wbf_add(struct wbf *f, struct wbe *e)
{
	e->next = NULL;
	e->prev = f->tail;
	if (f->tail)
		f->tail->next = e;
	else
		f->head = e;
	f->tail = e;
	e->st = WBE_QUEUED;
	f->npending++;
}

void wbf_sending(struct wbe *e)
{
	assert(e->st == WBE_QUEUED);
	e->st = WBE_SENDING;
}

bool wbf_sendable(const struct wbf *f, const struct wbe *e)
{
	if (!f->nagain)
		return true;
	for (const struct wbe *p = e->prev; p; p = p->prev)
		if ((p->st == WBE_QUEUED || p->st == WBE_SENDING) && overlaps(p, e->off, e->len))
			return false;
	return true;
}

/* e, pending, is pending again after a restart (wbf_commit_end). */
static void mark_again(struct wbf *f, struct wbe *e)
{
	if (!e->again) {
		e->again = true;
		f->nagain++;
	}
}

bool wbf_sent(struct wbf *f, struct wbe *e, int rc, uint64_t verf)
{
	assert(e->st == WBE_SENDING && f->npending > 0);
	if (e->redo && rc == 0) {
		e->redo = false;
		e->st = WBE_QUEUED;
		return true;
	}
	if (e->again) {
		e->again = e->redo = false;
		f->nagain--;
	}
	f->npending--;
	if (rc < 0) {
		wbf_keep_err(f, rc);
		unlink_entry(f, e);
		return false;
	}
	e->st = WBE_DONE;
	e->verf = verf;
	f->uncommitted += e->len;
	return false;
}

void wbf_remove(struct wbf *f, struct wbe *e)
{
	assert(e->st == WBE_DONE || e->st == WBE_COMMITTING);
	f->uncommitted -= e->len;
	unlink_entry(f, e);
}

bool wbf_overlaps_pending(const struct wbf *f, uint64_t off, size_t size)
{
	for (const struct wbe *e = f->head; e; e = e->next)
		if ((e->st == WBE_QUEUED || e->st == WBE_SENDING) && overlaps(e, off, size))
			return true;
	return false;
}

bool wbf_uncommitted_beyond(const struct wbf *f, uint64_t from)
{
	for (const struct wbe *e = f->head; e; e = e->next)
		if ((e->st == WBE_DONE || e->st == WBE_COMMITTING) && e->off + e->len > from)
			return true;
	return false;
}

void wbf_keep_err(struct wbf *f, int rc)
{
	if (rc < 0 && !f->err)
		f->err = -rc;
}

void wbf_note_writer(struct wbf *f, uint32_t tid)
{
	for (unsigned i = 0; i < f->nwriters; i++)
		if (f->writers[i] == tid)
			return;
	if (f->nwriters < WBF_WRITERS)
		f->writers[f->nwriters++] = tid;
	else
		f->many_writers = true;
}

bool wbf_is_writer(const struct wbf *f, uint32_t tid)
{
	if (f->many_writers)
		return true;
	for (unsigned i = 0; i < f->nwriters; i++)
		if (f->writers[i] == tid)
			return true;
	return false;
}

void wbf_forget_writers(struct wbf *f)
{
	f->nwriters = 0;
	f->many_writers = false;
}

int wbf_take_err(struct wbf *f)
{
	int rc = -f->err;

	f->err = 0;
	return rc;
}

bool wbf_holds(const struct wbf *f)
{
	return f->head || f->err || f->committing;
}

void wbf_commit_begin(struct wbf *f)
{
	assert(!f->committing);
	f->committing = true;
	for (struct wbe *e = f->head; e; e = e->next)
		if (e->st == WBE_DONE)
			e->st = WBE_COMMITTING;
}

void wbf_commit_end(struct wbf *f, int rc, uint64_t verf, struct wbe **released,
		    struct wbe **resend)
{
	struct wbe **rel_tail = released, **res_tail = resend, *next;

	bool again = false; /* from the first write acknowledged by an instance that is gone */

	*released = *resend = NULL;
	f->committing = false;
	for (struct wbe *e = f->head; e; e = next) {
		next = e->next;
		if (rc < 0) {
			if (e->st == WBE_COMMITTING)
				e->st = WBE_DONE; /* still ours; a later commit retries */
			continue;
		}
		bool acked = e->st == WBE_DONE || e->st == WBE_COMMITTING;
		/* Acknowledged by a daemon instance that is gone: its page
		 * cache may have died with it. */
		if (acked && e->verf != verf)
			again = true;
		if (!again) {
			if (e->st == WBE_COMMITTING) {
				wbf_remove(f, e);
				e->qnext = NULL;
				*rel_tail = e;
				rel_tail = &e->qnext;
			}
		} else if (acked) {
			f->uncommitted -= e->len;
			e->st = WBE_QUEUED;
			f->npending++;
			mark_again(f, e);
			e->qnext = NULL;
			*res_tail = e;
			res_tail = &e->qnext;
		} else if (e->st == WBE_SENDING) {
			e->redo = true;
			mark_again(f, e);
		}
	}
}
