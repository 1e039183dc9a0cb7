/* test_tls_bio.c: unit tests of the BIO under podfs's SSL objects
 * (lib/tls_bio.c): memory-BIO behaviour, the buffer that changes hands,
 * loans kept past their end, reads from a socket (a local socketpair:
 * no network), and whole TLS sessions carried the ways podfsd (loans)
 * and podfs (its socket) carry them. */
#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "podfs/tls.h"
#include "podfs/tls_bio.h"

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (uint8_t)(seed >> 16);
	}
}

/* Behaves as a memory BIO with eof_return -1 does. */
static void test_queue(void)
{
	BIO *b = pfs_tls_bio_new();
	uint8_t in[10000], out[10000];
	size_t got = 0;

	if (!CHECK(b))
		return;
	fill(in, sizeof(in), 1);
	CHECK_EQ(BIO_pending(b), 0);
	CHECK(BIO_read(b, out, 10) <= 0);
	CHECK(BIO_should_retry(b) && BIO_should_read(b));
	CHECK_EQ(BIO_write(b, in, 3000), 3000);
	CHECK_EQ(BIO_write(b, in + 3000, 7000), 7000);
	CHECK_EQ(BIO_pending(b), 10000);
	while (got < sizeof(out)) {
		int k = BIO_read(b, out + got, 777);
		if (!CHECK(k > 0))
			break;
		got += (size_t)k;
		/* Writes between reads land after what is queued. */
		if (got == 777 * 3) {
			CHECK_EQ(BIO_pending(b), 10000 - 777 * 3);
		}
	}
	CHECK_EQ(memcmp(in, out, sizeof(in)), 0);
	CHECK_EQ(BIO_pending(b), 0);
	CHECK_EQ(BIO_write(b, "abc", 3), 3);
	CHECK_EQ(BIO_reset(b), 1);
	CHECK_EQ(BIO_pending(b), 0);
	CHECK_EQ(BIO_flush(b), 1);
	BIO_free(b);
}

/* What was written changes hands without a copy; an exact reservation
 * holds a whole write; a buffer given back is reused. */
static void test_take_give(void)
{
	BIO *b = pfs_tls_bio_new();
	uint8_t in[70000], *buf, *buf2;
	size_t len, cap;

	if (!CHECK(b))
		return;
	fill(in, sizeof(in), 2);
	pfs_tls_bio_take(b, &buf, &len, &cap);
	CHECK(buf == NULL && len == 0 && cap == 0);
	CHECK_EQ(pfs_tls_bio_reserve(b, sizeof(in)), 0);
	CHECK_EQ(BIO_write(b, in, 40000), 40000);
	CHECK_EQ(BIO_write(b, in + 40000, 30000), 30000);
	pfs_tls_bio_take(b, &buf, &len, &cap);
	CHECK_EQ(len, sizeof(in));
	CHECK_EQ(cap, sizeof(in)); /* no growth beyond the reservation */
	CHECK(buf && memcmp(buf, in, sizeof(in)) == 0);
	CHECK_EQ(BIO_pending(b), 0);
	/* Part read before the take: only the rest changes hands. */
	pfs_tls_bio_give(b, buf, cap);
	CHECK_EQ(BIO_write(b, in, 100), 100);
	uint8_t out[40];
	CHECK_EQ(BIO_read(b, out, 40), 40);
	pfs_tls_bio_take(b, &buf2, &len, &cap);
	CHECK(buf2 == buf); /* the buffer given back was used */
	CHECK_EQ(len, 60);
	CHECK_EQ(memcmp(buf2, in + 40, 60), 0);
	/* A buffer given while the BIO holds one is freed (ASan checks). */
	CHECK_EQ(BIO_write(b, "x", 1), 1);
	pfs_tls_bio_give(b, buf2, cap);
	CHECK_EQ(BIO_pending(b), 1);
	pfs_tls_bio_give(b, NULL, 0);
	BIO_free(b);
}

/* A loan is read in place; what is left of it is kept when it ends, and
 * comes after what was queued before it. */
static void test_loan(void)
{
	BIO *b = pfs_tls_bio_new();
	uint8_t in[5000], loan[5000], out[6000];

	if (!CHECK(b))
		return;
	fill(in, sizeof(in), 3);
	CHECK_EQ(BIO_write(b, "head", 4), 4);
	memcpy(loan, in, sizeof(loan));
	pfs_tls_bio_lend(b, loan, sizeof(loan));
	CHECK_EQ(BIO_pending(b), 4 + 5000);
	CHECK_EQ(BIO_read(b, out, 4), 4);
	CHECK_EQ(memcmp(out, "head", 4), 0);
	CHECK_EQ(BIO_read(b, out, 1000), 1000);
	CHECK_EQ(memcmp(out, in, 1000), 0);
	CHECK_EQ(pfs_tls_bio_keep(b), 0);
	memset(loan, 0xee, sizeof(loan)); /* the lender's buffer goes */
	CHECK_EQ(BIO_pending(b), 4000);
	size_t got = 0;
	int k;
	while ((k = BIO_read(b, out + got, sizeof(out) - got)) > 0)
		got += (size_t)k;
	CHECK_EQ(got, 4000);
	CHECK_EQ(memcmp(out, in + 1000, 4000), 0);
	/* A loan read whole leaves nothing to keep. */
	pfs_tls_bio_lend(b, in, 10);
	CHECK_EQ(BIO_read(b, out, 100), 10);
	CHECK_EQ(pfs_tls_bio_keep(b), 0);
	CHECK_EQ(BIO_pending(b), 0);
	BIO_free(b);
}

/* Reads from a socket: what was asked goes straight out, what follows
 * it (the next records, up to PFS_TLS_BIO_AHEAD) waits in the BIO;
 * "would block" is a retry; the peer's end and errors are told apart. */
static void test_socket(void)
{
	BIO *b = pfs_tls_bio_new();
	_Atomic uint64_t count = 0;
	uint8_t in[100], out[100];
	int sv[2];

	if (!CHECK(b) || !CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0))
		return;
	fill(in, sizeof(in), 4);
	pfs_tls_bio_set_fd(b, sv[0], &count);
	CHECK(BIO_read(b, out, 10) <= 0);
	CHECK(BIO_should_retry(b));
	CHECK_EQ(pfs_tls_bio_status(b), 0);
	CHECK_EQ(write(sv[1], in, sizeof(in)), (ssize_t)sizeof(in));
	CHECK_EQ(BIO_read(b, out, 10), 10);
	CHECK_EQ(memcmp(out, in, 10), 0);
	CHECK_EQ(BIO_pending(b), 90); /* read ahead */
	CHECK_EQ(count, 100);
	/* Queued bytes first, then the socket, in one read. */
	CHECK_EQ(BIO_read(b, out, 20), 20);
	CHECK_EQ(memcmp(out, in + 10, 20), 0);
	CHECK_EQ(write(sv[1], in, 30), 30);
	CHECK_EQ(BIO_read(b, out, 100), 100);
	CHECK_EQ(memcmp(out, in + 30, 70), 0);
	CHECK_EQ(memcmp(out + 70, in, 30), 0);
	CHECK_EQ(count, 130);
	CHECK_EQ(BIO_pending(b), 0);
	close(sv[1]);
	CHECK(BIO_read(b, out, 10) <= 0);
	CHECK(!BIO_should_retry(b));
	CHECK_EQ(pfs_tls_bio_status(b), 1);
	CHECK(BIO_eof(b));
	close(sv[0]);
	/* An error is remembered as -errno. */
	pfs_tls_bio_set_fd(b, sv[0], NULL);
	CHECK(BIO_read(b, out, 10) <= 0);
	CHECK_EQ(pfs_tls_bio_status(b), -EBADF);
	BIO_free(b);
}

/* Drains one side's written BIO into the other's read BIO. */
static void pump(BIO *from, BIO *to)
{
	uint8_t *buf;
	size_t len;

	pfs_tls_bio_take(from, &buf, &len, NULL);
	if (len)
		CHECK_EQ(BIO_write(to, buf, (int)len), (int)len);
	free(buf);
}

/* A TLS session: 3 MiB each way, the server fed by loans of odd sizes
 * (as podfsd's loop is), the client reading its socket itself (as
 * podfs's connection thread does); then a flipped bit is refused. */
static void test_session(void)
{
	char err[128];
	uint8_t key[PFS_KEY_LEN];
	memset(key, 0x5a, sizeof(key));
	SSL_CTX *cc = pfs_tls_ctx_new(false, key, err, sizeof(err));
	SSL_CTX *sc = pfs_tls_ctx_new(true, key, err, sizeof(err));
	BIO *cr, *cw, *sr, *sw;
	SSL *c = pfs_tls_new(cc, &cr, &cw), *s = pfs_tls_new(sc, &sr, &sw);
	const size_t total = 3u << 20;
	uint8_t *in = malloc(total), *out = malloc(total), *wire;
	size_t wlen;
	int sv[2];
	bool done = false;

	if (!CHECK(cc && sc && c && s && in && out))
		goto out;
	fill(in, total, 5);
	SSL_set_connect_state(c);
	SSL_set_accept_state(s);
	for (int round = 0; round < 10 && !done; round++) {
		int rc = SSL_do_handshake(c), rs = SSL_do_handshake(s);
		pump(cw, sr);
		pump(sw, cr);
		done = rc == 1 && rs == 1;
	}
	if (!CHECK(done))
		goto out;

	/* Client to server: ciphertext lent to the server in pieces of odd
	 * sizes, each loan kept before its buffer is reused. */
	CHECK_EQ(SSL_write(c, in, (int)total), (int)total);
	pfs_tls_bio_take(cw, &wire, &wlen, NULL);
	size_t at = 0, got = 0, step = 1;
	uint8_t piece[70000];
	while (at < wlen || got < total) {
		size_t k = wlen - at < step ? wlen - at : step;
		memcpy(piece, wire + at, k);
		pfs_tls_bio_lend(sr, piece, k);
		at += k;
		int n;
		while (got < total && (n = SSL_read(s, out + got, (int)(total - got))) > 0)
			got += (size_t)n;
		CHECK_EQ(pfs_tls_bio_keep(sr), 0);
		memset(piece, 0, k);
		step = step * 7 % 65521 + 1;
		if (at >= wlen && k == 0)
			break;
	}
	free(wire);
	CHECK_EQ(got, total);
	CHECK_EQ(memcmp(in, out, total), 0);

	/* Server to client over a socketpair: the client's read BIO
	 * receives straight into OpenSSL's record buffer. */
	if (!CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0))
		goto out;
	_Atomic uint64_t count = 0;
	pfs_tls_bio_set_fd(cr, sv[0], &count);
	CHECK_EQ(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
	CHECK_EQ(SSL_write(s, in, (int)total), (int)total);
	pfs_tls_bio_take(sw, &wire, &wlen, NULL);
	memset(out, 0, total);
	at = got = 0;
	while (got < total) {
		if (at < wlen) {
			ssize_t w = write(sv[1], wire + at, wlen - at < 100000 ? wlen - at : 100000);
			if (w > 0)
				at += (size_t)w;
		}
		int n = SSL_read(c, out + got, (int)(total - got));
		if (n > 0) {
			got += (size_t)n;
			continue;
		}
		if (!CHECK_EQ(SSL_get_error(c, n), SSL_ERROR_WANT_READ) || at >= wlen)
			break;
	}
	CHECK_EQ(got, total);
	CHECK_EQ(memcmp(in, out, total), 0);
	CHECK_EQ(count, wlen);
	free(wire);

	/* One bit changed on the way: the record is refused, and the
	 * socket's status says it was not the socket. */
	CHECK_EQ(SSL_write(s, "pong", 4), 4);
	pfs_tls_bio_take(sw, &wire, &wlen, NULL);
	wire[wlen - 1] ^= 1;
	CHECK_EQ(write(sv[1], wire, wlen), (ssize_t)wlen);
	free(wire);
	CHECK(SSL_read(c, out, 100) <= 0);
	CHECK_EQ(SSL_get_error(c, -1), SSL_ERROR_SSL);
	CHECK_EQ(pfs_tls_bio_status(cr), 0);
	ERR_clear_error();
	close(sv[0]);
	close(sv[1]);
out:
	free(in);
	free(out);
	SSL_free(c);
	SSL_free(s);
	pfs_tls_ctx_free(cc);
	pfs_tls_ctx_free(sc);
}

int main(void)
{
	test_queue();
	test_take_give();
	test_loan();
	test_socket();
	test_session();
	return check_done("test_tls_bio");
}
