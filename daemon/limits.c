/* limits.c: the fair-use limits' figures, accounting and per-source
 * table of pending handshakes (see limits_i.h). */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podfs/codec.h"
#include "podfs/xalloc.h"
#include "limits_i.h"

/* fds the daemon needs besides sessions' files at the least: its
 * connections (PFSD_MAX_CONNS), the splice pipes, its own files. */
#define LIM_RESERVE_MIN 1280
/* The bound of a reply that carries no data: attributes, an entry. */
#define LIM_SMALL_REPLY 4096

/* --- figures --- */

struct limkey {
	const char *name;
	size_t off;
	bool is_size; /* a size_t of bytes (K/M/G); else an unsigned count */
	size_t min, max;
};

#define CNT(name, f, min, max) { name, offsetof(struct limits, f), false, min, max }
#define SIZE(name, f, min, max) { name, offsetof(struct limits, f), true, min, max }
static const struct limkey limkeys[] = {
	CNT("open-files", open_files, 1, 1u << 24),
	CNT("lock-owners", lock_owners, 1, 1u << 24),
	CNT("lock-ranges", lock_ranges, 1, 1u << 24),
	CNT("lock-table", lock_table, 1, 1u << 26),
	CNT("requests", requests, 1, 1u << 20),
	CNT("workers", workers, 1, 1024),
	SIZE("client-memory", client_mem, 1u << 20, (size_t)1 << 40),
	SIZE("memory", memory, 1u << 20, (size_t)1 << 40),
	CNT("fd-reserve", fd_reserve, 16, 1u << 24),
	CNT("lingering", lingering, 1, 1u << 20),
	SIZE("reply-cache", reply_cache, 64u << 10, (size_t)1 << 40),
	CNT("preauth", preauth, 1, 1u << 16),
	CNT("preauth-per-source", preauth_per_source, 1, 1u << 16),
	SIZE("peer-table", peer_table, 1u << 20, (size_t)1 << 40),
	CNT("peer-records", peer_records, 1, 1u << 24),
	SIZE("read-queue", read_queue, 64u << 10, (size_t)1 << 30),
	CNT("refusals", refusals, 1, 1u << 24),
};
#define NKEYS (sizeof(limkeys) / sizeof(limkeys[0]))

static int parse_num(const char *s, size_t n, bool is_size, size_t *out)
{
	size_t v = 0, mult = 1, i = 0;

	if (n == 0)
		return -1;
	for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
		if (v > ((size_t)1 << 50))
			return -1;
		v = v * 10 + (size_t)(s[i] - '0');
	}
	if (i == 0)
		return -1;
	if (i < n && is_size) {
		switch (s[i]) {
		case 'k': case 'K': mult = (size_t)1 << 10; break;
		case 'm': case 'M': mult = (size_t)1 << 20; break;
		case 'g': case 'G': mult = (size_t)1 << 30; break;
		default: return -1;
		}
		i++;
	}
	if (i != n || v > ((size_t)1 << 50) / mult)
		return -1;
	*out = v * mult;
	return 0;
}

int limits_parse(struct limits *l, const char *spec, char *err, size_t errlen)
{
	const char *p = spec;

	if (!*p) {
		snprintf(err, errlen, "--limits is empty");
		return -1;
	}
	while (*p) {
		const char *comma = strchr(p, ','), *eq;
		size_t len = comma ? (size_t)(comma - p) : strlen(p), v;
		const struct limkey *k = NULL;

		eq = memchr(p, '=', len);
		if (!eq) {
			snprintf(err, errlen, "--limits: '%.*s' is not key=value", (int)len, p);
			return -1;
		}
		for (size_t i = 0; i < NKEYS; i++)
			if (strlen(limkeys[i].name) == (size_t)(eq - p) &&
			    memcmp(limkeys[i].name, p, (size_t)(eq - p)) == 0)
				k = &limkeys[i];
		if (!k) {
			snprintf(err, errlen, "--limits: unknown key '%.*s'", (int)(eq - p), p);
			return -1;
		}
		if (parse_num(eq + 1, len - (size_t)(eq + 1 - p), k->is_size, &v) < 0 ||
		    v < k->min || v > k->max) {
			snprintf(err, errlen, "--limits: %s wants %s from %zu to %zu, not '%.*s'",
				 k->name, k->is_size ? "a size (K, M, G)" : "a number", k->min,
				 k->max, (int)(len - (size_t)(eq + 1 - p)), eq + 1);
			return -1;
		}
		if (k->is_size)
			*(size_t *)((char *)l + k->off) = v;
		else
			*(unsigned *)((char *)l + k->off) = (unsigned)v;
		p += len;
		if (*p == ',' && !*++p) {
			snprintf(err, errlen, "--limits: trailing comma");
			return -1;
		}
	}
	return 0;
}

static size_t clamp(size_t v, size_t lo, size_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

int limits_defaults(struct limits *l, size_t nofile, size_t ram, size_t hcache_max,
		    unsigned threads, char *err, size_t errlen)
{
	size_t reserve = nofile / 10, need;

	if (reserve < LIM_RESERVE_MIN)
		reserve = LIM_RESERVE_MIN < nofile / 2 ? LIM_RESERVE_MIN : nofile / 2;
	if (!l->fd_reserve)
		l->fd_reserve = (unsigned)reserve;
	need = (size_t)l->fd_reserve + LIM_HCACHE_MIN + 64;
	if (nofile < need) {
		snprintf(err, errlen, "the file descriptor limit %zu leaves no room for clients' "
			 "files beside fd-reserve=%u (raise ulimit -n)", nofile, l->fd_reserve);
		return -1;
	}
	l->nofile = nofile;
	l->fd_budget = nofile - l->fd_reserve - LIM_HCACHE_MIN;
	l->hcache_max = clamp(hcache_max, LIM_HCACHE_MIN, nofile);
	/* One client may hold a quarter of the budget of open files: the
	 * others keep the rest. */
	if (!l->open_files)
		l->open_files = (unsigned)clamp(l->fd_budget / 4, 1, 65536);
	if (!l->lock_owners)
		l->lock_owners = (unsigned)clamp(l->fd_budget / 8, 1, 16384);
	if (!l->memory)
		l->memory = clamp(ram / 8, (size_t)256 << 20, (size_t)2 << 30);
	/* A lock range is a struct file_lock of the kernel's, about 200
	 * bytes that count against no limit of podfsd's: a tenth of the
	 * memory limit's worth in all (1M ranges at 2G), 16,384 per client
	 * (3 MB; a host's SQLite databases hold a few each). */
	if (!l->lock_ranges)
		l->lock_ranges = 16384;
	if (!l->lock_table)
		l->lock_table = (unsigned)clamp(l->memory / 2048, 65536, 1u << 22);
	if (!l->requests)
		l->requests = 256;
	/* A quarter of the workers: a busy host (however many sessions it
	 * opened) leaves the rest to the others' requests, which then
	 * neither wait behind its queue nor share the CPU with many threads
	 * of it. */
	if (!l->workers)
		l->workers = threads >= 8 ? threads / 4 : threads > 1 ? 2 : 1;
	if (!l->client_mem)
		l->client_mem = (size_t)128 << 20;
	if (!l->lingering)
		l->lingering = 4096;
	/* A session keeps its last 1,024 changes' replies, at most about
	 * 400 KB: 128 MiB at the largest memory keep all of a 256-host pod's, and
	 * past it the host keeping the most forgets its oldest (drc_i.h). */
	if (!l->reply_cache)
		l->reply_cache = l->memory / 16;
	if (!l->preauth)
		l->preauth = 256;
	if (!l->preauth_per_source)
		l->preauth_per_source = l->preauth < 32 ? l->preauth : 32;
	/* 64 MiB hold the digests of about 6 TB of 4 MiB chunks; 65,536
	 * records are 256 GiB of them held by one client. */
	if (!l->peer_table)
		l->peer_table = (size_t)64 << 20;
	if (!l->peer_records)
		l->peer_records = 65536;
	if (!l->read_queue)
		l->read_queue = LIM_READ_QUEUE;
	/* A program that meets EMFILE or ENOLCK stops, or retries now and
	 * then: a thousand a second is a loop that ignores them. */
	if (!l->refusals)
		l->refusals = 1000;
	if (l->preauth_per_source > l->preauth) {
		snprintf(err, errlen, "--limits: preauth-per-source=%u is over preauth=%u",
			 l->preauth_per_source, l->preauth);
		return -1;
	}
	return 0;
}

void limits_format(const struct limits *l, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < NKEYS && at < len; i++) {
		const struct limkey *k = &limkeys[i];
		size_t v = k->is_size ? *(const size_t *)((const char *)l + k->off)
				      : *(const unsigned *)((const char *)l + k->off);
		int n;
		if (k->is_size && v % (1u << 20) == 0)
			n = snprintf(buf + at, len - at, "%s%s=%zuM", i ? "," : "", k->name, v >> 20);
		else
			n = snprintf(buf + at, len - at, "%s%s=%zu", i ? "," : "", k->name, v);
		if (n < 0)
			break;
		at += (size_t)n;
	}
}

const char *lim_cap_name(enum lim_cap cap)
{
	switch (cap) {
	case LIM_OPEN_FILES: return "open-files";
	case LIM_LOCK_OWNERS: return "lock-owners";
	case LIM_REQUESTS: return "requests";
	case LIM_CLIENT_MEM: return "client-memory";
	case LIM_MEMORY: return "memory";
	case LIM_FDS: return "fd-reserve";
	case LIM_LOCK_RANGES: return "lock-ranges";
	case LIM_LOCK_TABLE: return "lock-table";
	case LIM_REFUSALS: return "refusals";
	}
	return "?";
}

/* --- accounting --- */

struct lim_acct *lim_acct_new(void)
{
	struct lim_acct *a = xcalloc(1, sizeof(*a));

	a->refs = 1;
	return a;
}

void lim_acct_ref(struct lim_acct *a)
{
	a->refs++;
}

void lim_acct_unref(struct lim_acct *a)
{
	if (a && --a->refs == 0)
		free(a);
}

/* The time one refusal is worth at rate a second (ns; rate 0 as 1). */
static uint64_t pace_step(unsigned rate)
{
	return 1000000000u / (rate ? rate : 1);
}

void lim_pace_note(struct lim_pace *p, uint64_t now, unsigned rate)
{
	p->tat = (p->tat > now ? p->tat : now) + pace_step(rate);
}

uint64_t lim_pace_wait(const struct lim_pace *p, uint64_t now, unsigned rate)
{
	/* A burst of rate refusals: a second's worth ahead of now. */
	uint64_t burst = pace_step(rate) * (rate ? rate : 1);

	return p->tat > now + burst ? p->tat - now - burst : 0;
}

unsigned lim_may_read(const struct limits *l, const struct lim_acct *a, size_t total)
{
	if (!a)
		return 0; /* a handshake: small, and bounded by the preauth caps */
	if (a->inflight >= l->requests)
		return LIM_REQUESTS;
	if (a->mem >= l->client_mem)
		return LIM_CLIENT_MEM;
	if (lim_over_share(l, a, total))
		return LIM_MEMORY;
	return 0;
}

bool lim_over_share(const struct limits *l, const struct lim_acct *a, size_t total)
{
	return a && total >= l->memory && (a->host_mem ? *a->host_mem : a->mem) >= LIM_MIN_SHARE;
}

size_t lim_reply_bound(uint16_t op, uint16_t flags, const uint8_t *payload, size_t len)
{
	struct pfs_read_req m;

	switch (op) {
	case PFS_OP_READ:
		if (!(flags & PFS_FF_CODED) && pfs_dec_read_req(payload, len, &m) == 0)
			return (m.size < PFS_MAX_IO ? m.size : PFS_MAX_IO) + LIM_SMALL_REPLY;
		return PFS_MAX_PAYLOAD;
	case PFS_OP_READDIR:
		return PFS_READDIR_MAX + LIM_SMALL_REPLY;
	case PFS_OP_GETXATTR:
	case PFS_OP_LISTXATTR:
		return PFS_XATTR_SIZE_MAX + LIM_SMALL_REPLY;
	case PFS_OP_READLINK:
		return PFS_PATH_MAX + LIM_SMALL_REPLY;
	case PFS_OP_LISTDIR:
	case PFS_OP_LISTDIR_PAGE:
	case PFS_OP_LISTDIRS:
	case PFS_OP_LOOKUP_DATA:
	case PFS_OP_REVALIDATE:
		return PFS_MAX_PAYLOAD;
	default:
		return LIM_SMALL_REPLY;
	}
}

bool lim_read_may_start(size_t busy, bool others_wait, size_t bound)
{
	return !others_wait && busy < bound;
}

bool lim_fd_take(_Atomic size_t *used, size_t max)
{
	size_t cur = atomic_load_explicit(used, memory_order_relaxed);

	do {
		if (cur >= max)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(used, &cur, cur + 1, memory_order_relaxed,
							memory_order_relaxed));
	return true;
}

void lim_fd_give(_Atomic size_t *used)
{
	atomic_fetch_sub_explicit(used, 1, memory_order_relaxed);
}

size_t lim_hcache_room(const struct limits *l, size_t used)
{
	size_t taken = (size_t)l->fd_reserve + used;
	size_t room = l->nofile > taken ? l->nofile - taken : 0;

	return clamp(room, LIM_HCACHE_MIN, l->hcache_max);
}

/* --- pending handshakes per source --- */

void srcq_init(struct srcq *q)
{
	memset(q, 0, sizeof(*q));
}

void srcq_fini(struct srcq *q)
{
	free(q->v);
	memset(q, 0, sizeof(*q));
}

static struct srcq_ent *srcq_find(const struct srcq *q, const struct pfs_srckey *k)
{
	for (size_t i = 0; i < q->n; i++)
		if (pfs_srckey_eq(&q->v[i].k, k))
			return &q->v[i];
	return NULL;
}

unsigned srcq_count(const struct srcq *q, const struct pfs_srckey *k)
{
	const struct srcq_ent *e = srcq_find(q, k);

	return e ? e->n : 0;
}

unsigned srcq_add(struct srcq *q, const struct pfs_srckey *k)
{
	struct srcq_ent *e = srcq_find(q, k);

	if (e)
		return ++e->n;
	if (q->n == q->cap) {
		size_t cap = q->cap ? q->cap * 2 : 16;
		struct srcq_ent *v = xcalloc(cap, sizeof(*v));
		if (q->n)
			memcpy(v, q->v, q->n * sizeof(*v));
		free(q->v);
		q->v = v;
		q->cap = cap;
	}
	e = &q->v[q->n++];
	e->k = *k;
	e->n = 1;
	return 1;
}

void srcq_del(struct srcq *q, const struct pfs_srckey *k)
{
	struct srcq_ent *e = srcq_find(q, k);

	if (!e)
		return;
	if (--e->n == 0)
		*e = q->v[--q->n];
}

bool srcq_busiest(const struct srcq *q, struct pfs_srckey *out)
{
	const struct srcq_ent *best = NULL;

	for (size_t i = 0; i < q->n; i++)
		if (!best || q->v[i].n > best->n)
			best = &q->v[i];
	if (best)
		*out = best->k;
	return best != NULL;
}
