/* tls_stream.c: the server side of one connection's TLS on two byte-queue
 * BIOs (see tls_stream_i.h, podfs/tls_bio.h): what the socket delivers
 * is lent to rbio and SSL_read hands out the plaintext; SSL_write
 * encrypts into wbio, whose buffer the owner takes and sends. Never
 * blocks, never logs. */
#include <errno.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "podfs/tls_bio.h"
#include "tls_stream_i.h"

int tls_stream_init(struct tls_stream *t, SSL_CTX *ctx)
{
	pthread_mutexattr_t ma;
	BIO *rbio, *wbio;
	SSL *ssl = pfs_tls_new(ctx, &rbio, &wbio);

	if (!ssl)
		return -ENOMEM;
	if (pthread_mutexattr_init(&ma) != 0 ||
	    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE) != 0 ||
	    pthread_mutex_init(&t->lock, &ma) != 0) {
		SSL_free(ssl);
		return -ENOMEM;
	}
	pthread_mutexattr_destroy(&ma);
	SSL_set_accept_state(ssl);
	t->ssl = ssl;
	t->rbio = rbio;
	t->wbio = wbio;
	t->up = false;
	t->shut = false;
	return 0;
}

void tls_stream_fini(struct tls_stream *t)
{
	if (!t->ssl)
		return;
	SSL_free(t->ssl);
	pthread_mutex_destroy(&t->lock);
	t->ssl = NULL;
	t->rbio = NULL;
	t->wbio = NULL;
}

int tls_stream_in(struct tls_stream *t, const void *p, size_t n)
{
	pthread_mutex_lock(&t->lock);
	int ret = BIO_write(t->rbio, p, (int)n) == (int)n ? 0 : -ENOMEM;
	pthread_mutex_unlock(&t->lock);
	return ret;
}

/* SSL_read into the rooms room_cb gives until more ciphertext is needed
 * (or room_cb says stop): tls_stream_input's loop. */
static int decrypt(struct tls_stream *t, tls_stream_room_cb room_cb, tls_stream_plain_cb plain_cb,
		   void *arg, char *why, size_t whylen)
{
	uint8_t *dst;
	size_t cap;

	/* The lock is held around each SSL_read only: the callbacks may send
	 * on this connection or another (each stream takes its own lock),
	 * and no thread ever holds two. */
	while (room_cb(arg, &dst, &cap)) {
		pthread_mutex_lock(&t->lock);
		/* (A fatal error puts the state machine back "in init".) */
		if (!t->up && SSL_is_init_finished(t->ssl))
			t->up = true;
		ERR_clear_error();
		int k = SSL_read(t->ssl, dst, cap > INT_MAX ? INT_MAX : (int)cap);
		int e = k > 0 ? SSL_ERROR_NONE : SSL_get_error(t->ssl, k);
		if (e != SSL_ERROR_NONE && e != SSL_ERROR_WANT_READ && e != SSL_ERROR_ZERO_RETURN) {
			pfs_tls_reason(why, whylen, "TLS error");
			t->shut = true;
		}
		pthread_mutex_unlock(&t->lock);
		if (k > 0) {
			plain_cb(arg, dst, (size_t)k);
			continue;
		}
		if (e == SSL_ERROR_WANT_READ)
			break;
		return e == SSL_ERROR_ZERO_RETURN ? -EPIPE : -EPROTO;
	}
	return 0;
}

int tls_stream_input(struct tls_stream *t, const void *p, size_t n, tls_stream_room_cb room_cb,
		     tls_stream_plain_cb plain_cb, void *arg, char *why, size_t whylen)
{
	int ret;

	/* p is read in place; what SSL_read leaves of it is kept (copied)
	 * before the caller's buffer goes. Only the owner reads: the loan
	 * may stand while the lock is released (decrypt). */
	if (n) {
		pthread_mutex_lock(&t->lock);
		pfs_tls_bio_lend(t->rbio, p, n);
		pthread_mutex_unlock(&t->lock);
	}
	ret = decrypt(t, room_cb, plain_cb, arg, why, whylen);
	pthread_mutex_lock(&t->lock);
	if (pfs_tls_bio_keep(t->rbio) < 0 && ret == 0)
		ret = -ENOMEM;
	pthread_mutex_unlock(&t->lock);
	return ret;
}

/* Encrypts p[n] into wbio. Returns 0 or -EPROTO (why). */
static int put(struct tls_stream *t, const void *p, size_t n, char *why, size_t whylen)
{
	while (n) {
		int k = n > INT_MAX ? INT_MAX : (int)n;
		ERR_clear_error();
		int r = pfs_tls_write(t->ssl, p, k);
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

static int send_locked(struct tls_stream *t, const void *a, size_t na, const void *b, size_t nb,
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

int tls_stream_send(struct tls_stream *t, const void *a, size_t na, const void *b, size_t nb,
		    tls_stream_ready_cb ready_cb, void *arg, char *why, size_t whylen)
{
	pthread_mutex_lock(&t->lock);
	int ret = send_locked(t, a, na, b, nb, ready_cb, arg, why, whylen);
	if (ret < 0)
		t->shut = true;
	pthread_mutex_unlock(&t->lock);
	return ret;
}

int tls_stream_seal(struct tls_stream *t, const void *a, size_t na, const void *b, size_t nb)
{
	char why[64];
	int ret = -EAGAIN;

	pthread_mutex_lock(&t->lock);
	/* After the handshake only; and never after a drop (the connection
	 * closes: nothing would take the records) or an error. */
	if (!t->shut && t->up && SSL_is_init_finished(t->ssl)) {
		ret = 0;
		if (pfs_tls_bio_reserve(t->wbio, sealed_size(na) + sealed_size(nb)) < 0 ||
		    (na && put(t, a, na, why, sizeof(why)) < 0) ||
		    (nb && put(t, b, nb, why, sizeof(why)) < 0)) {
			t->shut = true;
			ret = -EPROTO;
		}
	}
	pthread_mutex_unlock(&t->lock);
	return ret;
}

size_t tls_stream_pending(struct tls_stream *t)
{
	pthread_mutex_lock(&t->lock);
	size_t n = BIO_ctrl_pending(t->wbio);
	pthread_mutex_unlock(&t->lock);
	return n;
}

void tls_stream_take(struct tls_stream *t, void **buf, size_t *len)
{
	uint8_t *b;

	pthread_mutex_lock(&t->lock);
	/* The buffer changes hands: no copy. */
	pfs_tls_bio_take(t->wbio, &b, len, NULL);
	pthread_mutex_unlock(&t->lock);
	*buf = b;
}

void tls_stream_drop(struct tls_stream *t)
{
	pthread_mutex_lock(&t->lock);
	(void)BIO_reset(t->wbio);
	t->shut = true;
	pthread_mutex_unlock(&t->lock);
}
