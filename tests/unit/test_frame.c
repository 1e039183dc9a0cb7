/* test_frame.c: unit tests of the frame header, per-frame LZ4 and
 * zero-word coding (frame.h): header layout and validation, the
 * code-if-it-pays decisions, and the decoders' defences against malformed,
 * truncated, mis-sized and over-large blocks.
 */
#include <errno.h>
#include <lz4.h>
#include <stdlib.h>

#include "check.h"
#include "podfs/frame.h"

static void pack(uint8_t out[PFS_FRAME_HDR_SIZE], uint32_t wire_len, uint32_t raw_len,
		 uint16_t op, uint16_t flags, int32_t status)
{
	struct pfs_frame_hdr h = {.wire_len = wire_len, .raw_len = raw_len, .id = 9, .op = op,
				  .flags = flags, .status = status};
	pfs_hdr_pack(out, &h);
}

/* ------------------------------------------------------------------ */
/* Header                                                             */

static void test_hdr_roundtrip(void)
{
	struct pfs_frame_hdr h = {
		.wire_len = 0x100,
		.raw_len = 0x100,
		.id = 0x0807060504030201u,
		.op = PFS_OP_WRITE,
		.flags = PFS_FF_REPLY,
		.status = 0x1a2b3c4d,
	};
	static const uint8_t want[PFS_FRAME_HDR_SIZE] = {
		0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, /* wire_len, raw_len */
		0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, /* id */
		PFS_OP_WRITE, 0x00, 0x01, 0x00,                 /* op, flags */
		0x4d, 0x3c, 0x2b, 0x1a,                         /* status */
	};
	uint8_t b[PFS_FRAME_HDR_SIZE];
	struct pfs_frame_hdr g;

	pfs_hdr_pack(b, &h);
	CHECK_MEM(b, want, sizeof want);
	memset(&g, 0xee, sizeof g);
	CHECK_EQ(pfs_hdr_unpack(b, &g, PFS_MAX_PAYLOAD), 0);
	CHECK(g.wire_len == h.wire_len && g.raw_len == h.raw_len && g.id == h.id &&
	      g.op == h.op && g.flags == h.flags && g.status == h.status);

	/* Extreme values that are still valid. */
	h = (struct pfs_frame_hdr){.wire_len = PFS_MAX_PAYLOAD, .raw_len = PFS_MAX_PAYLOAD,
				   .id = UINT64_MAX, .op = PFS_OP_MAX - 1,
				   .flags = PFS_FF_KNOWN & ~PFS_FF_LZ4, .status = INT32_MAX};
	pfs_hdr_pack(b, &h);
	CHECK_EQ(pfs_hdr_unpack(b, &g, PFS_MAX_PAYLOAD), 0);
	CHECK(g.wire_len == h.wire_len && g.raw_len == h.raw_len && g.id == h.id &&
	      g.op == h.op && g.flags == h.flags && g.status == h.status);

	h = (struct pfs_frame_hdr){.wire_len = 20, .raw_len = 1000, .id = 0, .op = PFS_OP_READ,
				   .flags = PFS_FF_LZ4 | PFS_FF_PUSH, .status = 0};
	pfs_hdr_pack(b, &h);
	CHECK_EQ(pfs_hdr_unpack(b, &g, PFS_MAX_PAYLOAD), 0);
	CHECK(g.wire_len == 20 && g.raw_len == 1000 && g.flags == (PFS_FF_LZ4 | PFS_FF_PUSH));
}

static void test_hdr_validation(void)
{
	const uint32_t big = PFS_MAX_PAYLOAD, hs = PFS_MAX_HANDSHAKE;
	const uint16_t lz = PFS_FF_LZ4, zr = PFS_FF_ZR;
	const struct {
		uint32_t wire_len, raw_len;
		uint16_t op, flags;
		int32_t status;
		size_t max_raw;
		int want;
	} cases[] = {
		{0, 0, PFS_OP_PING, 0, 0, big, 0},
		{0, 0, 0, 0, 0, big, 0}, /* op 0 is syntactically fine */
		/* flags */
		{0, 0, 1, 1u << 4, 0, big, -EBADMSG},
		{0, 0, 1, 1u << 15, 0, big, -EBADMSG},
		{0, 0, 1, 0xffff, 0, big, -EBADMSG},
		/* op */
		{0, 0, PFS_OP_MAX - 1, 0, 0, big, 0},
		{0, 0, PFS_OP_MAX, 0, 0, big, -EBADMSG},
		{0, 0, 0xffff, 0, 0, big, -EBADMSG},
		/* raw_len against max_raw */
		{hs, hs, 1, 0, 0, hs, 0},
		{hs + 1, hs + 1, 1, 0, 0, hs, -EBADMSG},
		{big, big, 1, 0, 0, big, 0},
		{big + 1, big + 1, 1, 0, 0, big, -EBADMSG},
		{big + 1, big + 1, 1, 0, 0, SIZE_MAX, -EBADMSG}, /* clamped to PFS_MAX_PAYLOAD */
		{UINT32_MAX, UINT32_MAX, 1, 0, 0, SIZE_MAX, -EBADMSG},
		{10, 10, 1, 0, 0, 0, -EBADMSG},
		/* uncompressed: wire_len == raw_len */
		{10, 11, 1, 0, 0, big, -EBADMSG},
		{11, 10, 1, 0, 0, big, -EBADMSG},
		{0, 1, 1, 0, 0, big, -EBADMSG},
		/* LZ4 */
		{1, 1, 1, lz, 0, big, 0},
		{10, 0, 1, lz, 0, big, -EBADMSG},
		{0, 0, 1, lz, 0, big, -EBADMSG},
		{0, 100, 1, lz, 0, big, -EBADMSG},
		{17, 1, 1, lz, 0, big, 0},  /* bound(1) = 17 */
		{18, 1, 1, lz, 0, big, -EBADMSG},
		{PFS_MAX_WIRE, big, 1, lz, 0, big, 0},
		{PFS_MAX_WIRE + 1, big, 1, lz, 0, big, -EBADMSG},
		{UINT32_MAX, big, 1, lz, 0, big, -EBADMSG},
		{hs, hs + 1, 1, lz, 0, hs, -EBADMSG},
		{hs, big, 1, lz | PFS_FF_REPLY, 0, big, 0},
		/* zero words: 0 < wire_len <= raw_len, never together with LZ4 */
		{1, 1, 1, zr, 0, big, 0},
		{1, big, 1, zr, 0, big, 0},
		{big, big, 1, zr, 0, big, 0},
		{0, 0, 1, zr, 0, big, -EBADMSG},
		{0, 10, 1, zr, 0, big, -EBADMSG},
		{11, 10, 1, zr, 0, big, -EBADMSG},
		{10, big + 1, 1, zr, 0, big, -EBADMSG},
		{10, hs + 1, 1, zr, 0, hs, -EBADMSG},
		{10, 100, 1, zr | lz, 0, big, -EBADMSG},
		/* status */
		{0, 0, 1, PFS_FF_REPLY, 2, big, 0},
		{0, 0, 1, PFS_FF_REPLY, -1, big, -EBADMSG},
		{0, 0, 1, PFS_FF_REPLY, INT32_MIN, big, -EBADMSG},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		uint8_t b[PFS_FRAME_HDR_SIZE];
		struct pfs_frame_hdr h;
		pack(b, cases[i].wire_len, cases[i].raw_len, cases[i].op, cases[i].flags,
		     cases[i].status);
		if (!CHECK_EQ(pfs_hdr_unpack(b, &h, cases[i].max_raw), cases[i].want))
			fprintf(stderr, "  header case %zu\n", i);
	}
}

/* ------------------------------------------------------------------ */
/* LZ4                                                                */

/* Float32 "weights" where most values are zero (a sparse tensor). */
static void fill_sparse_floats(uint64_t *st, uint8_t *buf, size_t n)
{
	size_t count = n / sizeof(float);
	memset(buf, 0, n);
	for (size_t i = 0; i < count; i++) {
		if (test_rand(st) % 8 == 0) {
			float f = (float)(int)(test_rand(st) % 64) / 8.0f;
			memcpy(buf + i * sizeof f, &f, sizeof f);
		}
	}
}

static void test_lz4_compressible(void)
{
	static const size_t sizes[] = {PFS_LZ4_MIN, 4096, 16384, 16385, 65536, 300000,
				       PFS_MAX_IO, PFS_MAX_PAYLOAD};
	uint64_t st = 1;
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		size_t n = sizes[i], cap = pfs_lz4_bound(n);
		uint8_t *src = malloc(n), *dst = malloc(cap), *back = malloc(n);
		if (!CHECK(src && dst && back))
			return;
		fill_sparse_floats(&st, src, n);
		size_t c = pfs_lz4_maybe_compress(src, n, dst, cap);
		if (!CHECK(c > 0 && c <= n / 2))
			fprintf(stderr, "  sparse floats %zu -> %zu\n", n, c);
		if (c) {
			/* Decompress from an exact-size copy of the block. */
			uint8_t *blk = malloc(c);
			memcpy(blk, dst, c);
			CHECK_EQ(pfs_lz4_decompress(blk, c, back, n), 0);
			CHECK_MEM(src, back, n);
			free(blk);
		}
		/* All zeros compress to almost nothing. */
		memset(src, 0, n);
		c = pfs_lz4_maybe_compress(src, n, dst, cap);
		CHECK(c > 0 && c <= n / 100 + 32);
		memset(back, 0xff, n);
		CHECK_EQ(pfs_lz4_decompress(dst, c, back, n), 0);
		CHECK_MEM(src, back, n);
		/* Too small a scratch buffer: never compresses. */
		CHECK_EQ(pfs_lz4_maybe_compress(src, n, dst, cap - 1), 0);
		free(src);
		free(dst);
		free(back);
	}
	/* Over the protocol limit: never compresses. */
	size_t n = PFS_MAX_PAYLOAD + 1;
	uint8_t *src = calloc(1, n), *dst = malloc(pfs_lz4_bound(n));
	if (CHECK(src && dst))
		CHECK_EQ(pfs_lz4_maybe_compress(src, n, dst, pfs_lz4_bound(n)), 0);
	free(src);
	free(dst);
}

static void test_lz4_small_and_random(void)
{
	uint8_t zeros[PFS_LZ4_MIN] = {0}, dst[2 * PFS_LZ4_MIN];
	for (size_t n = 0; n < PFS_LZ4_MIN; n++)
		if (!CHECK_EQ(pfs_lz4_maybe_compress(zeros, n, dst, sizeof dst), 0))
			fprintf(stderr, "  %zu zero bytes compressed\n", n);
	CHECK(pfs_lz4_maybe_compress(zeros, PFS_LZ4_MIN, dst, sizeof dst) > 0);

	static const size_t sizes[] = {PFS_LZ4_MIN, 1000, 4096, 16384, 16385, 100000,
				       PFS_MAX_IO};
	uint64_t st = 99;
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		size_t n = sizes[i], cap = pfs_lz4_bound(n);
		uint8_t *src = malloc(n), *out = malloc(cap);
		if (!CHECK(src && out))
			return;
		test_fill_random(&st, src, n);
		if (!CHECK_EQ(pfs_lz4_maybe_compress(src, n, out, cap), 0))
			fprintf(stderr, "  %zu random bytes compressed\n", n);
		free(src);
		free(out);
	}

	/* Barely compressible data (saves < 1/8): kept raw. Random bytes from a
	 * 128-symbol alphabet cannot be squeezed by LZ4 (no entropy coder). */
	size_t n = 65536;
	uint8_t *src = malloc(n), *out = malloc(pfs_lz4_bound(n));
	if (CHECK(src && out)) {
		for (size_t i = 0; i < n; i++)
			src[i] = (uint8_t)(test_rand(&st) & 0x7f);
		CHECK_EQ(pfs_lz4_maybe_compress(src, n, out, pfs_lz4_bound(n)), 0);
	}
	free(src);
	free(out);
}

/* Builds a valid block for a known payload. */
static size_t make_block(uint8_t *raw, size_t n, uint8_t **blk)
{
	uint64_t st = 5;
	fill_sparse_floats(&st, raw, n);
	*blk = malloc(pfs_lz4_bound(n));
	return pfs_lz4_maybe_compress(raw, n, *blk, pfs_lz4_bound(n));
}

static void test_lz4_decompress_rejects(void)
{
	enum { N = 8192 };
	static uint8_t raw[N + 1], back[N + 64];
	uint8_t *blk;
	size_t c = make_block(raw, N, &blk);
	uint64_t st = 3;

	if (!CHECK(c > 0 && blk))
		return;
	CHECK_EQ(pfs_lz4_decompress(blk, c, back, N), 0);
	CHECK_MEM(raw, back, N);

	/* Wrong raw_len, smaller and larger; the output is bounded by
	 * raw_len (guard bytes untouched). */
	static const long deltas[] = {-N + 1, -1000, -2, -1, 1, 2, 1000};
	for (size_t i = 0; i < sizeof deltas / sizeof deltas[0]; i++) {
		size_t rl = (size_t)((long)N + deltas[i]);
		uint8_t *d = malloc(rl);
		if (!CHECK_EQ(pfs_lz4_decompress(blk, c, d, rl), -EBADMSG))
			fprintf(stderr, "  raw_len %zu for a block of %d\n", rl, N);
		free(d);
	}
	CHECK_EQ(pfs_lz4_decompress(blk, c, back, 0), -EBADMSG);

	/* Truncated at every offset, each from an exact-size heap copy. */
	for (size_t k = 0; k < c; k++) {
		uint8_t *t = malloc(k ? k : 1);
		memcpy(t, blk, k);
		if (!CHECK_EQ(pfs_lz4_decompress(t, k, back, N), -EBADMSG))
			fprintf(stderr, "  block truncated to %zu of %zu\n", k, c);
		free(t);
	}
	/* Trailing garbage after a valid block. */
	uint8_t *longer = malloc(c + 16);
	memcpy(longer, blk, c);
	memset(longer + c, 0x41, 16);
	CHECK_EQ(pfs_lz4_decompress(longer, c + 16, back, N), -EBADMSG);
	free(longer);

	/* Garbage of many sizes, for many raw lengths. */
	for (int i = 0; i < 200; i++) {
		uint8_t g[600];
		size_t gl = 1 + (size_t)(test_rand(&st) % sizeof g);
		size_t rl = 1 + (size_t)(test_rand(&st) % N);
		test_fill_random(&st, g, gl);
		uint8_t *d = malloc(rl);
		if (!CHECK_EQ(pfs_lz4_decompress(g, gl, d, rl), -EBADMSG))
			fprintf(stderr, "  garbage %d accepted\n", i);
		free(d);
	}

	/* Every single-byte corruption either fails or yields exactly N
	 * bytes; it never writes past N (ASan, and the guard below). */
	for (size_t k = 0; k < c; k++) {
		uint8_t *t = malloc(c);
		memcpy(t, blk, c);
		t[k] ^= 0x5a;
		memset(back, 0xcc, sizeof back);
		int rc = pfs_lz4_decompress(t, c, back, N);
		CHECK(rc == 0 || rc == -EBADMSG);
		CHECK(back[N] == 0xcc);
		free(t);
	}

	/* wire_len over PFS_MAX_WIRE is refused before reading. */
	size_t wl = PFS_MAX_WIRE + 1;
	uint8_t *wbig = calloc(1, wl);
	if (CHECK(wbig != NULL)) {
		memcpy(wbig, blk, c);
		CHECK_EQ(pfs_lz4_decompress(wbig, wl, back, N), -EBADMSG);
		CHECK_EQ(pfs_lz4_decompress(wbig, SIZE_MAX, back, N), -EBADMSG);
	}
	free(wbig);
	free(blk);
}

/* A block that really expands to more than PFS_MAX_PAYLOAD, and a tiny
 * block claiming a huge raw_len: both refused, whatever dst can hold. */
static void test_lz4_bomb(void)
{
	size_t huge = 8u << 20;
	uint8_t *zeros = calloc(1, huge), *dst = malloc(huge);
	int bl = LZ4_compressBound((int)huge);
	uint8_t *blk = malloc((size_t)bl);
	if (!CHECK(zeros && dst && blk))
		goto out;
	int c = LZ4_compress_default((const char *)zeros, (char *)blk, (int)huge, bl);
	CHECK(c > 0 && (size_t)c < PFS_MAX_WIRE);
	CHECK_EQ(pfs_lz4_decompress(blk, (size_t)c, dst, huge), -EBADMSG);
	CHECK_EQ(pfs_lz4_decompress(blk, (size_t)c, dst, PFS_MAX_PAYLOAD + 1), -EBADMSG);
	CHECK_EQ(pfs_lz4_decompress(blk, (size_t)c, dst, PFS_MAX_PAYLOAD), -EBADMSG);

	/* Tiny block (a few bytes of zeros) with an enormous raw_len: the
	 * limit check comes first, so a 1-byte dst is never written. */
	uint8_t tiny[64], one[1] = {0x77};
	int tc = LZ4_compress_default((const char *)zeros, (char *)tiny, 40, (int)sizeof tiny);
	CHECK(tc > 0);
	CHECK_EQ(pfs_lz4_decompress(tiny, (size_t)tc, one, SIZE_MAX), -EBADMSG);
	CHECK_EQ(pfs_lz4_decompress(tiny, (size_t)tc, one, (size_t)1 << 31), -EBADMSG);
	CHECK_EQ(pfs_lz4_decompress(tiny, (size_t)tc, one, (size_t)1 << 32), -EBADMSG);
	CHECK_EQ(pfs_lz4_decompress(tiny, (size_t)tc, one, PFS_MAX_PAYLOAD + 1), -EBADMSG);
	CHECK(one[0] == 0x77);

	/* The header-level view of the same bomb. */
	uint8_t h[PFS_FRAME_HDR_SIZE];
	struct pfs_frame_hdr fh;
	pack(h, (uint32_t)tc, UINT32_MAX, PFS_OP_READ, PFS_FF_LZ4 | PFS_FF_REPLY, 0);
	CHECK_EQ(pfs_hdr_unpack(h, &fh, PFS_MAX_PAYLOAD), -EBADMSG);
	pack(h, (uint32_t)c, (uint32_t)huge, PFS_OP_READ, PFS_FF_LZ4 | PFS_FF_REPLY, 0);
	CHECK_EQ(pfs_hdr_unpack(h, &fh, PFS_MAX_PAYLOAD), -EBADMSG);
out:
	free(zeros);
	free(dst);
	free(blk);
}

/* ------------------------------------------------------------------ */
/* Zero-run coding                                                    */

/* Codes src[n] with pfs_zr_maybe_encode and checks the round trip through
 * an exact-size heap copy. Returns the coded size (0: not coded). */
static size_t zr_roundtrip(const uint8_t *src, size_t n)
{
	size_t cap = pfs_lz4_bound(n);
	uint8_t *dst = malloc(cap), *back = malloc(n ? n : 1), *blk;
	size_t c;

	if (!CHECK(dst && back))
		goto out;
	c = pfs_zr_maybe_encode(src, n, dst, cap);
	if (c) {
		CHECK(c <= n - n / 8);
		blk = malloc(c);
		if (!CHECK(blk))
			goto out;
		memcpy(blk, dst, c);
		memset(back, 0x77, n);
		CHECK_EQ(pfs_zr_decode(blk, c, back, n), 0);
		CHECK_MEM(back, src, n);
		/* Any other length is refused. */
		CHECK_EQ(pfs_zr_decode(blk, c, back, n - 1), -EBADMSG);
		free(blk);
	}
	free(dst);
	free(back);
	return c;
out:
	free(dst);
	free(back);
	return 0;
}

static void test_zr_roundtrips(void)
{
	size_t n = PFS_MAX_IO;
	uint8_t *buf = malloc(n);
	uint64_t st = 5;
	size_t c;

	if (!CHECK(buf))
		return;
	/* Sparse float32 weights: well under half. */
	fill_sparse_floats(&st, buf, n);
	c = zr_roundtrip(buf, n);
	CHECK(c > 0 && c < n / 2);
	/* All zeros: only the masks. */
	memset(buf, 0, n);
	c = zr_roundtrip(buf, n);
	CHECK_EQ(c, 8 * (n / 8 / PFS_ZR_GROUP));
	/* Random: not coded, and rejected by the trial. */
	test_fill_random(&st, buf, n);
	CHECK_EQ(zr_roundtrip(buf, n), 0);
	/* Zeros only at the edges, odd lengths (tails), runs straddling
	 * words and runs too short to make a zero word: every layout
	 * round-trips exactly. */
	for (size_t len = PFS_LZ4_MIN; len < PFS_LZ4_MIN + 40; len++) {
		for (unsigned pat = 0; pat < 6; pat++) {
			test_fill_random(&st, buf, len);
			for (size_t i = 0; i < len; i++) {
				bool z = false;
				switch (pat) {
				case 0: z = i < len / 2; break;               /* leading zeros */
				case 1: z = i >= len / 3; break;              /* trailing zeros */
				case 2: z = (i / 13) % 2 == 0; break;         /* 13-byte runs */
				case 3: z = (i % 16) < 7; break;              /* no zero word */
				case 4: z = i % 1 == 0; break;                /* all zero */
				case 5: z = (i / 3) % 5 != 0; break;          /* 12-byte runs */
				}
				if (z)
					buf[i] = 0;
				else if (buf[i] == 0)
					buf[i] = 1;
			}
			c = zr_roundtrip(buf, len);
			if (pat == 0 || pat == 1 || pat == 4)
				CHECK(c > 0);
			if (pat == 3)
				CHECK_EQ(c, 0);
		}
	}
	/* Below PFS_LZ4_MIN: never coded. */
	memset(buf, 0, n);
	CHECK_EQ(zr_roundtrip(buf, PFS_LZ4_MIN - 1), 0);
	/* A capacity too small for the result: not coded, no overflow. */
	{
		uint8_t small[8];
		CHECK_EQ(pfs_zr_maybe_encode(buf, PFS_LZ4_MIN, small, 1), 0);
		small[0] = 0x5a;
		CHECK_EQ(pfs_zr_maybe_encode(buf, PFS_LZ4_MIN, small, 0), 0);
		CHECK(small[0] == 0x5a);
	}
	free(buf);
}

/* The AVX-512 group coder (where the CPU has it) and the portable loops
 * make the same bytes, and each decodes what the other made, for every
 * zero density, in whole and partial groups. */
static void test_zr_simd_same_bytes(void)
{
	size_t n = PFS_MAX_IO + 13, cap = pfs_lz4_bound(n);
	uint8_t *src = malloc(n), *a = malloc(cap), *b = malloc(cap), *out = malloc(n);
	uint64_t st = 11;

	if (!CHECK(src && a && b && out))
		goto out;
	if (!pfs_zr_simd(-1)) {
		printf("test_frame: no AVX-512 here, the portable coder only\n");
		goto out;
	}
	for (unsigned density = 0; density <= 8; density++) {
		for (size_t len = PFS_LZ4_MIN; len <= n; len = len * 3 + 7) {
			test_fill_random(&st, src, len);
			/* density/8 of the words zero, at random places. */
			for (size_t w = 0; w + 8 <= len; w += 8)
				if (test_rand(&st) % 8 < density)
					memset(src + w, 0, 8);
			pfs_zr_simd(1);
			size_t za = pfs_zr_maybe_encode(src, len, a, cap);
			pfs_zr_simd(0);
			size_t zb = pfs_zr_maybe_encode(src, len, b, cap);
			CHECK_EQ(za, zb);
			CHECK(za == 0 || memcmp(a, b, za) == 0);
			if (!za)
				continue;
			for (int simd = 0; simd <= 1; simd++) {
				pfs_zr_simd(simd);
				memset(out, 0xa5, len);
				CHECK_EQ(pfs_zr_decode(a, za, out, len), 0);
				CHECK(memcmp(out, src, len) == 0);
				/* A block one kept word short is refused both ways. */
				CHECK_EQ(pfs_zr_decode(a, za - 8, out, len), -EBADMSG);
			}
		}
	}
out:
	pfs_zr_simd(1);
	free(src);
	free(a);
	free(b);
	free(out);
}

static void test_zr_decode_rejects(void)
{
	uint8_t out[1024];
#define M(v) (uint8_t)(v), 0, 0, 0, 0, 0, 0, 0 /* a mask with bits in its low byte */
#define W(c) c, c, c, c, c, c, c, c               /* a word of 8 bytes c */
	const struct {
		const char *what;
		uint8_t in[40];
		size_t len, raw;
		int want;
	} cases[] = {
		{"words 0 and 2 of 3", {M(5), W(1), W(2)}, 24, 24, 0},
		{"tail only", {1, 2, 3, 4, 5}, 5, 5, 0},
		{"word 1 of 2 + 3-byte tail", {M(2), W(7), 8, 9, 10}, 19, 19, 0},
		{"all zero words", {M(0)}, 8, 16, 0},
		{"two groups", {M(0), M(1), W(3)}, 24, 64 * 8 + 8, 0},
		{"a third group", {M(0), M(0), M(1), W(3)}, 32, 64 * 8 + 8, -EBADMSG},
		{"mask bit past the last word", {M(4)}, 8, 16, -EBADMSG},
		{"missing word", {M(3), W(1)}, 16, 16, -EBADMSG},
		{"bytes left over", {M(1), W(1), 0}, 17, 16, -EBADMSG},
		{"tail short", {M(0), 1, 2}, 10, 19, -EBADMSG},
		{"truncated mask", {0, 0, 0, 0, 0}, 5, 16, -EBADMSG},
		{"raw_len 0", {1}, 1, 0, -EBADMSG},
		{"empty block", {0}, 0, 8, -EBADMSG},
	};
#undef M
#undef W
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		/* Exact-size heap copy of the block: ASan catches over-reads. */
		uint8_t *blk = malloc(cases[i].len ? cases[i].len : 1);
		if (!CHECK(blk))
			return;
		memcpy(blk, cases[i].in, cases[i].len);
		memset(out, 0x11, sizeof out);
		if (!CHECK_EQ(pfs_zr_decode(blk, cases[i].len, out, cases[i].raw),
			      cases[i].want))
			fprintf(stderr, "  zr case %zu: %s\n", i, cases[i].what);
		/* Never a byte past raw_len. */
		for (size_t k = cases[i].raw; k < sizeof out; k++)
			if (!CHECK(out[k] == 0x11))
				break;
		free(blk);
	}
	/* Spot checks of what the good ones decode to. */
	{
		uint8_t blk[] = {2, 0, 0, 0, 0, 0, 0, 0, 7, 7, 7, 7, 7, 7, 7, 7, 8, 9, 10};
		static const uint8_t want[19] = {0, 0, 0, 0, 0, 0, 0, 0, 7, 7, 7, 7, 7, 7, 7, 7,
						 8, 9, 10};
		CHECK_EQ(pfs_zr_decode(blk, sizeof blk, out, sizeof want), 0);
		CHECK_MEM(out, want, sizeof want);
	}
	/* Bombs: a block claiming more than PFS_MAX_PAYLOAD is refused before
	 * anything is written; a valid one expanding to exactly the limit
	 * (all masks zero) is accepted. */
	{
		size_t masks = 8 * ((PFS_MAX_PAYLOAD / 8 + PFS_ZR_GROUP - 1) / PFS_ZR_GROUP);
		uint8_t *lim = calloc(1, masks), *big = malloc(PFS_MAX_PAYLOAD), guard = 0x5a;
		if (CHECK(lim && big)) {
			CHECK_EQ(pfs_zr_decode(lim, masks, &guard, (size_t)PFS_MAX_PAYLOAD + 1),
				 -EBADMSG);
			CHECK(guard == 0x5a);
			memset(big, 0x33, PFS_MAX_PAYLOAD);
			CHECK_EQ(pfs_zr_decode(lim, masks, big, PFS_MAX_PAYLOAD), 0);
			CHECK(big[0] == 0 && big[PFS_MAX_PAYLOAD - 1] == 0);
			CHECK_EQ(pfs_zr_decode(lim, masks - 1, big, PFS_MAX_PAYLOAD), -EBADMSG);
		}
		free(lim);
		free(big);
	}
	/* The dispatcher: unknown or double coding flags are refused. */
	{
		uint8_t blk[] = {1, 2, 3};
		CHECK_EQ(pfs_payload_decode(PFS_FF_ZR, blk, 3, out, 3), 0);
		CHECK_EQ(pfs_payload_decode(0, blk, 3, out, 3), -EBADMSG);
		CHECK_EQ(pfs_payload_decode(PFS_FF_ZR | PFS_FF_LZ4, blk, 3, out, 3), -EBADMSG);
	}
}

/* ------------------------------------------------------------------ */
/* pfs_frame_prepare                                                  */

static void test_frame_prepare(void)
{
	size_t n = 65536, cap = pfs_lz4_bound(n);
	uint8_t *sparse = malloc(n), *rnd = malloc(n), *scratch = malloc(cap), *back = malloc(n);
	uint8_t hdr[PFS_FRAME_HDR_SIZE];
	struct pfs_frame_hdr h;
	const void *wire;
	size_t wl;
	uint64_t st = 11;

	if (!CHECK(sparse && rnd && scratch && back))
		goto out;
	fill_sparse_floats(&st, sparse, n);
	test_fill_random(&st, rnd, n);

	/* Compressible, LZ4 wanted: LZ4 set, wire = scratch. */
	wl = pfs_frame_prepare(hdr, 77, PFS_OP_READ, PFS_FF_REPLY, 0, sparse, n, PFS_CAP_LZ4, scratch,
			       cap, &wire);
	CHECK_EQ(pfs_hdr_unpack(hdr, &h, PFS_MAX_PAYLOAD), 0);
	CHECK(h.flags == (PFS_FF_REPLY | PFS_FF_LZ4));
	CHECK(wire == scratch);
	CHECK(wl == h.wire_len && wl < n && h.raw_len == n && h.id == 77 &&
	      h.op == PFS_OP_READ && h.status == 0);
	CHECK_EQ(pfs_lz4_decompress(wire, wl, back, h.raw_len), 0);
	CHECK_MEM(back, sparse, n);

	/* Compression not wanted: raw, and a caller's stray LZ4 flag is
	 * cleared. */
	wl = pfs_frame_prepare(hdr, 78, PFS_OP_WRITE, PFS_FF_LZ4, 0, sparse, n, 0, scratch,
			       cap, &wire);
	CHECK_EQ(pfs_hdr_unpack(hdr, &h, PFS_MAX_PAYLOAD), 0);
	CHECK(h.flags == 0 && wire == sparse && wl == n && h.wire_len == n && h.raw_len == n);

	/* No scratch buffer, or one that is too small: raw. */
	wl = pfs_frame_prepare(hdr, 79, PFS_OP_WRITE, 0, 0, sparse, n, PFS_CAPS_CODECS, NULL, 0,
			       &wire);
	CHECK_EQ(pfs_hdr_unpack(hdr, &h, PFS_MAX_PAYLOAD), 0);
	CHECK(h.flags == 0 && wire == sparse && wl == n);
	wl = pfs_frame_prepare(hdr, 79, PFS_OP_WRITE, 0, 0, sparse, n, PFS_CAPS_CODECS, scratch, n,
			       &wire);
	CHECK_EQ(pfs_hdr_unpack(hdr, &h, PFS_MAX_PAYLOAD), 0);
	CHECK(h.flags == 0 && wire == sparse && wl == n);

	/* Incompressible: raw even though compression was wanted. */
	wl = pfs_frame_prepare(hdr, 80, PFS_OP_WRITE, PFS_FF_PUSH | PFS_FF_LZ4, 0, rnd, n,
			       PFS_CAPS_CODECS,
			       scratch, cap, &wire);
	CHECK_EQ(pfs_hdr_unpack(hdr, &h, PFS_MAX_PAYLOAD), 0);
	CHECK(h.flags == PFS_FF_PUSH && wire == rnd && wl == n);

	/* Small: raw. */
	wl = pfs_frame_prepare(hdr, 81, PFS_OP_LOOKUP, 0, 0, sparse, PFS_LZ4_MIN - 1, PFS_CAPS_CODECS,
			       scratch, cap, &wire);
	CHECK_EQ(pfs_hdr_unpack(hdr, &h, PFS_MAX_PAYLOAD), 0);
	CHECK(h.flags == 0 && wire == sparse && wl == PFS_LZ4_MIN - 1);

	/* Empty payload, error reply. */
	wl = pfs_frame_prepare(hdr, 82, PFS_OP_LOOKUP, PFS_FF_REPLY, ENOENT, NULL, 0, PFS_CAPS_CODECS,
			       scratch, cap, &wire);
	CHECK_EQ(pfs_hdr_unpack(hdr, &h, PFS_MAX_PAYLOAD), 0);
	CHECK(h.flags == PFS_FF_REPLY && wl == 0 && h.status == ENOENT && h.wire_len == 0);

	/* Mostly zeros, both codings offered: zero words win (they halve it
	 * at almost no CPU), and a stray ZR flag from the caller is cleared
	 * when the payload goes raw. */
	wl = pfs_frame_prepare(hdr, 83, PFS_OP_WRITE, 0, 0, sparse, n, PFS_CAPS_CODECS, scratch,
			       cap, &wire);
	CHECK_EQ(pfs_hdr_unpack(hdr, &h, PFS_MAX_PAYLOAD), 0);
	CHECK(h.flags == PFS_FF_ZR && wire == scratch && wl <= n / 2 && h.raw_len == n);
	memset(back, 0xaa, n);
	CHECK_EQ(pfs_payload_decode(h.flags, wire, wl, back, n), 0);
	CHECK_MEM(back, sparse, n);
	wl = pfs_frame_prepare(hdr, 84, PFS_OP_WRITE, PFS_FF_ZR, 0, rnd, n, PFS_CAPS_CODECS,
			       scratch, cap, &wire);
	CHECK_EQ(pfs_hdr_unpack(hdr, &h, PFS_MAX_PAYLOAD), 0);
	CHECK(h.flags == 0 && wire == rnd && wl == n);

	/* Text without zeros: zero words do not pay, LZ4 does. */
	for (size_t i = 0; i < n; i++)
		back[i] = (uint8_t)"tensor weights 0.125 0.25 0.5\n"[i % 31];
	wl = pfs_frame_prepare(hdr, 85, PFS_OP_WRITE, 0, 0, back, n, PFS_CAPS_CODECS, scratch,
			       cap, &wire);
	CHECK_EQ(pfs_hdr_unpack(hdr, &h, PFS_MAX_PAYLOAD), 0);
	CHECK(h.flags == PFS_FF_LZ4 && wire == scratch && wl < n / 8);

	/* Zeros that ZR shrinks by less than half, LZ4 better: LZ4; with
	 * only ZR offered: ZR. 1 zero word in 3. */
	for (size_t i = 0; i < n; i += 8) {
		uint64_t v = (i / 8) % 3 == 0 ? 0 : 0x0101010101010101ull * (1 + (i / 8) % 7);
		memcpy(back + i, &v, 8);
	}
	memcpy(sparse, back, n);
	wl = pfs_frame_prepare(hdr, 86, PFS_OP_WRITE, 0, 0, sparse, n, PFS_CAPS_CODECS, scratch,
			       cap, &wire);
	CHECK_EQ(pfs_hdr_unpack(hdr, &h, PFS_MAX_PAYLOAD), 0);
	CHECK(h.flags == PFS_FF_LZ4);
	wl = pfs_frame_prepare(hdr, 87, PFS_OP_WRITE, 0, 0, sparse, n, PFS_CAP_ZR, scratch, cap,
			       &wire);
	CHECK_EQ(pfs_hdr_unpack(hdr, &h, PFS_MAX_PAYLOAD), 0);
	CHECK(h.flags == PFS_FF_ZR && wl > n / 2 && wl <= n - n / 8);
	memset(back, 0x55, n);
	CHECK_EQ(pfs_payload_decode(h.flags, wire, wl, back, n), 0);
	CHECK_MEM(back, sparse, n);
out:
	free(sparse);
	free(rnd);
	free(scratch);
	free(back);
}

static void test_bound(void)
{
	static const size_t lens[] = {0, 1, 254, 255, 256, 1000, 65536, PFS_MAX_PAYLOAD};
	for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
		CHECK(pfs_lz4_bound(lens[i]) >= (size_t)LZ4_compressBound((int)lens[i]));
	CHECK(pfs_lz4_bound(PFS_MAX_PAYLOAD) <= PFS_MAX_WIRE);
}

int main(void)
{
	test_hdr_roundtrip();
	test_hdr_validation();
	test_bound();
	test_lz4_compressible();
	test_lz4_small_and_random();
	test_lz4_decompress_rejects();
	test_lz4_bomb();
	test_zr_roundtrips();
	test_zr_simd_same_bytes();
	test_zr_decode_rejects();
	test_frame_prepare();
	return check_done("test_frame");
}
