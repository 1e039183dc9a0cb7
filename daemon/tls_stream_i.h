/* tls_stream_i.h: the server side of one connection's TLS, on the
 * byte-queue BIOs of podfs/tls_bio.h: ciphertext in, plaintext pieces
 * out; plaintext in, ciphertext buffers out. Ciphertext that arrives is
 * read in place (lent to the read BIO, the rest of a record kept), and
 * what SSL_write makes is taken as the buffer it was written into: no
 * copy beyond OpenSSL's own.
 *
 * No socket, no loop, no logging: the connection that owns the stream
 * (conn.c) moves the ciphertext between the socket and the stream,
 * decides where plaintext goes (the frame reader's buffer, or straight
 * into a payload) and what to send, counts the bytes and logs the errors
 * (the reasons come back in a buffer the caller passes). The TLS
 * handshake runs inside the first reads (tls_stream_input); its messages
 * wait with the ciphertext to send (tls_stream_take). The context, the
 * PSK and telling TLS from plaintext by the first bytes stay in lib/tls.c
 * (podfs/tls.h).
 *
 * Threads: the owner (podfsd: the loop thread) makes every call but
 * tls_stream_seal, which any thread may make meanwhile (a worker seals
 * the READ reply it made: tls_stream_seal). Each call holds the stream's
 * lock, recursively, so that the owner's callbacks may call again; OpenSSL
 * never sees two threads on one SSL object, and the records of a seal
 * land in the queue of ciphertext to send in the order they were made.
 * Every call that fails leaves the stream valid; after a fatal TLS error
 * (-EPROTO) only tls_stream_pending, tls_stream_take (the alert OpenSSL
 * queued, if any), tls_stream_drop and tls_stream_fini are of use.
 */
#ifndef PODFSD_TLS_STREAM_I_H
#define PODFSD_TLS_STREAM_I_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "podfs/tls.h"

/* Plaintext encrypted before its ciphertext is handed out
 * (tls_stream_send): the most ciphertext a stream holds is about this
 * much. */
#define TLS_STREAM_CHUNK (256u * 1024)
/* Plaintext sent at most this big goes in one record (tls_stream_send):
 * a frame header and up to 4 KiB of payload. */
#define TLS_STREAM_SMALL (PFS_FRAME_HDR_SIZE + 4096)

/* The ciphertext of a piece of tls_stream_send waits in the stream
 * (tls_stream_take); last: the piece ends what was sent. */
typedef void (*tls_stream_ready_cb)(void *arg, bool last);
/* Where the next plaintext of tls_stream_input goes: *dst, *cap bytes
 * of room. Returns false to stop decrypting for now. */
typedef bool (*tls_stream_room_cb)(void *arg, uint8_t **dst, size_t *cap);
/* k > 0 bytes of plaintext were decrypted to dst, the room given last. */
typedef void (*tls_stream_plain_cb)(void *arg, uint8_t *dst, size_t k);

struct tls_stream {
	SSL *ssl;         /* NULL until tls_stream_init; owns rbio and wbio */
	BIO *rbio, *wbio; /* ciphertext in (read), ciphertext out (written) */
	pthread_mutex_t lock; /* recursive; every call below holds it */
	bool up;          /* the handshake finished (as of the last read) */
	bool shut;        /* no more seals: dropped, or a fatal error */
};

/* Sets up t (zeroed, or after tls_stream_fini) as the server side of a
 * connection under ctx (pfs_tls_ctx_new). Returns 0, or -ENOMEM (t
 * untouched). */
int tls_stream_init(struct tls_stream *t, SSL_CTX *ctx);
/* Frees what t holds, ciphertext not taken yet included. Safe on a zeroed
 * stream. */
void tls_stream_fini(struct tls_stream *t);

/* Whether t's handshake had finished before its last piece of plaintext
 * was read (tls_stream_input): after a fatal error, whether the
 * handshake had succeeded. The owner only. */
static inline bool tls_stream_up(const struct tls_stream *t)
{
	return t->up;
}

/* Ciphertext p[n] arrived: keeps it (copied; no bound of its own) for
 * tls_stream_input, without decrypting it yet. n is at most INT_MAX.
 * Returns 0, or -ENOMEM. */
int tls_stream_in(struct tls_stream *t, const void *p, size_t n);
/* Ciphertext p[n] arrived (read in place; the part of a record it does
 * not complete is kept, copied, before the call returns), and what it
 * completes is decrypted piece by piece: room_cb(arg, &dst, &cap) says where the next
 * piece goes (cap bytes at most; a record may come in several pieces),
 * plain_cb(arg, dst, k) gets it (k > 0 bytes at dst), until more
 * ciphertext is needed or room_cb returns false (what is left stays in
 * t for the next call, which may have n 0). The handshake advances first
 * while it is not done; its replies then wait in t (tls_stream_take).
 * Returns 0; -ENOMEM: the rest of p could not be kept; -EPIPE:
 * the peer closed the TLS session (close_notify); -EPROTO: a fatal TLS
 * error, whose one-line reason (dflt "TLS error") is written into
 * why[whylen]. */
int tls_stream_input(struct tls_stream *t, const void *p, size_t n, tls_stream_room_cb room_cb,
		     tls_stream_plain_cb plain_cb, void *arg, char *why, size_t whylen);

/* Encrypts a[na] then b[nb] (either may be empty, and then NULL) after
 * the ciphertext t holds already (no bound: the caller takes it after
 * each piece). If they
 * come to at most TLS_STREAM_SMALL bytes, they go in one record;
 * otherwise a goes whole (a frame header, say), then b in
 * TLS_STREAM_CHUNK pieces. ready_cb(arg, last) runs after each piece of
 * b but the last (last false) and once at the end (last true): the
 * caller then takes the ciphertext (tls_stream_take), so that t never
 * holds more than about one chunk. Returns 0, or -EPROTO after a fatal
 * error (one came in earlier: tls_stream_input), the reason (dflt "write
 * failed") written into why[whylen]; ready_cb(arg, true) has not run
 * then. */
int tls_stream_send(struct tls_stream *t, const void *a, size_t na, const void *b, size_t nb,
		    tls_stream_ready_cb ready_cb, void *arg, char *why, size_t whylen);

/* From any thread: encrypts a[na] then b[nb] (a frame's header and
 * payload, na + nb over TLS_STREAM_SMALL) after the ciphertext t holds
 * already, in one go (no ready_cb: the owner takes it later, with
 * whatever it sends next, or at its tls_stream_take for this frame).
 * Returns 0; -EAGAIN, nothing done: the handshake is not done, or the
 * stream is shut (tls_stream_drop, a fatal error); -EPROTO: a fatal
 * error (the stream is shut, what it holds is of no use). */
int tls_stream_seal(struct tls_stream *t, const void *a, size_t na, const void *b, size_t nb);

/* The number of ciphertext bytes waiting to be sent. */
size_t tls_stream_pending(struct tls_stream *t);
/* Takes the ciphertext waiting to be sent: *buf (malloc'd, the caller's
 * to free: the buffer the records were written into) of *len bytes, or
 * *buf NULL and *len 0 if there is none. */
void tls_stream_take(struct tls_stream *t, void **buf, size_t *len);
/* Discards the ciphertext waiting to be sent (the connection closes);
 * shuts t for tls_stream_seal. */
void tls_stream_drop(struct tls_stream *t);

#endif /* PODFSD_TLS_STREAM_I_H */
