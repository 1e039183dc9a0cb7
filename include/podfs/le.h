/* le.h: little-endian loads and stores at any alignment, on <endian.h>.
 * The wire format, handles and the persistent cache's files are
 * little-endian; these are the one way both programs read and write such
 * fields outside the codec's cursors. Pure; any thread.
 */
#ifndef PODFS_LE_H
#define PODFS_LE_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

static inline uint16_t pfs_load_le16(const void *p)
{
	uint16_t v;
	memcpy(&v, p, sizeof(v));
	return le16toh(v);
}

static inline uint32_t pfs_load_le32(const void *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static inline uint64_t pfs_load_le64(const void *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

static inline void pfs_store_le16(void *p, uint16_t v)
{
	v = htole16(v);
	memcpy(p, &v, sizeof(v));
}

static inline void pfs_store_le32(void *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, sizeof(v));
}

static inline void pfs_store_le64(void *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, sizeof(v));
}

#endif /* PODFS_LE_H */
