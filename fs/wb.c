/* wb.c: write-behind (see wb_i.h): the writer threads and the send
 * queue, the waits (overlap, memory, pending writes), and the request
 * buffers. Commits and the re-send after a daemon restart are
 * wb_commit.c's; the writes of each file, their states and the
 * verifier's verdict are kept by the ledger (wb_file.c). */
#include "wb_base_i.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bg_i.h"
#include "client_i.h"
#include "inode_i.h"
#include "killable_i.h"
#include "podfs/bigbuf.h"
#include "podfs/clock.h"
#include "podfs/hash.h"
#include "podfs/htab.h"
#include "podfs/log.h"
#include "dirdeleg_i.h"
#include "gate_i.h"
#include "trust_i.h"

static uint64_t ip_hash(const struct inode *ip)
{
	return pfs_hash_u64((uintptr_t)ip);
}

struct wbi *wbi_find(struct wb *wb, struct inode *ip)
{
	uint64_t h = ip_hash(ip);

	for (struct hnode *n = htab_first(&wb->files, h); n; n = htab_next(n, h))
		if (container_of(n, struct wbi, hn)->ip == ip)
			return container_of(n, struct wbi, hn);
	return NULL;
}

static struct wbi *wbi_get(struct wb *wb, struct inode *ip)
{
	struct wbi *w = wbi_find(wb, ip);

	if (w)
		return w;
	w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->ip = ip;
	pfs_cond_init_mono(&w->cond);
	htab_insert(&wb->files, &w->hn, ip_hash(ip));
	return w;
}

void wbi_maybe_free(struct wb *wb, struct wbi *w)
{
	if (w->users || wbf_holds(&w->f))
		return;
	htab_remove(&wb->files, &w->hn);
	pthread_cond_destroy(&w->cond);
	free(w);
}

/* Request buffer of size bytes (from the pool when full-size). */
static void *buf_get(struct wb *wb, size_t size)
{
	void *p = NULL;
	if (size == WB_BUFSZ) {
		pthread_mutex_lock(&wb->bg.lock);
		if (wb->npool)
			p = wb->pool[--wb->npool];
		pthread_mutex_unlock(&wb->bg.lock);
		if (p)
			return p;
	}
	return pfs_big_alloc(size);
}

/* A request buffer of size bytes, as buf_get, with wb->bg.lock held. */
static void *buf_get_locked(struct wb *wb, size_t size)
{
	if (size == WB_BUFSZ && wb->npool)
		return wb->pool[--wb->npool];
	return pfs_big_alloc(size);
}

/* Releases a request buffer of size bytes. Called with wb->bg.lock. */
static void buf_put_locked(struct wb *wb, void *p, size_t size)
{
	if (p && size == WB_BUFSZ && wb->npool < WB_POOL)
		wb->pool[wb->npool++] = p;
	else
		pfs_big_free(p);
}

void wb_enqueue(struct wb *wb, struct wbe *e)
{
	inode_write_queued(e->wi->ip); /* its attributes are not current till it is done */
	e->qnext = NULL;
	*wb->qtail = e;
	wb->qtail = &e->qnext;
	wb->inflight += e->len;
	bg_wake(&wb->bg);
}

/* e, QUEUED, waits to grow (wb_i.h, "Coalescing"): short, the last of
 * its file, another write of which is being sent, and nobody waits for
 * the file's writes. */
static int64_t held_back(const struct wb *wb, const struct wbe *e, int64_t now)
{
	const struct wbi *w = e->wi;

	if (!e->grows || e->len >= WB_GROW_MAX || w->f.tail != e || w->users || e->again ||
	    wb->bg.stop)
		return 0;
	if (w->sending)
		return -1;
	/* Pieces keep coming: a little longer for more. */
	if (!e->grown)
		return 0;
	int64_t left = e->queued_ns + WB_HOLD_NS - now;
	return left > 0 ? left : 0;
}

/* w's last write is queued: it may be held back to grow. */
static bool tail_queued(const struct wbi *w)
{
	return w->f.tail && w->f.tail->st == WBE_QUEUED;
}

/* A thread is about to wait for w's writes (w->users raised): a write of
 * w held back to grow may go now. */
static void release_held(struct wb *wb, const struct wbi *w)
{
	if (w->sending && tail_queued(w))
		bg_wake_all(&wb->bg);
}

/* The part of e's request before its offset: credentials, handle, fid
 * and flags (codec.h, write_req: then the offset, and the data last). */
static size_t req_prefix(const struct wbe *e)
{
	return e->reqlen - e->len - 4 - 8;
}

/* Appends the data of n, a write of the same open file and caller with
 * the same flags as t, of the bytes right after t's, to t, QUEUED and
 * the last of its file; n is left as it was. Grows t's buffer (at most
 * to twice what it holds, up to WB_BUFSZ). Returns 0, or -ENOMEM or
 * -EFBIG (t is unchanged). */
static int append(struct wb *wb, struct wbe *t, const struct wbe *n)
{
	size_t need = t->reqlen + n->len;
	struct pfs_wr w;

	if ((size_t)t->len + n->len > PFS_MAX_IO || need > WB_BUFSZ)
		return -EFBIG;
	if (need > t->bufsz) {
		size_t size = t->bufsz * 2 < need ? need : t->bufsz * 2;
		if (size > WB_BUFSZ || WB_BUFSZ - size < WB_BUFSZ / 4)
			size = WB_BUFSZ;
		uint8_t *buf = buf_get_locked(wb, size);
		if (!buf)
			return -ENOMEM;
		memcpy(buf, t->req, t->reqlen);
		buf_put_locked(wb, t->req, t->bufsz);
		t->req = buf;
		t->bufsz = size;
	}
	memcpy(t->req + t->reqlen, n->req + n->reqlen - n->len, n->len);
	t->reqlen += n->len;
	t->len += n->len;
	t->grown = true;
	/* The data's length, in front of it. */
	pfs_wr_init(&w, t->req + t->reqlen - t->len - 4, 4);
	return pfs_put_BYTES_head(&w, t->len) < 0 ? -EIO : 0;
}

void wb_free_entry(struct wb *wb, struct wbe *e)
{
	wb->held -= e->len;
	pthread_cond_broadcast(&wb->space);
	buf_put_locked(wb, e->req, e->bufsz);
	free(e);
}

/* The reply to an append through a session with PFS_CAP_APPEND_AT:
 * write_at_rep. Returns 0 with *r and *at set, or -EBADMSG (then it is
 * a write_rep, or malformed). */
static int dec_landed(const void *buf, size_t len, struct pfs_write_rep *r, uint64_t *at)
{
	struct pfs_write_at_rep a;

	if (pfs_dec_write_at_rep(buf, len, &a) < 0)
		return -EBADMSG;
	r->written = a.written;
	r->attr = a.attr;
	*at = a.at;
	return 0;
}

/* e's request as a write at where e landed (PFS_WR_AT), in a buffer of
 * its own (*req, *reqlen; the caller frees it when it is not e->req). */
static int landed_req(const struct wbe *e, uint8_t **req, size_t *reqlen)
{
	struct pfs_write_req m;
	struct pfs_wr w;

	if (pfs_dec_write_req(e->req, e->reqlen, &m) < 0)
		return -EIO;
	m.flags |= PFS_WR_AT;
	m.offset = e->landed_at;
	size_t cap = e->reqlen + 16;
	uint8_t *p = malloc(cap);
	if (!p)
		return -ENOMEM;
	pfs_wr_init(&w, p, cap);
	if (pfs_enc_write_req(&w, &m) < 0) {
		free(p);
		return -EIO;
	}
	*req = p;
	*reqlen = w.len;
	return 0;
}

/* What send_parts learned of the file from its last reply. */
struct wrote {
	uint64_t at;          /* inode_write_sent of the last part sent */
	uint64_t seq, ns;     /* gate_seq and the namespace count then */
	struct pfs_attr attr; /* the reply's attributes after the write */
};

/* Sends e (synchronously) and decodes the reply. Without wb->bg.lock.
 * Returns 0 with *verf set, or -errno. A short write sends the rest.
 * *out: the last part sent (out->at 0: none was). */
static int send_parts(struct wb *wb, struct wbe *e, uint64_t *verf, struct wrote *out)
{
	struct rpc *rpc = wb->c->rpc;
	const uint8_t *data = e->req + e->reqlen - e->len;
	uint64_t off = e->landed ? e->landed_at : e->off;
	uint32_t done = 0;
	uint8_t *req = e->req;
	size_t reqlen = e->reqlen;
	int rc;

	/* An append sent again after the server's machine restarted goes
	 * where it landed the first time: as an append it would add its
	 * bytes again if they had reached the disk before the crash. */
	if (e->landed && (rc = landed_req(e, &req, &reqlen)) < 0)
		return rc;

	/* A file made under a directory delegation is written once the
	 * daemon named it: the reply's attributes are then the file's as
	 * it stays (dirdeleg_i.h). Its close did not wait for this. */
	if (wb->c->dd)
		dirdeleg_wait_made(wb->c->dd, e->wi->ip);
	for (;;) {
		struct rpc_reply rep = { 0 };
		struct pfs_write_rep r;
		out->seq = gate_seq(wb->c->gate);
		(void)inode_own_snap(wb->c->it, &out->ns);
		out->at = inode_write_sent(wb->c->it, e->wi->ip);
		rc = rpc_call(rpc, PFS_OP_WRITE, req, reqlen, &rep);
		/* An append's reply may say where it landed (write_at_rep). */
		bool landed = false;
		uint64_t landed_at = 0;
		bool bad = false;
		if (rc == 0 && pfs_dec_write_rep(rep.buf, rep.len, &r) < 0) {
			if (dec_landed(rep.buf, rep.len, &r, &landed_at) == 0)
				landed = e->append && !e->landed && done == 0;
			else
				bad = true;
		}
		if (rc == 0 && (bad || r.written > e->len - done)) {
			pfs_warn("malformed WRITE reply from the server");
			rc = -EIO;
		}
		/* Where the whole append landed (a short one's rest, sent
		 * as an append, lands after it: not known). */
		if (rc == 0 && landed && r.written == e->len) {
			e->landed = true;
			e->landed_at = landed_at;
		}
		if (rc == 0) {
			*verf = rep.verf;
			out->attr = r.attr;
		}
		rpc_reply_free(&rep);
		if (req != e->req)
			free(req);
		if (rc < 0)
			return rc;
		done += r.written;
		if (done == e->len)
			return 0;
		if (r.written == 0)
			return -EIO;
		/* Short write (the disk filled up mid-way?): the rest, which
		 * reports the real error. */
		struct pfs_write_req m;
		struct pfs_wr w;
		pthread_mutex_lock(&wb->bg.lock);
		m.cr = e->wi->cr;
		m.fh = e->wi->fh;
		m.fid = e->wi->fid;
		pthread_mutex_unlock(&wb->bg.lock);
		m.flags = e->landed ? PFS_WR_AT : 0;
		m.offset = off + done;
		m.data.p = data + done;
		m.data.len = e->len - done;
		reqlen = (size_t)m.data.len + RPC_SMALL;
		if (!(req = malloc(reqlen)))
			return -ENOMEM;
		pfs_wr_init(&w, req, reqlen);
		if (pfs_enc_write_req(&w, &m) < 0) {
			free(req);
			return -EIO;
		}
		reqlen = w.len;
	}
}

/* Sends e (send_parts) and ends it as the file's own change: the
 * attributes of the reply are the file's after the write, and trusted
 * if it was the only write of the file pending and nothing else of ours
 * happened to the file since it was sent (trust_i.h). A push about the
 * file that arrived after the WRITE went out may be about a change the
 * reply's attributes predate (the reply can come on a bulk connection,
 * or be handled after the push thread applied it): then they are not
 * taken (the race gate, gate_i.h). Without wb->bg.lock. Returns as
 * send_parts. */
static int send_write(struct wb *wb, struct wbe *e, uint64_t *verf)
{
	struct wrote w = { 0 };
	int rc = send_parts(wb, e, verf, &w);

	gate_enter(wb->c->gate);
	bool have = rc == 0 && !gate_pushed_since(wb->c->gate, w.seq, &e->wi->ip->fh);
	inode_write_done(wb->c->it, e->wi->ip, w.at, have ? &w.attr : NULL, w.seq, w.ns);
	gate_leave(wb->c->gate);
	/* After a failure the kernel's pages are not the file's: the next
	 * open does not keep them (as NFS drops a mapping after a failed
	 * write); writer_main drops the range's pages now. */
	if (rc < 0)
		inode_drop_cached(e->wi->ip);
	return rc;
}

void wb_note_err(struct inode *ip, int rc)
{
	atomic_store(&ip->wb_err, -rc);
	atomic_fetch_add(&ip->wb_err_seq, 1);
}

/* Called with wb->bg.lock after e was sent with result rc. */
static void sent(struct wb *wb, struct wbe *e, int rc, uint64_t verf)
{
	struct wbi *w = e->wi;

	/* Writes may wait for this one to be sent (writer_main). */
	if (w->f.nagain)
		bg_wake_all(&wb->bg);
	bool redo = wbf_sent(&w->f, e, rc, verf);
	wb->inflight -= e->len;
	/* A write of the file held back to grow may go now. */
	if (--w->sending == 0 && tail_queued(w))
		bg_wake_all(&wb->bg);
	/* A writer waiting for room may now commit (wb_write). */
	pthread_cond_broadcast(&wb->space);
	if (redo) {
		/* Sent once more, after the earlier writes sent again. */
		wb->st.resent += e->len;
		wb_enqueue(wb, e);
	} else if (rc < 0) {
		wb_note_err(w->ip, rc);
		pfs_debug("write of %u bytes at %llu failed: %s", e->len,
			  (unsigned long long)e->off, strerror(-rc));
		wb_free_entry(wb, e);
	} else {
		wb->st.written += e->len;
		if (w->f.uncommitted >= WB_COMMIT_AT && !w->f.committing)
			w->bg_commit = true;
	}
	pthread_cond_broadcast(&w->cond);
}

int wb_wait_killable(struct wb *wb, pthread_cond_t *cond)
{
	struct timespec ts = pfs_deadline_ns((int64_t)KILLABLE_POLL_MS * 1000000);

	if (pthread_cond_timedwait(cond, &wb->bg.lock, &ts) != ETIMEDOUT)
		return 0;
	pthread_mutex_unlock(&wb->bg.lock);
	bool give_up = killable_poll() == KILLABLE_GIVE_UP;
	pthread_mutex_lock(&wb->bg.lock);
	return give_up ? -EINTR : 0;
}

static void *writer_main(void *arg)
{
	struct wb *wb = arg;

	pthread_mutex_lock(&wb->bg.lock);
	for (;;) {
		/* The first write that may go now: one sent again after a
		 * restart waits for the earlier writes it overlaps
		 * (wbf_sendable; sent() wakes us), a short one may wait to
		 * grow (held_back; sent() and release_held wake us). */
		struct wbe **pp = &wb->qhead, *e;
		int64_t now = pfs_mono_ns(), wait = -1, left = 0;
		while ((e = *pp) && (!wbf_sendable(&e->wi->f, e) || (left = held_back(wb, e, now)))) {
			if (left > 0 && (wait < 0 || left < wait))
				wait = left;
			left = 0;
			pp = &e->qnext;
		}
		if (!e) {
			if (!wb->qhead && wb->bg.stop)
				break;
			if (wait > 0)
				bg_wait_ns(&wb->bg, wait);
			else
				bg_wait(&wb->bg);
			continue;
		}
		*pp = e->qnext;
		if (wb->qtail == &e->qnext)
			wb->qtail = pp;
		wbf_sending(e);
		e->wi->sending++;
		pthread_mutex_unlock(&wb->bg.lock);
		uint64_t verf = 0;
		int rc = send_write(wb, e, &verf);
		pthread_mutex_lock(&wb->bg.lock);
		struct wbi *w = e->wi;
		fuse_ino_t nodeid = w->ip->nodeid;
		off_t off = (off_t)e->off, len = e->len;
		if (rc < 0 && wb->c->se) {
			w->users++;
			w->dropping++;
		}
		sent(wb, e, rc, verf);
		if (w->bg_commit && !w->f.committing) {
			/* Too much uncommitted data held for this file: commit
			 * it so its memory can be released. */
			w->bg_commit = false;
			int crc = wb_commit_unasked(wb, w, false);
			if (crc < 0)
				pfs_debug("background commit: %s", strerror(-crc));
		}
		if (rc < 0 && wb->c->se) {
			/* The kernel took the bytes into its pages when the
			 * WRITE was answered, before it was sent: they are not
			 * the file's. The range's pages go before a flush or
			 * fsync reports the error (wait_idle); not under the
			 * lock, and not before the entry stopped being pending:
			 * the kernel may wait for the page of a read or a write
			 * that waits here for it. (The kernel ignores a nodeid
			 * it no longer knows.) */
			pthread_mutex_unlock(&wb->bg.lock);
			fuse_lowlevel_notify_inval_inode(wb->c->se, nodeid, off, len);
			pthread_mutex_lock(&wb->bg.lock);
			w->dropping--;
			w->users--;
			pthread_cond_broadcast(&w->cond);
			wbi_maybe_free(wb, w);
		}
	}
	pthread_mutex_unlock(&wb->bg.lock);
	return NULL;
}

int wb_new(struct client *c, unsigned nthreads, size_t max_bytes, struct wb **out)
{
	struct wb *wb = calloc(1, sizeof(*wb));

	if (!wb)
		return -ENOMEM;
	wb->c = c;
	wb->max = max_bytes < 2 * PFS_MAX_IO ? 2 * PFS_MAX_IO : max_bytes;
	wb->qtail = &wb->qhead;
	htab_init(&wb->files);
	if (bg_init(&wb->bg) < 0) {
		free(wb);
		return -ENOMEM;
	}
	pfs_cond_init_mono(&wb->space);
	wb->want = nthreads;
	*out = wb;
	return 0;
}

int wb_start(struct wb *wb)
{
	for (unsigned i = 0; i < wb->want; i++) {
		int rc = bg_start(&wb->bg, "writeback", writer_main, wb);
		if (rc < 0)
			return rc;
	}
	return 0;
}

void wb_free(struct wb *wb)
{
	if (!wb)
		return;
	bg_stop(&wb->bg);
	for (struct hnode *n; (n = htab_pop(&wb->files));) {
		struct wbi *w = container_of(n, struct wbi, hn);
		struct wbe *next;
		for (struct wbe *e = w->f.head; e; e = next) {
			next = e->next;
			free(e->req);
			free(e);
		}
		pthread_cond_destroy(&w->cond);
		free(w);
	}
	htab_fini(&wb->files);
	while (wb->npool)
		free(wb->pool[--wb->npool]);
	pthread_cond_destroy(&wb->space);
	bg_fini(&wb->bg);
	free(wb);
}

/* The largest holder of uncommitted data, to commit when memory is full. */
static struct wbi *largest_uncommitted(struct wb *wb)
{
	struct wbi *best = NULL;
	size_t pos;

	for (struct hnode *n = htab_iter(&wb->files, &pos, NULL); n;
	     n = htab_iter(&wb->files, &pos, n)) {
		struct wbi *w = container_of(n, struct wbi, hn);
		if (!w->f.committing && w->f.uncommitted &&
		    (!best || w->f.uncommitted > best->f.uncommitted))
			best = w;
	}
	return best;
}

int wb_write(struct wb *wb, struct inode *ip, const struct pfs_creds *cr,
	     const struct pfs_fh *fh, uint64_t fid, uint32_t flags, uint64_t off,
	     const void *buf, size_t size, uint32_t tid)
{
	struct pfs_write_req m;
	struct pfs_wr wr;
	struct wbe *e;
	struct wbi *w;
	int rc = 0;

	if (size > PFS_MAX_IO)
		return -EINVAL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->bufsz = size + RPC_SMALL;
	e->reqlen = e->bufsz;
	e->req = buf_get(wb, e->bufsz);
	if (!e->req) {
		free(e);
		return -ENOMEM;
	}
	m.cr = *cr;
	m.fh = *fh;
	m.fid = fid;
	m.flags = flags;
	m.offset = off;
	m.data.p = buf;
	m.data.len = (uint32_t)size;
	pfs_wr_init(&wr, e->req, e->reqlen);
	if (pfs_enc_write_req(&wr, &m) < 0) {
		pthread_mutex_lock(&wb->bg.lock);
		buf_put_locked(wb, e->req, e->bufsz);
		pthread_mutex_unlock(&wb->bg.lock);
		free(e);
		return -EINVAL;
	}
	e->reqlen = wr.len;
	e->off = off;
	e->len = (uint32_t)size;
	e->grows = !(flags & (O_APPEND | O_DIRECT | O_SYNC | O_DSYNC));
	e->append = (flags & O_APPEND) != 0;
	e->queued_ns = pfs_mono_ns();

	if (wb->want == 0) {
		/* Synchronous mode: send now, keep nothing (every write is
		 * then only as durable as the daemon's page cache until an
		 * fsync; no re-send after a restart). */
		uint64_t verf;
		struct wbi tmp = { .ip = ip };
		e->wi = &tmp;
		inode_write_queued(ip);
		rc = send_write(wb, e, &verf);
		pthread_mutex_lock(&wb->bg.lock);
		buf_put_locked(wb, e->req, e->bufsz);
		pthread_mutex_unlock(&wb->bg.lock);
		free(e);
		return rc;
	}

	pthread_mutex_lock(&wb->bg.lock);
	w = wbi_get(wb, ip);
	if (!w) {
		rc = -ENOMEM;
		goto out_free;
	}
	w->users++;
	release_held(wb, w);
	/* Overlapping writes reach the daemon in order; memory is bounded. */
	for (;;) {
		/* O_APPEND: the daemon appends wherever the file ends, so
		 * appends go one at a time, in order. */
		/* After the attributes set again after a re-send, which
		 * would otherwise undo this write's mtime (wb_commit.c). */
		if (w->reapplying || ((flags & O_APPEND) ? w->f.npending > 0
							 : wbf_overlaps_pending(&w->f, off, size))) {
			if ((rc = wb_wait_killable(wb, &w->cond)) < 0)
				break;
			continue;
		}
		if (wb->held + size > wb->max && wb->held > 0) {
			struct wbi *big;
			if (wb->inflight == 0 && (big = largest_uncommitted(wb))) {
				big->users++;
				rc = wb_commit_locked(wb, big, true, false, false);
				big->users--;
				if (big != w)
					wbi_maybe_free(wb, big);
				if (rc < 0)
					break; /* memory stays full: tell the writer */
			} else if ((rc = wb_wait_killable(wb, &wb->space)) < 0) {
				break;
			}
			continue;
		}
		break;
	}
	w->users--;
	if (rc < 0) {
		wbi_maybe_free(wb, w);
		goto out_free;
	}
	wbf_note_writer(&w->f, tid);
	/* This write sets the mtime (and may clear set-user-ID) after what
	 * was set before it: sent again, it does so again. */
	w->after.mode.valid = w->after.mtime.valid = 0;
	/* It continues the file's last write, still queued: appended to it
	 * (wb_i.h, "Coalescing"). */
	struct wbe *t = w->f.tail;
	if (e->grows && t && t->grows && t->st == WBE_QUEUED && !t->again && !t->redo &&
	    t->off + t->len == off && req_prefix(t) == req_prefix(e) &&
	    memcmp(t->req, e->req, req_prefix(e)) == 0 && append(wb, t, e) == 0) {
		wb->held += size;
		wb->inflight += size;
		wb->st.coalesced++;
		if (t->len >= WB_GROW_MAX)
			bg_wake(&wb->bg);
		buf_put_locked(wb, e->req, e->bufsz);
		pthread_mutex_unlock(&wb->bg.lock);
		free(e);
		return 0;
	}
	w->cr = *cr;
	w->fh = *fh;
	w->fid = fid;
	e->wi = w;
	wbf_add(&w->f, e);
	wb->held += size;
	wb_enqueue(wb, e);
	pthread_mutex_unlock(&wb->bg.lock);
	return 0;

out_free:
	buf_put_locked(wb, e->req, e->bufsz);
	pthread_mutex_unlock(&wb->bg.lock);
	free(e);
	return rc;
}

int wb_wait_idle(struct wb *wb, struct wbi *w)
{
	release_held(wb, w);
	while (w->f.npending || w->f.committing || w->dropping || w->reapplying)
		if (wb_wait_killable(wb, &w->cond) < 0)
			return -EINTR;
	return 0;
}

int wb_wait(struct wb *wb, struct inode *ip)
{
	int rc = 0;

	pthread_mutex_lock(&wb->bg.lock);
	struct wbi *w = wbi_find(wb, ip);
	if (w) {
		w->users++;
		release_held(wb, w);
		while ((w->f.npending || w->reapplying) && rc == 0)
			rc = wb_wait_killable(wb, &w->cond);
		w->users--;
		wbi_maybe_free(wb, w);
	}
	pthread_mutex_unlock(&wb->bg.lock);
	return rc;
}

int wb_wait_data(struct wb *wb, struct inode *ip)
{
	if (wb->c->dd)
		dirdeleg_wait_made(wb->c->dd, ip);
	return wb_wait(wb, ip);
}

int wb_flush(struct wb *wb, struct inode *ip, uint32_t tid)
{
	pthread_mutex_lock(&wb->bg.lock);
	struct wbi *w = wbi_find(wb, ip);
	if (!w) {
		pthread_mutex_unlock(&wb->bg.lock);
		return 0;
	}
	if (!wbf_is_writer(&w->f, tid) && !rpc_is_up(wb->c->rpc)) {
		/* A copy of the descriptor closed by a thread that never
		 * wrote (a forked child closing inherited descriptors, maybe
		 * the very process that is to restart the daemon), while the
		 * daemon is away: do not hang it. The data stays held; the
		 * writer's own fsync or the release commits it. */
		int rc = wbf_take_err(&w->f);
		wbi_maybe_free(wb, w);
		pthread_mutex_unlock(&wb->bg.lock);
		return rc;
	}
	/* The writes are done (their errors reported); the commit is left
	 * to the release of the open file, which close(2) does not wait
	 * for: the data stays held until it is committed. */
	w->users++;
	int rc = wb_wait_idle(wb, w);
	if (rc == 0)
		rc = wbf_take_err(&w->f);
	w->users--;
	wbi_maybe_free(wb, w);
	pthread_mutex_unlock(&wb->bg.lock);
	return rc;
}

int wb_flush_nowait(struct wb *wb, struct inode *ip)
{
	pthread_mutex_lock(&wb->bg.lock);
	struct wbi *w = wbi_find(wb, ip);
	int rc = w ? wbf_take_err(&w->f) : 0;
	if (w)
		wbi_maybe_free(wb, w);
	pthread_mutex_unlock(&wb->bg.lock);
	return rc;
}

void wb_get_stats(struct wb *wb, struct wb_stats *st)
{
	pthread_mutex_lock(&wb->bg.lock);
	*st = wb->st;
	st->held = wb->held;
	pthread_mutex_unlock(&wb->bg.lock);
}

bool wb_holds(struct wb *wb, struct inode *ip)
{
	pthread_mutex_lock(&wb->bg.lock);
	bool held = wbi_find(wb, ip) != NULL;
	pthread_mutex_unlock(&wb->bg.lock);
	return held;
}
