/* tls_bio.h: the BIO under podfs's SSL objects (lib/tls_bio.c): a byte
 * queue like OpenSSL's memory BIO, with fewer copies and system calls on
 * the bulk paths.
 *
 * A memory BIO costs two extra passes over every byte: ciphertext that
 * arrived is copied into it before SSL_read copies it again into the
 * record buffer, and ciphertext SSL_write made is copied into it and
 * copied out again before it reaches the socket. This BIO behaves as a
 * memory BIO for everything OpenSSL does with it (BIO_write appends,
 * BIO_read consumes, an empty BIO asks to retry, BIO_pending counts), and
 * its owner can besides:
 *
 * * take what was written without a copy (pfs_tls_bio_take: the buffer
 *   changes hands), after reserving room for what a write will make
 *   (pfs_tls_bio_reserve), and hand back an emptied buffer for reuse
 *   (pfs_tls_bio_give);
 * * lend it ciphertext to read from in place (pfs_tls_bio_lend), for as
 *   long as the owner's buffer is valid: what SSL_read did not consume is
 *   kept by copying (pfs_tls_bio_keep) before the loan ends;
 * * let it read from a socket itself (pfs_tls_bio_set_fd): once it holds
 *   nothing, a read is one recvmsg(2) with MSG_DONTWAIT of what was asked
 *   straight into OpenSSL's record buffer, and of up to 256 KiB that
 *   follow it into the BIO (the next records, served from there: a call
 *   per 16 KiB record cost more than copying them once); "would block"
 *   is a retry (the caller waits for the socket, e.g. poll(2), and
 *   calls SSL_read again), the end of the stream and errors
 *   are remembered (pfs_tls_bio_status) so that the caller can tell them
 *   from a TLS failure.
 *
 * A BIO is used by one thread at a time (its SSL object's rule). Memory:
 * the written queue grows as needed (realloc; geometric), the read queue
 * holds what a loan left, what BIO_write put in, and what a socket read
 * brought ahead (a 256 KiB buffer, kept for the next reads).
 */
#ifndef PODFS_TLS_BIO_H
#define PODFS_TLS_BIO_H

#include <openssl/bio.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* A new empty BIO of this kind, or NULL (out of memory). */
BIO *pfs_tls_bio_new(void);

/* Makes room for at least n more bytes to be written into b without a
 * further reallocation. Returns 0 or -ENOMEM. */
int pfs_tls_bio_reserve(BIO *b, size_t n);
/* Takes what was written into b and not read: *buf (malloc'd, the
 * caller's to free or to give back) holding *len bytes, of capacity *cap
 * (cap may be NULL); b is empty afterwards. *buf NULL and *len 0 if b
 * holds nothing (nothing changes hands then). */
void pfs_tls_bio_take(BIO *b, uint8_t **buf, size_t *len, size_t *cap);
/* Hands an emptied buffer buf of capacity cap (from pfs_tls_bio_take)
 * back to b for its next writes, if b holds none; else frees it. */
void pfs_tls_bio_give(BIO *b, uint8_t *buf, size_t cap);

/* Lends b the n bytes at p to read after what it holds: they are read
 * in place (no copy) until pfs_tls_bio_keep, which the caller must call
 * before p becomes invalid. At most one loan at a time. */
void pfs_tls_bio_lend(BIO *b, const void *p, size_t n);
/* Ends the loan: the bytes of it not read yet are copied into b. Returns
 * 0, or -ENOMEM (they are lost; the stream cannot go on). */
int pfs_tls_bio_keep(BIO *b);

/* Once b holds nothing (no queued bytes, no loan), reads go to the
 * socket fd (recvmsg with MSG_DONTWAIT; what it brought beyond the read
 * is queued in b), adding the bytes received to *count (may be NULL).
 * fd -1: no socket (the default). */
void pfs_tls_bio_set_fd(BIO *b, int fd, _Atomic uint64_t *count);
/* What the socket said last: 0 (nothing final yet), 1 the peer ended the
 * stream (recv returned 0), or -errno (a receive error). */
int pfs_tls_bio_status(BIO *b);

#endif /* PODFS_TLS_BIO_H */
