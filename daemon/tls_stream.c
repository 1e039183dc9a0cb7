/* tls_stream.c: the server side of one connection's TLS on two byte-queue
 * BIOs (see tls_stream_i.h, podfs/tls_bio.h): what the socket delivers
 * is lent to rbio and SSL_read hands out the plaintext; SSL_write
 * encrypts into wbio, whose buffer the owner takes and sends. Never
 * blocks, never logs. */
#include <errno.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdlib.h>
#include <string.h>

#include "podfs/tls_bio.h"
#include "tls_stream_i.h"

int tls_stream_init(struct tls_stream *t, SSL_CTX *ctx)
{
	BIO *rbio, *wbio;
	SSL *ssl = pfs_tls_new(ctx, &rbio, &wbio);

	if (!ssl)
		return -ENOMEM;
	SSL_set_accept_state(ssl);
	t->ssl = ssl;
	t->rbio = rbio;
	t->wbio = wbio;
	t->up = false;
	return 0;
}

void tls_stream_fini(struct tls_stream *t)
{
	SSL_free(t->ssl);
	t->ssl = NULL;
	t->rbio = NULL;
	t->wbio = NULL;
}

int tls_stream_in(struct tls_stream *t, const void *p, size_t n)
{
	return BIO_write(t->rbio, p, (int)n) == (int)n ? 0 : -ENOMEM;
}

/* SSL_read into the rooms room_cb gives until more ciphertext is needed
 * (or room_cb says stop): tls_stream_input's loop. */
static int decrypt(struct tls_stream *t, tls_stream_room_cb room_cb, tls_stream_plain_cb plain_cb,
		   void *arg, char *why, size_t whylen)
{
	uint8_t *dst;
	size_t cap;

	while (room_cb(arg, &dst, &cap)) {
		/* (A fatal error puts the state machine back "in init".) */
		if (!t->up && SSL_is_init_finished(t->ssl))
			t->up = true;
		ERR_clear_error();
		int k = SSL_read(t->ssl, dst, cap > INT_MAX ? INT_MAX : (int)cap);
		if (k > 0) {
			plain_cb(arg, dst, (size_t)k);
			continue;
		}
		int e = SSL_get_error(t->ssl, k);
		if (e == SSL_ERROR_WANT_READ)
			break;
		if (e == SSL_ERROR_ZERO_RETURN)
			return -EPIPE;
		pfs_tls_reason(why, whylen, "TLS error");
		return -EPROTO;
	}
	return 0;
}

int tls_stream_input(struct tls_stream *t, const void *p, size_t n, tls_stream_room_cb room_cb,
		     tls_stream_plain_cb plain_cb, void *arg, char *why, size_t whylen)
{
	int ret;

	/* p is read in place; what SSL_read leaves of it is kept (copied)
	 * before the caller's buffer goes. */
	if (n)
		pfs_tls_bio_lend(t->rbio, p, n);
	ret = decrypt(t, room_cb, plain_cb, arg, why, whylen);
	if (pfs_tls_bio_keep(t->rbio) < 0 && ret == 0)
		ret = -ENOMEM;
	return ret;
}

/* Encrypts p[n] into wbio. Returns 0 or -EPROTO (why). */
static int put(struct tls_stream *t, const void *p, size_t n, char *why, size_t whylen)
{
	while (n) {
		int k = n > INT_MAX ? INT_MAX : (int)n;
		ERR_clear_error();
		int r = SSL_write(t->ssl, p, k);
		if (r <= 0) {
			pfs_tls_reason(why, whylen, "write failed");
			return -EPROTO;
		}
		p = (const uint8_t *)p + r;
		n -= (size_t)r;
	}
	return 0;
}

/* The most ciphertext n bytes of plaintext make in TLS 1.3 records of
 * at most 16 KiB: each adds a 5-byte header, its content type byte and a
 * 16-byte tag (no padding is asked for). */
static size_t sealed_size(size_t n)
{
	return n + (n / 16384 + 1) * (5 + 1 + 16);
}

/* put in TLS_STREAM_CHUNK pieces, ready_cb after each (last: after the
 * last piece). Room for each piece's ciphertext is made first, so that
 * the records land in the buffer the owner takes, without a copy. */
static int put_chunks(struct tls_stream *t, const uint8_t *p, size_t n,
		      tls_stream_ready_cb ready_cb, void *arg, char *why, size_t whylen)
{
	while (n > TLS_STREAM_CHUNK) {
		if (pfs_tls_bio_reserve(t->wbio, sealed_size(TLS_STREAM_CHUNK)) < 0 ||
		    put(t, p, TLS_STREAM_CHUNK, why, whylen) < 0)
			return -EPROTO;
		ready_cb(arg, false);
		p += TLS_STREAM_CHUNK;
		n -= TLS_STREAM_CHUNK;
	}
	if (pfs_tls_bio_reserve(t->wbio, sealed_size(n)) < 0 || put(t, p, n, why, whylen) < 0)
		return -EPROTO;
	ready_cb(arg, true);
	return 0;
}

int tls_stream_send(struct tls_stream *t, const void *a, size_t na, const void *b, size_t nb,
		    tls_stream_ready_cb ready_cb, void *arg, char *why, size_t whylen)
{
	if (na + nb <= TLS_STREAM_SMALL) {
		uint8_t one[TLS_STREAM_SMALL];
		if (na)
			memcpy(one, a, na);
		if (nb)
			memcpy(one + na, b, nb);
		return put_chunks(t, one, na + nb, ready_cb, arg, why, whylen);
	}
	if (na && put(t, a, na, why, whylen) < 0)
		return -EPROTO;
	return put_chunks(t, b, nb, ready_cb, arg, why, whylen);
}

size_t tls_stream_pending(const struct tls_stream *t)
{
	return BIO_ctrl_pending(t->wbio);
}

void tls_stream_take(struct tls_stream *t, void **buf, size_t *len)
{
	uint8_t *b;

	/* The buffer changes hands: no copy. */
	pfs_tls_bio_take(t->wbio, &b, len, NULL);
	*buf = b;
}

void tls_stream_drop(struct tls_stream *t)
{
	(void)BIO_reset(t->wbio);
}
