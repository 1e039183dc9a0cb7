/* server.c: the listener and its connections, the path of a request
 * (queued on the thread pool; its completion: the reply cache, the
 * pushes of its changes, its reply held for acknowledgements, sent), and
 * the sweep of the handle cache. It hands every connection its frame
 * and close callbacks (conn_i.h) and routes the frames: the handshake,
 * PUSH_ACK, GOODBYE and FORGET on the loop, the rest to the workers.
 * Loop thread only. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podfs/codec.h"
#include "podfs/log.h"
#include "podfs/netaddr.h"
#include "conn_i.h"
#include "dispatch_i.h"
#include "drc_i.h"
#include "handles_i.h"
#include "admit_i.h"
#include "handshake_i.h"
#include "lscache_i.h"
#include "pace_i.h"
#include "pfsd_i.h"
#include "push_i.h"
#include "recall_i.h"
#include "req_i.h"
#include "revalhold_i.h"
#include "server_i.h"
#include "session_i.h"
#include "sweep_i.h"
#include "watch_i.h"
#include "workers_i.h"

int server_parse_addr(const char *s, struct sockaddr_storage *out)
{
	return pfs_addr_parse(s, -1, out);
}

/* --- requests --- */

/* Frees r once its reply was sent (or dropped). */
static void req_done(struct req *r)
{
	struct conn *c = r->c;

	push_acks_free(&r->acks);
	free(r->replay);
	free(r->begun_was);
	free(r);
	conn_unref(c);
}

static void ack_timer_cb(uv_timer_t *t);
static void ack_idle_cb(uv_idle_t *h);
static void ack_check_cb(uv_check_t *h);
static void recall_done(struct req *r, bool drop);

/* Arms the acknowledgement timer for next (uv_now ms; UINT64_MAX: stops
 * it) if that is earlier than it is armed for, or if it is to be
 * rearmed (reset). */
static void ack_timer_arm(struct pfsd *d, uint64_t next, bool reset)
{
	uint64_t now = uv_now(&d->loop);

	if (!reset && next >= d->ack_due)
		return;
	d->ack_due = next;
	if (next == UINT64_MAX)
		uv_timer_stop(&d->ack_timer);
	else
		uv_timer_start(&d->ack_timer, ack_timer_cb, next > now ? next - now : 0, 0);
}

/* Whether r, a change, still waits for the clients of the instance
 * before to revalidate (revalhold_i.h); if so, next is at most the end of
 * that wait. */
static bool restart_held(struct pfsd *d, struct req *r, uint64_t now, uint64_t *next)
{
	uint64_t until;

	if (!r->rvwait)
		return false;
	if (!revalhold_waits(d->rh, r->author, now, &until)) {
		r->rvwait = false;
		return false;
	}
	if (until < *next)
		*next = until;
	return true;
}

/* Sends the held replies whose acknowledgements all came; with expire,
 * first deals with the clients past their deadline (push_acks_expire:
 * another deadline, behind, or cut off), which may let replies go. With
 * all, every held reply goes (shutdown). Then arms the timer for the
 * earliest deadline left. */
static void held_scan(struct pfsd *d, bool expire, bool all)
{
	uint64_t now = uv_now(&d->loop), next = UINT64_MAX;
	struct req *r;

	/* First every expiry: a client that falls behind is done for every
	 * reply that waits for it, those before its own too. */
	if (expire)
		for (r = d->held; r; r = r->hnext)
			push_acks_expire(d, &r->acks, now);
	/* What the replies still held wait for, noted anew below. */
	d->ack_gen++;
	for (struct req **pp = &d->held; (r = *pp);) {
		/* Waiting on, or a recall's holder whose connection went
		 * while its session lives. */
		if (!all && (!push_acks_done(&r->acks) ||
			     (r->recall && recall_rearm(r, now, &next)) ||
			     restart_held(d, r, now, &next))) {
			uint64_t t = push_acks_next(&r->acks);
			if (t < next)
				next = t;
			push_acks_need(d, &r->acks);
			pp = &r->hnext;
			continue;
		}
		*pp = r->hnext;
		if (r->recall) {
			recall_done(r, all);
			continue;
		}
		conn_reply(r->c, &r->reply, r->acct);
		req_done(r);
	}
	if (!uv_is_closing((uv_handle_t *)&d->ack_timer))
		ack_timer_arm(d, next, true);
}

/* A deadline passed. The verdicts wait until this turn of the loop has
 * read what the sockets hold (a check handle runs after the poll for
 * I/O; the idle handle keeps that poll from blocking): an acknowledgement
 * that arrived while the loop was busy must count before its client is
 * found late. */
static void ack_timer_cb(uv_timer_t *t)
{
	struct pfsd *d = t->data;

	d->ack_due = UINT64_MAX;
	uv_idle_start(&d->ack_idle, ack_idle_cb);
	uv_check_start(&d->ack_check, ack_check_cb);
}

static void ack_idle_cb(uv_idle_t *h)
{
	/* Only there to make the poll for I/O return at once. */
}

static void ack_check_cb(uv_check_t *h)
{
	struct pfsd *d = h->data;

	uv_idle_stop(&d->ack_idle);
	uv_check_stop(&d->ack_check);
	held_scan(d, true, false);
}

/* Where the reply of r goes when a duplicate arrived while r ran: the
 * connection of the duplicate if it is still open, else the session's
 * main connection (a client takes a reply on any of its connections). */
static struct conn *resend_target(struct conn *c, struct session *s, const struct drc_ent *e)
{
	struct conn *o;

	LIST_FOREACH(o, &c->d->conns, link)
		if (o->id == e->resend_conn && o != c && !o->closing && o->sess == s)
			return o;
	return s->conn && s->conn != c ? s->conn : NULL;
}

/* The reply cache, once r's worker is done: the reply is kept (drc
 * opcodes, a WRITE that appended, an OPEN that truncated: keep_reply), or
 * the entry goes (once-only ones, and requests without a reply, so that a
 * resend runs again). */
static void drc_settle(struct req *r)
{
	struct session *s = r->s;

	if (r->violation) {
		drc_forget(&s->drc, r->drc);
		return;
	}
	struct conn *to = r->drc->resend ? resend_target(r->c, s, r->drc) : NULL;
	/* A retransmission arrived on another connection while this ran:
	 * answer it there too. */
	if (to)
		conn_send_copy(to, r->reply.hdr, r->reply.wire, r->reply.len, r->reply.raw);
	if (!(pfs_op_flags(r->h.op) & PFS_OPF_DRC) && !r->keep_reply) {
		drc_forget(&s->drc, r->drc);
		return;
	}
	uint64_t forgotten = s->d->drcpool.forgotten;
	struct drc_ent *e = r->drc;
	r->drc = NULL; /* the pool may forget it at once */
	drc_done(e, r->reply.hdr, r->reply.wire, r->reply.len, r->reply.raw);
	/* Said at the first, and again at each power of two: a lasting
	 * excess shows without a line per request. */
	uint64_t now = s->d->drcpool.forgotten;
	if (now != forgotten && (!forgotten || 63 - __builtin_clzll(now) > 63 - __builtin_clzll(forgotten)))
		pfsd_warn_rl(s->d, "replies kept for resent requests forgotten early: more than "
			     "reply-cache=%zu bytes of them (the host keeping the most forgets its "
			     "oldest); %" PRIu64 " forgotten so far", s->d->drcpool.max, now);
}

/* The key of the object a GETATTR names (push_ordered_add), else 0. */
static uint64_t getattr_key(const struct req *r)
{
	struct pfs_getattr_req m;

	if (r->h.op != PFS_OP_GETATTR || (r->h.flags & PFS_FF_CODED) ||
	    pfs_dec_getattr_req(r->in, r->h.wire_len, &m) < 0)
		return 0;
	return handles_key(r->d->hs, &m.fh);
}

static void after_work_cb(uv_work_t *work, int status);
static void drained_cb(struct conn *c);

/* --- requests held back for a recall (recall_i.h) --- */

/* The worker found that r names something other sessions hold
 * delegations on: each holder is pushed RECALL, and r waits among the
 * held replies for their acknowledgements (held_scan calls recall_done
 * then). */
static void recall_hold(struct req *r)
{
	struct session *s = r->s;
	struct pfsd *d = r->d;

	/* Pushes to its client need not wait for it meanwhile. */
	push_ordered_del(s, &r->fl);
	push_flush(s);
	r->recall_since = uv_now(&d->loop);
	recall_push_holders(r);
	uint64_t next = push_acks_next(&r->acks);
	/* Holders without a connection that takes pushes: nothing to wait
	 * for, unless their session lives (a reconnect on its way). */
	if (push_acks_done(&r->acks) && !recall_rearm(r, r->recall_since, &next)) {
		recall_done(r, false);
		return;
	}
	r->hnext = d->held;
	d->held = r;
	push_acks_need(d, &r->acks);
	ack_timer_arm(d, next, false);
}

/* The holders of r's recall acknowledged, or are past their deadlines:
 * r runs again (with drop, while the daemon stops, it is dropped). */
static void recall_done(struct req *r, bool drop)
{
	struct session *s = r->s;
	int ret;

	recall_settle(r);
	if (drop || r->d->stopping) {
		pace_done(r);
		if (r->drc)
			drc_forget(&s->drc, r->drc);
		conn_req_drop(r->c, r->acct);
		free(r->keys.v);
		payload_free(r->in);
		session_unref(s);
		if (r->c->npaced)
			drained_cb(r->c);
		req_done(r);
		return;
	}
	push_ordered_add(s, &r->fl, r->h.op, getattr_key(r));
	ret = workers_submit(r, after_work_cb);
	if (ret < 0)
		workers_failed(r, ret, after_work_cb);
}

static void after_work_cb(uv_work_t *work, int status)
{
	struct req *r = container_of(work, struct req, work);
	struct conn *c = r->c;
	struct session *s = r->s;
	struct pfsd *d = r->d;
	struct inval *iv;
	bool self = false, changed = false;
	uint64_t rv_until = UINT64_MAX;

	if (s && r->pooled) {
		r->pooled = false;
		workers_left(s, r, after_work_cb);
	}
	if (r->recall && s && status == 0 && !r->violation && !d->stopping) {
		recall_hold(r);
		return;
	}
	r->recall = false;

	if (status < 0 && !r->violation) {
		/* Cancelled: never ran. Answer nothing; the conn is going. */
		r->violation = true;
	}
	if (r->drc)
		drc_settle(r);
	if (s)
		session_note_hits(s, c, r->violation ? 0 : r->status);
	/* A FORGET overtook this request: what it handed out is cached
	 * again once its reply arrives (see the race analysis, push.c). */
	if (s && r->keys.n && r->epoch != s->forget_epoch && !r->violation)
		for (size_t i = 0; i < r->keys.n; i++)
			interest_add(d->it, r->keys.v[i], s->islot);
	free(r->keys.v);
	/* Pushes to others go out before this reply; one to ourselves only
	 * when our other metadata replies in flight may be older. */
	while ((iv = r->invals)) {
		r->invals = iv->next;
		uint64_t key = handles_key(d->hs, &iv->fh);
		if (s)
			self = push_to_self(s, &r->fl, key);
		/* A change, pushed or not: kept listings go (lscache_i.h). */
		if (iv->op != PFS_OP_LOCK_WAKE && d->lc)
			lscache_bump(d->lc);
		if (!r->violation && s && !d->stopping && iv->op == PFS_OP_LOCK_WAKE)
			session_lock_wake(d, &iv->fh);
		else if (!r->violation && s && !d->stopping) {
			push_inval(d, s, self, iv, key, &r->acks);
			changed = true;
		}
		free(iv);
	}
	if (r->violation && !c->closing)
		conn_violation(c, "bad compressed payload");
	if (r->h.op < PFS_OP_MAX && !r->violation) {
		uint64_t us = (uv_hrtime() - r->t0) / 1000;
		d->st_lat[r->h.op][lathist_bucket(us)]++;
		d->st_lat_sum_us[r->h.op] += us;
	}
	payload_free(r->in);
	/* Held until the others acknowledged (see "acknowledged pushes",
	 * push.c). It leaves the in-flight list now: pushes to this client
	 * need not wait for it (its client's race gate covers a reply that
	 * comes after a push), which keeps two clients changing one file
	 * from waiting for each other. */
	/* After a restart, a change also waits for the clients of the
	 * instance before to revalidate (revalhold_i.h). */
	/* (A reply of the instance before counts as a change: it made one
	 * that the other clients may not have heard of.) */
	r->rvwait = (changed || r->replayed) &&
		    revalhold_waits(d->rh, s->client_id, uv_now(&d->loop), &rv_until);
	if (r->rvwait)
		r->author = s->client_id;
	bool hold = ((r->acks.n && !push_acks_done(&r->acks)) || r->rvwait) && !r->splice_len &&
		    !r->violation && !c->closing && !d->stopping;
	/* A held reply keeps only its own bytes counted: the request's are
	 * freed, and its client must go on sending (its REVALIDATED, or the
	 * acknowledgements another held reply waits for). */
	if (hold)
		conn_req_shrink(c, &r->acct, PFS_FRAME_HDR_SIZE + r->reply.len);
	pace_done(r);
	if (r->splice_len && !hold)
		conn_reply_spliced(c, &r->reply, r->pipe, r->splice_len, r->acct);
	else if (!hold)
		conn_reply(c, &r->reply, r->acct);
	if (r->h.op == PFS_OP_AUTH && !r->violation && !c->closing && !d->stopping) {
		/* Pushes go after the AUTH reply, never before: the client
		 * reads (and drops) any before it as part of its handshake,
		 * without counting them in its acknowledgements. A recall may
		 * wait for this client's return (recall_rearm): on the next
		 * turn of the loop. */
		c->pushes_ok = true;
		if (d->held)
			ack_timer_arm(d, uv_now(&d->loop), false);
	}
	if (s) {
		push_ordered_del(s, &r->fl);
		push_flush(s);
		session_unref(s);
	}
	r->s = NULL;
	/* Its client may have been the last the held replies wait for. */
	if (r->h.op == PFS_OP_REVALIDATED && d->held && !d->stopping)
		ack_timer_arm(d, uv_now(&d->loop), false);
	if (hold) {
		uint64_t next = push_acks_next(&r->acks);
		r->hnext = d->held;
		d->held = r;
		push_acks_need(d, &r->acks);
		ack_timer_arm(d, rv_until < next ? rv_until : next, false);
		return;
	}
	if (c->npaced)
		drained_cb(c);
	req_done(r);
}

/* A duplicate of a once-only request of r's session (wire.h: once) is
 * answered from the reply cache, or, while the first try still runs,
 * marked to get its reply too. Returns true if r is such a duplicate. */
static bool duplicate(struct conn *c, struct req *r)
{
	struct drc_ent *e = drc_find(&r->s->drc, r->h.id);

	if (!e) {
		/* Made by an instance before this one, which was killed
		 * before its reply went out (replylog_i.h)? */
		const struct replylog_rec *p = replylog_find(&r->d->replies, r->s->client_id, r->h.id,
							     r->h.op);
		const char *how = NULL;
		if (p && p->kind == REPLYLOG_BEGUN) {
			how = "begun by the instance before: made again, or found made";
			r->begun = true;
			r->replayed = true; /* it waits as a change (after_work_cb) */
			if (p->fh.len && (r->begun_was = malloc(sizeof(*r->begun_was))))
				*r->begun_was = p->fh; /* a rename's (op_rename) */
		} else if (p && p->kind == REPLYLOG_APPEND) {
			/* Its bytes are in the file: op_write answers it. */
			how = "its append found where the instance before wrote it";
			r->landed = true;
			r->landed_at = p->at;
			r->landed_len = p->dlen;
			r->landed_crc = p->dcrc;
		} else if (p && (r->replay = replylog_copy(p))) {
			how = "answered with the reply of the instance before";
		}
		/* Said once; the count comes when they go (sweep.c). */
		if (how)
			pfs_log(r->d->rl_answered++ ? PFS_LOG_DEBUG : PFS_LOG_INFO,
				"conn %llu req %llu %s: sent again after a restart, %s",
				(unsigned long long)c->id, (unsigned long long)r->h.id,
				pfs_op_name(r->h.op), how);
		/* A reply kept goes the way of a request (dispatch.c takes
		 * it), so that it waits as a change's reply does. */
		if (r->replay)
			return false;
		r->drc = drc_begin(&r->s->drc, r->h.id, r->h.op);
		return false;
	}
	if (e->op != r->h.op)
		return false;
	pfs_debug("conn %llu req %llu %s: duplicate, %s", (unsigned long long)c->id,
		  (unsigned long long)r->h.id, pfs_op_name(r->h.op),
		  e->done ? "resending cached reply" : "still running");
	if (e->done) {
		conn_send_copy(c, e->hdr, e->wire, e->len, e->raw);
	} else {
		e->resend = true;
		e->resend_conn = c->id;
	}
	return true;
}

/* Starts r: its place among its session's ordered requests, then the
 * thread pool (or its session's queue). If that fails, r is dropped and
 * its connection closed. */
static void start_req(struct req *r)
{
	struct conn *c = r->c;
	int ret;

	if (r->s)
		push_ordered_add(r->s, &r->fl, r->h.op, getattr_key(r));
	pace_start(r);
	if (workers_try_on_loop(r, after_work_cb))
		return;
	ret = workers_submit(r, after_work_cb);
	if (ret == 0)
		return;
	pfs_err("conn %llu: cannot queue work: %s", (unsigned long long)c->id, uv_strerror(ret));
	pace_done(r);
	if (r->drc)
		drc_forget(&r->s->drc, r->drc);
	if (r->s) {
		push_ordered_del(r->s, &r->fl);
		push_flush(r->s);
		session_unref(r->s);
	}
	conn_req_drop(c, r->acct);
	payload_free(r->in);
	free(r->replay);
	free(r->begun_was);
	free(r);
	conn_close(c, "internal error");
	conn_unref(c);
}

/* c's socket took bytes: its paced READs start while read-queue allows,
 * each charged its reply bound now (pace_i.h). */
static void drained_cb(struct conn *c)
{
	struct req *r;

	while (!c->closing && (r = pace_next(c))) {
		r->acct += r->pace;
		conn_charge(c, r->pace);
		start_req(r);
	}
}

/* Queues the request of c whose header is c->h (payload: its wire
 * payload, owned; NULL for AUTH) on the thread pool, or, for a READ
 * while c's READ replies fill read-queue, on c's FIFO (pace_i.h). */
static void queue_req(struct conn *c, uint8_t *payload, uint32_t auth_flags)
{
	struct req *r = xcalloc(1, sizeof(*r));

	r->c = c;
	r->d = c->d;
	r->s = c->sess;
	r->t0 = uv_hrtime();
	r->h = c->h;
	r->in = payload;
	/* Its bytes, and room for the biggest reply it can have: a client
	 * that does not read its replies runs out of room, not the daemon
	 * out of memory (limits_i.h). A paced READ's room is taken when it
	 * starts. */
	r->acct = c->h.wire_len + ((c->h.flags & PFS_FF_CODED) ? c->h.raw_len : 0);
	r->pace = lim_reply_bound(c->h.op, c->h.flags, payload, c->h.wire_len);
	r->codecs = c->caps & PFS_CAPS_CODECS;
	r->no_splice = c->mode == CM_TLS;
	r->dir_attr = (c->caps & PFS_CAP_DIR_ATTR) != 0;
	r->new_dir = r->dir_attr && (c->caps & PFS_CAP_NEW_DIR);
	r->new_xattrs = r->dir_attr && (c->caps & PFS_CAP_NEW_XATTRS);
	r->rename_attr = (c->caps & PFS_CAP_RENAME_ATTR) != 0;
	r->unlink_victim = (c->caps & PFS_CAP_UNLINK_VICTIM) != 0;
	r->post_attr = (c->caps & PFS_CAP_POST_ATTR) != 0;
	r->append_at = (c->caps & PFS_CAP_APPEND_AT) != 0;
	r->list_xattr = (c->caps & PFS_CAP_LIST_XATTR) != 0;
	r->list_cookies = (c->caps & PFS_CAP_LIST_COOKIES) != 0;
	r->deleg = (c->caps & PFS_CAP_DELEG) != 0;
	r->auth_flags = auth_flags;
	r->rule = c->rule;
	r->work.data = r;
	if (r->s && (pfs_op_flags(r->h.op) & PFS_OPF_ONCE) && duplicate(c, r)) {
		payload_free(payload);
		free(r);
		return;
	}
	if (r->s) {
		session_ref(r->s);
		r->epoch = r->s->forget_epoch;
	}
	conn_ref(c);
	if (pace_hold(r)) {
		conn_req_add(c, r->acct);
		return;
	}
	r->acct += r->pace;
	conn_req_add(c, r->acct);
	start_req(r);
}

/* --- frames --- */

/* An authenticated connection's frame that is not a request for a
 * worker: PUSH_ACK, GOODBYE, FORGET, or a protocol violation. Returns
 * false for a request (the caller queues it). */
static bool on_loop(struct conn *c, const uint8_t *payload)
{
	struct pfsd *d = c->d;
	int ret;

	if (c->h.flags & PFS_FF_PUSH) {
		ret = push_ack(c, payload);
		if (ret < 0)
			conn_violation(c, "bad PUSH_ACK");
		else if (ret > 0 && d->held && push_ack_releases(c))
			held_scan(d, false, false);
	} else if (c->h.op == PFS_OP_HELLO || c->h.op == PFS_OP_AUTH) {
		conn_violation(c, "handshake request after AUTH");
	} else if (c->bulk && !(pfs_op_flags(c->h.op) & PFS_OPF_BULK)) {
		conn_violation(c, "not READ, WRITE or PING on a bulk connection");
	} else if (c->h.op == PFS_OP_GOODBYE) {
		if (c->sess)
			session_kill(c->sess);
		conn_send_small(c, c->h.id, PFS_OP_GOODBYE, PFS_FF_REPLY, 0, NULL, 0);
		conn_close_after_write(c, "said goodbye");
		conn_stop_reading(c);
	} else if (!c->sess) { /* session dropped by GOODBYE */
		conn_violation(c, "request after GOODBYE");
	} else if (c->h.op == PFS_OP_FORGET) {
		/* On the loop, in stream order: see the race analysis. */
		ret = dispatch_forget(d, c->sess, &c->h, payload);
		if (ret == -EBADMSG)
			conn_violation(c, "bad compressed payload");
		else
			conn_send_small(c, c->h.id, PFS_OP_FORGET, PFS_FF_REPLY, -ret, NULL, 0);
	} else {
		return false;
	}
	return true;
}

/* Counts an authenticated connection's request (not a PUSH_ACK) for
 * podfsd status and the metrics. */
static void count_req(struct conn *c)
{
	if ((c->h.flags & PFS_FF_PUSH) || c->h.op >= PFS_OP_MAX)
		return;
	c->d->st_req[c->h.op]++;
	if (c->sess)
		c->sess->st_req[c->h.op]++;
}

static void frame_cb(struct conn *c, uint8_t *payload)
{
	uint32_t auth_flags = 0;

	/* The client runs (push_acks_expire). */
	c->rx_at = uv_now(&c->d->loop);
	if (c->sess)
		c->sess->rx_at = c->rx_at;

	if (c->st != CS_READY) {
		if (handshake_frame(c, payload, &auth_flags) > 0) {
			admit_done(c);
			c->sess->rx_at = c->rx_at;
			c->sess->nconns_total++;
			count_req(c);
			conn_set_acct(c, c->sess->acct);
			/* The reply carries the root's attributes: a disk
			 * operation. */
			queue_req(c, NULL, auth_flags);
		}
	} else if (count_req(c), !on_loop(c, payload)) {
		queue_req(c, payload, 0);
		return; /* payload now owned by the request */
	}
	payload_free(payload);
}

/* --- connections --- */

static void closed_cb(struct conn *c)
{
	struct pfsd *d = c->d;
	struct req *r;

	/* Replies waiting for its acknowledgement may go: on the next turn
	 * of the loop (this may run inside held_scan). */
	if (d->held && !d->stopping)
		ack_timer_arm(d, uv_now(&d->loop), false);

	if (c->sess) {
		struct traffic *t = &c->sess->tr_closed;
		t->wire_in += c->tr.wire_in;
		t->raw_in += c->tr.raw_in;
		t->wire_out += c->tr.wire_out;
		t->raw_out += c->tr.raw_out;
		session_detach(c->sess, c);
	}
	/* Its paced READs never ran: dropped. */
	while ((r = pace_take(c))) {
		if (r->s)
			session_unref(r->s);
		conn_req_drop(c, r->acct);
		payload_free(r->in);
		free(r);
		conn_unref(c);
	}
	LIST_REMOVE(c, link);
	d->nconns--;
	if (c->st != CS_READY)
		admit_done(c);
}

static void reject_close_cb(uv_handle_t *h)
{
	free(h);
}

unsigned server_rules_replace(struct pfsd *d, struct exports *rules)
{
	struct conn *c;
	unsigned dropped = 0;

	exports_free(&d->rules);
	d->rules = *rules;
	memset(rules, 0, sizeof(*rules));
again:
	/* Closing one connection may close others (a session's bulk ones)
	 * and changes the list: start over after each. */
	LIST_FOREACH(c, &d->conns, link) {
		const struct export_rule *r;
		if (c->closing)
			continue;
		r = exports_match(&d->rules, (const struct sockaddr *)&c->addr);
		if (r) {
			c->rule = r->o; /* from its next request on */
			continue;
		}
		pfs_notice("conn %llu: %s (%s): no export rule admits it any more; disconnecting",
			   (unsigned long long)c->id, c->peer, c->host[0] ? c->host : "?");
		conn_close(c, "no longer admitted by the export rules");
		dropped++;
		goto again;
	}
	return dropped;
}

static void on_connection(uv_stream_t *server, int status)
{
	struct pfsd *d = server->data;
	struct conn *c;

	if (status < 0) {
		pfsd_warn_rl(d, "accept: %s", uv_strerror(status));
		return;
	}
	if (d->stopping)
		return;
	/* All connections in use: a pending handshake of the busiest
	 * source makes room (admit_pending). */
	if (d->nconns >= PFSD_MAX_CONNS && d->npreauth > 0) {
		struct pfs_srckey busiest;
		if (srcq_busiest(&d->srcq, &busiest))
			admit_evict(d, &busiest, NULL);
	}
	/* One over the cap is let in to learn its address (admit_room). */
	if (d->nconns > PFSD_MAX_CONNS) {
		uv_tcp_t *t = xmalloc(sizeof(*t));
		uv_tcp_init(&d->loop, t);
		if (uv_accept(server, (uv_stream_t *)t) == 0)
			pfs_debug("too many connections (%u); refusing one", d->nconns);
		uv_close((uv_handle_t *)t, reject_close_cb);
		return;
	}
	c = conn_new(d, frame_cb, closed_cb);
	conn_on_drain(c, drained_cb);
	LIST_INSERT_HEAD(&d->conns, c, link);
	d->nconns++;
	d->accepted++;
	d->npreauth++;
	if (conn_accept(c, server) < 0 || !admit_rule(c))
		return;
	if (d->nconns > PFSD_MAX_CONNS && !admit_room(c))
		return;
	admit_pending(d, c);
	handshake_start(c);
	pfs_debug("conn %llu: connection from %s", (unsigned long long)c->id, c->peer);
	conn_flow(c);
}

int server_listen(struct pfsd *d, char *err, size_t errlen, int *port_out)
{
	struct sockaddr_storage ss;
	char name[80];
	int len = sizeof(ss), ret;

	uv_tcp_init(&d->loop, &d->listener);
	d->listener.data = d;
	ret = uv_tcp_bind(&d->listener, (const struct sockaddr *)&d->listen_addr, 0);
	if (ret == 0)
		ret = uv_listen((uv_stream_t *)&d->listener, 1024, on_connection);
	if (ret < 0) {
		snprintf(err, errlen, "cannot listen on %s: %s", d->o.listen, uv_strerror(ret));
		return ret;
	}
	ret = uv_tcp_getsockname(&d->listener, (struct sockaddr *)&ss, &len);
	if (ret < 0) {
		snprintf(err, errlen, "getsockname: %s", uv_strerror(ret));
		return ret;
	}
	conn_addr_name(&ss, name, sizeof(name));
	*port_out = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						   : ((struct sockaddr_in *)&ss)->sin_port);
	pfs_notice("listening on %s", name);
	sweep_start(d);
	uv_timer_init(&d->loop, &d->ack_timer);
	d->ack_timer.data = d;
	conn_pace_init(d);
	d->ack_due = UINT64_MAX;
	uv_idle_init(&d->loop, &d->ack_idle);
	uv_check_init(&d->loop, &d->ack_check);
	d->ack_check.data = d;
	return 0;
}

void server_stop(struct pfsd *d)
{
	if (d->stopping)
		return;
	d->stopping = true;
	if (!uv_is_closing((uv_handle_t *)&d->listener))
		uv_close((uv_handle_t *)&d->listener, NULL);
	sweep_stop(d);
	watch_stop(d);
	while (!LIST_EMPTY(&d->conns))
		conn_close(LIST_FIRST(&d->conns), "shutting down");
	held_scan(d, false, true);
	if (!uv_is_closing((uv_handle_t *)&d->ack_timer)) {
		uv_close((uv_handle_t *)&d->ack_timer, NULL);
		uv_close((uv_handle_t *)&d->ack_idle, NULL);
		uv_close((uv_handle_t *)&d->ack_check, NULL);
	}
	conn_pace_stop(d);
	sessions_stop(d);
}
