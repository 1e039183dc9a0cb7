/* frame.c: the frame header and the per-frame LZ4 decision (see frame.h). */
#include "podfs/frame.h"

#include <errno.h>
#include <lz4.h>
#include <string.h>

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void pfs_hdr_pack(uint8_t *out, const struct pfs_frame_hdr *h)
{
	put32(out, h->wire_len);
	put32(out + 4, h->raw_len);
	put32(out + 8, (uint32_t)h->id);
	put32(out + 12, (uint32_t)(h->id >> 32));
	out[16] = (uint8_t)h->op;
	out[17] = (uint8_t)(h->op >> 8);
	out[18] = (uint8_t)h->flags;
	out[19] = (uint8_t)(h->flags >> 8);
	put32(out + 20, (uint32_t)h->status);
}

size_t pfs_lz4_bound(size_t len)
{
	/* LZ4_COMPRESSBOUND, computed without its int overflow limits. */
	return len + len / 255 + 16;
}

int pfs_hdr_unpack(const uint8_t *in, struct pfs_frame_hdr *h, size_t max_raw)
{
	h->wire_len = get32(in);
	h->raw_len = get32(in + 4);
	h->id = (uint64_t)get32(in + 8) | (uint64_t)get32(in + 12) << 32;
	h->op = (uint16_t)(in[16] | in[17] << 8);
	h->flags = (uint16_t)(in[18] | in[19] << 8);
	h->status = (int32_t)get32(in + 20);

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

/* --- zero-run coding (format in wire.h) --- */

/* Zero bytes a run needs before it ends a literal: a record costs 2 to 6
 * bytes, and runs are found through aligned-or-not 8-byte words anyway. */
#define ZR_MIN_RUN 8

static size_t put_varint(uint8_t *p, uint32_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

/* Reads a 1-3 byte varint at src[*pos..len); -1 if truncated or too long. */
static int get_varint(const uint8_t *src, size_t len, size_t *pos, uint32_t *out)
{
	uint32_t v = 0;
	for (unsigned i = 0; i < 3; i++) {
		if (*pos >= len)
			return -1;
		uint8_t b = src[(*pos)++];
		v |= (uint32_t)(b & 0x7f) << (7 * i);
		if (!(b & 0x80)) {
			*out = v;
			return 0;
		}
	}
	return -1;
}

static uint64_t load64(const uint8_t *p)
{
	uint64_t w;
	memcpy(&w, p, sizeof(w));
	return w;
}

/* Appends one record (src[lit..lit+n) then z zeros) at out[*o..cap). */
static bool zr_record(uint8_t *out, size_t cap, size_t *o, const uint8_t *lit, size_t n,
		      size_t z)
{
	if (cap - *o < n + 6)
		return false;
	*o += put_varint(out + *o, (uint32_t)n);
	memcpy(out + *o, lit, n);
	*o += n;
	*o += put_varint(out + *o, (uint32_t)z);
	return true;
}

/* Codes src[len] into dst[cap]; 0 if it does not fit. len <= PFS_MAX_PAYLOAD
 * keeps every varint below 2^21. */
static size_t zr_encode(const uint8_t *s, size_t len, uint8_t *dst, size_t cap)
{
	size_t o = 0, lit = 0, i = 0;

	while (i + 8 <= len) {
		if (load64(s + i)) {
			i += 8;
			continue;
		}
		/* A zero word: find the whole run, bytewise at its edges. */
		size_t zs = i, ze = i + 8;
		while (ze + 8 <= len && load64(s + ze) == 0)
			ze += 8;
		while (ze < len && s[ze] == 0)
			ze++;
		while (zs > lit && s[zs - 1] == 0)
			zs--;
		if (ze - zs >= ZR_MIN_RUN) {
			if (!zr_record(dst, cap, &o, s + lit, zs - lit, ze - zs))
				return 0;
			lit = ze;
		}
		i = ze;
	}
	if (lit < len && !zr_record(dst, cap, &o, s + lit, len - lit, 0))
		return 0;
	return o;
}

size_t pfs_zr_maybe_encode(const void *src, size_t len, void *dst, size_t cap)
{
	if (len < PFS_LZ4_MIN || len > PFS_MAX_PAYLOAD)
		return 0;
	if (len > 4 * TRIAL_LEN) {
		uint8_t trial[TRIAL_LEN];
		const uint8_t *mid = (const uint8_t *)src + (len / 2 - TRIAL_LEN / 2);
		if (!zr_encode(mid, TRIAL_LEN, trial, TRIAL_LEN - TRIAL_LEN / 8))
			return 0;
	}
	if (cap > len - len / 8)
		cap = len - len / 8;
	return zr_encode(src, len, dst, cap);
}

int pfs_zr_decode(const void *src, size_t wire_len, void *dst, size_t raw_len)
{
	const uint8_t *s = src;
	uint8_t *d = dst;
	size_t p = 0, o = 0;

	if (wire_len == 0 || wire_len > PFS_MAX_WIRE || raw_len == 0 || raw_len > PFS_MAX_PAYLOAD)
		return -EBADMSG;
	while (p < wire_len) {
		uint32_t n, z;
		if (get_varint(s, wire_len, &p, &n) < 0 || n > wire_len - p || n > raw_len - o)
			return -EBADMSG;
		memcpy(d + o, s + p, n);
		p += n;
		o += n;
		if (get_varint(s, wire_len, &p, &z) < 0 || z > raw_len - o || (n == 0 && z == 0))
			return -EBADMSG;
		memset(d + o, 0, z);
		o += z;
	}
	return o == raw_len ? 0 : -EBADMSG;
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
	/* Zero runs first: they cost a scan. Half the size is good enough
	 * not to spend LZ4's CPU on the rest. */
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
			/* LZ4 overwrote the scratch: code the zero runs again. */
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
