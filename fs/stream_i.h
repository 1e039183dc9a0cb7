/* stream_i.h: the byte stream of one connection to podfsd, plaintext or
 * TLS, once sock.c has dialed it and run its handshakes: a frame's bytes
 * written whole, bytes read through the connection's receive buffer, and
 * the count of bytes received and handled (for transport_quiet).
 *
 * Used by transport.c, which owns the socket (its number, its
 * generation, its send and fd locks, closing it) and embeds one struct
 * stream per connection; the stream owns what lies between the frames
 * and that socket: the SSL object (tls.h, tls_bio.h) and its lock,
 * and the send and receive buffers. The socket is handed to each call.
 *
 * Threads. A connection has several senders (FUSE threads, write-behind,
 * the ack thread) and one receiver (its connection thread). OpenSSL
 * allows no concurrent calls on one SSL object, so every call on it is
 * under the stream's tls_lock, held only while encrypting or decrypting,
 * never across a wait for the socket. The receiver SSL_reads; its read
 * BIO (tls_bio.h) takes ciphertext from the socket itself, with
 * MSG_DONTWAIT, straight into OpenSSL's record buffer; when the socket
 * has nothing, the receiver waits in poll(2) with tls_lock released. A
 * sender, holding the owner's send lock, SSL_writes into the write BIO
 * and takes its buffer (the send buffer, lent to the BIO for the writes:
 * no copy), then writes that to the socket with tls_lock released: so a
 * sender blocked on a full socket never stops the receiver from
 * decrypting (the server may be waiting for us to read), and records
 * reach the socket in the order they were made, as the write BIO is
 * drained only under the send lock. Whatever SSL_read queues in
 * the write BIO (a KeyUpdate answer; podfsd sends none) leaves with the
 * next frame sent. Lock order: the owner's send lock, its fd lock,
 * tls_lock.
 */
#ifndef PODFS_STREAM_I_H
#define PODFS_STREAM_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ssl_st;
struct bio_st;

/* One connection's stream; its fields are this module's. */
struct stream {
	const char *peer; /* "HOST:PORT", for messages (borrowed) */

	/* TLS (NULL: plaintext), attached and detached with the socket. */
	pthread_mutex_t tls_lock;
	struct ssl_st *ssl;
	struct bio_st *rbio, *wbio;
	uint8_t *sbuf; /* senders (the owner's send lock): ciphertext to send */
	size_t scap;

	/* Bytes of the live connection received, and of those the frames
	 * handled; both reset by stream_attach. */
	_Atomic uint64_t bytes_read, bytes_done;
	/* The receiver is blocked waiting for the socket (recv or poll). */
	_Atomic bool waiting;

	/* The receiver only. */
	int tls_fd;    /* TLS: the socket the read BIO reads (-1: not set yet) */
	uint8_t *rbuf; /* plaintext read ahead */
	size_t rstart, rend;
	/* Called on the receiver's thread after each read that brought
	 * bytes of a payload of STREAM_RX_NOTE_MIN bytes or more (a READ
	 * reply), if set (by the owner, before the receiver starts): the main
	 * connection tells its push queue that bulk data keeps coming, which
	 * a push may be behind. rx_noting: such a payload is being read. */
	void (*on_rx)(void *arg);
	void *on_rx_arg;
	bool rx_noting;
};

#define STREAM_RX_NOTE_MIN (64 * 1024)

/* Sets up st, with no connection, for a peer named peer (borrowed: it
 * must outlive st). Returns 0 or -ENOMEM (st then needs no stream_fini).
 * Start-up thread. */
int stream_init(struct stream *st, const char *peer);
/* Frees st's buffers and lock, and the SSL object of a connection still
 * attached (its socket is the owner's to close). No other thread may use
 * st any more. */
void stream_fini(struct stream *st);

/* Makes a new connection's stream: ssl, rbio, wbio as sock_connect left
 * them (sock_i.h struct sock_session; NULL ssl: plaintext), owned by st
 * from now on; the receive buffer is emptied and the counts restart
 * (under TLS, bytes the handshake read past its last frame count as one
 * byte read and not handled, until the receiver handled them). The
 * caller holds its send lock and fd lock, and is the receiver or no
 * receiver runs. */
void stream_attach(struct stream *st, struct ssl_st *ssl, struct bio_st *rbio,
		   struct bio_st *wbio);
/* Ends the connection's stream: sends and reads must not follow until
 * the next stream_attach. Returns its SSL object (NULL: plaintext) for
 * stream_tls_free, which the caller calls once it released its locks.
 * Same locks and thread as stream_attach. */
struct ssl_st *stream_detach(struct stream *st);
/* Frees an SSL object stream_detach returned. Safe on NULL. Any thread. */
void stream_tls_free(struct ssl_st *ssl);

/* Writes the frame hdr[PFS_FRAME_HDR_SIZE] + wire[wl] whole to fd, the
 * attached connection's socket (plaintext: one sendmsg of both; TLS:
 * header and payload in one record up to 4 KiB of payload, else sealed
 * and sent 256 KiB at a time). Returns 0 or -errno: -EPROTO if TLS
 * failed (the receiver saw why and says so), -EIO, -ENOMEM, or the
 * socket's error. The caller holds its send lock; blocks while the socket's
 * buffer is full, holding that lock but not tls_lock. hdr and wire are
 * borrowed for the call. */
int stream_send(struct stream *st, int fd, const uint8_t *hdr, const void *wire, size_t wl);

/* Reads exactly n bytes of the stream into dst, through the receive
 * buffer (a large n goes straight to dst), from fd, the attached
 * connection's socket; blocks until they came. Returns 0, -ECONNRESET at
 * the end of the stream, -EPROTO if TLS failed (logged as a warning),
 * -ENOMEM, or the socket's error. The receiver only. */
int stream_read(struct stream *st, int fd, void *dst, size_t n);

/* The receiver stands at a frame boundary, every frame read so far
 * handled; the last one was frame_bytes long on the wire. Counts them
 * done: plaintext, those bytes; TLS, all the ciphertext read, once
 * nothing read is left undecrypted or unparsed. The receiver only. */
void stream_frame_done(struct stream *st, uint64_t frame_bytes);

/* Bytes received on the attached connection (ciphertext under TLS), and
 * the part of them handled: done >= read means the receiver handled all
 * it received. Any thread (transport_quiet reads the bytes received
 * under the fd lock, with the socket's unread bytes). */
uint64_t stream_bytes_read(const struct stream *st);
uint64_t stream_bytes_done(const struct stream *st);
/* Whether the receiver is blocked waiting for bytes from the socket (as
 * opposed to running, or waiting for a CPU). Any thread; a hint only. */
bool stream_receiver_waiting(const struct stream *st);

#endif /* PODFS_STREAM_I_H */
