/* test_codec_limits.c: the codec (codec.h) against table-driven bad
 * input, no sockets: the limits of each compound field type (names,
 * handles, credentials, bytes, paths, xattr names, host names) in the
 * decoders and the encoders, and pfs_name_valid.
 * Payloads are built byte by byte by a writer that obeys no limit.
 */
#include <errno.h>
#include <stdlib.h>

#include "check.h"
#include "podfs/codec.h"
#include "rawbuf.h"

/* ------------------------------------------------------------------ */
/* Table-driven bad inputs                                            */

static void test_bad_names(void)
{
	static const struct str_case cases[] = {
		{"", 0, false},      {"a", 0, true},         {LONG_A(255), true},
		{LONG_A(256), false}, {".", 0, false},        {"..", 0, false},
		{"...", 0, true},    {".a", 0, true},        {"a.", 0, true},
		{"..a", 0, true},    {"a/b", 0, false},      {"/", 0, false},
		{"a/", 0, false},    {"a\0b", 3, false},     {"\0", 1, false},
		{"a\0", 2, false},   {"\xff\xfe", 0, true},   {" ", 0, true},
		{"\n", 0, true},
	};
	static uint8_t buf[1024];
	char s[512];
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct str_case *c = &cases[i];
		size_t n = case_expand(c, s, sizeof s);
		unsigned long fb = check_failures;

		/* As the only name (lookup_req) and as the second name after a
		 * valid first one (rename_req newname). */
		struct raw r = {buf, 0, sizeof buf};
		struct pfs_lookup_req lk;
		raw_creds_fh(&r);
		raw_le(&r, n, 2);
		raw_mem(&r, s, n);
		CHECK_EQ(pfs_dec_lookup_req(buf, r.len, &lk), c->ok ? 0 : -EBADMSG);

		struct pfs_rename_req rn;
		r.len = 0;
		raw_creds_fh(&r);
		raw_le(&r, 1, 2);
		raw_mem(&r, "o", 1);
		raw_le(&r, 1, 1);
		raw_le(&r, 7, 1);
		raw_le(&r, n, 2);
		raw_mem(&r, s, n);
		raw_le(&r, 0, 4);
		CHECK_EQ(pfs_dec_rename_req(buf, r.len, &rn), c->ok ? 0 : -EBADMSG);

		/* The encoder enforces the same rule: -EINVAL, w unchanged. */
		memset(&lk, 0, sizeof lk);
		lk.parent.len = 1;
		lk.name.len = (uint16_t)n;
		memcpy(lk.name.s, s, n);
		struct pfs_wr w;
		pfs_wr_init(&w, buf, sizeof buf);
		w.len = 5;
		CHECK_EQ(pfs_enc_lookup_req(&w, &lk), c->ok ? 0 : -EINVAL);
		if (!c->ok)
			CHECK_EQ(w.len, 5);

		memset(&rn, 0, sizeof rn);
		rn.parent.len = rn.newparent.len = 1;
		rn.name.len = 1;
		rn.name.s[0] = 'o';
		rn.newname.len = (uint16_t)n;
		memcpy(rn.newname.s, s, n);
		pfs_wr_init(&w, buf, sizeof buf);
		CHECK_EQ(pfs_enc_rename_req(&w, &rn), c->ok ? 0 : -EINVAL);
		if (!c->ok)
			CHECK_EQ(w.len, 0);
		if (fb != check_failures)
			fprintf(stderr, "  ^ name case %zu (len %zu)\n", i, n);
	}

	/* A name length that runs past the end of the payload. */
	struct raw r = {buf, 0, sizeof buf};
	struct pfs_lookup_req lk;
	raw_creds_fh(&r);
	raw_le(&r, 10, 2);
	raw_mem(&r, "abc", 3);
	CHECK_EQ(pfs_dec_lookup_req(buf, r.len, &lk), -EBADMSG);
	r.len = 0;
	raw_creds_fh(&r);
	raw_le(&r, 0xffff, 2);
	raw_fill(&r, 'a', 300);
	CHECK_EQ(pfs_dec_lookup_req(buf, r.len, &lk), -EBADMSG);
}

static void test_bad_fh(void)
{
	static const struct {
		unsigned len;
		bool ok;
	} cases[] = {{0, false}, {1, true}, {2, true}, {159, true}, {160, true}, {161, false},
		     {200, false}, {255, false}};
	uint8_t buf[512];
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct raw r = {buf, 0, sizeof buf};
		struct pfs_getattr_req m;
		raw_le(&r, 0, 4);
		raw_le(&r, 0, 4);
		raw_le(&r, 0, 2);
		raw_le(&r, cases[i].len, 1);
		raw_fill(&r, 0x33, cases[i].len);
		if (!CHECK_EQ(pfs_dec_getattr_req(buf, r.len, &m), cases[i].ok ? 0 : -EBADMSG))
			fprintf(stderr, "  fh len %u\n", cases[i].len);
		if (cases[i].ok)
			CHECK(m.fh.len == cases[i].len && m.fh.data[cases[i].len - 1] == 0x33);

		/* Second handle of link_req, after a valid first one. */
		struct pfs_link_req lm;
		r.len = 0;
		raw_creds_fh(&r);
		raw_le(&r, cases[i].len, 1);
		raw_fill(&r, 0x44, cases[i].len);
		raw_le(&r, 1, 2);
		raw_mem(&r, "n", 1);
		CHECK_EQ(pfs_dec_link_req(buf, r.len, &lm), cases[i].ok ? 0 : -EBADMSG);

		/* Encoder (len is a u8, so 161..255 are representable). */
		struct pfs_wr w;
		memset(&m, 0, sizeof m);
		m.fh.len = (uint8_t)cases[i].len;
		pfs_wr_init(&w, buf, sizeof buf);
		CHECK_EQ(pfs_enc_getattr_req(&w, &m), cases[i].ok ? 0 : -EINVAL);
		if (!cases[i].ok)
			CHECK_EQ(w.len, 0);
	}
	/* Handle bytes past the end. */
	struct raw r = {buf, 0, sizeof buf};
	struct pfs_getattr_req m;
	raw_le(&r, 0, 10);
	raw_le(&r, 20, 1);
	raw_fill(&r, 1, 19);
	CHECK_EQ(pfs_dec_getattr_req(buf, r.len, &m), -EBADMSG);
}

static void test_bad_creds(void)
{
	static const struct {
		unsigned ngroups;
		unsigned present;
		bool ok;
	} cases[] = {{0, 0, true},     {1, 1, true},   {64, 64, true}, {65, 65, false},
		     {100, 100, false}, {0xffff, 200, false}, {3, 2, false}};
	static uint8_t buf[2048];
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct raw r = {buf, 0, sizeof buf};
		struct pfs_getattr_req m;
		raw_le(&r, 5, 4);
		raw_le(&r, 6, 4);
		raw_le(&r, cases[i].ngroups, 2);
		for (unsigned j = 0; j < cases[i].present; j++)
			raw_le(&r, j + 100, 4);
		raw_le(&r, 1, 1);
		raw_le(&r, 9, 1);
		if (!CHECK_EQ(pfs_dec_getattr_req(buf, r.len, &m), cases[i].ok ? 0 : -EBADMSG))
			fprintf(stderr, "  ngroups %u\n", cases[i].ngroups);
		if (cases[i].ok && cases[i].ngroups)
			CHECK(m.cr.ngroups == cases[i].ngroups &&
			      m.cr.groups[cases[i].ngroups - 1] == cases[i].ngroups - 1 + 100);
	}
	struct pfs_getattr_req m;
	struct pfs_wr w;
	memset(&m, 0, sizeof m);
	m.fh.len = 1;
	m.cr.ngroups = PFS_GROUPS_MAX + 1;
	pfs_wr_init(&w, buf, sizeof buf);
	CHECK_EQ(pfs_enc_getattr_req(&w, &m), -EINVAL);
	CHECK_EQ(w.len, 0);
	m.cr.ngroups = 0xffff;
	CHECK_EQ(pfs_enc_getattr_req(&w, &m), -EINVAL);
	CHECK_EQ(w.len, 0);
}

static void test_bad_bytes(void)
{
	size_t cap = PFS_MAX_IO + 64;
	uint8_t *buf = malloc(cap);
	static const struct {
		uint32_t len;
		uint32_t present;
		bool ok;
	} cases[] = {{0, 0, true},
		     {1, 1, true},
		     {PFS_MAX_IO, PFS_MAX_IO, true},
		     {PFS_MAX_IO + 1, PFS_MAX_IO + 1, false},
		     {UINT32_MAX, PFS_MAX_IO + 8, false},
		     {10, 9, false},
		     {10, 11, false}};
	if (!CHECK(buf != NULL))
		return;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct raw r = {buf, 0, cap};
		struct pfs_read_rep m;
		raw_le(&r, cases[i].len, 4);
		raw_fill(&r, 0x77, cases[i].present);
		if (!CHECK_EQ(pfs_dec_read_rep(buf, r.len, &m), cases[i].ok ? 0 : -EBADMSG))
			fprintf(stderr, "  bytes len %" PRIu32 "\n", cases[i].len);
		if (cases[i].ok)
			CHECK(m.data.len == cases[i].len && (m.data.len == 0 || m.data.p == buf + 4));
	}

	/* Bytes in the middle of a message (setxattr value, then a u32). */
	struct raw r = {buf, 0, cap};
	struct pfs_setxattr_req sx;
	raw_creds_fh(&r);
	raw_le(&r, 6, 2);
	raw_mem(&r, "user.a", 6);
	raw_le(&r, PFS_MAX_IO + 1, 4);
	raw_fill(&r, 0, PFS_MAX_IO + 1);
	raw_le(&r, 0, 4);
	CHECK_EQ(pfs_dec_setxattr_req(buf, r.len, &sx), -EBADMSG);

	/* Encoder: PFS_MAX_IO fits, one more is -EINVAL. */
	struct pfs_read_rep m = {.data = {.p = buf, .len = PFS_MAX_IO}};
	uint8_t *out = malloc(cap);
	struct pfs_wr w;
	if (CHECK(out != NULL)) {
		pfs_wr_init(&w, out, cap);
		CHECK_EQ(pfs_enc_read_rep(&w, &m), 0);
		CHECK_EQ(w.len, 4 + PFS_MAX_IO);
		pfs_wr_init(&w, out, cap);
		m.data.len = PFS_MAX_IO + 1;
		CHECK_EQ(pfs_enc_read_rep(&w, &m), -EINVAL);
		CHECK_EQ(w.len, 0);
		free(out);
	}
	free(buf);
}

static void test_bad_paths(void)
{
	static const struct str_case cases[] = {
		{"", 0, false},         {"a", 0, true},          {"/", 0, true},
		{".", 0, true},         {"..", 0, true},         {"../x/y", 0, true},
		{LONG_A(4096), true},    {LONG_A(4097), false},    {"a\0b", 3, false},
		{"\0", 1, false},       {"ab\0", 3, false},
	};
	static uint8_t buf[8192];
	static char s[8192];
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct str_case *c = &cases[i];
		size_t n = case_expand(c, s, sizeof s);
		struct raw r = {buf, 0, sizeof buf};
		static struct pfs_readlink_rep m;
		static struct pfs_symlink_req sm;
		struct pfs_wr w;

		raw_le(&r, n, 2);
		raw_mem(&r, s, n);
		if (!CHECK_EQ(pfs_dec_readlink_rep(buf, r.len, &m), c->ok ? 0 : -EBADMSG))
			fprintf(stderr, "  path case %zu (len %zu)\n", i, n);
		if (c->ok)
			CHECK(m.target.len == n && m.target.s[n] == 0);

		r.len = 0;
		raw_creds_fh(&r);
		raw_le(&r, 1, 2);
		raw_mem(&r, "l", 1);
		raw_le(&r, n, 2);
		raw_mem(&r, s, n);
		CHECK_EQ(pfs_dec_symlink_req(buf, r.len, &sm), c->ok ? 0 : -EBADMSG);

		memset(&m, 0, sizeof m);
		m.target.len = (uint16_t)n;
		memcpy(m.target.s, s, n < sizeof m.target.s ? n : sizeof m.target.s);
		pfs_wr_init(&w, buf, sizeof buf);
		CHECK_EQ(pfs_enc_readlink_rep(&w, &m), c->ok ? 0 : -EINVAL);
		if (!c->ok)
			CHECK_EQ(w.len, 0);
	}
	/* A path length past the end. */
	struct pfs_readlink_rep m;
	uint8_t b[] = {5, 0, 'a', 'b'};
	CHECK_EQ(pfs_dec_readlink_rep(b, sizeof b, &m), -EBADMSG);
}

static void test_bad_xnames(void)
{
	static const struct str_case cases[] = {
		{"", 0, false},          {"user.x", 0, true},       {"a/b", 0, true},
		{LONG_A(255), true},      {LONG_A(256), false},       {"user.a\0b", 8, false},
		{"\0", 1, false},
	};
	uint8_t buf[1024];
	char s[512];
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct str_case *c = &cases[i];
		size_t n = case_expand(c, s, sizeof s);
		struct raw r = {buf, 0, sizeof buf};
		struct pfs_removexattr_req m;
		struct pfs_getxattr_req gm;
		struct pfs_wr w;

		raw_creds_fh(&r);
		raw_le(&r, n, 2);
		raw_mem(&r, s, n);
		if (!CHECK_EQ(pfs_dec_removexattr_req(buf, r.len, &m), c->ok ? 0 : -EBADMSG))
			fprintf(stderr, "  xname case %zu (len %zu)\n", i, n);
		raw_le(&r, 4096, 4);
		CHECK_EQ(pfs_dec_getxattr_req(buf, r.len, &gm), c->ok ? 0 : -EBADMSG);

		memset(&m, 0, sizeof m);
		m.fh.len = 1;
		m.name.len = (uint16_t)n;
		memcpy(m.name.s, s, n);
		pfs_wr_init(&w, buf, sizeof buf);
		CHECK_EQ(pfs_enc_removexattr_req(&w, &m), c->ok ? 0 : -EINVAL);
		if (!c->ok)
			CHECK_EQ(w.len, 0);
	}
}

static void test_bad_hosts(void)
{
	static const struct str_case cases[] = {
		{"", 0, true},          {"node-1", 0, true},      {LONG_A(64), true},
		{LONG_A(65), false},     {LONG_A(1000), false},     {"a\0b", 3, false},
	};
	uint8_t buf[2048];
	char s[1024];
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct str_case *c = &cases[i];
		size_t n = case_expand(c, s, sizeof s);
		struct raw r = {buf, 0, sizeof buf};
		struct pfs_hello_req m;
		struct pfs_wr w;

		raw_le(&r, PFS_MAGIC, 4);
		raw_le(&r, 1, 2);
		raw_le(&r, 1, 2);
		raw_le(&r, 3, 8);
		raw_le(&r, 42, 8);
		raw_fill(&r, 0x11, PFS_NONCE_LEN);
		raw_le(&r, n, 2);
		raw_mem(&r, s, n);
		if (!CHECK_EQ(pfs_dec_hello_req(buf, r.len, &m), c->ok ? 0 : -EBADMSG))
			fprintf(stderr, "  host case %zu (len %zu)\n", i, n);

		memset(&m, 0, sizeof m);
		m.hostname.len = (uint16_t)n;
		memcpy(m.hostname.s, s, n < sizeof m.hostname.s ? n : sizeof m.hostname.s);
		pfs_wr_init(&w, buf, sizeof buf);
		int rc = pfs_enc_hello_req(&w, &m);
		if (c->ok || n > PFS_HOSTNAME_MAX) {
			CHECK_EQ(rc, c->ok ? 0 : -EINVAL);
		} else {
			/* A host name with a NUL: the decoder rejects it, so the
			 * encoder should too rather than emit a payload that the
			 * peer will refuse. */
			CHECK_EQ(rc, -EINVAL);
		}
		if (rc < 0)
			CHECK_EQ(w.len, 0);
	}
}

/* Encoder -EINVAL in a later field must rewind the earlier ones. */
static void test_name_valid(void)
{
	static char big[PFS_NAME_MAX + 2];
	static const struct {
		const char *s;
		size_t len;
		bool ok;
	} cases[] = {
		{"a", 1, true},    {"ab", 1, true},    {"", 0, false},     {"a", 0, false},
		{".", 1, false},   {"..", 2, false},   {"..x", 2, false},  {"...", 3, true},
		{".x", 2, true},   {"x.", 2, true},    {"a/b", 3, false},  {"/", 1, false},
		{"ab/", 2, true},  {"ab/", 3, false},  {"a\0b", 3, false}, {".\0", 2, false},
		{"\0", 1, false},  {" ", 1, true},     {"\xff", 1, true},  {"-", 1, true},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		if (!CHECK(pfs_name_valid(cases[i].s, cases[i].len) == cases[i].ok))
			fprintf(stderr, "  name case %zu\n", i);
	memset(big, 'q', sizeof big - 1);
	CHECK(pfs_name_valid(big, PFS_NAME_MAX));
	CHECK(!pfs_name_valid(big, PFS_NAME_MAX + 1));
	CHECK(!pfs_name_valid(big, 65536));
}

int main(void)
{
	test_bad_names();
	test_bad_fh();
	test_bad_creds();
	test_bad_bytes();
	test_bad_paths();
	test_bad_xnames();
	test_bad_hosts();
	test_name_valid();
	return check_done("test_codec_limits");
}
