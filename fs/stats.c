/* stats.c: the mount's figures as text (see stats_i.h). */
#include "stats_i.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>

#include "client_i.h"
#include "podfs/lathist.h"
#include "pcache_i.h"
#include "podfs/clock.h"
#include "podfs/codec.h"
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
	uint64_t ack_busy, ack_unapplied;
	char rtt[48] = "";

	if (ping)
		snprintf(rtt, sizeof(rtt), "rtt_us %lld\n", ping_us(c));

	if (c->wb)
		wb_get_stats(c->wb, &ws);
	pushq_stats(transport_pushq(c->tr), &ack_busy, &ack_unapplied);
	rpc_waiting(c->rpc, &waiting, &abandoned);
	int n = snprintf(buf, cap,
			 "server %s\nup_since %llu\ndown_since %llu\nreconnects %llu\n%s"
			 "waiting %zu\nabandoned %llu\npushes %llu\n"
			 "wire_out %llu\nraw_out %llu\nwire_in %llu\nraw_in %llu\n"
			 "file_written %llu\nfile_read %llu\nresent %llu\ncommits %llu\n"
			 "wb_held %llu\nconns %u\nconns_up %u\nack_busy %llu\nack_unapplied %llu\n",
			 c->hostport, (unsigned long long)atomic_load(&c->st_up_since),
			 (unsigned long long)atomic_load(&c->st_down_since),
			 (unsigned long long)atomic_load(&c->st_reconnects),
			 rtt, waiting,
			 (unsigned long long)abandoned,
			 (unsigned long long)atomic_load(&c->st_pushes),
			 (unsigned long long)atomic_load(&c->st_wire_out),
			 (unsigned long long)atomic_load(&c->st_raw_out),
			 (unsigned long long)atomic_load(&c->st_wire_in),
			 (unsigned long long)atomic_load(&c->st_raw_in),
			 (unsigned long long)ws.written,
			 (unsigned long long)atomic_load(&c->st_file_read),
			 (unsigned long long)ws.resent, (unsigned long long)ws.commits,
			 (unsigned long long)ws.held, c->conns, rpc_conns_up(c->rpc),
			 (unsigned long long)ack_busy, (unsigned long long)ack_unapplied);
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
	if (c->pc && n > 0 && (size_t)n < cap)
		n += (int)pcache_format_stats(c->pc, buf + n, cap - (size_t)n);
	if (n < 0 || (size_t)n >= cap) /* cannot happen with STATS_MAX */
		return -EOVERFLOW;
	return n;
}
