/* conn.c: one client connection: TLS or plaintext, the write queue and
 * the memory it holds, backpressure, zero-copy READ replies, closing (see
 * conn_i.h); its input, frames in, is conn_read.c. Loop thread only.
 *
 * TLS sits between the socket and the framing (tls_stream_i.h: memory
 * BIOs, so that the loop never blocks): what the socket delivers goes
 * into the stream and the plaintext it hands out goes to the frame
 * parser (conn_read.c); a frame to send is encrypted into the stream and
 * the ciphertext leaves as one uv_write buffer (conn_tls_out), counted in
 * c->mem like a plaintext frame until written. The TLS handshake runs inside
 * the first reads, its messages flushed the same way. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "podfs/bigbuf.h"
#include "podfs/frame.h"
#include "podfs/log.h"
#include "podfs/netaddr.h"
#include "conn_i.h"
#include "conn_io_i.h"
#include "pace_i.h"
#include "pfsd_i.h"

/* An outgoing frame, or the rest of one (conn_reply_spliced). */
struct wmsg {
	uv_write_t wr;
	struct conn *c;
	uint8_t hdr[PFS_FRAME_HDR_SIZE];
	void *own[2];
	size_t acct;     /* bytes to release from c->mem when written */
	size_t len;      /* its bytes, counted in c->queued until written */
	bool is_reply;   /* completes a request counted in c->inflight */
};


/* --- lifetime --- */

/* n bytes leave the host memory *h: h if they take it below the share
 * it always has (LIM_MIN_SHARE), else NULL. */
static const size_t *host_sub(size_t *h, size_t n)
{
	bool was = *h >= LIM_MIN_SHARE;

	*h -= n;
	return was && *h < LIM_MIN_SHARE ? h : NULL;
}

/* n bytes leave session account a's memory (a may be NULL), its host's
 * and the daemon's; pfsd_mem_hold (below) is the other way. Returns the
 * host's memory if it fell below its share with them, when its
 * connections paused for the daemon's memory may read again
 * (resume_paused), else NULL. */
static const size_t *mem_sub(struct pfsd *d, struct lim_acct *a, size_t n)
{
	d->mem -= n;
	if (!a)
		return NULL;
	a->mem -= n;
	return a->host_mem ? host_sub(a->host_mem, n) : NULL;
}

/* n bytes more in session account a's memory and its host's. */
static void acct_add(struct lim_acct *a, size_t n)
{
	a->mem += n;
	if (a->host_mem)
		*a->host_mem += n;
}

static void resume_paused(struct pfsd *d, struct lim_acct *a, const size_t *host_below);

static void maybe_free(struct conn *c)
{
	if (!c->closing || c->open_handles || c->inflight || c->refs)
		return;
	/* What others wait for may be what it held, and nothing else
	 * may be under way to let them go. */
	resume_paused(c->d, NULL, mem_sub(c->d, c->acct, c->mem));
	lim_acct_unref(c->acct);
	framer_free(&c->fr);
	free(c->rest);
	tls_stream_fini(&c->tls);
	free(c);
}

static void handle_close_cb(uv_handle_t *h)
{
	struct conn *c = h->data;

	c->open_handles--;
	maybe_free(c);
}

static void timer_cb(uv_timer_t *t)
{
	struct conn *c = t->data;

	c->deadline_cb(c);
}

struct conn *conn_new(struct pfsd *d, conn_frame_cb frame_cb, conn_close_cb close_cb)
{
	struct conn *c = xcalloc(1, sizeof(*c));

	c->d = d;
	c->id = ++d->next_conn_id;
	uv_tcp_init(&d->loop, &c->tcp);
	uv_timer_init(&d->loop, &c->timer);
	uv_timer_init(&d->loop, &c->kick);
	c->tcp.data = c;
	c->timer.data = c;
	c->kick.data = c;
	c->open_handles = 3;
	STAILQ_INIT(&c->paceq);
	c->frame_cb = frame_cb;
	c->close_cb = close_cb;
	return c;
}

void conn_addr_name(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	pfs_addr_name(ss, buf, len);
}

int conn_accept(struct conn *c, uv_stream_t *listener)
{
	struct sockaddr_storage ss;
	int len = sizeof(ss);

	if (uv_accept(listener, (uv_stream_t *)&c->tcp) < 0) {
		snprintf(c->peer, sizeof(c->peer), "?");
		conn_close(c, "accept failed");
		return -1;
	}
	memset(&ss, 0, sizeof(ss));
	if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0)
		conn_addr_name(&ss, c->peer, sizeof(c->peer));
	else
		snprintf(c->peer, sizeof(c->peer), "?");
	c->addr = ss;
	c->since = (int64_t)time(NULL);
	uv_tcp_nodelay(&c->tcp, 1);
	uv_tcp_keepalive(&c->tcp, 1, 60);
	return 0;
}

static void hold(struct conn *c, unsigned held);

void conn_close(struct conn *c, const char *why)
{
	if (c->closing)
		return;
	c->closing = true;
	hold(c, CONN_READ);
	pace_unhold(c);
	if (c->st == CS_READY)
		pfs_notice("conn %llu: %s (%s) disconnected: %s", (unsigned long long)c->id, c->peer,
			 c->host, why);
	else
		pfs_debug("conn %llu: %s closed before auth: %s", (unsigned long long)c->id,
			  c->peer, why);
	c->close_cb(c);
	uv_close((uv_handle_t *)&c->tcp, handle_close_cb);
	uv_close((uv_handle_t *)&c->timer, handle_close_cb);
	uv_close((uv_handle_t *)&c->kick, handle_close_cb);
}

void conn_violation(struct conn *c, const char *what)
{
	pfsd_warn_rl(c->d, "conn %llu: protocol error from %s: %s; closing",
		     (unsigned long long)c->id, c->peer, what);
	conn_close(c, what);
}

void conn_close_after_write(struct conn *c, const char *why)
{
	c->close_after_write = true;
	c->end_why = why;
}

void conn_ref(struct conn *c)
{
	c->refs++;
}

void conn_unref(struct conn *c)
{
	c->refs--;
	conn_flow(c);
	maybe_free(c);
}

void conn_on_drain(struct conn *c, conn_drain_cb cb)
{
	c->drain_cb = cb;
}

size_t conn_queued(const struct conn *c)
{
	return c->queued;
}

size_t conn_unsent(const struct conn *c)
{
	uv_os_fd_t fd;

	if (c->closing || uv_fileno((const uv_handle_t *)&c->tcp, &fd) != 0)
		return c->queued;
	/* Not c->queued: that keeps a write libuv finished at once until
	 * its callback, on the next turn of the loop, after that turn's
	 * timers (a PING's reply then made a client that never acknowledged
	 * fall behind instead of being cut off). */
	return uv_stream_get_write_queue_size((const uv_stream_t *)&c->tcp) + pfs_sock_unsent(fd);
}

void conn_deadline(struct conn *c, uint64_t ms, conn_deadline_cb cb)
{
	c->deadline_cb = cb;
	uv_timer_start(&c->timer, timer_cb, ms, 0);
}

void conn_deadline_stop(struct conn *c)
{
	uv_timer_stop(&c->timer);
}

/* --- backpressure --- */

/* The first time c's session is held back by cap, says so. */
static void note_cap(struct conn *c, unsigned cap)
{
	const struct limits *l = &c->d->lim;
	struct lim_acct *a = c->acct;

	if (a->logged & cap)
		return;
	a->logged |= cap;
	c->d->st_hits[__builtin_ctz(cap)]++;
	if (cap == LIM_REQUESTS)
		pfs_notice("conn %llu: %s (%s) reached requests=%u in flight; reading its "
			   "requests waits for replies", (unsigned long long)c->id, c->peer,
			   c->host, l->requests);
	else if (cap == LIM_REFUSALS)
		pfs_notice("conn %llu: %s (%s) had more than refusals=%u requests a second "
			   "refused by a limit; reading its requests waits",
			   (unsigned long long)c->id, c->peer, c->host, l->refusals);
	else if (cap == LIM_CLIENT_MEM)
		pfs_notice("conn %llu: %s (%s) reached client-memory=%zu bytes of requests "
			   "and replies; reading its requests waits for replies to drain",
			   (unsigned long long)c->id, c->peer, c->host, l->client_mem);
	else
		pfs_notice("conn %llu: %s (%s) holds %zu bytes while the daemon is at "
			   "memory=%zu; reading its requests waits for replies to drain",
			   (unsigned long long)c->id, c->peer, c->host, a->mem, l->memory);
}

/* Bytes or requests of a's session (NULL: of none) were let go: its
 * connections held back may read again, and, while the daemon is below
 * memory, every connection held back for the daemon's memory. Each list
 * is walked only when it may move: a walk of every held connection at
 * every write's end let a key holder with a thousand connections held
 * make every other reply cost a thousand checks. */
static void resume_paused(struct pfsd *d, struct lim_acct *a, const size_t *host_below)
{
	struct conn *o, *next;

	if (a)
		for (o = LIST_FIRST(&a->held); o; o = next) {
			next = LIST_NEXT(o, plink);
			conn_flow(o);
		}
	/* Under the budget, everyone's; else those of the host (its
	 * hostacct's mem) that fell below its share (rarely: at that
	 * crossing only). Their paced READs too (pace_resume). */
	bool all = d->mem < d->lim.memory;
	if (!all && !host_below)
		return;
	for (o = LIST_FIRST(&d->paused); o; o = next) {
		next = LIST_NEXT(o, mlink);
		if (all || (o->acct && o->acct->host_mem == host_below))
			conn_flow(o);
	}
	if (!LIST_EMPTY(&d->reads_held))
		pace_resume(d, all ? NULL : host_below);
}

void conn_acct_leave_host(struct pfsd *d, struct lim_acct *a)
{
	size_t *h = a->host_mem;

	if (!h)
		return;
	a->host_mem = NULL;
	resume_paused(d, NULL, host_sub(h, a->mem));
}

/* c is held as held says from now on (conn_flow, conn_close). */
static void hold(struct conn *c, unsigned held)
{
	if (c->held == CONN_PAUSED)
		LIST_REMOVE(c, mlink);
	if (c->held != CONN_READ)
		LIST_REMOVE(c, plink);
	if (held == CONN_SHARE || held == CONN_PAUSED)
		LIST_INSERT_HEAD(&c->acct->held, c, plink);
	if (held == CONN_PAUSED)
		LIST_INSERT_HEAD(&c->d->paused, c, mlink);
	else if (held == CONN_PACED)
		LIST_INSERT_HEAD(&c->d->paced, c, plink);
	c->held = held;
}

/* The connections paced for their host's refusals may read again (or
 * are paced anew). They wait on a list of their own, which only this
 * walks: resume_paused runs at every write's end. */
static void pace_cb(uv_timer_t *t)
{
	struct pfsd *d = t->data;

	for (struct conn *o = LIST_FIRST(&d->paced), *next; o; o = next) {
		next = LIST_NEXT(o, plink);
		conn_flow(o);
	}
}

/* Whether c's host is past its pace of refusals (lim_pace): if so the
 * pace timer is armed for when it is within again. */
static bool paced(struct conn *c)
{
	struct pfsd *d = c->d;
	uint64_t now, wait, ms;

	if (!c->acct || !c->acct->pace || !d->pace_timer.data)
		return false;
	now = uv_hrtime();
	wait = lim_pace_wait(c->acct->pace, now, d->lim.refusals);
	if (!wait)
		return false;
	ms = (wait + 999999) / 1000000;
	if (!uv_is_active((uv_handle_t *)&d->pace_timer) || now + wait < d->pace_due) {
		d->pace_due = now + ms * 1000000;
		uv_timer_start(&d->pace_timer, pace_cb, ms, 0);
	}
	return true;
}

void conn_pace_init(struct pfsd *d)
{
	uv_timer_init(&d->loop, &d->pace_timer);
	d->pace_timer.data = d;
}

void conn_pace_stop(struct pfsd *d)
{
	if (d->pace_timer.data && !uv_is_closing((uv_handle_t *)&d->pace_timer))
		uv_close((uv_handle_t *)&d->pace_timer, NULL);
}

void conn_flow(struct conn *c)
{
	unsigned cap = 0;
	bool want;

	if (c->closing || c->close_after_write)
		return;
	want = c->inflight < PFSD_MAX_INFLIGHT && c->mem < PFSD_MAX_QUEUED;
	if (want)
		cap = lim_may_read(&c->d->lim, c->acct, c->d->mem);
	if (want && !cap && paced(c))
		cap = LIM_REFUSALS;
	unsigned held = !cap ? CONN_READ : cap == LIM_REFUSALS ? CONN_PACED :
			cap == LIM_MEMORY ? CONN_PAUSED : CONN_SHARE;
	if (held != c->held) {
		if (cap)
			note_cap(c, cap);
		hold(c, held);
	}
	want = want && !cap;
	if (want && !c->reading) {
		if (c->rest) { /* those first, on the next turn of the loop */
			uv_timer_start(&c->kick, conn_kick_cb, 0, 0);
			c->reading = true;
		} else if (uv_read_start((uv_stream_t *)&c->tcp, conn_alloc_cb, conn_read_cb) == 0) {
			c->reading = true;
		}
	} else if (!want && c->reading) {
		conn_stop_reading(c);
	}
}

void conn_stop_reading(struct conn *c)
{
	uv_read_stop((uv_stream_t *)&c->tcp);
	uv_timer_stop(&c->kick);
	c->reading = false;
}

void conn_set_acct(struct conn *c, struct lim_acct *a)
{
	lim_acct_ref(a);
	c->acct = a;
	acct_add(a, c->mem);
	a->inflight += c->inflight;
}

/* Bytes held for c, counted for its session and the daemon too. */
static void mem_add(struct conn *c, size_t n)
{
	c->mem += n;
	pfsd_mem_hold(c->d, c->acct, n);
}

void conn_req_add(struct conn *c, size_t acct)
{
	c->inflight++;
	if (c->acct)
		c->acct->inflight++;
	mem_add(c, acct);
	conn_flow(c);
}

/* A request's bytes leave c's memory; is_reply: it is done (written or
 * dropped). */
static void settle(struct conn *c, size_t acct, bool is_reply)
{
	c->mem -= acct;
	const size_t *below = mem_sub(c->d, c->acct, acct);
	if (is_reply) {
		c->inflight--;
		if (c->acct)
			c->acct->inflight--;
	}
	resume_paused(c->d, c->acct, below);
}

void conn_charge(struct conn *c, size_t n)
{
	mem_add(c, n);
	conn_flow(c);
}

void conn_making(struct conn *c, size_t n)
{
	c->making = n;
	mem_add(c, n);
}

void conn_made(struct conn *c)
{
	size_t n = c->making;

	c->making = 0;
	settle(c, n, false);
}

void pfsd_mem_hold(struct pfsd *d, struct lim_acct *a, size_t n)
{
	d->mem += n;
	if (a)
		acct_add(a, n);
}

void pfsd_mem_release(struct pfsd *d, struct lim_acct *a, size_t n)
{
	resume_paused(d, a, mem_sub(d, a, n));
}

void conn_req_drop(struct conn *c, size_t acct)
{
	settle(c, acct, true);
	conn_flow(c);
}

void conn_req_shrink(struct conn *c, size_t *acct, size_t keep)
{
	if (*acct <= keep)
		return;
	settle(c, *acct - keep, false);
	*acct = keep;
	conn_flow(c);
}

/* --- writing --- */

/* Notes the bytes of c not sent yet, libuv's write queue and the
 * kernel's, for the workers coding replies (link.h, dispatch.c). The
 * kernel's part costs a system call: it is asked again only once
 * CONN_BACKLOG_NS passed or CONN_BACKLOG_BYTES more were queued since
 * (a flood of small replies asked it twice a reply: a third of the
 * loop's system calls), which is all the LZ4 choice needs: a backlog
 * that counts is a megabyte (PFS_LZ4_BACKLOG). */
static void note_backlog(struct conn *c)
{
	uv_os_fd_t fd;

	if (c->d->o.lz4 != PFS_LZ4_AUTO || c->closing)
		return;
	size_t n = uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp);
	uint64_t now = uv_hrtime();
	if (now - c->bl_at >= CONN_BACKLOG_NS || c->written - c->bl_written >= CONN_BACKLOG_BYTES) {
		c->bl_kernel = uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0 ? pfs_sock_unsent(fd) : 0;
		c->bl_at = now;
		c->bl_written = c->written;
	}
	atomic_store_explicit(&c->backlog, n + c->bl_kernel, memory_order_relaxed);
}

static void free_own(void *own[2])
{
	pfs_big_free(own[0]);
	pfs_big_free(own[1]);
}

static void write_cb(uv_write_t *wr, int status)
{
	struct wmsg *w = container_of(wr, struct wmsg, wr);
	struct conn *c = w->c;

	c->queued -= w->len;
	settle(c, w->acct, w->is_reply);
	free_own(w->own);
	free(w);
	note_backlog(c);
	if (status < 0 && !c->closing)
		conn_close(c, uv_strerror(status));
	else if (c->close_after_write && !c->closing &&
		 uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) == 0)
		conn_close(c, c->end_why);
	if (c->npaced && c->drain_cb && !c->closing)
		c->drain_cb(c);
	conn_flow(c);
	maybe_free(c);
}

/* Writes w's nb buffers, whose bytes are already counted in w->acct and
 * c->mem. A failing write closes c. Never frees c. */
static void write_bufs(struct conn *c, struct wmsg *w, uv_buf_t *b, unsigned nb)
{
	int ret = uv_write(&w->wr, (uv_stream_t *)&c->tcp, b, nb, write_cb);

	w->len = 0;
	if (ret == 0) {
		for (unsigned i = 0; i < nb; i++)
			w->len += b[i].len;
		c->queued += w->len;
		c->written += w->len;
	}
	if (ret < 0) {
		settle(c, w->acct, w->is_reply);
		free_own(w->own);
		free(w);
		conn_close(c, uv_strerror(ret));
		return;
	}
	note_backlog(c);
}

/* Writes buf[len] (malloc'd, taken), counting it in c's memory (and its
 * session's and the daemon's) until written, when acct more bytes are
 * released too (and a request completes if is_reply). Never frees c. */
static void write_owned(struct conn *c, void *buf, size_t len, size_t acct, bool is_reply)
{
	struct wmsg *w = xmalloc(sizeof(*w));
	uv_buf_t b = uv_buf_init((char *)buf, len);

	w->c = c;
	w->own[0] = buf;
	w->own[1] = NULL;
	w->acct = acct + len;
	w->is_reply = is_reply;
	mem_add(c, len);
	write_bufs(c, w, &b, 1);
}

/* --- TLS --- */

/* Sends the ciphertext waiting in c's TLS stream (a record, handshake
 * messages, an alert) as one write that releases acct bytes of c's memory
 * (and completes a request if is_reply) once written. Never frees c. */
void conn_tls_out(struct conn *c, size_t acct, bool is_reply)
{
	void *buf;
	size_t n;

	if (c->closing) {
		tls_stream_drop(&c->tls);
		settle(c, acct, is_reply);
		return;
	}
	tls_stream_take(&c->tls, &buf, &n);
	if (n == 0) {
		settle(c, acct, is_reply);
		return;
	}
	write_owned(c, buf, n, acct, is_reply);
}

/* A send on a TLS connection (tls_send), for its tls_stream_ready_cb. */
struct tls_send {
	struct conn *c;
	size_t acct;
	bool is_reply;
};

/* A piece of a send is encrypted: its ciphertext leaves, the last piece's
 * releasing the send's acct bytes. */
static void tls_ready_cb(void *arg, bool last)
{
	struct tls_send *s = arg;

	conn_tls_out(s->c, last ? s->acct : 0, last && s->is_reply);
}

/* Encrypts and queues a[na] and b[nb] on a TLS connection (after
 * whatever was put into its stream before), in pieces so that the stream
 * never holds more than one (TLS_STREAM_CHUNK): the last write releases
 * acct (conn_tls_out). Small frames go in one record, header and payload
 * together. A broken TLS state (a fatal error came in: tls_fail) closes
 * c. */
static void tls_send(struct conn *c, const void *a, size_t na, const void *b, size_t nb,
		     size_t acct, bool is_reply)
{
	struct tls_send s = { .c = c, .acct = acct, .is_reply = is_reply };
	char why[128];

	if (tls_stream_send(&c->tls, a, na, b, nb, tls_ready_cb, &s, why, sizeof(why)) == 0)
		return;
	/* Only after a fatal error, which was logged. */
	pfs_debug("conn %llu: TLS: %s", (unsigned long long)c->id, why);
	conn_close(c, "TLS error");
	settle(c, acct, is_reply);
}

/* Queues frame f (taking f->own). acct: the request's bytes released
 * with it; is_reply: it completes a request. Never frees c. */
static void queue_frame(struct conn *c, struct frame *f, size_t acct, bool is_reply)
{
	struct wmsg *w;
	uv_buf_t b[2];

	if (c->closing) {
		free_own(f->own);
		settle(c, acct, is_reply);
		return;
	}
	c->d->wire_out += PFS_FRAME_HDR_SIZE + f->len;
	c->d->raw_out += PFS_FRAME_HDR_SIZE + f->raw;
	c->tr.wire_out += PFS_FRAME_HDR_SIZE + f->len;
	c->tr.raw_out += PFS_FRAME_HDR_SIZE + f->raw;
	/* Its records wait in the stream, after any sealed before them
	 * (perhaps taken already, with a frame sent since). */
	if (f->sealed) {
		conn_tls_out(c, acct, is_reply);
		return;
	}
	if (c->mode == CM_TLS) {
		tls_send(c, f->hdr, PFS_FRAME_HDR_SIZE, f->wire, f->len, acct, is_reply);
		free_own(f->own);
		return;
	}
	w = xmalloc(sizeof(*w));
	w->c = c;
	memcpy(w->hdr, f->hdr, PFS_FRAME_HDR_SIZE);
	w->own[0] = f->own[0];
	w->own[1] = f->own[1];
	w->acct = acct + PFS_FRAME_HDR_SIZE + f->len;
	w->is_reply = is_reply;
	mem_add(c, PFS_FRAME_HDR_SIZE + f->len);
	b[0] = uv_buf_init((char *)w->hdr, PFS_FRAME_HDR_SIZE);
	b[1] = uv_buf_init((char *)f->wire, f->len);
	write_bufs(c, w, b, f->len ? 2 : 1);
}

void conn_reply(struct conn *c, struct frame *f, size_t acct)
{
	queue_frame(c, f, acct, true);
}

/* Queues bytes that continue a frame already begun on the stream (on a
 * TLS connection: the whole frame), taking buf. */
static void send_rest(struct conn *c, void *buf, size_t len, size_t acct)
{
	if (c->mode == CM_TLS) {
		tls_send(c, NULL, 0, buf, len, acct, true);
		free(buf);
		return;
	}
	write_owned(c, buf, len, acct, true);
}

void conn_reply_spliced(struct conn *c, struct frame *f, int pipe[2], size_t splice_len,
			size_t acct)
{
	uint8_t head[PFS_FRAME_HDR_SIZE + 16];
	size_t hl = PFS_FRAME_HDR_SIZE + f->len, hsent = 0, left = splice_len, got = 0;
	uint8_t *rest;
	int fd;

	memcpy(head, f->hdr, PFS_FRAME_HDR_SIZE);
	memcpy(head + PFS_FRAME_HDR_SIZE, f->wire, f->len);
	free_own(f->own);
	if (c->closing) {
		pipes_put(&c->d->pipes, pipe, false);
		settle(c, acct, true);
		return;
	}
	c->d->wire_out += hl + left;
	c->d->raw_out += hl + left;
	c->tr.wire_out += hl + left;
	c->tr.raw_out += hl + left;
	/* Not under TLS (which never gets here but for safety): its bytes
	 * must be encrypted, so they are copied below. */
	if (c->mode != CM_TLS && uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) == 0 &&
	    uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0) {
		uv_buf_t b = uv_buf_init((char *)head, hl);
		int n = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
		if (n > 0)
			hsent = (size_t)n;
		while (hsent == hl && left) {
			ssize_t k = splice(pipe[0], NULL, fd, NULL, left,
					   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0)
				break; /* full (or failing): the rest is queued */
			left -= (size_t)k;
			c->d->spliced += (size_t)k;
		}
	}
	c->written += hsent + (splice_len - left);
	if (hsent == hl && left == 0) {
		pipes_put(&c->d->pipes, pipe, true);
		settle(c, acct, true);
		note_backlog(c);
		return;
	}
	rest = xmalloc(hl - hsent + left);
	memcpy(rest, head + hsent, hl - hsent);
	while (got < left) {
		ssize_t k = read(pipe[0], rest + (hl - hsent) + got, left - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	pipes_put(&c->d->pipes, pipe, got == left);
	if (got < left) {
		/* The frame cannot be completed: the stream is unusable. */
		pfs_err("conn %llu: READ reply data lost from its pipe", (unsigned long long)c->id);
		free(rest);
		settle(c, acct, true);
		conn_close(c, "internal error");
		return;
	}
	send_rest(c, rest, hl - hsent + left, acct);
}

void conn_send_copy(struct conn *c, const uint8_t *hdr, const void *wire, size_t len, size_t raw)
{
	struct frame f = { .len = len, .raw = raw };
	void *copy = len ? xmalloc(len) : NULL;

	if (copy)
		memcpy(copy, wire, len);
	memcpy(f.hdr, hdr, PFS_FRAME_HDR_SIZE);
	f.wire = copy;
	f.own[0] = copy;
	queue_frame(c, &f, 0, false);
}

void conn_send_small(struct conn *c, uint64_t id, uint16_t op, uint16_t flags, int32_t status,
		     const void *payload, size_t len)
{
	uint8_t hdr[PFS_FRAME_HDR_SIZE];
	const void *wire;

	pfs_frame_prepare(hdr, id, op, flags, status, payload, len, 0, NULL, 0, &wire);
	conn_send_copy(c, hdr, payload, len, len);
}
