/* tls.h: TLS 1.3 under the framing, keyed by the pod key (lib/tls.c).
 *
 * Both sides make an SSL_CTX from the pod key: TLS 1.3 only, AES-GCM
 * suites, an external pre-shared key and (EC)DHE on top of it
 * (psk_dhe_ke: forward secrecy). Certificates are optional: a server
 * may also hold one, for the clients that verify it instead of using
 * the PSK (pfs_tls_ctx_use_cert, pfs_tls_ctx_new_ca). The PSK is not the pod key
 * itself but HKDF-SHA256(pod key, salt "podfs tls", info
 * "podfs/1 tls13 external psk"), under the fixed identity "podfs/1". A
 * peer with another key fails the handshake (its PSK binder does not
 * verify); a server that would answer without the PSK (a certificate)
 * is refused by the client. No session tickets, no resumption: every
 * connection runs the full PSK + DHE handshake.
 *
 * The SSL objects made from these contexts are driven through byte-queue
 * BIOs (podfs/tls_bio.h: a memory BIO without its extra copies) by their
 * users (daemon/tls_stream.c, fs/sock.c, fs/stream.c): the socket I/O
 * stays theirs, or, for podfs's reads, is handed to the BIO.
 */
#ifndef PODFS_TLS_H
#define PODFS_TLS_H

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "podfs/wire.h"

/* How many bytes of a connection tell TLS from plaintext framing
 * (pfs_tls_sniff). */
#define PFS_TLS_SNIFF_LEN 3

#define PFS_TLS_PSK_LEN 32
#define PFS_TLS_PSK_IDENTITY "podfs/1"

/* Derives the TLS PSK from the pod key into psk. Returns 0 or -EIO. */
int pfs_tls_psk(const uint8_t key[PFS_KEY_LEN], uint8_t psk[PFS_TLS_PSK_LEN]);

/* A context for the server or client side keyed by key (copied, as its
 * PSK). Returns NULL with a one-line reason in err[errlen]. */
SSL_CTX *pfs_tls_ctx_new(bool server, const uint8_t key[PFS_KEY_LEN], char *err, size_t errlen);
/* Frees it (and wipes its PSK). Safe on NULL. */
void pfs_tls_ctx_free(SSL_CTX *ctx);

/* Certificates, for sites that want the coordinator's identity to be
 * more than the shared pod key (which every host holds).
 *
 * Server: ctx (pfs_tls_ctx_new) also holds the certificate chain of
 * cert_file (PEM, the server's own first) and its private key from
 * key_file (PEM; cert_file when NULL), which must be a regular file
 * that group and others cannot access. A client that offers the PSK
 * still gets the PSK handshake; one that does not (pfs_tls_ctx_new_ca)
 * gets the certificate. Writes into info[infolen] a line about the
 * certificate (its subject and expiry; "" when it is not to be used).
 * Returns 0; 1: loaded, but not valid at this time (info says so);
 * -errno with a one-line reason in err[errlen] naming the file (ctx may
 * then hold part of it: free it, or load again). */
int pfs_tls_ctx_use_cert(SSL_CTX *ctx, const char *cert_file, const char *key_file,
			 char *info, size_t infolen, char *err, size_t errlen);
/* Client: a context that offers no PSK and requires the server's
 * certificate to verify against the CAs of ca_file (PEM) and to carry
 * the name each connection expects (pfs_tls_expect_name). TLS 1.3, the
 * same suites, no tickets. The pod key's own handshake (HELLO/AUTH)
 * still runs inside. NULL with a one-line reason in err[errlen]. */
SSL_CTX *pfs_tls_ctx_new_ca(const char *ca_file, char *err, size_t errlen);
/* Client, under a pfs_tls_ctx_new_ca context: ssl's server must show a
 * certificate for name, an IP address (v4 or v6) or a DNS name (then
 * also sent as SNI). Returns 0, or -EINVAL (a name OpenSSL refuses). */
int pfs_tls_expect_name(SSL *ssl, const char *name);
/* After a finished client handshake: whether the server was
 * authenticated as ctx asks, by the PSK (pfs_tls_ctx_new) or by a
 * certificate that verified (pfs_tls_ctx_new_ca). If not, a one-line
 * reason goes into why[whylen]. */
bool pfs_tls_authenticated(SSL *ssl, char *why, size_t whylen);

/* A new SSL object of ctx on two fresh BIOs of podfs/tls_bio.h
 * (ciphertext in: *rbio, out: *wbio; both owned by the SSL object). NULL
 * on failure. */
SSL *pfs_tls_new(SSL_CTX *ctx, BIO **rbio, BIO **wbio);

/* Ciphertext one side sends under one key: then it moves to the next
 * (a TLS 1.3 KeyUpdate, RFC 8446 4.6.3). RFC 8446 5.5 limits AES-GCM to
 * about 2^24.5 full-size records (2^38.5 bytes) per key; OpenSSL 3.0 does
 * not count them, and a mount's connection lives as long as the mount:
 * at 1 GB/s it would reach the limit in about seven minutes. */
#define PFS_TLS_REKEY_BYTES (1ull << 36)

/* SSL_write(ssl, p, n) that also schedules a KeyUpdate (SSL_key_update,
 * sent before the next record) each time the bytes written into ssl's
 * write BIO cross a multiple of PFS_TLS_REKEY_BYTES. Every podfs
 * SSL_write after the handshake goes through it. */
int pfs_tls_write(SSL *ssl, const void *p, int n);
/* Tests: the bytes between key updates (0: PFS_TLS_REKEY_BYTES). */
void pfs_tls_set_rekey_bytes(uint64_t n);

/* Frees what OpenSSL keeps for the calling thread (its error queue).
 * For a detached thread, before it tells its owner it is done: OpenSSL
 * would free it only in the thread's exit, which may come after the
 * process's own (the leak checker then reports it), or never. */
void pfs_tls_thread_end(void);

/* Writes a one-line reason for the thread's last OpenSSL error (and
 * clears the thread's error queue) into buf[len]; dflt if there is none. */
void pfs_tls_reason(char *buf, size_t len, const char *dflt);

/* Whether a connection that begins with b[PFS_TLS_SNIFF_LEN] speaks TLS:
 * a TLS record of a handshake message begins 0x16 0x03 0x01..0x04 (its
 * content type and legacy version). A podfs frame begins with its
 * payload length (le32), whose third byte is 0 for any frame before AUTH
 * (PFS_MAX_HANDSHAKE), so the two cannot be mistaken for each other
 * although a length may begin 0x16 0x03. */
static inline bool pfs_tls_sniff(const uint8_t b[PFS_TLS_SNIFF_LEN])
{
	return b[0] == 0x16 && b[1] == 0x03 && b[2] >= 0x01 && b[2] <= 0x04;
}

#endif /* PODFS_TLS_H */
