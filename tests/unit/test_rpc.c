/* test_rpc.c: unit tests of the pending-call table (fs/rpc.c), with no
 * socket: the transport below it is a stub that records what rpc sends,
 * and the test plays the server by completing calls (rpc_complete).
 * Covers: a call and its reply, server errors and broken replies, the
 * resend with the same id after a reconnect (hard mount), the soft-mount
 * timeout, rpc_call_timeout, closing and killing, replies nobody waits
 * for, the spreading of READ over bulk connections and the resend of a
 * bulk request whose connection dropped, and LZ4-coded replies (decoded
 * by the caller; a bad one drops its connection), and the calls of a
 * process being killed (given up with EINTR; the connection dropped when
 * one that may have changed something had been sent).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "client_i.h"
#include "killable_i.h"
#include "podfs/clock.h"
#include "podfs/frame.h"
#include "podfs/log.h"
#include "rpc_i.h"
#include "transport_i.h"

/* ---- the stub transport (what rpc.c links against) ---- */

#define MAX_SENT 64

struct sent {
	unsigned chan;
	uint64_t gen, id;
	uint16_t op;
	uint8_t payload[64];
	size_t len;
};

static pthread_mutex_t stub_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stub_cond = PTHREAD_COND_INITIALIZER;
static struct sent sent[MAX_SENT];
static unsigned nsent;
static uint64_t dropped_gen;
static atomic_uint_fast64_t ids = 1;

uint64_t transport_next_id(struct transport *t)
{
	(void)t;
	return atomic_fetch_add(&ids, 1);
}

int transport_send(struct transport *t, unsigned chan, uint64_t gen, uint64_t id, uint16_t op,
		   const void *payload, size_t len, unsigned codecs)
{
	(void)t;
	(void)codecs;
	pthread_mutex_lock(&stub_lock);
	if (nsent < MAX_SENT) {
		struct sent *s = &sent[nsent++];
		s->chan = chan;
		s->gen = gen;
		s->id = id;
		s->op = op;
		s->len = len < sizeof(s->payload) ? len : sizeof(s->payload);
		memcpy(s->payload, payload, s->len);
	}
	pthread_cond_broadcast(&stub_cond);
	pthread_mutex_unlock(&stub_lock);
	return 0;
}

void transport_drop(struct transport *t, uint64_t gen)
{
	(void)t;
	pthread_mutex_lock(&stub_lock);
	dropped_gen = gen;
	pthread_mutex_unlock(&stub_lock);
}

/* The stub of killable.c: whether "the caller" is being killed. Every
 * caller thread of a test shares it. */
static atomic_bool dying;

enum killable_verdict killable_poll(void)
{
	return atomic_load(&dying) ? KILLABLE_GIVE_UP : KILLABLE_WAIT;
}

/* Waits (at most 5 s) until n frames were sent; returns the n-th (from 1). */
static struct sent wait_sent(unsigned n)
{
	struct timespec dl;
	struct sent s;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 5;
	pthread_mutex_lock(&stub_lock);
	while (nsent < n)
		if (pthread_cond_timedwait(&stub_cond, &stub_lock, &dl) != 0)
			break;
	memset(&s, 0, sizeof(s));
	if (nsent >= n)
		s = sent[n - 1];
	pthread_mutex_unlock(&stub_lock);
	CHECK(s.id != 0);
	return s;
}

static void stub_reset(void)
{
	pthread_mutex_lock(&stub_lock);
	nsent = 0;
	dropped_gen = 0;
	pthread_mutex_unlock(&stub_lock);
}

/* ---- calls on threads of their own ---- */

struct caller {
	struct rpc *rpc;
	uint16_t op;
	int timeout_ms; /* 0: rpc_call */
	pthread_t thr;
	int rc;
	struct rpc_reply rep;
	int64_t took_ns;
};

static void *call_main(void *arg)
{
	struct caller *k = arg;
	int64_t t0 = pfs_mono_ns();

	k->rc = k->timeout_ms ? rpc_call_timeout(k->rpc, k->op, "req", 3, &k->rep, k->timeout_ms)
			      : rpc_call(k->rpc, k->op, "req", 3, &k->rep);
	k->took_ns = pfs_mono_ns() - t0;
	return NULL;
}

static void call_start(struct caller *k, struct rpc *rpc, uint16_t op, int timeout_ms)
{
	memset(k, 0, sizeof(*k));
	k->rpc = rpc;
	k->op = op;
	k->timeout_ms = timeout_ms;
	if (pthread_create(&k->thr, NULL, call_main, k) != 0)
		CHECK(!"pthread_create");
}

static int call_end(struct caller *k)
{
	pthread_join(k->thr, NULL);
	return k->rc;
}

/* The server's reply to s: status, and payload text (copied), from
 * instance boot_id; its write verifier boot_id + 1000. */
static void reply(struct rpc *rpc, const struct sent *s, uint16_t op, int32_t status,
		  const char *text, uint64_t boot_id)
{
	struct pfs_frame_hdr h;
	size_t len = text ? strlen(text) : 0;
	uint8_t *p = len ? malloc(len) : NULL;

	memset(&h, 0, sizeof(h));
	h.id = s->id;
	h.op = op;
	h.flags = PFS_FF_REPLY;
	h.status = status;
	h.raw_len = (uint32_t)len;
	h.wire_len = (uint32_t)len;
	if (p)
		memcpy(p, text, len);
	rpc_complete(rpc, &h, p, boot_id, boot_id + 1000, s->gen);
}

static void new_client(struct client *c, unsigned conns)
{
	memset(c, 0, sizeof(*c));
	c->conns = conns;
	c->hostport = (char *)"test:1";
	c->timeo = 30;
}

/* A fresh table of conns connections for *c, the stub's record emptied;
 * with connect, the main connection is up (generation 1). */
static struct rpc *start(struct client *c, unsigned conns, bool connect)
{
	struct rpc *rpc = NULL;

	new_client(c, conns);
	stub_reset();
	CHECK_EQ(rpc_new(c, &rpc), 0);
	if (connect)
		rpc_connected(rpc, 0, 1, 0);
	return rpc;
}

/* ---- the tests ---- */

static void test_call_and_reply(void)
{
	struct client c;
	struct rpc *rpc;
	struct caller k;

	rpc = start(&c, 1, false);
	rpc_connected(rpc, 0, 7, 0);
	CHECK(rpc_is_up(rpc));
	CHECK_EQ(rpc_conns_up(rpc), 1);

	call_start(&k, rpc, PFS_OP_GETATTR, 0);
	struct sent s = wait_sent(1);
	CHECK_EQ(s.chan, 0);
	CHECK_EQ(s.gen, 7);
	CHECK_EQ(s.op, PFS_OP_GETATTR);
	CHECK_EQ(s.len, 3);
	CHECK_MEM(s.payload, "req", 3);
	reply(rpc, &s, PFS_OP_GETATTR, 0, "answer", 42);
	CHECK_EQ(call_end(&k), 0);
	CHECK_EQ(k.rep.len, 6);
	CHECK(k.rep.buf && memcmp(k.rep.buf, "answer", 6) == 0);
	CHECK_EQ(k.rep.boot, 42);
	CHECK_EQ(k.rep.verf, 1042);
	rpc_reply_free(&k.rep);
	CHECK_EQ(atomic_load(&c.st_req[PFS_OP_GETATTR]), 1);

	/* The server's error, negated; the payload is dropped. */
	call_start(&k, rpc, PFS_OP_LOOKUP, 0);
	s = wait_sent(2);
	reply(rpc, &s, PFS_OP_LOOKUP, ENOENT, "x", 42);
	CHECK_EQ(call_end(&k), -ENOENT);
	CHECK(k.rep.buf == NULL && k.rep.len == 0);

	/* A status out of errno's range is a broken peer. */
	call_start(&k, rpc, PFS_OP_LOOKUP, 0);
	s = wait_sent(3);
	reply(rpc, &s, PFS_OP_LOOKUP, 70000, NULL, 42);
	CHECK_EQ(call_end(&k), -EIO);

	/* A reply of another op than the request's. */
	call_start(&k, rpc, PFS_OP_READLINK, 0);
	s = wait_sent(4);
	reply(rpc, &s, PFS_OP_GETATTR, 0, "zz", 42);
	CHECK_EQ(call_end(&k), -EIO);

	/* A reply nobody waits for (late, or a duplicate) is dropped. */
	reply(rpc, &s, PFS_OP_READLINK, 0, "late", 42);
	rpc_free(rpc);
}

static void test_resend_after_reconnect(void)
{
	struct client c;
	struct rpc *rpc;
	struct caller k;

	rpc = start(&c, 1, true);
	call_start(&k, rpc, PFS_OP_CREATE, 0);
	struct sent s1 = wait_sent(1);
	CHECK_EQ(s1.gen, 1);
	/* The connection drops: a hard mount waits for the next one... */
	rpc_disconnected(rpc, 0);
	CHECK(!rpc_is_up(rpc));
	struct timespec ts = { 0, 20 * 1000 * 1000 };
	nanosleep(&ts, NULL);
	pthread_mutex_lock(&stub_lock);
	CHECK_EQ(nsent, 1);
	pthread_mutex_unlock(&stub_lock);
	/* ...and sends the request again, with the same id, on it. */
	rpc_connected(rpc, 0, 2, 0);
	struct sent s2 = wait_sent(2);
	CHECK_EQ(s2.gen, 2);
	CHECK_EQ(s2.id, s1.id);
	CHECK_EQ(s2.op, PFS_OP_CREATE);
	/* A reply to the first send, come on the old connection, still
	 * answers the call (the id names it). */
	reply(rpc, &s1, PFS_OP_CREATE, 0, "ok", 3);
	CHECK_EQ(call_end(&k), 0);
	rpc_reply_free(&k.rep);
	/* Re-sends are not counted twice. */
	CHECK_EQ(atomic_load(&c.st_req[PFS_OP_CREATE]), 1);
	rpc_free(rpc);
}

static void test_soft_timeout(void)
{
	struct client c;
	struct rpc *rpc;
	struct caller k;

	rpc = start(&c, 1, false);
	c.soft = true; /* rpc reads these at every call */
	c.timeo = 0.05;
	/* No connection at all: still waits timeo, then -EIO. */
	call_start(&k, rpc, PFS_OP_GETATTR, 0);
	CHECK_EQ(call_end(&k), -EIO);
	CHECK(k.took_ns >= 45 * 1000000LL);
	/* Connected, but no reply. */
	rpc_connected(rpc, 0, 1, 0);
	call_start(&k, rpc, PFS_OP_GETATTR, 0);
	struct sent s = wait_sent(1);
	CHECK_EQ(call_end(&k), -EIO);
	/* Its late reply finds nobody. */
	reply(rpc, &s, PFS_OP_GETATTR, 0, "late", 1);
	rpc_free(rpc);
}

static void test_call_timeout(void)
{
	struct client c;
	struct rpc *rpc;
	struct caller k;

	rpc = start(&c, 1, false);
	/* Not connected: fails at once (GOODBYE at shutdown). */
	call_start(&k, rpc, PFS_OP_GOODBYE, 1000);
	CHECK_EQ(call_end(&k), -ENOTCONN);
	CHECK(k.took_ns < 500 * 1000000LL);
	rpc_connected(rpc, 0, 1, 0);
	call_start(&k, rpc, PFS_OP_GOODBYE, 30);
	(void)wait_sent(1);
	CHECK_EQ(call_end(&k), -ETIMEDOUT);
	rpc_free(rpc);
}

static void test_closing_and_kill(void)
{
	struct client c;
	struct rpc *rpc;
	struct caller k;

	rpc = start(&c, 1, true);
	CHECK(!rpc_is_closing(rpc));
	/* Closing with the connection up: calls still get their replies. */
	rpc_closing(rpc);
	CHECK(rpc_is_closing(rpc));
	call_start(&k, rpc, PFS_OP_STATFS, 0);
	struct sent s = wait_sent(1);
	reply(rpc, &s, PFS_OP_STATFS, 0, "fs", 1);
	CHECK_EQ(call_end(&k), 0);
	rpc_reply_free(&k.rep);
	/* A call waiting on a connection that drops fails once closing. */
	call_start(&k, rpc, PFS_OP_STATFS, 0);
	(void)wait_sent(2);
	rpc_disconnected(rpc, 0);
	CHECK_EQ(call_end(&k), -EIO);
	rpc_free(rpc);

	/* Kill: the waiting call and every later one fail. */
	rpc = start(&c, 1, true);
	call_start(&k, rpc, PFS_OP_STATFS, 0);
	(void)wait_sent(1);
	rpc_kill(rpc);
	CHECK_EQ(call_end(&k), -EIO);
	call_start(&k, rpc, PFS_OP_STATFS, 0);
	CHECK_EQ(call_end(&k), -EIO);
	CHECK(rpc_is_closing(rpc));
	rpc_free(rpc);
}

static void test_bulk_connections(void)
{
	struct client c;
	struct rpc *rpc;
	struct caller k[3], m;

	rpc = start(&c, 3, false);
	rpc_connected(rpc, 0, 10, 0);
	rpc_connected(rpc, 1, 11, 0);
	rpc_connected(rpc, 2, 12, 0);
	CHECK_EQ(rpc_conns_up(rpc), 3);
	/* Three READs at once: one on each connection (fewest outstanding). */
	unsigned seen = 0;
	struct sent s[3];
	for (int i = 0; i < 3; i++) {
		call_start(&k[i], rpc, PFS_OP_READ, 0);
		s[i] = wait_sent((unsigned)i + 1);
		seen |= 1u << s[i].chan;
		CHECK_EQ(s[i].gen, 10 + s[i].chan);
	}
	CHECK_EQ(seen, 7);
	/* Metadata stays on the main connection. */
	call_start(&m, rpc, PFS_OP_GETATTR, 0);
	struct sent sm = wait_sent(4);
	CHECK_EQ(sm.chan, 0);
	/* A bulk connection drops: its READ goes out again, same id, on a
	 * live one. */
	int on1 = s[0].chan == 1 ? 0 : s[1].chan == 1 ? 1 : 2;
	rpc_disconnected(rpc, 1);
	CHECK_EQ(rpc_conns_up(rpc), 2);
	struct sent r = wait_sent(5);
	CHECK_EQ(r.id, s[on1].id);
	CHECK(r.chan != 1);
	reply(rpc, &r, PFS_OP_READ, 0, "d1", 5);
	for (int i = 0; i < 3; i++)
		if (i != on1)
			reply(rpc, &s[i], PFS_OP_READ, 0, "d", 5);
	reply(rpc, &sm, PFS_OP_GETATTR, 0, "a", 5);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(call_end(&k[i]), 0);
		rpc_reply_free(&k[i].rep);
	}
	CHECK_EQ(call_end(&m), 0);
	rpc_reply_free(&m.rep);
	rpc_free(rpc);
}

/* A reply coded with LZ4 is decoded by the caller; a broken one fails
 * the call and drops the connection it came on. */
static void test_coded_reply(void)
{
	struct client c;
	struct rpc *rpc;
	struct caller k;
	uint8_t raw[8192], hdr[PFS_FRAME_HDR_SIZE];
	size_t cap = pfs_lz4_bound(sizeof(raw));
	uint8_t *scratch = malloc(cap);
	const void *wire;
	struct pfs_frame_hdr h;

	for (size_t i = 0; i < sizeof(raw); i++)
		raw[i] = (uint8_t)("podfs"[i % 5]);
	rpc = start(&c, 1, false);
	rpc_connected(rpc, 0, 3, PFS_CAP_LZ4);

	call_start(&k, rpc, PFS_OP_READ, 0);
	struct sent s = wait_sent(1);
	size_t wl = pfs_frame_prepare(hdr, s.id, PFS_OP_READ, PFS_FF_REPLY, 0, raw, sizeof(raw),
				      PFS_CAP_LZ4, scratch, cap, &wire);
	CHECK_EQ(pfs_hdr_unpack(hdr, &h, PFS_MAX_PAYLOAD), 0);
	CHECK(h.flags & PFS_FF_CODED);
	CHECK(wl < sizeof(raw));
	uint8_t *p = malloc(wl);
	memcpy(p, wire, wl);
	rpc_complete(rpc, &h, p, 9, 9, s.gen);
	CHECK_EQ(call_end(&k), 0);
	CHECK_EQ(k.rep.len, sizeof(raw));
	CHECK(k.rep.buf && memcmp(k.rep.buf, raw, sizeof(raw)) == 0);
	rpc_reply_free(&k.rep);

	call_start(&k, rpc, PFS_OP_READ, 0);
	s = wait_sent(2);
	wl = pfs_frame_prepare(hdr, s.id, PFS_OP_READ, PFS_FF_REPLY, 0, raw, sizeof(raw),
			       PFS_CAP_LZ4, scratch, cap, &wire);
	CHECK_EQ(pfs_hdr_unpack(hdr, &h, PFS_MAX_PAYLOAD), 0);
	p = malloc(wl);
	memset(p, 0xff, wl); /* not LZ4 */
	rpc_complete(rpc, &h, p, 9, 9, s.gen);
	CHECK_EQ(call_end(&k), -EIO);
	pthread_mutex_lock(&stub_lock);
	CHECK_EQ(dropped_gen, 3);
	pthread_mutex_unlock(&stub_lock);
	free(scratch);
	rpc_free(rpc);
}

/* A call whose process is being killed gives up with EINTR within a few
 * polls, whether it waits for a connection or for a reply; one that may
 * have changed something on the server drops its connection (the
 * reconnect revalidates), a read does not; the others wait on, and the
 * given-up one is never sent again. */
static void test_killed_caller(void)
{
	struct client c;
	struct rpc *rpc;
	struct caller k;
	size_t waiting;
	uint64_t abandoned;

	/* Waiting for a connection that never comes (a hard mount). */
	rpc = start(&c, 1, false);
	call_start(&k, rpc, PFS_OP_CREATE, 0);
	struct timespec ts = { 0, 50 * 1000 * 1000 };
	nanosleep(&ts, NULL);
	rpc_waiting(rpc, &waiting, &abandoned);
	CHECK_EQ(waiting, 1);
	atomic_store(&dying, true);
	CHECK_EQ(call_end(&k), -EINTR);
	atomic_store(&dying, false);
	CHECK(k.took_ns < (int64_t)(KILLABLE_POLL_MS * 5) * 1000000);
	rpc_waiting(rpc, &waiting, &abandoned);
	CHECK_EQ(waiting, 0);
	CHECK_EQ(abandoned, 1);
	/* Not sent when the connection comes: nothing was sent at all. */
	rpc_connected(rpc, 0, 5, 0);
	nanosleep(&ts, NULL);
	pthread_mutex_lock(&stub_lock);
	CHECK_EQ(nsent, 0);
	CHECK_EQ(dropped_gen, 0);
	pthread_mutex_unlock(&stub_lock);

	/* Sent on a live connection, the server silent: a RENAME's outcome
	 * is unknown, so the connection is dropped... */
	call_start(&k, rpc, PFS_OP_RENAME, 0);
	struct sent s = wait_sent(1);
	CHECK_EQ(s.gen, 5);
	atomic_store(&dying, true);
	CHECK_EQ(call_end(&k), -EINTR);
	atomic_store(&dying, false);
	pthread_mutex_lock(&stub_lock);
	CHECK_EQ(dropped_gen, 5);
	dropped_gen = 0;
	pthread_mutex_unlock(&stub_lock);
	/* ...and its late reply answers nobody. */
	reply(rpc, &s, PFS_OP_RENAME, 0, NULL, 1);

	/* A GETATTR changes nothing: given up, the connection stays. */
	call_start(&k, rpc, PFS_OP_GETATTR, 0);
	s = wait_sent(2);
	atomic_store(&dying, true);
	CHECK_EQ(call_end(&k), -EINTR);
	atomic_store(&dying, false);
	pthread_mutex_lock(&stub_lock);
	CHECK_EQ(dropped_gen, 0);
	pthread_mutex_unlock(&stub_lock);

	/* A caller that is not being killed waits on and gets its reply. */
	call_start(&k, rpc, PFS_OP_MKDIR, 0);
	s = wait_sent(3);
	ts.tv_nsec = (KILLABLE_POLL_MS + 100) * 1000000L;
	nanosleep(&ts, NULL);
	reply(rpc, &s, PFS_OP_MKDIR, 0, "ok", 1);
	CHECK_EQ(call_end(&k), 0);
	rpc_reply_free(&k.rep);
	rpc_waiting(rpc, &waiting, &abandoned);
	CHECK_EQ(abandoned, 3); /* the CREATE, the RENAME, the GETATTR */
	rpc_free(rpc);
}

int main(void)
{
	pfs_log_init("test_rpc", PFS_LOG_ERR - 1); /* quiet: errors here are expected */
	test_call_and_reply();
	test_resend_after_reconnect();
	test_soft_timeout();
	test_call_timeout();
	test_closing_and_kill();
	test_bulk_connections();
	test_coded_reply();
	test_killed_caller();
	return check_done("test_rpc");
}
