/* test_tls_stream.c: unit tests of a podfsd connection's TLS stream
 * (daemon/tls_stream.c) against a client SSL object in memory, no
 * socket: the handshake and plaintext pieces in, records and chunks out,
 * stopping and resuming, and the errors (another key, a changed record,
 * the peer's close_notify).
 */
#include <errno.h>
#include <openssl/ssl.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tls_stream_i.h"

/* The plaintext the stream hands out, in a room of room_len bytes; stop
 * after max pieces. */
struct sink {
	uint8_t room[64 * 1024];
	size_t room_len;
	uint8_t *got;
	size_t ngot;
	unsigned pieces;
	unsigned max;
};

static bool room_cb(void *arg, uint8_t **dst, size_t *cap)
{
	struct sink *s = arg;

	if (s->max && s->pieces >= s->max)
		return false;
	*dst = s->room;
	*cap = s->room_len;
	return true;
}

static void plain_cb(void *arg, uint8_t *dst, size_t k)
{
	struct sink *s = arg;

	CHECK(dst == s->room && k > 0 && k <= s->room_len);
	s->got = realloc(s->got, s->ngot + k);
	memcpy(s->got + s->ngot, dst, k);
	s->ngot += k;
	s->pieces++;
}

/* ready_cb calls of tls_stream_send, and their ciphertext, fed to the
 * client (cr). */
struct ready {
	struct tls_stream *t;
	BIO *cr;
	unsigned calls, lasts;
	size_t most;
};

static void to_client(struct tls_stream *t, BIO *cr, size_t *most)
{
	void *buf;
	size_t n;

	tls_stream_take(t, &buf, &n);
	CHECK_EQ(tls_stream_pending(t), 0);
	if (most && n > *most)
		*most = n;
	if (n)
		CHECK_EQ(BIO_write(cr, buf, (int)n), (int)n);
	free(buf);
}

static void ready_cb(void *arg, bool last)
{
	struct ready *r = arg;

	r->calls++;
	r->lasts += last;
	to_client(r->t, r->cr, &r->most);
}

/* The client's ciphertext into the stream. */
static int from_client(BIO *cw, struct tls_stream *t, struct sink *s, char *why, size_t wl)
{
	uint8_t buf[65536];
	int n, ret = 0;

	while (ret == 0 && (n = BIO_read(cw, buf, sizeof(buf))) > 0)
		ret = tls_stream_input(t, buf, (size_t)n, room_cb, plain_cb, s, why, wl);
	return ret;
}

struct pair {
	SSL_CTX *cc, *sc;
	SSL *c;
	BIO *cr, *cw;
	struct tls_stream t;
};

/* A client keyed ck against a stream keyed sk, handshake run. Returns
 * tls_stream_input's last result (0: both ends done). */
static int pair_new(struct pair *p, uint8_t ck, uint8_t sk, char *why, size_t wl)
{
	uint8_t kc[PFS_KEY_LEN], ks[PFS_KEY_LEN];
	char err[128];
	struct sink s = { .room_len = sizeof(s.room) };
	int ret = 0;

	memset(p, 0, sizeof(*p));
	memset(kc, ck, sizeof(kc));
	memset(ks, sk, sizeof(ks));
	p->cc = pfs_tls_ctx_new(false, kc, err, sizeof(err));
	p->sc = pfs_tls_ctx_new(true, ks, err, sizeof(err));
	CHECK(p->cc && p->sc);
	p->c = pfs_tls_new(p->cc, &p->cr, &p->cw);
	CHECK(p->c != NULL);
	SSL_set_connect_state(p->c);
	CHECK_EQ(tls_stream_init(&p->t, p->sc), 0);
	for (int round = 0; round < 10 && ret == 0; round++) {
		int rc = SSL_do_handshake(p->c);
		ret = from_client(p->cw, &p->t, &s, why, wl);
		if (ret == 0 && tls_stream_pending(&p->t))
			to_client(&p->t, p->cr, NULL);
		if (rc == 1 && ret == 0)
			break;
	}
	CHECK_EQ(s.ngot, 0);
	free(s.got);
	return ret;
}

static void pair_free(struct pair *p)
{
	tls_stream_fini(&p->t);
	tls_stream_fini(&p->t); /* safe twice */
	SSL_free(p->c);
	pfs_tls_ctx_free(p->cc);
	pfs_tls_ctx_free(p->sc);
}

/* Reads what the client can, all of it, into buf[cap]; returns the bytes
 * and the number of SSL_reads that gave some. */
static size_t client_read(SSL *c, uint8_t *buf, size_t cap, unsigned *reads)
{
	size_t n = 0;
	int k;

	*reads = 0;
	while (n < cap && (k = SSL_read(c, buf + n, (int)(cap - n))) > 0) {
		n += (size_t)k;
		(*reads)++;
	}
	return n;
}

static void test_handshake_and_pieces(void)
{
	struct pair p;
	char why[128] = "";
	struct sink s = { .room_len = 100 };
	uint8_t msg[1000];

	CHECK_EQ(pair_new(&p, 1, 1, why, sizeof(why)), 0);
	CHECK(SSL_is_init_finished(p.c));
	for (size_t i = 0; i < sizeof(msg); i++)
		msg[i] = (uint8_t)(i * 7);
	CHECK_EQ(SSL_write(p.c, msg, sizeof(msg)), (int)sizeof(msg));
	/* A room of 100 bytes: the record comes out in pieces. */
	CHECK_EQ(from_client(p.cw, &p.t, &s, why, sizeof(why)), 0);
	CHECK(tls_stream_up(&p.t));
	CHECK_EQ(s.ngot, sizeof(msg));
	CHECK_EQ(s.pieces, 10);
	CHECK(memcmp(s.got, msg, sizeof(msg)) == 0);

	/* Stopped after one piece, the rest stays for the next call. */
	free(s.got);
	memset(&s, 0, sizeof(s));
	s.room_len = 100;
	s.max = 1;
	CHECK_EQ(SSL_write(p.c, msg, sizeof(msg)), (int)sizeof(msg));
	CHECK_EQ(from_client(p.cw, &p.t, &s, why, sizeof(why)), 0);
	CHECK_EQ(s.ngot, 100);
	s.max = 0;
	CHECK_EQ(tls_stream_input(&p.t, NULL, 0, room_cb, plain_cb, &s, why, sizeof(why)), 0);
	CHECK_EQ(s.ngot, sizeof(msg));
	CHECK(memcmp(s.got, msg, sizeof(msg)) == 0);
	free(s.got);

	/* The peer's close_notify. */
	memset(&s, 0, sizeof(s));
	s.room_len = sizeof(s.room);
	SSL_shutdown(p.c);
	CHECK_EQ(from_client(p.cw, &p.t, &s, why, sizeof(why)), -EPIPE);
	free(s.got);
	pair_free(&p);
}

static void test_send(void)
{
	struct pair p;
	char why[128] = "";
	uint8_t hdr[PFS_FRAME_HDR_SIZE], *big, *back;
	size_t nbig = 2 * TLS_STREAM_CHUNK + 5;
	unsigned reads;

	CHECK_EQ(pair_new(&p, 2, 2, why, sizeof(why)), 0);
	memset(hdr, 0xab, sizeof(hdr));
	big = malloc(nbig);
	back = malloc(PFS_FRAME_HDR_SIZE + nbig);
	for (size_t i = 0; i < nbig; i++)
		big[i] = (uint8_t)(i * 13 + 1);

	/* Header and a small payload: one record, one ready_cb. */
	struct ready r = { .t = &p.t, .cr = p.cr };
	CHECK_EQ(tls_stream_send(&p.t, hdr, sizeof(hdr), big, 4096, ready_cb, &r, why,
				 sizeof(why)), 0);
	CHECK_EQ(r.calls, 1);
	CHECK_EQ(r.lasts, 1);
	CHECK_EQ(client_read(p.c, back, PFS_FRAME_HDR_SIZE + nbig, &reads),
		 PFS_FRAME_HDR_SIZE + 4096);
	CHECK_EQ(reads, 1);
	CHECK(memcmp(back, hdr, sizeof(hdr)) == 0);
	CHECK(memcmp(back + sizeof(hdr), big, 4096) == 0);

	/* A large payload: the header alone, then chunks, each handed out
	 * before the next is encrypted. */
	memset(&r, 0, sizeof(r));
	r.t = &p.t;
	r.cr = p.cr;
	CHECK_EQ(tls_stream_send(&p.t, hdr, sizeof(hdr), big, nbig, ready_cb, &r, why,
				 sizeof(why)), 0);
	CHECK_EQ(r.calls, 3);
	CHECK_EQ(r.lasts, 1);
	CHECK(r.most < TLS_STREAM_CHUNK + 4096);
	CHECK_EQ(client_read(p.c, back, PFS_FRAME_HDR_SIZE + nbig, &reads),
		 PFS_FRAME_HDR_SIZE + nbig);
	CHECK(memcmp(back, hdr, sizeof(hdr)) == 0);
	CHECK(memcmp(back + sizeof(hdr), big, nbig) == 0);

	/* b alone (the rest of a spliced reply). */
	memset(&r, 0, sizeof(r));
	r.t = &p.t;
	r.cr = p.cr;
	CHECK_EQ(tls_stream_send(&p.t, NULL, 0, big, 10, ready_cb, &r, why, sizeof(why)), 0);
	CHECK_EQ(r.lasts, 1);
	CHECK_EQ(client_read(p.c, back, nbig, &reads), 10);
	CHECK(memcmp(back, big, 10) == 0);
	free(big);
	free(back);
	pair_free(&p);
}

static void test_errors(void)
{
	struct pair p;
	char why[128] = "";
	struct sink s = { .room_len = sizeof(s.room) };
	struct ready r = { 0 };

	/* Another key: the handshake fails on the PSK binder, and the stream
	 * holds the alert to send. */
	CHECK_EQ(pair_new(&p, 3, 4, why, sizeof(why)), -EPROTO);
	CHECK(strstr(why, "binder") != NULL);
	CHECK(!tls_stream_up(&p.t));
	CHECK(tls_stream_pending(&p.t) > 0);
	tls_stream_drop(&p.t);
	CHECK_EQ(tls_stream_pending(&p.t), 0);
	pair_free(&p);

	/* A record changed on the way, after the handshake. */
	CHECK_EQ(pair_new(&p, 5, 5, why, sizeof(why)), 0);
	CHECK_EQ(SSL_write(p.c, "ping", 4), 4);
	uint8_t rec[256];
	int rl = BIO_read(p.cw, rec, sizeof(rec));
	CHECK(rl > 5);
	rec[rl - 1] ^= 1;
	why[0] = 0;
	CHECK_EQ(tls_stream_input(&p.t, rec, (size_t)rl, room_cb, plain_cb, &s, why, sizeof(why)),
		 -EPROTO);
	CHECK(why[0] != 0);
	CHECK(tls_stream_up(&p.t));
	CHECK_EQ(s.ngot, 0);
	/* After it, nothing can be sent. */
	r.t = &p.t;
	r.cr = p.cr;
	CHECK_EQ(tls_stream_send(&p.t, "x", 1, NULL, 0, ready_cb, &r, why, sizeof(why)), -EPROTO);
	CHECK_EQ(r.lasts, 0);
	pair_free(&p);
}

int main(void)
{
	test_handshake_and_pieces();
	test_send();
	test_errors();
	return check_done("test_tls_stream");
}
