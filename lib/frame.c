/* frame.c: the frame header and the per-frame LZ4 decision (see frame.h). */
#include "podfs/frame.h"

#include <errno.h>
#include <lz4.h>
#include <malloc.h>
#include <string.h>
#ifdef __x86_64__
#include <immintrin.h>
#endif

#include "podfs/le.h"

void pfs_hdr_pack(uint8_t *out, const struct pfs_frame_hdr *h)
{
	pfs_store_le32(out, h->wire_len);
	pfs_store_le32(out + 4, h->raw_len);
	pfs_store_le64(out + 8, h->id);
	pfs_store_le16(out + 16, h->op);
	pfs_store_le16(out + 18, h->flags);
	pfs_store_le32(out + 20, (uint32_t)h->status);
}

size_t pfs_lz4_bound(size_t len)
{
	/* LZ4_COMPRESSBOUND, computed without its int overflow limits. */
	return len + len / 255 + 16;
}

int pfs_hdr_unpack(const uint8_t *in, struct pfs_frame_hdr *h, size_t max_raw)
{
	h->wire_len = pfs_load_le32(in);
	h->raw_len = pfs_load_le32(in + 4);
	h->id = pfs_load_le64(in + 8);
	h->op = pfs_load_le16(in + 16);
	h->flags = pfs_load_le16(in + 18);
	h->status = (int32_t)pfs_load_le32(in + 20);

	if (h->flags & ~PFS_FF_KNOWN || h->op >= PFS_OP_MAX)
		return -EBADMSG;
	if (max_raw > PFS_MAX_PAYLOAD)
		max_raw = PFS_MAX_PAYLOAD;
	if (h->raw_len > max_raw)
		return -EBADMSG;
	if ((h->flags & PFS_FF_CODED) == PFS_FF_CODED)
		return -EBADMSG;
	if (h->flags & PFS_FF_ZR) {
		if (h->wire_len == 0 || h->wire_len > h->raw_len)
			return -EBADMSG;
	} else if (h->flags & PFS_FF_LZ4) {
		if (h->raw_len == 0 || h->wire_len == 0 || h->wire_len > pfs_lz4_bound(h->raw_len))
			return -EBADMSG;
	} else if (h->wire_len != h->raw_len) {
		return -EBADMSG;
	}
	if (h->status < 0)
		return -EBADMSG;
	return 0;
}

/* Bytes of the payload a trial compression looks at before committing to
 * the whole buffer: random data (float weights) is rejected after 4 KiB,
 * so incompressible payloads cost almost no CPU. */
#define TRIAL_LEN 4096

size_t pfs_lz4_maybe_compress(const void *src, size_t len, void *dst, size_t cap)
{
	int n;
	if (len < PFS_LZ4_MIN || len > PFS_MAX_PAYLOAD || cap < pfs_lz4_bound(len))
		return 0;
	if (len > 4 * TRIAL_LEN) {
		/* Sample the middle of the payload: headers at the start of a
		 * file often compress even when the body does not. */
		const char *mid = (const char *)src + (len / 2 - TRIAL_LEN / 2);
		n = LZ4_compress_default(mid, dst, TRIAL_LEN, (int)cap);
		if (n <= 0 || (size_t)n > TRIAL_LEN - TRIAL_LEN / 8)
			return 0;
	}
	n = LZ4_compress_default(src, dst, (int)len, (int)cap);
	if (n <= 0 || (size_t)n > len - len / 8)
		return 0;
	return (size_t)n;
}

int pfs_lz4_decompress(const void *src, size_t wire_len, void *dst, size_t raw_len)
{
	int n;
	if (wire_len == 0 || wire_len > PFS_MAX_WIRE || raw_len > PFS_MAX_PAYLOAD)
		return -EBADMSG;
	n = LZ4_decompress_safe(src, dst, (int)wire_len, (int)raw_len);
	if (n < 0 || (size_t)n != raw_len)
		return -EBADMSG;
	return 0;
}

/* --- zero-word coding (format in wire.h) --- */

/* A word as it lies in memory: only compared with zero and copied. */
static uint64_t load64(const uint8_t *p)
{
	uint64_t w;
	memcpy(&w, p, sizeof(w));
	return w;
}

/* Whole groups (PFS_ZR_GROUP words) with AVX-512 where the CPU has it:
 * one compress (encode) or expand (decode) instruction moves the non-zero
 * words of 8 at once, against a word at a time in the portable loops. The
 * bytes on the wire are the same. */
static bool zr_simd;

#ifdef __x86_64__
__attribute__((constructor)) static void zr_simd_init(void)
{
	__builtin_cpu_init();
	zr_simd = __builtin_cpu_supports("avx512f");
}

/* Codes the 64 words at s into out (room for 512 bytes: each 64-byte
 * store may write past the words it keeps, within that room); returns
 * the end of what it kept and *mask. */
__attribute__((target("avx512f,popcnt"))) static uint8_t *
zr_group_encode_avx512(const uint8_t *s, uint8_t *out, uint64_t *mask)
{
	uint64_t m = 0;

	for (int k = 0; k < 8; k++) {
		__m512i v = _mm512_loadu_si512((const void *)(s + 64 * k));
		__mmask8 nz = _mm512_test_epi64_mask(v, v);
		_mm512_storeu_si512((void *)out, _mm512_maskz_compress_epi64(nz, v));
		out += 8 * __builtin_popcount(nz);
		m |= (uint64_t)nz << (8 * k);
	}
	*mask = m;
	return out;
}

/* Expands the kept words at s into the 64 words at d (the caller checked
 * that s holds 8 * popcount(mask) bytes: the loads read no more). Returns
 * the bytes of s used. */
__attribute__((target("avx512f,popcnt"))) static size_t
zr_group_decode_avx512(const uint8_t *s, uint64_t mask, uint8_t *d)
{
	size_t p = 0;

	for (int k = 0; k < 8; k++) {
		__mmask8 m = (__mmask8)(mask >> (8 * k));
		__m512i v = _mm512_maskz_expandloadu_epi64(m, (const void *)(s + p));
		_mm512_storeu_si512((void *)(d + 64 * k), v);
		p += 8 * (size_t)__builtin_popcount(m);
	}
	return p;
}
#else
static uint8_t *zr_group_encode_avx512(const uint8_t *s, uint8_t *out, uint64_t *mask)
{
	(void)s;
	(void)mask;
	return out; /* never called: zr_simd is false */
}

static size_t zr_group_decode_avx512(const uint8_t *s, uint64_t mask, uint8_t *d)
{
	(void)s;
	(void)mask;
	(void)d;
	return 0;
}
#endif

bool pfs_zr_simd(int on)
{
#ifdef __x86_64__
	if (on >= 0)
		zr_simd = on && __builtin_cpu_supports("avx512f");
#else
	(void)on;
#endif
	return zr_simd;
}

/* Codes src[len] into dst; 0 if the result would exceed lim bytes or a
 * group might not fit in cap (the physical size of dst). */
static size_t zr_encode(const uint8_t *s, size_t len, uint8_t *dst, size_t cap, size_t lim)
{
	size_t nw = len / 8, tail = len % 8, o = 0;

	for (size_t g = 0; g < nw; g += PFS_ZR_GROUP) {
		size_t n = nw - g < PFS_ZR_GROUP ? nw - g : PFS_ZR_GROUP;
		uint64_t mask = 0;
		uint8_t *out;

		/* Each word is stored whether or not it is kept: room for all. */
		if (cap - o < 8 + 8 * n)
			return 0;
		out = dst + o + 8;
		if (n == PFS_ZR_GROUP && zr_simd) {
			out = zr_group_encode_avx512(s + 8 * g, out, &mask);
			n = 0;
		}
		for (size_t i = 0; i < n; i++) {
			uint64_t w = load64(s + 8 * (g + i));
			uint64_t nz = w != 0;
			memcpy(out, &w, 8);
			out += 8 * nz;
			mask |= nz << i;
		}
		pfs_store_le64(dst + o, mask);
		o = (size_t)(out - dst);
		if (o > lim)
			return 0;
	}
	if (tail) {
		if (lim - o < tail)
			return 0;
		memcpy(dst + o, s + 8 * nw, tail);
		o += tail;
	}
	return o;
}

size_t pfs_zr_maybe_encode(const void *src, size_t len, void *dst, size_t cap)
{
	if (len < PFS_LZ4_MIN || len > PFS_MAX_PAYLOAD)
		return 0;
	if (len > 4 * TRIAL_LEN) {
		uint8_t trial[TRIAL_LEN + 8 * (TRIAL_LEN / 8 / PFS_ZR_GROUP)];
		const uint8_t *mid = (const uint8_t *)src + (len / 2 - TRIAL_LEN / 2);
		if (!zr_encode(mid, TRIAL_LEN, trial, sizeof(trial), TRIAL_LEN - TRIAL_LEN / 8))
			return 0;
	}
	return zr_encode(src, len, dst, cap, len - len / 8);
}

int pfs_zr_decode(const void *src, size_t wire_len, void *dst, size_t raw_len)
{
	const uint8_t *s = src;
	uint8_t *d = dst;
	size_t nw, tail, p = 0;

	if (wire_len == 0 || wire_len > PFS_MAX_WIRE || raw_len == 0 || raw_len > PFS_MAX_PAYLOAD)
		return -EBADMSG;
	nw = raw_len / 8;
	tail = raw_len % 8;
	for (size_t g = 0; g < nw; g += PFS_ZR_GROUP) {
		size_t n = nw - g < PFS_ZR_GROUP ? nw - g : PFS_ZR_GROUP;
		uint64_t mask;

		if (wire_len - p < 8)
			return -EBADMSG;
		mask = pfs_load_le64(s + p);
		p += 8;
		if (n < PFS_ZR_GROUP && mask >> n)
			return -EBADMSG;
		if (wire_len - p < 8 * (size_t)__builtin_popcountll(mask))
			return -EBADMSG;
		if (n == PFS_ZR_GROUP && zr_simd) {
			p += zr_group_decode_avx512(s + p, mask, d);
			d += 8 * PFS_ZR_GROUP;
		} else if (wire_len - p >= 8 * n) {
			/* Room to load a word for every position: no branches
			 * (a zero word loads the next present one and masks
			 * it off). */
			for (size_t i = 0; i < n; i++, d += 8) {
				uint64_t nz = mask >> i & 1, w = load64(s + p) & -nz;
				memcpy(d, &w, 8);
				p += 8 * nz;
			}
		} else {
			for (size_t i = 0; i < n; i++, d += 8) {
				if (mask >> i & 1) {
					memcpy(d, s + p, 8);
					p += 8;
				} else {
					memset(d, 0, 8);
				}
			}
		}
	}
	if (wire_len - p != tail)
		return -EBADMSG;
	memcpy(d, s + p, tail);
	return 0;
}

bool pfs_frame_may_code(const void *sample, size_t len, unsigned codecs)
{
	uint8_t buf[TRIAL_LEN + TRIAL_LEN / 255 + 16];
	int n;

	if (len > TRIAL_LEN)
		len = TRIAL_LEN;
	if (len < 8)
		return false;
	if ((codecs & PFS_CAP_ZR) && zr_encode(sample, len, buf, sizeof(buf), len - len / 8))
		return true;
	if (codecs & PFS_CAP_LZ4) {
		n = LZ4_compress_default(sample, (char *)buf, (int)len, (int)sizeof(buf));
		if (n > 0 && (size_t)n <= len - len / 8)
			return true;
	}
	return false;
}

int pfs_payload_decode(uint16_t flags, const void *src, size_t wire_len, void *dst,
		       size_t raw_len)
{
	switch (flags & PFS_FF_CODED) {
	case PFS_FF_LZ4:
		return pfs_lz4_decompress(src, wire_len, dst, raw_len);
	case PFS_FF_ZR:
		return pfs_zr_decode(src, wire_len, dst, raw_len);
	default:
		return -EBADMSG;
	}
}

size_t pfs_frame_prepare(uint8_t *hdr_out, uint64_t id, uint16_t op, uint16_t flags,
			 int32_t status, const void *payload, size_t len, unsigned codecs,
			 void *scratch, size_t scratch_cap, const void **wire)
{
	struct pfs_frame_hdr h = {
		.wire_len = (uint32_t)len,
		.raw_len = (uint32_t)len,
		.id = id,
		.op = op,
		.flags = (uint16_t)(flags & ~PFS_FF_CODED),
		.status = status,
	};
	size_t n = 0, z = 0;

	*wire = payload;
	if (!scratch || len < PFS_LZ4_MIN || scratch_cap < pfs_lz4_bound(len))
		codecs = 0;
	/* Zero words first: they cost one pass. Half the size is good
	 * enough not to spend LZ4's CPU on the rest. */
	if (codecs & PFS_CAP_ZR)
		z = pfs_zr_maybe_encode(payload, len, scratch, scratch_cap);
	if (z && z <= len / 2) {
		h.wire_len = (uint32_t)z;
		h.flags |= PFS_FF_ZR;
		*wire = scratch;
	} else if (codecs & PFS_CAP_LZ4) {
		n = pfs_lz4_maybe_compress(payload, len, scratch, scratch_cap);
		if (n && (!z || n < z)) {
			h.wire_len = (uint32_t)n;
			h.flags |= PFS_FF_LZ4;
			*wire = scratch;
		} else if (z) {
			/* LZ4 overwrote the scratch: code the zero words again. */
			z = pfs_zr_maybe_encode(payload, len, scratch, scratch_cap);
			h.wire_len = (uint32_t)z;
			h.flags |= PFS_FF_ZR;
			*wire = scratch;
		}
	} else if (z) {
		h.wire_len = (uint32_t)z;
		h.flags |= PFS_FF_ZR;
		*wire = scratch;
	}
	pfs_hdr_pack(hdr_out, &h);
	return h.wire_len;
}

void pfs_payload_alloc_tune(void)
{
	/* Measured on 2 GiB streams (cold read, float32 write): 5-25%
	 * faster, ~10% less CPU on both sides. */
	mallopt(M_MMAP_THRESHOLD, 4 * 1024 * 1024);
	mallopt(M_TRIM_THRESHOLD, 128 * 1024 * 1024);
}
