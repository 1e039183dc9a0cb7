/* fuzz_tls_stream.c: the server side of a connection's TLS as podfsd's
 * loop drives it (daemon/tls_stream.c on lib/tls_bio.c): ciphertext lent
 * in place in pieces of any size, what a piece leaves of a record kept
 * past the piece, plaintext decrypted into rooms of any size.
 *
 * Input: byte 0 seeds the sizes of the pieces the ciphertext arrives in;
 * byte 1 seeds the sizes of the rooms the plaintext goes to (cap 1 up to
 * 64 KiB); byte 2, bit 0: append the rest of the input to the stream raw
 * (as an attacker on the path would), after the records; the rest is
 * application data. A real client (same pod key) handshakes with the
 * server and sends that data in records (of up to 16 KiB, and in several
 * SSL_write calls of sizes taken from byte 0 as well), then, if asked,
 * the raw bytes follow.
 *
 * Properties: no sanitizer report; the server finishes the handshake and
 * hands out exactly the data sent, in order, whatever the pieces and
 * rooms; raw bytes after it end the stream with an error (-EPROTO) or
 * with more data needed, never with plaintext that was not sent.
 */
#include <errno.h>
#include <openssl/ssl.h>
#include <string.h>

#include "podfs/tls.h"
#include "podfs/tls_bio.h"
#include "podfs/wire.h"
#include "fuzz.h"
#include "tls_stream_i.h"

struct sink {
	uint8_t *out;       /* plaintext received so far */
	size_t n, cap;
	uint8_t room[65536];
	uint32_t seed;
	bool bogus;         /* got more than was sent */
};

static uint32_t next(uint32_t *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8;
}

static bool room_cb(void *arg, uint8_t **dst, size_t *cap)
{
	struct sink *k = arg;

	*dst = k->room;
	*cap = 1 + next(&k->seed) % sizeof(k->room);
	return true;
}

static void plain_cb(void *arg, uint8_t *dst, size_t n)
{
	struct sink *k = arg;

	FUZZ_ASSERT(dst == k->room && n > 0);
	if (k->n + n > k->cap) {
		k->bogus = true;
		return;
	}
	memcpy(k->out + k->n, dst, n);
	k->n += n;
}

/* Moves what the client wrote into `wire`, appending. */
static void drain(BIO *w, uint8_t **wire, size_t *len, size_t *cap)
{
	uint8_t *b;
	size_t n;

	pfs_tls_bio_take(w, &b, &n, NULL);
	if (!n)
		return;
	if (*len + n > *cap) {
		*cap = (*len + n) * 2;
		*wire = realloc(*wire, *cap);
		FUZZ_ASSERT(*wire);
	}
	memcpy(*wire + *len, b, n);
	*len += n;
	free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static SSL_CTX *sctx, *cctx;
	char err[128], why[128];
	uint8_t key[PFS_KEY_LEN];

	if (size < 3)
		return 0;
	if (!sctx) {
		memset(key, 0x42, sizeof(key));
		sctx = pfs_tls_ctx_new(true, key, err, sizeof(err));
		cctx = pfs_tls_ctx_new(false, key, err, sizeof(err));
		FUZZ_ASSERT(sctx && cctx);
	}
	uint32_t pseed = data[0] + 1;
	bool raw = data[2] & 1;
	const uint8_t *app = data + 3;
	size_t napp = size - 3;

	struct tls_stream t = { 0 };
	FUZZ_ASSERT(tls_stream_init(&t, sctx) == 0);
	BIO *cr, *cw;
	SSL *c = pfs_tls_new(cctx, &cr, &cw);
	FUZZ_ASSERT(c);
	SSL_set_connect_state(c);
	struct sink *k = calloc(1, sizeof(*k));
	FUZZ_ASSERT(k);
	k->seed = data[1] + 1;
	k->cap = napp;
	k->out = malloc(napp ? napp : 1);
	FUZZ_ASSERT(k->out);

	/* The handshake, the server fed whole flights. */
	uint8_t *wire = NULL, *srv;
	size_t wlen = 0, wcap = 0, slen;
	bool done = false;
	for (int round = 0; round < 8 && !done; round++) {
		int rc = SSL_do_handshake(c);
		drain(cw, &wire, &wlen, &wcap);
		FUZZ_ASSERT(tls_stream_input(&t, wire, wlen, room_cb, plain_cb, k, why, sizeof(why)) == 0);
		wlen = 0;
		tls_stream_take(&t, (void **)&srv, &slen);
		if (slen)
			FUZZ_ASSERT(BIO_write(cr, srv, (int)slen) == (int)slen);
		free(srv);
		done = rc == 1 && tls_stream_up(&t);
	}
	FUZZ_ASSERT(SSL_do_handshake(c) == 1);

	/* The data in records, written in pieces; the raw tail after. */
	for (size_t at = 0; at < napp;) {
		size_t w = 1 + next(&pseed) % 40000;
		if (w > napp - at)
			w = napp - at;
		FUZZ_ASSERT(SSL_write(c, app + at, (int)w) == (int)w);
		at += w;
	}
	drain(cw, &wire, &wlen, &wcap);
	size_t records = wlen;
	if (raw && napp) {
		if (wlen + napp > wcap) {
			wcap = wlen + napp;
			wire = realloc(wire, wcap);
			FUZZ_ASSERT(wire);
		}
		memcpy(wire + wlen, app, napp);
		wlen += napp;
	}

	/* Fed in pieces, each from a buffer that is gone after the call
	 * (the loan must have been kept). */
	int ret = 0;
	for (size_t at = 0; at < wlen && ret == 0;) {
		size_t n = 1 + next(&pseed) % 70000;
		if (n > wlen - at)
			n = wlen - at;
		uint8_t *piece = malloc(n);
		FUZZ_ASSERT(piece);
		memcpy(piece, wire + at, n);
		ret = tls_stream_input(&t, piece, n, room_cb, plain_cb, k, why, sizeof(why));
		memset(piece, 0xa5, n);
		free(piece);
		if (at + n <= records)
			FUZZ_ASSERT(ret == 0);
		at += n;
	}
	FUZZ_ASSERT(!k->bogus);
	FUZZ_ASSERT(k->n == napp && memcmp(k->out, app, napp) == 0);
	FUZZ_ASSERT(ret == 0 || ret == -EPROTO);

	free(wire);
	free(k->out);
	free(k);
	SSL_free(c);
	tls_stream_fini(&t);
	return 0;
}
