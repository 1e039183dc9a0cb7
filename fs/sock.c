/* sock.c: a socket to podfsd: TCP connect, the TLS handshake and the
 * HELLO/AUTH handshake (see sock_i.h). */
#include "sock_i.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client_i.h"
#include "podfs/auth.h"
#include "podfs/clock.h"
#include "podfs/frame.h"
#include "podfs/tls.h"

#define CONNECT_TIMEOUT_MS 10000
#define HANDSHAKE_TIMEOUT_MS 10000

/* Waits until fd is ready for events, the deadline passes (-ETIMEDOUT) or
 * d says stop (-ECANCELED). */
static int wait_fd(const struct sock_dial *d, int fd, short events, int64_t deadline)
{
	for (;;) {
		struct pollfd p[2] = { { .fd = fd, .events = events }, { .fd = d->stop_efd, .events = POLLIN } };
		int64_t left = deadline - pfs_mono_ms();
		if (atomic_load(d->stopping))
			return -ECANCELED;
		if (left <= 0)
			return -ETIMEDOUT;
		int n = poll(p, 2, (int)(left > 60000 ? 60000 : left));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (p[1].revents)
			return -ECANCELED;
		if (p[0].revents)
			return 0;
	}
}

int sock_sendv(int fd, struct iovec *iov, int iovcnt)
{
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)iovcnt };

	while (mh.msg_iovlen > 0) {
		ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		while (n > 0 && mh.msg_iovlen > 0) {
			if ((size_t)n >= mh.msg_iov->iov_len) {
				n -= (ssize_t)mh.msg_iov->iov_len;
				mh.msg_iov++;
				mh.msg_iovlen--;
			} else {
				mh.msg_iov->iov_base = (uint8_t *)mh.msg_iov->iov_base + n;
				mh.msg_iov->iov_len -= (size_t)n;
				n = 0;
			}
		}
	}
	return 0;
}

/* The connection during the handshakes: the socket and, under TLS, the
 * SSL object on its byte-queue BIOs (tls.h, tls_bio.h), which this file
 * feeds from and drains to the socket itself, so that every wait keeps
 * its deadline and the stop eventfd. */
struct hs_io {
	const struct sock_dial *d;
	int fd;
	SSL *ssl; /* NULL: plaintext */
	BIO *rbio, *wbio;
	int64_t deadline;
};

/* Sends the ciphertext waiting in io's wbio. Returns 0 or -errno. */
static int tls_flush(struct hs_io *io)
{
	uint8_t buf[16384];
	size_t n;

	while ((n = BIO_ctrl_pending(io->wbio)) > 0) {
		int k = BIO_read(io->wbio, buf, (int)(n < sizeof(buf) ? n : sizeof(buf)));
		if (k <= 0)
			return -EIO;
		struct iovec iov = { buf, (size_t)k };
		int rc = sock_sendv(io->fd, &iov, 1);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Waits for ciphertext (until io's deadline) and moves what arrived into
 * io's rbio. Returns 0 or -errno (-ECONNRESET: end of stream). */
static int tls_fill(struct hs_io *io)
{
	uint8_t buf[16384];
	int rc = wait_fd(io->d, io->fd, POLLIN, io->deadline);
	ssize_t k;

	if (rc < 0)
		return rc;
	k = recv(io->fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (k < 0)
		return errno == EINTR || errno == EAGAIN ? 0 : -errno;
	if (k == 0)
		return -ECONNRESET;
	return BIO_write(io->rbio, buf, (int)k) == (int)k ? 0 : -ENOMEM;
}

/* Runs the TLS handshake on io. Returns 0, or -errno with a reason in
 * err[errlen]: -EACCES if the server refused our PSK (another pod key)
 * or, with tls_ca, if its certificate did not verify. */
static int tls_handshake(struct hs_io *io, char *err, size_t errlen)
{
	const struct client *c = io->d->c;
	const char *hp = c->hostport;

	for (;;) {
		char why[160];
		ERR_clear_error();
		int r = SSL_do_handshake(io->ssl);
		int e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(io->ssl, r);
		if (e != SSL_ERROR_NONE && e != SSL_ERROR_WANT_READ)
			pfs_tls_reason(why, sizeof(why), "protocol error");
		int rc = tls_flush(io); /* our messages, or the alert */
		if (e == SSL_ERROR_NONE || e == SSL_ERROR_WANT_READ) {
			if (rc == 0 && e == SSL_ERROR_WANT_READ)
				rc = tls_fill(io);
			if (rc == -ECONNRESET) {
				/* A wrong key fails with an alert; a close without
				 * one: most likely no export rule admits us. */
				snprintf(err, errlen,
					 "%s closed the connection during the TLS handshake (does an "
					 "export rule admit this host's address? the daemon's log says)",
					 hp);
				return rc;
			}
			if (rc == -ECANCELED) {
				snprintf(err, errlen, "stopped");
				return rc;
			}
			if (rc < 0) {
				snprintf(err, errlen, "TLS handshake with %s failed: %s", hp,
					 strerror(-rc));
				return rc;
			}
			if (e == SSL_ERROR_NONE)
				break;
			continue;
		}
		if (c->tls_ca_ctx && SSL_get_verify_result(io->ssl) != X509_V_OK) {
			/* We refused the server: it is not who tls_ca names. */
			snprintf(err, errlen,
				 "TLS handshake with %s failed: its certificate did not verify "
				 "against %s for the name %s: %s",
				 hp, c->tls_ca, c->tls_name,
				 X509_verify_cert_error_string(SSL_get_verify_result(io->ssl)));
			return -EACCES;
		}
		if (c->tls_ca_ctx && strstr(why, "alert")) {
			snprintf(err, errlen,
				 "TLS handshake with %s failed: the server refused a handshake by "
				 "certificate (%s); was podfsd started with --tls-cert?",
				 hp, why);
			return -EACCES;
		}
		if (strstr(why, "alert")) {
			/* The server refused: with a PSK and no certificate
			 * that means its key differs (the binder did not
			 * verify). */
			snprintf(err, errlen,
				 "TLS handshake with %s failed (wrong key?): the server refused our "
				 "pod key (%s)",
				 hp, why);
			return -EACCES;
		}
		snprintf(err, errlen, "TLS handshake with %s failed: %s", hp, why);
		return -EPROTO;
	}
	char why[160];
	if (!pfs_tls_authenticated(io->ssl, why, sizeof(why))) {
		/* Cannot happen with our contexts (a PSK context accepts no
		 * certificate; a CA one offers no PSK and verifies), but
		 * checked: the server must be who we asked for. */
		snprintf(err, errlen, "TLS handshake with %s: %s", hp, why);
		return -EPROTO;
	}
	return 0;
}

/* Writes one uncompressed frame (handshake only). */
static int send_frame(struct hs_io *io, uint64_t id, uint16_t op, const void *payload,
		      size_t len)
{
	uint8_t hdr[PFS_FRAME_HDR_SIZE];
	const void *wire;
	size_t wl = pfs_frame_prepare(hdr, id, op, 0, 0, payload, len, 0, NULL, 0, &wire);
	struct iovec iov[2] = { { hdr, sizeof(hdr) }, { (void *)wire, wl } };

	if (!io->ssl)
		return sock_sendv(io->fd, iov, wl ? 2 : 1);
	uint8_t one[PFS_FRAME_HDR_SIZE + PFS_MAX_HANDSHAKE];
	if (wl > PFS_MAX_HANDSHAKE)
		return -EMSGSIZE;
	memcpy(one, hdr, sizeof(hdr));
	if (wl)
		memcpy(one + sizeof(hdr), wire, wl);
	ERR_clear_error();
	if (pfs_tls_write(io->ssl, one, (int)(sizeof(hdr) + wl)) <= 0) {
		ERR_clear_error();
		return -EPROTO;
	}
	return tls_flush(io);
}

static void tune_socket(int fd)
{
	int one = 1, idle = 10, intvl = 5, cnt = 3;
	unsigned int user_timeout = 30000;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
	/* A dead coordinator that never answers again is noticed after
	 * this long even while data is unacknowledged. */
	setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof(user_timeout));
}

static int connect_tcp(const struct sock_dial *d, int *out, char *err, size_t errlen)
{
	const struct client *c = d->c;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_family = AF_UNSPEC };
	struct addrinfo *res, *ai;
	char port[8];
	int rc = -EHOSTUNREACH;

	snprintf(port, sizeof(port), "%u", (unsigned)c->port);
	int g = getaddrinfo(c->host, port, &hints, &res);
	if (g != 0) {
		snprintf(err, errlen, "cannot resolve %s: %s", c->host, gai_strerror(g));
		return g == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
				ai->ai_protocol);
		if (fd < 0) {
			rc = -errno;
			continue;
		}
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
			if (errno != EINPROGRESS) {
				rc = -errno;
				close(fd);
				continue;
			}
			rc = wait_fd(d, fd, POLLOUT, pfs_mono_ms() + CONNECT_TIMEOUT_MS);
			if (rc == 0) {
				int soerr = 0;
				socklen_t sl = sizeof(soerr);
				getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
				rc = -soerr;
			}
			if (rc < 0) {
				close(fd);
				if (rc == -ECANCELED)
					break;
				continue;
			}
		}
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
		tune_socket(fd);
		freeaddrinfo(res);
		*out = fd;
		return 0;
	}
	freeaddrinfo(res);
	if (rc == 0)
		rc = -EHOSTUNREACH; /* no address at all; never report success without a socket */
	snprintf(err, errlen, "cannot connect to %s: %s", c->hostport, strerror(-rc));
	return rc;
}

/* Reads exactly n bytes before the deadline (handshake only, unbuffered). */
static int read_full_deadline(const struct sock_dial *d, int fd, void *buf, size_t n,
			      int64_t deadline)
{
	uint8_t *p = buf;
	while (n > 0) {
		int rc = wait_fd(d, fd, POLLIN, deadline);
		if (rc < 0)
			return rc;
		ssize_t k = recv(fd, p, n, MSG_DONTWAIT);
		if (k < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		if (k == 0)
			return -ECONNRESET;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Reads exactly n bytes of plaintext (handshake only). */
static int read_full(struct hs_io *io, void *buf, size_t n)
{
	uint8_t *p = buf;

	if (!io->ssl)
		return read_full_deadline(io->d, io->fd, buf, n, io->deadline);
	while (n > 0) {
		ERR_clear_error();
		int k = SSL_read(io->ssl, p, n > INT_MAX ? INT_MAX : (int)n);
		if (k > 0) {
			p += k;
			n -= (size_t)k;
			continue;
		}
		int e = SSL_get_error(io->ssl, k);
		ERR_clear_error();
		if (e == SSL_ERROR_ZERO_RETURN)
			return -ECONNRESET;
		if (e != SSL_ERROR_WANT_READ)
			return -EPROTO;
		int rc = tls_flush(io);
		if (rc == 0)
			rc = tls_fill(io);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Reads one handshake reply frame for request id/op into buf[cap]. */
static int read_hs_reply(struct hs_io *io, uint64_t id, uint16_t op, uint8_t *buf, size_t cap,
			 size_t *len, int32_t *status)
{
	uint8_t hb[PFS_FRAME_HDR_SIZE];
	struct pfs_frame_hdr h;
	int rc;

	for (;;) {
		if ((rc = read_full(io, hb, sizeof(hb))) < 0)
			return rc;
		if (pfs_hdr_unpack(hb, &h, PFS_MAX_HANDSHAKE) < 0 || (h.flags & PFS_FF_CODED) ||
		    h.raw_len > cap)
			return -EPROTO;
		if ((rc = read_full(io, buf, h.raw_len)) < 0)
			return rc;
		if (h.flags & PFS_FF_PUSH)
			continue; /* nothing to invalidate yet */
		if (!(h.flags & PFS_FF_REPLY) || h.id != id || h.op != op)
			return -EPROTO;
		*len = h.raw_len;
		*status = h.status;
		return 0;
	}
}

/* One handshake round trip: request op (buf[req_len]) out on fd under a
 * fresh id (*sent tells whether it went), its reply into buf[cap] (*len
 * bytes, *status). Returns 0, or the -errno of the send or the read. */
static int exchange(struct hs_io *io, uint16_t op, uint8_t *buf, size_t req_len, size_t cap,
		    size_t *len, int32_t *status, bool *sent)
{
	uint64_t id = atomic_fetch_add(io->d->ids, 1);
	int rc = send_frame(io, id, op, buf, req_len);

	*sent = rc == 0;
	if (rc < 0)
		return rc;
	return read_hs_reply(io, id, op, buf, cap, len, status);
}

static int handshake(struct hs_io *io, bool bulk, struct sock_session *out, char *err,
		     size_t errlen)
{
	const struct sock_dial *d = io->d;
	const struct client *c = d->c;
	struct pfs_hello_req hq = {
		.magic = PFS_MAGIC,
		.version_min = PFS_VERSION,
		.version_max = PFS_VERSION,
		/* A bulk connection gets no pushes. */
		.caps = (bulk ? (PFS_CAPS_ALL & ~PFS_CAP_PUSH) | PFS_CAP_BULK : PFS_CAPS_ALL) &
			~(c->peers ? 0 : (uint64_t)PFS_CAP_PEER) &
			~(c->delegate && !bulk ? 0 : (uint64_t)PFS_CAP_DELEG),
		.client_id = c->client_id,
	};
	struct pfs_hello_rep hr;
	struct pfs_auth_req aq;
	struct pfs_auth_rep ar;
	uint8_t buf[PFS_MAX_HANDSHAKE];
	struct pfs_wr w;
	size_t len;
	int32_t status;
	bool sent;
	int rc;

	if (pfs_random(hq.nonce.b, sizeof(hq.nonce.b)) < 0) {
		snprintf(err, errlen, "no random bytes for the handshake nonce");
		return -EIO;
	}
	hq.hostname.len = (uint16_t)strnlen(c->hostname, PFS_HOSTNAME_MAX);
	memcpy(hq.hostname.s, c->hostname, hq.hostname.len);
	hq.hostname.s[hq.hostname.len] = 0;

	pfs_wr_init(&w, buf, sizeof(buf));
	if (pfs_enc_hello_req(&w, &hq) < 0) {
		snprintf(err, errlen, "cannot encode HELLO");
		return -EINVAL;
	}
	rc = exchange(io, PFS_OP_HELLO, buf, w.len, sizeof(buf), &len, &status, &sent);
	if (!sent)
		goto out_io;
	if (rc == -ECONNRESET) {
		/* Before answering HELLO: no export rule of the daemon admits
		 * this host's address, or (plaintext) the daemon requires TLS. */
		snprintf(err, errlen,
			 "%s closed the connection during the handshake (%s the daemon's log says)",
			 c->hostport,
			 io->ssl ? "does an export rule admit this host's address?"
				 : "it may require TLS: mount without tls=off; or no export rule "
				   "admits this host's address:");
		return -ECONNRESET;
	}
	if (rc < 0)
		goto out_io;
	if (status == EPROTONOSUPPORT) {
		snprintf(err, errlen, "%s speaks another protocol version than this podfs (%d): "
			 "run one podfs release on the coordinator and the hosts", c->hostport,
			 PFS_VERSION);
		return -EPROTONOSUPPORT;
	}
	if (status != 0) {
		snprintf(err, errlen, "%s refused the session: %s", c->hostport, strerror(status));
		return -(status < 4096 ? status : EPROTO);
	}
	if (pfs_dec_hello_rep(buf, len, &hr) < 0 || hr.version != PFS_VERSION) {
		snprintf(err, errlen, "%s sent a bad HELLO reply (protocol version?)", c->hostport);
		return -EPROTO;
	}
	uint8_t mac[PFS_MAC_LEN];
	pfs_auth_server_mac(c->key, hq.nonce.b, hr.nonce.b, c->client_id, mac);
	if (!pfs_mac_equal(mac, hr.mac.b, PFS_MAC_LEN)) {
		snprintf(err, errlen,
			 "authentication with %s failed (wrong key?): the server could not "
			 "prove it knows the pod key",
			 c->hostport);
		return -EACCES;
	}
	if (bulk && !(hr.caps & PFS_CAP_BULK)) {
		/* An older server would take it for our main connection. */
		snprintf(err, errlen, "%s does not support several connections per mount",
			 c->hostport);
		return -EOPNOTSUPP;
	}

	pfs_auth_client_mac(c->key, hq.nonce.b, hr.nonce.b, c->client_id, aq.mac.b);
	pfs_wr_init(&w, buf, sizeof(buf));
	if (pfs_enc_auth_req(&w, &aq) < 0) {
		snprintf(err, errlen, "cannot encode AUTH");
		return -EINVAL;
	}
	rc = exchange(io, PFS_OP_AUTH, buf, w.len, sizeof(buf), &len, &status, &sent);
	if (!sent)
		goto out_auth;
	if (rc == -ECONNRESET || rc == -EPIPE || (rc == 0 && (status == EACCES || status == EPERM)))
		goto out_auth;
	if (rc < 0)
		goto out_io;
	if (bulk && status == ENOTCONN) {
		snprintf(err, errlen, "%s has no session for this mount yet", c->hostport);
		return -ENOTCONN;
	}
	if (status != 0) {
		snprintf(err, errlen, "%s refused the session: %s", c->hostport, strerror(status));
		return -(status < 4096 ? status : EPROTO);
	}
	if (pfs_dec_auth_rep(buf, len, &ar) < 0) {
		snprintf(err, errlen, "%s sent a bad AUTH reply", c->hostport);
		return -EPROTO;
	}
	out->boot_id = hr.boot_id;
	out->write_verf = hr.write_verf;
	out->caps = hr.caps & PFS_CAPS_ALL;
	out->root = ar.root;
	out->flags = ar.flags;
	return 0;

out_auth:
	snprintf(err, errlen, "authentication with %s failed (wrong key?)", c->hostport);
	return -EACCES;
out_io:
	if (rc == -ECANCELED)
		snprintf(err, errlen, "stopped");
	else if (rc == -EPROTO)
		snprintf(err, errlen, "%s broke the protocol during the handshake", c->hostport);
	else
		snprintf(err, errlen, "handshake with %s failed: %s", c->hostport, strerror(-rc));
	return rc;
}

int sock_connect(const struct sock_dial *d, bool bulk, int *fd_out, struct sock_session *hs,
		 char *err, size_t errlen)
{
	struct hs_io io = { .d = d, .fd = -1 };
	int rc;

	if ((rc = connect_tcp(d, &io.fd, err, errlen)) < 0)
		return rc;
	io.deadline = pfs_mono_ms() + HANDSHAKE_TIMEOUT_MS;
	if (d->c->tls_ctx) {
		/* With tls_ca the server's certificate, else the pod key's PSK. */
		SSL_CTX *ctx = d->c->tls_ca_ctx ? d->c->tls_ca_ctx : d->c->tls_ctx;
		io.ssl = pfs_tls_new(ctx, &io.rbio, &io.wbio);
		if (!io.ssl) {
			snprintf(err, errlen, "cannot set up TLS: out of memory");
			rc = -ENOMEM;
			goto fail;
		}
		if (d->c->tls_ca_ctx &&
		    pfs_tls_expect_name(io.ssl, d->c->tls_name) < 0) {
			snprintf(err, errlen, "cannot check the server's certificate for the name %s",
				 d->c->tls_name);
			rc = -EINVAL;
			goto fail;
		}
		SSL_set_connect_state(io.ssl);
		if ((rc = tls_handshake(&io, err, errlen)) < 0)
			goto fail;
	}
	if ((rc = handshake(&io, bulk, hs, err, errlen)) < 0)
		goto fail;
	hs->ssl = io.ssl;
	hs->rbio = io.rbio;
	hs->wbio = io.wbio;
	*fd_out = io.fd;
	return 0;
fail:
	SSL_free(io.ssl);
	close(io.fd);
	return rc;
}
