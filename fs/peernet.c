/* peernet.c: a connection between two podfs clients (see peernet_i.h). */
#include "peernet_i.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "podfs/auth.h"
#include "podfs/clock.h"
#include "podfs/frame.h"
#include "podfs/tls.h"

/* Waits until fd is ready for events, the deadline passes or stop_efd
 * is readable. */
static int wait_fd(const struct pnet *pn, short events, int64_t deadline)
{
	for (;;) {
		struct pollfd p[2] = { { .fd = pn->fd, .events = events },
				       { .fd = pn->stop_efd, .events = POLLIN } };
		int64_t left = deadline - pfs_mono_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		int n = poll(p, pn->stop_efd >= 0 ? 2 : 1, (int)(left > 60000 ? 60000 : left));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (pn->stop_efd >= 0 && p[1].revents)
			return -ECANCELED;
		if (p[0].revents)
			return 0;
	}
}

/* What to do after an OpenSSL call on pn returned r: 1 retry (after
 * waiting for the socket), or -errno. */
static int tls_retry(struct pnet *pn, int r, int64_t deadline)
{
	int e = SSL_get_error(pn->ssl, r);
	unsigned long why = ERR_peek_error();

	ERR_clear_error();
	/* (OpenSSL 3.0 says so of a connection closed without an alert: a
	 * peer at its connection limit, or one that went.) */
	if (e == SSL_ERROR_SSL && ERR_GET_LIB(why) == ERR_LIB_SSL &&
	    ERR_GET_REASON(why) == SSL_R_UNEXPECTED_EOF_WHILE_READING)
		return -ECONNRESET;
	if (e == SSL_ERROR_WANT_READ)
		return wait_fd(pn, POLLIN, deadline) ?: 1;
	if (e == SSL_ERROR_WANT_WRITE)
		return wait_fd(pn, POLLOUT, deadline) ?: 1;
	if (e == SSL_ERROR_ZERO_RETURN)
		return -ECONNRESET;
	if (e == SSL_ERROR_SYSCALL)
		return errno && errno != EAGAIN ? -errno : -ECONNRESET;
	return -EPROTO;
}

int pnet_read(struct pnet *pn, void *buf, size_t n, int64_t deadline)
{
	uint8_t *p = buf;

	while (n > 0) {
		if (pn->ssl) {
			ERR_clear_error();
			int k = SSL_read(pn->ssl, p, n > (1u << 30) ? 1 << 30 : (int)n);
			if (k > 0) {
				p += k;
				n -= (size_t)k;
				continue;
			}
			int rc = tls_retry(pn, k, deadline);
			if (rc < 0)
				return rc;
			continue;
		}
		ssize_t k = recv(pn->fd, p, n, 0);
		if (k > 0) {
			p += k;
			n -= (size_t)k;
			continue;
		}
		if (k == 0)
			return -ECONNRESET;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return -errno;
		int rc = wait_fd(pn, POLLIN, deadline);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int write_all(struct pnet *pn, const uint8_t *p, size_t n, int64_t deadline)
{
	while (n > 0) {
		if (pn->ssl) {
			ERR_clear_error();
			/* A retried SSL_write takes the same buffer and length. */
			int want = n > (1u << 30) ? 1 << 30 : (int)n;
			int k = pfs_tls_write(pn->ssl, p, want);
			if (k > 0) {
				p += k;
				n -= (size_t)k;
				continue;
			}
			int rc = tls_retry(pn, k, deadline);
			if (rc < 0)
				return rc;
			continue;
		}
		ssize_t k = send(pn->fd, p, n, MSG_NOSIGNAL);
		if (k > 0) {
			p += k;
			n -= (size_t)k;
			continue;
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno != EAGAIN)
			return -errno;
		int rc = wait_fd(pn, POLLOUT, deadline);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int pnet_write2(struct pnet *pn, const void *a, size_t alen, const void *b, size_t blen,
		int64_t deadline)
{
	/* Small pieces go out together: one TLS record, one segment. */
	if (b && alen + blen <= 512) {
		uint8_t one[512];
		memcpy(one, a, alen);
		memcpy(one + alen, b, blen);
		return write_all(pn, one, alen + blen, deadline);
	}
	int rc = write_all(pn, a, alen, deadline);
	if (rc == 0 && b && blen)
		rc = write_all(pn, b, blen, deadline);
	return rc;
}

int pnet_send_frame(struct pnet *pn, uint64_t id, uint16_t op, uint16_t flags, int32_t status,
		    const void *payload, size_t len, int64_t deadline)
{
	uint8_t hdr[PFS_FRAME_HDR_SIZE];
	const void *wire;
	size_t wl = pfs_frame_prepare(hdr, id, op, flags, status, payload, len, 0, NULL, 0, &wire);

	return pnet_write2(pn, hdr, sizeof(hdr), wl ? wire : NULL, wl, deadline);
}

int pnet_read_hdr(struct pnet *pn, struct pfs_frame_hdr *h, size_t max, int64_t deadline)
{
	uint8_t hb[PFS_FRAME_HDR_SIZE];
	int rc = pnet_read(pn, hb, sizeof(hb), deadline);

	if (rc < 0)
		return rc;
	if (pfs_hdr_unpack(hb, h, max) < 0 || (h->flags & PFS_FF_CODED))
		return -EBADMSG;
	return 0;
}

void pnet_close(struct pnet *pn)
{
	if (pn->ssl) {
		SSL_free(pn->ssl);
		pn->ssl = NULL;
	}
	if (pn->fd >= 0) {
		close(pn->fd);
		pn->fd = -1;
	}
}

static void tune(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* TLS on pn->fd as client or server, until deadline. */
static int tls_start(struct pnet *pn, struct ssl_ctx_st *ctx, bool server, int64_t deadline)
{
	pn->ssl = SSL_new(ctx);
	if (!pn->ssl || !SSL_set_fd(pn->ssl, pn->fd))
		return -ENOMEM;
	if (server)
		SSL_set_accept_state(pn->ssl);
	else
		SSL_set_connect_state(pn->ssl);
	for (;;) {
		ERR_clear_error();
		int r = SSL_do_handshake(pn->ssl);
		if (r == 1)
			break;
		/* -EPROTO: an alert, so another key (closed without one:
		 * -ECONNRESET, a busy peer that refused it). */
		int rc = tls_retry(pn, r, deadline);
		if (rc < 0)
			return rc == -EPROTO ? -EACCES : rc;
	}
	/* The PSK, not a certificate, must be what authenticated it (our
	 * contexts accept no certificate anyway). */
	return SSL_session_reused(pn->ssl) ? 0 : -EPROTO;
}

/* One handshake round trip on pn: request op with payload p[len], its
 * reply into buf[cap] (*got bytes). Returns the reply's status (>= 0) or
 * -errno. */
static int exchange(struct pnet *pn, uint64_t id, uint16_t op, const void *p, size_t len,
		    uint8_t *buf, size_t cap, size_t *got, int64_t deadline)
{
	struct pfs_frame_hdr h;
	int rc = pnet_send_frame(pn, id, op, 0, 0, p, len, deadline);

	if (rc == 0)
		rc = pnet_read_hdr(pn, &h, cap, deadline);
	if (rc < 0)
		return rc;
	if (!(h.flags & PFS_FF_REPLY) || h.id != id || h.op != op)
		return -EPROTO;
	if ((rc = pnet_read(pn, buf, h.raw_len, deadline)) < 0)
		return rc;
	*got = h.raw_len;
	return h.status >= 0 && h.status < 4096 ? h.status : -EPROTO;
}

static int handshake(struct pnet *pn, const uint8_t key[PFS_KEY_LEN], uint64_t client_id,
		     int64_t deadline)
{
	struct pfs_peer_hello_req hq = { .magic = PFS_PEER_MAGIC, .client_id = client_id };
	struct pfs_peer_hello_rep hr;
	struct pfs_peer_auth_req aq;
	uint8_t buf[PFS_MAX_HANDSHAKE], mac[PFS_MAC_LEN];
	struct pfs_wr w;
	size_t got;
	int rc;

	if (pfs_random(hq.nonce.b, sizeof(hq.nonce.b)) < 0)
		return -EIO;
	pfs_wr_init(&w, buf, sizeof(buf));
	if (pfs_enc_peer_hello_req(&w, &hq) < 0)
		return -EINVAL;
	rc = exchange(pn, 1, PFS_OP_PEER_HELLO, buf, w.len, buf, sizeof(buf), &got, deadline);
	if (rc != 0)
		return rc < 0 ? rc : -EPROTO;
	if (pfs_dec_peer_hello_rep(buf, got, &hr) < 0)
		return -EPROTO;
	pfs_auth_peer_server_mac(key, hq.nonce.b, hr.nonce.b, client_id, mac);
	if (!pfs_mac_equal(mac, hr.mac.b, PFS_MAC_LEN))
		return -EACCES;
	pfs_auth_peer_client_mac(key, hq.nonce.b, hr.nonce.b, client_id, aq.mac.b);
	pfs_wr_init(&w, buf, sizeof(buf));
	if (pfs_enc_peer_auth_req(&w, &aq) < 0)
		return -EINVAL;
	rc = exchange(pn, 2, PFS_OP_PEER_AUTH, buf, w.len, buf, sizeof(buf), &got, deadline);
	if (rc > 0)
		return rc == EACCES ? -EACCES : -EPROTO;
	return rc;
}

int pnet_dial(struct pnet *pn, struct ssl_ctx_st *ctx, const uint8_t key[PFS_KEY_LEN],
	      uint64_t client_id, const struct sockaddr_storage *sa, int stop_efd,
	      int64_t deadline)
{
	socklen_t sl = sa->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
						 : sizeof(struct sockaddr_in);
	int rc;

	pn->ssl = NULL;
	pn->stop_efd = stop_efd;
	pn->reached = false;
	pn->fd = socket(sa->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (pn->fd < 0)
		return -errno;
	tune(pn->fd);
	if (connect(pn->fd, (const struct sockaddr *)sa, sl) < 0) {
		if (errno != EINPROGRESS) {
			rc = -errno;
			goto fail;
		}
		int64_t cd = pfs_mono_ms() + PNET_CONNECT_MS;
		if ((rc = wait_fd(pn, POLLOUT, cd < deadline ? cd : deadline)) < 0)
			goto fail;
		int soerr = 0;
		socklen_t el = sizeof(soerr);
		getsockopt(pn->fd, SOL_SOCKET, SO_ERROR, &soerr, &el);
		if (soerr) {
			rc = -soerr;
			goto fail;
		}
	}
	pn->reached = true;
	if (ctx && (rc = tls_start(pn, ctx, false, deadline)) < 0)
		goto fail;
	if ((rc = handshake(pn, key, client_id, deadline)) < 0)
		goto fail;
	return 0;
fail:
	pnet_close(pn);
	return rc;
}

int pnet_accept(struct pnet *pn, int fd, struct ssl_ctx_st *ctx, int stop_efd,
		int64_t deadline)
{
	int rc = 0;

	pn->fd = fd;
	pn->ssl = NULL;
	pn->stop_efd = stop_efd;
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	tune(fd);
	if (ctx && (rc = tls_start(pn, ctx, true, deadline)) < 0)
		pnet_close(pn);
	return rc;
}
