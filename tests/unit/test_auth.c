/* test_auth.c: unit tests of pod key files and the handshake MACs
 * (auth.h). Key files live in a private mkdtemp directory under /tmp,
 * removed at the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "podfs/auth.h"
#include "podfs/digest.h"

struct tmp {
	char dir[64];
};

static void path_in(const struct tmp *t, const char *name, char *out, size_t cap)
{
	snprintf(out, cap, "%s/%s", t->dir, name);
}

/* Writes exactly n bytes with the given mode (fchmod: umask-proof). */
static int write_file(const char *path, const void *data, size_t n, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if ((n && write(fd, data, n) != (ssize_t)n) || fchmod(fd, mode) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return close(fd) < 0 ? -errno : 0;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* ------------------------------------------------------------------ */
/* Key files                                                          */

static void test_generate_load(const struct tmp *t)
{
	char p[128], p2[128], content[128];
	uint8_t key[PFS_KEY_LEN], key2[PFS_KEY_LEN], want[PFS_KEY_LEN];
	char err[256] = "";
	struct stat st;

	path_in(t, "gen.key", p, sizeof p);
	CHECK_EQ(pfs_key_generate(p), 0);
	if (!CHECK_EQ(stat(p, &st), 0))
		return;
	CHECK(S_ISREG(st.st_mode));
	CHECK_EQ(st.st_mode & 07777, 0600);
	CHECK_EQ(st.st_size, 2 * PFS_KEY_LEN + 1);

	/* Content: 64 lowercase hex digits and a newline. */
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, content, sizeof content) : -1;
	if (fd >= 0)
		close(fd);
	if (CHECK_EQ(n, 2 * PFS_KEY_LEN + 1)) {
		bool hex = true;
		for (int i = 0; i < PFS_KEY_LEN; i++) {
			int hi = hexval(content[2 * i]), lo = hexval(content[2 * i + 1]);
			hex &= hi >= 0 && lo >= 0;
			want[i] = (uint8_t)((hi & 15) << 4 | (lo & 15));
		}
		CHECK(hex);
		CHECK(content[2 * PFS_KEY_LEN] == '\n');
	}

	memset(key, 0, sizeof key);
	CHECK_EQ(pfs_key_load(p, key, err, sizeof err), 0);
	CHECK_MEM(key, want, sizeof key);

	/* Refuses an existing path, and leaves it as it was. */
	CHECK_EQ(pfs_key_generate(p), -EEXIST);
	CHECK_EQ(pfs_key_load(p, key2, err, sizeof err), 0);
	CHECK_MEM(key, key2, sizeof key);

	/* ... including a symlink to a missing file, and a directory. */
	path_in(t, "dangling.key", p2, sizeof p2);
	CHECK_EQ(symlink("/nonexistent/podfs-test/target", p2), 0);
	CHECK_EQ(pfs_key_generate(p2), -EEXIST);
	unlink(p2);
	CHECK_EQ(pfs_key_generate(t->dir), -EEXIST);

	/* A missing directory. */
	path_in(t, "no/such/dir.key", p2, sizeof p2);
	CHECK_EQ(pfs_key_generate(p2), -ENOENT);

	/* Two keys differ. */
	path_in(t, "gen2.key", p2, sizeof p2);
	CHECK_EQ(pfs_key_generate(p2), 0);
	CHECK_EQ(pfs_key_load(p2, key2, err, sizeof err), 0);
	CHECK(memcmp(key, key2, sizeof key) != 0);
	unlink(p);
	unlink(p2);
}

static void test_load_formats(const struct tmp *t)
{
	char p[128], err[256];
	uint8_t raw[PFS_KEY_LEN], key[PFS_KEY_LEN];
	char hex[2 * PFS_KEY_LEN + 2];
	uint64_t st = 42;

	path_in(t, "fmt.key", p, sizeof p);

	/* 32 raw bytes, including NUL and newline bytes. */
	test_fill_random(&st, raw, sizeof raw);
	raw[0] = 0;
	raw[31] = '\n';
	CHECK_EQ(write_file(p, raw, sizeof raw, 0600), 0);
	CHECK_EQ(pfs_key_load(p, key, err, sizeof err), 0);
	CHECK_MEM(key, raw, sizeof key);

	/* 64 hex digits without a newline, and in upper case. */
	for (int i = 0; i < PFS_KEY_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02X", raw[i]);
	CHECK_EQ(write_file(p, hex, 2 * PFS_KEY_LEN, 0600), 0);
	memset(key, 0, sizeof key);
	CHECK_EQ(pfs_key_load(p, key, err, sizeof err), 0);
	CHECK_MEM(key, raw, sizeof key);

	/* A read-only owner-only file is fine (0400). */
	CHECK_EQ(write_file(p, raw, sizeof raw, 0400), 0);
	CHECK_EQ(pfs_key_load(p, key, err, sizeof err), 0);
	unlink(p);
}

static void test_load_rejects(const struct tmp *t)
{
	char p[128];
	uint8_t key[PFS_KEY_LEN];
	char good[2 * PFS_KEY_LEN + 2];
	uint8_t big[200];

	for (int i = 0; i < PFS_KEY_LEN; i++)
		snprintf(good + 2 * i, 3, "%02x", (unsigned)(i * 7 + 1) & 0xff);
	good[2 * PFS_KEY_LEN] = '\n';
	memset(big, 'a', sizeof big);

	path_in(t, "bad.key", p, sizeof p);
	const struct {
		const char *what;
		const void *data;
		size_t len;
		mode_t mode;
		int want;
	} cases[] = {
		{"mode 0644", good, 65, 0644, -EPERM},
		{"mode 0640", good, 65, 0640, -EPERM},
		{"mode 0604", good, 65, 0604, -EPERM},
		{"mode 0602", good, 65, 0602, -EPERM},
		{"mode 0620", good, 65, 0620, -EPERM},
		{"mode 0666 raw", big, 32, 0666, -EPERM},
		{"empty", "", 0, 0600, -EINVAL},
		{"31 bytes", big, 31, 0600, -EINVAL},
		{"33 bytes", big, 33, 0600, -EINVAL},
		{"63 hex", good, 63, 0600, -EINVAL},
		{"65, no newline", big, 65, 0600, -EINVAL},
		{"64 hex + 2 newlines", "", 66, 0600, -EINVAL}, /* filled in below */
		{"64 hex + CRLF", "", 66, 0600, -EINVAL},        /* filled in below */
		{"100 bytes", big, 100, 0600, -EINVAL},
		{"200 bytes", big, 200, 0600, -EINVAL},
		{"non-hex 'g'", "", 65, 0600, -EINVAL},          /* filled in below */
		{"non-hex ' '", "", 64, 0600, -EINVAL},          /* filled in below */
		{"0x prefix", "", 65, 0600, -EINVAL},            /* filled in below */
	};
	char v[5][80];
	memcpy(v[0], good, 64);
	memcpy(v[0] + 64, "\n\n", 2);
	memcpy(v[1], good, 64);
	memcpy(v[1] + 64, "\r\n", 2);
	memcpy(v[2], good, 65);
	v[2][10] = 'g';
	memcpy(v[3], good, 64);
	v[3][63] = ' ';
	memcpy(v[4], good, 65);
	v[4][0] = '0';
	v[4][1] = 'x';
	const void *fill[] = {v[0], v[1], v[2], v[3], v[4]};
	size_t fi = 0;

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char err[256];
		const void *data = cases[i].data;
		if (cases[i].len && !*(const char *)data)
			data = fill[fi++];
		memset(err, 0, sizeof err);
		if (!CHECK_EQ(write_file(p, data, cases[i].len, cases[i].mode), 0))
			continue;
		int rc = pfs_key_load(p, key, err, sizeof err);
		bool ok = CHECK_EQ(rc, cases[i].want);
		ok &= CHECK(err[0] != 0);
		if (!ok)
			fprintf(stderr, "  case '%s': rc %d, err '%s'\n", cases[i].what, rc, err);
		unlink(p);
	}

	/* Missing file, directory, and a truncated error buffer. */
	char err[256] = "";
	path_in(t, "missing.key", p, sizeof p);
	CHECK_EQ(pfs_key_load(p, key, err, sizeof err), -ENOENT);
	CHECK(err[0] != 0 && strstr(err, "missing.key") != NULL);
	err[0] = 0;
	CHECK_EQ(pfs_key_load(t->dir, key, err, sizeof err), -EINVAL);
	CHECK(err[0] != 0);

	char small[8];
	memset(small, 'Z', sizeof small);
	CHECK_EQ(pfs_key_load(p, key, small, 5), -ENOENT);
	CHECK(strlen(small) == 4 && small[5] == 'Z');
}

/* ------------------------------------------------------------------ */
/* MACs                                                               */

static void unhex(const char *s, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = (uint8_t)(hexval(s[2 * i]) << 4 | hexval(s[2 * i + 1]));
}

static void test_hmac_vectors(void)
{
	uint8_t out[PFS_MAC_LEN], want[PFS_MAC_LEN];

	/* RFC 4231 test case 2. */
	static const char d2[] = "what do ya want for nothing?";
	pfs_hmac((const uint8_t *)"Jefe", 4, d2, strlen(d2), out);
	unhex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843", want, 32);
	CHECK_MEM(out, want, 32);

	/* RFC 4231 test case 1. */
	uint8_t k1[20];
	memset(k1, 0x0b, sizeof k1);
	pfs_hmac(k1, sizeof k1, "Hi There", 8, out);
	unhex("b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7", want, 32);
	CHECK_MEM(out, want, 32);

	/* RFC 4231 test case 6 (key longer than the block size). */
	uint8_t k6[131];
	memset(k6, 0xaa, sizeof k6);
	static const char d6[] = "Test Using Larger Than Block-Size Key - Hash Key First";
	pfs_hmac(k6, sizeof k6, d6, strlen(d6), out);
	unhex("60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54", want, 32);
	CHECK_MEM(out, want, 32);
}

/* A prepared key gives pfs_hmac's MACs: the RFC vectors, every length
 * around the block size, and keys shorter and longer than a block. */
static void test_hmac_keyed(void)
{
	uint8_t out[PFS_MAC_LEN], want[PFS_MAC_LEN], data[200], key[131];
	uint64_t st = 11;
	struct pfs_hmac_key *k;

	static const char d2[] = "what do ya want for nothing?";
	k = pfs_hmac_key_new((const uint8_t *)"Jefe", 4);
	CHECK(k != NULL);
	pfs_hmac_keyed(k, d2, strlen(d2), out);
	unhex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843", want, 32);
	CHECK_MEM(out, want, 32);
	pfs_hmac_key_free(k);

	memset(key, 0xaa, sizeof key);
	static const char d6[] = "Test Using Larger Than Block-Size Key - Hash Key First";
	k = pfs_hmac_key_new(key, sizeof key);
	CHECK(k != NULL);
	pfs_hmac_keyed(k, d6, strlen(d6), out);
	unhex("60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54", want, 32);
	CHECK_MEM(out, want, 32);
	pfs_hmac_key_free(k);

	test_fill_random(&st, data, sizeof data);
	test_fill_random(&st, key, sizeof key);
	static const size_t klens[] = { 1, 32, 63, 64, 65, 131 };
	for (size_t ki = 0; ki < sizeof(klens) / sizeof(klens[0]); ki++) {
		k = pfs_hmac_key_new(key, klens[ki]);
		CHECK(k != NULL);
		for (size_t n = 0; n <= sizeof data; n += (n < 130 ? 1 : 7)) {
			pfs_hmac(key, klens[ki], data, n, want);
			pfs_hmac_keyed(k, data, n, out);
			CHECK_MEM(out, want, 32);
		}
		pfs_hmac_key_free(k);
	}
	pfs_hmac_key_free(NULL);
}

static void test_handshake_macs(void)
{
	uint8_t key[PFS_KEY_LEN], key2[PFS_KEY_LEN], cn[PFS_NONCE_LEN], sn[PFS_NONCE_LEN];
	uint8_t m1[PFS_MAC_LEN], m2[PFS_MAC_LEN], c1[PFS_MAC_LEN];
	uint64_t st = 7, id = 0x1122334455667788u;

	test_fill_random(&st, key, sizeof key);
	test_fill_random(&st, cn, sizeof cn);
	test_fill_random(&st, sn, sizeof sn);

	pfs_auth_server_mac(key, cn, sn, id, m1);
	pfs_auth_server_mac(key, cn, sn, id, m2);
	CHECK(pfs_mac_equal(m1, m2, PFS_MAC_LEN));
	pfs_auth_client_mac(key, cn, sn, id, c1);
	pfs_auth_client_mac(key, cn, sn, id, m2);
	CHECK(pfs_mac_equal(c1, m2, PFS_MAC_LEN));
	CHECK(!pfs_mac_equal(m1, c1, PFS_MAC_LEN)); /* labels separate the roles */

	/* The MAC input is pinned: label with its NUL | Nc | Ns | id (LE). */
	uint8_t msg[13 + 2 * PFS_NONCE_LEN + 8];
	memcpy(msg, "podfs server", 13);
	memcpy(msg + 13, cn, PFS_NONCE_LEN);
	memcpy(msg + 13 + PFS_NONCE_LEN, sn, PFS_NONCE_LEN);
	for (int i = 0; i < 8; i++)
		msg[13 + 2 * PFS_NONCE_LEN + i] = (uint8_t)(id >> (8 * i));
	pfs_hmac(key, sizeof key, msg, sizeof msg, m2);
	CHECK_MEM(m1, m2, PFS_MAC_LEN);
	memcpy(msg, "podfs client", 13);
	pfs_hmac(key, sizeof key, msg, sizeof msg, m2);
	CHECK_MEM(c1, m2, PFS_MAC_LEN);

	/* Every input matters: flip one bit of each in turn. */
	for (int role = 0; role < 2; role++) {
		void (*mac)(const uint8_t *, const uint8_t *, const uint8_t *, uint64_t,
			    uint8_t *) = role ? pfs_auth_client_mac : pfs_auth_server_mac;
		const uint8_t *ref = role ? c1 : m1;
		for (size_t bit = 0; bit < 8 * PFS_KEY_LEN; bit += 37) {
			memcpy(key2, key, sizeof key);
			key2[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			mac(key2, cn, sn, id, m2);
			CHECK(!pfs_mac_equal(ref, m2, PFS_MAC_LEN));
		}
		for (size_t i = 0; i < PFS_NONCE_LEN; i++) {
			uint8_t x[PFS_NONCE_LEN];
			memcpy(x, cn, sizeof x);
			x[i] ^= 1;
			mac(key, x, sn, id, m2);
			CHECK(!pfs_mac_equal(ref, m2, PFS_MAC_LEN));
			memcpy(x, sn, sizeof x);
			x[i] ^= 0x80;
			mac(key, cn, x, id, m2);
			CHECK(!pfs_mac_equal(ref, m2, PFS_MAC_LEN));
		}
		/* Swapping the nonces changes it too. */
		mac(key, sn, cn, id, m2);
		CHECK(!pfs_mac_equal(ref, m2, PFS_MAC_LEN));
		for (int b = 0; b < 64; b++) {
			mac(key, cn, sn, id ^ ((uint64_t)1 << b), m2);
			CHECK(!pfs_mac_equal(ref, m2, PFS_MAC_LEN));
		}
	}

	/* Verification as the peers do it: the right key verifies, a wrong
	 * one does not. */
	test_fill_random(&st, key2, sizeof key2);
	pfs_auth_server_mac(key, cn, sn, id, m2);
	CHECK(pfs_mac_equal(m1, m2, PFS_MAC_LEN));
	pfs_auth_server_mac(key2, cn, sn, id, m2);
	CHECK(!pfs_mac_equal(m1, m2, PFS_MAC_LEN));
	pfs_auth_client_mac(key2, cn, sn, id, m2);
	CHECK(!pfs_mac_equal(c1, m2, PFS_MAC_LEN));
}

static void test_mac_equal(void)
{
	uint8_t a[PFS_MAC_LEN], b[PFS_MAC_LEN];
	uint64_t st = 3;
	test_fill_random(&st, a, sizeof a);
	memcpy(b, a, sizeof b);
	CHECK(pfs_mac_equal(a, b, sizeof a));
	CHECK(pfs_mac_equal(a, b, 0));
	for (size_t i = 0; i < sizeof a; i++) {
		b[i] ^= 0x01;
		CHECK(!pfs_mac_equal(a, b, sizeof a));
		CHECK(pfs_mac_equal(a, b, i)); /* a prefix before the difference */
		b[i] ^= 0x01;
	}
}

/* The peer handshake's MACs: their own labels, so none of them equals a
 * coordinator handshake's MAC over the same nonces; each side's differs
 * from the other's, and from those of another key. */
static void test_peer_macs(void)
{
	uint8_t key[PFS_KEY_LEN], key2[PFS_KEY_LEN], cn[PFS_NONCE_LEN], sn[PFS_NONCE_LEN];
	uint8_t ps[PFS_MAC_LEN], pc[PFS_MAC_LEN], s[PFS_MAC_LEN], c[PFS_MAC_LEN], o[PFS_MAC_LEN];

	memset(key, 1, sizeof key);
	memset(key2, 2, sizeof key2);
	memset(cn, 3, sizeof cn);
	memset(sn, 4, sizeof sn);
	pfs_auth_peer_server_mac(key, cn, sn, 42, ps);
	pfs_auth_peer_client_mac(key, cn, sn, 42, pc);
	pfs_auth_server_mac(key, cn, sn, 42, s);
	pfs_auth_client_mac(key, cn, sn, 42, c);
	CHECK(memcmp(ps, pc, PFS_MAC_LEN) != 0);
	CHECK(memcmp(ps, s, PFS_MAC_LEN) != 0 && memcmp(ps, c, PFS_MAC_LEN) != 0);
	CHECK(memcmp(pc, s, PFS_MAC_LEN) != 0 && memcmp(pc, c, PFS_MAC_LEN) != 0);
	pfs_auth_peer_server_mac(key2, cn, sn, 42, o);
	CHECK(memcmp(ps, o, PFS_MAC_LEN) != 0);
	pfs_auth_peer_server_mac(key, cn, sn, 43, o);
	CHECK(memcmp(ps, o, PFS_MAC_LEN) != 0);
	pfs_auth_peer_server_mac(key, cn, sn, 42, o);
	CHECK_MEM(ps, o, PFS_MAC_LEN);
	/* HMAC-SHA256(key, "podfs peer server\0" | Nc | Ns | 42 LE), by hand. */
	uint8_t msg[18 + 2 * PFS_NONCE_LEN + 8];
	memcpy(msg, "podfs peer server", 18);
	memcpy(msg + 18, cn, PFS_NONCE_LEN);
	memcpy(msg + 18 + PFS_NONCE_LEN, sn, PFS_NONCE_LEN);
	memset(msg + 18 + 2 * PFS_NONCE_LEN, 0, 8);
	msg[18 + 2 * PFS_NONCE_LEN] = 42;
	pfs_hmac(key, sizeof key, msg, sizeof msg, o);
	CHECK_MEM(ps, o, PFS_MAC_LEN);
}

/* SHA-256 (digest.h): the FIPS 180-2 vectors, in one piece and in many,
 * the constant-time comparison, the hex for logs. */
static void test_sha256(void)
{
	uint8_t d[PFS_DIGEST_LEN], want[PFS_DIGEST_LEN];
	struct pfs_sha256 *h;
	char hex[2 * PFS_DIGEST_LEN + 1];
	static const char *abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
	static const char *two =
		"248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1";
	static const char *msg2 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";

	CHECK_EQ(pfs_sha256("abc", 3, d), 0);
	unhex(abc, want, sizeof want);
	CHECK_MEM(d, want, PFS_DIGEST_LEN);
	CHECK(pfs_digest_equal(d, want));
	want[31] ^= 1;
	CHECK(!pfs_digest_equal(d, want));
	pfs_digest_hex(d, hex, sizeof hex - 1);
	CHECK_STR(hex, abc);
	pfs_digest_hex(d, hex, 16);
	CHECK_STR(hex, "ba7816bf8f01cfea");
	CHECK_EQ(pfs_sha256_begin(&h), 0);
	for (size_t i = 0; i < strlen(msg2); i += 5)
		CHECK_EQ(pfs_sha256_add(h, msg2 + i, strlen(msg2) - i < 5 ? strlen(msg2) - i : 5), 0);
	CHECK_EQ(pfs_sha256_end(h, d), 0);
	unhex(two, want, sizeof want);
	CHECK_MEM(d, want, PFS_DIGEST_LEN);
	CHECK_EQ(pfs_sha256_begin(&h), 0);
	CHECK_EQ(pfs_sha256_end(h, NULL), 0); /* abandoned */
	CHECK_EQ(pfs_sha256_end(NULL, NULL), 0);
}

static void test_random(void)
{
	uint8_t a[64], b[64], z[64] = {0};
	CHECK_EQ(pfs_random(a, sizeof a), 0);
	CHECK_EQ(pfs_random(b, sizeof b), 0);
	CHECK(memcmp(a, b, sizeof a) != 0);
	CHECK(memcmp(a, z, sizeof a) != 0);
	CHECK_EQ(pfs_random(a, 0), 0);
}

int main(void)
{
	struct tmp t;
	snprintf(t.dir, sizeof t.dir, "/tmp/podfs-test-auth-XXXXXX");
	if (!mkdtemp(t.dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_generate_load(&t);
	test_load_formats(&t);
	test_load_rejects(&t);
	test_hmac_vectors();
	test_hmac_keyed();
	test_handshake_macs();
	test_mac_equal();
	test_peer_macs();
	test_sha256();
	test_random();
	if (rmdir(t.dir) < 0) {
		CHECK(!"temp dir left non-empty");
		fprintf(stderr, "  %s: %s\n", t.dir, strerror(errno));
	}
	return check_done("test_auth");
}
