/* push.c: invalidation pushes to the clients that cache what changed,
 * their order against replies, and the acknowledgements a change's reply
 * waits for (see push_i.h). Loop thread only. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "podfs/log.h"
#include "chunks_i.h"
#include "acklat_i.h"
#include "conn_i.h"
#include "lscache_i.h"
#include "pfsd_i.h"
#include "push_i.h"
#include "session_i.h"

/* --- the order of pushes and replies ---
 *
 * Who gets a push. A change is pushed to the sessions in the interest set
 * of the object (interest.c): those that were handed the object (or, for
 * INVAL_ENTRY and a directory's INVAL_INODE, the parent directory, whose
 * names and negative entries they cache) and did not FORGET it. Never to
 * the session that made the change: its kernel applied the change itself
 * (a write's mtime and size, a rename, an unlink's nlink...). The exception
 * is a session that had other metadata requests in flight (LOOKUP,
 * GETATTR, READDIR...) when its own change completed: one of them may have
 * read the state before the change and its reply may arrive after the
 * change's reply, so that session gets the push too, after those replies.
 *
 * Race analysis. Every handler registers the session's interest in an
 * object (worker thread, interest_add under a stripe mutex) BEFORE it
 * reads the object's attributes, entries or data. A change is pushed from
 * the loop after the worker that made it finished, by looking the interest
 * set up then. For a session B reading an object while A changes it:
 *   1. B registered before A's lookup of the set: B is in the set and gets
 *      the push; or
 *   2. B registered after A's lookup, so after A's change completed: B's
 *      read, which follows its registration, sees the new state.
 * Either way B ends with fresh state, provided that in case 1 the push is
 * not applied BEFORE B's reply, which might carry the old state (B may
 * have read before A's change). Both frames go out on B's TCP stream from
 * this loop, so the order is ours to choose: a push to B is sent at once
 * if B has no ordered request in flight, else it waits in B's deferred
 * FIFO until every request of B that was in flight when the push was made
 * (seq < wait) has queued its reply. Requests B sends later cannot hold
 * old state: they run after A's change completed. Only requests that may
 * carry state are ordered (not PING, locks, RELEASE, FSYNC, STATFS), and a
 * push waits for at most the requests in flight when it was made, so a
 * busy client cannot starve it.
 *
 * FORGET runs on the loop in stream order, so a request sent after it
 * registers again. A request sent before a FORGET and still in flight when
 * the FORGET arrives may hand the client an object the FORGET named (the
 * client's lookup count went to 0 and the old lookup's reply brings the
 * inode back): such a request, on completion, registers every key it handed
 * out again (forget_epoch). Extra interest costs only an unneeded push.
 *
 * Pushes to A and to B travel on different streams; A's reply is queued
 * after the pushes to others, so once A learns that its change is done,
 * every other client's invalidation is already on its way.
 *
 * A session without a connection gets no pushes: it revalidates what it
 * caches (REVALIDATE) when it reconnects. A connection that does not read
 * and has PFSD_MAX_QUEUED bytes queued, or a session with PFSD_MAX_DEFERRED
 * pushes waiting, is dropped for the same reason: a lost push must never
 * leave a client with stale data, a reconnect costs one bulk revalidation.
 */

/* Whether c takes pushes now: authenticated, and its AUTH reply is
 * queued (before it, the client drops them uncounted). */
static bool takes_pushes(const struct conn *c)
{
	return c && !c->closing && c->st == CS_READY && c->pushes_ok && (c->caps & PFS_CAP_PUSH);
}

/* Whether held bytes of pushes for one client are more than it may hold
 * now: while the daemon is over its memory budget, the share every
 * session keeps whatever others hold (LIM_MIN_SHARE). */
static bool past_share(const struct pfsd *d, size_t held)
{
	return d->mem >= d->lim.memory && held >= LIM_MIN_SHARE;
}

/* Sends one push frame (op, p[len]) to s now. Nothing if s has no
 * connection that takes pushes; a connection that does not read its
 * pushes (PFSD_MAX_QUEUED bytes waiting) is closed instead. */
static void push_send(struct session *s, uint16_t op, const uint8_t *p, size_t len)
{
	struct conn *c = s->conn;

	if (!takes_pushes(c))
		return;
	/* Pushes are made whether or not their client reads them, so they
	 * are bounded here: 64 MiB per connection, and beyond its share
	 * (past_share) of bytes its socket did not take. */
	if (c->mem >= PFSD_MAX_QUEUED || past_share(c->d, conn_queued(c))) {
		pfsd_warn_rl(c->d, "conn %llu: %s (%s) does not read its invalidations "
				   "(%zu bytes queued, daemon %zu of %zu); closing",
			     (unsigned long long)c->id, c->peer, c->host, conn_queued(c),
			     c->d->mem, c->d->lim.memory);
		conn_close(c, "too far behind on invalidations");
		return;
	}
	c->push_sent++;
	c->d->st_pushes++;
	/* One push at a time is timed, for the client's deadline. */
	if (!c->probe_n && !c->behind && (c->caps & PFS_CAP_PUSH_ACK)) {
		c->probe_n = c->push_sent;
		c->probe_at = uv_now(&c->d->loop);
	}
	conn_send_small(c, 0, op, PFS_FF_PUSH, 0, p, len);
}

void push_flush(struct session *s)
{
	struct inflight *first = TAILQ_FIRST(&s->inflight);
	uint64_t min = first ? first->seq : UINT64_MAX;
	struct pushq *q;
	size_t freed = 0;

	while ((q = STAILQ_FIRST(&s->deferred)) && q->wait <= min) {
		STAILQ_REMOVE_HEAD(&s->deferred, link);
		s->ndq--;
		if (!s->dead) {
			push_send(s, q->op, q->p, q->len);
			if (s->conn)
				s->conn->flushed_at = uv_now(&s->d->loop);
		}
		freed += sizeof(*q) + q->len;
		free(q);
	}
	if (freed) {
		s->dq_bytes -= freed;
		pfsd_mem_release(s->d, s->acct, freed);
	}
}

void push_drop_queue(struct session *s)
{
	struct pushq *q;

	while ((q = STAILQ_FIRST(&s->deferred))) {
		STAILQ_REMOVE_HEAD(&s->deferred, link);
		free(q);
	}
	s->ndq = 0;
	if (s->dq_bytes) {
		pfsd_mem_release(s->d, s->acct, s->dq_bytes);
		s->dq_bytes = 0;
	}
}

/* Queues one frame at the tail of s's FIFO (c: its connection), to go
 * out once no request of s with seq < wait is in flight, and after the
 * frames ahead of it; its bytes count in s's memory and the daemon's.
 * Returns false (and closes c) if s has PFSD_MAX_DEFERRED frames waiting
 * already, or, while the daemon is over its memory budget, the share of
 * memory every session keeps (LIM_MIN_SHARE). */
static bool defer(struct session *s, struct conn *c, uint64_t wait, uint16_t op,
		  const uint8_t *p, size_t len)
{
	struct pfsd *d = s->d;
	struct pushq *q;

	if (s->ndq >= PFSD_MAX_DEFERRED || past_share(d, s->dq_bytes)) {
		pfsd_warn_rl(d, "conn %llu: %s (%s) has %u invalidations waiting (%zu bytes); closing",
			     (unsigned long long)c->id, c->peer, c->host, s->ndq, s->dq_bytes);
		conn_close(c, "too far behind on invalidations");
		return false;
	}
	q = xmalloc(sizeof(*q) + len);
	q->wait = wait;
	q->op = op;
	q->len = (uint16_t)len;
	memcpy(q->p, p, len);
	STAILQ_INSERT_TAIL(&s->deferred, q, link);
	s->ndq++;
	s->dq_bytes += sizeof(*q) + len;
	pfsd_mem_hold(d, s->acct, sizeof(*q) + len);
	return true;
}

static void ackwait_add(struct acks *a, struct session *s, uint64_t target, bool recall);

/* Whether s has a connection that takes pushes. */
static bool pushable(const struct session *s)
{
	return !s->dead && takes_pushes(s->conn);
}

/* Pushes (or defers) one frame to s. Returns the push_sent count its
 * connection will have once this push is written (see "acknowledged
 * pushes"), or 0 if nothing will be written. */
static uint64_t push_to(struct session *s, uint16_t op, const uint8_t *p, size_t len)
{
	struct conn *c = s->conn;

	if (!pushable(s))
		return 0;
	if (TAILQ_EMPTY(&s->inflight) && STAILQ_EMPTY(&s->deferred)) {
		push_send(s, op, p, len);
		return c->closing ? 0 : c->push_sent;
	}
	if (!defer(s, c, s->seq_next, op, p, len))
		return 0;
	/* The deferred pushes go out in order on this connection. */
	return c->push_sent + s->ndq;
}

/* A frame that need not wait for replies (LOCK_WAKE) still takes a
 * number on the connection: sent ahead of pushes waiting in the FIFO,
 * it would shift each of them one number later than the count a held
 * reply waits for (push_to), and the client's acknowledgement of the
 * wake-up would let that reply go before the client had the
 * invalidation. So it goes at once only when nothing waits, and else at
 * the FIFO's tail, right after the pushes ahead of it. */
void push_unordered(struct session *s, uint16_t op, const uint8_t *p, size_t len)
{
	if (!pushable(s))
		return;
	if (STAILQ_EMPTY(&s->deferred))
		push_send(s, op, p, len);
	else
		(void)defer(s, s->conn, 0, op, p, len);
}

bool push_recall(struct session *s, const uint8_t *p, size_t len, struct acks *acks)
{
	struct conn *c = s->conn;
	uint64_t n;

	if (!pushable(s))
		return false;
	if (STAILQ_EMPTY(&s->deferred)) {
		push_send(s, PFS_OP_RECALL, p, len);
		n = c->closing ? 0 : c->push_sent;
	} else {
		if (!defer(s, c, 0, PFS_OP_RECALL, p, len))
			return false;
		n = c->push_sent + s->ndq;
	}
	if (n > c->recall_mark)
		c->recall_mark = n;
	ackwait_add(acks, s, n, true);
	return n != 0;
}

bool push_acks_acked(const struct acks *a, uint64_t client_id)
{
	for (size_t i = 0; i < a->n; i++)
		if (a->v[i].c->client_id == client_id && !a->v[i].silent &&
		    a->v[i].c->push_acked >= a->v[i].target)
			return true;
	return false;
}

bool push_acks_silent(const struct acks *a, uint64_t client_id)
{
	for (size_t i = 0; i < a->n; i++)
		if (a->v[i].c->client_id == client_id && a->v[i].silent)
			return true;
	return false;
}

bool push_to_self(const struct session *s, const struct inflight *fl, uint64_t key)
{
	if (s->nmeta <= (fl->ordered && fl->meta ? 1u : 0u))
		return false;
	const struct inflight *o;
	TAILQ_FOREACH(o, &s->inflight, link)
		if (o != fl && o->meta && (o->key == 0 || o->key == key))
			return true;
	return false;
}

void push_ordered_add(struct session *s, struct inflight *fl, uint16_t op, uint64_t key)
{
	if (!(pfs_op_flags(op) & PFS_OPF_ORDERED))
		return;
	fl->ordered = true;
	fl->meta = (pfs_op_flags(op) & PFS_OPF_META) != 0;
	fl->key = op == PFS_OP_GETATTR ? key : 0;
	fl->seq = s->seq_next++;
	TAILQ_INSERT_TAIL(&s->inflight, fl, link);
	if (fl->meta)
		s->nmeta++;
}

void push_ordered_del(struct session *s, struct inflight *fl)
{
	if (!fl->ordered)
		return;
	fl->ordered = false;
	TAILQ_REMOVE(&s->inflight, fl, link);
	if (fl->meta)
		s->nmeta--;
}

/* --- acknowledged pushes ---
 *
 * Close-to-open without asking. A client may answer an open from its
 * caches (fs/ops_common.c ops_open_locally) only if it has received the push of
 * every change whose reply reached its author before that open. Pushes
 * alone do not ensure it: the push to B and the reply to A travel on
 * different streams, so A's close can return, A can tell B, and B can
 * open before the invalidation reached B. So the reply to a
 * change is held (AFS's callback break) until every other client that
 * negotiated PFS_CAP_PUSH_ACK and was sent a push for it acknowledged
 * that push (PUSH_ACK carries how many pushes of the connection it
 * applied; the push's number on its connection is known when it is
 * queued, deferred pushes included, since they go out in order). A
 * client whose connection changed or closed meanwhile no longer counts:
 * it revalidates everything before trusting its caches.
 *
 * Late clients. Each client has a deadline of its own (acklat_i.h): a
 * few times the delays it showed lately, at least --ack-timeout (30 ms),
 * at most PFSD_ACK_WAIT_MS. Past it, a client that sent nothing since is
 * stalled (SIGSTOP, a host that froze): it falls behind, the reply goes,
 * and no change waits for it until it has acknowledged every push it was
 * sent by then (behind_mark). Its connection stays open: its pushes wait
 * in order on the stream (in its socket, or ours), and once it runs again
 * its connection thread reads and numbers each of them before any frame
 * that follows, while its caches answer nothing that would need a round
 * trip (an open, a lookup or getattr answered from its caches) before it
 * read every byte its socket holds (transport_quiet). What it may still
 * show meanwhile is what its kernel caches (docs/coherence.md, "Late and
 * stalled clients"). A client that sent frames is running: it gets another
 * deadline, up to PFSD_ACK_WAIT_MS, past which it is cut off (closed, so
 * that it revalidates): a client that runs but does not acknowledge is
 * broken, and must not be trusted with its caches.
 *
 * Clients without the capability are not waited for; they ask at every
 * open (close-to-open by an OPEN round trip after the push). */

static void need(struct pfsd *d, struct conn *c, uint64_t target)
{
	if (c->ack_gen != d->ack_gen) {
		c->ack_gen = d->ack_gen;
		c->ack_need = target;
	} else if (target < c->ack_need) {
		c->ack_need = target;
	}
}

/* Notes that the reply waiting on a must wait for s's acknowledgement of
 * its connection's push number target (0: nothing was pushed). */
static void ackwait_add(struct acks *a, struct session *s, uint64_t target, bool recall)
{
	struct conn *c = s->conn;
	struct pfsd *d;
	uint64_t now;

	if (!target || !(c->caps & PFS_CAP_PUSH_ACK) || (c->behind && !recall))
		return;
	d = c->d;
	need(d, c, target);
	if (!a->id)
		a->id = ++d->acks_seq;
	if (c->ackw_id == a->id && c->ackw_i < a->n && a->v[c->ackw_i].c == c) {
		struct ackwait *w = &a->v[c->ackw_i];
		if (target > w->target)
			w->target = target;
		w->recall |= recall;
		w->held |= target > c->push_sent;
		return;
	}
	c->ackw_id = a->id;
	c->ackw_i = a->n;
	if (a->n == a->cap) {
		size_t n = a->cap ? a->cap * 2 : 4;
		struct ackwait *v = xcalloc(n, sizeof(*v));
		if (a->n)
			memcpy(v, a->v, a->n * sizeof(*v));
		free(a->v);
		a->v = v;
		a->cap = n;
	}
	conn_ref(c);
	now = uv_now(&d->loop);
	a->v[a->n++] = (struct ackwait){
		.c = c, .target = target, .since = now, .recall = recall,
		.held = target > c->push_sent,
		.deadline = now + (recall ? d->o.recall_timeout
				   : acklat_deadline(&c->lat, now, d->o.ack_timeout,
						     PFSD_ACK_WAIT_MS)),
	};
}

/* Done: acknowledged, or the client fell behind (a recall's holder: was
 * silent past --recall-timeout), or its connection is gone (closing, or
 * its session ended): it revalidates everything before trusting its
 * caches again. */
static bool ackwait_done(const struct ackwait *w)
{
	return w->c->closing || !w->c->sess || w->silent || (w->c->behind && !w->recall) ||
	       w->c->push_acked >= w->target;
}

bool push_acks_done(const struct acks *a)
{
	for (size_t i = 0; i < a->n; i++)
		if (!ackwait_done(&a->v[i]))
			return false;
	return true;
}

void push_acks_need(struct pfsd *d, const struct acks *a)
{
	for (size_t i = 0; i < a->n; i++)
		if (!ackwait_done(&a->v[i]))
			need(d, a->v[i].c, a->v[i].target);
}

bool push_ack_releases(const struct conn *c)
{
	return c->ack_gen == c->d->ack_gen && c->push_acked >= c->ack_need;
}

/* c was waited for since `since` and sent nothing: changes stop waiting
 * for it until it acknowledged what it was sent by now. */
static void fall_behind(struct pfsd *d, struct conn *c, uint64_t now, uint64_t since)
{
	c->behind = true;
	c->behind_at = now;
	c->behind_mark = c->push_sent;
	c->probe_n = 0; /* its delay now is the stall's, not the client's */
	d->st_ack_misses++;
	if (c->sess)
		c->sess->st_ack_misses++;
	pfsd_warn_rl(d, "conn %llu: %s (%s) did not acknowledge an invalidation within %llu ms "
		     "and sends nothing: changes no longer wait for it until it has caught up "
		     "(its invalidations stay queued)",
		     (unsigned long long)c->id, c->peer, c->host,
		     (unsigned long long)(now - since));
}

/* When w's wait began (*since; acklat_wait_began): for a push held in
 * its session's FIFO, when it went out. Counting the time it was held
 * made a client that waited for a long reply (a listing of a large
 * directory) fall behind. */
static enum ackstart ackwait_start(struct ackwait *w, uint64_t now, uint32_t wait, uint64_t *since)
{
	const struct conn *c = w->c;
	const struct session *s = c->sess;
	bool working = s && (s->running || s->queued);

	return acklat_wait_began(w->held, w->target, c->push_sent, working, c->flushed_at,
				 w->since, now, wait, PFSD_ACK_WAIT_MS, since, &w->deadline);
}

/* w, a recall's wait for a holder, is past its deadline: another one
 * while the holder shows life, else done (silent), or its connection
 * closed (running, but past PFSD_RECALL_WAIT_MS). */
static void recall_expire(struct pfsd *d, struct ackwait *w, uint64_t now)
{
	struct conn *c = w->c;
	struct session *s = c->sess;
	uint64_t last = s->rx_at;

	if (s->running)
		last = now; /* one of its requests runs here: no silence of its own */
	switch (acklat_recall_expired(now, session_recall_start(s, w->since), last,
				      d->o.recall_timeout, PFSD_RECALL_WAIT_MS, &w->deadline)) {
	case ACKEXP_EXTEND:
		break;
	case ACKEXP_BEHIND:
		w->silent = true;
		break;
	case ACKEXP_CUTOFF:
		pfsd_warn_rl(d, "conn %llu: %s (%s) did not return its delegations within %u ms, "
			     "though it sends requests; closing",
			     (unsigned long long)c->id, c->peer, c->host, PFSD_RECALL_WAIT_MS);
		conn_close(c, "delegations not returned");
		break;
	}
}

void push_acks_expire(struct pfsd *d, struct acks *a, uint64_t now)
{
	for (size_t i = 0; i < a->n; i++) {
		struct ackwait *w = &a->v[i];
		struct conn *c = w->c;
		uint64_t since;
		if (ackwait_done(w) || now < w->deadline)
			continue;
		if (w->recall) {
			recall_expire(d, w, now);
			continue;
		}
		uint32_t dl = acklat_deadline(&c->lat, now, d->o.ack_timeout, PFSD_ACK_WAIT_MS);
		if (ackwait_start(w, now, dl, &since) == ACKSTART_NOT_YET)
			continue;
		/* Its acknowledgements wait behind a RECALL it is working on
		 * (sending what it answered under its delegations, which may
		 * take long): this change need not wait for that. */
		if (c->push_acked < c->recall_mark) {
			fall_behind(d, c, now, since);
			continue;
		}
		switch (acklat_expired(now, since, c->rx_at, dl, PFSD_ACK_WAIT_MS)) {
		case ACKEXP_EXTEND:
			w->deadline = now + dl;
			if (w->deadline > since + PFSD_ACK_WAIT_MS)
				w->deadline = since + PFSD_ACK_WAIT_MS;
			d->st_ack_extended++;
			break;
		case ACKEXP_CUTOFF:
			/* A client that runs but does not acknowledge is
			 * broken, unless the push is still held here (in its
			 * session's FIFO), or frames for it still wait: the
			 * push may be behind them (a slow link backed up with
			 * READ replies). It only stops being waited for. */
			if (c->push_sent < w->target || conn_unsent(c)) {
				fall_behind(d, c, now, since);
				break;
			}
			d->st_ack_cutoffs++;
			pfsd_warn_rl(d, "conn %llu: %s (%s) did not acknowledge an invalidation "
				     "within %u ms, though it sends requests; closing",
				     (unsigned long long)c->id, c->peer, c->host, PFSD_ACK_WAIT_MS);
			conn_close(c, "invalidation not acknowledged");
			break;
		case ACKEXP_BEHIND:
			fall_behind(d, c, now, since);
			break;
		}
	}
}

uint64_t push_acks_next(const struct acks *a)
{
	uint64_t next = UINT64_MAX;

	for (size_t i = 0; i < a->n; i++)
		if (!ackwait_done(&a->v[i]) && a->v[i].deadline < next)
			next = a->v[i].deadline;
	return next;
}

void push_acks_free(struct acks *a)
{
	for (size_t i = 0; i < a->n; i++)
		conn_unref(a->v[i].c);
	free(a->v);
	a->v = NULL;
	a->n = a->cap = 0;
}

int push_ack(struct conn *c, const uint8_t *payload)
{
	struct pfs_push_ack m;
	uint64_t now;

	/* The bytes received (an uncoded frame: wire_len == raw_len). */
	if (pfs_dec_push_ack(payload, c->h.wire_len, &m) < 0 || m.count > c->push_sent)
		return -EBADMSG;
	if (m.count <= c->push_acked)
		return 0;
	c->push_acked = m.count;
	now = uv_now(&c->d->loop);
	if (c->probe_n && m.count >= c->probe_n) {
		acklat_sample(&c->lat, now, now - c->probe_at);
		c->probe_n = 0;
	}
	/* Every RECALL pushed to it is applied: it owes none. */
	if (c->sess && m.count >= c->recall_mark)
		c->sess->recall_owed = 0;
	if (c->behind && m.count >= c->behind_mark) {
		c->behind = false;
		pfs_info("conn %llu: %s (%s) caught up with its invalidations after %llu ms",
			 (unsigned long long)c->id, c->peer, c->host,
			 (unsigned long long)(now - c->behind_at));
	}
	return 1;
}

/* --- fan-out --- */

/* push_to s, noting in acks (if any) what the reply of `from`'s change
 * waits for. */
static void push_one(struct session *s, struct session *from, uint16_t op, const uint8_t *p,
		     size_t len, struct acks *acks)
{
	uint64_t n = push_to(s, op, p, len);

	if (acks && s != from)
		ackwait_add(acks, s, n, false);
}

void push_inval(struct pfsd *d, struct session *from, bool self, const struct inval *iv,
		uint64_t key, struct acks *acks)
{
	uint8_t buf[PFS_FH_MAX + PFS_NAME_MAX + 64];
	uint64_t bits[INTEREST_WORDS];
	struct pfs_wr w;
	struct conn *c, *next;
	int ret;

	/* Kept listings stop being served before the sessions to tell are
	 * looked up (lscache_i.h). */
	if (d->lc)
		lscache_bump(d->lc);
	if (d->stopping)
		return;
	pfs_wr_init(&w, buf, sizeof(buf));
	if (iv->op == PFS_OP_INVAL_INODE) {
		struct pfs_inval_inode_push m = { .fh = iv->fh, .offset = iv->off, .length = iv->len };
		ret = pfs_enc_inval_inode_push(&w, &m);
	} else {
		struct pfs_inval_entry_push m = { .parent = iv->fh, .name = iv->name };
		ret = pfs_enc_inval_entry_push(&w, &m);
	}
	if (ret < 0)
		return;
	if (!interest_get(d->it, key, bits))
		return;
	for (unsigned i = 0; i < INTEREST_WORDS; i++) {
		for (uint64_t b = bits[i]; b; b &= b - 1) {
			struct session *s = d->slot_sess[i * 64 + __builtin_ctzll(b)];
			if (s && (s != from || self))
				push_one(s, from, iv->op, buf, w.len, acks);
		}
	}
	/* Sessions without a slot share one (INTEREST_SLOTLESS): each gets
	 * what any of them was handed. */
	if (d->nslotless && (bits[INTEREST_SLOTLESS / 64] & (1ull << (INTEREST_SLOTLESS % 64)))) {
		/* push_one may close c (its session's connection): its
		 * successor is taken first. */
		for (c = LIST_FIRST(&d->conns); c; c = next) {
			struct session *s = c->sess;
			next = LIST_NEXT(c, link);
			if (c->st == CS_READY && s && s->islot < 0 && (s != from || self))
				push_one(s, from, iv->op, buf, w.len, acks);
		}
	}
}

void push_revalidate_all(struct pfsd *d, const char *why)
{
	pfs_warn("%s: every client reconnects and revalidates its cache", why);
	if (d->lc)
		lscache_bump(d->lc);
	if (d->chunks)
		chunks_drop_all(d->chunks);
	for (struct conn *c = LIST_FIRST(&d->conns), *next; c; c = next) {
		next = LIST_NEXT(c, link);
		if (c->st == CS_READY)
			conn_close(c, why);
	}
}
