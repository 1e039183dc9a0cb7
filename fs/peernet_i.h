/* peernet_i.h: a connection between two podfs clients for peer-assisted
 * reads (wire_peer.h): TCP, TLS with the pod key's PSK
 * (tls.h) unless the mount says tls=off, and frames on it; both sides
 * (peersrv.c serves, peercli.c asks).
 *
 * Every call takes an absolute deadline (CLOCK_MONOTONIC ms) and the
 * caller's stop eventfd (readable: give up with -ECANCELED), so nothing
 * here waits for longer than its caller allows; the socket is
 * non-blocking and OpenSSL drives it directly (SSL_set_fd), waiting with
 * poll(2) when it wants to read or write.
 *
 * One thread uses a connection at a time. Both ends check the other with
 * PEER_HELLO/PEER_AUTH (auth.h), inside TLS or not: the peer proves it
 * holds the pod key whatever the transport.
 */
#ifndef PODFS_PEERNET_I_H
#define PODFS_PEERNET_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "podfs/codec.h"

struct ssl_st;
struct ssl_ctx_st;

struct pnet {
	int fd;              /* -1: closed */
	struct ssl_st *ssl;  /* NULL: plaintext */
	int stop_efd;        /* borrowed; -1: none */
	bool reached;        /* pnet_dial: the TCP connection was made */
};

/* How long a TCP connect to a peer may take (at most, within the
 * caller's deadline): a peer on the pod's network answers in a round
 * trip, and the kernel answers for it however busy the host is. A peer
 * port closed by a firewall that drops packets without an answer would
 * otherwise cost each chunk the whole peer_timeout. */
#define PNET_CONNECT_MS 1000

/* Connects to sa (within deadline, the TCP connect within
 * PNET_CONNECT_MS) and runs TLS (if ctx, a client
 * context) and the peer handshake as client_id, proving knowledge of key
 * and checking the other's. Returns 0 with *pn set, or -errno:
 * -ETIMEDOUT, -ECANCELED, -EACCES (the other does not hold the key),
 * -EPROTO, -ECONNREFUSED...; pn->reached says whether the TCP connection
 * was made (a failure after it: the peer is there, but refused or is
 * busy). */
int pnet_dial(struct pnet *pn, struct ssl_ctx_st *ctx, const uint8_t key[PFS_KEY_LEN],
	      uint64_t client_id, const struct sockaddr_storage *sa, int stop_efd,
	      int64_t deadline);

/* Takes fd (accepted; owned by *pn from now on, closed on failure) and
 * runs TLS as server (if ctx, a server context). Returns 0 or -errno.
 * The peer handshake is the caller's (peerproto.c answers its frames). */
int pnet_accept(struct pnet *pn, int fd, struct ssl_ctx_st *ctx, int stop_efd,
		int64_t deadline);

/* Reads exactly n bytes. Returns 0, -ECONNRESET (closed), -ETIMEDOUT,
 * -ECANCELED, -EPROTO (TLS failed), or the socket's error. */
int pnet_read(struct pnet *pn, void *buf, size_t n, int64_t deadline);
/* Writes a[alen] then b[blen] (b may be NULL) whole. Returns as
 * pnet_read. */
int pnet_write2(struct pnet *pn, const void *a, size_t alen, const void *b, size_t blen,
		int64_t deadline);

/* Sends one uncoded frame: header (id, op, flags, status) + payload. */
int pnet_send_frame(struct pnet *pn, uint64_t id, uint16_t op, uint16_t flags, int32_t status,
		    const void *payload, size_t len, int64_t deadline);
/* Reads one frame header (unpacked, checked: no coded payload, raw_len
 * at most max). Returns 0, -EBADMSG (a bad header), or as pnet_read. */
int pnet_read_hdr(struct pnet *pn, struct pfs_frame_hdr *h, size_t max, int64_t deadline);

/* Closes the connection (TLS close_notify not waited for). Safe on a
 * closed one. */
void pnet_close(struct pnet *pn);

#endif /* PODFS_PEERNET_I_H */
