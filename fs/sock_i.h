/* sock_i.h: a socket to podfsd: the TCP connection (with keepalive and a
 * user timeout), TLS on it unless the mount says tls=off (tls.h: the PSK
 * from the pod key, driven through tls_bio.h's BIOs), and the handshake that
 * makes it a session's connection (HELLO with the protocol version and
 * capabilities, AUTH proving knowledge of the pod key both ways; wire.h),
 * inside TLS. Synchronous, on the
 * calling thread, every wait bounded by a deadline and cut short by the
 * caller's stop eventfd. Used by transport.c, which then hands the
 * connection's bytes to stream.c (which sends them with sock_sendv).
 */
#ifndef PODFS_SOCK_I_H
#define PODFS_SOCK_I_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "podfs/codec.h"

struct client;

/* What a connection attempt needs; everything is borrowed. */
struct sock_dial {
	const struct client *c;       /* host, port, hostport, key, client_id, hostname */
	int stop_efd;                 /* readable: every wait ends with -ECANCELED */
	const atomic_bool *stopping;  /* true: the same */
	atomic_uint_fast64_t *ids;    /* request ids of the process (transport_next_id) */
};

/* What the handshake learnt. */
struct sock_session {
	uint64_t boot_id;      /* the daemon instance */
	uint64_t write_verf;   /* its write verifier (pfs_hello_rep) */
	uint64_t caps;         /* PFS_CAP_* both sides have */
	uint32_t flags;        /* PFS_AUTH_* */
	struct pfs_entry root; /* the export's root */
	/* TLS (NULL: plaintext): the SSL object, handshake done, on its
	 * BIOs (tls_bio.h: ciphertext from the socket goes into rbio, what
	 * it wants sent collects in wbio). The caller owns it. */
	struct ssl_st *ssl;
	struct bio_st *rbio, *wbio;
};

/* Connects to d->c's server (every address it resolves to, in turn, 10 s
 * each) and runs the handshakes, TLS if d->c->tls_ctx, then HELLO/AUTH
 * (10 s in all) for a main connection, or a
 * bulk one (no pushes; PFS_CAP_BULK). On success returns 0 with the
 * blocking socket in *fd_out (the caller owns it) and *hs filled. On
 * failure returns -errno and writes a one-line reason (without the
 * "podfs: " prefix) to err[errlen]: -EACCES (authentication failed),
 * -ECANCELED (stopped), -ECONNRESET (closed by
 * the server: it may require TLS), -EOPNOTSUPP (a bulk connection to a server
 * without PFS_CAP_BULK), -ENOTCONN (bulk: the server has no session of
 * this client yet), -EPROTO, or the error of the network. */
int sock_connect(const struct sock_dial *d, bool bulk, int *fd_out, struct sock_session *hs,
		 char *err, size_t errlen);

/* Writes all of iov[iovcnt] to fd (sendmsg, MSG_NOSIGNAL, resumed after
 * short writes and EINTR; iov is consumed). Returns 0 or -errno. The
 * caller serialises writers of fd. */
int sock_sendv(int fd, struct iovec *iov, int iovcnt);

#endif /* PODFS_SOCK_I_H */
