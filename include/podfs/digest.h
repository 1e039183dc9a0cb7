/* digest.h: SHA-256 (OpenSSL's EVP), the checksum of peer-assisted
 * reads (wire.h: a chunk's digest).
 *
 * Both programs: podfsd takes a chunk's digest as it reads the chunk;
 * podfs checks every chunk a peer sent against the digest podfsd gave
 * before it uses a byte of it. Thread-safe: every call uses its own
 * context.
 */
#ifndef PODFS_DIGEST_H
#define PODFS_DIGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "podfs/wire.h"

/* The SHA-256 of data[n] into out. Returns 0, or -ENOMEM (OpenSSL could
 * not allocate its context; out is then zeroed). */
int pfs_sha256(const void *data, size_t n, uint8_t out[PFS_DIGEST_LEN]);

/* A SHA-256 taken in pieces: pfs_sha256_begin makes *ctx (0 or
 * -ENOMEM), pfs_sha256_add hashes data[n] on (0 or -EIO),
 * pfs_sha256_end writes the digest into out (if out is not NULL: NULL
 * abandons it) and frees ctx (always; safe on NULL). */
struct pfs_sha256;
int pfs_sha256_begin(struct pfs_sha256 **ctx);
int pfs_sha256_add(struct pfs_sha256 *ctx, const void *data, size_t n);
int pfs_sha256_end(struct pfs_sha256 *ctx, uint8_t out[PFS_DIGEST_LEN]);

/* Whether a and b are the same digest (constant time: a peer learns
 * nothing from how long a comparison took). */
bool pfs_digest_equal(const uint8_t a[PFS_DIGEST_LEN], const uint8_t b[PFS_DIGEST_LEN]);

/* The digest as 2 * PFS_DIGEST_LEN lowercase hex digits + NUL, or its
 * first n digits if n is smaller (n + 1 bytes of out used), for logs. */
void pfs_digest_hex(const uint8_t d[PFS_DIGEST_LEN], char *out, size_t n);

#endif /* PODFS_DIGEST_H */
