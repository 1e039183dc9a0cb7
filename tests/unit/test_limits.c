/* test_limits.c: podfsd's fair-use limits (daemon/limits.c).
 *
 * --limits parsing (sizes, ranges, bad input), the defaults sized from
 * the fd limit and memory, the read check of a session and of the
 * daemon, the bound on a request's reply, the fd budget under threads
 * racing for it, the handle cache's room, and the per-source table of
 * pending handshakes (IPv4, IPv6 /64, the busiest source) against a
 * model.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>

#include "check.h"
#include "podfs/codec.h"
#include "limits_i.h"

static void test_parse(void)
{
	struct limits l = { 0 };
	char err[256];

	CHECK_EQ(limits_parse(&l, "open-files=100,lock-owners=7,requests=64,workers=3,client-memory=32M,"
			      "memory=1G,fd-reserve=500,lingering=10,preauth=50,"
			      "preauth-per-source=4", err, sizeof(err)), 0);
	CHECK_EQ(l.open_files, 100);
	CHECK_EQ(l.lock_owners, 7);
	CHECK_EQ(l.requests, 64);
	CHECK_EQ(l.workers, 3);
	CHECK_EQ(l.client_mem, (size_t)32 << 20);
	CHECK_EQ(l.memory, (size_t)1 << 30);
	CHECK_EQ(l.fd_reserve, 500);
	CHECK_EQ(l.lingering, 10);
	CHECK_EQ(l.preauth, 50);
	CHECK_EQ(l.preauth_per_source, 4);
	CHECK_EQ(limits_parse(&l, "client-memory=2048k", err, sizeof(err)), 0);
	CHECK_EQ(l.client_mem, (size_t)2 << 20);
	CHECK_EQ(limits_parse(&l, "memory=1048576", err, sizeof(err)), 0);
	CHECK_EQ(l.memory, (size_t)1 << 20);
	CHECK_EQ(limits_parse(&l, "read-queue=512K", err, sizeof(err)), 0);
	CHECK_EQ(l.read_queue, (size_t)512 << 10);
	CHECK_EQ(limits_parse(&l, "refusals=250", err, sizeof(err)), 0);
	CHECK_EQ(l.refusals, 250);
	CHECK_EQ(limits_parse(&l, "refusals=0", err, sizeof(err)), -1);
	CHECK_EQ(limits_parse(&l, "lock-ranges=100,lock-table=5000", err, sizeof(err)), 0);
	CHECK_EQ(l.lock_ranges, 100);
	CHECK_EQ(l.lock_table, 5000);

	static const char *const bad[] = {
		"", "open-files", "open-files=", "open-files=0", "open-files=-1", "open-files=1x",
		"open-files=1M", "nope=1", "open-files=1,", ",open-files=1", "memory=1T",
		"memory=1K", "memory=M", "client-memory=99999999999999999999G", "requests=2000000",
		"=5", "open-files=1,,requests=2", "preauth=0", "fd-reserve=1", "read-queue=1K",
		"read-queue=2G", "lock-ranges=0", "lock-table=0", "lock-ranges=1K",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct limits b = { 0 };
		err[0] = '\0';
		CHECK_EQ(limits_parse(&b, bad[i], err, sizeof(err)), -1);
		CHECK(err[0] != '\0');
		CHECK(strchr(err, '\n') == NULL);
	}
}

static void test_defaults(void)
{
	struct limits l = { 0 };
	char err[256], buf[512];

	/* A server's usual fd limit: the caps are generous. */
	CHECK_EQ(limits_defaults(&l, 524288, (size_t)64 << 30, 16384, 16, err, sizeof(err)), 0);
	CHECK_EQ(l.open_files, 65536);
	CHECK_EQ(l.lock_owners, 16384);
	CHECK_EQ(l.workers, 4); /* of 16 threads */
	CHECK_EQ(l.fd_reserve, 52428);
	CHECK_EQ(l.fd_budget, 524288 - 52428 - LIM_HCACHE_MIN);
	CHECK_EQ(l.memory, (size_t)2 << 30);
	CHECK_EQ(l.read_queue, LIM_READ_QUEUE);
	CHECK_EQ(l.refusals, 1000);
	CHECK_EQ(l.lock_ranges, 16384);
	CHECK_EQ(l.lock_table, 1u << 20); /* a tenth of memory=2G at ~200 bytes each */
	CHECK(l.lock_ranges >= LIM_LOCK_MIN_SHARE);
	CHECK(l.client_mem >= (size_t)64 << 20);
	CHECK(l.requests >= 256);
	CHECK(l.preauth_per_source <= l.preauth);
	limits_format(&l, buf, sizeof(buf));
	CHECK(strstr(buf, "open-files=65536,") != NULL);
	CHECK(strstr(buf, "memory=2048M") != NULL);
	/* The format parses back to the same figures. */
	struct limits back = { 0 };
	CHECK_EQ(limits_parse(&back, buf, err, sizeof(err)), 0);
	CHECK_EQ(back.open_files, l.open_files);
	CHECK_EQ(back.client_mem, l.client_mem);
	CHECK_EQ(back.preauth_per_source, l.preauth_per_source);
	CHECK_EQ(back.lock_ranges, l.lock_ranges);
	CHECK_EQ(back.lock_table, l.lock_table);

	/* A small fd limit: the reserve covers the connections, one client
	 * gets a quarter of the rest. */
	memset(&l, 0, sizeof(l));
	CHECK_EQ(limits_defaults(&l, 4096, (size_t)1 << 30, 256, 16, err, sizeof(err)), 0);
	CHECK_EQ(l.fd_reserve, 1280);
	CHECK_EQ(l.fd_budget, 4096 - 1280 - LIM_HCACHE_MIN);
	CHECK_EQ(l.open_files, (4096 - 1280 - LIM_HCACHE_MIN) / 4);
	CHECK_EQ(l.memory, (size_t)256 << 20); /* at least */
	CHECK_EQ(l.lock_table, 131072);
	memset(&l, 0, sizeof(l));
	CHECK_EQ(limits_defaults(&l, 4096, (size_t)1 << 30, 256, 1, err, sizeof(err)), 0);
	CHECK_EQ(l.workers, 1);

	/* Given figures stay. */
	memset(&l, 0, sizeof(l));
	l.open_files = 3;
	l.fd_reserve = 100;
	CHECK_EQ(limits_defaults(&l, 4096, (size_t)1 << 30, 256, 16, err, sizeof(err)), 0);
	CHECK_EQ(l.open_files, 3);
	CHECK_EQ(l.fd_budget, 4096 - 100 - LIM_HCACHE_MIN);

	/* A reserve that leaves nothing, and a per-source quota over the
	 * total: refused with a reason. */
	memset(&l, 0, sizeof(l));
	l.fd_reserve = 4000;
	CHECK_EQ(limits_defaults(&l, 4096, (size_t)1 << 30, 256, 16, err, sizeof(err)), -1);
	CHECK(strstr(err, "fd-reserve") != NULL);
	memset(&l, 0, sizeof(l));
	l.preauth = 4;
	l.preauth_per_source = 5;
	CHECK_EQ(limits_defaults(&l, 4096, (size_t)1 << 30, 256, 16, err, sizeof(err)), -1);
	memset(&l, 0, sizeof(l));
	l.preauth = 4;
	CHECK_EQ(limits_defaults(&l, 4096, (size_t)1 << 30, 256, 16, err, sizeof(err)), 0);
	CHECK_EQ(l.preauth_per_source, 4);
}

static void test_may_read(void)
{
	struct limits l = { .requests = 4, .client_mem = 100u << 20, .memory = 200u << 20 };
	struct lim_acct *a = lim_acct_new();

	CHECK_EQ(lim_may_read(&l, NULL, (size_t)1 << 40), 0); /* handshakes always */
	CHECK_EQ(lim_may_read(&l, a, 0), 0);
	a->inflight = 4;
	CHECK_EQ(lim_may_read(&l, a, 0), LIM_REQUESTS);
	a->inflight = 3;
	a->mem = 100u << 20;
	CHECK_EQ(lim_may_read(&l, a, 0), LIM_CLIENT_MEM);
	/* Over the daemon's memory, a session past its minimum share
	 * waits; one under it goes on. */
	a->mem = LIM_MIN_SHARE;
	CHECK_EQ(lim_may_read(&l, a, 200u << 20), LIM_MEMORY);
	CHECK_EQ(lim_may_read(&l, a, (200u << 20) - 1), 0);
	a->mem = LIM_MIN_SHARE - 1;
	CHECK_EQ(lim_may_read(&l, a, 500u << 20), 0);
	/* The share is its host's: what the host's other sessions hold
	 * counts, and a session under it waits once they hold it. */
	size_t host = LIM_MIN_SHARE;
	a->host_mem = &host;
	a->mem = 0;
	CHECK_EQ(lim_may_read(&l, a, 200u << 20), LIM_MEMORY);
	CHECK_EQ(lim_may_read(&l, a, (200u << 20) - 1), 0);
	host = LIM_MIN_SHARE - 1;
	CHECK_EQ(lim_may_read(&l, a, 500u << 20), 0);
	a->host_mem = NULL; /* its session ended: its own bytes count */
	a->mem = LIM_MIN_SHARE;
	CHECK_EQ(lim_may_read(&l, a, 200u << 20), LIM_MEMORY);
	/* The same test holds back its paced READs (pace.c). */
	CHECK(lim_over_share(&l, a, 200u << 20));
	CHECK(!lim_over_share(&l, a, (200u << 20) - 1));
	CHECK(!lim_over_share(&l, NULL, (size_t)1 << 40));
	a->host_mem = &host;
	host = LIM_MIN_SHARE - 1;
	CHECK(!lim_over_share(&l, a, 500u << 20));
	a->host_mem = NULL;
	a->mem = 0;

	lim_acct_ref(a);
	lim_acct_unref(a);
	CHECK_EQ(a->refs, 1);
	lim_acct_unref(a); /* freed: the sanitizer build checks */
	lim_acct_unref(NULL);

	CHECK_STR(lim_cap_name(LIM_OPEN_FILES), "open-files");
	CHECK_STR(lim_cap_name(LIM_CLIENT_MEM), "client-memory");
}

/* The pace of refusals: a burst of a second's worth at once, then one
 * per 1/rate; an idle while earns the burst back, never more. Against
 * a model that counts the refusals let through in every window. */
static void test_pace(void)
{
	const uint64_t s = 1000000000u;
	struct lim_pace p = { 0 };
	uint64_t now = 5 * s, n = 0;

	/* A burst of 100 at once (rate 100), then none. */
	while (!lim_pace_wait(&p, now, 100)) {
		lim_pace_note(&p, now, 100);
		n++;
		CHECK(n <= 101);
	}
	CHECK_EQ(n, 101); /* the burst, and the one on time now */
	/* The wait is until the next is on time: 10 ms. */
	CHECK_EQ(lim_pace_wait(&p, now, 100), s / 100);
	CHECK_EQ(lim_pace_wait(&p, now + s / 100, 100), 0);
	/* A client that sends whenever allowed for 10 s gets 100 a second. */
	n = 0;
	for (uint64_t t = now; t < now + 10 * s; t += s / 1000) {
		while (!lim_pace_wait(&p, t, 100)) {
			lim_pace_note(&p, t, 100);
			n++;
		}
	}
	CHECK(n >= 999 && n <= 1001);
	/* Idle for an hour: the burst again, not an hour's worth. */
	now += 3600 * s;
	n = 0;
	while (!lim_pace_wait(&p, now, 100)) {
		lim_pace_note(&p, now, 100);
		n++;
		CHECK(n <= 101);
	}
	CHECK_EQ(n, 101);
	/* Refusals noted while waiting (requests read before the wait)
	 * push the wait out: each is paid for. */
	uint64_t w = lim_pace_wait(&p, now, 100);
	lim_pace_note(&p, now, 100);
	lim_pace_note(&p, now, 100);
	CHECK_EQ(lim_pace_wait(&p, now, 100), w + 2 * (s / 100));
}

static void test_read_may_start(void)
{
	/* Nothing busy: a READ starts, whatever the bound. */
	CHECK(lim_read_may_start(0, false, 64 << 10));
	/* Below the bound it starts (and may pass it by its own size);
	 * at or over it, it waits. */
	CHECK(lim_read_may_start((2u << 20) - 1, false, 2u << 20));
	CHECK(!lim_read_may_start(2u << 20, false, 2u << 20));
	CHECK(!lim_read_may_start(5u << 20, false, 2u << 20));
	/* Behind waiting READs, never: they go first, in order. */
	CHECK(!lim_read_may_start(0, true, 2u << 20));
}

static void test_reply_bound(void)
{
	uint8_t buf[512];
	struct pfs_wr w;
	struct pfs_read_req m;

	memset(&m, 0, sizeof(m));
	m.fh.len = 16;
	m.size = 12345;
	pfs_wr_init(&w, buf, sizeof(buf));
	CHECK_EQ(pfs_enc_read_req(&w, &m), 0);
	size_t b = lim_reply_bound(PFS_OP_READ, 0, buf, w.len);
	CHECK(b >= 12345 && b <= 12345 + 8192);
	/* Asking for more than a READ can give counts as the most. */
	m.size = 0xffffffffu;
	pfs_wr_init(&w, buf, sizeof(buf));
	CHECK_EQ(pfs_enc_read_req(&w, &m), 0);
	b = lim_reply_bound(PFS_OP_READ, 0, buf, w.len);
	CHECK(b >= PFS_MAX_IO && b <= PFS_MAX_PAYLOAD);
	/* Coded or malformed: the most. */
	CHECK_EQ(lim_reply_bound(PFS_OP_READ, PFS_FF_CODED, buf, w.len), PFS_MAX_PAYLOAD);
	CHECK_EQ(lim_reply_bound(PFS_OP_READ, 0, buf, 3), PFS_MAX_PAYLOAD);
	CHECK(lim_reply_bound(PFS_OP_READDIR, 0, NULL, 0) >= PFS_READDIR_MAX);
	CHECK(lim_reply_bound(PFS_OP_GETXATTR, 0, NULL, 0) >= PFS_XATTR_SIZE_MAX);
	CHECK(lim_reply_bound(PFS_OP_LISTDIR, 0, NULL, 0) >= PFS_MAX_IO);
	CHECK(lim_reply_bound(PFS_OP_LISTDIRS, 0, NULL, 0) >= PFS_MAX_IO);
	CHECK(lim_reply_bound(PFS_OP_LISTDIR_PAGE, 0, NULL, 0) >= PFS_MAX_IO);
	CHECK(lim_reply_bound(PFS_OP_READLINK, 0, NULL, 0) >= PFS_PATH_MAX);
	CHECK(lim_reply_bound(PFS_OP_GETATTR, 0, NULL, 0) >= 1024);
	CHECK(lim_reply_bound(PFS_OP_GETATTR, 0, NULL, 0) < 65536);
}

#define FD_THREADS 8
#define FD_TRIES 20000
#define FD_MAX 1000

static _Atomic size_t fd_used;
static _Atomic size_t fd_got;

static void *fd_worker(void *arg)
{
	for (int i = 0; i < FD_TRIES; i++) {
		if (lim_fd_take(&fd_used, FD_MAX)) {
			CHECK(atomic_load(&fd_used) <= FD_MAX);
			atomic_fetch_add(&fd_got, 1);
			if (i % 3 == 0)
				lim_fd_give(&fd_used);
		}
	}
	return arg;
}

static void test_fds(void)
{
	pthread_t t[FD_THREADS];
	struct limits l = { 0 };
	char err[256];

	for (int i = 0; i < FD_THREADS; i++)
		pthread_create(&t[i], NULL, fd_worker, NULL);
	for (int i = 0; i < FD_THREADS; i++)
		pthread_join(t[i], NULL);
	/* Never past the budget, and it filled up exactly. */
	CHECK_EQ(atomic_load(&fd_used), FD_MAX);
	CHECK(atomic_load(&fd_got) > FD_MAX);

	CHECK_EQ(limits_defaults(&l, 20000, (size_t)1 << 30, 7952, 16, err, sizeof(err)), 0);
	CHECK_EQ(lim_hcache_room(&l, 0), 7952);
	CHECK_EQ(lim_hcache_room(&l, 20000 - l.fd_reserve - 1000), 1000);
	CHECK_EQ(lim_hcache_room(&l, l.fd_budget), LIM_HCACHE_MIN);
	CHECK_EQ(lim_hcache_room(&l, 1u << 30), LIM_HCACHE_MIN);
}

static void v4(struct sockaddr_storage *ss, const char *a)
{
	struct sockaddr_in *s = (struct sockaddr_in *)ss;

	memset(ss, 0, sizeof(*ss));
	s->sin_family = AF_INET;
	s->sin_port = htons(1234);
	inet_pton(AF_INET, a, &s->sin_addr);
}

static void v6(struct sockaddr_storage *ss, const char *a)
{
	struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	s->sin6_family = AF_INET6;
	s->sin6_port = htons(99);
	inet_pton(AF_INET6, a, &s->sin6_addr);
}

typedef void keyfn(const struct sockaddr_storage *, struct pfs_srckey *);

/* Whether the addresses x and y (IPv6 if they hold a ':') have the same
 * key under key. */
static bool same_key(keyfn *key, const char *x, const char *y)
{
	struct sockaddr_storage a, b;
	struct pfs_srckey ka, kb;

	strchr(x, ':') ? v6(&a, x) : v4(&a, x);
	strchr(y, ':') ? v6(&b, y) : v4(&b, y);
	key(&a, &ka);
	key(&b, &kb);
	return pfs_srckey_eq(&ka, &kb);
}

static void test_srckey(void)
{
	struct sockaddr_storage a, b;
	struct pfs_srckey ka, kb;

	v4(&a, "10.0.0.1");
	v4(&b, "10.0.0.1");
	((struct sockaddr_in *)&b)->sin_port = htons(5);
	pfs_srckey_of(&a, &ka);
	pfs_srckey_of(&b, &kb);
	CHECK(pfs_srckey_eq(&ka, &kb)); /* the port does not matter */
	CHECK(!same_key(pfs_srckey_of, "10.0.0.1", "10.0.0.2"));
	/* IPv4-mapped IPv6 is the IPv4 address. */
	CHECK(same_key(pfs_srckey_of, "10.0.0.1", "::ffff:10.0.0.1"));
	/* One IPv6 /64 is one source; another /64 another. */
	CHECK(same_key(pfs_srckey_of, "2001:db8:1:2::1", "2001:db8:1:2:ffff:eeee:dddd:cccc"));
	CHECK(!same_key(pfs_srckey_of, "2001:db8:1:2::1", "2001:db8:1:3::1"));
	/* A host is all of its IPv6 address; IPv4 and IPv4-mapped agree. */
	CHECK(!same_key(pfs_hostkey_of, "2001:db8:1:2::1", "2001:db8:1:2:ffff:eeee:dddd:cccc"));
	CHECK(same_key(pfs_hostkey_of, "2001:db8:1:2::1", "2001:db8:1:2::1"));
	CHECK(same_key(pfs_hostkey_of, "10.0.0.1", "::ffff:10.0.0.1"));
}

#define MODEL_SRCS 40

static void test_srcq(void)
{
	struct srcq q;
	struct pfs_srckey k[MODEL_SRCS], best;
	unsigned model[MODEL_SRCS] = { 0 };
	uint64_t rnd = 7;

	for (int i = 0; i < MODEL_SRCS; i++) {
		struct sockaddr_storage ss;
		char a[32];
		snprintf(a, sizeof(a), "192.168.%d.%d", i / 7, i);
		v4(&ss, a);
		pfs_srckey_of(&ss, &k[i]);
	}
	srcq_init(&q);
	CHECK(!srcq_busiest(&q, &best));
	CHECK_EQ(srcq_count(&q, &k[0]), 0);
	srcq_del(&q, &k[0]); /* unknown: nothing */
	CHECK_EQ(q.n, 0);
	CHECK_EQ(srcq_add(&q, &k[0]), 1);
	CHECK_EQ(srcq_add(&q, &k[0]), 2);
	CHECK_EQ(srcq_add(&q, &k[1]), 1);
	CHECK(srcq_busiest(&q, &best));
	CHECK(pfs_srckey_eq(&best, &k[0]));
	srcq_del(&q, &k[0]);
	srcq_del(&q, &k[0]);
	CHECK_EQ(srcq_count(&q, &k[0]), 0);
	CHECK_EQ(q.n, 1); /* an emptied source leaves the table */
	srcq_del(&q, &k[1]);
	CHECK_EQ(q.n, 0);

	/* A random mix against a model (the table grows past its first
	 * allocation). */
	for (int step = 0; step < 20000; step++) {
		int i = (int)(test_rand(&rnd) % MODEL_SRCS);
		if (test_rand(&rnd) % 3 && model[i] < 50) {
			CHECK_EQ(srcq_add(&q, &k[i]), ++model[i]);
		} else if (model[i]) {
			srcq_del(&q, &k[i]);
			model[i]--;
		}
		if (step % 97 == 0) {
			unsigned max = 0, nz = 0;
			for (int j = 0; j < MODEL_SRCS; j++) {
				CHECK_EQ(srcq_count(&q, &k[j]), model[j]);
				max = model[j] > max ? model[j] : max;
				nz += model[j] != 0;
			}
			CHECK_EQ(q.n, nz);
			CHECK_EQ(srcq_busiest(&q, &best), max > 0);
			if (max)
				CHECK_EQ(srcq_count(&q, &best), max);
		}
	}
	srcq_fini(&q);
}

int main(void)
{
	test_parse();
	test_defaults();
	test_may_read();
	test_pace();
	test_read_may_start();
	test_reply_bound();
	test_fds();
	test_srckey();
	test_srcq();
	return check_done("test_limits");
}
