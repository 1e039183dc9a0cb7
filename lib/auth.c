/* auth.c: pod key files, randomness and the handshake MACs (see auth.h). */
#include "podfs/auth.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int pfs_key_load(const char *path, uint8_t key[PFS_KEY_LEN], char *err, size_t errlen)
{
	uint8_t buf[2 * PFS_KEY_LEN + 4];
	struct stat st;
	ssize_t n;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot open key file %s: %s", path, strerror(-rc));
		return rc;
	}
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot stat key file %s: %s", path, strerror(-rc));
		goto out_close;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = -EINVAL;
		snprintf(err, errlen, "key file %s is not a regular file", path);
		goto out_close;
	}
	if (st.st_mode & 077) {
		rc = -EPERM;
		snprintf(err, errlen, "key file %s is accessible by group or others (chmod 600 it)", path);
		goto out_close;
	}
	n = read(fd, buf, sizeof buf);
	if (n < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot read key file %s: %s", path, strerror(-rc));
		goto out_close;
	}
	if (n == PFS_KEY_LEN) {
		memcpy(key, buf, PFS_KEY_LEN);
	} else if (n == 2 * PFS_KEY_LEN || (n == 2 * PFS_KEY_LEN + 1 && buf[2 * PFS_KEY_LEN] == '\n')) {
		for (int i = 0; i < PFS_KEY_LEN; i++) {
			int hi = hexval(buf[2 * i]), lo = hexval(buf[2 * i + 1]);
			if (hi < 0 || lo < 0) {
				rc = -EINVAL;
				break;
			}
			key[i] = (uint8_t)(hi << 4 | lo);
		}
	} else {
		rc = -EINVAL;
	}
	if (rc == -EINVAL)
		snprintf(err, errlen, "key file %s must hold 32 raw bytes or 64 hex digits", path);
	OPENSSL_cleanse(buf, sizeof buf);
out_close:
	close(fd);
	return rc;
}

int pfs_key_generate(const char *path)
{
	uint8_t key[PFS_KEY_LEN];
	char hex[2 * PFS_KEY_LEN + 1];
	int fd, rc = 0;

	if (pfs_random(key, sizeof key) < 0)
		return -EIO;
	for (int i = 0; i < PFS_KEY_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", key[i]);
	hex[2 * PFS_KEY_LEN] = '\n';
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		rc = -errno;
		goto out_cleanse;
	}
	errno = 0;
	if (fchmod(fd, 0600) < 0 || write(fd, hex, sizeof hex) != (ssize_t)sizeof hex ||
	    fsync(fd) < 0) {
		rc = errno ? -errno : -EIO; /* a short write leaves errno 0 */
		close(fd);
		unlink(path);
		goto out_cleanse;
	}
	if (close(fd) < 0)
		rc = -errno;
out_cleanse:
	OPENSSL_cleanse(key, sizeof key);
	OPENSSL_cleanse(hex, sizeof hex);
	return rc;
}

int pfs_random(void *buf, size_t n)
{
	return RAND_bytes(buf, (int)n) == 1 ? 0 : -EIO;
}

void pfs_hmac(const uint8_t *key, size_t keylen, const void *data, size_t n,
	      uint8_t out[PFS_MAC_LEN])
{
	unsigned int outlen = PFS_MAC_LEN;
	if (!HMAC(EVP_sha256(), key, (int)keylen, data, n, out, &outlen))
		memset(out, 0, PFS_MAC_LEN); /* can only fail on OOM; never matches a real MAC check by luck */
}

#define HMAC_BLOCK 64 /* SHA-256's block */

struct pfs_hmac_key {
	EVP_MD_CTX *inner; /* SHA-256 after (key ^ ipad) */
	EVP_MD_CTX *outer; /* SHA-256 after (key ^ opad) */
};

void pfs_hmac_key_free(struct pfs_hmac_key *k)
{
	if (!k)
		return;
	EVP_MD_CTX_free(k->inner);
	EVP_MD_CTX_free(k->outer);
	free(k);
}

static bool pad_hashed(EVP_MD_CTX **ctx, const uint8_t *key, size_t keylen, uint8_t pad)
{
	uint8_t block[HMAC_BLOCK];

	for (size_t i = 0; i < HMAC_BLOCK; i++)
		block[i] = (uint8_t)((i < keylen ? key[i] : 0) ^ pad);
	*ctx = EVP_MD_CTX_new();
	bool ok = *ctx && EVP_DigestInit_ex(*ctx, EVP_sha256(), NULL) &&
		  EVP_DigestUpdate(*ctx, block, sizeof(block));
	OPENSSL_cleanse(block, sizeof(block));
	return ok;
}

struct pfs_hmac_key *pfs_hmac_key_new(const uint8_t *key, size_t keylen)
{
	struct pfs_hmac_key *k = calloc(1, sizeof(*k));
	uint8_t kh[PFS_MAC_LEN];
	unsigned int khlen = 0;

	if (!k)
		return NULL;
	/* A key longer than a block is hashed first (RFC 2104). */
	if (keylen > HMAC_BLOCK) {
		if (!EVP_Digest(key, keylen, kh, &khlen, EVP_sha256(), NULL))
			goto fail;
		key = kh;
		keylen = khlen;
	}
	if (!pad_hashed(&k->inner, key, keylen, 0x36) || !pad_hashed(&k->outer, key, keylen, 0x5c))
		goto fail;
	OPENSSL_cleanse(kh, sizeof(kh));
	return k;
fail:
	OPENSSL_cleanse(kh, sizeof(kh));
	pfs_hmac_key_free(k);
	return NULL;
}

void pfs_hmac_keyed(const struct pfs_hmac_key *k, const void *data, size_t n,
		    uint8_t out[PFS_MAC_LEN])
{
	uint8_t ih[PFS_MAC_LEN];
	unsigned int len = 0;
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	bool ok = c && EVP_MD_CTX_copy_ex(c, k->inner) && EVP_DigestUpdate(c, data, n) &&
		  EVP_DigestFinal_ex(c, ih, &len) && EVP_MD_CTX_copy_ex(c, k->outer) &&
		  EVP_DigestUpdate(c, ih, len) && EVP_DigestFinal_ex(c, out, &len) &&
		  len == PFS_MAC_LEN;

	EVP_MD_CTX_free(c);
	if (!ok) /* only on OOM; never matches a real MAC check by luck */
		memset(out, 0, PFS_MAC_LEN);
}

/* MAC input: label (with its NUL) | Nc | Ns | client_id (8 bytes LE). */
#define HS_LABEL_MAX 32
static void handshake_mac(const char *label, const uint8_t key[PFS_KEY_LEN],
			  const uint8_t cnonce[PFS_NONCE_LEN], const uint8_t snonce[PFS_NONCE_LEN],
			  uint64_t client_id, uint8_t out[PFS_MAC_LEN])
{
	uint8_t msg[HS_LABEL_MAX + 2 * PFS_NONCE_LEN + 8];
	size_t ll = strlen(label) + 1, off = 0;
	if (ll > HS_LABEL_MAX)
		abort(); /* a label of this file's: a programmer's error */
	memcpy(msg, label, ll);
	off = ll;
	memcpy(msg + off, cnonce, PFS_NONCE_LEN);
	off += PFS_NONCE_LEN;
	memcpy(msg + off, snonce, PFS_NONCE_LEN);
	off += PFS_NONCE_LEN;
	for (int i = 0; i < 8; i++)
		msg[off++] = (uint8_t)(client_id >> (8 * i));
	pfs_hmac(key, PFS_KEY_LEN, msg, off, out);
}

void pfs_auth_server_mac(const uint8_t key[PFS_KEY_LEN], const uint8_t cnonce[PFS_NONCE_LEN],
			 const uint8_t snonce[PFS_NONCE_LEN], uint64_t client_id,
			 uint8_t out[PFS_MAC_LEN])
{
	handshake_mac("podfs server", key, cnonce, snonce, client_id, out);
}

void pfs_auth_client_mac(const uint8_t key[PFS_KEY_LEN], const uint8_t cnonce[PFS_NONCE_LEN],
			 const uint8_t snonce[PFS_NONCE_LEN], uint64_t client_id,
			 uint8_t out[PFS_MAC_LEN])
{
	handshake_mac("podfs client", key, cnonce, snonce, client_id, out);
}

void pfs_auth_peer_server_mac(const uint8_t key[PFS_KEY_LEN],
			      const uint8_t cnonce[PFS_NONCE_LEN],
			      const uint8_t snonce[PFS_NONCE_LEN], uint64_t client_id,
			      uint8_t out[PFS_MAC_LEN])
{
	handshake_mac("podfs peer server", key, cnonce, snonce, client_id, out);
}

void pfs_auth_peer_client_mac(const uint8_t key[PFS_KEY_LEN],
			      const uint8_t cnonce[PFS_NONCE_LEN],
			      const uint8_t snonce[PFS_NONCE_LEN], uint64_t client_id,
			      uint8_t out[PFS_MAC_LEN])
{
	handshake_mac("podfs peer client", key, cnonce, snonce, client_id, out);
}

bool pfs_mac_equal(const uint8_t *a, const uint8_t *b, size_t n)
{
	return CRYPTO_memcmp(a, b, n) == 0;
}
