/* auth.h: the pod key and the mutual HMAC-SHA256 handshake.
 *
 * Handshake (see wire.h PFS_OP_HELLO / PFS_OP_AUTH):
 *   client -> HELLO  {client nonce Nc, client_id}
 *   server -> reply  {server nonce Ns, Ms = HMAC(K, "podfs server" | Nc | Ns | client_id)}
 *   client verifies Ms (proves the server knows K), then
 *   client -> AUTH   {Mc = HMAC(K, "podfs client" | Nc | Ns | client_id)}
 *   server verifies Mc, replies with the root entry, or closes.
 * Both nonces are fresh random bytes per connection, so no MAC can be
 * replayed, and the labels keep one side's MAC from serving as the other's.
 */
#ifndef PODFS_AUTH_H
#define PODFS_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "podfs/wire.h"

/* Loads a pod key file: exactly PFS_KEY_LEN raw bytes, or 64 hex digits
 * with an optional trailing newline. Refuses a file readable or writable
 * by group or others. Returns 0, or -errno with a one-line reason written
 * to err[errlen]. */
int pfs_key_load(const char *path, uint8_t key[PFS_KEY_LEN], char *err, size_t errlen);

/* Creates path (must not exist) with mode 0600 holding a new random key
 * as 64 hex digits and a newline. Returns 0 or -errno. */
int pfs_key_generate(const char *path);

/* Cryptographically random bytes (OpenSSL RAND_bytes). Returns 0 or -EIO. */
int pfs_random(void *buf, size_t n);

/* HMAC-SHA256 of data[n] under key[keylen] into out[32]. */
void pfs_hmac(const uint8_t *key, size_t keylen, const void *data, size_t n,
	      uint8_t out[PFS_MAC_LEN]);

/* A key made ready for many HMAC-SHA256s: its padded blocks are hashed
 * once (pfs_hmac hashes them at every call, which costs most of a short
 * message's MAC). Create with pfs_hmac_key_new (NULL when OpenSSL cannot
 * make it: use pfs_hmac then), free with pfs_hmac_key_free (safe on
 * NULL). pfs_hmac_keyed computes HMAC(key, data[n]) into out[32] exactly
 * as pfs_hmac does; any number of threads may use one key at once. */
struct pfs_hmac_key;
struct pfs_hmac_key *pfs_hmac_key_new(const uint8_t *key, size_t keylen);
void pfs_hmac_key_free(struct pfs_hmac_key *k);
void pfs_hmac_keyed(const struct pfs_hmac_key *k, const void *data, size_t n,
		    uint8_t out[PFS_MAC_LEN]);

/* The handshake MACs described above. */
void pfs_auth_server_mac(const uint8_t key[PFS_KEY_LEN], const uint8_t cnonce[PFS_NONCE_LEN],
			 const uint8_t snonce[PFS_NONCE_LEN], uint64_t client_id,
			 uint8_t out[PFS_MAC_LEN]);
void pfs_auth_client_mac(const uint8_t key[PFS_KEY_LEN], const uint8_t cnonce[PFS_NONCE_LEN],
			 const uint8_t snonce[PFS_NONCE_LEN], uint64_t client_id,
			 uint8_t out[PFS_MAC_LEN]);

/* The MACs of the handshake between two clients (wire.h PEER_HELLO,
 * PEER_AUTH): the same construction under the labels "podfs peer server"
 * and "podfs peer client", so that no MAC of one handshake serves in the
 * other. */
void pfs_auth_peer_server_mac(const uint8_t key[PFS_KEY_LEN],
			      const uint8_t cnonce[PFS_NONCE_LEN],
			      const uint8_t snonce[PFS_NONCE_LEN], uint64_t client_id,
			      uint8_t out[PFS_MAC_LEN]);
void pfs_auth_peer_client_mac(const uint8_t key[PFS_KEY_LEN],
			      const uint8_t cnonce[PFS_NONCE_LEN],
			      const uint8_t snonce[PFS_NONCE_LEN], uint64_t client_id,
			      uint8_t out[PFS_MAC_LEN]);

/* Constant-time comparison. */
bool pfs_mac_equal(const uint8_t *a, const uint8_t *b, size_t n);

#endif /* PODFS_AUTH_H */
