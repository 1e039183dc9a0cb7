/* rpc.c: the pending-request table and the synchronous call API. */
#include "rpc_i.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "client_i.h"
#include "fhmap_i.h"
#include "killable_i.h"
#include "podfs/bigbuf.h"
#include "podfs/clock.h"
#include "podfs/hash.h"
#include "podfs/htab.h"
#include "podfs/log.h"
#include "transport_i.h"

/* One call in progress; lives on the caller's stack while it is in the
 * table. Every field is guarded by rpc->lock. */
struct rpc_req {
	struct hnode hn; /* rpc->calls, by id */
	uint64_t id;
	uint16_t op;
	uint64_t sent_gen; /* generation it was last sent on; 0 = never */
	unsigned sent_ch;  /* connection it was last sent on */
	bool done;
	int32_t status;
	struct rpc_reply rep;
	uint16_t coded;    /* PFS_FF_CODED bits: rep.buf holds wire_len coded bytes */
	uint32_t wire_len;
	uint64_t rx_gen;   /* connection the reply came on */
	pthread_cond_t cond;
};

/* One connection of the transport (0: main; others bulk). */
struct rchan {
	uint64_t gen;     /* its current generation */
	bool up;          /* a connection of generation gen is usable */
	unsigned codecs;  /* PFS_CAP_LZ4/ZR of that connection */
	unsigned sent;    /* requests sent on it and not answered */
};

struct rpc {
	struct client *c;
	pthread_mutex_t lock;
	struct htab calls; /* struct rpc_req waiting for their reply */
	unsigned nch;
	struct rchan ch[PFS_CONNS_MAX];
	unsigned rr;   /* round-robin start among equally loaded connections */
	bool closing;
	bool dead;
	uint64_t abandoned; /* calls given up for a killed process */
	int64_t hold_until; /* CLOCK_MONOTONIC ms: rpc_hold, 0: none */
	void (*barrier)(void *arg, uint16_t op, struct inode *in); /* rpc_set_barrier */
	void *barrier_arg;
};

/* The thread finding objects again after the server's handle secret
 * changed: its calls go while the others are held (rpc_hold). */
static __thread bool hold_exempt;

int rpc_new(struct client *c, struct rpc **out)
{
	struct rpc *rpc = calloc(1, sizeof(*rpc));
	if (!rpc)
		return -ENOMEM;
	rpc->c = c;
	rpc->nch = c->conns < 1 ? 1 : c->conns > PFS_CONNS_MAX ? PFS_CONNS_MAX : c->conns;
	pthread_mutex_init(&rpc->lock, NULL);
	htab_init(&rpc->calls);
	*out = rpc;
	return 0;
}

void rpc_free(struct rpc *rpc)
{
	if (!rpc)
		return;
	htab_fini(&rpc->calls);
	pthread_mutex_destroy(&rpc->lock);
	free(rpc);
}

/* Wakes every waiting caller; they re-examine the connection state. */
static void wake_all(struct rpc *rpc)
{
	size_t pos;

	for (struct hnode *n = htab_iter(&rpc->calls, &pos, NULL); n;
	     n = htab_iter(&rpc->calls, &pos, n))
		pthread_cond_signal(&container_of(n, struct rpc_req, hn)->cond);
}

/* The data ops, which may travel on bulk connections. */
/* True while r's last send is on a live connection (its reply may come). */
static bool sent_live(const struct rpc *rpc, const struct rpc_req *r)
{
	const struct rchan *ch = &rpc->ch[r->sent_ch];
	return r->sent_gen != 0 && ch->up && ch->gen == r->sent_gen;
}

/* The connection to send r on, or -1 if none is up. READ and WRITE go to
 * the connection, main or bulk, with the fewest requests outstanding
 * (round robin among equals), so that N connections carry N streams of
 * 1 MiB frames; the main connection's metadata requests count too, which
 * steers data away from it while it is busy. Everything else uses the
 * main connection: the server orders pushes after the replies on that
 * stream only (server.c). */
static int pick(struct rpc *rpc, uint16_t op)
{
	int best = -1;
	if ((pfs_op_flags(op) & PFS_OPF_BULK) && rpc->nch > 1) {
		for (unsigned k = 0; k < rpc->nch; k++) {
			unsigned i = (rpc->rr + k) % rpc->nch;
			if (rpc->ch[i].up && (best < 0 || rpc->ch[i].sent < rpc->ch[best].sent))
				best = (int)i;
		}
		rpc->rr++;
		return best;
	}
	return rpc->ch[0].up ? 0 : -1;
}

/* r no longer counts as outstanding on the connection it was sent on. */
static void unsent(struct rpc *rpc, struct rpc_req *r)
{
	if (r->sent_gen) {
		rpc->ch[r->sent_ch].sent--;
		r->sent_gen = 0;
	}
}

/* Ops that change nothing on the server that this host would need to
 * know of: abandoning one after it was sent only drops its late reply. */
static bool changes_nothing(uint16_t op)
{
	switch (op) {
	case PFS_OP_LOOKUP: case PFS_OP_GETATTR: case PFS_OP_READLINK: case PFS_OP_READ:
	case PFS_OP_READDIR: case PFS_OP_STATFS: case PFS_OP_GETXATTR: case PFS_OP_LISTXATTR:
	case PFS_OP_GETLK: case PFS_OP_LSEEK: case PFS_OP_REVALIDATE: case PFS_OP_LOOKUP_DATA:
	case PFS_OP_LISTDIR: case PFS_OP_LISTDIR_PAGE: case PFS_OP_PING:
	case PFS_OP_DELEG_DIR: /* a grant this host does not know of is recalled like any */
	case PFS_OP_DELEG_RETURN:
		return true;
	default:
		return false;
	}
}

/* Gives up r, whose caller is being killed (killable_i.h); rpc->lock
 * held, r in the table. If r may have reached the server and may change
 * something there (a CREATE, a RENAME, a lock, an OPEN's fid), its
 * outcome is unknown to this host: the connection is dropped, so that
 * the reconnect revalidates this host's caches (as after any lost
 * connection) while the session, and with it the duplicate-request
 * cache that answers the other callers' re-sent requests, lives on. The
 * abandoned request itself is never sent again. */
static void abandon(struct rpc *rpc, struct rpc_req *r)
{
	bool live = sent_live(rpc, r);
	uint64_t gen = r->sent_gen;

	htab_remove(&rpc->calls, &r->hn);
	unsent(rpc, r);
	rpc->abandoned++;
	pthread_mutex_unlock(&rpc->lock);
	bool drop = live && !changes_nothing(r->op);
	pfs_notice("request %llu (%s) given up: its process is being killed%s",
		   (unsigned long long)r->id, pfs_op_name(r->op),
		   drop ? "; reconnecting to learn what it changed" : "");
	if (drop)
		transport_drop(rpc->c->tr, gen);
}

static int call(struct rpc *rpc, struct inode *in, uint16_t op, const void *req, size_t len,
		struct rpc_reply *rep, int timeout_ms)
{
	struct rpc_req r = { .id = transport_next_id(rpc->c->tr), .op = op };
	struct timespec deadline;
	int64_t t0 = pfs_mono_ns();
	bool has_deadline = false;
	int timeout_err = -EIO;
	int err = 0;

	rep->buf = NULL;
	rep->len = 0;
	rep->verf = 0;
	rep->boot = 0;
	if (rpc->barrier && !hold_exempt)
		rpc->barrier(rpc->barrier_arg, op, in);
	if (op < PFS_OP_MAX)
		atomic_fetch_add_explicit(&rpc->c->st_req[op], 1, memory_order_relaxed);
	pfs_cond_init_mono(&r.cond);

	if (timeout_ms > 0) {
		deadline = pfs_deadline_ns((int64_t)timeout_ms * 1000000);
		has_deadline = true;
		timeout_err = -ETIMEDOUT;
	} else if (rpc->c->soft) {
		deadline = pfs_deadline_ns((int64_t)(rpc->c->timeo * 1e9));
		has_deadline = true;
	}

	pthread_mutex_lock(&rpc->lock);
	if (rpc->dead || ((rpc->closing || timeout_ms > 0) && !rpc->ch[0].up)) {
		err = timeout_ms > 0 && !rpc->dead ? -ENOTCONN : -EIO;
		pthread_mutex_unlock(&rpc->lock);
		goto out_cond;
	}
	htab_insert(&rpc->calls, &r.hn, pfs_hash_u64(r.id));

	while (!r.done) {
		if (rpc->dead || (rpc->closing && !rpc->ch[0].up)) {
			err = -EIO;
			goto out_remove;
		}
		bool held = rpc->hold_until && !hold_exempt && !rpc->closing &&
			    pfs_mono_ms() < rpc->hold_until;
		int k = sent_live(rpc, &r) || held ? -1 : pick(rpc, op);
		if (k >= 0) {
			uint64_t gen = rpc->ch[k].gen;
			unsigned codecs = rpc->ch[k].codecs;
			unsent(rpc, &r);
			r.sent_gen = gen;
			r.sent_ch = (unsigned)k;
			rpc->ch[k].sent++;
			pthread_mutex_unlock(&rpc->lock);
			pfs_debug("request %llu (%s), %zu bytes, connection %d generation %llu",
				  (unsigned long long)r.id, pfs_op_name(op), len, k,
				  (unsigned long long)gen);
			/* A failed send needs no action here: the connection
			 * thread sees the broken socket, and its drop makes
			 * this loop send again, on the next generation or on
			 * another connection. The id stays the same: the
			 * server's reply cache is per session, whichever
			 * connection a retry comes on. */
			/* After the server's handle secret changed, the
			 * handles of objects found again go out as the server
			 * knows them now (fhmap_i.h), also in a request made
			 * before. */
			uint8_t *mapped = NULL;
			size_t mlen = 0;
			if (rpc->c->fm &&
			    fhmap_rewrite(rpc->c->fm, op, req, len, &mapped, &mlen) == 1) {
				(void)transport_send(rpc->c->tr, (unsigned)k, gen, r.id, op, mapped,
						     mlen, codecs);
				free(mapped);
			} else {
				(void)transport_send(rpc->c->tr, (unsigned)k, gen, r.id, op, req,
						     len, codecs);
			}
			pthread_mutex_lock(&rpc->lock);
			continue;
		}
		/* Wait in slices: a hard mount waits for the server as long
		 * as it takes, but not for a process that is being killed. */
		struct timespec slice = pfs_deadline_ns((int64_t)KILLABLE_POLL_MS * 1000000);
		bool last = has_deadline && pfs_ts_before(&deadline, &slice);
		int rc = pthread_cond_timedwait(&r.cond, &rpc->lock, last ? &deadline : &slice);
		if (rc != ETIMEDOUT || r.done)
			continue;
		if (last) {
			pfs_warn("request %llu (%s) timed out", (unsigned long long)r.id,
				 pfs_op_name(op));
			err = timeout_err;
			goto out_remove;
		}
		pthread_mutex_unlock(&rpc->lock);
		bool give_up = killable_poll() == KILLABLE_GIVE_UP;
		pthread_mutex_lock(&rpc->lock);
		if (give_up && !r.done) {
			abandon(rpc, &r);
			pthread_cond_destroy(&r.cond);
			return -EINTR;
		}
	}
	/* The completer has already removed r from the table. */
	pthread_mutex_unlock(&rpc->lock);
	pthread_cond_destroy(&r.cond);
	if (op < PFS_OP_MAX) {
		uint64_t us = (uint64_t)(pfs_mono_ns() - t0) / 1000;
		atomic_fetch_add_explicit(&rpc->c->st_lat[op][lathist_bucket(us)], 1,
					  memory_order_relaxed);
		atomic_fetch_add_explicit(&rpc->c->st_lat_sum_us[op], us, memory_order_relaxed);
	}
	if (r.status != 0) {
		rpc_reply_free(&r.rep);
		return -r.status;
	}
	if (r.coded) {
		/* Decoded here, in the caller's thread, so that the one
		 * receiving thread only moves bytes off the socket. */
		uint8_t *raw = pfs_big_alloc(r.rep.len);
		if (!raw) {
			rpc_reply_free(&r.rep);
			return -ENOMEM;
		}
		if (pfs_payload_decode(r.coded, r.rep.buf, r.wire_len, raw, r.rep.len) < 0) {
			pfs_err("bad compressed reply from %s (%s): dropping the connection",
				rpc->c->hostport, pfs_op_name(op));
			pfs_big_free(raw);
			rpc_reply_free(&r.rep);
			transport_drop(rpc->c->tr, r.rx_gen);
			return -EIO;
		}
		pfs_big_free(r.rep.buf);
		r.rep.buf = raw;
	}
	*rep = r.rep;
	return 0;

out_remove:
	htab_remove(&rpc->calls, &r.hn);
	unsent(rpc, &r);
	pthread_mutex_unlock(&rpc->lock);
out_cond:
	pthread_cond_destroy(&r.cond);
	return err;
}

int rpc_call(struct rpc *rpc, uint16_t op, const void *req, size_t len, struct rpc_reply *rep)
{
	return call(rpc, NULL, op, req, len, rep, 0);
}

int rpc_call_in(struct rpc *rpc, struct inode *in, uint16_t op, const void *req, size_t len,
		struct rpc_reply *rep)
{
	return call(rpc, in, op, req, len, rep, 0);
}

int rpc_call_timeout(struct rpc *rpc, uint16_t op, const void *req, size_t len,
		     struct rpc_reply *rep, int timeout_ms)
{
	return call(rpc, NULL, op, req, len, rep, timeout_ms > 0 ? timeout_ms : 1);
}

void rpc_hold(struct rpc *rpc, int ms)
{
	pthread_mutex_lock(&rpc->lock);
	rpc->hold_until = pfs_mono_ms() + ms;
	pthread_mutex_unlock(&rpc->lock);
}

void rpc_release(struct rpc *rpc)
{
	pthread_mutex_lock(&rpc->lock);
	rpc->hold_until = 0;
	wake_all(rpc);
	pthread_mutex_unlock(&rpc->lock);
}

void rpc_set_barrier(struct rpc *rpc, void (*fn)(void *arg, uint16_t op, struct inode *in),
		     void *arg)
{
	rpc->barrier = fn;
	rpc->barrier_arg = arg;
}

void rpc_hold_exempt(bool on)
{
	hold_exempt = on;
}

void rpc_connected(struct rpc *rpc, unsigned chan, uint64_t gen, unsigned codecs)
{
	if (chan >= rpc->nch)
		return;
	pthread_mutex_lock(&rpc->lock);
	rpc->ch[chan].gen = gen;
	rpc->ch[chan].codecs = codecs;
	rpc->ch[chan].up = true;
	wake_all(rpc);
	pthread_mutex_unlock(&rpc->lock);
}

void rpc_disconnected(struct rpc *rpc, unsigned chan)
{
	if (chan >= rpc->nch)
		return;
	pthread_mutex_lock(&rpc->lock);
	rpc->ch[chan].up = false;
	/* Callers waiting on this connection send again on another one if
	 * one is up (bulk), or give up (closing); the others wait for the
	 * reconnect. */
	if (rpc->closing || rpc->nch > 1)
		wake_all(rpc);
	pthread_mutex_unlock(&rpc->lock);
}

void rpc_complete(struct rpc *rpc, const struct pfs_frame_hdr *h, uint8_t *payload,
		  uint64_t boot_id, uint64_t verf, uint64_t gen)
{
	uint64_t hash = pfs_hash_u64(h->id);
	struct rpc_req *r = NULL;

	pthread_mutex_lock(&rpc->lock);
	for (struct hnode *n = htab_first(&rpc->calls, hash); n; n = htab_next(n, hash)) {
		if (container_of(n, struct rpc_req, hn)->id == h->id) {
			r = container_of(n, struct rpc_req, hn);
			break;
		}
	}
	if (!r) {
		pthread_mutex_unlock(&rpc->lock);
		/* A late reply to a call that timed out, or a duplicate. */
		pfs_debug("dropping reply %llu (%s): no such request",
			  (unsigned long long)h->id, pfs_op_name(h->op));
		free(payload);
		return;
	}
	htab_remove(&rpc->calls, &r->hn);
	unsent(rpc, r);
	r->done = true;
	pfs_debug("reply %llu (%s): status %d, %u bytes", (unsigned long long)h->id,
		  pfs_op_name(h->op), (int)h->status, (unsigned)h->raw_len);
	if (r->op != h->op) {
		pfs_warn("reply %llu is %s, but the request was %s", (unsigned long long)h->id,
			 pfs_op_name(h->op), pfs_op_name(r->op));
		r->status = EIO;
		free(payload);
	} else if (h->status != 0) {
		/* Both ends are Linux; anything outside errno's range is a
		 * broken peer. */
		r->status = h->status < 4096 ? h->status : EIO;
		free(payload);
	} else {
		r->rep.buf = payload;
		r->rep.len = h->raw_len;
		r->rep.verf = verf;
		r->rep.boot = boot_id;
		r->coded = h->flags & PFS_FF_CODED;
		r->wire_len = h->wire_len;
		r->rx_gen = gen;
	}
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&rpc->lock);
}

void rpc_closing(struct rpc *rpc)
{
	pthread_mutex_lock(&rpc->lock);
	rpc->closing = true;
	wake_all(rpc);
	pthread_mutex_unlock(&rpc->lock);
}

void rpc_kill(struct rpc *rpc)
{
	pthread_mutex_lock(&rpc->lock);
	rpc->closing = true;
	rpc->dead = true;
	wake_all(rpc);
	pthread_mutex_unlock(&rpc->lock);
}

bool rpc_is_closing(struct rpc *rpc)
{
	pthread_mutex_lock(&rpc->lock);
	bool v = rpc->closing;
	pthread_mutex_unlock(&rpc->lock);
	return v;
}

bool rpc_is_up(struct rpc *rpc)
{
	pthread_mutex_lock(&rpc->lock);
	bool v = rpc->ch[0].up;
	pthread_mutex_unlock(&rpc->lock);
	return v;
}

void rpc_waiting(struct rpc *rpc, size_t *waiting, uint64_t *abandoned)
{
	pthread_mutex_lock(&rpc->lock);
	*waiting = rpc->calls.n;
	*abandoned = rpc->abandoned;
	pthread_mutex_unlock(&rpc->lock);
}

unsigned rpc_conns_up(struct rpc *rpc)
{
	unsigned n = 0;
	pthread_mutex_lock(&rpc->lock);
	for (unsigned i = 0; i < rpc->nch; i++)
		n += rpc->ch[i].up;
	pthread_mutex_unlock(&rpc->lock);
	return n;
}
