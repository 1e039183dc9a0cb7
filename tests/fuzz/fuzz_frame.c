/* fuzz_frame.c: the frame header check and the payload decoders (LZ4 and
 * zero words) on arbitrary bytes: a 24-byte header, then the payload.
 *
 * Properties: unpack never crashes and accepts only headers within the
 * limits of wire.h; an accepted header packs back to the same bytes; each
 * decoder, given raw_len from the header, never writes past raw_len (each
 * output buffer is exactly raw_len bytes on the heap) and refuses any
 * raw_len over PFS_MAX_PAYLOAD without touching its output.
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "podfs/frame.h"

static void try_decompress(uint16_t coding, const uint8_t *payload, size_t wire_len,
			   size_t raw_len)
{
	/* Copy the payload so that it ends where the heap block does. */
	uint8_t *src = malloc(wire_len ? wire_len : 1);
	FUZZ_ASSERT(src != NULL);
	if (wire_len)
		memcpy(src, payload, wire_len);
	if (raw_len > PFS_MAX_PAYLOAD) {
		uint8_t guard = 0x5a;
		FUZZ_ASSERT(pfs_payload_decode(coding, src, wire_len, &guard, raw_len) == -EBADMSG);
		FUZZ_ASSERT(guard == 0x5a);
	} else {
		uint8_t *dst = malloc(raw_len ? raw_len : 1);
		FUZZ_ASSERT(dst != NULL);
		int rc = pfs_payload_decode(coding, src, wire_len, dst, raw_len);
		FUZZ_ASSERT(rc == 0 || rc == -EBADMSG);
		if (wire_len == 0 || wire_len > PFS_MAX_WIRE)
			FUZZ_ASSERT(rc == -EBADMSG);
		free(dst);
	}
	free(src);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pfs_frame_hdr h, hh;
	uint8_t back[PFS_FRAME_HDR_SIZE];
	const uint8_t *payload;
	size_t plen;
	int rc, rch;

	if (size < PFS_FRAME_HDR_SIZE)
		return 0;
	payload = data + PFS_FRAME_HDR_SIZE;
	plen = size - PFS_FRAME_HDR_SIZE;

	rch = pfs_hdr_unpack(data, &hh, PFS_MAX_HANDSHAKE);
	rc = pfs_hdr_unpack(data, &h, PFS_MAX_PAYLOAD);
	FUZZ_ASSERT(rc == 0 || rc == -EBADMSG);
	FUZZ_ASSERT(rch == 0 || rch == -EBADMSG);
	/* The handshake limit is stricter, never looser. */
	if (rch == 0)
		FUZZ_ASSERT(rc == 0);
	if (rc == 0) {
		FUZZ_ASSERT(h.raw_len <= PFS_MAX_PAYLOAD && h.wire_len <= PFS_MAX_WIRE);
		FUZZ_ASSERT((h.flags & ~PFS_FF_KNOWN) == 0 && h.op < PFS_OP_MAX && h.status >= 0);
		FUZZ_ASSERT((h.flags & PFS_FF_CODED) != PFS_FF_CODED);
		if (h.flags & PFS_FF_LZ4)
			FUZZ_ASSERT(h.raw_len > 0 && h.wire_len > 0 &&
				    h.wire_len <= pfs_lz4_bound(h.raw_len));
		else if (h.flags & PFS_FF_ZR)
			FUZZ_ASSERT(h.wire_len > 0 && h.wire_len <= h.raw_len);
		else
			FUZZ_ASSERT(h.wire_len == h.raw_len);
		pfs_hdr_pack(back, &h);
		FUZZ_ASSERT(memcmp(back, data, PFS_FRAME_HDR_SIZE) == 0);

		/* What a receiver does: decode wire_len bytes to raw_len. */
		if ((h.flags & PFS_FF_CODED) && h.wire_len <= plen)
			try_decompress(h.flags & PFS_FF_CODED, payload, h.wire_len, h.raw_len);
	}
	/* And whatever the header says, both decoders must cope with the
	 * rest of the input as a block of the claimed raw_len. */
	try_decompress(PFS_FF_LZ4, payload, plen, h.raw_len);
	try_decompress(PFS_FF_ZR, payload, plen, h.raw_len);
	return 0;
}
