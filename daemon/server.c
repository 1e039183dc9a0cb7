/* server.c: the listener, connections, framing, handshake, request
 * scheduling onto the thread pool and the write queue. Loop thread only. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "podfs/auth.h"
#include "podfs/codec.h"
#include "podfs/frame.h"
#include "podfs/le.h"
#include "podfs/log.h"
#include "dispatch_i.h"
#include "handles_i.h"
#include "lockstate_i.h"
#include "server_i.h"
#include "session_i.h"
#include "watch_i.h"

/* An outgoing frame. */
struct wmsg {
	uv_write_t wr;
	struct conn *c;
	uint8_t hdr[PFS_FRAME_HDR_SIZE];
	void *own1, *own2;
	size_t acct;     /* bytes to release from c->mem when written */
	bool is_reply;   /* completes a request counted in c->inflight */
};

static void conn_flow(struct conn *c);
static void conn_maybe_free(struct conn *c);

/* --- addresses --- */

int server_parse_addr(const char *s, struct sockaddr_storage *out)
{
	char host[INET6_ADDRSTRLEN + 2];
	const char *colon = strrchr(s, ':');
	char *end;
	size_t hl;
	long port;

	if (!colon || colon == s)
		return -EINVAL;
	hl = colon - s;
	if (hl >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, hl);
	host[hl] = '\0';
	errno = 0;
	port = strtol(colon + 1, &end, 10);
	if (errno || end == colon + 1 || *end || port < 0 || port > 65535)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (host[0] == '[') {
		if (hl < 3 || host[hl - 1] != ']')
			return -EINVAL;
		host[hl - 1] = '\0';
		if (uv_ip6_addr(host + 1, (int)port, (struct sockaddr_in6 *)out) != 0)
			return -EINVAL;
		return 0;
	}
	if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)out) != 0)
		return -EINVAL;
	return 0;
}

static void addr_str(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";

	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
		uv_ip6_name(a, ip, sizeof(ip));
		snprintf(buf, len, "[%s]:%u", ip, ntohs(a->sin6_port));
	} else if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
		uv_ip4_name(a, ip, sizeof(ip));
		snprintf(buf, len, "%s:%u", ip, ntohs(a->sin_port));
	} else {
		snprintf(buf, len, "?");
	}
}

/* --- closing and freeing --- */

static void conn_close_cb(uv_handle_t *h)
{
	struct conn *c = h->data;

	c->open_handles--;
	conn_maybe_free(c);
}

static void conn_maybe_free(struct conn *c)
{
	if (!c->closing || c->open_handles || c->inflight)
		return;
	free(c->pbuf);
	free(c->rbuf);
	free(c);
}

void conn_close(struct conn *c, const char *why)
{
	struct pfsd *d = c->d;

	if (c->closing)
		return;
	c->closing = true;
	if (c->st == CS_READY)
		pfs_info("conn %llu: %s (%s) disconnected: %s", (unsigned long long)c->id, c->peer,
			 c->host, why);
	else
		pfs_debug("conn %llu: %s closed before auth: %s", (unsigned long long)c->id,
			  c->peer, why);
	if (c->sess && c->bulk) {
		c->sess->nbulk--;
		c->sess = NULL;
	} else if (c->sess) {
		session_detach(c->sess, c);
	}
	if (c->prev)
		c->prev->next = c->next;
	else
		d->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	d->nconns--;
	if (c->st != CS_READY)
		d->npreauth--;
	uv_close((uv_handle_t *)&c->tcp, conn_close_cb);
	uv_close((uv_handle_t *)&c->hs_timer, conn_close_cb);
}

static void violation(struct conn *c, const char *what)
{
	pfsd_warn_rl(c->d, "conn %llu: protocol error from %s: %s; closing", (unsigned long long)c->id,
		 c->peer, what);
	conn_close(c, what);
}

/* --- writing --- */

/* Notes the bytes of c not sent yet, libuv's write queue and the
 * kernel's, for the workers coding replies (link.h, dispatch.c). */
static void note_backlog(struct conn *c)
{
	uv_os_fd_t fd;

	if (c->d->o.lz4 != PFS_LZ4_AUTO || c->closing)
		return;
	size_t n = uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp);
	if (uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0)
		n += pfs_sock_unsent(fd);
	atomic_store_explicit(&c->backlog, n, memory_order_relaxed);
}

static void write_cb(uv_write_t *wr, int status)
{
	struct wmsg *w = container_of(wr, struct wmsg, wr);
	struct conn *c = w->c;

	c->mem -= w->acct;
	if (w->is_reply)
		c->inflight--;
	free(w->own1);
	free(w->own2);
	free(w);
	note_backlog(c);
	if (status < 0 && !c->closing)
		conn_close(c, uv_strerror(status));
	else if (c->close_after_write && !c->closing && uv_stream_get_write_queue_size(
								   (uv_stream_t *)&c->tcp) == 0)
		conn_close(c, c->st == CS_READY ? "said goodbye" : "refused");
	conn_flow(c);
	conn_maybe_free(c);
}

static void send_frame(struct conn *c, const uint8_t *hdr, const void *wire, size_t len,
		       void *own1, void *own2, size_t acct, bool is_reply)
{
	struct wmsg *w;
	uv_buf_t b[2];
	int ret;

	/* Never frees c: callers run conn_maybe_free() when done with it. */
	if (c->closing) {
		free(own1);
		free(own2);
		if (is_reply)
			c->inflight--;
		c->mem -= acct;
		return;
	}
	w = xmalloc(sizeof(*w));
	w->c = c;
	memcpy(w->hdr, hdr, PFS_FRAME_HDR_SIZE);
	c->d->wire_out += PFS_FRAME_HDR_SIZE + len;
	c->d->raw_out += PFS_FRAME_HDR_SIZE + pfs_load_le32(hdr + 4); /* raw_len */
	w->own1 = own1;
	w->own2 = own2;
	w->acct = acct + PFS_FRAME_HDR_SIZE + len;
	w->is_reply = is_reply;
	c->mem += PFS_FRAME_HDR_SIZE + len;
	b[0] = uv_buf_init((char *)w->hdr, PFS_FRAME_HDR_SIZE);
	b[1] = uv_buf_init((char *)wire, len);
	ret = uv_write(&w->wr, (uv_stream_t *)&c->tcp, b, len ? 2 : 1, write_cb);
	if (ret < 0) {
		c->mem -= w->acct;
		if (is_reply)
			c->inflight--;
		free(own1);
		free(own2);
		free(w);
		conn_close(c, uv_strerror(ret));
		return;
	}
	note_backlog(c);
}

/* Queues bytes that continue a frame already begun on the stream. */
static void send_rest(struct conn *c, void *buf, size_t len, size_t acct, bool is_reply)
{
	struct wmsg *w = xmalloc(sizeof(*w));
	uv_buf_t b = uv_buf_init((char *)buf, len);
	int ret;

	w->c = c;
	w->own1 = buf;
	w->own2 = NULL;
	w->acct = acct + len;
	w->is_reply = is_reply;
	c->mem += len;
	ret = uv_write(&w->wr, (uv_stream_t *)&c->tcp, &b, 1, write_cb);
	if (ret < 0) {
		c->mem -= w->acct;
		if (is_reply)
			c->inflight--;
		free(buf);
		free(w);
		conn_close(c, uv_strerror(ret));
		return;
	}
	note_backlog(c);
}

/* Sends a READ reply whose data waits in r->pipe (dispatch.c
 * read_spliced). If nothing else is queued on the stream, the header goes
 * out now and the data moves from the pipe to the socket without a copy,
 * as far as the socket takes it without blocking; whatever is left (all
 * of it if frames are queued) is read out of the pipe and queued behind,
 * so frames keep their order. The pipe holds the data already: neither
 * step waits for the disk. */
static void send_spliced(struct conn *c, struct req *r)
{
	uint8_t head[PFS_FRAME_HDR_SIZE + 16];
	size_t hl = PFS_FRAME_HDR_SIZE + r->wirelen, hsent = 0, left = r->splice_len, got = 0;
	uint8_t *rest;
	int fd;

	memcpy(head, r->hdr, PFS_FRAME_HDR_SIZE);
	memcpy(head + PFS_FRAME_HDR_SIZE, r->wire, r->wirelen);
	free(r->out);
	r->out = NULL;
	r->splice_len = 0;
	if (c->closing) {
		pipes_put(&c->d->pipes, r->pipe, false);
		c->inflight--;
		c->mem -= r->acct;
		return;
	}
	c->d->wire_out += hl + left;
	c->d->raw_out += hl + left;
	if (uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) == 0 &&
	    uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0) {
		uv_buf_t b = uv_buf_init((char *)head, hl);
		int n = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
		if (n > 0)
			hsent = (size_t)n;
		while (hsent == hl && left) {
			ssize_t k = splice(r->pipe[0], NULL, fd, NULL, left,
					   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0)
				break; /* full (or failing): the rest is queued */
			left -= (size_t)k;
			c->d->spliced += (size_t)k;
		}
	}
	if (hsent == hl && left == 0) {
		pipes_put(&c->d->pipes, r->pipe, true);
		c->inflight--;
		c->mem -= r->acct;
		note_backlog(c);
		return;
	}
	rest = xmalloc(hl - hsent + left);
	memcpy(rest, head + hsent, hl - hsent);
	while (got < left) {
		ssize_t k = read(r->pipe[0], rest + (hl - hsent) + got, left - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	pipes_put(&c->d->pipes, r->pipe, got == left);
	if (got < left) {
		/* The frame cannot be completed: the stream is unusable. */
		pfs_err("conn %llu: READ reply data lost from its pipe", (unsigned long long)c->id);
		free(rest);
		c->inflight--;
		c->mem -= r->acct;
		conn_close(c, "internal error");
		return;
	}
	send_rest(c, rest, hl - hsent + left, r->acct, true);
}

void conn_send(struct conn *c, const uint8_t *hdr, const void *wire, size_t len, void *own1,
	       void *own2)
{
	send_frame(c, hdr, wire, len, own1, own2, 0, false);
}

/* Sends a small uncompressed reply built on the loop (handshake). */
static void send_small(struct conn *c, uint16_t op, uint64_t id, int32_t status,
		       const void *payload, size_t len)
{
	uint8_t hdr[PFS_FRAME_HDR_SIZE];
	const void *wire;
	void *copy = NULL;

	pfs_frame_prepare(hdr, id, op, PFS_FF_REPLY, status, payload, len, 0, NULL, 0, &wire);
	if (len) {
		copy = xmalloc(len);
		memcpy(copy, payload, len);
	}
	conn_send(c, hdr, copy, len, copy, NULL);
}

/* --- backpressure --- */

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void conn_flow(struct conn *c)
{
	bool want;

	if (c->closing || c->close_after_write)
		return;
	want = c->inflight < PFSD_MAX_INFLIGHT && c->mem < PFSD_MAX_QUEUED;
	if (want && !c->reading) {
		if (uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb) == 0)
			c->reading = true;
	} else if (!want && c->reading) {
		uv_read_stop((uv_stream_t *)&c->tcp);
		c->reading = false;
	}
}

/* --- pushes ---
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

static void push_send(struct session *s, uint16_t op, const uint8_t *p, size_t len)
{
	struct conn *c = s->conn;
	uint8_t hdr[PFS_FRAME_HDR_SIZE];
	const void *wire;
	void *copy;

	if (!c || c->closing || c->st != CS_READY || !(c->caps & PFS_CAP_PUSH))
		return;
	if (c->mem >= PFSD_MAX_QUEUED) {
		pfsd_warn_rl(c->d, "conn %llu: %s (%s) does not read its invalidations; closing",
			    (unsigned long long)c->id, c->peer, c->host);
		conn_close(c, "too far behind on invalidations");
		return;
	}
	pfs_frame_prepare(hdr, 0, op, PFS_FF_PUSH, 0, p, len, 0, NULL, 0, &wire);
	c->push_sent++;
	copy = xmalloc(len);
	memcpy(copy, p, len);
	conn_send(c, hdr, copy, len, copy, NULL);
}

/* Sends the deferred pushes whose requests have all replied. */
static void push_flush(struct session *s)
{
	uint64_t min = s->if_head ? s->if_head->seq : UINT64_MAX;

	while (s->dq_head && s->dq_head->wait <= min) {
		struct pushq *q = s->dq_head;
		s->dq_head = q->next;
		if (!s->dq_head)
			s->dq_tail = NULL;
		s->ndq--;
		if (!s->dead)
			push_send(s, q->op, q->p, q->len);
		free(q);
	}
}

/* Pushes (or defers) one frame to s. Returns the push_sent count its
 * connection will have once this push is written (see "acknowledged
 * pushes"), or 0 if nothing will be written. */
static uint64_t push_to(struct session *s, uint16_t op, const uint8_t *p, size_t len)
{
	struct conn *c = s->conn;
	struct pushq *q;

	if (s->dead || !c || c->closing || c->st != CS_READY || !(c->caps & PFS_CAP_PUSH))
		return 0;
	if (!s->if_head && !s->dq_head) {
		push_send(s, op, p, len);
		return c->closing ? 0 : c->push_sent;
	}
	if (s->ndq >= PFSD_MAX_DEFERRED) {
		pfsd_warn_rl(s->d, "conn %llu: %s (%s) has %u invalidations waiting; closing",
			    (unsigned long long)c->id, c->peer, c->host, s->ndq);
		conn_close(c, "too far behind on invalidations");
		return 0;
	}
	q = xmalloc(sizeof(*q) + len);
	q->next = NULL;
	q->wait = s->seq_next;
	q->op = op;
	q->len = (uint16_t)len;
	memcpy(q->p, p, len);
	if (s->dq_tail)
		s->dq_tail->next = q;
	else
		s->dq_head = q;
	s->dq_tail = q;
	s->ndq++;
	/* The deferred pushes go out in order on this connection. */
	return c->push_sent + s->ndq;
}

/* --- acknowledged pushes ---
 *
 * Close-to-open without asking. A client may answer an open from its
 * caches (fs/ops.c open_locally) only if it has received the push of
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
 * it revalidates everything before trusting its caches. One that does
 * not acknowledge within PFSD_ACK_WAIT_MS has its connection closed for
 * the same effect, and the reply goes out.
 *
 * Clients without the capability are not waited for; they ask at every
 * open (close-to-open by an OPEN round trip after the push). */

static void ackwait_add(struct req *r, struct session *s, uint64_t target)
{
	if (!target || !(s->conn->caps & PFS_CAP_PUSH_ACK))
		return;
	for (size_t i = 0; i < r->naw; i++) {
		if (r->aw[i].s == s) {
			if (target > r->aw[i].target)
				r->aw[i].target = target;
			return;
		}
	}
	if (r->naw == r->caw) {
		size_t n = r->caw ? r->caw * 2 : 4;
		struct ackwait *v = xcalloc(n, sizeof(*v));
		if (r->naw)
			memcpy(v, r->aw, r->naw * sizeof(*v));
		free(r->aw);
		r->aw = v;
		r->caw = n;
	}
	session_ref(s);
	r->aw[r->naw++] = (struct ackwait){ s, s->conn->id, target };
}

static bool ackwait_done(const struct ackwait *w)
{
	struct conn *c = w->s->conn;
	return !c || c->id != w->conn_id || c->closing || c->push_acked >= w->target;
}

/* server_push, recording in r (if not NULL) whose acknowledgement the
 * change's reply must wait for. */
static void push_inval(struct pfsd *d, struct session *from, bool self, const struct inval *iv,
		       uint64_t key, struct req *r);

void server_push(struct pfsd *d, struct session *from, bool self, const struct inval *iv,
		 uint64_t key)
{
	push_inval(d, from, self, iv, key, NULL);
}

static void push_inval(struct pfsd *d, struct session *from, bool self, const struct inval *iv,
		       uint64_t key, struct req *r)
{
	uint8_t buf[PFS_FH_MAX + PFS_NAME_MAX + 64];
	uint64_t bits[INTEREST_WORDS];
	struct pfs_wr w;
	int ret;

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
	if (interest_get(d->it, key, bits)) {
		for (unsigned i = 0; i < INTEREST_WORDS; i++) {
			for (uint64_t b = bits[i]; b; b &= b - 1) {
				struct session *s = d->slot_sess[i * 64 + __builtin_ctzll(b)];
				if (s && (s != from || self)) {
					uint64_t n = push_to(s, iv->op, buf, w.len);
					if (r && s != from)
						ackwait_add(r, s, n);
				}
			}
		}
	}
	/* Sessions without a slot are interested in everything. */
	if (d->nslotless) {
		for (struct conn *c = d->conns; c; c = c->next) {
			struct session *s = c->sess;
			if (c->st == CS_READY && s && s->islot < 0 && (s != from || self)) {
				uint64_t n = push_to(s, iv->op, buf, w.len);
				if (r && s != from)
					ackwait_add(r, s, n);
			}
		}
	}
}

void server_lock_wake(struct pfsd *d, const struct pfs_fh *fh)
{
	struct pfs_lock_wake_push m = { .fh = *fh };
	uint8_t buf[PFS_FH_MAX + 8];
	uint64_t ids[64], key;
	struct pfs_wr w;
	size_t n;

	if (d->stopping || !fh->len)
		return;
	pfs_wr_init(&w, buf, sizeof(buf));
	if (pfs_enc_lock_wake_push(&w, &m) < 0)
		return;
	key = handles_key(d->hs, fh);
	do {
		n = lockstate_wait_take(d->ls, key, ids, 64);
		for (size_t i = 0; i < n; i++) {
			struct session *s = session_find(d, ids[i]);
			/* Not ordered after replies: a wake-up only makes the
			 * client retry, and the sooner the better. */
			if (s && !s->dead)
				push_send(s, PFS_OP_LOCK_WAKE, buf, w.len);
		}
	} while (n == 64);
}

void server_revalidate_all(struct pfsd *d, const char *why)
{
	pfs_warn("%s: every client reconnects and revalidates its cache", why);
	for (struct conn *c = d->conns, *next; c; c = next) {
		next = c->next;
		if (c->st == CS_READY)
			conn_close(c, why);
	}
}

/* Ordered requests in flight, per session, in seq order. */
static void inflight_add(struct session *s, struct req *r)
{
	r->ordered = true;
	r->meta = (pfs_op_flags(r->h.op) & PFS_OPF_META) != 0;
	r->seq = s->seq_next++;
	r->iprev = s->if_tail;
	r->inext = NULL;
	if (s->if_tail)
		s->if_tail->inext = r;
	else
		s->if_head = r;
	s->if_tail = r;
	if (r->meta)
		s->nmeta++;
}

static void inflight_del(struct session *s, struct req *r)
{
	if (!r->ordered)
		return;
	r->ordered = false;
	if (r->iprev)
		r->iprev->inext = r->inext;
	else
		s->if_head = r->inext;
	if (r->inext)
		r->inext->iprev = r->iprev;
	else
		s->if_tail = r->iprev;
	if (r->meta)
		s->nmeta--;
}

/* --- requests --- */

/* Frees r once its reply was sent (or dropped). */
static void req_done(struct req *r)
{
	struct conn *c = r->c;

	for (size_t i = 0; i < r->naw; i++)
		session_unref(r->aw[i].s);
	free(r->aw);
	free(r);
	conn_flow(c);
	conn_maybe_free(c);
}

/* Sends the held replies whose acknowledgements all came; with expire,
 * also those past their deadline, after closing the connection of each
 * client that did not acknowledge in time (it then revalidates). With
 * all, every held reply goes (shutdown). */
static void held_scan(struct pfsd *d, bool expire, bool all)
{
	uint64_t now = uv_now(&d->loop);

	for (struct req **pp = &d->held, *r; (r = *pp);) {
		bool done = true;
		for (size_t i = 0; i < r->naw && done; i++)
			done = ackwait_done(&r->aw[i]);
		if (!done && expire && now >= r->ack_deadline) {
			for (size_t i = 0; i < r->naw; i++) {
				if (ackwait_done(&r->aw[i]))
					continue;
				struct conn *bc = r->aw[i].s->conn;
				pfsd_warn_rl(d, "conn %llu: %s (%s) did not acknowledge an "
					    "invalidation within %u ms; closing",
					    (unsigned long long)bc->id, bc->peer, bc->host,
					    PFSD_ACK_WAIT_MS);
				conn_close(bc, "invalidation not acknowledged");
			}
			done = true;
		}
		if (!done && !all) {
			pp = &r->hnext;
			continue;
		}
		*pp = r->hnext;
		send_frame(r->c, r->hdr, r->wire, r->wirelen, r->out, r->scratch, r->acct, true);
		req_done(r);
	}
	if (!d->held && uv_is_active((uv_handle_t *)&d->ack_timer))
		uv_timer_stop(&d->ack_timer);
}

static void ack_timer_cb(uv_timer_t *t)
{
	held_scan(t->data, true, false);
}

/* A PUSH_ACK frame (see wire.h). */
static void on_push_ack(struct conn *c, const uint8_t *payload)
{
	struct pfs_push_ack m;

	if (pfs_dec_push_ack(payload, c->h.raw_len, &m) < 0 || m.count > c->push_sent)
		return violation(c, "bad PUSH_ACK");
	if (m.count > c->push_acked) {
		c->push_acked = m.count;
		if (c->d->held)
			held_scan(c->d, false, false);
	}
}

/* Where the reply of r goes when a duplicate arrived while r ran: the
 * connection of the duplicate if it is still open, else the session's
 * main connection (a client takes a reply on any of its connections). */
static struct conn *resend_target(struct conn *c, struct session *s, const struct drc_ent *e)
{
	for (struct conn *o = c->d->conns; o; o = o->next)
		if (o->id == e->resend_conn && o != c && !o->closing && o->sess == s)
			return o;
	return s->conn && s->conn != c ? s->conn : NULL;
}

static void after_work_cb(uv_work_t *work, int status)
{
	struct req *r = container_of(work, struct req, work);
	struct conn *c = r->c;
	struct session *s = r->s;
	struct inval *iv;
	bool self = false;

	if (status < 0 && !r->violation) {
		/* Cancelled: never ran. Answer nothing; the conn is going. */
		r->violation = true;
	}
	if (r->drc) {
		if (!r->violation) {
			struct conn *to = r->drc->resend ? resend_target(c, s, r->drc) : NULL;
			/* A retransmission arrived on another connection while
			 * this ran: answer it there too. */
			if (to) {
				void *copy = r->wirelen ? xmalloc(r->wirelen) : NULL;
				if (copy)
					memcpy(copy, r->wire, r->wirelen);
				conn_send(to, r->hdr, copy, r->wirelen, copy, NULL);
			}
			if (pfs_op_flags(r->h.op) & PFS_OPF_DRC)
				drc_done(r->drc, r->hdr, r->wire, r->wirelen, r->outlen);
			else
				drc_forget(&s->drc, r->drc);
		} else {
			/* No reply: a retransmission must run again. */
			drc_forget(&s->drc, r->drc);
		}
	}
	/* A FORGET overtook this request: what it handed out is cached
	 * again once its reply arrives (see the race analysis above). */
	if (s && r->keys.n && r->epoch != s->forget_epoch && !r->violation)
		for (size_t i = 0; i < r->keys.n; i++)
			interest_add(c->d->it, r->keys.v[i], s->islot);
	free(r->keys.v);
	/* Pushes to others go out before this reply; one to ourselves only
	 * when our other metadata replies in flight may be older. */
	if (s)
		self = s->nmeta > (r->ordered && r->meta ? 1u : 0u);
	while ((iv = r->invals)) {
		r->invals = iv->next;
		if (!r->violation && s && !c->d->stopping && iv->op == PFS_OP_LOCK_WAKE)
			server_lock_wake(c->d, &iv->fh);
		else if (!r->violation && s && !c->d->stopping)
			push_inval(c->d, s, self, iv, handles_key(c->d->hs, &iv->fh), r);
		free(iv);
	}
	if (r->violation && !c->closing)
		violation(c, "bad compressed payload");
	free(r->in);
	/* Held until the others acknowledged (see "acknowledged pushes").
	 * It leaves the in-flight list now: pushes to this client need not
	 * wait for it (its client's race gate covers a reply that comes
	 * after a push), which keeps two clients changing one file from
	 * waiting for each other. */
	bool hold = r->naw && !r->splice_len && !r->violation && !c->closing &&
		    !c->d->stopping;
	if (r->splice_len && !hold)
		send_spliced(c, r);
	else if (!hold)
		send_frame(c, r->hdr, r->wire, r->wirelen, r->out, r->scratch, r->acct, true);
	if (s) {
		inflight_del(s, r);
		push_flush(s);
		session_unref(s);
	}
	r->s = NULL;
	if (hold) {
		struct pfsd *d = c->d;
		r->ack_deadline = uv_now(&d->loop) + PFSD_ACK_WAIT_MS;
		r->hnext = d->held;
		d->held = r;
		if (!uv_is_active((uv_handle_t *)&d->ack_timer))
			uv_timer_start(&d->ack_timer, ack_timer_cb, PFSD_ACK_TICK_MS, PFSD_ACK_TICK_MS);
		return;
	}
	req_done(r);
}

static void queue_req(struct conn *c, uint8_t *payload, uint32_t auth_flags)
{
	struct req *r = xcalloc(1, sizeof(*r));
	int ret;

	r->c = c;
	r->d = c->d;
	r->s = c->sess;
	r->h = c->h;
	r->in = payload;
	r->acct = c->h.wire_len + ((c->h.flags & PFS_FF_CODED) ? c->h.raw_len : 0);
	r->codecs = c->caps & PFS_CAPS_CODECS;
	r->dir_attr = (c->caps & PFS_CAP_DIR_ATTR) != 0;
	r->new_dir = r->dir_attr && (c->caps & PFS_CAP_NEW_DIR);
	r->auth_flags = auth_flags;
	r->work.data = r;

	if (r->s && (pfs_op_flags(r->h.op) & PFS_OPF_ONCE)) {
		struct drc_ent *e = drc_find(&r->s->drc, r->h.id);
		if (e && e->op == r->h.op) {
			pfs_debug("conn %llu req %llu %s: duplicate, %s", (unsigned long long)c->id,
				  (unsigned long long)r->h.id, pfs_op_name(r->h.op),
				  e->done ? "resending cached reply" : "still running");
			if (e->done) {
				void *copy = e->len ? xmalloc(e->len) : NULL;
				if (copy)
					memcpy(copy, e->wire, e->len);
				conn_send(c, e->hdr, copy, e->len, copy, NULL);
			} else {
				e->resend = true;
				e->resend_conn = c->id;
			}
			free(payload);
			free(r);
			return;
		}
		if (!e)
			r->drc = drc_begin(&r->s->drc, r->h.id, r->h.op);
	}

	if (r->s) {
		session_ref(r->s);
		r->epoch = r->s->forget_epoch;
		if (pfs_op_flags(r->h.op) & PFS_OPF_ORDERED)
			inflight_add(r->s, r);
	}
	c->inflight++;
	c->mem += r->acct;
	ret = uv_queue_work(&c->d->loop, &r->work, dispatch_work_cb, after_work_cb);
	if (ret < 0) {
		pfs_err("conn %llu: cannot queue work: %s", (unsigned long long)c->id,
			uv_strerror(ret));
		if (r->drc)
			drc_forget(&r->s->drc, r->drc);
		if (r->s) {
			inflight_del(r->s, r);
			push_flush(r->s);
			session_unref(r->s);
		}
		c->inflight--;
		c->mem -= r->acct;
		free(payload);
		free(r);
		conn_close(c, "internal error");
		return;
	}
	conn_flow(c);
}

/* --- handshake (loop thread; payloads are at most PFS_MAX_HANDSHAKE) --- */

/* Returns the raw payload of a handshake frame in buf, or NULL. */
static const uint8_t *hs_payload(struct conn *c, const uint8_t *wire, uint8_t *buf)
{
	if (!(c->h.flags & PFS_FF_CODED))
		return wire;
	if (pfs_payload_decode(c->h.flags, wire, c->h.wire_len, buf, c->h.raw_len) < 0)
		return NULL;
	return buf;
}

static void on_hello(struct conn *c, const uint8_t *wire)
{
	uint8_t raw[PFS_MAX_HANDSHAKE], out[256];
	const uint8_t *p = hs_payload(c, wire, raw);
	struct pfs_hello_req m;
	struct pfs_hello_rep rep;
	struct pfs_wr w;

	if (c->h.op != PFS_OP_HELLO)
		return violation(c, "first request is not HELLO");
	if (!p || pfs_dec_hello_req(p, c->h.raw_len, &m) < 0)
		return violation(c, "malformed HELLO");
	if (m.magic != PFS_MAGIC)
		return violation(c, "bad magic in HELLO");
	memcpy(c->host, m.hostname.s, m.hostname.len);
	c->host[m.hostname.len] = '\0';
	for (char *s = c->host; *s; s++) /* keep log lines printable */
		if (*s < 0x20 || *s > 0x7e)
			*s = '?';
	if (m.version_min > PFS_VERSION || m.version_max < PFS_VERSION) {
		pfs_warn("conn %llu: %s (%s) speaks protocol versions %u..%u, we speak %u",
			 (unsigned long long)c->id, c->peer, c->host, m.version_min, m.version_max,
			 PFS_VERSION);
		send_small(c, PFS_OP_HELLO, c->h.id, EPROTONOSUPPORT, NULL, 0);
		c->close_after_write = true;
		return;
	}
	c->client_id = m.client_id;
	c->caps = m.caps & (PFS_CAPS_ALL | PFS_CAP_BULK);
	c->bulk = (c->caps & PFS_CAP_BULK) != 0;
	memcpy(c->cnonce, m.nonce.b, PFS_NONCE_LEN);
	if (pfs_random(c->snonce, PFS_NONCE_LEN) < 0) {
		pfs_err("conn %llu: no random bytes", (unsigned long long)c->id);
		return conn_close(c, "internal error");
	}
	memset(&rep, 0, sizeof(rep));
	rep.version = PFS_VERSION;
	rep.caps = c->caps;
	rep.boot_id = c->d->boot_id;
	memcpy(rep.nonce.b, c->snonce, PFS_NONCE_LEN);
	pfs_auth_server_mac(c->d->key, c->cnonce, c->snonce, c->client_id, rep.mac.b);
	rep.max_payload = PFS_MAX_PAYLOAD;
	pfs_wr_init(&w, out, sizeof(out));
	if (pfs_enc_hello_rep(&w, &rep) < 0)
		return conn_close(c, "internal error");
	c->st = CS_AUTH;
	send_small(c, PFS_OP_HELLO, c->h.id, 0, out, w.len);
}

static void on_auth(struct conn *c, const uint8_t *wire)
{
	uint8_t raw[PFS_MAX_HANDSHAKE], mac[PFS_MAC_LEN];
	const uint8_t *p = hs_payload(c, wire, raw);
	struct pfs_auth_req m;
	struct session *s;
	uint32_t flags = 0;

	if (c->h.op != PFS_OP_AUTH)
		return violation(c, "second request is not AUTH");
	if (!p || pfs_dec_auth_req(p, c->h.raw_len, &m) < 0)
		return violation(c, "malformed AUTH");
	pfs_auth_client_mac(c->d->key, c->cnonce, c->snonce, c->client_id, mac);
	if (!pfs_mac_equal(mac, m.mac.b, PFS_MAC_LEN)) {
		pfsd_warn_rl(c->d, "auth failed from %s (wrong key)", c->peer);
		send_small(c, PFS_OP_AUTH, c->h.id, EACCES, NULL, 0);
		c->close_after_write = true;
		c->st = CS_HELLO; /* accept nothing more */
		uv_read_stop((uv_stream_t *)&c->tcp);
		c->reading = false;
		return;
	}
	uv_timer_stop(&c->hs_timer);
	s = session_find(c->d, c->client_id);
	if (c->bulk) {
		if (s && s->nbulk >= PFSD_MAX_BULK) {
			pfsd_warn_rl(c->d, "conn %llu: %s (%s): session %016llx has %u bulk "
				    "connections already; refused",
				    (unsigned long long)c->id, c->peer, c->host,
				    (unsigned long long)c->client_id, s->nbulk);
			send_small(c, PFS_OP_AUTH, c->h.id, EMFILE, NULL, 0);
			c->close_after_write = true;
			c->st = CS_HELLO;
			uv_read_stop((uv_stream_t *)&c->tcp);
			c->reading = false;
			return;
		}
		if (!s || !s->conn) {
			/* The client connects its main connection first (and
			 * again after our restart); this one retries. */
			pfs_info("conn %llu: %s (%s): bulk connection without a connected "
				 "session %016llx; refused",
				 (unsigned long long)c->id, c->peer, c->host,
				 (unsigned long long)c->client_id);
			send_small(c, PFS_OP_AUTH, c->h.id, ENOTCONN, NULL, 0);
			c->close_after_write = true;
			c->st = CS_HELLO; /* accept nothing more */
			uv_read_stop((uv_stream_t *)&c->tcp);
			c->reading = false;
			return;
		}
		c->st = CS_READY;
		c->d->npreauth--;
		c->sess = s;
		s->nbulk++;
		pfs_notice("conn %llu: %s (%s) authenticated, bulk connection of session "
			   "%016llx (%u bulk)",
			   (unsigned long long)c->id, c->peer, c->host,
			   (unsigned long long)c->client_id, s->nbulk);
		queue_req(c, NULL, PFS_AUTH_RESUMED);
		return;
	}
	c->st = CS_READY;
	c->d->npreauth--;
	if (s) {
		if (s->conn && s->conn != c)
			conn_close(s->conn, "replaced by a new connection of the same client");
		flags |= PFS_AUTH_RESUMED;
		if (s->locks_lost)
			flags |= PFS_AUTH_LOCKS_LOST;
		s->locks_lost = false;
	} else {
		s = session_new(c->d, c->client_id);
	}
	memcpy(s->host, c->host, sizeof(s->host));
	s->caps = c->caps;
	session_attach(s, c);
	pfs_notice("conn %llu: %s (%s) authenticated, session %016llx %s",
		   (unsigned long long)c->id, c->peer, c->host, (unsigned long long)c->client_id,
		   (flags & PFS_AUTH_RESUMED) ? "resumed" : "new");
	/* The reply carries the root's attributes: a disk operation. */
	queue_req(c, NULL, flags);
}

/* --- reading --- */

static void frame_done(struct conn *c)
{
	uint8_t *payload = c->pbuf;

	c->d->wire_in += PFS_FRAME_HDR_SIZE + c->h.wire_len;
	c->d->raw_in += PFS_FRAME_HDR_SIZE + c->h.raw_len;
	c->pbuf = NULL;
	c->have_hdr = false;
	c->hgot = 0;
	switch (c->st) {
	case CS_HELLO:
		if (c->close_after_write) /* refused: ignore the rest */
			break;
		on_hello(c, payload);
		break;
	case CS_AUTH:
		on_auth(c, payload);
		break;
	case CS_READY:
		if (c->h.flags & PFS_FF_PUSH) {
			on_push_ack(c, payload);
			break;
		}
		if (c->h.op == PFS_OP_HELLO || c->h.op == PFS_OP_AUTH) {
			violation(c, "handshake request after AUTH");
			break;
		}
		if (c->bulk && !(pfs_op_flags(c->h.op) & PFS_OPF_BULK)) {
			violation(c, "not READ, WRITE or PING on a bulk connection");
			break;
		}
		if (c->h.op == PFS_OP_GOODBYE) {
			if (c->sess)
				session_kill(c->sess);
			send_small(c, PFS_OP_GOODBYE, c->h.id, 0, NULL, 0);
			c->close_after_write = true;
			uv_read_stop((uv_stream_t *)&c->tcp);
			c->reading = false;
			break;
		}
		if (!c->sess) { /* session dropped by GOODBYE */
			violation(c, "request after GOODBYE");
			break;
		}
		if (c->h.op == PFS_OP_FORGET) {
			/* On the loop, in stream order: see the race analysis. */
			int ret = dispatch_forget(c->d, c->sess, &c->h, payload);
			if (ret == -EBADMSG) {
				violation(c, "bad compressed payload");
				break;
			}
			send_small(c, PFS_OP_FORGET, c->h.id, -ret, NULL, 0);
			break;
		}
		queue_req(c, payload, 0);
		return; /* payload now owned by the request */
	}
	free(payload);
}

/* Parses n bytes of stream data from the connection's read buffer. */
static void feed(struct conn *c, const uint8_t *p, size_t n)
{
	while (n && !c->closing) {
		if (c->close_after_write)
			return; /* refused or said goodbye: ignore the rest */
		if (!c->have_hdr) {
			size_t k = PFS_FRAME_HDR_SIZE - c->hgot;
			if (k > n)
				k = n;
			memcpy(c->hbuf + c->hgot, p, k);
			c->hgot += k;
			p += k;
			n -= k;
			if (c->hgot < PFS_FRAME_HDR_SIZE)
				return;
			size_t max = c->st == CS_READY ? PFS_MAX_PAYLOAD : PFS_MAX_HANDSHAKE;
			if (pfs_hdr_unpack(c->hbuf, &c->h, max) < 0)
				return violation(c, "malformed frame header");
			/* Requests, and PUSH_ACK, the one frame a client
			 * sends unasked (flagged as a push, id 0). */
			bool ack = (c->h.flags & PFS_FF_PUSH) && c->st == CS_READY &&
				   (c->caps & PFS_CAP_PUSH_ACK) && c->h.op == PFS_OP_PUSH_ACK &&
				   c->h.id == 0 && !(c->h.flags & (PFS_FF_LZ4 | PFS_FF_REPLY)) &&
				   c->h.raw_len <= 64;
			if (!ack && ((c->h.flags & (PFS_FF_REPLY | PFS_FF_PUSH)) || c->h.id == 0))
				return violation(c, "not a request frame");
			if (c->h.status != 0)
				return violation(c, "not a request frame");
			c->have_hdr = true;
			c->pgot = 0;
			c->pbuf = c->h.wire_len ? xmalloc(c->h.wire_len) : NULL;
		}
		size_t k = c->h.wire_len - c->pgot;
		if (k > n)
			k = n;
		if (k)
			memcpy(c->pbuf + c->pgot, p, k);
		c->pgot += k;
		p += k;
		n -= k;
		if (c->pgot == c->h.wire_len)
			frame_done(c);
	}
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct conn *c = h->data;

	/* A large payload is read straight into its own buffer. */
	if (c->have_hdr && c->pbuf && c->h.wire_len - c->pgot >= CONN_RBUF) {
		*buf = uv_buf_init((char *)c->pbuf + c->pgot, c->h.wire_len - c->pgot);
		return;
	}
	if (!c->rbuf)
		c->rbuf = xmalloc(CONN_RBUF);
	*buf = uv_buf_init((char *)c->rbuf, CONN_RBUF);
}

static void read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
	struct conn *c = st->data;

	if (nread < 0) {
		/* A client that hangs up between our HELLO reply and its AUTH
		 * could not verify our MAC: it holds another key. */
		if (c->st == CS_AUTH)
			pfsd_warn_rl(c->d,
				    "auth failed from %s (client rejected the server's proof: wrong key)",
				    c->peer);
		conn_close(c, nread == UV_EOF ? "closed by peer" : uv_strerror((int)nread));
		return;
	}
	if (nread == 0 || c->closing)
		return;
	if ((uint8_t *)buf->base == c->rbuf) {
		feed(c, c->rbuf, (size_t)nread);
	} else {
		c->pgot += (size_t)nread;
		if (c->pgot == c->h.wire_len)
			frame_done(c);
	}
}

/* --- accepting --- */

static void hs_timer_cb(uv_timer_t *t)
{
	struct conn *c = t->data;

	if (pfsd_log_allowed(c->d))
		pfs_notice("conn %llu: %s did not authenticate within %d s; closing",
			   (unsigned long long)c->id, c->peer, PFSD_HANDSHAKE_MS / 1000);
	conn_close(c, "handshake timeout");
}

static void reject_close_cb(uv_handle_t *h)
{
	free(h);
}

static void on_connection(uv_stream_t *server, int status)
{
	struct pfsd *d = server->data;
	struct sockaddr_storage ss;
	int len = sizeof(ss);
	struct conn *c;

	if (status < 0) {
		pfsd_warn_rl(d, "accept: %s", uv_strerror(status));
		return;
	}
	if (d->stopping)
		return;
	/* Unauthenticated connections cost an attacker nothing: when they
	 * fill their share, the oldest one makes room. */
	if (d->npreauth >= PFSD_MAX_PREAUTH ||
	    (d->nconns >= PFSD_MAX_CONNS && d->npreauth > 0)) {
		struct conn *old = NULL;
		for (struct conn *o = d->conns; o; o = o->next)
			if (o->st != CS_READY)
				old = o;
		if (old) {
			pfs_debug("conn %llu: %s evicted to admit a new connection",
				  (unsigned long long)old->id, old->peer);
			conn_close(old, "evicted (too many unauthenticated connections)");
		}
	}
	if (d->nconns >= PFSD_MAX_CONNS) {
		uv_tcp_t *t = xmalloc(sizeof(*t));
		uv_tcp_init(&d->loop, t);
		if (uv_accept(server, (uv_stream_t *)t) == 0)
			pfs_debug("too many connections (%u); refusing one", d->nconns);
		uv_close((uv_handle_t *)t, reject_close_cb);
		return;
	}
	c = xcalloc(1, sizeof(*c));
	c->d = d;
	c->id = ++d->next_conn_id;
	uv_tcp_init(&d->loop, &c->tcp);
	uv_timer_init(&d->loop, &c->hs_timer);
	c->tcp.data = c;
	c->hs_timer.data = c;
	c->open_handles = 2;
	c->next = d->conns;
	if (d->conns)
		d->conns->prev = c;
	d->conns = c;
	d->nconns++;
	d->npreauth++;
	if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
		snprintf(c->peer, sizeof(c->peer), "?");
		conn_close(c, "accept failed");
		return;
	}
	if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0)
		addr_str(&ss, c->peer, sizeof(c->peer));
	else
		snprintf(c->peer, sizeof(c->peer), "?");
	uv_tcp_nodelay(&c->tcp, 1);
	uv_tcp_keepalive(&c->tcp, 1, 60);
	uv_timer_start(&c->hs_timer, hs_timer_cb, PFSD_HANDSHAKE_MS, 0);
	pfs_debug("conn %llu: connection from %s", (unsigned long long)c->id, c->peer);
	conn_flow(c);
}

/* --- handle cache sweep --- */

static void sweep_work_cb(uv_work_t *w)
{
	struct pfsd *d = w->data;

	handles_orphans_expire(d->hs);
	if (++d->sweep_ticks < PFSD_SWEEP_MS / PFSD_TICK_MS)
		return;
	d->sweep_ticks = 0;
	size_t n = handles_sweep(d->hs);
	if (n)
		pfs_debug("closed %zu cached handles of deleted files", n);
}

static void sweep_done_cb(uv_work_t *w, int status)
{
	struct pfsd *d = w->data;

	d->sweeping = false;
}

static void sweep_timer_cb(uv_timer_t *t)
{
	struct pfsd *d = t->data;

	if (d->sweeping || d->stopping)
		return;
	d->sweep_work.data = d;
	if (uv_queue_work(&d->loop, &d->sweep_work, sweep_work_cb, sweep_done_cb) == 0)
		d->sweeping = true;
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
	addr_str(&ss, name, sizeof(name));
	*port_out = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						   : ((struct sockaddr_in *)&ss)->sin_port);
	pfs_notice("listening on %s", name);
	uv_timer_init(&d->loop, &d->sweep_timer);
	d->sweep_timer.data = d;
	uv_timer_start(&d->sweep_timer, sweep_timer_cb, PFSD_TICK_MS, PFSD_TICK_MS);
	uv_timer_init(&d->loop, &d->ack_timer);
	d->ack_timer.data = d;
	return 0;
}

void server_stop(struct pfsd *d)
{
	if (d->stopping)
		return;
	d->stopping = true;
	if (!uv_is_closing((uv_handle_t *)&d->listener))
		uv_close((uv_handle_t *)&d->listener, NULL);
	if (!uv_is_closing((uv_handle_t *)&d->sweep_timer))
		uv_close((uv_handle_t *)&d->sweep_timer, NULL);
	watch_stop(d);
	while (d->conns)
		conn_close(d->conns, "shutting down");
	held_scan(d, false, true);
	if (!uv_is_closing((uv_handle_t *)&d->ack_timer))
		uv_close((uv_handle_t *)&d->ack_timer, NULL);
	sessions_stop(d);
}
