/* peersrv.c: a mount serving its chunks to its peers (see peersrv_i.h). */
#include "bg_i.h"
#include "peersrv_i.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "chunkstore_i.h"
#include "client_i.h"
#include "peernet_i.h"
#include "peerproto_i.h"
#include "podfs/clock.h"
#include "podfs/frame.h"
#include "podfs/log.h"
#include "podfs/netaddr.h"
#include "podfs/tls.h"

#define HANDSHAKE_MS 10000

struct peersrv {
	struct client *c;
	struct cstore *st;
	SSL_CTX *ctx;           /* server side; NULL: plaintext */
	int lfd;
	int stop_efd;
	struct sockaddr_storage addr;
	pthread_t accept_th;
	bool accepting;
	pthread_mutex_t mu;     /* the fields below */
	pthread_cond_t gone;    /* a connection thread ended */
	unsigned nconns;
	struct sockaddr_storage src[PEERSRV_CONNS]; /* of each live connection */
	bool used[PEERSRV_CONNS];
	_Atomic uint64_t st_conns, st_refused, st_gets, st_misses, st_bytes;
	_Atomic int64_t last_log; /* ms: rate of log lines about peers' violations */
};

struct pconn_arg {
	struct peersrv *ps;
	int fd;
	unsigned slot;
};

/* Whether a and b count as one source for PEERSRV_PER_SOURCE: the same
 * IPv4 address, or the same IPv6 /64 (a host may use any address of its
 * /64, as podfsd's per-source limits count it). */
static bool same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	struct pfs_srckey ka, kb;

	pfs_srckey_of(a, &ka);
	pfs_srckey_of(b, &kb);
	return pfs_srckey_eq(&ka, &kb);
}

/* One line per 10 s at most about what peers did wrong. */
static void log_peer(struct peersrv *ps, const struct sockaddr_storage *sa, const char *what)
{
	int64_t now = pfs_mono_ms(), last = atomic_load(&ps->last_log);
	char name[64];

	if (now - last < 10000 || !atomic_compare_exchange_strong(&ps->last_log, &last, now))
		return;
	pfs_addr_name(sa, name, sizeof(name));
	pfs_notice("peer %s: %s; connection closed", name, what);
}

/* Answers one PEER_GET (out->get) on pn. Returns 0 or -errno (the
 * connection is over). */
static int serve_get(struct peersrv *ps, struct pnet *pn, const struct pp_out *out)
{
	int64_t wait_ms = (int64_t)(ps->c->peer_timeout * 1000);
	struct chunk *ch = cstore_serve(ps->st, out->get.hash.b, pfs_mono_ms() + wait_ms);
	uint8_t head[PFS_FRAME_HDR_SIZE + 4];
	int rc;

	atomic_fetch_add(&ps->st_gets, 1);
	if (!ch || out->get.offset > ch->len) {
		if (ch)
			cstore_put(ps->st, ch);
		atomic_fetch_add(&ps->st_misses, 1);
		return pnet_send_frame(pn, out->id, out->op, PFS_FF_REPLY, ch ? EINVAL : ENOENT,
				       NULL, 0, pfs_mono_ms() + wait_ms);
	}
	uint32_t n = ch->len - out->get.offset;
	if (n > out->get.size)
		n = out->get.size;
	/* peer_get_rep is one BYTES field: its length, then the bytes,
	 * which go out from the chunk without a copy. */
	struct pfs_frame_hdr h = { .wire_len = 4 + n, .raw_len = 4 + n, .id = out->id,
				   .op = out->op, .flags = PFS_FF_REPLY };
	pfs_hdr_pack(head, &h);
	head[PFS_FRAME_HDR_SIZE] = (uint8_t)n;
	head[PFS_FRAME_HDR_SIZE + 1] = (uint8_t)(n >> 8);
	head[PFS_FRAME_HDR_SIZE + 2] = (uint8_t)(n >> 16);
	head[PFS_FRAME_HDR_SIZE + 3] = (uint8_t)(n >> 24);
	rc = pnet_write2(pn, head, sizeof(head), n ? ch->data + out->get.offset : NULL, n,
			 pfs_mono_ms() + wait_ms);
	cstore_put(ps->st, ch);
	if (rc == 0)
		atomic_fetch_add(&ps->st_bytes, n);
	return rc;
}

static void serve(struct peersrv *ps, int fd, const struct sockaddr_storage *sa)
{
	struct pnet pn;
	struct pproto pp;
	struct pp_out out;
	uint8_t hb[PFS_FRAME_HDR_SIZE], payload[PPROTO_MAX_REQ];
	struct pfs_frame_hdr h;
	const char *why;
	int rc;

	/* The whole handshake, TLS and the peer's, within HANDSHAKE_MS: a
	 * connection that has not proven the key by then is closed,
	 * however it spaces its bytes. */
	int64_t hs_deadline = pfs_mono_ms() + HANDSHAKE_MS;
	if (pnet_accept(&pn, fd, ps->ctx, ps->stop_efd, hs_deadline) < 0) {
		log_peer(ps, sa, "TLS handshake failed");
		return;
	}
	pproto_init(&pp, ps->c->key);
	for (;;) {
		bool ready = pp.st == PP_READY;
		int64_t deadline = ready ? pfs_mono_ms() + PEERSRV_IDLE_MS : hs_deadline;
		if (pnet_read(&pn, hb, sizeof(hb), deadline) < 0)
			break;
		if (pproto_header(hb, &h, &why) < 0 ||
		    pnet_read(&pn, payload, h.raw_len,
			      ready ? pfs_mono_ms() + HANDSHAKE_MS : hs_deadline) < 0) {
			log_peer(ps, sa, "bad frame");
			break;
		}
		enum pp_action a = pproto_frame(&pp, &h, payload, &out);
		if (a == PP_CLOSE) {
			log_peer(ps, sa, out.why);
			break;
		}
		if (a == PP_GET) {
			rc = serve_get(ps, &pn, &out);
		} else {
			rc = pnet_send_frame(&pn, out.id, out.op, PFS_FF_REPLY, out.status, out.payload,
					     out.len, pfs_mono_ms() + HANDSHAKE_MS);
			if (a == PP_SEND_CLOSE) {
				log_peer(ps, sa, "authentication failed (another pod key?)");
				break;
			}
		}
		if (rc < 0)
			break;
	}
	pnet_close(&pn);
}

static void *conn_main(void *arg)
{
	struct pconn_arg *a = arg;
	struct peersrv *ps = a->ps;

	serve(ps, a->fd, &ps->src[a->slot]);
	pfs_tls_thread_end();
	pthread_mutex_lock(&ps->mu);
	ps->used[a->slot] = false;
	ps->nconns--;
	pthread_cond_broadcast(&ps->gone);
	pthread_mutex_unlock(&ps->mu);
	free(a);
	return NULL;
}

/* A free connection slot for a peer at sa, or -1 (over a limit). */
static int take_slot(struct peersrv *ps, const struct sockaddr_storage *sa)
{
	unsigned same = 0;
	int free_slot = -1;

	for (unsigned i = 0; i < PEERSRV_CONNS; i++) {
		if (!ps->used[i])
			free_slot = free_slot < 0 ? (int)i : free_slot;
		else if (same_host(&ps->src[i], sa))
			same++;
	}
	if (free_slot < 0 || same >= PEERSRV_PER_SOURCE)
		return -1;
	ps->used[free_slot] = true;
	ps->src[free_slot] = *sa;
	ps->nconns++;
	return free_slot;
}

static void *accept_main(void *arg)
{
	struct peersrv *ps = arg;

	for (;;) {
		struct pollfd p[2] = { { .fd = ps->lfd, .events = POLLIN },
				       { .fd = ps->stop_efd, .events = POLLIN } };
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		struct sockaddr_storage sa;
		socklen_t sl = sizeof(sa);
		int fd = accept4(ps->lfd, (struct sockaddr *)&sa, &sl, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
				usleep(100000); /* leave the others their fds a moment */
			continue;
		}
		pthread_mutex_lock(&ps->mu);
		int slot = take_slot(ps, &sa);
		pthread_mutex_unlock(&ps->mu);
		struct pconn_arg *a = slot >= 0 ? malloc(sizeof(*a)) : NULL;
		pthread_t th;
		pthread_attr_t at;
		if (a) {
			*a = (struct pconn_arg){ .ps = ps, .fd = fd, .slot = (unsigned)slot };
			pthread_attr_init(&at);
			pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
			if (pthread_create(&th, &at, conn_main, a) != 0) {
				free(a);
				a = NULL;
			} else {
				bg_name(th, "peer");
			}
			pthread_attr_destroy(&at);
		}
		if (a) {
			atomic_fetch_add(&ps->st_conns, 1);
			continue;
		}
		if (slot >= 0) {
			pthread_mutex_lock(&ps->mu);
			ps->used[slot] = false;
			ps->nconns--;
			pthread_mutex_unlock(&ps->mu);
		}
		atomic_fetch_add(&ps->st_refused, 1);
		close(fd);
	}
	return NULL;
}

int peersrv_start(struct client *c, struct cstore *store, const struct sockaddr_storage *addr,
		  uint16_t port, struct peersrv **out, char *err, size_t errlen)
{
	struct peersrv *ps = calloc(1, sizeof(*ps));
	char name[64];
	socklen_t sl;
	int rc;

	if (!ps) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	ps->c = c;
	ps->st = store;
	ps->lfd = -1;
	ps->stop_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	pthread_mutex_init(&ps->mu, NULL);
	pthread_cond_init(&ps->gone, NULL);
	ps->addr = *addr;
	if (addr->ss_family == AF_INET6)
		((struct sockaddr_in6 *)&ps->addr)->sin6_port = htons(port);
	else
		((struct sockaddr_in *)&ps->addr)->sin_port = htons(port);
	pfs_addr_name(&ps->addr, name, sizeof(name));
	if (ps->stop_efd < 0) {
		rc = -errno;
		snprintf(err, errlen, "eventfd: %s", strerror(-rc));
		goto fail;
	}
	if (c->tls_ctx && !(ps->ctx = pfs_tls_ctx_new(true, c->key, err, errlen))) {
		rc = -EIO;
		goto fail;
	}
	ps->lfd = socket(ps->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sl = ps->addr.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
					    : sizeof(struct sockaddr_in);
	int one = 1;
	if (ps->lfd >= 0)
		setsockopt(ps->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ps->lfd < 0 || bind(ps->lfd, (struct sockaddr *)&ps->addr, sl) < 0 ||
	    listen(ps->lfd, PEERSRV_CONNS) < 0 ||
	    getsockname(ps->lfd, (struct sockaddr *)&ps->addr, &sl) < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot listen for peers on %s: %s", name, strerror(-rc));
		goto fail;
	}
	if ((rc = -pthread_create(&ps->accept_th, NULL, accept_main, ps)) < 0) {
		snprintf(err, errlen, "cannot start the peer listener: %s", strerror(-rc));
		goto fail;
	}
	bg_name(ps->accept_th, "peer-accept");
	ps->accepting = true;
	pfs_addr_name(&ps->addr, name, sizeof(name));
	pfs_notice("serving chunks to peers on %s (%s)", name, ps->ctx ? "TLS" : "plaintext");
	*out = ps;
	return 0;
fail:
	peersrv_stop(ps);
	return rc;
}

void peersrv_addr(const struct peersrv *ps, struct sockaddr_storage *out)
{
	*out = ps->addr;
}

void peersrv_stop(struct peersrv *ps)
{
	if (!ps)
		return;
	if (ps->stop_efd >= 0) {
		uint64_t one = 1;
		ssize_t w = write(ps->stop_efd, &one, sizeof(one));
		(void)w;
	}
	/* Waits in the store for a chunk being fetched end now too. */
	cstore_close(ps->st);
	if (ps->accepting)
		pthread_join(ps->accept_th, NULL);
	pthread_mutex_lock(&ps->mu);
	while (ps->nconns > 0)
		pthread_cond_wait(&ps->gone, &ps->mu);
	pthread_mutex_unlock(&ps->mu);
	if (ps->lfd >= 0)
		close(ps->lfd);
	if (ps->stop_efd >= 0)
		close(ps->stop_efd);
	pfs_tls_ctx_free(ps->ctx);
	pthread_cond_destroy(&ps->gone);
	pthread_mutex_destroy(&ps->mu);
	free(ps);
}

void peersrv_stats(struct peersrv *ps, struct peersrv_stats *st)
{
	st->conns = atomic_load(&ps->st_conns);
	st->refused = atomic_load(&ps->st_refused);
	st->gets = atomic_load(&ps->st_gets);
	st->misses = atomic_load(&ps->st_misses);
	st->bytes = atomic_load(&ps->st_bytes);
	pthread_mutex_lock(&ps->mu);
	st->open = ps->nconns;
	pthread_mutex_unlock(&ps->mu);
}
