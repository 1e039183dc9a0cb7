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
	if (h->flags & PFS_FF_LZ4) {
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

size_t pfs_frame_prepare(uint8_t *hdr_out, uint64_t id, uint16_t op, uint16_t flags,
			 int32_t status, const void *payload, size_t len, bool compress,
			 void *scratch, size_t scratch_cap, const void **wire)
{
	struct pfs_frame_hdr h = {
		.wire_len = (uint32_t)len,
		.raw_len = (uint32_t)len,
		.id = id,
		.op = op,
		.flags = (uint16_t)(flags & ~PFS_FF_LZ4),
		.status = status,
	};
	size_t n = 0;

	*wire = payload;
	if (compress && scratch)
		n = pfs_lz4_maybe_compress(payload, len, scratch, scratch_cap);
	if (n) {
		h.wire_len = (uint32_t)n;
		h.flags |= PFS_FF_LZ4;
		*wire = scratch;
	}
	pfs_hdr_pack(hdr_out, &h);
	return h.wire_len;
}
