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
 * uncompressed frame has wire_len != raw_len, an LZ4 frame has
 * raw_len == 0 or wire_len == 0, a zero-word frame has wire_len == 0 or
 * wire_len > raw_len, or both PFS_FF_LZ4 and PFS_FF_ZR are set. */
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

/* Zero-word codes src[len] into dst[cap] (format in wire.h) if that pays:
 * len >= PFS_LZ4_MIN, a quick trial on 4 KiB from the middle has zero
 * words, and the result saves >= 1/8. The cost is one branch-free pass
 * over src that copies its non-zero words: no entropy coding.
 * Returns the coded size, or 0 meaning "send it raw" (dst is then garbage).
 * Never writes past dst[cap]. */
size_t pfs_zr_maybe_encode(const void *src, size_t len, void *dst, size_t cap);

/* Expands a zero-word coded block of wire_len bytes from a peer into exactly
 * raw_len bytes. Returns 0, or -EBADMSG if the block is malformed (see
 * wire.h) or does not expand to exactly raw_len bytes, or raw_len is 0 or
 * over PFS_MAX_PAYLOAD. Never writes past dst[raw_len]. */
int pfs_zr_decode(const void *src, size_t wire_len, void *dst, size_t raw_len);

/* Whether zero-word coding uses the CPU's AVX-512 (same bytes, faster).
 * on = 0 or 1 turns it off or back on where the CPU has it (tests);
 * on < 0 only asks. Call before threads code or decode. */
bool pfs_zr_simd(int on);

/* Decodes a payload according to the PFS_FF_CODED bits of flags (exactly
 * one must be set): pfs_lz4_decompress or pfs_zr_decode. Same returns. */
int pfs_payload_decode(uint16_t flags, const void *src, size_t wire_len, void *dst,
		       size_t raw_len);

/* Whether a payload whose middle looks like sample[len] (at most 4 KiB
 * are looked at) might be coded by pfs_frame_prepare with these codecs:
 * the trials it runs. False means it would surely go out raw. */
bool pfs_frame_may_code(const void *sample, size_t len, unsigned codecs);

/* Fills hdr_out and chooses the bytes to send. codecs is the set of
 * PFS_CAP_LZ4 / PFS_CAP_ZR codings the peer accepts (0: send raw).
 * Policy: zero-word coding first (nearly free); it is kept if it halves the
 * payload; otherwise LZ4 is tried and the smaller result that saves >= 1/8
 * wins. Incompressible data is rejected by two 4 KiB trials. When a coding
 * is used (scratch must hold pfs_lz4_bound(len)), *wire points at scratch
 * and PFS_FF_LZ4 or PFS_FF_ZR is set; otherwise *wire = payload and both
 * are clear. Returns the wire length of the payload. */
size_t pfs_frame_prepare(uint8_t *hdr_out, uint64_t id, uint16_t op, uint16_t flags,
			 int32_t status, const void *payload, size_t len, unsigned codecs,
			 void *scratch, size_t scratch_cap, const void **wire);

/* Process start-up, before threads: makes malloc keep payload-sized
 * buffers (up to a few MiB) in its heap instead of mapping and unmapping
 * each one, so that the many 1 MiB buffers a stream allocates and frees
 * do not each cost page faults, zeroing and TLB shootdowns. Freed memory
 * is returned to the system only beyond 128 MiB of free heap. */
void pfs_payload_alloc_tune(void);

#endif /* PODFS_FRAME_H */
