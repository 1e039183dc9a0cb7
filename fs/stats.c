/* stats.c: the mount's figures as text (see stats_i.h). */
#include "deleg_i.h"
#include "dirdeleg_i.h"
#include "stats_i.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_i.h"
#include "podfs/lathist.h"
#include "lsfetch_i.h"
#include "pcache_i.h"
#include "peer_i.h"
#include "podfs/clock.h"
#include "podfs/codec.h"
#include "podfs/kvtext.h"
#include "podfs/prom.h"
#include "pushq_i.h"
#include "rpc_i.h"
#include "transport_i.h"
#include "wb_i.h"

/* A PING's round trip now, in us, or -1 if the server is not connected
 * or does not answer within 2 s. */
static long long ping_us(struct client *c)
{
	struct pfs_ping_req m = { .stamp = (uint64_t)pfs_mono_ns() };
	struct rpc_reply rep = { 0 };
	uint8_t b[64];
	struct pfs_wr w;

	pfs_wr_init(&w, b, sizeof(b));
	int64_t t0 = pfs_mono_ns();
	int rc = pfs_enc_ping_req(&w, &m) < 0 ? -EINVAL
		 /* Never waits for a server that is away. */
		 : rpc_call_timeout(c->rpc, PFS_OP_PING, b, w.len, &rep, 2000);
	rpc_reply_free(&rep);
	return rc < 0 ? -1 : (long long)((pfs_mono_ns() - t0) / 1000);
}

int stats_format(struct client *c, char *buf, size_t cap, bool ping)
{
	struct wb_stats ws = { 0 };
	size_t waiting;
	uint64_t abandoned;
	uint64_t ack_busy, ack_unapplied, ack_alive;
	char rtt[48] = "";

	if (ping)
		snprintf(rtt, sizeof(rtt), "rtt_us %lld\n", ping_us(c));

	if (c->wb)
		wb_get_stats(c->wb, &ws);
	pushq_stats(transport_pushq(c->tr), &ack_busy, &ack_unapplied, &ack_alive);
	rpc_waiting(c->rpc, &waiting, &abandoned);
	int n = snprintf(buf, cap,
			 "server %s\nmetrics %s\nup_since %llu\ndown_since %llu\nreconnects %llu\n%s"
			 "waiting %zu\nabandoned %llu\npushes %llu\nforgotten %llu\nquiet_missed %llu\n"
			 "wire_out %llu\nraw_out %llu\nwire_in %llu\nraw_in %llu\n"
			 "file_written %llu\nfile_read %llu\nresent %llu\ncommits %llu\n"
			 "coalesced %llu\nwb_held %llu\nconns %u\nconns_up %u\nack_busy %llu\nack_unapplied %llu\n"
			 "ack_alive %llu\n",
			 c->hostport, c->metrics_name[0] ? c->metrics_name : "-",
			 (unsigned long long)atomic_load(&c->st_up_since),
			 (unsigned long long)atomic_load(&c->st_down_since),
			 (unsigned long long)atomic_load(&c->st_reconnects),
			 rtt, waiting,
			 (unsigned long long)abandoned,
			 (unsigned long long)atomic_load(&c->st_pushes),
			 (unsigned long long)atomic_load(&c->st_forgotten),
			 (unsigned long long)transport_quiet_missed(c->tr),
			 (unsigned long long)atomic_load(&c->st_wire_out),
			 (unsigned long long)atomic_load(&c->st_raw_out),
			 (unsigned long long)atomic_load(&c->st_wire_in),
			 (unsigned long long)atomic_load(&c->st_raw_in),
			 (unsigned long long)ws.written,
			 (unsigned long long)atomic_load(&c->st_file_read),
			 (unsigned long long)ws.resent, (unsigned long long)ws.commits,
			 (unsigned long long)ws.coalesced, (unsigned long long)ws.held, c->conns, rpc_conns_up(c->rpc),
			 (unsigned long long)ack_busy, (unsigned long long)ack_unapplied,
			 (unsigned long long)ack_alive);
	for (unsigned op = 0; op < PFS_OP_MAX && n > 0 && (size_t)n < cap; op++) {
		uint64_t k = atomic_load(&c->st_req[op]);
		if (k)
			n += snprintf(buf + n, cap - (size_t)n, "req_%s %llu\n", pfs_op_name(op),
				      (unsigned long long)k);
	}
	/* Latency of the answered requests: count, sum, p50 and p99 (us). */
	for (unsigned op = 0; op < PFS_OP_MAX && n > 0 && (size_t)n < cap; op++) {
		uint64_t h[LATHIST_BUCKETS], k = 0;
		for (unsigned b = 0; b < LATHIST_BUCKETS; b++)
			k += h[b] = atomic_load_explicit(&c->st_lat[op][b], memory_order_relaxed);
		if (k)
			n += snprintf(buf + n, cap - (size_t)n, "lat_%s %llu %llu %llu %llu\n",
				      pfs_op_name(op), (unsigned long long)k,
				      (unsigned long long)atomic_load(&c->st_lat_sum_us[op]),
				      (unsigned long long)lathist_quantile(h, 0.5),
				      (unsigned long long)lathist_quantile(h, 0.99));
	}
	if (c->lf && n > 0 && (size_t)n < cap) {
		struct lsfetch_stats ls;
		lsfetch_get_stats(c->lf, &ls);
		n += snprintf(buf + n, cap - (size_t)n,
			      "lists %llu\nlists_ahead %llu\nlists_waited %llu\nlists_taken %llu\n"
			      "lists_dropped %llu\n",
			      (unsigned long long)ls.listed, (unsigned long long)ls.ahead, (unsigned long long)ls.waited,
			      (unsigned long long)ls.taken, (unsigned long long)ls.dropped);
	}
	if (c->dl && n > 0 && (size_t)n < cap) {
		struct deleg_stats ds;
		deleg_get_stats(c->dl, &ds);
		n += snprintf(buf + n, cap - (size_t)n,
			      "deleg_granted %llu\ndeleg_local %llu\ndeleg_sent %llu\n"
			      "deleg_recalls %llu\ndeleg_errors %llu\n",
			      (unsigned long long)ds.granted, (unsigned long long)ds.local,
			      (unsigned long long)ds.sent, (unsigned long long)ds.recalls,
			      (unsigned long long)ds.errors);
	}
	if (c->dd && n > 0 && (size_t)n < cap) {
		struct dirdeleg_stats dd;
		dirdeleg_get_stats(c->dd, &dd);
		n += snprintf(buf + n, cap - (size_t)n,
			      "dirdeleg_asked %llu\ndirdeleg_granted %llu\ndirdeleg_unlinks %llu\n"
			      "dirdeleg_sent %llu\ndirdeleg_recalls %llu\ndirdeleg_errors %llu\n"
			      "dirdeleg_waits %llu\ndirdeleg_creates %llu\ndirdeleg_slots %llu\n"
			      "dirdeleg_inlined %llu\ndirdeleg_closed %llu\ndirdeleg_dir_attrs %llu\n"
			      "dirdeleg_renames %llu\ndirdeleg_slot_waits %llu\n"
			      "dirdeleg_slot_timeouts %llu\ndirdeleg_dir_attrs_joined %llu\n"
			      "dirdeleg_made_again %llu\n",
			      (unsigned long long)dd.asked, (unsigned long long)dd.granted,
			      (unsigned long long)dd.local, (unsigned long long)dd.sent,
			      (unsigned long long)dd.recalls,
			      (unsigned long long)dd.errors, (unsigned long long)dd.waits,
			      (unsigned long long)dd.creates, (unsigned long long)dd.slots,
			      (unsigned long long)dd.inlined, (unsigned long long)dd.closed,
			      (unsigned long long)dd.dir_attrs, (unsigned long long)dd.renames,
			      (unsigned long long)dd.slot_waits, (unsigned long long)dd.slot_timeouts,
			      (unsigned long long)dd.dir_attrs_joined,
			      (unsigned long long)dd.made_again);
	}
	/* All answered requests together, one "UPPER_US:COUNT" word per
	 * non-empty lathist bucket (UPPER_US is its lathist_upper, "inf" for
	 * the last): the difference of two readings is the histogram of what
	 * was answered in between, and several mounts' histograms add up,
	 * which the quantiles above cannot. At most LATHIST_BUCKETS words of
	 * at most 42 bytes: within STATS_MAX with everything else. */
	uint64_t all[LATHIST_BUCKETS] = { 0 }, nall = 0;
	for (unsigned op = 0; op < PFS_OP_MAX; op++)
		for (unsigned b = 0; b < LATHIST_BUCKETS; b++) {
			uint64_t k = atomic_load_explicit(&c->st_lat[op][b], memory_order_relaxed);
			all[b] += k;
			nall += k;
		}
	if (nall && n > 0 && (size_t)n < cap)
		n += snprintf(buf + n, cap - (size_t)n, "lat_hist");
	for (unsigned b = 0; nall && b < LATHIST_BUCKETS && n > 0 && (size_t)n < cap; b++) {
		if (!all[b])
			continue;
		if (b == LATHIST_BUCKETS - 1)
			n += snprintf(buf + n, cap - (size_t)n, " inf:%llu",
				      (unsigned long long)all[b]);
		else
			n += snprintf(buf + n, cap - (size_t)n, " %llu:%llu",
				      (unsigned long long)lathist_upper(b),
				      (unsigned long long)all[b]);
	}
	if (nall && n > 0 && (size_t)n < cap)
		n += snprintf(buf + n, cap - (size_t)n, "\n");
	if (c->pc && n > 0 && (size_t)n < cap)
		n += (int)pcache_format_stats(c->pc, buf + n, cap - (size_t)n);
	if (c->peer && n > 0 && (size_t)n < cap)
		n += (int)peer_format_stats(c, buf + n, cap - (size_t)n);
	if (n < 0 || (size_t)n >= cap) /* cannot happen with STATS_MAX */
		return -EOVERFLOW;
	return n;
}

/* The figures of stats_format that become metrics: their line, name,
 * type and help. */
static const struct {
	const char *key, *name, *type, *help;
} mdefs[] = {
	{ "up_since", "podfs_connected_since_seconds", "gauge",
	  "When the connection to the server came up (seconds since the epoch; 0: down)" },
	{ "down_since", "podfs_disconnected_since_seconds", "gauge",
	  "When the server became unreachable (seconds since the epoch; 0: it is not)" },
	{ "reconnects", "podfs_reconnects_total", "counter", "Reconnections to the server" },
	{ "conns", "podfs_connections", "gauge", "TCP connections to the server (conns=)" },
	{ "conns_up", "podfs_connections_up", "gauge", "Of which are connected" },
	{ "waiting", "podfs_requests_waiting", "gauge",
	  "Requests waiting for the server to come back" },
	{ "abandoned", "podfs_requests_abandoned_total", "counter",
	  "Requests given up because their process was killed" },
	{ "pushes", "podfs_pushes_total", "counter", "Pushes (invalidations) from the server" },
	{ "quiet_missed", "podfs_cache_answers_asked_total", "counter",
	  "Answers from the caches asked of the server: the connection thread lagged" },
	{ "file_written", "podfs_file_written_bytes_total", "counter",
	  "File bytes written to the server" },
	{ "file_read", "podfs_file_read_bytes_total", "counter", "File bytes read from the server" },
	{ "resent", "podfs_write_resent_bytes_total", "counter",
	  "Write-behind bytes sent again after a reconnect" },
	{ "commits", "podfs_write_commits_total", "counter", "Write-behind commits" },
	{ "coalesced", "podfs_writes_coalesced_total", "counter",
	  "Writes appended to the queued write before them" },
	{ "wb_held", "podfs_write_behind_held_bytes", "gauge",
	  "Written bytes held until the server has them" },
	{ "lists", "podfs_listings_total", "counter", "Directory listings fetched" },
	{ "lists_ahead", "podfs_listings_ahead_total", "counter",
	  "Of them, fetched ahead of a walk" },
	{ "lists_waited", "podfs_listings_ahead_waited_total", "counter",
	  "Requests that waited for a listing being fetched ahead" },
	{ "lists_taken", "podfs_listings_ahead_taken_total", "counter",
	  "Requests that fetched a listing queued ahead themselves" },
	{ "lists_dropped", "podfs_listings_ahead_dropped_total", "counter",
	  "Listings queued ahead and never fetched (queue full, too old)" },
	{ "pcache_hits", "podfs_cache_hits_total", "counter", "Persistent cache hits" },
	{ "pcache_misses", "podfs_cache_misses_total", "counter", "Persistent cache misses" },
	{ "pcache_bytes", "podfs_cache_served_bytes_total", "counter",
	  "Bytes read from the persistent cache" },
	{ "pcache_entries", "podfs_cache_entries", "gauge", "Files in the persistent cache" },
	{ "pcache_disk", "podfs_cache_disk_bytes", "gauge", "Disk the persistent cache uses" },
	{ "peer_read_peers", "podfs_peer_read_from_peers_bytes_total", "counter",
	  "Chunk bytes fetched from peers (checked against their digests)" },
	{ "peer_read_coord", "podfs_peer_read_from_server_bytes_total", "counter",
	  "Chunk bytes read from the server" },
	{ "peer_answered", "podfs_peer_answered_bytes_total", "counter",
	  "Bytes of READs answered from chunks" },
	{ "peer_bad", "podfs_peer_bad_chunks_total", "counter",
	  "Chunks from peers that did not match their digest" },
	{ "peer_failed", "podfs_peer_failed_fetches_total", "counter",
	  "Chunk fetches from peers that failed otherwise (timeout, gone, not held)" },
	{ "peer_unreachable", "podfs_peer_unreachable_total", "counter",
	  "Peers that could not be reached (no connection, TLS or peer handshake)" },
	{ "peer_off", "podfs_peer_off_total", "counter",
	  "Times no peer could be reached several in a row, and every peer was left aside" },
	{ "peer_fallbacks", "podfs_peer_fallbacks_total", "counter",
	  "READs of large files sent without chunks after all" },
	{ "peer_skipped", "podfs_peer_skipped_bytes_total", "counter",
	  "Bytes of READs of large files sent without chunks (no CHUNK connection, version unknown)" },
	{ "peer_store_bytes", "podfs_peer_store_bytes", "gauge", "Bytes of chunks held in memory" },
	{ "peer_served_bytes", "podfs_peer_served_bytes_total", "counter",
	  "Chunk bytes served to peers" },
	{ "peer_served_misses", "podfs_peer_served_misses_total", "counter",
	  "Chunks peers asked for that were not held" },
};

/* All families into p. */
static void metrics(struct client *c, const struct pfs_kv *kv, struct pfs_prom *p)
{
	pfs_prom_family(p, "podfs_build_info", "gauge",
			"podfs's version and its server (the value is 1)");
	pfs_prom_u64(p, "podfs_build_info", 1, "version", PODFS_VERSION, "server", c->hostport,
		     NULL);
	for (size_t i = 0; i < sizeof(mdefs) / sizeof(mdefs[0]); i++) {
		if (!pfs_kv_get(kv, mdefs[i].key))
			continue;
		pfs_prom_family(p, mdefs[i].name, mdefs[i].type, mdefs[i].help);
		pfs_prom_u64(p, mdefs[i].name, pfs_kv_num(kv, mdefs[i].key), NULL);
	}
	pfs_prom_family(p, "podfs_wire_bytes_total", "counter",
			"Bytes of frames on the wire (headers included), by direction");
	pfs_prom_u64(p, "podfs_wire_bytes_total", pfs_kv_num(kv, "wire_in"), "direction", "in",
		     NULL);
	pfs_prom_u64(p, "podfs_wire_bytes_total", pfs_kv_num(kv, "wire_out"), "direction", "out",
		     NULL);
	pfs_prom_family(p, "podfs_raw_bytes_total", "counter",
			"Bytes of frames before compression (out) or after decompression (in)");
	pfs_prom_u64(p, "podfs_raw_bytes_total", pfs_kv_num(kv, "raw_in"), "direction", "in",
		     NULL);
	pfs_prom_u64(p, "podfs_raw_bytes_total", pfs_kv_num(kv, "raw_out"), "direction", "out",
		     NULL);
	pfs_prom_family(p, "podfs_requests_total", "counter",
			"Requests sent to the server, by operation");
	for (int i = 0; i < kv->n; i++)
		if (strncmp(kv->key[i], "req_", 4) == 0)
			pfs_prom_u64(p, "podfs_requests_total", strtoull(kv->val[i], NULL, 10), "op",
				     kv->key[i] + 4, NULL);
	pfs_prom_family(p, "podfs_request_duration_seconds", "histogram",
			"Time from sending a request to its reply, by operation");
	for (unsigned op = 0; op < PFS_OP_MAX; op++) {
		uint64_t h[LATHIST_BUCKETS], k = 0;
		for (unsigned b = 0; b < LATHIST_BUCKETS; b++)
			k += h[b] = atomic_load_explicit(&c->st_lat[op][b], memory_order_relaxed);
		if (k)
			pfs_prom_lathist(p, "podfs_request_duration_seconds", "op", pfs_op_name(op),
					 h, (uint64_t)atomic_load(&c->st_lat_sum_us[op]));
	}
}

long stats_metrics(struct client *c, char **out)
{
	char *text = malloc(STATS_MAX);
	struct pfs_kv kv;
	size_t cap = 65536;
	int n;

	*out = NULL;
	if (!text)
		return -ENOMEM;
	n = stats_format(c, text, STATS_MAX, false);
	if (n < 0) {
		free(text);
		return n;
	}
	if (pfs_kv_parse(&kv, text) < 0)
		return -ENOMEM;
	for (;;) {
		struct pfs_prom p;
		char *b = malloc(cap);
		if (!b) {
			pfs_kv_free(&kv);
			return -ENOMEM;
		}
		pfs_prom_init(&p, b, cap);
		metrics(c, &kv, &p);
		if (!p.overflow) {
			pfs_kv_free(&kv);
			*out = b;
			return (long)p.len;
		}
		free(b);
		cap *= 4;
	}
}
