/* sock.c: a socket to podfsd: TCP connect and the HELLO/AUTH handshake
 * (see sock_i.h). */
#include "sock_i.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client_i.h"
#include "podfs/auth.h"
#include "podfs/clock.h"
#include "podfs/frame.h"

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

/* Writes one uncompressed frame to fd (handshake only). */
static int send_frame_fd(int fd, uint64_t id, uint16_t op, const void *payload, size_t len)
{
	uint8_t hdr[PFS_FRAME_HDR_SIZE];
	const void *wire;
	size_t wl = pfs_frame_prepare(hdr, id, op, 0, 0, payload, len, 0, NULL, 0, &wire);
	struct iovec iov[2] = { { hdr, sizeof(hdr) }, { (void *)wire, wl } };
	return sock_sendv(fd, iov, wl ? 2 : 1);
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

/* Reads one handshake reply frame for request id/op into buf[cap]. */
static int read_hs_reply(const struct sock_dial *d, int fd, uint64_t id, uint16_t op, uint8_t *buf,
			 size_t cap, size_t *len, int32_t *status, int64_t deadline)
{
	uint8_t hb[PFS_FRAME_HDR_SIZE];
	struct pfs_frame_hdr h;
	int rc;

	for (;;) {
		if ((rc = read_full_deadline(d, fd, hb, sizeof(hb), deadline)) < 0)
			return rc;
		if (pfs_hdr_unpack(hb, &h, PFS_MAX_HANDSHAKE) < 0 || (h.flags & PFS_FF_CODED) ||
		    h.raw_len > cap)
			return -EPROTO;
		if ((rc = read_full_deadline(d, fd, buf, h.raw_len, deadline)) < 0)
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
static int exchange(const struct sock_dial *d, int fd, uint16_t op, uint8_t *buf, size_t req_len,
		    size_t cap, size_t *len, int32_t *status, int64_t deadline, bool *sent)
{
	uint64_t id = atomic_fetch_add(d->ids, 1);
	int rc = send_frame_fd(fd, id, op, buf, req_len);

	*sent = rc == 0;
	if (rc < 0)
		return rc;
	return read_hs_reply(d, fd, id, op, buf, cap, len, status, deadline);
}

static int handshake(const struct sock_dial *d, int fd, bool bulk, struct sock_session *out,
		     char *err, size_t errlen)
{
	const struct client *c = d->c;
	struct pfs_hello_req hq = {
		.magic = PFS_MAGIC,
		.version_min = PFS_VERSION,
		.version_max = PFS_VERSION,
		/* A bulk connection gets no pushes. */
		.caps = bulk ? (PFS_CAPS_ALL & ~PFS_CAP_PUSH) | PFS_CAP_BULK : PFS_CAPS_ALL,
		.client_id = c->client_id,
	};
	struct pfs_hello_rep hr;
	struct pfs_auth_req aq;
	struct pfs_auth_rep ar;
	uint8_t buf[PFS_MAX_HANDSHAKE];
	struct pfs_wr w;
	int64_t deadline = pfs_mono_ms() + HANDSHAKE_TIMEOUT_MS;
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
	rc = exchange(d, fd, PFS_OP_HELLO, buf, w.len, sizeof(buf), &len, &status, deadline, &sent);
	if (!sent)
		goto out_io;
	if (rc == -ECONNRESET) {
		/* Before answering HELLO: most likely no export rule of the
		 * daemon admits this host's address. */
		snprintf(err, errlen,
			 "%s closed the connection during the handshake (does an export rule "
			 "admit this host's address? the daemon's log says)",
			 c->hostport);
		return -ECONNRESET;
	}
	if (rc < 0)
		goto out_io;
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
	rc = exchange(d, fd, PFS_OP_AUTH, buf, w.len, sizeof(buf), &len, &status, deadline, &sent);
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
	int fd = -1, rc;
	if ((rc = connect_tcp(d, &fd, err, errlen)) < 0)
		return rc;
	if ((rc = handshake(d, fd, bulk, hs, err, errlen)) < 0) {
		close(fd);
		return rc;
	}
	*fd_out = fd;
	return 0;
}
