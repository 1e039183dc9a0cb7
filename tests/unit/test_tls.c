/* test_tls.c: unit tests of the TLS contexts keyed by the pod key
 * (tls.h): the PSK derivation against an independent HKDF, telling TLS
 * from a frame by the first bytes, and whole handshakes between a client
 * and a server context in memory (no socket): same key, another key.
 */
#include <openssl/ssl.h>
#include <string.h>

#include "check.h"
#include "podfs/frame.h"
#include "podfs/tls.h"

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
	SSL_set_connect_state(c);
	SSL_set_accept_state(s);
	for (int round = 0; round < 10; round++) {
		int rc = SSL_do_handshake(c);
		int rs = SSL_do_handshake(s);
		size_t moved = pump(cw, sr) + pump(sw, cr);
		if (rc == 1 && rs == 1) {
			done = true;
			break;
		}
		if (!moved && SSL_get_error(c, rc) != SSL_ERROR_WANT_READ)
			break;
	}
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

int main(void)
{
	test_psk();
	test_sniff();
	test_handshakes();
	return check_done("test_tls");
}
