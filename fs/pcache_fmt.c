/* pcache_fmt.c: persistent-cache entry header (see pcache_fmt.h). */
#include "pcache_fmt.h"

#include <errno.h>
#include <string.h>

#include "podfs/crc32c.h"
#include "podfs/hash.h"
#include "podfs/le.h"

/* The header checksum: fixed part with its own field zeroed, then the handle. */
static uint32_t hdr_crc(const uint8_t *h, size_t fh_len)
{
	uint8_t fixed[PCF_FIXED];
	memcpy(fixed, h, PCF_FIXED);
	pfs_store_le32(fixed + 52, 0);
	uint32_t crc = pfs_crc32c(0, fixed, PCF_FIXED);
	return pfs_crc32c(crc, h + PCF_FIXED, fh_len);
}

int pcf_encode(const struct pcf_key *k, uint8_t *out, size_t cap)
{
	if (k->fh_len == 0)
		return -EINVAL; /* and fh_len <= PCF_FH_MAX by its type */
	size_t n = PCF_FIXED + k->fh_len;
	if (cap < n)
		return -ENOBUFS;
	memcpy(out, PCF_MAGIC, 8);
	pfs_store_le32(out + 8, (uint32_t)n);
	pfs_store_le32(out + 12, k->fh_len);
	pfs_store_le64(out + 16, k->size);
	pfs_store_le64(out + 24, (uint64_t)k->mtime_s);
	pfs_store_le64(out + 32, (uint64_t)k->ctime_s);
	pfs_store_le32(out + 40, k->mtime_ns);
	pfs_store_le32(out + 44, k->ctime_ns);
	pfs_store_le32(out + 48, PCF_BLOCK_LOG2);
	memcpy(out + PCF_FIXED, k->fh, k->fh_len);
	pfs_store_le32(out + 52, hdr_crc(out, k->fh_len));
	return (int)n;
}

int pcf_decode(const uint8_t *in, size_t len, struct pcf_key *k, size_t *hdr_len)
{
	if (len < PCF_FIXED)
		return len >= 8 && memcmp(in, PCF_MAGIC, 8) != 0 ? -EBADMSG : -ENODATA;
	if (memcmp(in, PCF_MAGIC, 8) != 0)
		return -EBADMSG;
	uint32_t n = pfs_load_le32(in + 8), fh_len = pfs_load_le32(in + 12);
	if (fh_len == 0 || fh_len > PCF_FH_MAX || n != PCF_FIXED + fh_len)
		return -EBADMSG;
	if (len - PCF_FIXED < fh_len)
		return -ENODATA;
	if (hdr_crc(in, fh_len) != pfs_load_le32(in + 52) || pfs_load_le32(in + 48) != PCF_BLOCK_LOG2)
		return -EBADMSG;
	memset(k, 0, sizeof(*k));
	k->fh_len = (uint8_t)fh_len;
	memcpy(k->fh, in + PCF_FIXED, fh_len);
	k->size = pfs_load_le64(in + 16);
	k->mtime_s = (int64_t)pfs_load_le64(in + 24);
	k->ctime_s = (int64_t)pfs_load_le64(in + 32);
	k->mtime_ns = pfs_load_le32(in + 40);
	k->ctime_ns = pfs_load_le32(in + 44);
	*hdr_len = n;
	return 0;
}

int pcf_key_eq(const struct pcf_key *a, const struct pcf_key *b)
{
	return a->fh_len == b->fh_len && memcmp(a->fh, b->fh, a->fh_len) == 0 &&
	       a->size == b->size && a->mtime_s == b->mtime_s && a->ctime_s == b->ctime_s &&
	       a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns;
}

uint64_t pcf_nblocks(uint64_t size)
{
	return (size >> PCF_BLOCK_LOG2) + ((size & (PCF_BLOCK - 1)) != 0);
}

uint64_t pcf_data_off(size_t hdr_len, uint64_t size)
{
	return hdr_len + 4 * pcf_nblocks(size);
}

void pcf_block_crcs(const uint8_t *data, size_t len, uint8_t *table)
{
	for (size_t off = 0; off < len; off += PCF_BLOCK, table += 4)
		pfs_store_le32(table, pfs_crc32c(0, data + off, len - off < PCF_BLOCK ? len - off : PCF_BLOCK));
}

int pcf_check_blocks(const uint8_t *data, size_t len, const uint8_t *table)
{
	for (size_t off = 0; off < len; off += PCF_BLOCK, table += 4)
		if (pfs_crc32c(0, data + off, len - off < PCF_BLOCK ? len - off : PCF_BLOCK) !=
		    pfs_load_le32(table))
			return -EBADMSG;
	return 0;
}

uint64_t pcf_name_hash(const uint8_t *fh, size_t len)
{
	uint64_t h = pfs_fnv1a(fh, len, PFS_FNV1A_INIT);

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}
