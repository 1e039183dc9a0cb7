/* digest.c: SHA-256 through OpenSSL's EVP (see digest.h). */
#include "podfs/digest.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <string.h>

int pfs_sha256(const void *data, size_t n, uint8_t out[PFS_DIGEST_LEN])
{
	unsigned int len = PFS_DIGEST_LEN;

	if (EVP_Digest(data, n, out, &len, EVP_sha256(), NULL) != 1 || len != PFS_DIGEST_LEN) {
		memset(out, 0, PFS_DIGEST_LEN);
		return -ENOMEM;
	}
	return 0;
}

/* The context is OpenSSL's; this type only names it. */
struct pfs_sha256;

int pfs_sha256_begin(struct pfs_sha256 **ctx)
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();

	if (!c || EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(c);
		*ctx = NULL;
		return -ENOMEM;
	}
	*ctx = (struct pfs_sha256 *)c;
	return 0;
}

int pfs_sha256_add(struct pfs_sha256 *ctx, const void *data, size_t n)
{
	return EVP_DigestUpdate((EVP_MD_CTX *)ctx, data, n) == 1 ? 0 : -EIO;
}

int pfs_sha256_end(struct pfs_sha256 *ctx, uint8_t out[PFS_DIGEST_LEN])
{
	EVP_MD_CTX *c = (EVP_MD_CTX *)ctx;
	unsigned int len = PFS_DIGEST_LEN;
	int ret = 0;

	if (c && out && (EVP_DigestFinal_ex(c, out, &len) != 1 || len != PFS_DIGEST_LEN)) {
		memset(out, 0, PFS_DIGEST_LEN);
		ret = -EIO;
	}
	EVP_MD_CTX_free(c);
	return ret;
}

bool pfs_digest_equal(const uint8_t a[PFS_DIGEST_LEN], const uint8_t b[PFS_DIGEST_LEN])
{
	return CRYPTO_memcmp(a, b, PFS_DIGEST_LEN) == 0;
}

void pfs_digest_hex(const uint8_t d[PFS_DIGEST_LEN], char *out, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t i;

	if (n > 2 * PFS_DIGEST_LEN)
		n = 2 * PFS_DIGEST_LEN;
	for (i = 0; i < n; i++)
		out[i] = hex[(d[i / 2] >> (i % 2 ? 0 : 4)) & 15];
	out[n] = 0;
}
