/* dirdeleg_send.c: the sender threads of directory delegations: the
 * queue of unlinks and creates answered here, sent in batches, and each
 * item's end (see dirdeleg_i.h, dirdeleg_base_i.h). */
#include "dirdeleg_i.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "bg_i.h"
#include "client_i.h"
#include "deleg_i.h"
#include "dirdeleg_base_i.h"
#include "gate_i.h"
#include "inode_i.h"
#include "listing_i.h"
#include "podfs/clock.h"
#include "podfs/le.h"
#include "podfs/log.h"
#include "rpc_i.h"
#include "trust_i.h"
#include "wb_i.h"

/* it was answered by the daemon: rc (0, or -errno); fa: a created file's
 * attributes after it, da: the directory's, if the reply had them. */
static void item_done(struct dirdeleg *d, struct ditem *it, int rc, const struct pfs_attr *fa,
		      const struct pfs_attr *da)
{
	struct client *c = d->c;

	/* A removed file's attributes are not known: asked for again; a
	 * created one's are the daemon's. (A changed directory's: below.) */
	if (!it->setattr)
		inode_own_end(c->it, it->file, rc == 0 ? fa : NULL, it->seq, it->at_file, it->ns);
	if (rc != 0) /* the content written with it is not the daemon's */
		inode_drop_inline(it->file);
	if (it->victim)
		inode_own_end(c->it, it->victim, NULL, it->seq, it->at_victim, it->ns);
	/* The kernel holds the attributes answered here (a create's, its
	 * ctime this host's clock; a renamed file's, before its ctime
	 * moved): it asks again, and gets the daemon's. */
	if (!it->setattr)
		fuse_lowlevel_notify_inval_inode(c->se, it->file->nodeid, -1, 0);
	/* Refused: an unlinked name is still there, a created one is not;
	 * the listing that says otherwise goes. ENOENT of an unlink: the
	 * name is gone either way (another host removed it before the
	 * grant, and the kernel here still had it). */
	if (it->create)
		rc = rc == -ENOENT ? -EIO : rc;
	else if (rc == -ENOENT && !it->setattr && !it->rename)
		rc = 0;
	if (rc < 0)
		listing_touch(it->dir);
	atomic_fetch_sub(&it->file->dd_pending, 1);
	if (it->victim)
		atomic_fetch_sub(&it->victim->dd_pending, 1);
	pthread_mutex_lock(&d->bg.lock);
	d->inline_held -= it->dlen;
	struct ddir *de = dd_find(d, &it->m.parent);
	/* After the directory's last one, its attributes are the daemon's
	 * (its clock), if nothing else of ours happened to it since: a
	 * request about it waits for the queue (dirdeleg_drain). */
	if (de && de->pending && --de->pending == 0 && de->at)
		inode_own_end(c->it, it->dir, da, it->seq, de->at, it->ns);
	if (rc < 0) {
		d->st.errors++;
		if (de) { /* there: its items pending kept it */
			de->held = false; /* the rest goes the usual way */
			de->nslots = 0;
			pthread_cond_broadcast(&d->slots_came);
			if (!de->err)
				de->err = rc;
		}
		pfs_warn("%s answered under a directory delegation failed: %s: %s",
			 it->create    ? "a create"
			 : it->setattr ? "a change of a directory's attributes"
			 : it->rename  ? "a rename"
				       : "an unlink",
			 it->m.name.s, strerror(-rc));
	}
	pthread_mutex_unlock(&d->bg.lock);
	inode_forget(c->it, it->file, 1);
	inode_forget(c->it, it->dir, 1);
	if (it->victim)
		inode_forget(c->it, it->victim, 1);
	free(it->data);
	free(it);
}

/* Sends a rename answered here (a RENAME that the daemon refuses if it
 * revoked the delegation meanwhile). */
static void send_rename(struct dirdeleg *d, struct ditem *it)
{
	struct pfs_rename_req m = { .cr = it->m.cr, .parent = it->m.parent, .name = it->m.name,
				    .newparent = it->m.parent, .newname = it->newname,
				    .flags = it->rflags | PFS_RN_DELEG };
	struct rpc_reply rep = { 0 };
	struct pfs_attr da;
	int rc = rpc_msg(d->c->rpc, PFS_OP_RENAME, rename_req, &m, &rep);
	int have_da = rc == 0 ? rpc_dir_rep(&rep, &da) : 0; /* the directory's, after it */

	if (have_da < 0)
		rc = -EIO;
	rpc_reply_free(&rep);
	item_done(d, it, rc, NULL, have_da > 0 ? &da : NULL);
}

static void send_one(struct dirdeleg *d, struct ditem *it)
{
	struct rpc_reply rep = { 0 };
	struct pfs_attr da;
	int rc = rpc_msg(d->c->rpc, PFS_OP_UNLINK, unlink_req, &it->m, &rep);
	int have_da = rc == 0 ? rpc_dir_rep(&rep, &da) : 0;

	if (have_da < 0)
		rc = -EIO;
	rpc_reply_free(&rep);
	item_done(d, it, rc, NULL, have_da > 0 ? &da : NULL);
}

/* Sends a change of a directory's attributes (a SETATTR that the daemon
 * refuses if it revoked the delegation meanwhile). */
static void send_setattr(struct dirdeleg *d, struct ditem *it)
{
	struct rpc_reply rep = { 0 };
	struct pfs_attr_rep ar;

	int rc = rpc_msg(d->c->rpc, PFS_OP_SETATTR, setattr_req, &it->sa, &rep);
	if (rc == 0 && pfs_dec_attr_rep(rep.buf, rep.len, &ar) < 0)
		rc = -EIO;
	rpc_reply_free(&rep);
	/* The directory's attributes after it are the daemon's, after the
	 * last item there, if nothing else of ours happened to it since. */
	item_done(d, it, rc, NULL, rc == 0 ? &ar.attr : NULL);
}

/* Sends items v[n] (one directory, one caller) in one UNLINKS: the daemon
 * refuses it (EIO) if it revoked the delegation meanwhile. */
static void send_batch(struct dirdeleg *d, struct ditem **v, size_t n)
{
	struct pfs_unlinks_req m = { .cr = v[0]->m.cr, .parent = v[0]->m.parent };
	struct pfs_unlinks_rep ur;
	struct rpc_reply rep = { 0 };
	size_t cap = n * (2 + PFS_NAME_MAX);
	uint8_t *names = malloc(cap);
	bool listed = names != NULL;
	struct pfs_wr w;
	int rc = -ENOMEM;

	if (listed) {
		pfs_wr_init(&w, names, cap);
		for (size_t i = 0; i < n; i++)
			(void)pfs_put_NAME(&w, &v[i]->m.name);
		m.names.p = names;
		m.names.len = (uint32_t)w.len;
		rc = rpc_msg_heap(d->c->rpc, PFS_OP_UNLINKS, unlinks_req, &m, w.len + 1024, &rep);
		free(names);
	}
	if (rc == 0 && (pfs_dec_unlinks_rep(rep.buf, rep.len, &ur) < 0 || ur.status.len != 4 * n))
		rc = -EIO;
	/* A daemon without UNLINKS, or no memory here for the list: one by
	 * one. (The daemon's own ENOMEM is its answer: a plain UNLINK would
	 * not be refused under a revoked delegation.) */
	if (rc == -ENOSYS || !listed) {
		rpc_reply_free(&rep);
		if (rc == -ENOSYS)
			d->no_batch = true;
		for (size_t i = 0; i < n; i++)
			send_one(d, v[i]);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		int r = rc < 0 ? rc : -(int)pfs_load_le32(ur.status.p + 4 * i);
		/* The directory's attributes are those after the last. */
		bool da = rc == 0 && i == n - 1 && (ur.flags & PFS_UL_DIR_ATTR);
		item_done(d, v[i], r, NULL, da ? &ur.dir : NULL);
	}
	rpc_reply_free(&rep);
}

/* The change of attributes create item it carries into *sa, if any: the
 * one answered under the file's delegation (has_sa), and the file's
 * access and modification times as this client answered them (its
 * clock, at the create and at the writes that went with it), unless set
 * there: podfsd keeps them, so that every host sees the times this one
 * showed. Not when a write went the usual way (podfsd's own time then
 * stands, as its reply told). */
static bool item_times(const struct ditem *it, struct pfs_setattr_req *sa)
{
	if (it->has_sa)
		*sa = it->sa;
	else
		memset(sa, 0, sizeof(*sa));
	if (it->no_inline)
		return it->has_sa;
	if (!(sa->valid & (PFS_SET_ATIME | PFS_SET_ATIME_NOW))) {
		sa->valid |= PFS_SET_ATIME;
		sa->atime_s = it->attr.atime_s;
		sa->atime_ns = it->attr.atime_ns;
	}
	if (!(sa->valid & (PFS_SET_MTIME | PFS_SET_MTIME_NOW))) {
		sa->valid |= PFS_SET_MTIME;
		sa->mtime_s = it->attr.mtime_s;
		sa->mtime_ns = it->attr.mtime_ns;
	}
	return true;
}

/* Sends creates v[n] (one directory, one caller) in one CREATES. */
static void send_creates(struct dirdeleg *d, struct ditem **v, size_t n)
{
	struct pfs_creates_req m = { .cr = v[0]->m.cr, .parent = v[0]->m.parent };
	struct pfs_creates_rep cr;
	struct rpc_reply rep = { 0 };
	size_t cap = n * (2 + PFS_FH_MAX + 8 + 4 + 4 + 2 + PFS_NAME_MAX + 4 + 4 + PFS_DELEG_ATTRS_SIZE);
	for (size_t i = 0; i < n; i++)
		cap += v[i]->dlen;
	uint8_t *items = malloc(cap);
	struct pfs_wr w;
	struct pfs_rd ar;
	int rc = -ENOMEM;

	if (items) {
		pfs_wr_init(&w, items, cap);
		for (size_t i = 0; i < n; i++) {
			struct pfs_setattr_req sa;
			bool has_sa = item_times(v[i], &sa);
			/* Data that is not synced with it would have no commit:
			 * the client holds no copy to send again. */
			uint32_t how = (v[i]->closed ? PFS_CI_CLOSE : 0) |
				       (v[i]->dlen ? PFS_CI_SYNC : 0) | (has_sa ? PFS_CI_ATTRS : 0);
			pfs_t_BYTES data = { .p = v[i]->data, .len = v[i]->dlen };
			if (pfs_put_FH(&w, &v[i]->slot) < 0 || pfs_put_U64(&w, &v[i]->fid) < 0 ||
			    pfs_put_U32(&w, &v[i]->flags) < 0 || pfs_put_U32(&w, &v[i]->mode) < 0 ||
			    pfs_put_NAME(&w, &v[i]->m.name) < 0 || pfs_put_U32(&w, &how) < 0 ||
			    pfs_put_BYTES(&w, &data) < 0)
				break;
			if (has_sa && pfs_put_deleg_attrs(&w, &sa) < 0)
				break;
		}
		m.items.p = items;
		m.items.len = (uint32_t)w.len;
		rc = rpc_msg_heap(d->c->rpc, PFS_OP_CREATES, creates_req, &m, w.len + 1024, &rep);
		free(items);
	}
	if (rc == 0 && (pfs_dec_creates_rep(rep.buf, rep.len, &cr) < 0 || cr.status.len != 4 * n))
		rc = -EIO;
	if (rc == 0)
		pfs_rd_init(&ar, cr.attrs.p, cr.attrs.len);
	unsigned again = 0, found = 0;
	for (size_t i = 0; i < n; i++) {
		int r = rc < 0 ? rc : -(int)pfs_load_le32(cr.status.p + 4 * i);
		struct pfs_attr fa = { 0 };
		if (r == 0 && !pfs_get_ATTR(&ar, &fa))
			r = -EIO;
		/* The coordinator lost the slot (it restarted, or the session
		 * ended): made again by name (dirdeleg_lost.c). */
		if (r == -ESTALE) {
			struct pfs_setattr_req sa;
			bool has_sa = item_times(v[i], &sa);
			r = dd_make_again(d, v[i], has_sa ? &sa : NULL, &fa);
			again++;
			found += r == 1;
			r = r > 0 ? 0 : r;
			pthread_mutex_lock(&d->bg.lock);
			d->st.made_again += r == 0;
			pthread_mutex_unlock(&d->bg.lock);
		}
		/* The directory's attributes are those after the last, unless
		 * a create went after them. */
		bool da = rc == 0 && i == n - 1 && !again && (cr.flags & PFS_UL_DIR_ATTR);
		item_done(d, v[i], r, &fa, da ? &cr.dir : NULL);
	}
	if (again)
		pfs_notice("the coordinator had lost the slots of %u create%s answered under a "
			   "directory delegation: made again by name (%u found named already)",
			   again, again == 1 ? "" : "s", found);
	rpc_reply_free(&rep);
}

/* How long a sender holds back create it at now (bg.lock held), 0: not.
 * Its file is open still: for its data and close, up to DD_HOLD_NS
 * (dirdeleg_i.h). At the head of the queue (head), also for more creates
 * to join its CREATES, up to DD_LINGER_NS after its close: nothing waits
 * for them (a thread that does hurries them, as a recall does). */
static int64_t hold_ns(const struct dirdeleg *d, const struct ditem *it, int64_t now, bool head)
{
	if (!it->create || d->hurry || d->bg.stop || d->queued >= PFS_CREATES_MAX)
		return 0;
	bool open = !it->closed && !it->no_inline; /* queued: the file's dd_item */
	if (!open && !head)
		return 0;
	int64_t left = it->since_ns + (open ? DD_HOLD_NS : DD_LINGER_NS) - now;
	return left > 0 ? left : 0;
}

/* An item's kind: unlink 0, create 1, change of attributes 2, rename 3. */
static unsigned kind(const struct ditem *it)
{
	return it->rename ? 3 : it->setattr ? 2 : it->create ? 1 : 0;
}

/* Whether it may go now: creates and unlinks are never in flight
 * together (one may name what the other made or removed; those of one
 * kind do not depend on each other), and a change of a directory's
 * attributes goes alone (its rights decide whether the names before it
 * could be made, and those after it), as a rename does (it names what
 * the others made or remove). */
static bool may_go(const struct dirdeleg *d, const struct ditem *it)
{
	unsigned k = kind(it);

	for (unsigned j = 0; j < 4; j++)
		if (d->inflight_kind[j] && (j != k || k >= 2))
			return false;
	return true;
}

/* Whether b may go in the UNLINKS or CREATES of a: the same kind, the
 * same directory and caller. */
static bool same_batch(const struct ditem *a, const struct ditem *b)
{
	const struct pfs_creds *x = &a->m.cr, *y = &b->m.cr;

	return !a->setattr && !a->rename && kind(a) == kind(b) &&
	       pfs_fh_equal(&a->m.parent, &b->m.parent) &&
	       pfs_creds_equal(x, y);
}

void *dd_sender_main(void *arg)
{
	struct dirdeleg *d = arg;
	struct ditem *v[PFS_UNLINKS_MAX];

	dd_in_sender = true;
	pthread_mutex_lock(&d->bg.lock);
	for (;;) {
		if (d->asks) {
			struct dask *a = d->asks;
			d->asks = a->next;
			pthread_mutex_unlock(&d->bg.lock);
			dd_do_ask(d, a);
			pthread_mutex_lock(&d->bg.lock);
			continue;
		}
		if (d->head && may_go(d, d->head)) {
			int64_t now = pfs_mono_ns(), hold = hold_ns(d, d->head, now, true);
			if (hold > 0) {
				bg_wait_ns(&d->bg, hold);
				continue;
			}
			/* The items at the head of the queue of one kind, in one
			 * directory by one caller go together, up to
			 * PFS_UNLINKS_MAX, and up to a create held back, or
			 * DD_INLINE_BATCH bytes of data. */
			size_t n = 0, max = d->no_batch && !d->head->create ? 1 : PFS_UNLINKS_MAX;
			size_t bytes = 0;
			while (d->head && n < max && (n == 0 || same_batch(v[0], d->head))) {
				struct ditem *it = d->head;
				if (n > 0 && (hold_ns(d, it, now, false) > 0 ||
					      bytes + it->dlen > DD_INLINE_BATCH))
					break;
				bytes += it->dlen;
				if (it->create)
					it->file->dd_item = NULL; /* nothing joins it now */
				d->st.inlined += it->dlen > 0;
				d->st.closed += it->closed;
				v[n++] = it;
				d->head = it->next;
			}
			if (!d->head)
				d->tail = &d->head;
			unsigned k = kind(v[0]);
			d->queued -= (unsigned)n;
			d->inflight += (unsigned)n;
			d->inflight_kind[k] += (unsigned)n;
			d->st.sent++;
			pthread_mutex_unlock(&d->bg.lock);
			if (v[0]->setattr)
				send_setattr(d, v[0]);
			else if (v[0]->rename)
				send_rename(d, v[0]);
			else if (v[0]->create)
				send_creates(d, v, n);
			else if (d->no_batch)
				send_one(d, v[0]);
			else
				send_batch(d, v, n);
			pthread_mutex_lock(&d->bg.lock);
			d->inflight -= (unsigned)n;
			d->inflight_kind[k] -= (unsigned)n;
			atomic_fetch_sub(&d->pending, (unsigned)n);
			pthread_cond_broadcast(&d->idle);
			if (d->head)
				bg_wake(&d->bg); /* a sender may have waited for this kind */
			continue;
		}
		if (d->bg.stop)
			break;
		bg_wait(&d->bg);
	}
	pthread_mutex_unlock(&d->bg.lock);
	return NULL;
}
