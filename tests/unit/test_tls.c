/* test_tls.c: unit tests of the TLS contexts keyed by the pod key
 * (tls.h): the PSK derivation against an independent HKDF, telling TLS
 * from a frame by the first bytes, and whole handshakes between a client
 * and a server context in memory (no socket): same key, another key;
 * and by certificate (made here: a CA, a server certificate, an
 * impostor's): the name, the CA, a server without one, the key file;
 * and a stream of records read from a socket by the client's BIO, which
 * reads ahead of the record asked for (tls_bio.h).
 */
#include <errno.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "podfs/frame.h"
#include "podfs/tls.h"
#include "podfs/tls_bio.h"

static void test_psk(void)
{
	uint8_t key[PFS_KEY_LEN], psk[PFS_TLS_PSK_LEN], again[PFS_TLS_PSK_LEN];
	/* HKDF-SHA256(salt "podfs tls", info "podfs/1 tls13 external psk"),
	 * key 00 01 .. 1f, computed with Python's hmac. */
	static const uint8_t want[PFS_TLS_PSK_LEN] = {
		0x25, 0xbc, 0x6d, 0x1e, 0x40, 0x1a, 0x82, 0x07, 0x30, 0x0d, 0xdd,
		0x6e, 0x73, 0xfc, 0xe9, 0x02, 0xe1, 0x06, 0x85, 0x2e, 0x6d, 0x4d,
		0xbf, 0xc3, 0x7c, 0x2a, 0x24, 0x3b, 0xd0, 0x8e, 0xd4, 0x67,
	};

	for (int i = 0; i < PFS_KEY_LEN; i++)
		key[i] = (uint8_t)i;
	CHECK_EQ(pfs_tls_psk(key, psk), 0);
	CHECK(memcmp(psk, want, sizeof(want)) == 0);
	CHECK(memcmp(psk, key, sizeof(psk)) != 0);
	key[31] ^= 1;
	CHECK_EQ(pfs_tls_psk(key, again), 0);
	CHECK(memcmp(psk, again, sizeof(psk)) != 0);
}

static void test_sniff(void)
{
	static const uint8_t tls[][PFS_TLS_SNIFF_LEN] = {
		{ 0x16, 0x03, 0x01 }, { 0x16, 0x03, 0x03 }, { 0x16, 0x03, 0x04 },
	};
	static const uint8_t other[][PFS_TLS_SNIFF_LEN] = {
		{ 0x16, 0x03, 0x00 }, { 0x16, 0x03, 0x05 }, { 0x17, 0x03, 0x03 },
		{ 0x15, 0x03, 0x01 }, { 0x16, 0x02, 0x01 }, { 0, 0, 0 },
	};

	for (size_t i = 0; i < sizeof(tls) / sizeof(tls[0]); i++)
		CHECK(pfs_tls_sniff(tls[i]));
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
		CHECK(!pfs_tls_sniff(other[i]));
	/* No frame a client can send first (before AUTH) looks like TLS,
	 * whatever its length, 0x316 (16 03 00 00) included. */
	unsigned bad = 0;
	for (uint32_t len = 0; len <= PFS_MAX_HANDSHAKE; len++) {
		struct pfs_frame_hdr h = { .wire_len = len, .raw_len = len, .id = 1,
					   .op = PFS_OP_HELLO };
		uint8_t b[PFS_FRAME_HDR_SIZE];
		pfs_hdr_pack(b, &h);
		bad += pfs_tls_sniff(b);
	}
	for (uint32_t len = 0x300; len < 0x400; len++) {
		struct pfs_frame_hdr h = { .wire_len = len, .raw_len = len, .id = 1,
					   .op = PFS_OP_HELLO };
		uint8_t b[PFS_FRAME_HDR_SIZE];
		pfs_hdr_pack(b, &h);
		bad += pfs_tls_sniff(b);
	}
	CHECK_EQ(bad, 0);
}

/* Moves what one side's write BIO holds into the other's read BIO. */
static size_t pump(BIO *from, BIO *to)
{
	uint8_t buf[16384];
	size_t moved = 0;
	int n;

	while ((n = BIO_read(from, buf, sizeof(buf))) > 0) {
		CHECK_EQ(BIO_write(to, buf, n), n);
		moved += (size_t)n;
	}
	return moved;
}

/* Runs the handshake of client c (its BIOs cr, cw) and server s (sr, sw)
 * in memory, moving each side's output to the other. Returns whether both
 * ends finished it. */
static bool drive(SSL *c, SSL *s, BIO *cr, BIO *cw, BIO *sr, BIO *sw)
{
	SSL_set_connect_state(c);
	SSL_set_accept_state(s);
	for (int round = 0; round < 10; round++) {
		int rc = SSL_do_handshake(c);
		int rs = SSL_do_handshake(s);
		size_t moved = pump(cw, sr) + pump(sw, cr);
		if (rc == 1 && rs == 1)
			return true;
		if (!moved && SSL_get_error(c, rc) != SSL_ERROR_WANT_READ)
			return false;
	}
	return false;
}

/* Runs a handshake between a client keyed ck and a server keyed sk, then
 * (if it succeeds) one message each way. Returns true if both ends
 * finished the handshake. */
static bool handshake(const uint8_t *ck, const uint8_t *sk, bool *msg_ok)
{
	char err[128];
	SSL_CTX *cc = pfs_tls_ctx_new(false, ck, err, sizeof(err));
	SSL_CTX *sc = pfs_tls_ctx_new(true, sk, err, sizeof(err));
	BIO *cr, *cw, *sr, *sw;
	SSL *c, *s;
	bool done = false;

	*msg_ok = false;
	if (!CHECK(cc && sc))
		goto out_ctx;
	c = pfs_tls_new(cc, &cr, &cw);
	s = pfs_tls_new(sc, &sr, &sw);
	if (!CHECK(c && s))
		goto out_ssl;
	done = drive(c, s, cr, cw, sr, sw);
	if (done) {
		char buf[64] = "";
		CHECK(SSL_session_reused(c));
		CHECK_EQ(strcmp(SSL_get_version(c), "TLSv1.3"), 0);
		CHECK_EQ(strcmp(SSL_CIPHER_get_name(SSL_get_current_cipher(c)),
				"TLS_AES_128_GCM_SHA256"), 0);
		CHECK_EQ(SSL_write(c, "ping", 4), 4);
		pump(cw, sr);
		int n = SSL_read(s, buf, sizeof(buf));
		bool one = n == 4 && memcmp(buf, "ping", 4) == 0;
		CHECK_EQ(SSL_write(s, "pong", 4), 4);
		/* One bit changed on the way: the record is refused. */
		uint8_t rec[256];
		int rl = BIO_read(sw, rec, sizeof(rec));
		CHECK(rl > 5);
		rec[rl - 1] ^= 1;
		CHECK_EQ(BIO_write(cr, rec, rl), rl);
		CHECK(SSL_read(c, buf, sizeof(buf)) <= 0);
		CHECK_EQ(SSL_get_error(c, -1), SSL_ERROR_SSL);
		*msg_ok = one;
	}
out_ssl:
	SSL_free(c);
	SSL_free(s);
out_ctx:
	pfs_tls_ctx_free(cc);
	pfs_tls_ctx_free(sc);
	return done;
}

/* Counts the KeyUpdate messages an end received (its msg callback). */
static void count_key_updates(int write_p, int version, int content_type, const void *buf,
			      size_t len, SSL *ssl, void *arg)
{
	(void)version;
	(void)ssl;
	if (!write_p && content_type == SSL3_RT_HANDSHAKE && len >= 1 &&
	    ((const uint8_t *)buf)[0] == SSL3_MT_KEY_UPDATE)
		(*(int *)arg)++;
}

/* Sends n bytes from a to b through pfs_tls_write in 16 KiB writes, b
 * reading each as it comes; returns whether all arrived intact. */
static bool stream_through(SSL *a, BIO *aw, SSL *b, BIO *br, size_t n)
{
	static uint8_t out[16384], in[16384];
	bool ok = true;

	for (size_t sent = 0; sent < n; sent += sizeof(out)) {
		memset(out, (int)(sent / sizeof(out)), sizeof(out));
		ok &= pfs_tls_write(a, out, sizeof(out)) == (int)sizeof(out);
		pump(aw, br);
		ok &= SSL_read(b, in, sizeof(in)) == (int)sizeof(in) &&
		      memcmp(in, out, sizeof(out)) == 0;
	}
	return ok;
}

/* pfs_tls_write moves to the next key each PFS_TLS_REKEY_BYTES (here
 * made 64 KiB): the peer sees a KeyUpdate per 64 KiB and reads every
 * byte, both ways; at the real figure, none in 1 MiB. */
static void test_key_updates(void)
{
	static const uint8_t k[PFS_KEY_LEN] = { 9 };
	char err[128];
	SSL_CTX *cc = pfs_tls_ctx_new(false, k, err, sizeof(err));
	SSL_CTX *sc = pfs_tls_ctx_new(true, k, err, sizeof(err));
	BIO *cr, *cw, *sr, *sw;
	SSL *c = pfs_tls_new(cc, &cr, &cw), *s = pfs_tls_new(sc, &sr, &sw);
	int at_s = 0, at_c = 0;

	if (!CHECK(c && s && drive(c, s, cr, cw, sr, sw)))
		goto out;
	SSL_set_msg_callback(s, count_key_updates);
	SSL_set_msg_callback_arg(s, &at_s);
	SSL_set_msg_callback(c, count_key_updates);
	SSL_set_msg_callback_arg(c, &at_c);
	pfs_tls_set_rekey_bytes(64 * 1024);
	CHECK(stream_through(c, cw, s, sr, 1 << 20));
	CHECK(at_s >= 14 && at_s <= 17);
	CHECK(stream_through(s, sw, c, cr, 256 * 1024));
	CHECK(at_c >= 3 && at_c <= 5);
	pfs_tls_set_rekey_bytes(0);
	at_s = 0;
	CHECK(stream_through(c, cw, s, sr, 1 << 20));
	/* (One the 64 KiB figure had scheduled may come first.) */
	CHECK(at_s <= 1);
out:
	SSL_free(c);
	SSL_free(s);
	pfs_tls_ctx_free(cc);
	pfs_tls_ctx_free(sc);
}

static void test_handshakes(void)
{
	uint8_t k1[PFS_KEY_LEN], k2[PFS_KEY_LEN];
	bool msg;

	memset(k1, 0x11, sizeof(k1));
	memset(k2, 0x11, sizeof(k2));
	k2[0] = 0x12;
	CHECK(handshake(k1, k1, &msg));
	CHECK(msg);
	CHECK(!handshake(k1, k2, &msg));
	CHECK(!handshake(k2, k1, &msg));
}

/* --- certificates --- */

static char dir[] = "/tmp/podfs-test-tls-XXXXXX";

static EVP_PKEY *new_pkey(void)
{
	EVP_PKEY *k = EVP_EC_gen("P-256");

	CHECK(k != NULL);
	return k;
}

/* A certificate of key k for cn and san (a subjectAltName value, or
 * NULL), signed by ca's key cak (self-signed when ca is NULL). */
static X509 *new_cert(EVP_PKEY *k, const char *cn, const char *san, X509 *ca, EVP_PKEY *cak)
{
	X509 *x = X509_new();
	X509V3_CTX v3;

	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), (long)(random() & 0xffffff) + 1);
	X509_gmtime_adj(X509_getm_notBefore(x), -60);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, k);
	X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
				   (const unsigned char *)cn, -1, -1, 0);
	X509_set_issuer_name(x, X509_get_subject_name(ca ? ca : x));
	X509V3_set_ctx(&v3, ca ? ca : x, x, NULL, NULL, 0);
	const char *bc = ca ? "CA:FALSE" : "critical,CA:TRUE";
	X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &v3, NID_basic_constraints, bc);
	CHECK(e && X509_add_ext(x, e, -1));
	X509_EXTENSION_free(e);
	if (san) {
		e = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, san);
		CHECK(e && X509_add_ext(x, e, -1));
		X509_EXTENSION_free(e);
	}
	CHECK(X509_sign(x, ca ? cak : k, EVP_sha256()) > 0);
	return x;
}

static char *path_of(const char *name)
{
	static char buf[8][128];
	static int i;
	char *p = buf[i++ % 8];

	snprintf(p, sizeof(buf[0]), "%s/%s", dir, name);
	return p;
}

static void write_pem(const char *name, X509 *x, EVP_PKEY *k, mode_t mode)
{
	FILE *f = fopen(path_of(name), "w");

	CHECK(f != NULL);
	if (x)
		CHECK(PEM_write_X509(f, x));
	if (k)
		CHECK(PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL));
	fclose(f);
	chmod(path_of(name), mode);
}

/* A handshake between client context cc (expecting name, if not NULL)
 * and server context sc, in memory. Returns whether both ends finished;
 * *c_out keeps the client (the caller frees it) when c_out is given. */
static bool cert_handshake(SSL_CTX *cc, SSL_CTX *sc, const char *name, SSL **c_out)
{
	BIO *cr, *cw, *sr, *sw;
	SSL *c = pfs_tls_new(cc, &cr, &cw), *s = pfs_tls_new(sc, &sr, &sw);
	bool done = false;

	CHECK(c && s);
	if (name)
		CHECK_EQ(pfs_tls_expect_name(c, name), 0);
	done = drive(c, s, cr, cw, sr, sw);
	ERR_clear_error();
	SSL_free(s);
	if (c_out)
		*c_out = c;
	else
		SSL_free(c);
	return done;
}

static void test_certificates(void)
{
	char err[512], info[1024], why[256];
	uint8_t key[PFS_KEY_LEN];
	SSL *c;

	memset(key, 0x22, sizeof(key));
	CHECK(mkdtemp(dir) != NULL);
	EVP_PKEY *cak = new_pkey(), *sk = new_pkey(), *ek = new_pkey(), *ok = new_pkey();
	X509 *ca = new_cert(cak, "pod CA", NULL, NULL, NULL);
	X509 *srv = new_cert(sk, "coord", "IP:127.0.0.1,DNS:coord.test", ca, cak);
	X509 *evil = new_cert(ek, "coord", "IP:127.0.0.1,DNS:coord.test", NULL, NULL);
	write_pem("ca.pem", ca, NULL, 0644);
	write_pem("srv.pem", srv, NULL, 0644);
	write_pem("srv.key", NULL, sk, 0600);
	write_pem("both.pem", srv, sk, 0600);
	write_pem("open.key", NULL, sk, 0640);
	write_pem("other.key", NULL, ok, 0600);
	write_pem("evil.pem", evil, ek, 0600);

	SSL_CTX *sc = pfs_tls_ctx_new(true, key, err, sizeof(err));
	SSL_CTX *bare = pfs_tls_ctx_new(true, key, err, sizeof(err));
	SSL_CTX *ec = pfs_tls_ctx_new(true, key, err, sizeof(err));
	SSL_CTX *psk = pfs_tls_ctx_new(false, key, err, sizeof(err));
	SSL_CTX *cc = pfs_tls_ctx_new_ca(path_of("ca.pem"), err, sizeof(err));
	CHECK(sc && bare && ec && psk && cc);

	/* The files' checks (a context that failed may hold part of what it
	 * loaded: tls.h; loading again puts the whole in place). */
	CHECK_EQ(pfs_tls_ctx_use_cert(sc, path_of("srv.pem"), path_of("open.key"), info,
				      sizeof(info), err, sizeof(err)), -EPERM);
	CHECK(strstr(err, "open.key") && strstr(err, "group or others"));
	CHECK_EQ(pfs_tls_ctx_use_cert(sc, path_of("srv.pem"), path_of("other.key"), info,
				      sizeof(info), err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "is not the certificate's") != NULL);
	CHECK_EQ(pfs_tls_ctx_use_cert(sc, path_of("nope.pem"), NULL, info, sizeof(info), err,
				      sizeof(err)), -ENOENT);
	CHECK_EQ(pfs_tls_ctx_use_cert(sc, path_of("srv.pem"), path_of("srv.key"), info,
				      sizeof(info), err, sizeof(err)), 0);
	CHECK(strstr(info, "CN=coord") && strstr(info, "valid until"));
	CHECK_EQ(pfs_tls_ctx_use_cert(ec, path_of("evil.pem"), NULL, info, sizeof(info), err,
				      sizeof(err)), 0);
	CHECK(pfs_tls_ctx_new_ca(path_of("srv.key"), err, sizeof(err)) == NULL);
	CHECK(strstr(err, "no CA certificate in") != NULL);

	/* By certificate: for the address and the DNS name it names. */
	CHECK(cert_handshake(cc, sc, "127.0.0.1", &c));
	CHECK(!SSL_session_reused(c));
	CHECK(pfs_tls_authenticated(c, why, sizeof(why)));
	SSL_free(c);
	CHECK(cert_handshake(cc, sc, "coord.test", NULL));
	/* Not for another name, nor from another CA, nor without one. */
	CHECK(!cert_handshake(cc, sc, "other.test", &c));
	CHECK_EQ(SSL_get_verify_result(c), X509_V_ERR_HOSTNAME_MISMATCH);
	SSL_free(c);
	CHECK(!cert_handshake(cc, sc, "10.0.0.1", NULL));
	CHECK(!cert_handshake(cc, ec, "127.0.0.1", &c));
	CHECK_EQ(SSL_get_verify_result(c), X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT);
	SSL_free(c);
	CHECK(!cert_handshake(cc, bare, "127.0.0.1", NULL));
	/* The PSK's clients are served as before by a server that holds a
	 * certificate: by the PSK. */
	CHECK(cert_handshake(psk, sc, NULL, &c));
	CHECK(SSL_session_reused(c));
	CHECK(pfs_tls_authenticated(c, why, sizeof(why)));
	SSL_free(c);
	/* One file holding both. */
	SSL_CTX *both = pfs_tls_ctx_new(true, key, err, sizeof(err));
	CHECK_EQ(pfs_tls_ctx_use_cert(both, path_of("both.pem"), NULL, info, sizeof(info), err,
				      sizeof(err)), 0);
	CHECK(cert_handshake(cc, both, "coord.test", NULL));

	pfs_tls_ctx_free(both);
	pfs_tls_ctx_free(sc);
	pfs_tls_ctx_free(bare);
	pfs_tls_ctx_free(ec);
	pfs_tls_ctx_free(psk);
	pfs_tls_ctx_free(cc);
	X509_free(ca);
	X509_free(srv);
	X509_free(evil);
	EVP_PKEY_free(cak);
	EVP_PKEY_free(sk);
	EVP_PKEY_free(ek);
	EVP_PKEY_free(ok);
	const char *names[] = { "ca.pem", "srv.pem", "srv.key", "both.pem",
				"open.key", "other.key", "evil.pem" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		unlink(path_of(names[i]));
	rmdir(dir);
}

/* The client's read BIO takes its bytes from a socket (as podfs's
 * stream does): the server sends 3 MiB of plaintext in writes of many
 * sizes (records of 1 byte to 16 KiB), the ciphertext goes through a
 * socketpair in pieces of other sizes, and the client reads it with
 * SSL_read calls of yet others. Every byte arrives once, in order; the
 * BIO counts each byte received once, held more than a record at times
 * (it read ahead), and holds nothing at the end. */
static void test_socket_stream(void)
{
	char err[128];
	uint8_t key[PFS_KEY_LEN];
	SSL_CTX *cc, *sc;
	BIO *cr, *cw, *sr, *sw;
	SSL *c, *s;
	int sv[2];
	enum { TOTAL = 3 << 20 };
	uint8_t *plain = malloc(TOTAL), *got = malloc(TOTAL), *cbuf = malloc(1 << 20);
	_Atomic uint64_t count = 0;
	size_t sent = 0, recvd = 0, cipher_total = 0, cipher_off = 0, cipher_len = 0;
	size_t most_queued = 0;
	uint32_t x = 12345;

	memset(key, 7, sizeof(key));
	cc = pfs_tls_ctx_new(false, key, err, sizeof(err));
	sc = pfs_tls_ctx_new(true, key, err, sizeof(err));
	if (!CHECK(cc && sc && plain && got && cbuf) ||
	    !CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0))
		return;
	for (size_t i = 0; i < TOTAL; i++)
		plain[i] = (uint8_t)(i * 131 + (i >> 12));
	c = pfs_tls_new(cc, &cr, &cw);
	s = pfs_tls_new(sc, &sr, &sw);
	if (!CHECK(c && s) || !CHECK(drive(c, s, cr, cw, sr, sw)))
		goto out;
	pfs_tls_bio_set_fd(cr, sv[0], &count);
	for (int rounds = 0; recvd < TOTAL && rounds < 100000; rounds++) {
		x = x * 1103515245 + 12345;
		/* The server encrypts a piece when its ciphertext is out. */
		if (cipher_off == cipher_len && sent < TOTAL) {
			size_t n = 1 + (x >> 8) % 40000;
			if (n > TOTAL - sent)
				n = TOTAL - sent;
			CHECK_EQ(SSL_write(s, plain + sent, (int)n), (int)n);
			sent += n;
			int k = BIO_read(sw, cbuf, 1 << 20);
			cipher_off = 0;
			cipher_len = k > 0 ? (size_t)k : 0;
			cipher_total += cipher_len;
		}
		/* The wire takes some of it. */
		if (cipher_off < cipher_len) {
			size_t n = 1 + (x >> 4) % 70000;
			if (n > cipher_len - cipher_off)
				n = cipher_len - cipher_off;
			ssize_t w = send(sv[1], cbuf + cipher_off, n, MSG_DONTWAIT);
			if (w > 0)
				cipher_off += (size_t)w;
		}
		/* The client reads what it can. */
		for (;;) {
			size_t n = 1 + (x >> 12) % 300000;
			if (n > TOTAL - recvd)
				n = TOTAL - recvd;
			if (n == 0)
				break;
			int k = SSL_read(c, got + recvd, (int)n);
			if (k <= 0) {
				CHECK_EQ(SSL_get_error(c, k), SSL_ERROR_WANT_READ);
				break;
			}
			recvd += (size_t)k;
			if ((size_t)BIO_pending(cr) > most_queued)
				most_queued = (size_t)BIO_pending(cr);
		}
	}
	CHECK_EQ(recvd, (size_t)TOTAL);
	CHECK_EQ(memcmp(got, plain, TOTAL), 0);
	CHECK_EQ(BIO_pending(cr), 0);
	CHECK_EQ(count, cipher_total);
	/* It did read ahead: more than a whole record waited in the BIO. */
	CHECK(most_queued > SSL3_RT_MAX_PLAIN_LENGTH + SSL3_RT_HEADER_LENGTH);
out:
	close(sv[0]);
	close(sv[1]);
	SSL_free(c);
	SSL_free(s);
	pfs_tls_ctx_free(cc);
	pfs_tls_ctx_free(sc);
	free(plain);
	free(got);
	free(cbuf);
}

int main(void)
{
	test_psk();
	test_sniff();
	test_handshakes();
	test_key_updates();
	test_certificates();
	test_socket_stream();
	return check_done("test_tls");
}
