/* peercli.c: a mount fetching chunks from its peers (see peercli_i.h). */
#include "peercli_i.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "client_i.h"
#include "peernet_i.h"
#include "podfs/auth.h"
#include "podfs/clock.h"
#include "podfs/codec.h"
#include "podfs/digest.h"
#include "podfs/le.h"
#include "podfs/log.h"
#include "podfs/netaddr.h"

struct ppeer {
	struct sockaddr_storage sa;
	bool used;
	unsigned busy;                    /* its connections in use */
	struct pnet idle[PEERCLI_IDLE];
	unsigned nidle;
	int64_t bad_until, last_use;      /* ms */
	unsigned strikes;                 /* could not be reached, times in a row */
	uint64_t fail_epoch;              /* pc->epoch of its last such failure */
};

struct peercli {
	struct client *c;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* a connection was given back */
	struct ppeer peers[PEERCLI_PEERS];
	int stop_efd;
	/* The id this mount gives in peer handshakes: random, never its
	 * session's client_id, which a peer would learn and could then
	 * present to the coordinator as its own (AUTH resumes a session by
	 * its id alone). */
	uint64_t peer_id;
	/* Peers that could not be reached: those with strikes whose
	 * fail_epoch is epoch failed since a peer was last reached (epoch
	 * moves on then, and when every peer is left aside, until off_until,
	 * for off_ms). */
	uint64_t epoch;
	int64_t off_until, off_ms;
	uint64_t unreachable, offs;
};

int peercli_new(struct client *c, struct peercli **out)
{
	struct peercli *pc = calloc(1, sizeof(*pc));

	if (!pc)
		return -ENOMEM;
	pc->stop_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (pfs_random(&pc->peer_id, sizeof(pc->peer_id)) < 0 || pc->stop_efd < 0 ||
	    pfs_cond_init_mono(&pc->cv) != 0) {
		if (pc->stop_efd >= 0)
			close(pc->stop_efd);
		free(pc);
		return -ENOMEM;
	}
	pc->c = c;
	pthread_mutex_init(&pc->mu, NULL);
	*out = pc;
	return 0;
}

void peercli_stop(struct peercli *pc)
{
	uint64_t one = 1;
	ssize_t w = write(pc->stop_efd, &one, sizeof(one));

	(void)w;
	pthread_mutex_lock(&pc->mu);
	pthread_cond_broadcast(&pc->cv);
	pthread_mutex_unlock(&pc->mu);
}

static void drop_idle(struct ppeer *p)
{
	while (p->nidle)
		pnet_close(&p->idle[--p->nidle]);
}

void peercli_free(struct peercli *pc)
{
	if (!pc)
		return;
	for (unsigned i = 0; i < PEERCLI_PEERS; i++)
		drop_idle(&pc->peers[i]);
	close(pc->stop_efd);
	pthread_cond_destroy(&pc->cv);
	pthread_mutex_destroy(&pc->mu);
	free(pc);
}

static bool same(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
		return x->sin_addr.s_addr == y->sin_addr.s_addr && x->sin_port == y->sin_port;
	}
	const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
	return memcmp(&x->sin6_addr, &y->sin6_addr, 16) == 0 && x->sin6_port == y->sin6_port;
}

/* The entry of sa, made if needed (pc->mu held); NULL if every entry is
 * in use. */
static struct ppeer *peer_of(struct peercli *pc, const struct sockaddr_storage *sa)
{
	struct ppeer *victim = NULL;

	for (unsigned i = 0; i < PEERCLI_PEERS; i++) {
		struct ppeer *p = &pc->peers[i];
		if (p->used && same(&p->sa, sa))
			return p;
		if (!p->used)
			victim = victim && !victim->used ? victim : p;
		else if (p->busy == 0 && (!victim || (victim->used && p->last_use < victim->last_use)))
			victim = p;
	}
	if (!victim)
		return NULL;
	drop_idle(victim);
	memset(victim, 0, sizeof(*victim));
	victim->used = true;
	victim->sa = *sa;
	return victim;
}

int peercli_mark_bad(struct peercli *pc, const struct sockaddr_storage *sa, int ms)
{
	int64_t now = pfs_mono_ms(), t = ms;
	int fresh = 0;

	pthread_mutex_lock(&pc->mu);
	struct ppeer *p = peer_of(pc, sa);
	if (p) {
		/* Unreachable again and again: twice as long each time. */
		for (unsigned i = 1; i < p->strikes && t < PEERCLI_UNREACHABLE_MAX_MS; i++)
			t *= 2;
		if (p->strikes > 1 && t > PEERCLI_UNREACHABLE_MAX_MS)
			t = PEERCLI_UNREACHABLE_MAX_MS;
		if (p->bad_until <= now)
			fresh = (int)t;
		if (p->bad_until < now + t)
			p->bad_until = now + t;
		drop_idle(p);
	}
	pthread_mutex_unlock(&pc->mu);
	return fresh;
}

bool peercli_off(struct peercli *pc)
{
	pthread_mutex_lock(&pc->mu);
	bool off = pfs_mono_ms() < pc->off_until;
	pthread_mutex_unlock(&pc->mu);
	return off;
}

void peercli_stats(struct peercli *pc, struct peercli_stats *st)
{
	pthread_mutex_lock(&pc->mu);
	st->unreachable = pc->unreachable;
	st->off = pc->offs;
	pthread_mutex_unlock(&pc->mu);
}

/* A peer was reached (pc->mu held): the failures before do not count. */
static void reached_locked(struct peercli *pc, struct ppeer *p)
{
	p->strikes = 0;
	pc->epoch++;
	pc->off_ms = 0;
}

/* p could not be reached (pc->mu held). Returns the ms every peer is now
 * left aside for (the caller logs it), or 0. */
static int64_t unreachable_locked(struct peercli *pc, struct ppeer *p)
{
	unsigned run = 0;

	pc->unreachable++;
	if (p->strikes < 32)
		p->strikes++;
	p->fail_epoch = pc->epoch;
	for (unsigned i = 0; i < PEERCLI_PEERS; i++)
		run += pc->peers[i].used && pc->peers[i].strikes &&
		       pc->peers[i].fail_epoch == pc->epoch;
	if (run < PEERCLI_UNREACHABLE_RUN)
		return 0;
	pc->off_ms = pc->off_ms ? pc->off_ms * 2 : PEERCLI_OFF_MS;
	if (pc->off_ms > PEERCLI_OFF_MAX_MS)
		pc->off_ms = PEERCLI_OFF_MAX_MS;
	pc->off_until = pfs_mono_ms() + pc->off_ms;
	pc->offs++;
	pc->epoch++; /* the next time takes a new run */
	return pc->off_ms;
}

bool peercli_is_bad(struct peercli *pc, const struct sockaddr_storage *sa)
{
	bool bad = false;

	pthread_mutex_lock(&pc->mu);
	for (unsigned i = 0; i < PEERCLI_PEERS; i++)
		if (pc->peers[i].used && same(&pc->peers[i].sa, sa))
			bad = pc->peers[i].bad_until > pfs_mono_ms();
	pthread_mutex_unlock(&pc->mu);
	return bad;
}

/* Asks pn for chunk d (len bytes) into buf. */
static int get(struct pnet *pn, const uint8_t d[PFS_DIGEST_LEN], uint32_t len, uint8_t *buf,
	       int64_t deadline)
{
	unsigned n = (len + PFS_MAX_IO - 1) / PFS_MAX_IO;
	uint8_t req[64 + PFS_DIGEST_LEN];
	struct pfs_frame_hdr h;
	struct pfs_wr w;
	int rc;

	/* All the requests at once: the peer answers them in order. */
	for (unsigned i = 0; i < n; i++) {
		struct pfs_peer_get_req m = { .offset = i * PFS_MAX_IO };
		memcpy(m.hash.b, d, PFS_DIGEST_LEN);
		m.size = len - m.offset < PFS_MAX_IO ? len - m.offset : PFS_MAX_IO;
		pfs_wr_init(&w, req, sizeof(req));
		if (pfs_enc_peer_get_req(&w, &m) < 0)
			return -EINVAL;
		if ((rc = pnet_send_frame(pn, 100 + i, PFS_OP_PEER_GET, 0, 0, req, w.len,
					  deadline)) < 0)
			return rc;
	}
	for (unsigned i = 0; i < n; i++) {
		uint32_t off = i * PFS_MAX_IO, want = len - off < PFS_MAX_IO ? len - off : PFS_MAX_IO;
		uint8_t lb[4];
		if ((rc = pnet_read_hdr(pn, &h, 4 + PFS_MAX_IO, deadline)) < 0)
			return rc;
		if (!(h.flags & PFS_FF_REPLY) || h.id != 100 + i || h.op != PFS_OP_PEER_GET)
			return -EBADMSG;
		if (h.status != 0)
			return h.status == ENOENT ? -ENOENT : -EBADMSG;
		/* peer_get_rep: one BYTES field, read straight into buf. */
		if (h.raw_len != 4 + want)
			return -EBADMSG;
		if ((rc = pnet_read(pn, lb, 4, deadline)) < 0)
			return rc;
		if (pfs_load_le32(lb) != want)
			return -EBADMSG;
		if ((rc = pnet_read(pn, buf + off, want, deadline)) < 0)
			return rc;
	}
	uint8_t got[PFS_DIGEST_LEN];
	if (pfs_sha256(buf, len, got) < 0)
		return -ENOMEM;
	return pfs_digest_equal(got, d) ? 0 : -EBADMSG;
}

int peercli_fetch(struct peercli *pc, const struct sockaddr_storage *sa,
		  const uint8_t d[PFS_DIGEST_LEN], uint32_t len, uint8_t *buf, int64_t deadline)
{
	struct client *c = pc->c;
	struct pnet pn = { .fd = -1 };
	bool have = false;
	int rc = 0;

	pthread_mutex_lock(&pc->mu);
	if (pfs_mono_ms() < pc->off_until) {
		pthread_mutex_unlock(&pc->mu);
		return -EAGAIN; /* no peer could be reached lately */
	}
	struct ppeer *p = peer_of(pc, sa);
	while (p && p->bad_until <= pfs_mono_ms() && p->busy >= PEERCLI_PER_PEER) {
		int64_t left = deadline - pfs_mono_ms();
		if (left <= 0) {
			rc = -ETIMEDOUT;
			break;
		}
		struct timespec ts = pfs_deadline_ns(left * 1000000);
		pthread_cond_timedwait(&pc->cv, &pc->mu, &ts);
	}
	if (!p)
		rc = -EAGAIN; /* every entry in use: ask the coordinator */
	else if (rc == 0 && p->bad_until > pfs_mono_ms())
		rc = -EAGAIN;
	if (rc == 0) {
		p->busy++;
		p->last_use = pfs_mono_ms();
		if (p->nidle) {
			pn = p->idle[--p->nidle];
			have = true;
		}
	}
	pthread_mutex_unlock(&pc->mu);
	if (rc < 0)
		return rc;
	int dial = 0;
	if (!have)
		rc = dial = pnet_dial(&pn, c->tls_ctx, c->key, pc->peer_id, sa, pc->stop_efd, deadline);
	if (rc == 0)
		rc = get(&pn, d, len, buf, deadline);
	if (have && (rc == -ECONNRESET || rc == -EPIPE)) {
		/* A kept connection the peer had closed meanwhile (it
		 * restarted, or found it idle too long): once more, anew. */
		pnet_close(&pn);
		rc = dial = pnet_dial(&pn, c->tls_ctx, c->key, pc->peer_id, sa, pc->stop_efd,
				      deadline);
		if (rc == 0)
			rc = get(&pn, d, len, buf, deadline);
	}
	pthread_mutex_lock(&pc->mu);
	p->busy--;
	/* Only a connection that could not be made says the network
	 * between the hosts is closed; one refused after it (TLS, the peer
	 * handshake: a peer at its connection limit resets it) is a busy
	 * or wrong peer, which the caller's mark deals with. */
	int64_t off = 0;
	if (dial < 0 && dial != -ECANCELED && !pn.reached)
		off = unreachable_locked(pc, p);
	else if (rc == 0 || dial < 0)
		reached_locked(pc, p);
	if (rc == 0 && p->nidle < PEERCLI_IDLE && pn.fd >= 0) {
		p->idle[p->nidle++] = pn;
		pn.fd = -1;
		pn.ssl = NULL;
	}
	pthread_cond_broadcast(&pc->cv);
	pthread_mutex_unlock(&pc->mu);
	pnet_close(&pn);
	if (off) {
		char name[64];
		pfs_addr_name(sa, name, sizeof(name));
		pfs_warn("peers: %d peers in a row could not be reached (the last, %s: %s): "
			 "reading from the coordinator only for %lld s; are the peers' ports "
			 "(peer_port=) open between the hosts?",
			 PEERCLI_UNREACHABLE_RUN, name, strerror(-dial), (long long)(off / 1000));
	}
	return rc;
}
