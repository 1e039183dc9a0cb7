/* pcache_fmt.h: the on-disk format of one persistent-cache entry.
 *
 * Pure functions (no I/O, no allocation), tested in tests/unit.
 *
 * An entry is one file: a header, a table with the CRC32C of each
 * PCF_BLOCK bytes of the content, then the file's whole content.
 *
 *   offset size
 *        0    8  magic "PODFSPC2"
 *        8    4  header length in bytes (PCF_FIXED + fh_len), LE
 *       12    4  fh_len (1..PFS_FH_MAX), LE
 *       16    8  data length = the file size of the version, LE
 *       24    8  mtime seconds (signed), LE
 *       32    8  ctime seconds (signed), LE
 *       40    4  mtime nanoseconds, LE
 *       44    4  ctime nanoseconds, LE
 *       48    4  log2 of the block size, PCF_BLOCK_LOG2, LE
 *       52    4  CRC32C (podfs/crc32c.h) of the header bytes 0..55 with this field as 0,
 *                then of the handle bytes, LE
 *       56   fh_len  the server handle (MAC'd bytes, as the client holds it)
 *  hdr_len  4*n  CRC32C of each block of the data (n = pcf_nblocks), LE
 * data_off  size the content (data_off = pcf_data_off)
 *
 * The version (size, mtime, ctime) and the handle together are the key: an
 * entry is served only for exactly that handle and version. The header
 * checksum lets a reader trust the key fields before touching the data;
 * the blocks a read covers are checked against the table on every read
 * (a damaged table entry makes its block fail, never pass).
 */
#ifndef PODFS_PCACHE_FMT_H
#define PODFS_PCACHE_FMT_H

#include <stddef.h>
#include <stdint.h>

#define PCF_MAGIC "PODFSPC2"
#define PCF_FIXED 56u
#define PCF_FH_MAX 255u /* >= PFS_FH_MAX (checked in pcache.c) */
#define PCF_HDR_MAX (PCF_FIXED + PCF_FH_MAX)
#define PCF_BLOCK_LOG2 16
#define PCF_BLOCK (1u << PCF_BLOCK_LOG2)

struct pcf_key {
	uint8_t fh_len;
	uint8_t fh[PCF_FH_MAX];
	uint64_t size;
	int64_t mtime_s, ctime_s;
	uint32_t mtime_ns, ctime_ns;
};

/* Writes the header of key k into out (capacity cap). Returns the header
 * length, or -EINVAL if k->fh_len is 0, -ENOBUFS if cap is too small. */
int pcf_encode(const struct pcf_key *k, uint8_t *out, size_t cap);

/* Parses a header from in[len] (len may be more than the header). On
 * success fills *k and *hdr_len and returns 0; returns -EBADMSG for a
 * bad magic, length, block size or header checksum, -ENODATA if len is
 * shorter than the header claims. Never reads past in[len]. */
int pcf_decode(const uint8_t *in, size_t len, struct pcf_key *k, size_t *hdr_len);

/* Blocks (table entries) of content of size bytes. */
uint64_t pcf_nblocks(uint64_t size);
/* Offset of the content in an entry with a hdr_len-byte header. */
uint64_t pcf_data_off(size_t hdr_len, uint64_t size);

/* Writes the checksums of data[len] (whole blocks, the last one may be
 * short: the end of the content) into table (4 bytes per block). */
void pcf_block_crcs(const uint8_t *data, size_t len, uint8_t *table);
/* Checks data[len] (blocks as for pcf_block_crcs) against table.
 * Returns 0, or -EBADMSG at the first block that does not match. */
int pcf_check_blocks(const uint8_t *data, size_t len, const uint8_t *table);

/* The HASH of an entry's file name e/HASH (16 hex digits, pcache_i.h):
 * FNV-1a of the handle bytes, then the first steps of MurmurHash3's
 * fmix64. Part of the format: another function would orphan every entry
 * of an existing cache. Not a security boundary (two handles with one
 * name only evict each other). */
uint64_t pcf_name_hash(const uint8_t *fh, size_t len);

/* True if a and b name the same handle and version. */
int pcf_key_eq(const struct pcf_key *a, const struct pcf_key *b);

#endif /* PODFS_PCACHE_FMT_H */
