/* test_codec.c: unit tests of the payload codec (codec.h), no sockets.
 *
 * The generic part is generated from PFS_MESSAGES, so a message added to
 * codec.h is covered without touching this file: every message is filled
 * with deterministic non-trivial values (minimum lengths, maximum lengths
 * and seeded random ones), encoded, decoded, compared field by field and
 * re-encoded byte for byte; its decoder must reject every truncation and a
 * trailing byte, and its encoder must report -ENOBUFS for every too-small
 * buffer without moving w->len. Then the exact bytes of a message on the
 * wire, encoders that rewind on failure, the input cursor and the READDIR
 * entries. The limits
 * of each field type are in test_codec_limits.c, the opcode table in
 * test_opcodes.c.
 */
#include <errno.h>
#include <stdlib.h>

#include "check.h"
#include "podfs/codec.h"
#include "rawbuf.h"

/* ------------------------------------------------------------------ */
/* Value generation                                                   */

enum gen_mode { GEN_MIN, GEN_MAX, GEN_RANDOM };

struct gen {
	uint64_t state;
	enum gen_mode mode;
};

/* Backing store for `bytes` views: fill_BYTES points into it. */
#define POOL_SIZE 8192
static uint8_t pool[POOL_SIZE];

static uint64_t rnd(struct gen *g)
{
	return test_rand(&g->state);
}

/* A length in lo..hi: lo or hi in the min/max modes, else random. */
static size_t pick_len(struct gen *g, size_t lo, size_t hi)
{
	switch (g->mode) {
	case GEN_MIN:
		return lo;
	case GEN_MAX:
		return hi;
	case GEN_RANDOM:
		break;
	}
	return lo + (size_t)(rnd(g) % (hi - lo + 1));
}

/* A byte other than NUL (and other than '/' if no_slash). */
static char pick_char(struct gen *g, bool no_slash)
{
	for (;;) {
		uint8_t c = (uint8_t)rnd(g);
		if (c != 0 && !(no_slash && c == '/'))
			return (char)c;
	}
}

/* U8 has no message field today; kept so that any field type works. */
__attribute__((unused)) static void fill_U8(struct gen *g, uint8_t *v) { *v = (uint8_t)rnd(g); }
static void fill_U16(struct gen *g, uint16_t *v) { *v = (uint16_t)rnd(g); }
static void fill_U32(struct gen *g, uint32_t *v) { *v = (uint32_t)rnd(g); }
static void fill_U64(struct gen *g, uint64_t *v) { *v = rnd(g); }
static void fill_I64(struct gen *g, int64_t *v) { *v = (int64_t)rnd(g); }

static void fill_FH(struct gen *g, struct pfs_fh *v)
{
	v->len = (uint8_t)pick_len(g, 1, PFS_FH_MAX);
	test_fill_random(&g->state, v->data, v->len);
}

static void fill_NAME(struct gen *g, struct pfs_name *v)
{
	v->len = (uint16_t)pick_len(g, 1, PFS_NAME_MAX);
	for (size_t i = 0; i < v->len; i++)
		v->s[i] = pick_char(g, true);
	v->s[v->len] = 0;
	if (!pfs_name_valid(v->s, v->len)) /* "." or ".." */
		v->s[0] = 'n';
}

static void fill_PATH(struct gen *g, struct pfs_path *v)
{
	v->len = (uint16_t)pick_len(g, 1, PFS_PATH_MAX);
	for (size_t i = 0; i < v->len; i++)
		v->s[i] = pick_char(g, false);
	v->s[v->len] = 0;
}

static void fill_XNAME(struct gen *g, struct pfs_xname *v)
{
	v->len = (uint16_t)pick_len(g, 1, PFS_XATTR_NAME_MAX);
	for (size_t i = 0; i < v->len; i++)
		v->s[i] = pick_char(g, false);
	v->s[v->len] = 0;
}

static void fill_HOST(struct gen *g, struct pfs_host *v)
{
	v->len = (uint16_t)pick_len(g, 0, PFS_HOSTNAME_MAX);
	for (size_t i = 0; i < v->len; i++)
		v->s[i] = pick_char(g, false);
	v->s[v->len] = 0;
}

static void fill_BYTES(struct gen *g, struct pfs_bytes *v)
{
	size_t len = pick_len(g, 0, POOL_SIZE / 2);
	size_t off = (size_t)(rnd(g) % (POOL_SIZE - len + 1));
	v->p = pool + off;
	v->len = (uint32_t)len;
}

static void fill_CREDS(struct gen *g, struct pfs_creds *v)
{
	v->uid = (uint32_t)rnd(g);
	v->gid = (uint32_t)rnd(g);
	v->ngroups = (uint16_t)pick_len(g, 0, PFS_GROUPS_MAX);
	for (unsigned i = 0; i < v->ngroups; i++)
		v->groups[i] = (uint32_t)rnd(g);
}

static void fill_NONCE(struct gen *g, struct pfs_nonce *v)
{
	test_fill_random(&g->state, v->b, sizeof v->b);
}

static void fill_MAC(struct gen *g, struct pfs_mac *v)
{
	test_fill_random(&g->state, v->b, sizeof v->b);
}

static void fill_DIGEST(struct gen *g, struct pfs_digest *v)
{
	test_fill_random(&g->state, v->b, sizeof v->b);
}

static void fill_ATTR(struct gen *g, struct pfs_attr *a)
{
	a->ino = rnd(g);
	a->size = rnd(g);
	a->blocks = rnd(g);
	a->atime_s = (int64_t)rnd(g);
	a->mtime_s = (int64_t)rnd(g);
	a->ctime_s = (int64_t)rnd(g);
	a->atime_ns = (uint32_t)(rnd(g) % 1000000000u);
	a->mtime_ns = (uint32_t)(rnd(g) % 1000000000u);
	a->ctime_ns = (uint32_t)(rnd(g) % 1000000000u);
	a->mode = (uint32_t)rnd(g);
	a->nlink = (uint32_t)rnd(g);
	a->uid = (uint32_t)rnd(g);
	a->gid = (uint32_t)rnd(g);
	a->rdev = (uint32_t)rnd(g);
	a->blksize = (uint32_t)rnd(g);
}

static void fill_ENTRY(struct gen *g, struct pfs_entry *e)
{
	fill_FH(g, &e->fh);
	fill_ATTR(g, &e->attr);
}

/* ------------------------------------------------------------------ */
/* Field comparison                                                   */

__attribute__((unused)) static bool eq_U8(const uint8_t *a, const uint8_t *b) { return *a == *b; }
static bool eq_U16(const uint16_t *a, const uint16_t *b) { return *a == *b; }
static bool eq_U32(const uint32_t *a, const uint32_t *b) { return *a == *b; }
static bool eq_U64(const uint64_t *a, const uint64_t *b) { return *a == *b; }
static bool eq_I64(const int64_t *a, const int64_t *b) { return *a == *b; }

static bool eq_FH(const struct pfs_fh *a, const struct pfs_fh *b)
{
	return a->len == b->len && memcmp(a->data, b->data, a->len) == 0;
}

/* Strings: same bytes, and the decoded copy is NUL-terminated. */
#define EQ_STR(T, type)                                                         \
	static bool eq_##T(const type *a, const type *b)                        \
	{                                                                       \
		return a->len == b->len && memcmp(a->s, b->s, a->len) == 0 &&   \
		       b->s[b->len] == 0;                                       \
	}
EQ_STR(NAME, struct pfs_name)
EQ_STR(PATH, struct pfs_path)
EQ_STR(XNAME, struct pfs_xname)
EQ_STR(HOST, struct pfs_host)
#undef EQ_STR

static bool eq_BYTES(const struct pfs_bytes *a, const struct pfs_bytes *b)
{
	return a->len == b->len && (a->len == 0 || memcmp(a->p, b->p, a->len) == 0);
}

static bool eq_CREDS(const struct pfs_creds *a, const struct pfs_creds *b)
{
	return a->uid == b->uid && a->gid == b->gid && a->ngroups == b->ngroups &&
	       memcmp(a->groups, b->groups, a->ngroups * sizeof a->groups[0]) == 0;
}

static bool eq_NONCE(const struct pfs_nonce *a, const struct pfs_nonce *b)
{
	return memcmp(a->b, b->b, sizeof a->b) == 0;
}

static bool eq_MAC(const struct pfs_mac *a, const struct pfs_mac *b)
{
	return memcmp(a->b, b->b, sizeof a->b) == 0;
}

static bool eq_DIGEST(const struct pfs_digest *a, const struct pfs_digest *b)
{
	return memcmp(a->b, b->b, sizeof a->b) == 0;
}

static bool eq_ATTR(const struct pfs_attr *a, const struct pfs_attr *b)
{
	return a->ino == b->ino && a->size == b->size && a->blocks == b->blocks &&
	       a->atime_s == b->atime_s && a->mtime_s == b->mtime_s && a->ctime_s == b->ctime_s &&
	       a->atime_ns == b->atime_ns && a->mtime_ns == b->mtime_ns &&
	       a->ctime_ns == b->ctime_ns && a->mode == b->mode && a->nlink == b->nlink &&
	       a->uid == b->uid && a->gid == b->gid && a->rdev == b->rdev &&
	       a->blksize == b->blksize;
}

static bool eq_ENTRY(const struct pfs_entry *a, const struct pfs_entry *b)
{
	return eq_FH(&a->fh, &b->fh) && eq_ATTR(&a->attr, &b->attr);
}

/* `bytes` views must point into the decoded buffer; other fields own
 * their storage. */
struct span {
	const uint8_t *p;
	size_t len;
};
static bool view_ok(const struct pfs_bytes *v, struct span in)
{
	if (v->len == 0)
		return true;
	return v->p >= in.p && v->p <= in.p + in.len && v->len <= (size_t)(in.p + in.len - v->p);
}
#define VIEW_CHECK_U8(f, in) true
#define VIEW_CHECK_U16(f, in) true
#define VIEW_CHECK_U32(f, in) true
#define VIEW_CHECK_U64(f, in) true
#define VIEW_CHECK_I64(f, in) true
#define VIEW_CHECK_FH(f, in) true
#define VIEW_CHECK_NAME(f, in) true
#define VIEW_CHECK_PATH(f, in) true
#define VIEW_CHECK_XNAME(f, in) true
#define VIEW_CHECK_HOST(f, in) true
#define VIEW_CHECK_BYTES(f, in) view_ok(&(f), in)
#define VIEW_CHECK_CREDS(f, in) true
#define VIEW_CHECK_NONCE(f, in) true
#define VIEW_CHECK_MAC(f, in) true
#define VIEW_CHECK_DIGEST(f, in) true
#define VIEW_CHECK_ATTR(f, in) true
#define VIEW_CHECK_ENTRY(f, in) true

/* ------------------------------------------------------------------ */
/* Per-message glue, generated from PFS_MESSAGES                      */

#define FILL_FIELD(T, f) fill_##T(g, &m->f);
#define EQ_FIELD(T, f)                                                          \
	if (!eq_##T(&a->f, &b->f)) {                                            \
		fprintf(stderr, "  field '%s' differs after round trip\n", #f); \
		ok = false;                                                     \
	}
#define VIEW_FIELD(T, f)                                                        \
	if (!VIEW_CHECK_##T(m->f, in)) {                                        \
		fprintf(stderr, "  field '%s' is not a view into the input\n", #f); \
		ok = false;                                                     \
	}

#define MSG_GLUE(name)                                                          \
	static void fill_msg_##name(struct gen *g, void *vm)                    \
	{                                                                       \
		struct pfs_##name *m = vm;                                      \
		memset(m, 0, sizeof *m);                                        \
		PFS_MSG_##name(FILL_FIELD)                                      \
	}                                                                       \
	static bool eq_msg_##name(const void *va, const void *vb)               \
	{                                                                       \
		const struct pfs_##name *a = va, *b = vb;                       \
		bool ok = true;                                                 \
		PFS_MSG_##name(EQ_FIELD) return ok;                             \
	}                                                                       \
	static bool views_msg_##name(const void *vm, struct span in)            \
	{                                                                       \
		const struct pfs_##name *m = vm;                                \
		bool ok = true;                                                 \
		(void)m;                                                        \
		(void)in;                                                       \
		PFS_MSG_##name(VIEW_FIELD) return ok;                           \
	}                                                                       \
	static int enc_msg_##name(struct pfs_wr *w, const void *m)              \
	{                                                                       \
		return pfs_enc_##name(w, m);                                    \
	}                                                                       \
	static int dec_msg_##name(const void *buf, size_t len, void *m)         \
	{                                                                       \
		return pfs_dec_##name(buf, len, m);                             \
	}
PFS_MESSAGES(MSG_GLUE)
#undef MSG_GLUE

struct msg_desc {
	const char *name;
	void (*fill)(struct gen *g, void *m);
	bool (*eq)(const void *a, const void *b);
	bool (*views)(const void *m, struct span in);
	int (*enc)(struct pfs_wr *w, const void *m);
	int (*dec)(const void *buf, size_t len, void *m);
};

#define MSG_DESC(name) \
	{#name, fill_msg_##name, eq_msg_##name, views_msg_##name, enc_msg_##name, dec_msg_##name},
static const struct msg_desc messages[] = {PFS_MESSAGES(MSG_DESC)};
#undef MSG_DESC

union any_msg {
#define MSG_MEMBER(name) struct pfs_##name name;
	PFS_MESSAGES(MSG_MEMBER)
#undef MSG_MEMBER
};

/* Largest encoding the generator can produce (a symlink_req at maximum
 * lengths is about 4.8 KiB; bytes fields are at most POOL_SIZE / 2). */
#define ENC_MAX 16384

/* ------------------------------------------------------------------ */
/* Generic tests                                                      */

/* Decodes enc[0..k) from the end of a heap block of exactly n bytes, so
 * that AddressSanitizer sees any read past the k-th byte. */
static int dec_tail(const struct msg_desc *d, uint8_t *heap, size_t n, const uint8_t *enc,
		    size_t k, void *m)
{
	memcpy(heap + (n - k), enc, k);
	return d->dec(heap + (n - k), k, m);
}

static void test_message(const struct msg_desc *d, enum gen_mode mode, uint64_t seed)
{
	static uint8_t enc[ENC_MAX], enc2[ENC_MAX], wbuf[ENC_MAX + 64];
	static union any_msg in, out;
	struct gen g = {.state = seed, .mode = mode};
	struct pfs_wr w;
	size_t n;
	uint8_t *heap;
	unsigned long fails_before = check_failures;

	d->fill(&g, &in);
	pfs_wr_init(&w, enc, sizeof enc);
	if (!CHECK_EQ(d->enc(&w, &in), 0))
		goto out;
	n = w.len;
	CHECK(n > 0);

	/* Round trip: decode from an exact-size heap copy, compare fields,
	 * re-encode and compare bytes. */
	heap = malloc(n);
	if (!CHECK(heap != NULL))
		goto out;
	memset(&out, 0xa5, sizeof out);
	if (CHECK_EQ(dec_tail(d, heap, n, enc, n, &out), 0)) {
		CHECK(d->eq(&in, &out));
		CHECK(d->views(&out, (struct span){heap, n}));
		pfs_wr_init(&w, enc2, sizeof enc2);
		CHECK_EQ(d->enc(&w, &out), 0);
		CHECK_EQ(w.len, n);
		CHECK_MEM(enc, enc2, n);
	}

	/* Every truncation is rejected. */
	for (size_t k = 0; k < n; k++)
		if (!CHECK_EQ(dec_tail(d, heap, n, enc, k, &out), -EBADMSG))
			fprintf(stderr, "  %s truncated to %zu of %zu bytes\n", d->name, k, n);

	free(heap);

	/* One trailing byte is rejected, whatever its value. */
	memcpy(enc2, enc, n);
	enc2[n] = 0;
	CHECK_EQ(d->dec(enc2, n + 1, &out), -EBADMSG);
	enc2[n] = 0xff;
	CHECK_EQ(d->dec(enc2, n + 1, &out), -EBADMSG);

	/* Too-small buffers: -ENOBUFS, w->len unchanged, nothing written
	 * past the capacity. Start from a non-empty cursor so that a rewind
	 * to 0 instead of to the old length would show. */
	for (size_t k = 0; k < n; k++) {
		static const size_t pre = 7;
		memset(wbuf, 0x5a, sizeof wbuf);
		pfs_wr_init(&w, wbuf, pre + k);
		w.len = pre;
		bool rc_ok = CHECK_EQ(d->enc(&w, &in), -ENOBUFS);
		bool len_ok = CHECK_EQ(w.len, pre);
		if (!rc_ok || !len_ok)
			fprintf(stderr, "  %s encoded into %zu of %zu bytes\n", d->name, k, n);
		CHECK(wbuf[pre + k] == 0x5a);
		for (size_t i = 0; i < pre; i++)
			CHECK(wbuf[i] == 0x5a);
	}
	/* An exact fit works and appends after the existing bytes. */
	pfs_wr_init(&w, wbuf, 3 + n);
	w.len = 3;
	CHECK_EQ(d->enc(&w, &in), 0);
	CHECK_EQ(w.len, 3 + n);
	CHECK_MEM(wbuf + 3, enc, n);
out:
	if (check_failures != fails_before)
		fprintf(stderr, "  ^ in message %s, mode %d, seed %" PRIu64 "\n", d->name,
			(int)mode, seed);
}

static void test_all_messages(void)
{
	for (size_t i = 0; i < sizeof messages / sizeof messages[0]; i++) {
		test_message(&messages[i], GEN_MIN, 1);
		test_message(&messages[i], GEN_MAX, 2);
		for (uint64_t seed = 100; seed < 108; seed++)
			test_message(&messages[i], GEN_RANDOM, seed * 7919 + i);
	}
}

/* ------------------------------------------------------------------ */
/* Wire layout                                                        */

static void test_golden_bytes(void)
{
	struct pfs_lookup_req m = {
		.cr = {.uid = 1, .gid = 0x01020304, .ngroups = 1, .groups = {3}},
		.parent = {.len = 2, .data = {0xaa, 0xbb}},
		.name = {.len = 1, .s = "x"},
	};
	static const uint8_t want[] = {
		0x01, 0x00, 0x00, 0x00, 0x04, 0x03, 0x02, 0x01, /* uid, gid */
		0x01, 0x00, 0x03, 0x00, 0x00, 0x00,             /* ngroups, groups[0] */
		0x02, 0xaa, 0xbb,                               /* fh */
		0x01, 0x00, 'x',                                /* name */
	};
	uint8_t buf[64];
	struct pfs_wr w;
	pfs_wr_init(&w, buf, sizeof buf);
	CHECK_EQ(pfs_enc_lookup_req(&w, &m), 0);
	CHECK_EQ(w.len, sizeof want);
	CHECK_MEM(buf, want, sizeof want);

	struct pfs_ping_req p = {.stamp = 0x0102030405060708u};
	static const uint8_t pwant[] = {8, 7, 6, 5, 4, 3, 2, 1};
	pfs_wr_init(&w, buf, sizeof buf);
	CHECK_EQ(pfs_enc_ping_req(&w, &p), 0);
	CHECK_EQ(w.len, 8);
	CHECK_MEM(buf, pwant, 8);

	struct pfs_attr_rep a = {.attr = {.ino = 1}};
	uint8_t abuf[256];
	pfs_wr_init(&w, abuf, sizeof abuf);
	CHECK_EQ(pfs_enc_attr_rep(&w, &a), 0);
	CHECK_EQ(w.len, PFS_ATTR_WIRE_SIZE);

	/* Signed fields keep their sign. */
	struct pfs_inval_inode_push ip = {.fh = {.len = 1}, .offset = -1, .length = INT64_MIN};
	struct pfs_inval_inode_push ip2;
	pfs_wr_init(&w, buf, sizeof buf);
	CHECK_EQ(pfs_enc_inval_inode_push(&w, &ip), 0);
	CHECK_EQ(pfs_dec_inval_inode_push(buf, w.len, &ip2), 0);
	CHECK(ip2.offset == -1 && ip2.length == INT64_MIN);
}

static void test_encoder_rewind(void)
{
	static struct pfs_create_req m;
	uint8_t buf[2048];
	struct pfs_wr w;
	struct gen g = {.state = 77, .mode = GEN_RANDOM};

	fill_msg_create_req(&g, &m);
	pfs_wr_init(&w, buf, sizeof buf);
	CHECK_EQ(pfs_enc_create_req(&w, &m), 0);
	size_t n = w.len;

	m.name.len = 0; /* third field */
	w.len = 11;
	CHECK_EQ(pfs_enc_create_req(&w, &m), -EINVAL);
	CHECK_EQ(w.len, 11);

	static struct pfs_auth_rep ar;
	fill_msg_auth_rep(&g, &ar);
	ar.root.fh.len = 0;
	pfs_wr_init(&w, buf, sizeof buf);
	CHECK_EQ(pfs_enc_auth_rep(&w, &ar), -EINVAL);
	CHECK_EQ(w.len, 0);

	/* -EINVAL takes precedence over -ENOBUFS only where the field is
	 * checked first; either way nothing is appended. */
	pfs_wr_init(&w, buf, n / 2);
	CHECK(pfs_enc_create_req(&w, &m) < 0);
	CHECK_EQ(w.len, 0);
}

/* The read cursor: a failed read sticks. */
static void test_reader(void)
{
	uint8_t b[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
	struct pfs_rd r;
	uint32_t v32;
	uint64_t v64;
	uint8_t v8;

	pfs_rd_init(&r, b, 5);
	CHECK(pfs_get_U32(&r, &v32));
	CHECK_EQ(v32, 0x04030201);
	CHECK(!pfs_get_U64(&r, &v64));
	CHECK(r.bad);
	CHECK(!pfs_get_U8(&r, &v8)); /* one byte is left, but the cursor is bad */

	pfs_rd_init(&r, b, 0);
	CHECK(!pfs_get_U8(&r, &v8));
	CHECK(r.bad);
}

/* The change of attributes a CREATES item carries: its size, a round
 * trip, no partial write into a buffer too small, a short input. */
static void test_deleg_attrs(void)
{
	struct pfs_setattr_req m = { .valid = 0x31, .mode = 0640, .uid = 7, .gid = 8,
				     .atime_s = -5, .atime_ns = 6, .mtime_s = 1234567890,
				     .mtime_ns = 999999999 };
	struct pfs_setattr_req got;
	uint8_t b[PFS_DELEG_ATTRS_SIZE];
	struct pfs_wr w;
	struct pfs_rd r;

	pfs_wr_init(&w, b, sizeof b - 1);
	CHECK_EQ(pfs_put_deleg_attrs(&w, &m), -ENOBUFS);
	CHECK_EQ(w.len, 0);
	pfs_wr_init(&w, b, sizeof b);
	CHECK_EQ(pfs_put_deleg_attrs(&w, &m), 0);
	CHECK_EQ(w.len, PFS_DELEG_ATTRS_SIZE);
	memset(&got, 0, sizeof got);
	pfs_rd_init(&r, b, w.len);
	CHECK(pfs_get_deleg_attrs(&r, &got));
	CHECK_EQ(r.left, 0);
	CHECK(got.valid == m.valid && got.mode == m.mode && got.uid == m.uid && got.gid == m.gid);
	CHECK(got.atime_s == m.atime_s && got.atime_ns == m.atime_ns);
	CHECK(got.mtime_s == m.mtime_s && got.mtime_ns == m.mtime_ns);
	pfs_rd_init(&r, b, w.len - 1);
	CHECK(!pfs_get_deleg_attrs(&r, &got));
	CHECK(r.bad);
}

/* ------------------------------------------------------------------ */
/* READDIR entries                                                    */

static void mk_dirent(struct pfs_dirent *de, const char *name, uint64_t off, bool plus,
		      uint64_t seed)
{
	struct gen g = {.state = seed, .mode = GEN_RANDOM};
	memset(de, 0, sizeof *de);
	de->name.len = (uint16_t)strlen(name);
	memcpy(de->name.s, name, de->name.len);
	de->next_off = off;
	de->ino = rnd(&g);
	de->mode = 0040000;
	if (plus) {
		de->flags = PFS_DE_HAS_ENTRY;
		fill_ENTRY(&g, &de->e);
	}
}

static bool dirent_eq(const struct pfs_dirent *a, const struct pfs_dirent *b)
{
	if (!eq_NAME(&a->name, &b->name) || a->next_off != b->next_off || a->ino != b->ino ||
	    a->mode != b->mode || a->flags != b->flags)
		return false;
	return !(a->flags & PFS_DE_HAS_ENTRY) || eq_ENTRY(&a->e, &b->e);
}

static void test_dirents(void)
{
	static struct pfs_dirent des[6], got;
	static char longname[PFS_NAME_MAX + 1];
	static uint8_t buf[8192];
	struct pfs_wr w;
	struct pfs_rd r;
	uint8_t eof = 1;

	memset(longname, 'z', PFS_NAME_MAX);
	mk_dirent(&des[0], ".", 1, false, 1);
	mk_dirent(&des[1], "..", 2, false, 2);
	mk_dirent(&des[2], "file", 3, true, 3);
	mk_dirent(&des[3], longname, 4, true, 4);
	mk_dirent(&des[4], "\xc3\xa9t\xc3\xa9", UINT64_MAX, false, 5);
	mk_dirent(&des[5], "...", 6, true, 6);

	pfs_wr_init(&w, buf, sizeof buf);
	CHECK_EQ(pfs_put_U8(&w, &eof), 0);
	for (size_t i = 0; i < 6; i++)
		CHECK_EQ(pfs_enc_dirent(&w, &des[i]), 0);

	pfs_rd_init(&r, buf, w.len);
	CHECK(pfs_get_U8(&r, &eof) && eof == 1);
	for (size_t i = 0; i < 6; i++) {
		memset(&got, 0xcc, sizeof got);
		CHECK_EQ(pfs_dec_dirent(&r, &got), 1);
		if (!CHECK(dirent_eq(&des[i], &got)))
			fprintf(stderr, "  dirent %zu\n", i);
	}
	CHECK_EQ(pfs_dec_dirent(&r, &got), 0);
	CHECK_EQ(pfs_dec_dirent(&r, &got), 0);

	/* Every truncation of an entry is rejected (0 bytes = end), and a
	 * bad cursor stays bad. */
	for (size_t i = 0; i < 6; i++) {
		uint8_t one[1024];
		struct pfs_wr w1;
		pfs_wr_init(&w1, one, sizeof one);
		CHECK_EQ(pfs_enc_dirent(&w1, &des[i]), 0);
		uint8_t *heap = malloc(w1.len);
		if (!CHECK(heap != NULL))
			return;
		for (size_t k = 0; k <= w1.len; k++) {
			memcpy(heap + (w1.len - k), one, k);
			pfs_rd_init(&r, heap + (w1.len - k), k);
			int rc = pfs_dec_dirent(&r, &got);
			if (!CHECK_EQ(rc, k == 0 ? 0 : k == w1.len ? 1 : -EBADMSG))
				fprintf(stderr, "  dirent %zu truncated to %zu\n", i, k);
			if (k && k < w1.len)
				CHECK_EQ(pfs_dec_dirent(&r, &got), -EBADMSG);
		}
		free(heap);

		/* Too-small buffers. */
		for (size_t k = 0; k < w1.len; k++) {
			uint8_t small[1024];
			pfs_wr_init(&w, small, 2 + k);
			w.len = 2;
			CHECK_EQ(pfs_enc_dirent(&w, &des[i]), -ENOBUFS);
			CHECK_EQ(w.len, 2);
		}
	}

	/* Unknown flag bits are rejected by the decoder. */
	static const uint8_t bad_flags[] = {0x02, 0x80, 0x03, 0xff};
	for (size_t i = 0; i < sizeof bad_flags; i++) {
		struct raw rb = {buf, 0, sizeof buf};
		raw_le(&rb, 1, 2);
		raw_mem(&rb, "f", 1);
		raw_le(&rb, 1, 8);
		raw_le(&rb, 2, 8);
		raw_le(&rb, 0100000, 4);
		raw_le(&rb, bad_flags[i], 1);
		if (bad_flags[i] & PFS_DE_HAS_ENTRY) {
			raw_le(&rb, 1, 1);
			raw_le(&rb, 1, 1);
			raw_fill(&rb, 0, PFS_ATTR_WIRE_SIZE);
		}
		pfs_rd_init(&r, buf, rb.len);
		CHECK_EQ(pfs_dec_dirent(&r, &got), -EBADMSG);
		CHECK_EQ(pfs_dec_dirent(&r, &got), -EBADMSG);
	}
	/* ...and the encoder writes them anyway, so it can produce an entry
	 * that its own decoder refuses. */
	{
		struct pfs_dirent de;
		mk_dirent(&de, "f", 1, false, 9);
		de.flags = 0x80;
		pfs_wr_init(&w, buf, sizeof buf);
		CHECK_EQ(pfs_enc_dirent(&w, &de), -EINVAL);
		CHECK_EQ(w.len, 0);
	}

	/* Bad entry names: decoder -EBADMSG, encoder -EINVAL with w unchanged. */
	static const struct str_case names[] = {
		{"", 0, false}, {"a/b", 0, false}, {"/", 0, false}, {"a\0b", 3, false},
		{LONG_A(256), false}, {".", 0, true}, {"..", 0, true}, {LONG_A(255), true},
	};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		char s[512];
		size_t n = case_expand(&names[i], s, sizeof s);
		struct raw rb = {buf, 0, sizeof buf};
		struct pfs_dirent de;
		raw_le(&rb, n, 2);
		raw_mem(&rb, s, n);
		raw_le(&rb, 1, 8);
		raw_le(&rb, 2, 8);
		raw_le(&rb, 0, 4);
		raw_le(&rb, 0, 1);
		pfs_rd_init(&r, buf, rb.len);
		if (!CHECK_EQ(pfs_dec_dirent(&r, &got), names[i].ok ? 1 : -EBADMSG))
			fprintf(stderr, "  dirent name case %zu\n", i);

		memset(&de, 0, sizeof de);
		de.name.len = (uint16_t)n;
		memcpy(de.name.s, s, n);
		pfs_wr_init(&w, buf, sizeof buf);
		w.len = 1;
		CHECK_EQ(pfs_enc_dirent(&w, &de), names[i].ok ? 0 : -EINVAL);
		if (!names[i].ok)
			CHECK_EQ(w.len, 1);
	}

	/* An entry with an invalid handle is refused and rewound. */
	{
		struct pfs_dirent de;
		mk_dirent(&de, "f", 1, true, 10);
		de.e.fh.len = 0;
		pfs_wr_init(&w, buf, sizeof buf);
		w.len = 4;
		CHECK_EQ(pfs_enc_dirent(&w, &de), -EINVAL);
		CHECK_EQ(w.len, 4);
	}
}

/* ------------------------------------------------------------------ */
/* Names and opcode names                                             */

int main(void)
{
	uint64_t s = 12345;
	test_fill_random(&s, pool, sizeof pool);

	test_all_messages();
	test_golden_bytes();
	test_encoder_rewind();
	test_reader();
	test_deleg_attrs();
	test_dirents();
	return check_done("test_codec");
}
