/* transport.c: the TCP connections to podfsd: frames out, frames in,
 * reconnect with backoff (see transport_i.h); the bytes under the frames,
 * TLS or not, are stream.c's. */
#include "transport_i.h"

#include <errno.h>
#include <linux/sockios.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bg_i.h"
#include "client_i.h"
#include "podfs/bigbuf.h"
#include "podfs/clock.h"
#include "podfs/frame.h"
#include "podfs/log.h"
#include "pushq_i.h"
#include "sock_i.h"
#include "stream_i.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000

/* One TCP connection: index 0 is the main one, the others are bulk
 * connections (READ and WRITE only, PFS_CAP_BULK). */
struct chan {
	struct transport *t;
	unsigned idx;
	bool bulk;

	/* send_lock serializes writers (a frame goes out whole) and guards
	 * fd/gen for them; fd_lock guards the validity of the fd number for
	 * shutdown(2) from transport_stop. The fd is closed only with both
	 * held. Lock order: send_lock, fd_lock, then the stream's tls_lock. */
	pthread_mutex_t send_lock;
	pthread_mutex_t fd_lock;
	int fd;       /* -1 when down */
	uint64_t gen; /* generation of fd */

	/* The bytes on fd, TLS or not (stream_i.h), attached and detached
	 * with fd under both locks; its counts of bytes received and handled
	 * (pushes numbered) restart with fd. See transport_quiet. */
	struct stream st;

	/* Bytes the kernel had not sent yet after the last frame went out
	 * (link.h: LZ4 only while the link is backed up). */
	_Atomic size_t unsent;

	/* Its connection thread only. */
	uint64_t boot_id;
	uint64_t verf;  /* the write verifier its replies carry (sock_session) */
	pthread_t thr;
	bool started;
};

struct transport {
	struct client *c;
	struct transport_cbs cb;
	unsigned nchan;
	struct chan *ch;

	int stop_efd; /* eventfd: wakes the connection threads' waits */
	atomic_bool stopping;
	/* Generations are unique across the connections of the transport,
	 * so that one number names one connection (rpc.c). */
	atomic_uint_fast64_t last_gen;
	/* Request ids, of the handshakes and of rpc.c's calls alike. */
	atomic_uint_fast64_t next_id;
	/* The main connection's session acknowledges pushes (PUSH_ACK). */
	atomic_bool push_ack;
	atomic_bool peer_cap;          /* the main connection negotiated PFS_CAP_PEER */
	atomic_bool list_cookies;      /* and PFS_CAP_LIST_COOKIES */
	atomic_uint_fast64_t quiet_missed; /* transport_quiet gave up */
	pthread_mutex_t local_lock;    /* local */
	struct sockaddr_storage local; /* the main connection's own address */
	bool have_local;

	struct pushq *pq; /* the pushes of the main connection */
	/* The root handle the main connection's last AUTH reply named (its
	 * connection thread, or transport_connect_first before it runs). */
	struct pfs_fh root;
};

/* The push queue's callbacks: the transport's own, for the queue. */
static uint64_t note_cb(void *arg, uint16_t op, const uint8_t *payload, size_t len,
			bool *applied_first, uint64_t *name_key)
{
	struct transport *t = arg;
	return t->cb.note_cb(t->cb.arg, op, payload, len, applied_first, name_key);
}

static void apply_cb(void *arg, uint16_t op, const uint8_t *payload, size_t len, uint64_t seq)
{
	struct transport *t = arg;
	t->cb.apply_cb(t->cb.arg, op, payload, len, seq);
}

static void early_cb(void *arg, uint16_t op, const uint8_t *payload, size_t len)
{
	struct transport *t = arg;
	if (t->cb.early_cb)
		t->cb.early_cb(t->cb.arg, op, payload, len);
}

/* The main connection's stream brought bytes (stream.c on_rx): frames
 * keep coming, and a push may be behind them (pushq_note_rx). Its
 * receiving thread. */
static void chan_rx(void *arg)
{
	struct chan *ch = arg;

	pushq_note_rx(ch->t->pq, ch->gen);
}

static void ack_cb(void *arg, uint64_t gen, uint64_t count);

int transport_new(struct client *c, const struct transport_cbs *cbs, struct transport **out)
{
	struct transport *t = calloc(1, sizeof(*t));
	unsigned n = c->conns ? c->conns : 1;
	struct pushq_cbs qc = { .note_cb = note_cb, .apply_cb = apply_cb, .early_cb = early_cb,
				.ack_cb = ack_cb };
	if (!t)
		return -ENOMEM;
	t->cb = *cbs;
	atomic_init(&t->next_id, 1);
	pthread_mutex_init(&t->local_lock, NULL);
	qc.arg = t;
	if (pushq_new(&qc, &t->pq) < 0)
		goto out_free;
	t->ch = calloc(n, sizeof(*t->ch));
	if (!t->ch)
		goto out_free_pq;
	for (t->nchan = 0; t->nchan < n; t->nchan++) {
		struct chan *ch = &t->ch[t->nchan];
		if (stream_init(&ch->st, c->hostport) < 0)
			goto out_free_chans;
		ch->t = t;
		ch->idx = t->nchan;
		ch->bulk = t->nchan > 0;
		if (!ch->bulk) {
			ch->st.on_rx = chan_rx;
			ch->st.on_rx_arg = ch;
		}
		ch->fd = -1;
		pthread_mutex_init(&ch->send_lock, NULL);
		pthread_mutex_init(&ch->fd_lock, NULL);
	}
	t->stop_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (t->stop_efd < 0)
		goto out_free_chans;
	t->c = c;
	*out = t;
	return 0;
out_free_chans:
	for (unsigned i = 0; i < t->nchan; i++) {
		pthread_mutex_destroy(&t->ch[i].send_lock);
		pthread_mutex_destroy(&t->ch[i].fd_lock);
		stream_fini(&t->ch[i].st);
	}
	free(t->ch);
out_free_pq:
	pushq_free(t->pq);
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
		stream_fini(&ch->st);
	}
	free(t->ch);
	pushq_free(t->pq);
	close(t->stop_efd);
	pthread_mutex_destroy(&t->local_lock);
	free(t);
}

uint64_t transport_next_id(struct transport *t)
{
	return atomic_fetch_add(&t->next_id, 1);
}

bool transport_push_acked(struct transport *t)
{
	return atomic_load(&t->push_ack);
}

bool transport_peer_ok(struct transport *t)
{
	return atomic_load(&t->peer_cap);
}

bool transport_list_cookies(struct transport *t)
{
	return atomic_load(&t->list_cookies);
}

bool transport_local_addr(struct transport *t, struct sockaddr_storage *out)
{
	pthread_mutex_lock(&t->local_lock);
	bool have = t->have_local;
	if (have)
		*out = t->local;
	pthread_mutex_unlock(&t->local_lock);
	return have;
}

struct pushq *transport_pushq(struct transport *t)
{
	return t->pq;
}

/* A connection attempt of t (sock.c). */
static struct sock_dial dial(struct transport *t)
{
	struct sock_dial d = { .c = t->c, .stop_efd = t->stop_efd, .stopping = &t->stopping,
			       .ids = &t->next_id };
	return d;
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

	pthread_mutex_lock(&ch->send_lock);
	if (ch->fd < 0 || ch->gen != gen) {
		rc = -ENOTCONN;
	} else {
		atomic_fetch_add_explicit(&t->c->st_wire_out, PFS_FRAME_HDR_SIZE + wl,
					  memory_order_relaxed);
		atomic_fetch_add_explicit(&t->c->st_raw_out, PFS_FRAME_HDR_SIZE + len,
					  memory_order_relaxed);
		rc = stream_send(&ch->st, ch->fd, hdr, wire, wl);
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

/* How long transport_quiet waits for the connection thread: while it is
 * blocked on the network in the middle of a frame (a large reply still
 * arriving: a round trip is cheaper), and at most in any case (it runs or
 * waits for a CPU: on a loaded machine that can take tens of ms, and the
 * reply to a round trip would come behind those very bytes). */
#define QUIET_NET_NS 20000000L  /* 20 ms */
#define QUIET_MAX_NS 500000000L /* 500 ms */
#define QUIET_TRIES 8 /* readings of the socket's unread bytes */

bool transport_quiet(struct transport *t)
{
	struct chan *ch = &t->ch[0]; /* pushes come on the main connection */
	uint64_t gen, target;
	int inq = 0;

	/* The socket's unread bytes, between two readings of the count
	 * read. A recv counted between them would count its bytes twice
	 * (in both), and the target would wait for bytes that never come
	 * (the stream quiet after them): a cold walk's 500 ms stalls. So
	 * the two must agree (a few tries; then the target may be too far,
	 * a longer wait, never too near). */
	pthread_mutex_lock(&ch->fd_lock);
	for (int i = 0;; i++) {
		uint64_t before = stream_bytes_read(&ch->st);
		if (ch->fd < 0 || ioctl(ch->fd, SIOCINQ, &inq) < 0 || inq < 0) {
			pthread_mutex_unlock(&ch->fd_lock);
			return false;
		}
		target = stream_bytes_read(&ch->st);
		if (target == before || i == QUIET_TRIES)
			break;
	}
	gen = ch->gen;
	target += (uint64_t)inq;
	pthread_mutex_unlock(&ch->fd_lock);
	/* Under TLS, the bytes read are ciphertext, and the bytes done catch
	 * up with them whenever the connection thread stands between frames
	 * with every byte read decrypted and handled (stream_frame_done). */
	if (stream_bytes_done(&ch->st) >= target)
		return true;
	/* The connection thread is handling frames (replies, mostly): it
	 * catches up in microseconds, unless a frame is still arriving. */
	int64_t t0 = pfs_mono_ns(), net_t0 = 0;
	for (;;) {
		usleep(20);
		if (stream_bytes_done(&ch->st) >= target)
			return ch->gen == gen;
		int64_t now = pfs_mono_ns();
		if (stream_receiver_waiting(&ch->st) && stream_bytes_read(&ch->st) >= target &&
		    net_t0 == 0)
			net_t0 = now; /* it has the bytes, and waits for the rest */
		if ((net_t0 && now - net_t0 > QUIET_NET_NS) || now - t0 > QUIET_MAX_NS) {
			atomic_fetch_add(&t->quiet_missed, 1);
			return false;
		}
	}
}

uint64_t transport_quiet_missed(struct transport *t)
{
	return atomic_load(&t->quiet_missed);
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

/* Makes fd the live connection of ch (a new generation) and tells the
 * owner (up_cb; again, restarted: see struct transport_up). */
static void install(struct chan *ch, int fd, const struct sock_session *hs, bool again,
		    bool restarted)
{
	struct transport *t = ch->t;
	uint64_t gen = atomic_fetch_add(&t->last_gen, 1) + 1;
	ch->boot_id = hs->boot_id;
	ch->verf = hs->write_verf;
	pthread_mutex_lock(&ch->send_lock);
	pthread_mutex_lock(&ch->fd_lock);
	ch->fd = fd;
	ch->gen = gen;
	stream_attach(&ch->st, hs->ssl, hs->rbio, hs->wbio);
	/* transport_stop sets stopping before it shuts down each live fd
	 * under this lock: a connection made after it looked at ch is shut
	 * down here, else its thread would block in recv_loop and the join
	 * would wait for the server to close it. */
	if (atomic_load(&t->stopping))
		shutdown(fd, SHUT_RDWR);
	pthread_mutex_unlock(&ch->fd_lock);
	pthread_mutex_unlock(&ch->send_lock);
	if (!ch->bulk) {
		struct sockaddr_storage sa;
		socklen_t sl = sizeof(sa);
		atomic_store(&t->push_ack, (hs->caps & PFS_CAP_PUSH_ACK) != 0);
		atomic_store(&t->peer_cap, (hs->caps & PFS_CAP_PEER) != 0);
		atomic_store(&t->list_cookies, (hs->caps & PFS_CAP_LIST_COOKIES) != 0);
		if (getsockname(fd, (struct sockaddr *)&sa, &sl) == 0) {
			pthread_mutex_lock(&t->local_lock);
			t->local = sa;
			t->have_local = true;
			pthread_mutex_unlock(&t->local_lock);
		}
	}
	struct transport_up u = { .chan = ch->idx, .gen = gen,
				  .codecs = (unsigned)(hs->caps & PFS_CAPS_CODECS),
				  .boot_id = hs->boot_id, .auth_flags = hs->flags,
				  .again = again, .restarted = restarted, .root = hs->root.fh };
	if (!ch->bulk) {
		u.handles_changed = again && !pfs_fh_equal(&hs->root.fh, &t->root);
		t->root = hs->root.fh;
	}
	t->cb.up_cb(t->cb.arg, &u);
}

/* Takes the live connection of ch down: wakes blocked senders, tells the
 * owner (down_cb), closes it. */
static void drop(struct chan *ch)
{
	struct ssl_st *ssl;
	int fd;
	pthread_mutex_lock(&ch->fd_lock);
	if (ch->fd >= 0)
		shutdown(ch->fd, SHUT_RDWR);
	pthread_mutex_unlock(&ch->fd_lock);
	ch->t->cb.down_cb(ch->t->cb.arg, ch->idx);
	pthread_mutex_lock(&ch->send_lock);
	pthread_mutex_lock(&ch->fd_lock);
	fd = ch->fd;
	ch->fd = -1;
	ssl = stream_detach(&ch->st);
	pthread_mutex_unlock(&ch->fd_lock);
	pthread_mutex_unlock(&ch->send_lock);
	if (fd >= 0)
		close(fd);
	stream_tls_free(ssl); /* its connection thread is here or gone */
}

int transport_connect_first(struct transport *t, struct pfs_entry *root, char *err, size_t errlen)
{
	struct chan *ch = &t->ch[0];
	struct sock_dial d = dial(t);
	struct sock_session hs;
	int fd, rc;

	if ((rc = sock_connect(&d, false, &fd, &hs, err, errlen)) < 0)
		return rc;
	install(ch, fd, &hs, false, false);
	*root = hs.root;
	pfs_info("connected to %s (%s, lz4 %s, zero words %s)", t->c->hostport,
		 hs.ssl ? "TLS" : "plaintext", hs.caps & PFS_CAP_LZ4 ? "on" : "off",
		 hs.caps & PFS_CAP_ZR ? "on" : "off");
	return 0;
}

/* ---- receiving ---- */

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
		if ((rc = stream_read(&ch->st, fd, hb, sizeof(hb))) < 0)
			return rc;
		if (pfs_hdr_unpack(hb, &h, PFS_MAX_PAYLOAD) < 0) {
			pfs_err("bad frame header from %s", t->c->hostport);
			return -EPROTO;
		}
		uint8_t *payload = NULL;
		if ((h.flags & PFS_FF_CODED) && (h.flags & PFS_FF_REPLY)) {
			/* The caller decodes it (rpc.c), off this thread. */
			payload = pfs_big_alloc(h.wire_len);
			if (!payload)
				return -ENOMEM;
			if ((rc = stream_read(&ch->st, fd, payload, h.wire_len)) < 0) {
				pfs_big_free(payload);
				return rc;
			}
			count_in(t->c, &h);
			t->cb.reply_cb(t->cb.arg, &h, payload, ch->boot_id, ch->verf, ch->gen);
			stream_frame_done(&ch->st, PFS_FRAME_HDR_SIZE + (uint64_t)h.wire_len);
			continue;
		}
		if (h.raw_len) {
			payload = pfs_big_alloc(h.raw_len);
			if (!payload)
				return -ENOMEM;
		}
		if (h.flags & PFS_FF_CODED) {
			uint8_t *wire = pfs_big_alloc(h.wire_len);
			if (!wire) {
				pfs_big_free(payload);
				return -ENOMEM;
			}
			rc = stream_read(&ch->st, fd, wire, h.wire_len);
			if (rc == 0 &&
			    pfs_payload_decode(h.flags, wire, h.wire_len, payload, h.raw_len) < 0) {
				pfs_err("bad compressed payload from %s (%s)", t->c->hostport,
					pfs_op_name(h.op));
				rc = -EPROTO;
			}
			pfs_big_free(wire);
		} else {
			rc = stream_read(&ch->st, fd, payload, h.raw_len);
		}
		if (rc < 0) {
			pfs_big_free(payload);
			return rc;
		}
		count_in(t->c, &h);
		if ((h.flags & PFS_FF_PUSH) && h.op == PFS_OP_LOCK_WAKE) {
			/* Only wakes waiting threads: no kernel call, so it
			 * is safe (and quickest) on this thread. */
			t->cb.wake_cb(t->cb.arg, payload, h.raw_len);
			pfs_big_free(payload);
			pushq_count(t->pq, ch->gen);
		} else if (h.flags & PFS_FF_PUSH) {
			pushq_add(t->pq, ch->gen, h.op, payload, h.raw_len);
		} else if (h.flags & PFS_FF_REPLY) {
			t->cb.reply_cb(t->cb.arg, &h, payload, ch->boot_id, ch->verf, ch->gen);
		} else {
			pfs_big_free(payload);
			pfs_err("unexpected request frame (%s) from %s", pfs_op_name(h.op),
				t->c->hostport);
			return -EPROTO;
		}
		stream_frame_done(&ch->st, PFS_FRAME_HDR_SIZE + (uint64_t)h.wire_len);
	}
}

static void *conn_main(void *arg)
{
	struct chan *ch = arg;
	struct transport *t = ch->t;
	struct client *c = t->c;
	struct sock_dial d = dial(t);
	char err[256], lasterr[256];

	while (!atomic_load(&t->stopping)) {
		int rc = recv_loop(ch, ch->fd);
		drop(ch);
		/* After GOODBYE (shutdown) the server closes: do not come back. */
		if (atomic_load(&t->stopping) || t->cb.closing_cb(t->cb.arg))
			break;
		pfs_notice("connection to %s lost (%s); reconnecting", c->hostport,
			   rc == -ECONNRESET ? "closed by server" : strerror(-rc));

		struct sock_session hs;
		int fd = -1;
		int delay = BACKOFF_MIN_MS;
		int64_t down_at = pfs_mono_ms(), report_ms = 5000;
		lasterr[0] = 0;
		for (;;) {
			if (sleep_or_stop(t, delay))
				goto out;
			rc = sock_connect(&d, false, &fd, &hs, err, sizeof(err));
			if (rc == 0)
				break;
			if (rc == -ECANCELED || atomic_load(&t->stopping))
				goto out;
			if (strcmp(err, lasterr) != 0) {
				pfs_notice("reconnect: %s", err);
				snprintf(lasterr, sizeof(lasterr), "%s", err);
			}
			int64_t down_ms = pfs_mono_ms() - down_at;
			if (down_ms >= report_ms && t->cb.unreachable_cb) {
				t->cb.unreachable_cb(t->cb.arg, down_ms, err);
				report_ms = report_ms < 15000 ? 15000 : report_ms < 30000 ? 30000
					  : report_ms + 60000;
			}
			delay = delay * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : delay * 2;
		}
		bool restarted = hs.boot_id != ch->boot_id;
		install(ch, fd, &hs, true, restarted);
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
	struct sock_dial d = dial(t);
	char err[256], lasterr[256] = "";
	int delay = 0;

	for (;;) {
		struct sock_session hs;
		int fd = -1, rc;

		if (delay && sleep_or_stop(t, delay))
			break;
		if (atomic_load(&t->stopping) || t->cb.closing_cb(t->cb.arg))
			break;
		rc = sock_connect(&d, true, &fd, &hs, err, sizeof(err));
		/* One made while stopping is installed (and shut down there):
		 * recv_loop ends at once and drop closes it. */
		if (rc == -ECANCELED || (rc < 0 && atomic_load(&t->stopping)))
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
		install(ch, fd, &hs, false, false);
		pfs_info("connection %u to %s up", ch->idx, c->hostport);
		lasterr[0] = 0;
		delay = 0;
		rc = recv_loop(ch, ch->fd);
		drop(ch);
		if (atomic_load(&t->stopping) || t->cb.closing_cb(t->cb.arg))
			break;
		pfs_notice("connection %u to %s lost (%s); reconnecting", ch->idx, c->hostport,
			   rc == -ECONNRESET ? "closed by server" : strerror(-rc));
		delay = BACKOFF_MIN_MS;
	}
	return NULL;
}

/* The ack thread (pushq.c): acknowledges the first count pushes of
 * connection gen (wire.h, PUSH_ACK), on the main connection that carried
 * them, if the session acknowledges pushes. A failed send needs nothing:
 * that connection is gone, and the server stops waiting for a client
 * whose connection closed. */
static void ack_cb(void *arg, uint64_t gen, uint64_t count)
{
	struct transport *t = arg;
	uint8_t buf[16];
	struct pfs_wr w;
	struct pfs_push_ack m = { .count = count };

	if (!atomic_load(&t->push_ack))
		return;
	pfs_wr_init(&w, buf, sizeof(buf));
	if (pfs_enc_push_ack(&w, &m) == 0)
		(void)send_chan(&t->ch[0], gen, 0, PFS_OP_PUSH_ACK, PFS_FF_PUSH, buf, w.len, 0);
}

int transport_start(struct transport *t)
{
	int rc = pushq_start(t->pq);
	if (rc < 0)
		return rc;
	for (unsigned i = 0; i < t->nchan; i++) {
		struct chan *ch = &t->ch[i];
		rc = pthread_create(&ch->thr, NULL, ch->bulk ? bulk_main : conn_main, ch);
		if (rc)
			return -rc;
		bg_name(ch->thr, ch->bulk ? "bulk" : "conn");
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
	pushq_stop(t->pq);
}
