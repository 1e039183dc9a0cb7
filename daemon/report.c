/* report.c: what podfsd status and the metrics endpoint answer, built on
 * the loop thread from the daemon's counters (see observe_i.h). */
#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "deleg_i.h"
#include "podfs/netaddr.h"
#include "podfs/prom.h"
#include "chunks_i.h"
#include "conn_i.h"
#include "lockstate_i.h"
#include "revalhold_i.h"
#include "observe_i.h"
#include "interest_i.h"
#include "lscache_i.h"
#include "pfsd_i.h"
#include "session_i.h"

#define LOCKS_LISTED_MAX 4096 /* locks status -v lists */

/* Clients whose acknowledgements no change waits for now (push.c). */
static unsigned clients_behind(struct pfsd *d)
{
	const struct conn *c;
	unsigned n = 0;

	LIST_FOREACH(c, &d->conns, link)
		n += c->st == CS_READY && !c->closing && c->behind;
	return n;
}

/* A growing text buffer. */
struct sbuf {
	char *b;
	size_t len, cap;
};

__attribute__((format(printf, 2, 3))) static void sb_printf(struct sbuf *sb, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(sb->b + sb->len, sb->cap - sb->len, fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if ((size_t)n < sb->cap - sb->len)
			break;
		size_t cap = (sb->cap + (size_t)n + 1) * 2;
		char *b = xmalloc(cap);
		memcpy(b, sb->b, sb->len + 1);
		free(sb->b);
		sb->b = b;
		sb->cap = cap;
	}
	sb->len += (size_t)n;
}

/* s as one word of a "key value" line: bytes that would end it (space,
 * control bytes) or be read as syntax ('%', '=') as %XX. */
static void sb_word(struct sbuf *sb, const char *s)
{
	if (!*s)
		sb_printf(sb, "-");
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p <= 0x20 || *p == 0x7f || *p == '%' || *p == '=')
			sb_printf(sb, "%%%02X", *p);
		else
			sb_printf(sb, "%c", *p);
	}
}

/* The traffic of s: its closed connections' and its open ones'. */
static void sess_traffic(struct pfsd *d, struct session *s, struct traffic *t, unsigned *nconns)
{
	struct conn *c;

	*t = s->tr_closed;
	*nconns = 0;
	LIST_FOREACH(c, &d->conns, link) {
		if (c->sess != s)
			continue;
		t->wire_in += c->tr.wire_in;
		t->raw_in += c->tr.raw_in;
		t->wire_out += c->tr.wire_out;
		t->raw_out += c->tr.raw_out;
		(*nconns)++;
	}
}

/* Bytes of frames queued on s's connections (or all connections: s
 * NULL) and still held (conn_queued), and their READs paced (pace_i.h). */
static void sum_queued(struct pfsd *d, const struct session *s, size_t *queued,
		       unsigned *paced)
{
	const struct conn *c;

	*queued = 0;
	*paced = 0;
	LIST_FOREACH(c, &d->conns, link) {
		if (s && c->sess != s)
			continue;
		*queued += conn_queued(c);
		*paced += c->npaced;
	}
}

static uint64_t sum_req(const uint64_t req[PFS_OP_MAX])
{
	uint64_t n = 0;

	for (unsigned op = 0; op < PFS_OP_MAX; op++)
		n += req[op];
	return n;
}

/* The address (without the port) s is connected from, or "-". */
static void sess_addr(struct session *s, char *buf, size_t len, bool port)
{
	if (!s->conn)
		snprintf(buf, len, "-");
	else if (port)
		snprintf(buf, len, "%s", s->conn->peer);
	else
		pfs_addr_host(&s->conn->addr, buf, len);
}

/* Open files, lock owners and their byte ranges of s, each -1 if its
 * table is busy: the loop never waits for a worker (they hold these
 * mutexes only around system calls that do not block, but a lock's open
 * can take a disk's time). */
static void sess_tables(struct session *s, long *fids, long *locks, long *ranges)
{
	*fids = *locks = *ranges = -1;
	if (pthread_mutex_trylock(&s->mu) == 0) {
		*fids = s->nfids;
		pthread_mutex_unlock(&s->mu);
	}
	if (pthread_mutex_trylock(&s->lk_mu) == 0) {
		*locks = s->nlocks;
		*ranges = (long)s->nranges;
		pthread_mutex_unlock(&s->lk_mu);
	}
}

static void limits_word(unsigned bits, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = 0;
	for (unsigned b = 0; b < LIM_NCAPS; b++)
		if (bits & (1u << b))
			n += (size_t)snprintf(buf + n, n < len ? len - n : 0, "%s%s", n ? "," : "",
					      lim_cap_name((enum lim_cap)(1u << b)));
	if (!buf[0])
		snprintf(buf, len, "-");
}

static unsigned sess_limits(struct session *s)
{
	return s->acct->logged | atomic_load_explicit(&s->hits, memory_order_relaxed);
}

/* The kernel's record of the locks on lock fd fd (/proc/self/fdinfo):
 * one "lock" line each. */
static void sb_locks_of(struct sbuf *sb, struct session *s, const struct lockent *l,
			const char *addr, unsigned *listed)
{
	char p[64], path[PATH_MAX], line[256];
	ssize_t n;
	FILE *f;

	snprintf(p, sizeof(p), "/proc/self/fd/%d", l->fd);
	n = readlink(p, path, sizeof(path) - 1);
	path[n > 0 ? n : 0] = 0;
	snprintf(p, sizeof(p), "/proc/self/fdinfo/%d", l->fd);
	if (!(f = fopen(p, "re")))
		return;
	while (*listed < LOCKS_LISTED_MAX && fgets(line, sizeof(line), f)) {
		char kind[16], adv[16], rw[16], start[24], end[24];
		if (strncmp(line, "lock:", 5) != 0)
			continue;
		/* "lock:\t1: OFDLCK  ADVISORY  WRITE -1 08:01:1234 0 EOF" */
		char *q = strchr(line + 5, ':');
		if (!q || sscanf(q + 1, "%15s %15s %15s %*s %*s %23s %23s", kind, adv, rw, start,
				 end) != 5)
			continue;
		sb_printf(sb, "lock client=%016" PRIx64 " addr=%s host=", s->client_id, addr);
		sb_word(sb, s->host);
		sb_printf(sb, " owner=%016" PRIx64 " kind=%s type=%s start=%s end=%s file=",
			  l->owner, l->flock ? "flock" : "posix", rw, start, end);
		sb_word(sb, path);
		sb_printf(sb, "\n");
		(*listed)++;
	}
	fclose(f);
}

size_t report_status(struct pfsd *d, bool verbose, char **out)
{
	struct sbuf sb = { .b = xmalloc(16384), .cap = 16384 };
	struct lockstate_info li;
	struct traffic tr;
	size_t pos = 0;
	struct hnode *n;
	unsigned nlive = 0, listed = 0;
	uint64_t nlocks = 0;
	char addr[80], lim[128];

	lockstate_info(d->ls, &li);
	for (n = htab_iter(&d->sessions, &pos, NULL); n; n = htab_iter(&d->sessions, &pos, n))
		nlive++;
	/* The allocator's view of the heap, all arenas: what the daemon
	 * holds in memory (RSS) beside what its accounting counts. */
	struct mallinfo2 mi = mallinfo2();
	size_t queued;
	unsigned paced;
	sum_queued(d, NULL, &queued, &paced);
	sb_printf(&sb, "version %s\npid %d\nexport ", PODFS_VERSION, (int)getpid());
	sb_word(&sb, d->o.export_dir);
	struct sockaddr_storage la = d->listen_addr;
	if (la.ss_family == AF_INET6)
		((struct sockaddr_in6 *)&la)->sin6_port = htons((uint16_t)d->port);
	else
		((struct sockaddr_in *)&la)->sin_port = htons((uint16_t)d->port);
	pfs_addr_name(&la, addr, sizeof(addr));
	sb_printf(&sb, "\nread_only %d\nlisten %s\nport %d\nmetrics %s\ncontrol ", d->o.ro,
		  addr, d->port, observe_metrics_name(d));
	sb_word(&sb, observe_ctl_name(d));
	sb_printf(&sb,
		  "\nstarted %" PRId64 "\nnow %" PRId64 "\nboot_id %016" PRIx64 "\n"
		  "grace %d\ngrace_until %" PRId64 "\ngrace_unknown %d\ngrace_expected %zu\n"
		  "grace_reclaimed %zu\nlocks_reclaimed %" PRIu64 "\nlocks_lost %" PRIu64 "\n"
		  "lock_holders %zu\n",
		  d->started, (int64_t)time(NULL), d->boot_id, li.grace, li.grace_until,
		  li.unknown, li.expected, li.reclaimed, li.locks_reclaimed, li.locks_lost,
		  li.holders);
	struct revalhold_info ri;
	revalhold_info(d->rh, &ri);
	sb_printf(&sb,
		  "reval_hold %d\nreval_hold_until %" PRId64 "\nreval_expected %zu\n"
		  "reval_back %zu\nreval_held_ms %" PRIu64 "\n",
		  ri.active, ri.until, ri.expected, ri.revalidated, ri.held_ms);
	sb_printf(&sb,
		  "sessions %u\nlingering %u\nconns %u\npreauth %u\naccepted %" PRIu64 "\n"
		  "mem %zu\nmem_max %zu\nfds %zu\nfd_budget %zu\n"
		  "wire_in %" PRIu64 "\nraw_in %" PRIu64 "\nwire_out %" PRIu64 "\nraw_out %" PRIu64
		  "\nspliced %" PRIu64 "\ndirect %" PRIu64 "\npushes %" PRIu64 "\nloop_reads %" PRIu64
		  "\nwatch_own %" PRIu64 "\n",
		  nlive, d->nlingering, d->nconns, d->npreauth, d->accepted, d->mem, d->lim.memory,
		  atomic_load(&d->fds), d->lim.fd_budget, d->wire_in, d->raw_in, d->wire_out,
		  d->raw_out, d->spliced, atomic_load(&d->direct), d->st_pushes, d->st_loop_reads,
		  d->st_watch_own);
	sb_printf(&sb, "queued %zu\npaced %u\nread_queue %zu\nheap_used %zu\nheap_free %zu\n"
		  "heap_mapped %zu\n", queued, paced, d->lim.read_queue, mi.uordblks + mi.hblkhd,
		  mi.fordblks, mi.hblkhd);
	size_t iobjs, ibytes;
	interest_stats(d->it, &iobjs, &ibytes);
	sb_printf(&sb, "interest_objects %zu\ninterest_bytes %zu\nslotless %u\n", iobjs, ibytes,
		  d->nslotless);
	if (d->lc) {
		struct lscache_stats ls;
		lscache_stats(d->lc, &ls);
		sb_printf(&sb,
			  "listings_kept %zu\nlistings_kept_bytes %zu\nlistings_kept_max %u\n"
			  "listings_served %" PRIu64 "\nlistings_built %" PRIu64 "\n",
			  ls.entries, ls.bytes, LSCACHE_BYTES, ls.hits, ls.misses);
	}
	if (d->chunks) {
		struct chunks_stats cs;
		chunks_stats(d->chunks, &cs);
		sb_printf(&sb,
			  "peer_files %" PRIu64 "\npeer_table_bytes %" PRIu64 "\npeer_table_max %zu\n"
			  "peer_records %" PRIu64 "\npeer_peers %" PRIu64 "\npeer_digests %" PRIu64
			  "\npeer_digest_bytes %" PRIu64 "\npeer_to_server %" PRIu64
			  "\npeer_to_peer %" PRIu64 "\npeer_held %" PRIu64 "\npeer_reports_have %" PRIu64
			  "\npeer_reports_bad %" PRIu64 "\npeer_drops %" PRIu64 "\npeer_evictions %" PRIu64
			  "\n",
			  cs.files, cs.bytes, d->lim.peer_table, cs.records, cs.peers, cs.digests,
			  cs.digest_bytes, cs.to_server, cs.to_peer, cs.held, cs.reports_have,
			  cs.reports_bad, cs.drops, cs.evictions);
	}
	sb_printf(&sb,
		  "ack_timeout %u\nack_misses %" PRIu64 "\nack_cutoffs %" PRIu64
		  "\nack_extended %" PRIu64 "\nclients_behind %u\nrights_forewarned %" PRIu64 "\n",
		  d->o.ack_timeout, d->st_ack_misses, d->st_ack_cutoffs, d->st_ack_extended,
		  clients_behind(d), d->st_forewarns);
	if (d->deleg) {
		size_t held, revoked;
		deleg_counts(d->deleg, &held, &revoked);
		sb_printf(&sb,
			  "delegations %zu\ndelegations_revoked %zu\ndeleg_recalls %" PRIu64
			  "\ndeleg_revocations %" PRIu64 "\ndeleg_recalls_beside %" PRIu64 "\n",
			  held, revoked, d->st_recalls, d->st_revoked, d->st_recalls_beside);
	}
	for (unsigned op = 0; op < PFS_OP_MAX; op++)
		if (d->st_req[op])
			sb_printf(&sb, "req_%s %" PRIu64 "\n", pfs_op_name(op), d->st_req[op]);
	/* The clients: one line each, "client key=value...". */
	pos = 0;
	for (n = htab_iter(&d->sessions, &pos, NULL); n; n = htab_iter(&d->sessions, &pos, n)) {
		struct session *s = container_of(n, struct session, hn);
		unsigned nconns;
		long fids, locks, ranges;
		sess_traffic(d, s, &tr, &nconns);
		sess_tables(s, &fids, &locks, &ranges);
		sum_queued(d, s, &queued, &paced);
		sess_addr(s, addr, sizeof(addr), true);
		limits_word(sess_limits(s), lim, sizeof(lim));
		if (locks > 0)
			nlocks += (uint64_t)locks;
		sb_printf(&sb, "client id=%016" PRIx64 " addr=%s host=", s->client_id, addr);
		sb_word(&sb, s->host);
		sb_printf(&sb,
			  " state=%s since=%" PRId64 " connected=%" PRId64 " conns=%u made=%" PRIu64
			  " requests=%" PRIu64 " wire_in=%" PRIu64 " wire_out=%" PRIu64
			  " raw_in=%" PRIu64 " raw_out=%" PRIu64 " open_files=%ld lock_owners=%ld"
			  " lock_ranges=%ld replies_kept=%zu inflight=%u running=%u waiting=%u mem=%zu"
			  " queued=%zu paced=%u"
			  " limits=%s behind=%d ack_misses=%" PRIu64 " ack_deadline=%u ops=",
			  s->conn ? "connected" : "lingering", s->since,
			  s->conn ? s->conn->since : (int64_t)0, nconns, s->nconns_total,
			  sum_req(s->st_req), tr.wire_in, tr.wire_out, tr.raw_in, tr.raw_out, fids,
			  locks, ranges, s->drc.n, s->acct->inflight, s->running, s->queued, s->acct->mem,
			  queued, paced, lim,
			  s->conn && s->conn->behind, s->st_ack_misses,
			  s->conn ? acklat_deadline(&s->conn->lat, uv_now(&d->loop),
						    d->o.ack_timeout, PFSD_ACK_WAIT_MS)
				  : 0);
		bool first = true;
		for (unsigned op = 0; op < PFS_OP_MAX; op++) {
			if (!s->st_req[op])
				continue;
			sb_printf(&sb, "%s%s:%" PRIu64, first ? "" : ",", pfs_op_name(op),
				  s->st_req[op]);
			first = false;
		}
		sb_printf(&sb, "%s\n", first ? "-" : "");
	}
	sb_printf(&sb, "lock_owners %" PRIu64 "\nlock_ranges %zu\n", nlocks,
		  atomic_load(&d->lock_ranges));
	sb_printf(&sb, "replies_kept_bytes %zu\nreplies_kept_max %zu\nreplies_forgotten %" PRIu64
		  "\n", d->drcpool.bytes, d->drcpool.max, d->drcpool.forgotten);
	sb_printf(&sb, "replies_file_free %u\nreplies_file_not_written %" PRIu64 "\n",
		  replylog_free_slots(&d->replies), replylog_not_written(&d->replies));
	if (verbose) {
		pos = 0;
		for (n = htab_iter(&d->sessions, &pos, NULL); n;
		     n = htab_iter(&d->sessions, &pos, n)) {
			struct session *s = container_of(n, struct session, hn);
			size_t lp = 0;
			sess_addr(s, addr, sizeof(addr), false);
			if (pthread_mutex_trylock(&s->lk_mu) != 0) {
				sb_printf(&sb, "locks_busy %016" PRIx64 "\n", s->client_id);
				continue;
			}
			for (struct hnode *ln = htab_iter(&s->locks, &lp, NULL); ln;
			     ln = htab_iter(&s->locks, &lp, ln))
				sb_locks_of(&sb, s, container_of(ln, struct lockent, hn), addr,
					    &listed);
			pthread_mutex_unlock(&s->lk_mu);
		}
		if (listed >= LOCKS_LISTED_MAX)
			sb_printf(&sb, "locks_truncated %d\n", LOCKS_LISTED_MAX);
	}
	sb_printf(&sb, "end\n");
	*out = sb.b;
	return sb.len;
}

/* --- metrics --- */

static void metrics(struct pfsd *d, struct pfs_prom *p)
{
	struct lockstate_info li;
	struct traffic tr;
	size_t pos = 0;
	struct hnode *n;
	unsigned nlive = 0;
	uint64_t fids_all = 0, locks_all = 0;
	char addr[80], id[20];

	lockstate_info(d->ls, &li);
	pfs_prom_family(p, "podfsd_build_info", "gauge", "podfsd's version (the value is 1)");
	pfs_prom_u64(p, "podfsd_build_info", 1, "version", PODFS_VERSION, NULL);
	pfs_prom_family(p, "podfsd_start_time_seconds", "gauge",
			"When podfsd started, seconds since the epoch");
	pfs_prom_u64(p, "podfsd_start_time_seconds", (uint64_t)d->started, NULL);
	pfs_prom_family(p, "podfsd_grace", "gauge",
			"1 while the grace period after a restart lasts (only lock reclaims)");
	pfs_prom_u64(p, "podfsd_grace", li.grace, NULL);
	struct revalhold_info ri;
	revalhold_info(d->rh, &ri);
	pfs_prom_family(p, "podfsd_revalidation_hold", "gauge",
			"1 while changes wait for the clients of the instance before a restart "
			"to revalidate");
	pfs_prom_u64(p, "podfsd_revalidation_hold", ri.active, NULL);
	pfs_prom_family(p, "podfsd_lock_holders", "gauge",
			"Clients on the persisted list of lock holders");
	pfs_prom_u64(p, "podfsd_lock_holders", li.holders, NULL);
	pfs_prom_family(p, "podfsd_locks_reclaimed_total", "counter",
			"Locks the clients reclaimed after a restart");
	pfs_prom_u64(p, "podfsd_locks_reclaimed_total", li.locks_reclaimed, NULL);

	for (n = htab_iter(&d->sessions, &pos, NULL); n; n = htab_iter(&d->sessions, &pos, n))
		nlive++;
	pfs_prom_family(p, "podfsd_clients", "gauge",
			"Client sessions (mounts), connected or lingering");
	pfs_prom_u64(p, "podfsd_clients", nlive - d->nlingering, "state", "connected", NULL);
	pfs_prom_u64(p, "podfsd_clients", d->nlingering, "state", "lingering", NULL);
	pfs_prom_family(p, "podfsd_connections", "gauge", "Open TCP connections of clients");
	pfs_prom_u64(p, "podfsd_connections", d->nconns - d->npreauth, "state", "authenticated",
		     NULL);
	pfs_prom_u64(p, "podfsd_connections", d->npreauth, "state", "handshake", NULL);
	pfs_prom_family(p, "podfsd_connections_accepted_total", "counter",
			"TCP connections accepted");
	pfs_prom_u64(p, "podfsd_connections_accepted_total", d->accepted, NULL);

	pfs_prom_family(p, "podfsd_requests_total", "counter", "Requests received, by operation");
	for (unsigned op = 0; op < PFS_OP_MAX; op++)
		if (d->st_req[op])
			pfs_prom_u64(p, "podfsd_requests_total", d->st_req[op], "op",
				     pfs_op_name(op), NULL);
	pfs_prom_family(p, "podfsd_request_duration_seconds", "histogram",
			"Time from a request's arrival to its reply being queued, by operation");
	for (unsigned op = 0; op < PFS_OP_MAX; op++) {
		uint64_t k = 0;
		for (unsigned b = 0; b < LATHIST_BUCKETS; b++)
			k += d->st_lat[op][b];
		if (k)
			pfs_prom_lathist(p, "podfsd_request_duration_seconds", "op",
					 pfs_op_name(op), d->st_lat[op], d->st_lat_sum_us[op]);
	}
	pfs_prom_family(p, "podfsd_wire_bytes_total", "counter",
			"Bytes of frames on the wire (headers included), by direction");
	pfs_prom_u64(p, "podfsd_wire_bytes_total", d->wire_in, "direction", "in", NULL);
	pfs_prom_u64(p, "podfsd_wire_bytes_total", d->wire_out, "direction", "out", NULL);
	pfs_prom_family(p, "podfsd_raw_bytes_total", "counter",
			"Bytes of frames before compression (out) or after decompression (in)");
	pfs_prom_u64(p, "podfsd_raw_bytes_total", d->raw_in, "direction", "in", NULL);
	pfs_prom_u64(p, "podfsd_raw_bytes_total", d->raw_out, "direction", "out", NULL);
	pfs_prom_family(p, "podfsd_zero_copy_bytes_total", "counter",
			"READ reply bytes sent without a copy (splice)");
	pfs_prom_u64(p, "podfsd_zero_copy_bytes_total", d->spliced, NULL);
	pfs_prom_family(p, "podfsd_direct_write_bytes_total", "counter",
			"WRITE bytes written with O_DIRECT");
	pfs_prom_u64(p, "podfsd_direct_write_bytes_total", atomic_load(&d->direct), NULL);
	pfs_prom_family(p, "podfsd_pushes_total", "counter",
			"Invalidations and lock wake-ups pushed to clients");
	pfs_prom_u64(p, "podfsd_pushes_total", d->st_pushes, NULL);
	pfs_prom_family(p, "podfsd_loop_reads_total", "counter",
			"Small READs of cached data answered on the event loop, without a worker");
	pfs_prom_u64(p, "podfsd_loop_reads_total", d->st_loop_reads, NULL);
	size_t iobjs, ibytes;
	interest_stats(d->it, &iobjs, &ibytes);
	pfs_prom_family(p, "podfsd_interest_objects", "gauge",
			"Objects some client is known to cache (what changes are pushed for)");
	pfs_prom_u64(p, "podfsd_interest_objects", iobjs, NULL);
	pfs_prom_family(p, "podfsd_interest_bytes", "gauge",
			"Memory of the table of who caches what");
	pfs_prom_u64(p, "podfsd_interest_bytes", ibytes, NULL);
	if (d->chunks) {
		struct chunks_stats cs;
		chunks_stats(d->chunks, &cs);
		pfs_prom_family(p, "podfsd_peer_table_bytes", "gauge",
				"Memory of the chunk table of peer-assisted reads");
		pfs_prom_u64(p, "podfsd_peer_table_bytes", cs.bytes, NULL);
		pfs_prom_family(p, "podfsd_peer_records", "gauge",
				"Chunks clients are listed as holding or fetching");
		pfs_prom_u64(p, "podfsd_peer_records", cs.records, NULL);
		pfs_prom_family(p, "podfsd_peer_digest_bytes_total", "counter",
				"Bytes read to take chunk digests");
		pfs_prom_u64(p, "podfsd_peer_digest_bytes_total", cs.digest_bytes, NULL);
		pfs_prom_family(p, "podfsd_peer_sources_total", "counter",
				"Where clients were sent for a chunk");
		pfs_prom_u64(p, "podfsd_peer_sources_total", cs.to_server, "source", "server", NULL);
		pfs_prom_u64(p, "podfsd_peer_sources_total", cs.to_peer, "source", "peer", NULL);
		pfs_prom_u64(p, "podfsd_peer_sources_total", cs.held, "source", "held", NULL);
		pfs_prom_family(p, "podfsd_peer_reports_bad_total", "counter",
				"Reports of peers that did not deliver a chunk");
		pfs_prom_u64(p, "podfsd_peer_reports_bad_total", cs.reports_bad, NULL);
	}
	pfs_prom_family(p, "podfsd_ack_misses_total", "counter",
			"Clients that sent nothing past their deadline for acknowledging an "
			"invalidation, and fell behind (changes stopped waiting for them)");
	pfs_prom_u64(p, "podfsd_ack_misses_total", d->st_ack_misses, NULL);
	pfs_prom_family(p, "podfsd_ack_cutoffs_total", "counter",
			"Clients cut off for not acknowledging an invalidation within 2 s "
			"while sending requests");
	pfs_prom_u64(p, "podfsd_ack_cutoffs_total", d->st_ack_cutoffs, NULL);
	pfs_prom_family(p, "podfsd_ack_extended_total", "counter",
			"Waits for an acknowledgement given another deadline, the client "
			"being busy");
	pfs_prom_u64(p, "podfsd_ack_extended_total", d->st_ack_extended, NULL);
	pfs_prom_family(p, "podfsd_clients_behind", "gauge",
			"Clients behind on acknowledging invalidations: no change waits for them");
	pfs_prom_u64(p, "podfsd_clients_behind", clients_behind(d), NULL);
	pfs_prom_family(p, "podfsd_rights_forewarned_total", "counter",
			"Changes that may take rights away (chmod, chown, access ACL), pushed to "
			"the clients that cache the object before they were made");
	pfs_prom_u64(p, "podfsd_rights_forewarned_total", d->st_forewarns, NULL);
	pfs_prom_family(p, "podfsd_memory_bytes", "gauge",
			"Request and reply bytes held for all clients");
	pfs_prom_u64(p, "podfsd_memory_bytes", d->mem, NULL);
	pfs_prom_family(p, "podfsd_memory_limit_bytes", "gauge", "The limit memory");
	pfs_prom_u64(p, "podfsd_memory_limit_bytes", d->lim.memory, NULL);
	pfs_prom_family(p, "podfsd_client_fds", "gauge",
			"File descriptors held for clients' open files and locks");
	pfs_prom_u64(p, "podfsd_client_fds", atomic_load(&d->fds), NULL);
	pfs_prom_family(p, "podfsd_client_fds_limit", "gauge",
			"File descriptors clients' files may hold (the fd budget)");
	pfs_prom_u64(p, "podfsd_client_fds_limit", d->lim.fd_budget, NULL);
	pfs_prom_family(p, "podfsd_limit_reached_total", "counter",
			"Client sessions that reached a fair-use limit, by limit (once each)");
	for (unsigned b = 0; b < LIM_NCAPS; b++)
		pfs_prom_u64(p, "podfsd_limit_reached_total", d->st_hits[b], "limit",
			     lim_cap_name((enum lim_cap)(1u << b)), NULL);

	/* Per client: labelled by its address and session id (one host
	 * may mount twice). */
	static const struct {
		const char *name, *type, *help;
	} cf[] = {
		{ "podfsd_client_requests_total", "counter", "Requests of a client session" },
		{ "podfsd_client_wire_bytes_in_total", "counter",
		  "Bytes a client session sent on the wire" },
		{ "podfsd_client_wire_bytes_out_total", "counter",
		  "Bytes sent to a client session on the wire" },
		{ "podfsd_client_open_files", "gauge", "Files a client session holds open" },
		{ "podfsd_client_lock_owners", "gauge", "Lock owners a client session holds" },
		{ "podfsd_client_memory_bytes", "gauge",
		  "Request and reply bytes held for a client session" },
	};
	for (size_t f = 0; f < sizeof(cf) / sizeof(cf[0]); f++) {
		pfs_prom_family(p, cf[f].name, cf[f].type, cf[f].help);
		pos = 0;
		for (n = htab_iter(&d->sessions, &pos, NULL); n;
		     n = htab_iter(&d->sessions, &pos, n)) {
			struct session *s = container_of(n, struct session, hn);
			unsigned nconns;
			long fids, locks, ranges;
			uint64_t v = 0;
			snprintf(id, sizeof(id), "%" PRIu64, s->number);
			sess_addr(s, addr, sizeof(addr), false);
			if (f == 0) {
				v = sum_req(s->st_req);
			} else if (f <= 2) {
				sess_traffic(d, s, &tr, &nconns);
				v = f == 1 ? tr.wire_in : tr.wire_out;
			} else if (f <= 4) {
				sess_tables(s, &fids, &locks, &ranges);
				if ((f == 3 ? fids : locks) < 0)
					continue;
				v = (uint64_t)(f == 3 ? fids : locks);
				if (f == 3)
					fids_all += v;
				else
					locks_all += v;
			} else {
				v = s->acct->mem;
			}
			pfs_prom_u64(p, cf[f].name, v, "client", addr, "host", s->host, "session",
				     id, NULL);
		}
	}
	pfs_prom_family(p, "podfsd_open_files", "gauge", "Files all clients hold open");
	pfs_prom_u64(p, "podfsd_open_files", fids_all, NULL);
	pfs_prom_family(p, "podfsd_lock_owners", "gauge", "Lock owners of all clients");
	pfs_prom_u64(p, "podfsd_lock_owners", locks_all, NULL);
	pfs_prom_family(p, "podfsd_lock_ranges", "gauge",
			"Byte ranges the POSIX locks of all clients hold (limit lock-table)");
	pfs_prom_u64(p, "podfsd_lock_ranges", atomic_load(&d->lock_ranges), NULL);
	pfs_prom_family(p, "podfsd_replies_kept_bytes", "gauge",
			"Replies kept for requests sent again after a reconnect (limit reply-cache)");
	pfs_prom_u64(p, "podfsd_replies_kept_bytes", d->drcpool.bytes, NULL);
	pfs_prom_family(p, "podfsd_replies_forgotten_total", "counter",
			"Kept replies forgotten early to stay within reply-cache");
	pfs_prom_u64(p, "podfsd_replies_forgotten_total", d->drcpool.forgotten, NULL);
	pfs_prom_family(p, "podfsd_replies_file_free", "gauge",
			"Free slots of STATE_DIR/replies (past them, hosts share its slots)");
	pfs_prom_u64(p, "podfsd_replies_file_free", replylog_free_slots(&d->replies), NULL);
	pfs_prom_family(p, "podfsd_replies_file_not_written_total", "counter",
			"Records of changes not written to STATE_DIR/replies (too big, or a failed "
			"write)");
	pfs_prom_u64(p, "podfsd_replies_file_not_written_total",
		     replylog_not_written(&d->replies), NULL);
}

size_t report_metrics(struct pfsd *d, char **out)
{
	size_t cap = 65536;

	for (;;) {
		struct pfs_prom p;
		char *b = xmalloc(cap);
		pfs_prom_init(&p, b, cap);
		metrics(d, &p);
		if (!p.overflow) {
			*out = b;
			return p.len;
		}
		free(b);
		cap *= 4;
	}
}
