/* crc32c.h: CRC32C (Castagnoli polynomial, as iSCSI and ext4 use it), for
 * checksums of data kept on disk (podfs's persistent cache). Pure
 * functions; any thread.
 */
#ifndef PODFS_CRC32C_H
#define PODFS_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC32C of buf[len], continuing from crc (start with 0): the CRC of two
 * pieces chained this way is the CRC of their concatenation. Uses the
 * SSE4.2 instruction when the CPU has it, a table otherwise. */
uint32_t pfs_crc32c(uint32_t crc, const void *buf, size_t len);
/* The same by the table alone, for tests that compare both. */
uint32_t pfs_crc32c_sw(uint32_t crc, const void *buf, size_t len);

#endif /* PODFS_CRC32C_H */
