/* stream.c: the byte stream of one connection to podfsd, plaintext or
 * TLS on byte-queue BIOs (tls_bio.h): frames' bytes out whole, bytes in
 * through the receive buffer, the counts for transport_quiet (see
 * stream_i.h). */
#include "stream_i.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "podfs/frame.h"
#include "podfs/log.h"
#include "podfs/tls.h"
#include "podfs/tls_bio.h"
#include "sock_i.h"

#define RBUF_SIZE (256u * 1024)
#define TLS_CHUNK (256u * 1024)  /* TLS: plaintext encrypted, then sent, at once */
#define TLS_ONE_RECORD 4096      /* TLS: header and payload up to this go in one record */

int stream_init(struct stream *st, const char *peer)
{
	memset(st, 0, sizeof(*st));
	st->rbuf = malloc(RBUF_SIZE);
	if (!st->rbuf)
		return -ENOMEM;
	st->peer = peer;
	pthread_mutex_init(&st->tls_lock, NULL);
	return 0;
}

void stream_fini(struct stream *st)
{
	SSL_free(st->ssl);
	pthread_mutex_destroy(&st->tls_lock);
	free(st->rbuf);
	free(st->sbuf);
}

void stream_attach(struct stream *st, SSL *ssl, BIO *rbio, BIO *wbio)
{
	/* Under TLS the handshake may have read records past its last
	 * frame: one byte counted as read that no frame handled keeps
	 * transport_quiet false until the receiver had them. */
	bool early = ssl && (BIO_ctrl_pending(rbio) || SSL_has_pending(ssl));

	st->rstart = st->rend = 0;
	st->ssl = ssl;
	st->rbio = rbio;
	st->wbio = wbio;
	atomic_store(&st->bytes_read, early ? 1 : 0);
	atomic_store(&st->bytes_done, 0);
	st->tls_fd = -1;
}

SSL *stream_detach(struct stream *st)
{
	SSL *ssl = st->ssl;

	st->ssl = NULL;
	return ssl;
}

void stream_tls_free(SSL *ssl)
{
	SSL_free(ssl);
}

uint64_t stream_bytes_read(const struct stream *st)
{
	return atomic_load(&st->bytes_read);
}

uint64_t stream_bytes_done(const struct stream *st)
{
	return atomic_load(&st->bytes_done);
}

bool stream_receiver_waiting(const struct stream *st)
{
	return atomic_load(&st->waiting);
}

/* ---- sending ---- */

/* The most ciphertext n bytes of plaintext make in TLS 1.3 records of
 * at most 16 KiB (a 5-byte header, the content type and a 16-byte tag
 * each; no padding is asked for). */
static size_t sealed_size(size_t n)
{
	return n + (n / 16384 + 1) * (5 + 1 + 16);
}

/* Encrypts a[an] and b[bn] (either may be empty) into st's records and
 * takes them, with anything else waiting in wbio, into st->sbuf: the
 * buffer goes to the BIO for the writes and comes back full, without a
 * copy. Caller holds its send lock. Returns the bytes in sbuf, or
 * -errno. */
static ssize_t tls_seal(struct stream *st, const void *a, size_t an, const void *b, size_t bn)
{
	const void *part[2] = { a, b };
	size_t plen[2] = { an, bn }, n = 0;
	ssize_t rc = 0;

	pthread_mutex_lock(&st->tls_lock);
	pfs_tls_bio_give(st->wbio, st->sbuf, st->scap);
	st->sbuf = NULL;
	st->scap = 0;
	if (pfs_tls_bio_reserve(st->wbio, sealed_size(an) + sealed_size(bn)) < 0)
		rc = -ENOMEM;
	for (int i = 0; i < 2 && rc == 0; i++) {
		ERR_clear_error();
		if (plen[i] && pfs_tls_write(st->ssl, part[i], (int)plen[i]) != (int)plen[i]) {
			/* The connection thread broke it (a bad record came
			 * in) and says why; the connection is redone. */
			char why[128];
			pfs_tls_reason(why, sizeof(why), "write failed");
			pfs_debug("TLS to %s: %s", st->peer, why);
			rc = -EPROTO;
		}
	}
	pfs_tls_bio_take(st->wbio, &st->sbuf, &n, &st->scap);
	pthread_mutex_unlock(&st->tls_lock);
	return rc < 0 ? rc : (ssize_t)n;
}

/* Sends the frame hdr + wire[wl] on st's TLS connection fd (see
 * stream_i.h). Caller holds its send lock. Returns 0 or -errno. */
static int tls_send(struct stream *st, int fd, const uint8_t *hdr, const void *wire, size_t wl)
{
	const uint8_t *p = wire;
	size_t left = wl;
	bool first = true;

	do {
		uint8_t one[PFS_FRAME_HDR_SIZE + TLS_ONE_RECORD];
		ssize_t n;
		if (first && wl <= TLS_ONE_RECORD) {
			memcpy(one, hdr, PFS_FRAME_HDR_SIZE);
			if (wl)
				memcpy(one + PFS_FRAME_HDR_SIZE, wire, wl);
			n = tls_seal(st, one, PFS_FRAME_HDR_SIZE + wl, NULL, 0);
			left = 0;
		} else {
			size_t k = left < TLS_CHUNK ? left : TLS_CHUNK;
			n = tls_seal(st, first ? hdr : NULL, first ? PFS_FRAME_HDR_SIZE : 0, p, k);
			p += k;
			left -= k;
		}
		first = false;
		if (n < 0)
			return (int)n;
		struct iovec iov = { st->sbuf, (size_t)n };
		int rc = sock_sendv(fd, &iov, 1);
		if (rc < 0)
			return rc;
	} while (left);
	return 0;
}

int stream_send(struct stream *st, int fd, const uint8_t *hdr, const void *wire, size_t wl)
{
	struct iovec iov[2] = { { (void *)hdr, PFS_FRAME_HDR_SIZE }, { (void *)wire, wl } };

	if (st->ssl)
		return tls_send(st, fd, hdr, wire, wl);
	return sock_sendv(fd, iov, wl ? 2 : 1);
}

/* ---- receiving ---- */

/* Up to n bytes of plaintext from st's TLS connection into buf (see
 * stream_i.h): decrypts what is buffered, else lets the read BIO take
 * what fd has (records straight into OpenSSL's record buffer: tls_bio.h),
 * else waits for fd. Returns the bytes, 0 at the end of the stream, or -1
 * with errno (EPROTO: a TLS failure, logged). */
static ssize_t tls_recv(struct stream *st, int fd, void *buf, size_t n)
{
	for (;;) {
		char why[128];
		pthread_mutex_lock(&st->tls_lock);
		if (st->tls_fd != fd) {
			pfs_tls_bio_set_fd(st->rbio, fd, &st->bytes_read);
			st->tls_fd = fd;
		}
		ERR_clear_error();
		int k = SSL_read(st->ssl, buf, n > INT_MAX ? INT_MAX : (int)n);
		int e = k > 0 ? SSL_ERROR_NONE : SSL_get_error(st->ssl, k);
		int sock = pfs_tls_bio_status(st->rbio);
		if (e != SSL_ERROR_NONE && e != SSL_ERROR_WANT_READ && e != SSL_ERROR_ZERO_RETURN)
			pfs_tls_reason(why, sizeof(why), "protocol error");
		pthread_mutex_unlock(&st->tls_lock);
		if (k > 0)
			return k;
		if (e == SSL_ERROR_ZERO_RETURN)
			return 0;
		if (e == SSL_ERROR_WANT_READ) {
			struct pollfd pfd = { .fd = fd, .events = POLLIN };
			atomic_store(&st->waiting, true);
			int pr = poll(&pfd, 1, -1);
			atomic_store(&st->waiting, false);
			if (pr < 0 && errno != EINTR)
				return -1;
			/* Bytes came, if only part of a record. */
			if (pr > 0 && st->rx_noting)
				st->on_rx(st->on_rx_arg);
			continue;
		}
		/* The socket's own end or error, as recv(2) would say it. */
		if (sock == 1)
			return 0;
		if (sock < 0) {
			errno = -sock;
			return -1;
		}
		/* Tampering on the way, or the server's alert: the
		 * connection is redone like any lost one. */
		pfs_warn("TLS from %s: %s", st->peer, why);
		errno = EPROTO;
		return -1;
	}
}

/* Up to n bytes of st's stream into buf (recv(2)'s results). */
static ssize_t recv_some(struct stream *st, int fd, void *buf, size_t n)
{
	if (st->ssl)
		return tls_recv(st, fd, buf, n);
	atomic_store(&st->waiting, true);
	ssize_t k = recv(fd, buf, n, 0);
	atomic_store(&st->waiting, false);
	if (k > 0)
		atomic_fetch_add(&st->bytes_read, (uint64_t)k);
	return k;
}

int stream_read(struct stream *st, int fd, void *dst, size_t n)
{
	uint8_t *p = dst;

	st->rx_noting = st->on_rx && n >= STREAM_RX_NOTE_MIN;
	while (n > 0) {
		size_t have = st->rend - st->rstart;
		if (have) {
			size_t k = have < n ? have : n;
			memcpy(p, st->rbuf + st->rstart, k);
			st->rstart += k;
			p += k;
			n -= k;
			continue;
		}
		ssize_t k;
		if (n >= RBUF_SIZE / 2) {
			/* Large payloads go straight to their buffer. */
			k = recv_some(st, fd, p, n);
			if (k > 0) {
				p += k;
				n -= (size_t)k;
			}
		} else {
			k = recv_some(st, fd, st->rbuf, RBUF_SIZE);
			if (k > 0) {
				st->rstart = 0;
				st->rend = (size_t)k;
			}
		}
		if (k > 0 && st->rx_noting)
			st->on_rx(st->on_rx_arg);
		if (k == 0)
			return -ECONNRESET;
		if (k < 0 && errno != EINTR)
			return -errno;
	}
	return 0;
}

void stream_frame_done(struct stream *st, uint64_t frame_bytes)
{
	bool idle;

	if (!st->ssl) {
		atomic_fetch_add(&st->bytes_done, frame_bytes);
		return;
	}
	if (st->rstart != st->rend)
		return;
	/* Between frames, with no plaintext or partial record left in
	 * OpenSSL: every byte it took from the read BIO was handled. What
	 * the BIO still queues (the next record's header, read with the
	 * last body) was not: done stops short of it, rather than waiting
	 * for an empty BIO, which replies coming back to back rarely leave.
	 * The counts move under tls_lock (the BIO adds to bytes_read
	 * there); done never goes back. */
	pthread_mutex_lock(&st->tls_lock);
	idle = !SSL_has_pending(st->ssl);
	uint64_t queued = (uint64_t)BIO_ctrl_pending(st->rbio);
	uint64_t read = atomic_load(&st->bytes_read);
	pthread_mutex_unlock(&st->tls_lock);
	if (!idle || queued > read)
		return;
	uint64_t done = read - queued, cur = atomic_load(&st->bytes_done);
	while (cur < done && !atomic_compare_exchange_weak(&st->bytes_done, &cur, done)) {
	}
}
