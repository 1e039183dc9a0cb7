/* transport.c: TCP connection to podfsd: connect, handshake, receive
 * frames, reconnect with backoff, and the push thread. */
#include "transport_i.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <linux/sockios.h>

#include "cache_i.h"
#include "gate_i.h"
#include "client_i.h"
#include "locks_i.h"
#include "podfs/auth.h"
#include "podfs/clock.h"
#include "podfs/frame.h"
#include "podfs/log.h"
#include "rpc_i.h"

#define RBUF_SIZE (256u * 1024)
#define CONNECT_TIMEOUT_MS 10000
#define HANDSHAKE_TIMEOUT_MS 10000
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000

struct push_item {
	struct push_item *next;
	uint64_t seq; /* gate_note_push number, 0 if none */
	uint64_t gen; /* connection it came on */
	uint16_t op;
	size_t len;
	uint8_t *buf;
};

/* One TCP connection: index 0 is the main one, the others are bulk
 * connections (READ and WRITE only, PFS_CAP_BULK). */
struct chan {
	struct transport *t;
	unsigned idx;
	bool bulk;

	/* send_lock serializes writers (a frame goes out whole) and guards
	 * fd/gen for them; fd_lock guards the validity of the fd number for
	 * shutdown(2) from transport_stop. The fd is closed only with both
	 * held. */
	pthread_mutex_t send_lock;
	pthread_mutex_t fd_lock;
	int fd;       /* -1 when down */
	uint64_t gen; /* generation of fd */

	/* Bytes of the live connection its thread received, and of those
	 * the frames it handled (pushes numbered); both reset with fd (under
	 * fd_lock). See transport_quiet. */
	_Atomic uint64_t bytes_read, bytes_done;

	/* Bytes the kernel had not sent yet after the last frame went out
	 * (link.h: LZ4 only while the link is backed up). */
	_Atomic size_t unsent;

	/* Its connection thread only. */
	uint64_t boot_id;
	uint8_t *rbuf;
	size_t rstart, rend;
	pthread_t thr;
	bool started;
};

struct transport {
	struct client *c;
	unsigned nchan;
	struct chan *ch;

	int stop_efd; /* eventfd: wakes the connection threads' waits */
	atomic_bool stopping;
	/* Generations are unique across the connections of the transport,
	 * so that one number names one connection (rpc.c). */
	atomic_uint_fast64_t last_gen;

	/* Push queue. */
	pthread_mutex_t push_lock;
	pthread_cond_t push_cond;
	struct push_item *push_head, **push_tail;
	bool push_stop;
	pthread_t push_thr;
	bool push_started;

	/* Acknowledgements (PUSH_ACK), under push_lock: pushes received on
	 * connection ack_gen (numbered, not necessarily applied yet) and
	 * what the ack thread sent last. The ack thread, not the connection
	 * thread (which must never block on a send) nor the push thread
	 * (which can wait on the kernel, e.g. for a directory lock held by an
	 * operation whose reply waits for another client's ack). */
	pthread_cond_t ack_cond;
	uint64_t ack_gen, ack_count, sent_gen, sent_count;
	pthread_t ack_thr;
	bool ack_started;
};

int transport_new(struct client *c, struct transport **out)
{
	struct transport *t = calloc(1, sizeof(*t));
	unsigned n = c->conns ? c->conns : 1;
	if (!t)
		return -ENOMEM;
	t->ch = calloc(n, sizeof(*t->ch));
	if (!t->ch)
		goto out_free;
	for (t->nchan = 0; t->nchan < n; t->nchan++) {
		struct chan *ch = &t->ch[t->nchan];
		ch->rbuf = malloc(RBUF_SIZE);
		if (!ch->rbuf)
			goto out_free_chans;
		ch->t = t;
		ch->idx = t->nchan;
		ch->bulk = t->nchan > 0;
		ch->fd = -1;
		pthread_mutex_init(&ch->send_lock, NULL);
		pthread_mutex_init(&ch->fd_lock, NULL);
	}
	t->stop_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (t->stop_efd < 0)
		goto out_free_chans;
	t->c = c;
	pthread_mutex_init(&t->push_lock, NULL);
	pthread_cond_init(&t->push_cond, NULL);
	pthread_cond_init(&t->ack_cond, NULL);
	t->push_tail = &t->push_head;
	*out = t;
	return 0;
out_free_chans:
	for (unsigned i = 0; i < t->nchan; i++) {
		pthread_mutex_destroy(&t->ch[i].send_lock);
		pthread_mutex_destroy(&t->ch[i].fd_lock);
		free(t->ch[i].rbuf);
	}
	free(t->ch);
out_free:
	free(t);
	return -ENOMEM;
}

void transport_free(struct transport *t)
{
	if (!t)
		return;
	for (unsigned i = 0; i < t->nchan; i++) {
		struct chan *ch = &t->ch[i];
		if (ch->fd >= 0)
			close(ch->fd);
		pthread_mutex_destroy(&ch->send_lock);
		pthread_mutex_destroy(&ch->fd_lock);
		free(ch->rbuf);
	}
	free(t->ch);
	while (t->push_head) {
		struct push_item *p = t->push_head;
		t->push_head = p->next;
		free(p->buf);
		free(p);
	}
	close(t->stop_efd);
	pthread_mutex_destroy(&t->push_lock);
	pthread_cond_destroy(&t->push_cond);
	pthread_cond_destroy(&t->ack_cond);
	free(t);
}

/* Waits until fd is ready for events, the deadline passes (-ETIMEDOUT) or
 * the transport is stopping (-ECANCELED). */
static int wait_fd(struct transport *t, int fd, short events, int64_t deadline)
{
	for (;;) {
		struct pollfd p[2] = { { .fd = fd, .events = events }, { .fd = t->stop_efd, .events = POLLIN } };
		int64_t left = deadline - pfs_mono_ms();
		if (atomic_load(&t->stopping))
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

/* Sleeps ms milliseconds; returns true if the transport is stopping. */
static bool sleep_or_stop(struct transport *t, int ms)
{
	struct pollfd p = { .fd = t->stop_efd, .events = POLLIN };
	int64_t deadline = pfs_mono_ms() + ms;
	for (;;) {
		if (atomic_load(&t->stopping))
			return true;
		int64_t left = deadline - pfs_mono_ms();
		if (left <= 0)
			return false;
		if (poll(&p, 1, (int)left) > 0)
			return true;
	}
}

static int send_all(int fd, struct iovec *iov, int iovcnt)
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
	return send_all(fd, iov, wl ? 2 : 1);
}

static int send_chan(struct chan *ch, uint64_t gen, uint64_t id, uint16_t op, uint16_t flags,
		     const void *payload, size_t len, unsigned codecs);

int transport_send(struct transport *t, unsigned chan, uint64_t gen, uint64_t id, uint16_t op,
		   const void *payload, size_t len, unsigned codecs)
{
	return send_chan(&t->ch[chan < t->nchan ? chan : 0], gen, id, op, 0, payload, len, codecs);
}

static int send_chan(struct chan *ch, uint64_t gen, uint64_t id, uint16_t op, uint16_t flags,
		     const void *payload, size_t len, unsigned codecs)
{
	struct transport *t = ch->t;
	uint8_t hdr[PFS_FRAME_HDR_SIZE];
	void *scratch = NULL;
	size_t cap = 0;
	const void *wire;
	int rc;

	codecs = pfs_link_codecs(codecs, t->c->lz4, atomic_load(&ch->unsent));
	if (codecs && len >= PFS_LZ4_MIN) {
		cap = pfs_lz4_bound(len);
		scratch = malloc(cap); /* on failure the frame goes out raw */
	}
	size_t wl = pfs_frame_prepare(hdr, id, op, flags, 0, payload, len, scratch ? codecs : 0,
				      scratch, cap, &wire);
	struct iovec iov[2] = { { hdr, sizeof(hdr) }, { (void *)wire, wl } };

	pthread_mutex_lock(&ch->send_lock);
	if (ch->fd < 0 || ch->gen != gen) {
		rc = -ENOTCONN;
	} else {
		atomic_fetch_add_explicit(&t->c->st_wire_out, PFS_FRAME_HDR_SIZE + wl,
					  memory_order_relaxed);
		atomic_fetch_add_explicit(&t->c->st_raw_out, PFS_FRAME_HDR_SIZE + len,
					  memory_order_relaxed);
		rc = send_all(ch->fd, iov, wl ? 2 : 1);
		if (t->c->lz4 == PFS_LZ4_AUTO)
			atomic_store(&ch->unsent, pfs_sock_unsent(ch->fd));
		if (rc < 0) {
			pfs_debug("send of request %llu (%s) failed: %s", (unsigned long long)id,
				  pfs_op_name(op), strerror(-rc));
			/* Let the connection thread notice and reconnect. */
			shutdown(ch->fd, SHUT_RDWR);
			rc = -ENOTCONN;
		}
	}
	pthread_mutex_unlock(&ch->send_lock);
	free(scratch);
	return rc;
}

#define QUIET_WAIT_NS 20000000L /* 20 ms */

bool transport_quiet(struct transport *t)
{
	struct chan *ch = &t->ch[0]; /* pushes come on the main connection */
	uint64_t gen, target;
	int inq = 0;

	/* Unread bytes first, then the count read: a recv in between is
	 * counted twice (a longer wait), never missed. */
	pthread_mutex_lock(&ch->fd_lock);
	if (ch->fd < 0 || ioctl(ch->fd, SIOCINQ, &inq) < 0 || inq < 0) {
		pthread_mutex_unlock(&ch->fd_lock);
		return false;
	}
	gen = ch->gen;
	target = atomic_load(&ch->bytes_read) + (uint64_t)inq;
	pthread_mutex_unlock(&ch->fd_lock);
	if (atomic_load(&ch->bytes_done) >= target)
		return true;
	/* The connection thread is handling frames (replies, mostly): it
	 * catches up in microseconds, unless a frame is still arriving. */
	int64_t t0 = pfs_mono_ns();
	for (;;) {
		usleep(20);
		if (atomic_load(&ch->bytes_done) >= target)
			return ch->gen == gen;
		if (pfs_mono_ns() - t0 > QUIET_WAIT_NS)
			return false;
	}
}

void transport_drop(struct transport *t, uint64_t gen)
{
	for (unsigned i = 0; i < t->nchan; i++) {
		struct chan *ch = &t->ch[i];
		pthread_mutex_lock(&ch->send_lock);
		if (ch->fd >= 0 && ch->gen == gen)
			shutdown(ch->fd, SHUT_RDWR); /* its connection thread reconnects */
		pthread_mutex_unlock(&ch->send_lock);
	}
}

/* ---- connecting ---- */

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

static int connect_tcp(struct transport *t, int *out, char *err, size_t errlen)
{
	struct client *c = t->c;
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
			rc = wait_fd(t, fd, POLLOUT, pfs_mono_ms() + CONNECT_TIMEOUT_MS);
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
static int read_full_deadline(struct transport *t, int fd, void *buf, size_t n, int64_t deadline)
{
	uint8_t *p = buf;
	while (n > 0) {
		int rc = wait_fd(t, fd, POLLIN, deadline);
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
static int read_hs_reply(struct transport *t, int fd, uint64_t id, uint16_t op, uint8_t *buf,
			 size_t cap, size_t *len, int32_t *status, int64_t deadline)
{
	uint8_t hb[PFS_FRAME_HDR_SIZE];
	struct pfs_frame_hdr h;
	int rc;

	for (;;) {
		if ((rc = read_full_deadline(t, fd, hb, sizeof(hb), deadline)) < 0)
			return rc;
		if (pfs_hdr_unpack(hb, &h, PFS_MAX_HANDSHAKE) < 0 || (h.flags & PFS_FF_CODED) ||
		    h.raw_len > cap)
			return -EPROTO;
		if ((rc = read_full_deadline(t, fd, buf, h.raw_len, deadline)) < 0)
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

struct hs_result {
	uint64_t boot_id;
	uint64_t caps;
	uint32_t flags; /* PFS_AUTH_* */
	struct pfs_entry root;
};

static int handshake(struct transport *t, int fd, bool bulk, struct hs_result *out, char *err,
		     size_t errlen)
{
	struct client *c = t->c;
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
	uint64_t id;
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
	id = rpc_next_id(c->rpc);
	if ((rc = send_frame_fd(fd, id, PFS_OP_HELLO, buf, w.len)) < 0)
		goto out_io;
	rc = read_hs_reply(t, fd, id, PFS_OP_HELLO, buf, sizeof(buf), &len, &status, deadline);
	if (rc == -ECONNRESET) {
		snprintf(err, errlen, "%s closed the connection during the handshake", c->hostport);
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
	id = rpc_next_id(c->rpc);
	if ((rc = send_frame_fd(fd, id, PFS_OP_AUTH, buf, w.len)) < 0)
		goto out_auth;
	rc = read_hs_reply(t, fd, id, PFS_OP_AUTH, buf, sizeof(buf), &len, &status, deadline);
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

static int connect_and_auth(struct chan *ch, int *fd_out, struct hs_result *hs, char *err,
			    size_t errlen)
{
	struct transport *t = ch->t;
	int fd = -1, rc;
	if ((rc = connect_tcp(t, &fd, err, errlen)) < 0)
		return rc;
	if ((rc = handshake(t, fd, ch->bulk, hs, err, errlen)) < 0) {
		close(fd);
		return rc;
	}
	*fd_out = fd;
	return 0;
}

/* Makes fd the live connection of ch (a new generation) and tells
 * rpc.c. */
static void install(struct chan *ch, int fd, const struct hs_result *hs)
{
	struct transport *t = ch->t;
	uint64_t gen = atomic_fetch_add(&t->last_gen, 1) + 1;
	ch->rstart = ch->rend = 0;
	ch->boot_id = hs->boot_id;
	pthread_mutex_lock(&ch->send_lock);
	pthread_mutex_lock(&ch->fd_lock);
	ch->fd = fd;
	ch->gen = gen;
	atomic_store(&ch->bytes_read, 0);
	atomic_store(&ch->bytes_done, 0);
	pthread_mutex_unlock(&ch->fd_lock);
	pthread_mutex_unlock(&ch->send_lock);
	if (!ch->bulk)
		atomic_store(&t->c->push_ack, (hs->caps & PFS_CAP_PUSH_ACK) != 0);
	rpc_connected(t->c->rpc, ch->idx, gen, (unsigned)(hs->caps & PFS_CAPS_CODECS));
}

/* Takes the live connection of ch down: wakes blocked senders, closes
 * it. */
static void drop(struct chan *ch)
{
	int fd;
	pthread_mutex_lock(&ch->fd_lock);
	if (ch->fd >= 0)
		shutdown(ch->fd, SHUT_RDWR);
	pthread_mutex_unlock(&ch->fd_lock);
	rpc_disconnected(ch->t->c->rpc, ch->idx);
	pthread_mutex_lock(&ch->send_lock);
	pthread_mutex_lock(&ch->fd_lock);
	fd = ch->fd;
	ch->fd = -1;
	pthread_mutex_unlock(&ch->fd_lock);
	pthread_mutex_unlock(&ch->send_lock);
	if (fd >= 0)
		close(fd);
}

int transport_connect_first(struct transport *t, struct pfs_entry *root, char *err, size_t errlen)
{
	struct chan *ch = &t->ch[0];
	struct hs_result hs;
	int fd, rc;

	if ((rc = connect_and_auth(ch, &fd, &hs, err, errlen)) < 0)
		return rc;
	if (t->c->lk)
		locks_connected(t->c->lk, hs.boot_id, hs.flags, false);
	install(ch, fd, &hs);
	*root = hs.root;
	pfs_info("connected to %s (lz4 %s, zero words %s)", t->c->hostport,
		 hs.caps & PFS_CAP_LZ4 ? "on" : "off", hs.caps & PFS_CAP_ZR ? "on" : "off");
	return 0;
}

/* ---- receiving ---- */

/* Reads exactly n bytes from the live connection through the buffer. */
static int rb_read(struct chan *ch, int fd, void *dst, size_t n)
{
	uint8_t *p = dst;
	while (n > 0) {
		size_t have = ch->rend - ch->rstart;
		if (have) {
			size_t k = have < n ? have : n;
			memcpy(p, ch->rbuf + ch->rstart, k);
			ch->rstart += k;
			p += k;
			n -= k;
			continue;
		}
		ssize_t k;
		if (n >= RBUF_SIZE / 2) {
			/* Large payloads go straight to their buffer. */
			k = recv(fd, p, n, 0);
			if (k > 0) {
				p += k;
				n -= (size_t)k;
			}
		} else {
			k = recv(fd, ch->rbuf, RBUF_SIZE, 0);
			if (k > 0) {
				ch->rstart = 0;
				ch->rend = (size_t)k;
			}
		}
		if (k > 0)
			atomic_fetch_add(&ch->bytes_read, (uint64_t)k);
		if (k == 0)
			return -ECONNRESET;
		if (k < 0 && errno != EINTR)
			return -errno;
	}
	return 0;
}

static void push_enqueue(struct transport *t, uint64_t gen, uint16_t op, uint8_t *buf,
			 size_t len)
{
	struct push_item *p = malloc(sizeof(*p));
	if (!p) {
		free(buf);
		return;
	}
	p->next = NULL;
	p->seq = ops_note_push(t->c, op, buf, len);
	p->gen = gen;
	p->op = op;
	p->buf = buf;
	p->len = len;
	pthread_mutex_lock(&t->push_lock);
	*t->push_tail = p;
	t->push_tail = &p->next;
	if (p->gen != t->ack_gen) {
		t->ack_gen = p->gen;
		t->ack_count = 0;
	}
	t->ack_count++;
	pthread_cond_signal(&t->push_cond);
	pthread_cond_signal(&t->ack_cond);
	pthread_mutex_unlock(&t->push_lock);
}

/* The stats' byte counters, for a frame received whole. */
static void count_in(struct client *c, const struct pfs_frame_hdr *h)
{
	atomic_fetch_add_explicit(&c->st_wire_in, PFS_FRAME_HDR_SIZE + h->wire_len,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&c->st_raw_in, PFS_FRAME_HDR_SIZE + h->raw_len,
				  memory_order_relaxed);
}

/* Receives frames until the connection of ch fails; returns the
 * reason. */
static int recv_loop(struct chan *ch, int fd)
{
	struct transport *t = ch->t;
	uint8_t hb[PFS_FRAME_HDR_SIZE];
	struct pfs_frame_hdr h;
	int rc;

	for (;;) {
		if ((rc = rb_read(ch, fd, hb, sizeof(hb))) < 0)
			return rc;
		if (pfs_hdr_unpack(hb, &h, PFS_MAX_PAYLOAD) < 0) {
			pfs_err("bad frame header from %s", t->c->hostport);
			return -EPROTO;
		}
		uint8_t *payload = NULL;
		if ((h.flags & PFS_FF_CODED) && (h.flags & PFS_FF_REPLY)) {
			/* The caller decodes it (rpc.c), off this thread. */
			payload = malloc(h.wire_len);
			if (!payload)
				return -ENOMEM;
			if ((rc = rb_read(ch, fd, payload, h.wire_len)) < 0) {
				free(payload);
				return rc;
			}
			count_in(t->c, &h);
			rpc_complete(t->c->rpc, &h, payload, ch->boot_id, ch->gen);
			atomic_fetch_add(&ch->bytes_done, PFS_FRAME_HDR_SIZE + (uint64_t)h.wire_len);
			continue;
		}
		if (h.raw_len) {
			payload = malloc(h.raw_len);
			if (!payload)
				return -ENOMEM;
		}
		if (h.flags & PFS_FF_CODED) {
			uint8_t *wire = malloc(h.wire_len);
			if (!wire) {
				free(payload);
				return -ENOMEM;
			}
			rc = rb_read(ch, fd, wire, h.wire_len);
			if (rc == 0 &&
			    pfs_payload_decode(h.flags, wire, h.wire_len, payload, h.raw_len) < 0) {
				pfs_err("bad compressed payload from %s (%s)", t->c->hostport,
					pfs_op_name(h.op));
				rc = -EPROTO;
			}
			free(wire);
		} else {
			rc = rb_read(ch, fd, payload, h.raw_len);
		}
		if (rc < 0) {
			free(payload);
			return rc;
		}
		count_in(t->c, &h);
		if ((h.flags & PFS_FF_PUSH) && h.op == PFS_OP_LOCK_WAKE) {
			/* Only wakes waiting threads: no kernel call, so it
			 * is safe (and quickest) on this thread. */
			locks_wake_push(t->c->lk, payload, h.raw_len);
			free(payload);
		} else if (h.flags & PFS_FF_PUSH) {
			push_enqueue(t, ch->gen, h.op, payload, h.raw_len);
		} else if (h.flags & PFS_FF_REPLY) {
			rpc_complete(t->c->rpc, &h, payload, ch->boot_id, ch->gen);
		} else {
			free(payload);
			pfs_err("unexpected request frame (%s) from %s", pfs_op_name(h.op),
				t->c->hostport);
			return -EPROTO;
		}
		atomic_fetch_add(&ch->bytes_done, PFS_FRAME_HDR_SIZE + (uint64_t)h.wire_len);
	}
}

static void *conn_main(void *arg)
{
	struct chan *ch = arg;
	struct transport *t = ch->t;
	struct client *c = t->c;
	char err[256], lasterr[256];

	while (!atomic_load(&t->stopping)) {
		int rc = recv_loop(ch, ch->fd);
		drop(ch);
		/* Pushes may be lost from now until the revalidation after the
		 * reconnect: nothing cached before counts as current (the
		 * locally answered GETATTR, trust_i.h). */
		if (c->cache)
			gate_note_all(c->gate);
		/* After GOODBYE (shutdown) the server closes: do not come back. */
		if (atomic_load(&t->stopping) || rpc_is_closing(c->rpc))
			break;
		pfs_notice("connection to %s lost (%s); reconnecting", c->hostport,
			   rc == -ECONNRESET ? "closed by server" : strerror(-rc));

		struct hs_result hs;
		int fd = -1;
		int delay = BACKOFF_MIN_MS;
		lasterr[0] = 0;
		for (;;) {
			if (sleep_or_stop(t, delay))
				goto out;
			rc = connect_and_auth(ch, &fd, &hs, err, sizeof(err));
			if (rc == 0)
				break;
			if (rc == -ECANCELED || atomic_load(&t->stopping))
				goto out;
			if (strcmp(err, lasterr) != 0) {
				pfs_notice("reconnect: %s", err);
				snprintf(lasterr, sizeof(lasterr), "%s", err);
			}
			delay = delay * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : delay * 2;
		}
		bool restarted = hs.boot_id != ch->boot_id;
		/* Before the pending requests go out again: lock requests
		 * wait for the reclaims (locks.c). */
		if (c->lk)
			locks_connected(c->lk, hs.boot_id, hs.flags, restarted);
		install(ch, fd, &hs);
		/* Pushes sent while we were away are lost: revalidate. */
		if (c->cache)
			cache_reconnected(c->cache);
		pfs_notice("reconnected to %s%s", c->hostport,
			   restarted ? " (server restarted)" : "");
	}
out:
	return NULL;
}

/* The thread of a bulk connection: connects (the server accepts it once
 * the main connection has a session there), receives, and reconnects
 * with backoff on its own. Meanwhile rpc.c sends READ and WRITE on the
 * other connections. Nothing else depends on it: no pushes come on it,
 * and its replies carry the boot id of the daemon that acknowledged
 * them (the write verifier), whichever connection saw a restart first. */
static void *bulk_main(void *arg)
{
	struct chan *ch = arg;
	struct transport *t = ch->t;
	struct client *c = t->c;
	char err[256], lasterr[256] = "";
	int delay = 0;

	for (;;) {
		struct hs_result hs;
		int fd = -1, rc;

		if (delay && sleep_or_stop(t, delay))
			break;
		if (atomic_load(&t->stopping) || rpc_is_closing(c->rpc))
			break;
		rc = connect_and_auth(ch, &fd, &hs, err, sizeof(err));
		if (rc == -ECANCELED || atomic_load(&t->stopping))
			break;
		if (rc == -EOPNOTSUPP || rc == -EACCES || rc == -EMFILE) {
			pfs_warn("connection %u: %s; using %u connection%s", ch->idx, err,
				 ch->idx, ch->idx == 1 ? "" : "s");
			break;
		}
		if (rc < 0) {
			if (strcmp(err, lasterr) != 0) {
				pfs_info("connection %u: %s", ch->idx, err);
				snprintf(lasterr, sizeof(lasterr), "%s", err);
			}
			delay = delay * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
				: delay ? delay * 2 : BACKOFF_MIN_MS;
			continue;
		}
		install(ch, fd, &hs);
		pfs_info("connection %u to %s up", ch->idx, c->hostport);
		lasterr[0] = 0;
		delay = 0;
		rc = recv_loop(ch, ch->fd);
		drop(ch);
		if (atomic_load(&t->stopping) || rpc_is_closing(c->rpc))
			break;
		pfs_notice("connection %u to %s lost (%s); reconnecting", ch->idx, c->hostport,
			   rc == -ECONNRESET ? "closed by server" : strerror(-rc));
		delay = BACKOFF_MIN_MS;
	}
	return NULL;
}

/* Acknowledges the first count pushes of connection gen (wire.h,
 * PUSH_ACK), on the main connection that carried them. A failed send
 * needs nothing: that connection is gone, and the server stops waiting
 * for a client whose connection closed. */
static void send_ack(struct transport *t, uint64_t gen, uint64_t count)
{
	uint8_t buf[16];
	struct pfs_wr w;
	struct pfs_push_ack m = { .count = count };

	pfs_wr_init(&w, buf, sizeof(buf));
	if (pfs_enc_push_ack(&w, &m) == 0)
		(void)send_chan(&t->ch[0], gen, 0, PFS_OP_PUSH_ACK, PFS_FF_PUSH, buf, w.len, 0);
}

static void *ack_main(void *arg)
{
	struct transport *t = arg;

	pthread_mutex_lock(&t->push_lock);
	for (;;) {
		while (!t->push_stop && t->ack_gen == t->sent_gen && t->ack_count == t->sent_count)
			pthread_cond_wait(&t->ack_cond, &t->push_lock);
		if (t->push_stop)
			break;
		uint64_t gen = t->ack_gen, count = t->ack_count;
		pthread_mutex_unlock(&t->push_lock);
		if (atomic_load(&t->c->push_ack))
			send_ack(t, gen, count);
		pthread_mutex_lock(&t->push_lock);
		t->sent_gen = gen;
		t->sent_count = count;
	}
	pthread_mutex_unlock(&t->push_lock);
	return NULL;
}

static void *push_main(void *arg)
{
	struct transport *t = arg;

	pthread_mutex_lock(&t->push_lock);
	for (;;) {
		while (!t->push_head && !t->push_stop)
			pthread_cond_wait(&t->push_cond, &t->push_lock);
		if (!t->push_head)
			break;
		struct push_item *p = t->push_head;
		t->push_head = p->next;
		if (!t->push_head)
			t->push_tail = &t->push_head;
		pthread_mutex_unlock(&t->push_lock);
		ops_apply_push(t->c, p->op, p->buf, p->len);
		if (p->seq)
			gate_set_applied(t->c->gate, p->seq);
		free(p->buf);
		free(p);
		pthread_mutex_lock(&t->push_lock);
	}
	pthread_mutex_unlock(&t->push_lock);
	return NULL;
}

int transport_start(struct transport *t)
{
	int rc = pthread_create(&t->push_thr, NULL, push_main, t);
	if (rc)
		return -rc;
	t->push_started = true;
	rc = pthread_create(&t->ack_thr, NULL, ack_main, t);
	if (rc)
		return -rc;
	t->ack_started = true;
	for (unsigned i = 0; i < t->nchan; i++) {
		struct chan *ch = &t->ch[i];
		rc = pthread_create(&ch->thr, NULL, ch->bulk ? bulk_main : conn_main, ch);
		if (rc)
			return -rc;
		ch->started = true;
	}
	return 0;
}

void transport_stop(struct transport *t)
{
	uint64_t one = 1;

	atomic_store(&t->stopping, true);
	if (write(t->stop_efd, &one, sizeof(one)) < 0) {
		/* The counter cannot overflow with one write; nothing to do. */
	}
	for (unsigned i = 0; i < t->nchan; i++) {
		struct chan *ch = &t->ch[i];
		pthread_mutex_lock(&ch->fd_lock);
		if (ch->fd >= 0)
			shutdown(ch->fd, SHUT_RDWR);
		pthread_mutex_unlock(&ch->fd_lock);
	}
	for (unsigned i = 0; i < t->nchan; i++) {
		struct chan *ch = &t->ch[i];
		if (ch->started) {
			pthread_join(ch->thr, NULL);
			ch->started = false;
		} else {
			drop(ch);
		}
	}
	if (t->push_started) {
		pthread_mutex_lock(&t->push_lock);
		t->push_stop = true;
		pthread_cond_signal(&t->push_cond);
		pthread_mutex_unlock(&t->push_lock);
		pthread_join(t->push_thr, NULL);
		t->push_started = false;
	}
	if (t->ack_started) {
		pthread_mutex_lock(&t->push_lock);
		t->push_stop = true;
		pthread_cond_signal(&t->ack_cond);
		pthread_mutex_unlock(&t->push_lock);
		pthread_join(t->ack_thr, NULL);
		t->ack_started = false;
	}
}
