/* frame.h: the 24-byte frame header and per-frame LZ4 (see wire.h).
 *
 * Pure functions over byte buffers; no sockets. Thread-safe.
 */
#ifndef PODFS_FRAME_H
#define PODFS_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "podfs/wire.h"

/* Writes h into out[PFS_FRAME_HDR_SIZE] in little-endian order. */
void pfs_hdr_pack(uint8_t *out, const struct pfs_frame_hdr *h);

/* Reads and validates a header from in[PFS_FRAME_HDR_SIZE].
 * max_raw: the largest raw payload the receiver accepts now
 * (PFS_MAX_HANDSHAKE before auth, PFS_MAX_PAYLOAD after).
 * Returns 0, or -EBADMSG if: an unknown flag is set, op >= PFS_OP_MAX,
 * raw_len > max_raw, wire_len exceeds the LZ4 bound of raw_len, an
 * uncompressed frame has wire_len != raw_len, or an LZ4 frame has
 * raw_len == 0 or wire_len == 0. */
int pfs_hdr_unpack(const uint8_t *in, struct pfs_frame_hdr *h, size_t max_raw);

/* Capacity a compression scratch buffer needs for a payload of len bytes. */
size_t pfs_lz4_bound(size_t len);

/* Compresses src[len] into dst[cap] if that pays: len >= PFS_LZ4_MIN, a
 * quick trial on a prefix compresses, and the result saves >= 1/8.
 * Returns the compressed size, or 0 meaning "send it raw" (dst is then
 * garbage). Needs cap >= pfs_lz4_bound(len) to ever compress. */
size_t pfs_lz4_maybe_compress(const void *src, size_t len, void *dst, size_t cap);

/* Decompresses exactly raw_len bytes. src is wire_len bytes from a peer.
 * Returns 0, or -EBADMSG if the block is malformed or does not decode to
 * exactly raw_len bytes. Never writes past dst[raw_len]. */
int pfs_lz4_decompress(const void *src, size_t wire_len, void *dst, size_t raw_len);

/* Fills hdr_out and chooses the bytes to send: if compress is true and
 * compression pays (scratch must hold pfs_lz4_bound(len)), *wire points at
 * scratch and PFS_FF_LZ4 is set; otherwise *wire = payload.
 * Returns the wire length of the payload. */
size_t pfs_frame_prepare(uint8_t *hdr_out, uint64_t id, uint16_t op, uint16_t flags,
			 int32_t status, const void *payload, size_t len, bool compress,
			 void *scratch, size_t scratch_cap, const void **wire);

#endif /* PODFS_FRAME_H */
