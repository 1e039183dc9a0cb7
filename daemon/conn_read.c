/* conn_read.c: a connection's input: the socket's bytes into the TLS
 * stream or straight into the frame parser, the TLS handshake's first
 * bytes (sniff), frames handed to the connection's frame callback, and
 * the reading resumed after backpressure (conn_kick_cb). Loop thread
 * only; conn.c holds the rest of the connection (see conn_io_i.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "podfs/frame.h"
#include "podfs/log.h"
#include "conn_i.h"
#include "conn_io_i.h"
#include "pfsd_i.h"

static void frame_done(struct conn *c)
{
	uint8_t *payload = framer_take(&c->fr);

	if (c->making) /* the request counts its own bytes from here on */
		conn_made(c);
	c->d->wire_in += PFS_FRAME_HDR_SIZE + c->h.wire_len;
	c->d->raw_in += PFS_FRAME_HDR_SIZE + c->h.raw_len;
	c->tr.wire_in += PFS_FRAME_HDR_SIZE + c->h.wire_len;
	c->tr.raw_in += PFS_FRAME_HDR_SIZE + c->h.raw_len;
	if (c->close_after_write) { /* refused or said goodbye: ignore the rest */
		payload_free(payload);
		return;
	}
	c->frame_cb(c, payload);
}

/* Keeps p[n] for when reading starts again (kick_cb), after what is kept
 * already: under TLS, several pieces of plaintext may come out of what
 * was read before reading stopped. */
static void keep_rest(struct conn *c, const uint8_t *p, size_t n)
{
	uint8_t *b = xmalloc(c->nrest + n);

	if (c->nrest)
		memcpy(b, c->rest, c->nrest);
	memcpy(b + c->nrest, p, n);
	free(c->rest);
	c->rest = b;
	c->nrest += n;
}

/* Parses n bytes of stream data from the connection's read buffer. Stops
 * between two frames once reading stopped (conn_flow), keeping the rest
 * for when it starts again. */
static void feed(struct conn *c, const uint8_t *p, size_t n)
{
	const char *why;
	int ret;

	while (n && !c->closing) {
		if (c->close_after_write)
			return; /* refused or said goodbye: ignore the rest */
		if (!c->fr.have_hdr && !c->fr.hgot) {
			/* Past the daemon's memory, asked again before each
			 * frame: other connections may have spent it since
			 * this one's last, and a frame read on that older
			 * answer (a READ charges its reply bound) let each
			 * connection take one more past the budget. */
			if (c->reading && c->d->mem >= c->d->lim.memory)
				conn_flow(c);
			if (!c->reading) {
				keep_rest(c, p, n);
				return;
			}
		}
		ret = framer_feed(&c->fr, &c->h, c->st == CS_READY, c->caps, &p, &n, &why);
		if (ret < 0)
			return conn_violation(c, why);
		if (ret > 0)
			frame_done(c);
		else if (c->fr.have_hdr && !c->making && c->h.wire_len)
			conn_making(c, c->h.wire_len);
	}
}

/* k bytes of c's stream (plaintext: read, or decrypted by
 * tls_stream_input) arrived at dst: d->rbuf, or the buffer of
 * framer_direct. */
static void got_cb(void *arg, uint8_t *dst, size_t k)
{
	struct conn *c = arg;

	if (dst == c->d->rbuf)
		feed(c, dst, k);
	else if (framer_direct_got(&c->fr, &c->h, k))
		frame_done(c);
}

void conn_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct conn *c = h->data;
	uint8_t *direct;
	size_t len;

	/* A large payload is read straight into its own buffer (in the
	 * clear). Else into the daemon's one read buffer, which the read's
	 * callback is done with when it returns (feed keeps what it did
	 * not parse by copying it). Under TLS the ciphertext has a buffer
	 * of its own: it is decrypted in place of the read (lent to the
	 * TLS stream, which keeps a copy of what it leaves), into d->rbuf
	 * or a payload's buffer. */
	if (c->mode == CM_PLAIN && framer_direct(&c->fr, &c->h, CONN_RBUF, &direct, &len)) {
		*buf = uv_buf_init((char *)direct, len);
		return;
	}
	if (c->mode == CM_TLS) {
		if (!c->d->cbuf)
			c->d->cbuf = xmalloc(CONN_RBUF);
		*buf = uv_buf_init((char *)c->d->cbuf, CONN_RBUF);
		return;
	}
	if (!c->d->rbuf)
		c->d->rbuf = xmalloc(CONN_RBUF);
	*buf = uv_buf_init((char *)c->d->rbuf, CONN_RBUF);
}

/* A TLS failure on c (why: its reason): logs it (rate-limited) and
 * closes c after sending the alert OpenSSL queued, if any. */
static void tls_fail(struct conn *c, const char *why)
{
	bool hs = !tls_stream_up(&c->tls);

	if (hs && strstr(why, "binder"))
		pfsd_warn_rl(c->d, "auth failed from %s (TLS handshake: %s: a client with another pod key)",
			     c->peer, why);
	else if (hs)
		pfsd_warn_rl(c->d, "conn %llu: TLS handshake with %s failed: %s",
			     (unsigned long long)c->id, c->peer, why);
	else
		pfsd_warn_rl(c->d, "conn %llu: TLS error from %s: %s; closing",
			     (unsigned long long)c->id, c->peer, why);
	conn_stop_reading(c);
	if (tls_stream_pending(&c->tls)) {
		conn_close_after_write(c, hs ? "TLS handshake failed" : "TLS error");
		conn_tls_out(c, 0, false);
	} else {
		conn_close(c, hs ? "TLS handshake failed" : "TLS error");
	}
}

/* Where the next plaintext of c goes (tls_stream_input): a large
 * payload straight into its buffer, else d->rbuf (the ciphertext is in
 * d->cbuf, or kept by the TLS stream). Stops once c closes or ends. */
static bool tls_room_cb(void *arg, uint8_t **dst, size_t *cap)
{
	struct conn *c = arg;

	if (c->closing || c->close_after_write)
		return false;
	if (!framer_direct(&c->fr, &c->h, CONN_RBUF, dst, cap)) {
		*dst = c->d->rbuf;
		*cap = CONN_RBUF;
	}
	return true;
}

/* Ciphertext p[n] arrived on c (n may be 0: what the stream holds
 * already): decrypts what it completes and parses the frames in it, then
 * sends what the TLS state machine wants sent (handshake messages). p
 * must not be d->rbuf, where plaintext goes. */
static void tls_input(struct conn *c, const uint8_t *p, size_t n)
{
	char why[128];
	int ret;

	if (c->closing || c->close_after_write)
		return;
	ret = tls_stream_input(&c->tls, p, n, tls_room_cb, got_cb, c, why, sizeof(why));
	if (ret == -ENOMEM)
		return conn_close(c, "TLS buffer error");
	if (ret == -EPIPE)
		return conn_close(c, "closed by peer");
	if (ret < 0)
		return tls_fail(c, why);
	if (!c->closing && tls_stream_pending(&c->tls))
		conn_tls_out(c, 0, false);
}

/* The first bytes of c: TLS, or plaintext if allowed. sniff collects
 * them across reads (a read may bring one byte). */
static void sniff(struct conn *c, const uint8_t *p, size_t n)
{
	size_t old = c->nsniff, k = PFS_TLS_SNIFF_LEN - old;

	if (k > n)
		k = n;
	memcpy(c->sniff + old, p, k);
	c->nsniff += k;
	if (c->nsniff < PFS_TLS_SNIFF_LEN)
		return;
	if (pfs_tls_sniff(c->sniff)) {
		if (tls_stream_init(&c->tls, c->d->tls_ctx) < 0) {
			pfs_err("conn %llu: cannot set up TLS", (unsigned long long)c->id);
			conn_close(c, "out of memory");
			return;
		}
		c->mode = CM_TLS;
	} else if (c->d->o.allow_plaintext) {
		c->mode = CM_PLAIN;
	} else {
		pfsd_warn_rl(c->d,
			     "conn %llu: %s: plaintext refused (start podfsd with --allow-plaintext to allow)",
			     (unsigned long long)c->id, c->peer);
		conn_close(c, "plaintext refused");
		return;
	}
	/* The bytes of earlier reads, then all of this one (which is in
	 * d->rbuf, where plaintext will go: the TLS stream keeps a copy). */
	if (c->mode == CM_PLAIN) {
		feed(c, c->sniff, old);
		feed(c, p, n);
	} else if ((old && tls_stream_in(&c->tls, c->sniff, old) < 0) ||
		   tls_stream_in(&c->tls, p, n) < 0) {
		conn_close(c, "TLS buffer error");
	} else {
		tls_input(c, NULL, 0);
	}
}

/* Reading starts again with the bytes kept by feed, then the socket. */
void conn_kick_cb(uv_timer_t *t)
{
	struct conn *c = t->data;
	uint8_t *b = c->rest;
	size_t n = c->nrest;

	c->rest = NULL;
	c->nrest = 0;
	if (!c->reading || c->closing) { /* cannot happen: put them back */
		c->rest = b;
		c->nrest = n;
		return;
	}
	feed(c, b, n);
	free(b);
	if (c->reading && !c->closing && !c->close_after_write && !c->rest &&
	    uv_read_start((uv_stream_t *)&c->tcp, conn_alloc_cb, conn_read_cb) < 0)
		conn_close(c, "cannot read");
}

void conn_read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
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
	if (c->mode == CM_SNIFF)
		sniff(c, c->d->rbuf, (size_t)nread);
	else if (c->mode == CM_TLS)
		tls_input(c, c->d->cbuf, (size_t)nread);
	else
		got_cb(c, (uint8_t *)buf->base, (size_t)nread);
}
