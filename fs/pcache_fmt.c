/* pcache_fmt.c: persistent-cache entry header and CRC32C (see pcache_fmt.h). */
#include "pcache_fmt.h"

#include <errno.h>
#include <string.h>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

static uint32_t crc_table[256];
static int crc_table_ready;

static void crc_table_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
		crc_table[i] = c;
	}
	__atomic_store_n(&crc_table_ready, 1, __ATOMIC_RELEASE);
}

uint32_t pcf_crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	/* Racing initialisations write the same values. */
	if (!__atomic_load_n(&crc_table_ready, __ATOMIC_ACQUIRE))
		crc_table_init();
	crc = ~crc;
	while (len--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const void *buf,
							  size_t len)
{
	const uint8_t *p = buf;
	uint64_t c = ~crc;
	while (len && ((uintptr_t)p & 7)) {
		c = _mm_crc32_u8((uint32_t)c, *p++);
		len--;
	}
	while (len >= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		c = _mm_crc32_u64(c, v);
		p += 8;
		len -= 8;
	}
	while (len--)
		c = _mm_crc32_u8((uint32_t)c, *p++);
	return ~(uint32_t)c;
}
#endif

uint32_t pcf_crc32c(uint32_t crc, const void *buf, size_t len)
{
#if defined(__x86_64__)
	if (__builtin_cpu_supports("sse4.2"))
		return crc_hw(crc, buf, len);
#endif
	return pcf_crc32c_sw(crc, buf, len);
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* The header checksum: fixed part with its own field zeroed, then the handle. */
static uint32_t hdr_crc(const uint8_t *h, size_t fh_len)
{
	uint8_t fixed[PCF_FIXED];
	memcpy(fixed, h, PCF_FIXED);
	put32(fixed + 52, 0);
	uint32_t crc = pcf_crc32c(0, fixed, PCF_FIXED);
	return pcf_crc32c(crc, h + PCF_FIXED, fh_len);
}

int pcf_encode(const struct pcf_key *k, uint8_t *out, size_t cap)
{
	if (k->fh_len == 0)
		return -EINVAL; /* and fh_len <= PCF_FH_MAX by its type */
	size_t n = PCF_FIXED + k->fh_len;
	if (cap < n)
		return -ENOBUFS;
	memcpy(out, PCF_MAGIC, 8);
	put32(out + 8, (uint32_t)n);
	put32(out + 12, k->fh_len);
	put64(out + 16, k->size);
	put64(out + 24, (uint64_t)k->mtime_s);
	put64(out + 32, (uint64_t)k->ctime_s);
	put32(out + 40, k->mtime_ns);
	put32(out + 44, k->ctime_ns);
	put32(out + 48, PCF_BLOCK_LOG2);
	memcpy(out + PCF_FIXED, k->fh, k->fh_len);
	put32(out + 52, hdr_crc(out, k->fh_len));
	return (int)n;
}

int pcf_decode(const uint8_t *in, size_t len, struct pcf_key *k, size_t *hdr_len)
{
	if (len < PCF_FIXED)
		return len >= 8 && memcmp(in, PCF_MAGIC, 8) != 0 ? -EBADMSG : -ENODATA;
	if (memcmp(in, PCF_MAGIC, 8) != 0)
		return -EBADMSG;
	uint32_t n = get32(in + 8), fh_len = get32(in + 12);
	if (fh_len == 0 || fh_len > PCF_FH_MAX || n != PCF_FIXED + fh_len)
		return -EBADMSG;
	if (len - PCF_FIXED < fh_len)
		return -ENODATA;
	if (hdr_crc(in, fh_len) != get32(in + 52) || get32(in + 48) != PCF_BLOCK_LOG2)
		return -EBADMSG;
	memset(k, 0, sizeof(*k));
	k->fh_len = (uint8_t)fh_len;
	memcpy(k->fh, in + PCF_FIXED, fh_len);
	k->size = get64(in + 16);
	k->mtime_s = (int64_t)get64(in + 24);
	k->ctime_s = (int64_t)get64(in + 32);
	k->mtime_ns = get32(in + 40);
	k->ctime_ns = get32(in + 44);
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
		put32(table, pcf_crc32c(0, data + off, len - off < PCF_BLOCK ? len - off : PCF_BLOCK));
}

int pcf_check_blocks(const uint8_t *data, size_t len, const uint8_t *table)
{
	for (size_t off = 0; off < len; off += PCF_BLOCK, table += 4)
		if (pcf_crc32c(0, data + off, len - off < PCF_BLOCK ? len - off : PCF_BLOCK) !=
		    get32(table))
			return -EBADMSG;
	return 0;
}
