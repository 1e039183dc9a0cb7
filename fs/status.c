/* status.c: `podfs status` (see status_i.h). */
#include "status_i.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "ctl_i.h"
#include "podfs/kvtext.h"
#include "mountinfo_i.h"
#include "opts_i.h"
#include "stats_i.h"

#define STATS_XATTR "user.podfs.stats"

/* One reading of a mount's stats: "name value..." lines. */
struct reading {
	struct pfs_kv kv;
	bool ok;
};

/* The figures from the mount's status socket (ctl_i.h), which answers
 * even while the server is away; else (no socket: a podfs that could not
 * make one, not root) its xattr, through the mount. */
static int read_stats(const char *mnt, const char *dev, struct reading *r)
{
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)], *text;

	memset(r, 0, sizeof(*r));
	ctl_path(dev, path, sizeof(path));
	ssize_t len = pfs_unix_ask(path, NULL, STATS_MAX, 5, &text);
	if (len == -ENOENT || len == -ECONNREFUSED) {
		if (!(text = malloc(STATS_MAX + 1)))
			return -ENOMEM;
		len = getxattr(mnt, STATS_XATTR, text, STATS_MAX);
		if (len < 0) {
			len = -errno;
			free(text);
		} else {
			text[len] = 0;
		}
	}
	if (len < 0)
		return (int)len;
	int rc = pfs_kv_parse(&r->kv, text);
	r->ok = rc == 0;
	return rc;
}

static void reading_free(struct reading *r)
{
	pfs_kv_free(&r->kv);
	r->ok = false;
}

static const char *get(const struct reading *r, const char *key)
{
	return pfs_kv_get(&r->kv, key);
}

static unsigned long long num(const struct reading *r, const char *key)
{
	return pfs_kv_num(&r->kv, key);
}

static void show(const char *mnt, const char *src, const struct reading *a,
		 const struct reading *b, double secs)
{
	char t1[32], t2[32], t3[32], t4[32];
	time_t since = (time_t)num(b, "up_since");
	struct tm tm;
	char when[64] = "-";
	long long rtt = get(b, "rtt_us") ? strtoll(get(b, "rtt_us"), NULL, 10) : -2;

	if (since && gmtime_r(&since, &tm))
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
	printf("%s: %s (server %s)\n", mnt, src, get(b, "server") ? get(b, "server") : "?");
	printf("  connected since %s, %llu reconnects; connections %llu of %llu up\n", when,
	       num(b, "reconnects"), num(b, "conns_up"), num(b, "conns"));
	if (get(b, "metrics") && strcmp(get(b, "metrics"), "-") != 0)
		printf("  metrics on http://%s/metrics\n", get(b, "metrics"));
	if (rtt >= 0)
		printf("  round trip %lld us\n", rtt);
	else if (rtt == -1)
		printf("  round trip: server unreachable\n");
	time_t down = (time_t)num(b, "down_since");
	if (down) {
		long long ago = (long long)(time(NULL) - down);
		printf("  DISCONNECTED for %lld s: %llu requests waiting; a hard mount waits for the "
		       "server\n", ago < 0 ? 0 : ago, num(b, "waiting"));
	}
	if (num(b, "abandoned"))
		printf("  %llu requests given up because their process was killed\n",
		       num(b, "abandoned"));

	/* Requests by operation: total, per second over the interval,
	 * latency. */
	unsigned long long total = 0, dtotal = 0;
	printf("  %-12s %10s %9s %9s %9s %9s\n", "requests", "total", "per s", "mean us",
	       "p50 us", "p99 us");
	for (int i = 0; i < b->kv.n; i++) {
		if (strncmp(b->kv.key[i], "req_", 4) != 0)
			continue;
		const char *op = b->kv.key[i] + 4;
		char lk[96];
		unsigned long long k = strtoull(b->kv.val[i], NULL, 10);
		unsigned long long k0 = num(a, b->kv.key[i]);
		unsigned long long cnt = 0, sum = 0, p50 = 0, p99 = 0;
		snprintf(lk, sizeof(lk), "lat_%s", op);
		const char *lat = get(b, lk);
		if (lat)
			sscanf(lat, "%llu %llu %llu %llu", &cnt, &sum, &p50, &p99);
		total += k;
		dtotal += k - k0;
		printf("  %-12s %10llu %9.1f %9llu %9llu %9llu\n", op, k,
		       (double)(k - k0) / secs, cnt ? sum / cnt : 0, p50, p99);
	}
	printf("  %-12s %10llu %9.1f\n", "all", total, (double)dtotal / secs);

	unsigned long long wo = num(b, "wire_out"), ro = num(b, "raw_out");
	unsigned long long wi = num(b, "wire_in"), ri = num(b, "raw_in");
	printf("  wire: sent %s (%s before compression), received %s (%s after decompression)\n",
	       pfs_fmt_bytes(wo, t1, sizeof(t1)), pfs_fmt_bytes(ro, t2, sizeof(t2)),
	       pfs_fmt_bytes(wi, t3, sizeof(t3)), pfs_fmt_bytes(ri, t4, sizeof(t4)));
	printf("  now: sending %s/s, receiving %s/s\n",
	       pfs_fmt_bytes((unsigned long long)((double)(wo - num(a, "wire_out")) / secs), t1,
			     sizeof(t1)),
	       pfs_fmt_bytes((unsigned long long)((double)(wi - num(a, "wire_in")) / secs), t2,
			     sizeof(t2)));
	printf("  files: read %s, written %s; write-behind holds %s, %llu commits, %s re-sent, "
	       "%llu small writes joined\n",
	       pfs_fmt_bytes(num(b, "file_read"), t1, sizeof(t1)),
	       pfs_fmt_bytes(num(b, "file_written"), t2, sizeof(t2)),
	       pfs_fmt_bytes(num(b, "wb_held"), t3, sizeof(t3)), num(b, "commits"),
	       pfs_fmt_bytes(num(b, "resent"), t4, sizeof(t4)), num(b, "coalesced"));
	printf("  pushes from the server: %llu\n", num(b, "pushes"));
	if (get(b, "pcache_hits")) {
		unsigned long long h = num(b, "pcache_hits"), m = num(b, "pcache_misses");
		printf("  persistent cache: %llu hits, %llu misses (%.0f%% hit), %s stored in %llu "
		       "entries\n",
		       h, m, h + m ? 100.0 * (double)h / (double)(h + m) : 0.0,
		       pfs_fmt_bytes(num(b, "pcache_bytes"), t1, sizeof(t1)), num(b, "pcache_entries"));
	}
	if (get(b, "peer_read_peers")) {
		printf("  peers (port %llu): chunks read from peers %s, from the server %s; served "
		       "to peers %s; %llu chunks did not match their digest, %llu fetches failed, "
		       "%llu READs went without chunks\n",
		       num(b, "peer_port"), pfs_fmt_bytes(num(b, "peer_read_peers"), t1, sizeof(t1)),
		       pfs_fmt_bytes(num(b, "peer_read_coord"), t2, sizeof(t2)),
		       pfs_fmt_bytes(num(b, "peer_served_bytes"), t3, sizeof(t3)), num(b, "peer_bad"),
		       num(b, "peer_failed"), num(b, "peer_fallbacks"));
		printf("  chunks held: %s in %llu\n",
		       pfs_fmt_bytes(num(b, "peer_store_bytes"), t1, sizeof(t1)),
		       num(b, "peer_store_chunks"));
	}
}

struct mounts {
	char **mnt, **src, **dev;
	int n, cap;
};

static void add_mount(void *arg, const char *mnt, const char *src, const char *dev)
{
	struct mounts *m = arg;
	if (m->n == m->cap) {
		int cap = m->cap ? m->cap * 2 : 8;
		char **a = realloc(m->mnt, (size_t)cap * sizeof(*a));
		if (!a)
			return;
		m->mnt = a;
		char **b = realloc(m->src, (size_t)cap * sizeof(*b));
		if (!b)
			return;
		m->src = b;
		char **d = realloc(m->dev, (size_t)cap * sizeof(*d));
		if (!d)
			return;
		m->dev = d;
		m->cap = cap;
	}
	m->mnt[m->n] = strdup(mnt);
	m->src[m->n] = strdup(src);
	m->dev[m->n] = strdup(dev);
	if (m->mnt[m->n] && m->src[m->n] && m->dev[m->n])
		m->n++;
}

static void mounts_free(struct mounts *m)
{
	for (int k = 0; k < m->n; k++) {
		free(m->mnt[k]);
		free(m->src[k]);
		free(m->dev[k]);
	}
	free(m->mnt);
	free(m->src);
	free(m->dev);
	memset(m, 0, sizeof(*m));
}

static void usage(FILE *f)
{
	fputs("usage: podfs status [-i SECONDS] [MOUNTPOINT...]\n"
	      "\n"
	      "Shows each podfs mount (default: every podfs mount of this host): the\n"
	      "server and connection, round trip, requests per second and latency by\n"
	      "operation (over -i SECONDS, default 1), bytes on the wire and before\n"
	      "compression, pushes, write-behind and the persistent cache.\n",
	      f);
}

int status_main(int argc, char **argv)
{
	struct mounts m = { 0 };
	double interval = 1.0;
	int rc = 0, i = 2;

	for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(argv[i], "-i") == 0 && i + 1 < argc) {
			char *end;
			interval = strtod(argv[++i], &end);
			if (*end || !(interval > 0 && interval <= 3600)) {
				opts_usage_error("status: bad interval '%s' (seconds, 0 < S <= 3600)",
						 argv[i]);
				return OPTS_EXIT_USAGE;
			}
		} else if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		} else {
			opts_usage_error("status: unknown option '%s'", argv[i]);
			return OPTS_EXIT_USAGE;
		}
	}
	struct mounts all = { 0 };
	int found = mountinfo_each("fuse.podfs", add_mount, &all);
	if (i < argc) {
		for (; i < argc; i++) {
			char *real = realpath(argv[i], NULL);
			int k = all.n - 1; /* the topmost mount there */
			while (real && k >= 0 && strcmp(all.mnt[k], real) != 0)
				k--;
			if (!real || k < 0) {
				fprintf(stderr, "podfs status: %s is not a podfs mount point\n", argv[i]);
				rc = 1;
			} else {
				add_mount(&m, all.mnt[k], all.src[k], all.dev[k]);
			}
			free(real);
		}
	} else if (found <= 0) {
		fprintf(stderr, "podfs status: no podfs mount on this host\n");
		rc = 1;
	} else {
		for (int k = 0; k < all.n; k++)
			add_mount(&m, all.mnt[k], all.src[k], all.dev[k]);
	}
	mounts_free(&all);

	struct reading *first = calloc((size_t)(m.n ? m.n : 1), sizeof(*first));
	if (!first)
		return 1;
	for (int k = 0; k < m.n; k++) {
		int e = read_stats(m.mnt[k], m.dev[k], &first[k]);
		if (e == -ENOTCONN) {
			fprintf(stderr,
				"podfs status: %s: its podfs process is gone (%s); "
				"unmount it with fusermount3 -u\n",
				m.mnt[k], strerror(-e));
			rc = 1;
		} else if (e < 0) {
			fprintf(stderr, "podfs status: %s: %s\n", m.mnt[k], strerror(-e));
			rc = 1;
		}
	}
	if (m.n) {
		struct timespec ts = { (time_t)interval,
				       (long)((interval - (double)(time_t)interval) * 1e9) };
		nanosleep(&ts, NULL);
	}
	for (int k = 0; k < m.n; k++) {
		struct reading second;
		if (!first[k].ok)
			continue;
		int e = read_stats(m.mnt[k], m.dev[k], &second);
		if (e < 0) {
			fprintf(stderr, "podfs status: %s: %s\n", m.mnt[k], strerror(-e));
			rc = 1;
		} else {
			show(m.mnt[k], m.src[k], &first[k], &second, interval);
			reading_free(&second);
		}
		reading_free(&first[k]);
	}
	free(first);
	mounts_free(&m);
	return rc;
}
