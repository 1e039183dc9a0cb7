/* opts.c: the podfs command line and mount options, parsed with
 * libfuse's fuse_opt_parse, and the usage text (see opts_i.h). */
#include "opts_i.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "client_i.h"
#include "locks_i.h"
#include "loop_i.h"
#include "mountinfo_i.h"
#include "mountwait_i.h"
#include "peer_i.h"
#include "podfs/frame.h"
#include "podfs/log.h"
#include "podfs/netaddr.h"

#define DEFAULT_KEY "/etc/podfs/pod.key"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: podfs HOST[:PORT][:/] MOUNTPOINT [-f] [-d] [-o OPTION[,OPTION...]]\n"
		"       podfs keygen FILE\n"
		"       podfs warm PATH...   pre-load trees of a mount into the caches\n"
		"       podfs status [MOUNTPOINT...]   each mount's connection, requests and latency\n"
		"       podfs pod up|down|status HOSTS_FILE   a pod in one command, over ssh\n"
		"\n"
		"Mounts the directory exported by podfsd on HOST (port %u by default).\n"
		"\n"
		"  -f                  stay in the foreground\n"
		"  -d                  debug output (implies -f)\n"
		"  -h, --help          this help\n"
		"  -V, --version       print the version\n"
		"\n"
		"Options (-o):\n"
		"  key=FILE            pod key file (default " DEFAULT_KEY ")\n"
		"  port=N              server port\n"
		"  hard                wait for the server forever (default)\n"
		"  soft                fail requests with EIO after timeo seconds\n"
		"  timeo=SECONDS       soft-mount timeout (default 30)\n"
		"  retry=MINUTES       keep trying to reach the server this long at\n"
		"                      mount time (default 2, with bg 10000; 0: once;\n"
		"                      fractions too: 0.5 is 30 seconds)\n"
		"  bg                  if the first attempt fails, retry in the\n"
		"                      background and return 0 at once (as NFS)\n"
		"  fg                  retry in the foreground (default)\n"
		"  attr_timeout=S      attribute cache time (default 3600; the server\n"
		"                      pushes invalidations, so long is safe)\n"
		"  entry_timeout=S     name cache time (default 3600)\n"
		"  negative_timeout=S  negative name cache time (default 3600; 0: none)\n"
		"  max_inline=BYTES    small files travel with their lookup, and files\n"
		"                      made here are read back from memory, up to this\n"
		"                      size (default 65536, at most 65536; 0: never)\n"
		"  lz4=MODE            LZ4 for requests (writes): auto (only while the\n"
		"                      link is backed up), always or never (default auto)\n"
		"  log_level=LEVEL     err, warning, notice, info or debug\n"
		"  wb_threads=N        writes in flight per mount, sent behind the\n"
		"                      application (default 4; 0: synchronous writes)\n"
		"  wb_max=MIB          write data held by write-behind, pending or not\n"
		"                      yet committed (default 128)\n"
		"  tls=on|off          encrypt and authenticate the connections with TLS\n"
		"                      1.3 keyed by the pod key (default on); off (or\n"
		"                      notls) only for a podfsd started with\n"
		"                      --allow-plaintext on a trusted network\n"
		"  tls_ca=FILE         TLS by certificate instead of the pod key's PSK:\n"
		"                      the server's must verify against the CAs in FILE\n"
		"                      (PEM) and carry tls_name (default: the server's\n"
		"                      host as given); the pod key still authenticates\n"
		"                      both ends inside TLS\n"
		"  tls_name=NAME       the DNS name or IP address of tls_ca's certificate\n"
		"  conns=N             TCP connections to the server, 1..%u (default\n"
		"                      %u): READ and WRITE spread over all N, the rest\n"
		"                      stays on the first; for links where one TCP\n"
		"                      connection is the bottleneck\n"
		"  spin=US|auto        keep one CPU awake (a nice 19 thread spins) for\n"
		"                      US microseconds after each request, where an\n"
		"                      idle CPU is slow to wake (a halting virtual\n"
		"                      CPU): saves tens of microseconds per request;\n"
		"                      auto (default): %u if a wake-up measured at\n"
		"                      mount takes %u us or more, else 0 (never)\n"
		"  lock_retry=S        a blocked lock (F_SETLKW, flock) is retried when\n"
		"                      the server says a lock was released, and every S\n"
		"                      seconds in case that message was lost (default 1)\n"
		"  cache_dir=DIR       keep file contents on local disk in DIR (created\n"
		"                      if missing; one mount per DIR), keyed by handle\n"
		"                      and version, so a remount or reboot starts warm\n"
		"  cache_size=SIZE     cap of cache_dir, with K/M/G/T suffixes (default\n"
		"                      1G, at least 1M); least recently used go first;\n"
		"                      files over SIZE/8 are not cached\n"
		"  delegate            answer chmod, chown and utimens of a file this\n"
		"                      mount just created and holds open without a\n"
		"                      round trip, when the server grants it (podfsd\n"
		"                      --delegate; off by default): they reach the\n"
		"                      server before the close returns, or before\n"
		"                      another host looks at the file\n"
		"  peers               read large files in chunks that the mounts of the\n"
		"                      pod fetch from each other, so that the server\n"
		"                      sends each about once (off by default): this\n"
		"                      mount then also serves the chunks it holds, on a\n"
		"                      TCP port of the address it reaches the server\n"
		"                      from (TLS and the pod key, as with the server)\n"
		"  peer_port=N         that port (default: any free one)\n"
		"  peer_cache=SIZE     memory for the chunks held (default 256M, at\n"
		"                      least 8M; K/M/G suffixes)\n"
		"  peer_min=SIZE       only files of at least SIZE go by chunks\n"
		"                      (default 64M; the server has its own threshold)\n"
		"  peer_timeout=S      a peer that has not delivered a chunk in S\n"
		"                      seconds is given up for the server (default 5)\n"
		"  metrics=ADDR:PORT   serve Prometheus metrics of this mount at\n"
		"                      http://ADDR:PORT/metrics (off by default; they\n"
		"                      show the server's address and request counts to\n"
		"                      whoever can connect)\n"
		"  ro, rw, nosuid, nodev, noexec, sync, dirsync, noatime, ...,\n"
		"  fsname=NAME, subtype=NAME, auto_unmount: as for any FUSE mount\n",
		PFS_DEFAULT_PORT, PFS_CONNS_MAX, PFS_CONNS_DEFAULT, LOOP_SPIN_US_DEFAULT,
		LOOP_SLOW_WAKE_US);
}

/* "podfs: MESSAGE (see podfs --help)" on stderr. */
static void vusage_error(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
static void vusage_error(const char *fmt, va_list ap)
{
	fputs("podfs: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputs(" (see podfs --help)\n", stderr);
}

void opts_usage_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vusage_error(fmt, ap);
	va_end(ap);
}

static bool parse_seconds(const char *v, double *out, bool positive)
{
	char *end;
	errno = 0;
	double d = strtod(v, &end);
	if (errno || end == v || *end || d < 0 || d > 1e7 || (positive && d <= 0))
		return false;
	*out = d;
	return true;
}

/* "123", "64K", "1G": bytes with an optional binary suffix. */
static bool parse_size(const char *v, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long n = strtoull(v, &end, 10);
	if (errno || end == v || v[0] == '-')
		return false;
	unsigned shift = 0;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default: break;
	}
	if (*end == 'i' && shift)
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end || (shift && n > (UINT64_MAX >> shift)))
		return false;
	*out = (uint64_t)n << shift;
	return true;
}

static char *dup_or_die(const char *s)
{
	char *d = strdup(s);
	if (!d) {
		fputs("podfs: out of memory\n", stderr);
		exit(1);
	}
	return d;
}

/* Splits HOST[:PORT][:/PATH] or [V6ADDR][:PORT][:/PATH]. Returns 0 or -1
 * after printing the error. */
static int parse_source(struct client *c, const char *src, long *port)
{
	const char *p = src, *h, *hend;

	if (*p == '[') {
		h = p + 1;
		hend = strchr(h, ']');
		if (!hend) {
			opts_usage_error("bad server address '%s'", src);
			return -1;
		}
		p = hend + 1;
	} else {
		h = p;
		hend = p + strcspn(p, ":");
		p = hend;
	}
	if (hend == h) {
		opts_usage_error("no server host in '%s'", src);
		return -1;
	}
	if (*p == ':') {
		p++;
		if (*p && *p != '/') {
			char *end;
			long n = strtol(p, &end, 10);
			if (end == p || n < 1 || n > 65535 || (*end && *end != ':')) {
				opts_usage_error("bad server port in '%s'", src);
				return -1;
			}
			*port = n;
			p = *end ? end + 1 : end;
		}
		if (*p && *p != '/') {
			opts_usage_error("bad server address '%s'", src);
			return -1;
		}
		/* mount(8) style HOST:/PATH: only the export root exists so far. */
		if (*p && strspn(p, "/") != strlen(p)) {
			fprintf(stderr, "podfs: cannot mount '%s': only the export root (HOST:/) "
					"can be mounted\n", p);
			return -1;
		}
	} else if (*p) {
		opts_usage_error("bad server address '%s'", src);
		return -1;
	}
	c->host = strndup(h, (size_t)(hend - h));
	if (!c->host) {
		fputs("podfs: out of memory\n", stderr);
		exit(1);
	}
	return 0;
}

void opts_defaults(struct client *c)
{
	c->timeo = 30;
	c->attr_timeout = 3600.0;
	c->entry_timeout = 3600.0;
	c->negative_timeout = 3600.0;
	c->lock_retry = LOCKS_FALLBACK_MS / 1000.0;
	c->max_inline = PFS_INLINE_MAX;
	c->log_level = PFS_LOG_NOTICE;
	c->wb_threads = 4;
	c->conns = PFS_CONNS_DEFAULT;
	c->tls = true;
	c->spin_us = -1; /* auto */
	c->wb_max = (size_t)128 << 20;
	c->cache_size = (uint64_t)1 << 30;
	c->retry_min = -1;
	c->mlock.fd = -1;
	c->peer_cache = PEER_CACHE_DEFAULT;
	c->peer_min = PEER_MIN_DEFAULT;
	c->peer_timeout = PEER_TIMEOUT_DEFAULT;
}

/* ---- the option table ---- */

/* What the parse collects besides the fields of struct client. */
struct parse {
	struct client *c;
	char *keyfile;     /* key=FILE (a template: fuse_opt_parse sets it) */
	char *pass;        /* mount options for libfuse (fuse_opt_add_opt_escaped) */
	char *fsname;
	char *subtype;
	char *src, *mnt;   /* the two arguments */
	long port_opt;     /* -1: not given */
	bool cache_size;   /* cache_size= given */
	bool peer_opt;     /* a peer_*= option given */
	int result;        /* why the parse stopped: see opts_parse */
};

enum {
	KEY_HELP,
	KEY_VERSION,
	KEY_FOREGROUND,
	KEY_DEBUG,
	KEY_PASS, /* a mount flag libfuse passes to the kernel or fusermount */
	KEY_SOFT,
	KEY_PORT,
	KEY_TIMEO,
	KEY_ATTR_TIMEOUT,
	KEY_ENTRY_TIMEOUT,
	KEY_NEGATIVE_TIMEOUT,
	KEY_LOCK_RETRY,
	KEY_LZ4,
	KEY_MAX_INLINE,
	KEY_WB_THREADS,
	KEY_WB_MAX,
	KEY_SPIN,
	KEY_CONNS,
	KEY_TLS,
	KEY_NOTLS,
	KEY_TLS_CA,
	KEY_TLS_NAME,
	KEY_CACHE_DIR,
	KEY_CACHE_SIZE,
	KEY_METRICS,
	KEY_LOG_LEVEL,
	KEY_FSNAME,
	KEY_SUBTYPE,
	KEY_BG,
	KEY_FG,
	KEY_RETRY,
	KEY_PEERS,
	KEY_DELEGATE,
	KEY_PEER_PORT,
	KEY_PEER_CACHE,
	KEY_PEER_MIN,
	KEY_PEER_TIMEOUT,
};

/* Options of mount(8) and fstab that mean nothing here. */
#define IGNORED(word) FUSE_OPT_KEY(word, FUSE_OPT_KEY_DISCARD)

static const struct fuse_opt spec[] = {
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	FUSE_OPT_KEY("-f", KEY_FOREGROUND),
	FUSE_OPT_KEY("-d", KEY_DEBUG),
	FUSE_OPT_KEY("--debug", KEY_DEBUG),
	{ "key=%s", offsetof(struct parse, keyfile), 0 },
	FUSE_OPT_KEY("port=", KEY_PORT),
	FUSE_OPT_KEY("soft", KEY_SOFT),
	FUSE_OPT_KEY("timeo=", KEY_TIMEO),
	FUSE_OPT_KEY("attr_timeout=", KEY_ATTR_TIMEOUT),
	FUSE_OPT_KEY("entry_timeout=", KEY_ENTRY_TIMEOUT),
	FUSE_OPT_KEY("negative_timeout=", KEY_NEGATIVE_TIMEOUT),
	FUSE_OPT_KEY("lock_retry=", KEY_LOCK_RETRY),
	FUSE_OPT_KEY("lz4=", KEY_LZ4),
	FUSE_OPT_KEY("max_inline=", KEY_MAX_INLINE),
	FUSE_OPT_KEY("wb_threads=", KEY_WB_THREADS),
	FUSE_OPT_KEY("wb_max=", KEY_WB_MAX),
	FUSE_OPT_KEY("spin=", KEY_SPIN),
	FUSE_OPT_KEY("conns=", KEY_CONNS),
	FUSE_OPT_KEY("tls=", KEY_TLS),
	FUSE_OPT_KEY("notls", KEY_NOTLS),
	FUSE_OPT_KEY("tls_ca=", KEY_TLS_CA),
	FUSE_OPT_KEY("tls_name=", KEY_TLS_NAME),
	FUSE_OPT_KEY("cache_dir=", KEY_CACHE_DIR),
	FUSE_OPT_KEY("cache_size=", KEY_CACHE_SIZE),
	FUSE_OPT_KEY("metrics=", KEY_METRICS),
	FUSE_OPT_KEY("log_level=", KEY_LOG_LEVEL),
	FUSE_OPT_KEY("fsname=", KEY_FSNAME),
	FUSE_OPT_KEY("subtype=", KEY_SUBTYPE),
	FUSE_OPT_KEY("bg", KEY_BG),
	FUSE_OPT_KEY("fg", KEY_FG),
	FUSE_OPT_KEY("retry=", KEY_RETRY),
	FUSE_OPT_KEY("peers", KEY_PEERS),
	FUSE_OPT_KEY("delegate", KEY_DELEGATE),
	FUSE_OPT_KEY("peer_port=", KEY_PEER_PORT),
	FUSE_OPT_KEY("peer_cache=", KEY_PEER_CACHE),
	FUSE_OPT_KEY("peer_min=", KEY_PEER_MIN),
	FUSE_OPT_KEY("peer_timeout=", KEY_PEER_TIMEOUT),
	FUSE_OPT_KEY("ro", KEY_PASS),
	FUSE_OPT_KEY("rw", KEY_PASS),
	FUSE_OPT_KEY("suid", KEY_PASS),
	FUSE_OPT_KEY("nosuid", KEY_PASS),
	FUSE_OPT_KEY("dev", KEY_PASS),
	FUSE_OPT_KEY("nodev", KEY_PASS),
	FUSE_OPT_KEY("exec", KEY_PASS),
	FUSE_OPT_KEY("noexec", KEY_PASS),
	FUSE_OPT_KEY("async", KEY_PASS),
	FUSE_OPT_KEY("sync", KEY_PASS),
	FUSE_OPT_KEY("dirsync", KEY_PASS),
	FUSE_OPT_KEY("atime", KEY_PASS),
	FUSE_OPT_KEY("noatime", KEY_PASS),
	FUSE_OPT_KEY("auto_unmount", KEY_PASS),
	FUSE_OPT_KEY("context=", KEY_PASS),
	FUSE_OPT_KEY("fscontext=", KEY_PASS),
	FUSE_OPT_KEY("defcontext=", KEY_PASS),
	FUSE_OPT_KEY("rootcontext=", KEY_PASS),
	IGNORED("_netdev"),
	IGNORED("nofail"),
	IGNORED("auto"),
	IGNORED("noauto"),
	IGNORED("user"),
	IGNORED("nouser"),
	IGNORED("users"),
	IGNORED("defaults"),
	IGNORED("relatime"),
	IGNORED("norelatime"),
	IGNORED("strictatime"),
	IGNORED("nostrictatime"),
	IGNORED("lazytime"),
	IGNORED("nolazytime"),
	IGNORED("allow_other"),
	IGNORED("default_permissions"),
	IGNORED("hard"),
	FUSE_OPT_END
};

/* A usage error: one line on stderr, exit EXIT_USAGE. Returns -1 (for
 * opt_proc: stop). */
static int bad(struct parse *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(struct parse *p, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vusage_error(fmt, ap);
	va_end(ap);
	p->result = OPTS_EXIT_USAGE;
	return -1;
}

/* A whole decimal number in [min, max] at v. */
static bool parse_long(const char *v, long min, long max, long *out)
{
	char *end;
	long n = strtol(v, &end, 10);
	if (end == v || *end || n < min || n > max)
		return false;
	*out = n;
	return true;
}

/* A seconds option of c (timeo, ...): 0, or -1 after the error. */
static int seconds(struct parse *p, const char *name, const char *v, double *out, bool positive)
{
	if (!parse_seconds(v, out, positive))
		return bad(p, "bad %s '%s'", name, v);
	return 0;
}

/* Replaces *dst with a copy of v. */
static void set_str(char **dst, const char *v)
{
	free(*dst);
	*dst = dup_or_die(v);
}

/* fuse_opt_parse's callback: every argument and -o option the table
 * gives no template of (key FUSE_OPT_KEY_OPT or _NONOPT) or a KEY_* of.
 * Returns 0 (consumed), or -1 to stop the parse, with p->result set. */
static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct parse *p = data;
	struct client *c = p->c;
	const char *eq = strchr(arg, '=');
	const char *v = eq ? eq + 1 : NULL;
	long n;
	(void)outargs;

	switch (key) {
	case KEY_HELP:
		usage(stdout);
		p->result = -1;
		return -1;
	case KEY_VERSION:
		printf("podfs %s (protocol %d, libfuse %d.%d)\n", PODFS_VERSION, PFS_VERSION,
		       FUSE_MAJOR_VERSION, FUSE_MINOR_VERSION);
		p->result = -1;
		return -1;
	case KEY_FOREGROUND:
		c->foreground = true;
		return 0;
	case KEY_DEBUG:
		c->debug = true;
		c->foreground = true;
		return 0;
	case KEY_PASS:
		if (fuse_opt_add_opt_escaped(&p->pass, arg) < 0) {
			fputs("podfs: out of memory\n", stderr);
			p->result = OPTS_EXIT_USAGE;
			return -1;
		}
		return 0;
	case KEY_SOFT:
		c->soft = true;
		return 0;
	case KEY_PORT:
		if (!parse_long(v, 1, 65535, &n))
			return bad(p, "bad port '%s'", v);
		p->port_opt = n;
		return 0;
	case KEY_TIMEO:
		return seconds(p, "timeo", v, &c->timeo, true);
	case KEY_ATTR_TIMEOUT:
		return seconds(p, "attr_timeout", v, &c->attr_timeout, false);
	case KEY_ENTRY_TIMEOUT:
		return seconds(p, "entry_timeout", v, &c->entry_timeout, false);
	case KEY_NEGATIVE_TIMEOUT:
		return seconds(p, "negative_timeout", v, &c->negative_timeout, false);
	case KEY_LOCK_RETRY:
		if (!parse_seconds(v, &c->lock_retry, true) || c->lock_retry > 3600)
			return bad(p, "bad lock_retry '%s' (seconds, more than 0, at most 3600)", v);
		return 0;
	case KEY_LZ4:
		if (pfs_lz4_mode_parse(v, &c->lz4) < 0)
			return bad(p, "bad lz4 '%s' (auto, always or never)", v);
		return 0;
	case KEY_MAX_INLINE: {
		uint64_t size;
		if (!parse_size(v, &size) || size > PFS_INLINE_MAX)
			return bad(p, "bad max_inline '%s' (0..%u)", v, PFS_INLINE_MAX);
		c->max_inline = (uint32_t)size;
		return 0;
	}
	case KEY_WB_THREADS:
		if (!parse_long(v, 0, 64, &n))
			return bad(p, "bad wb_threads '%s'", v);
		c->wb_threads = (unsigned)n;
		return 0;
	case KEY_WB_MAX:
		if (!parse_long(v, 2, 65536, &n))
			return bad(p, "bad wb_max '%s'", v);
		c->wb_max = (size_t)n << 20;
		return 0;
	case KEY_SPIN: {
		char *end;
		n = strcmp(v, "auto") == 0 ? -1 : strtol(v, &end, 10);
		if (n != -1 && (end == v || *end || n < 0 || n > LOOP_SPIN_US_MAX))
			return bad(p, "bad spin '%s' (auto, or microseconds 0..%d)", v,
				   LOOP_SPIN_US_MAX);
		c->spin_us = (int)n;
		return 0;
	}
	case KEY_TLS:
		if (strcmp(v, "on") == 0)
			c->tls = true;
		else if (strcmp(v, "off") == 0)
			c->tls = false;
		else
			return bad(p, "bad tls '%s' (on or off)", v);
		return 0;
	case KEY_NOTLS:
		c->tls = false;
		return 0;
	case KEY_TLS_CA:
		if (!v[0])
			return bad(p, "tls_ca needs a file of CA certificates");
		set_str(&c->tls_ca, v);
		return 0;
	case KEY_TLS_NAME:
		if (!v[0] || strlen(v) > 253)
			return bad(p, "bad tls_name '%s' (a DNS name or an IP address)", v);
		set_str(&c->tls_name, v);
		return 0;
	case KEY_CONNS:
		if (!parse_long(v, 1, PFS_CONNS_MAX, &n))
			return bad(p, "bad conns '%s' (1..%u)", v, PFS_CONNS_MAX);
		c->conns = (unsigned)n;
		return 0;
	case KEY_CACHE_DIR:
		if (!v[0])
			return bad(p, "cache_dir needs a directory");
		set_str(&c->cache_dir, v);
		return 0;
	case KEY_CACHE_SIZE:
		if (!parse_size(v, &c->cache_size) || c->cache_size < ((uint64_t)1 << 20))
			return bad(p, "bad cache_size '%s' (a size with K/M/G/T, at least 1M)", v);
		p->cache_size = true;
		return 0;
	case KEY_METRICS:
		if (pfs_addr_parse(v, -1, &c->metrics_addr) < 0)
			return bad(p, "bad metrics '%s' (want a numeric ADDR:PORT, e.g. 127.0.0.1:7051)",
				   v);
		c->metrics = true;
		return 0;
	case KEY_LOG_LEVEL:
		c->log_level = pfs_log_level_parse(v);
		if (c->log_level < 0)
			return bad(p, "bad log_level '%s'", v);
		return 0;
	case KEY_FSNAME:
	case KEY_SUBTYPE:
		if (!v[0])
			break; /* "fsname=" alone names nothing: unknown */
		set_str(key == KEY_FSNAME ? &p->fsname : &p->subtype, v);
		return 0;
	case KEY_BG:
	case KEY_FG:
		c->bg = key == KEY_BG;
		return 0;
	case KEY_RETRY:
		if (v[0] < '0' || v[0] > '9' || !parse_seconds(v, &c->retry_min, false) ||
		    c->retry_min > MOUNTWAIT_RETRY_MAX)
			return bad(p, "bad retry '%s' (minutes, 0..%d)", v, MOUNTWAIT_RETRY_MAX);
		return 0;
	case KEY_PEERS:
		c->peers = true;
		return 0;
	case KEY_DELEGATE:
		c->delegate = true;
		return 0;
	case KEY_PEER_PORT:
		if (!parse_long(v, 1, 65535, &n))
			return bad(p, "bad peer_port '%s' (1..65535)", v);
		c->peer_port = (uint16_t)n;
		p->peer_opt = true;
		return 0;
	case KEY_PEER_CACHE: {
		uint64_t size;
		if (!parse_size(v, &size) || size < ((uint64_t)8 << 20) || size > ((uint64_t)1 << 40))
			return bad(p, "bad peer_cache '%s' (a size with K/M/G, 8M..1T)", v);
		c->peer_cache = (size_t)size;
		p->peer_opt = true;
		return 0;
	}
	case KEY_PEER_MIN:
		if (!parse_size(v, &c->peer_min) || c->peer_min < ((uint64_t)1 << 20))
			return bad(p, "bad peer_min '%s' (a size with K/M/G/T, at least 1M)", v);
		p->peer_opt = true;
		return 0;
	case KEY_PEER_TIMEOUT:
		if (!parse_seconds(v, &c->peer_timeout, true) || c->peer_timeout > 600)
			return bad(p, "bad peer_timeout '%s' (seconds, more than 0, at most 600)", v);
		p->peer_opt = true;
		return 0;
	case FUSE_OPT_KEY_NONOPT:
		break;
	default: /* FUSE_OPT_KEY_OPT */
		if (!arg[0] || strncmp(arg, "x-", 2) == 0 || strncmp(arg, "comment=", 8) == 0)
			return 0; /* an empty -o item, or fstab's own */
		break;
	}
	if (key == FUSE_OPT_KEY_NONOPT || strcmp(arg, "-") == 0) {
		if (!p->src)
			p->src = dup_or_die(arg);
		else if (!p->mnt)
			p->mnt = dup_or_die(arg);
		else
			return bad(p, "unexpected argument '%s'", arg);
		return 0;
	}
	return bad(p, "unknown option '%s'", arg);
}

/* fuse_opt_parse takes a bare "--" for the end of the options and
 * reports a "-o" without its argument in its own words; podfs never took
 * the one and words the other its own way. The index of the first such
 * argument, or argc. */
static int parse_end(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0)
			return i;
		if (strcmp(argv[i], "-o") == 0 && ++i >= argc)
			return i - 1;
	}
	return argc;
}

int opts_parse(struct client *c, int argc, char **argv, struct fuse_args *fa)
{
	struct parse p = { .c = c, .port_opt = -1 };
	int end = parse_end(argc, argv);
	struct fuse_args args = FUSE_ARGS_INIT(end, argv);
	long port = PFS_DEFAULT_PORT;
	int rc;

	if (fuse_opt_parse(&args, &p, spec, opt_proc) < 0) {
		rc = p.result ? p.result : 1; /* else libfuse said why (out of memory) */
		goto out;
	}
	rc = OPTS_EXIT_USAGE;
	if (end < argc) {
		if (strcmp(argv[end], "--") == 0)
			bad(&p, "unknown option '%s'", argv[end]);
		else
			bad(&p, "-o needs an argument");
		goto out;
	}
	if (!p.src || !p.mnt) {
		bad(&p, "need a server and a mount point");
		goto out;
	}
	if (p.cache_size && !c->cache_dir) {
		bad(&p, "cache_size needs cache_dir");
		goto out;
	}
	if ((c->tls_ca || c->tls_name) && !c->tls) {
		bad(&p, "tls_ca and tls_name need tls=on");
		goto out;
	}
	if (c->tls_name && !c->tls_ca) {
		bad(&p, "tls_name needs tls_ca");
		goto out;
	}
	if (p.peer_opt && !c->peers) {
		bad(&p, "peer_port, peer_cache, peer_min and peer_timeout need peers");
		goto out;
	}
	if (parse_source(c, p.src, &port) < 0)
		goto out;
	if (p.port_opt > 0)
		port = p.port_opt;
	c->port = (uint16_t)port;

	char buf[PATH_MAX + 64];
	bool v6 = strchr(c->host, ':') != NULL;
	snprintf(buf, sizeof(buf), v6 ? "[%s]:%u" : "%s:%u", c->host, (unsigned)c->port);
	c->hostport = dup_or_die(buf);
	if (c->tls_ca && !c->tls_name)
		c->tls_name = dup_or_die(c->host); /* the name tls_ca's certificate must carry */

	char *real = realpath(p.mnt, NULL);
	struct stat st;
	if (!real || stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "podfs: bad mount point '%s': %s\n", p.mnt,
			real ? strerror(ENOTDIR) : strerror(errno));
		free(real);
		rc = 1;
		goto out;
	}
	c->mountpoint = real;

	/* One podfs per mount point at a time, from this check until it has
	 * mounted or given up (mountwait_i.h): a bg mount may retry for
	 * days, and a second mount -a meanwhile must not start another. */
	pid_t holder;
	int lrc = mountwait_lock(MOUNTWAIT_LOCK_DIR, real, &c->mlock, &holder);
	if (lrc == -EBUSY) {
		char who[32] = "";
		if (holder > 0)
			snprintf(who, sizeof(who), " (pid %d)", (int)holder);
		if (c->bg) {
			/* mount -a again: the mount is on its way already. */
			fprintf(stderr, "podfs: %s is already being mounted in the background%s; "
					"not starting another\n", real, who);
			rc = -1;
		} else {
			fprintf(stderr, "podfs: %s is already being mounted by another podfs%s "
					"(a bg mount still retrying?)\n", real, who);
			rc = 32;
		}
		goto out;
	}
	if (lrc < 0)
		pfs_info("no mount lock in %s (%s): going on without", MOUNTWAIT_LOCK_DIR,
			 strerror(-lrc));

	/* mount(8) tells an fstab line is mounted by the source and type it
	 * finds at the mount point (fsname below); a podfs mounted by hand
	 * over an active one would hide it and its open files. */
	char dev[64], fstype[PATH_MAX + 64], want[PATH_MAX + 64];
	snprintf(want, sizeof(want), "fuse.%s", p.subtype ? p.subtype : "podfs");
	if (mountinfo_top(real, dev, sizeof(dev), fstype, sizeof(fstype)) &&
	    strcmp(fstype, want) == 0) {
		fprintf(stderr, "podfs: %s is already a podfs mount point (unmount it first: "
				"fusermount3 -u %s)\n", real, real);
		rc = 32; /* mount(8)'s "mount failure" */
		goto out;
	}

	/* libfuse's arguments: allow_other and default_permissions always.
	 * Values go escaped: libfuse unescapes its options once more. */
	char *o = NULL;
	char fsname[PATH_MAX + 64], subtype[PATH_MAX + 64];
	/* The source as given (fstab's first field): mount -a compares it. */
	snprintf(fsname, sizeof(fsname), "fsname=%s", p.fsname ? p.fsname : p.src);
	snprintf(subtype, sizeof(subtype), "subtype=%s", p.subtype ? p.subtype : "podfs");
	if (fuse_opt_add_opt(&o, "allow_other,default_permissions") < 0 ||
	    fuse_opt_add_opt_escaped(&o, fsname) < 0 || fuse_opt_add_opt_escaped(&o, subtype) < 0 ||
	    (p.pass && fuse_opt_add_opt(&o, p.pass) < 0) || fuse_opt_add_arg(fa, argv[0]) < 0 ||
	    (c->debug && fuse_opt_add_arg(fa, "-d") < 0) || fuse_opt_add_arg(fa, "-o") < 0 ||
	    fuse_opt_add_arg(fa, o) < 0) {
		free(o);
		fputs("podfs: out of memory\n", stderr);
		rc = 1;
		goto out;
	}
	free(o);
	c->keyfile = p.keyfile ? p.keyfile : dup_or_die(DEFAULT_KEY);
	p.keyfile = NULL;
	rc = 0;
out:
	fuse_opt_free_args(&args);
	free(p.keyfile);
	free(p.pass);
	free(p.fsname);
	free(p.subtype);
	free(p.src);
	free(p.mnt);
	return rc;
}

