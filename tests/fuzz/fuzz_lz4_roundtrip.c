/* fuzz_lz4_roundtrip.c: compress-if-it-pays (LZ4 and zero words), then
 * decode, must give back the input byte for byte (lz4
 * ossfuzz/round_trip_fuzzer style).
 *
 * Input: byte 0 picks a shape, so that short fuzz inputs also reach the
 * compressing path: 0 = the rest as is; 1 = each byte repeated
 * 1 + byte1 % 16 times; 2 = the rest tiled to (byte1 + 1) KiB.
 * Properties: a compressed result is only produced for payloads of at
 * least PFS_LZ4_MIN bytes, saves at least 1/8, round-trips exactly, and
 * does not decode to any other length; the same for zero-word coding;
 * pfs_frame_prepare agrees (with LZ4 only) and, with both codings, picks one
 * that round-trips and whose header passes pfs_hdr_unpack.
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "podfs/frame.h"

static size_t shape(const uint8_t *data, size_t size, uint8_t **out)
{
	size_t n = 0;
	uint8_t *p;
	if (size < 2 || data[0] % 3 == 0) {
		n = size > 1 ? size - 1 : 0;
		p = malloc(n ? n : 1);
		FUZZ_ASSERT(p != NULL);
		if (n)
			memcpy(p, data + 1, n);
	} else if (data[0] % 3 == 1) {
		size_t rep = 1 + data[1] % 16, in = size - 2;
		if (in > PFS_MAX_PAYLOAD / rep)
			in = PFS_MAX_PAYLOAD / rep;
		n = in * rep;
		p = malloc(n ? n : 1);
		FUZZ_ASSERT(p != NULL);
		for (size_t i = 0; i < in; i++)
			memset(p + i * rep, data[2 + i], rep);
	} else {
		size_t in = size - 2;
		n = in ? ((size_t)data[1] + 1) * 1024 : 0;
		p = malloc(n ? n : 1);
		FUZZ_ASSERT(p != NULL);
		for (size_t i = 0; i < n; i++)
			p[i] = data[2 + i % in];
	}
	*out = p;
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *src, *dst, *back, *scratch;
	uint8_t hdr[PFS_FRAME_HDR_SIZE];
	struct pfs_frame_hdr h;
	const void *wire;
	size_t n = shape(data, size, &src), cap = pfs_lz4_bound(n), c, wl;

	dst = malloc(cap);
	scratch = malloc(cap);
	back = malloc(n + 1);
	FUZZ_ASSERT(dst && scratch && back);

	c = pfs_lz4_maybe_compress(src, n, dst, cap);
	if (c) {
		FUZZ_ASSERT(n >= PFS_LZ4_MIN && n <= PFS_MAX_PAYLOAD);
		FUZZ_ASSERT(c <= n - n / 8 && c <= cap);
		/* Exact-size copies, so reads past the block or writes past
		 * raw_len are caught. */
		uint8_t *blk = malloc(c), *exact = malloc(n);
		FUZZ_ASSERT(blk && exact);
		memcpy(blk, dst, c);
		FUZZ_ASSERT(pfs_lz4_decompress(blk, c, exact, n) == 0);
		FUZZ_ASSERT(memcmp(exact, src, n) == 0);
		FUZZ_ASSERT(pfs_lz4_decompress(blk, c, exact, n - 1) == -EBADMSG);
		FUZZ_ASSERT(pfs_lz4_decompress(blk, c, back, n + 1) == -EBADMSG);
		free(blk);
		free(exact);
	}

	c = pfs_zr_maybe_encode(src, n, dst, cap);
	if (c) {
		FUZZ_ASSERT(n >= PFS_LZ4_MIN && n <= PFS_MAX_PAYLOAD && c <= n - n / 8);
		uint8_t *blk = malloc(c), *exact = malloc(n);
		FUZZ_ASSERT(blk && exact);
		memcpy(blk, dst, c);
		FUZZ_ASSERT(pfs_zr_decode(blk, c, exact, n) == 0);
		FUZZ_ASSERT(memcmp(exact, src, n) == 0);
		FUZZ_ASSERT(pfs_zr_decode(blk, c, exact, n - 1) == -EBADMSG);
		FUZZ_ASSERT(pfs_zr_decode(blk, c, back, n + 1) == -EBADMSG);
		free(blk);
		free(exact);
	}
	wl = pfs_frame_prepare(hdr, 2, PFS_OP_WRITE, 0, 0, src, n, PFS_CAPS_CODECS, scratch, cap,
			       &wire);
	FUZZ_ASSERT(pfs_hdr_unpack(hdr, &h, PFS_MAX_PAYLOAD) == (n <= PFS_MAX_PAYLOAD ? 0 : -EBADMSG));
	FUZZ_ASSERT(h.raw_len == n && h.wire_len == wl);
	if (h.flags & PFS_FF_CODED) {
		FUZZ_ASSERT(wire == scratch && wl <= n - n / 8);
		FUZZ_ASSERT(pfs_payload_decode(h.flags, scratch, wl, back, n) == 0);
		FUZZ_ASSERT(memcmp(back, src, n) == 0);
	} else {
		FUZZ_ASSERT(wire == src && wl == n);
	}
	c = pfs_lz4_maybe_compress(src, n, dst, cap);

	wl = pfs_frame_prepare(hdr, 1, PFS_OP_WRITE, 0, 0, src, n, PFS_CAP_LZ4, scratch, cap, &wire);
	FUZZ_ASSERT(pfs_hdr_unpack(hdr, &h, PFS_MAX_PAYLOAD) == (n <= PFS_MAX_PAYLOAD ? 0 : -EBADMSG));
	FUZZ_ASSERT(h.raw_len == n && h.wire_len == wl);
	if (c) {
		FUZZ_ASSERT(h.flags == PFS_FF_LZ4 && wire == scratch && wl == c);
		FUZZ_ASSERT(memcmp(scratch, dst, c) == 0); /* deterministic */
	} else {
		FUZZ_ASSERT(h.flags == 0 && wire == src && wl == n);
	}

	free(src);
	free(dst);
	free(scratch);
	free(back);
	return 0;
}
