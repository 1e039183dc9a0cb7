/* test_pcache_fmt.c: unit tests of the persistent-cache entry format
 * (fs/pcache_fmt.h): CRC32C against known values (hardware and table
 * agree), header round trip, that every truncation, every flipped
 * header bit and every bad length field is refused, block table sizes,
 * and that a flipped bit in any block or table entry fails the block
 * check.
 */
#include <errno.h>
#include <stdlib.h>

#include "check.h"
#include "pcache_fmt.h"
#include "podfs/crc32c.h"

static void test_crc(void)
{
	/* The CRC32C check value (RFC 3720 B.4 style test vectors). */
	CHECK_EQ(pfs_crc32c(0, "123456789", 9), 0xE3069283u);
	CHECK_EQ(pfs_crc32c_sw(0, "123456789", 9), 0xE3069283u);
	uint8_t zeros[32] = { 0 };
	CHECK_EQ(pfs_crc32c(0, zeros, 32), 0x8A9136AAu);
	/* Any length and alignment, and chaining, agree with the table. */
	uint8_t buf[1000];
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 131 + 7);
	for (size_t off = 0; off < 9; off++)
		for (size_t len = 0; len + off <= sizeof(buf); len += 37) {
			uint32_t a = pfs_crc32c(0, buf + off, len);
			CHECK_EQ(a, pfs_crc32c_sw(0, buf + off, len));
			size_t h = len / 3;
			CHECK_EQ(pfs_crc32c(pfs_crc32c(0, buf + off, h), buf + off + h, len - h), a);
		}
}

static struct pcf_key sample(uint8_t fh_len)
{
	struct pcf_key k;
	memset(&k, 0, sizeof(k));
	k.fh_len = fh_len;
	for (int i = 0; i < fh_len; i++)
		k.fh[i] = (uint8_t)(i * 7 + 1);
	k.size = 123456789012ull;
	k.mtime_s = 1700000000;
	k.ctime_s = -5;
	k.mtime_ns = 999999999;
	k.ctime_ns = 1;
	return k;
}

static void test_round_trip(void)
{
	uint8_t h[PCF_HDR_MAX];
	struct pcf_key k = sample(40), got;
	size_t hl;

	int n = pcf_encode(&k, h, sizeof(h));
	CHECK_EQ(n, (int)PCF_FIXED + 40);
	CHECK_EQ(pcf_decode(h, (size_t)n, &got, &hl), 0);
	CHECK(pcf_key_eq(&k, &got));
	CHECK_EQ(hl, (size_t)n);
	/* Extra bytes after the header (the data) are fine. */
	CHECK_EQ(pcf_decode(h, sizeof(h), &got, &hl), 0);
	struct pcf_key max = sample(PCF_FH_MAX);
	CHECK_EQ(pcf_encode(&max, h, sizeof(h)), (int)PCF_HDR_MAX);
	CHECK_EQ(pcf_decode(h, sizeof(h), &got, &hl), 0);
	CHECK(pcf_key_eq(&max, &got));
	/* Bad arguments. */
	struct pcf_key empty = sample(0);
	CHECK_EQ(pcf_encode(&empty, h, sizeof(h)), -EINVAL);
	CHECK_EQ(pcf_encode(&k, h, PCF_FIXED + 39), -ENOBUFS);
}

static void test_key_eq(void)
{
	struct pcf_key a = sample(20), b;
	CHECK(pcf_key_eq(&a, &a));
	/* Each field of the version and the handle matters. */
	b = a; b.size++; CHECK(!pcf_key_eq(&a, &b));
	b = a; b.mtime_s++; CHECK(!pcf_key_eq(&a, &b));
	b = a; b.mtime_ns++; CHECK(!pcf_key_eq(&a, &b));
	b = a; b.ctime_s++; CHECK(!pcf_key_eq(&a, &b));
	b = a; b.ctime_ns++; CHECK(!pcf_key_eq(&a, &b));
	b = a; b.fh[19] ^= 1; CHECK(!pcf_key_eq(&a, &b));
	b = a; b.fh_len--; CHECK(!pcf_key_eq(&a, &b));
}

static void test_damage(void)
{
	uint8_t h[PCF_HDR_MAX], bad[PCF_HDR_MAX];
	struct pcf_key k = sample(33), got;
	size_t hl;
	int n = pcf_encode(&k, h, sizeof(h));

	/* Every truncation: -ENODATA (or -EBADMSG), never success. */
	for (int len = 0; len < n; len++) {
		int r = pcf_decode(h, (size_t)len, &got, &hl);
		CHECK(r == -ENODATA || r == -EBADMSG);
	}
	/* Every single flipped bit of the header is caught. */
	for (int i = 0; i < n; i++)
		for (int bit = 0; bit < 8; bit++) {
			memcpy(bad, h, (size_t)n);
			bad[i] ^= (uint8_t)(1u << bit);
			CHECK_EQ(pcf_decode(bad, (size_t)n, &got, &hl), -EBADMSG);
		}
	/* Length fields that disagree or exceed the limit. */
	memcpy(bad, h, (size_t)n);
	bad[12] = 0; /* fh_len 0 */
	CHECK_EQ(pcf_decode(bad, (size_t)n, &got, &hl), -EBADMSG);
	memcpy(bad, h, (size_t)n);
	bad[13] = 1; /* fh_len 289 > PCF_FH_MAX */
	CHECK_EQ(pcf_decode(bad, sizeof(bad), &got, &hl), -EBADMSG);
	memset(bad, 0, sizeof(bad));
	CHECK_EQ(pcf_decode(bad, sizeof(bad), &got, &hl), -EBADMSG);
}

static void test_blocks(void)
{
	CHECK_EQ(pcf_nblocks(0), 0);
	CHECK_EQ(pcf_nblocks(1), 1);
	CHECK_EQ(pcf_nblocks(PCF_BLOCK), 1);
	CHECK_EQ(pcf_nblocks(PCF_BLOCK + 1), 2);
	CHECK_EQ(pcf_nblocks(10ull * PCF_BLOCK), 10);
	CHECK_EQ(pcf_data_off(100, 0), 100);
	CHECK_EQ(pcf_data_off(100, 3 * PCF_BLOCK - 5), 112);

	size_t len = 3 * PCF_BLOCK + 1234;
	uint8_t *data = malloc(len);
	uint8_t table[16];
	if (!data)
		return;
	for (size_t i = 0; i < len; i++)
		data[i] = (uint8_t)(i ^ (i >> 9));
	pcf_block_crcs(data, len, table);
	CHECK_EQ(pcf_check_blocks(data, len, table), 0);
	/* Each block on its own (as a read of part of a file checks it). */
	for (int b = 0; b < 4; b++) {
		size_t off = (size_t)b * PCF_BLOCK;
		size_t n = len - off < PCF_BLOCK ? len - off : PCF_BLOCK;
		CHECK_EQ(pcf_check_blocks(data + off, n, table + 4 * b), 0);
	}
	/* A bit flipped anywhere in the data, or in the table, fails. */
	for (size_t i = 0; i < len; i += 4099) {
		data[i] ^= 0x10;
		CHECK_EQ(pcf_check_blocks(data, len, table), -EBADMSG);
		data[i] ^= 0x10;
	}
	for (size_t i = 0; i < sizeof(table); i++) {
		table[i] ^= 1;
		CHECK_EQ(pcf_check_blocks(data, len, table), -EBADMSG);
		table[i] ^= 1;
	}
	/* The last block cut short does not match either. */
	CHECK_EQ(pcf_check_blocks(data, len - 1, table), -EBADMSG);
	free(data);
}

int main(void)
{
	test_crc();
	test_round_trip();
	test_key_eq();
	test_damage();
	test_blocks();
	return check_done("test_pcache_fmt");
}
