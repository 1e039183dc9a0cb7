/* main.c: podfs command line, mount options, start-up, the FUSE session
 * and an orderly shutdown.
 *
 *   podfs HOST[:PORT][:/] MOUNTPOINT [-f] [-d] [-o OPTIONS]
 *   podfs keygen FILE
 *
 * Start-up order matters: the first connection and the handshake run in
 * the foreground (their errors exit 1 on the terminal), then the session
 * is mounted, then the process daemonizes (fork: no thread may exist
 * before it), and only then the connection, push and signal threads
 * start.
 */
#include <errno.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

#include "cache_i.h"
#include "locks_i.h"
#include "loop_i.h"
#include "ofile_i.h"
#include "ops_i.h"
#include "push_i.h"
#include "readahead_i.h"
#include "client_i.h"
#include "creds_i.h"
#include "gate_i.h"
#include "inode_i.h"
#include "pcache_i.h"
#include "podfs/auth.h"
#include "podfs/frame.h"
#include "podfs/log.h"
#include "rpc_i.h"
#include "transport_i.h"
#include "wb_i.h"

#define DEFAULT_KEY "/etc/podfs/pod.key"
#define EXIT_USAGE 2

static void usage(FILE *f)
{
	fprintf(f,
		"usage: podfs HOST[:PORT][:/] MOUNTPOINT [-f] [-d] [-o OPTION[,OPTION...]]\n"
		"       podfs keygen FILE\n"
		"       podfs warm PATH...   pre-load trees of a mount into the caches\n"
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
		"  attr_timeout=S      attribute cache time (default 3600; the server\n"
		"                      pushes invalidations, so long is safe)\n"
		"  entry_timeout=S     name cache time (default 3600)\n"
		"  negative_timeout=S  negative name cache time (default 3600; 0: none)\n"
		"  max_inline=BYTES    small files travel with their lookup up to this\n"
		"                      size (default 65536, at most 65536; 0: never)\n"
		"  lz4=MODE            LZ4 for requests (writes): auto (only while the\n"
		"                      link is backed up), always or never (default auto)\n"
		"  log_level=LEVEL     err, warning, notice, info or debug\n"
		"  wb_threads=N        writes in flight per mount, sent behind the\n"
		"                      application (default 4; 0: synchronous writes)\n"
		"  wb_max=MIB          write data held by write-behind, pending or not\n"
		"                      yet committed (default 128)\n"
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
		"  ro, rw, nosuid, nodev, noexec, sync, dirsync, noatime, ...,\n"
		"  fsname=NAME, subtype=NAME, auto_unmount: as for any FUSE mount\n",
		PFS_DEFAULT_PORT, PFS_CONNS_MAX, PFS_CONNS_DEFAULT, LOOP_SPIN_US_DEFAULT,
		LOOP_SLOW_WAKE_US);
}

static void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void usage_error(const char *fmt, ...)
{
	va_list ap;
	fputs("podfs: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (see podfs --help)\n", stderr);
}

/* ---- option parsing ---- */

struct strbuf {
	char *s;
	size_t len, cap;
};

static int sb_add(struct strbuf *b, const char *s, size_t n)
{
	if (b->len + n + 2 > b->cap) {
		size_t cap = (b->len + n + 2) * 2;
		char *ns = realloc(b->s, cap);
		if (!ns)
			return -ENOMEM;
		b->s = ns;
		b->cap = cap;
	}
	if (b->len)
		b->s[b->len++] = ',';
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = 0;
	return 0;
}

struct parsed {
	struct strbuf pass; /* mount options for libfuse */
	char *fsname;
	char *subtype;
	long port_opt;      /* -1: not given */
	bool cache_size;    /* cache_size= given */
};

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

static bool is_one_of(const char *s, const char *const *list)
{
	for (; *list; list++)
		if (strcmp(s, *list) == 0)
			return true;
	return false;
}

static bool has_prefix(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

static bool has_any_prefix(const char *s, const char *const *list)
{
	for (; *list; list++)
		if (has_prefix(s, *list))
			return true;
	return false;
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

/* Parses one -o argument. Returns 0, or -1 after printing the error. */
static int parse_opts(struct client *c, struct parsed *p, const char *arg)
{
	/* Mount flags libfuse passes to the kernel or fusermount. */
	static const char *const pass_flags[] = { "ro", "rw", "suid", "nosuid", "dev", "nodev",
						  "exec", "noexec", "async", "sync", "dirsync",
						  "atime", "noatime", "auto_unmount", NULL };
	static const char *const pass_prefixes[] = { "context=", "fscontext=", "defcontext=",
						     "rootcontext=", NULL };
	/* Options of mount(8) and fstab that mean nothing here. */
	static const char *const ignored[] = { "_netdev", "nofail", "auto", "noauto", "user",
					       "nouser", "users", "defaults", "relatime",
					       "norelatime", "strictatime", "nostrictatime",
					       "lazytime", "nolazytime", "allow_other",
					       "default_permissions", "hard", NULL };
	char *copy = dup_or_die(arg);
	char *save = NULL;
	int rc = 0;

	for (char *o = strtok_r(copy, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(o, '=');
		const char *v = eq ? eq + 1 : NULL;

		if (is_one_of(o, ignored) || has_prefix(o, "x-") || has_prefix(o, "comment=")) {
			continue;
		} else if (is_one_of(o, pass_flags)) {
			if (sb_add(&p->pass, o, strlen(o)) < 0)
				goto oom;
		} else if (has_prefix(o, "key=")) {
			free(c->keyfile);
			c->keyfile = dup_or_die(v);
		} else if (has_prefix(o, "port=")) {
			char *end;
			long n = strtol(v, &end, 10);
			if (end == v || *end || n < 1 || n > 65535) {
				usage_error("bad port '%s'", v);
				goto bad;
			}
			p->port_opt = n;
		} else if (strcmp(o, "soft") == 0) {
			c->soft = true;
		} else if (has_prefix(o, "timeo=")) {
			if (!parse_seconds(v, &c->timeo, true)) {
				usage_error("bad timeo '%s'", v);
				goto bad;
			}
		} else if (has_prefix(o, "attr_timeout=")) {
			if (!parse_seconds(v, &c->attr_timeout, false)) {
				usage_error("bad attr_timeout '%s'", v);
				goto bad;
			}
		} else if (has_prefix(o, "entry_timeout=")) {
			if (!parse_seconds(v, &c->entry_timeout, false)) {
				usage_error("bad entry_timeout '%s'", v);
				goto bad;
			}
		} else if (has_prefix(o, "negative_timeout=")) {
			if (!parse_seconds(v, &c->negative_timeout, false)) {
				usage_error("bad negative_timeout '%s'", v);
				goto bad;
			}
		} else if (has_prefix(o, "lock_retry=")) {
			if (!parse_seconds(v, &c->lock_retry, true) || c->lock_retry > 3600) {
				usage_error("bad lock_retry '%s' (seconds, more than 0, at most 3600)", v);
				goto bad;
			}
		} else if (has_prefix(o, "lz4=")) {
			if (pfs_lz4_mode_parse(v, &c->lz4) < 0) {
				usage_error("bad lz4 '%s' (auto, always or never)", v);
				goto bad;
			}
		} else if (has_prefix(o, "max_inline=")) {
			uint64_t n;
			if (!parse_size(v, &n) || n > PFS_INLINE_MAX) {
				usage_error("bad max_inline '%s' (0..%u)", v, PFS_INLINE_MAX);
				goto bad;
			}
			c->max_inline = (uint32_t)n;
		} else if (has_prefix(o, "wb_threads=") || has_prefix(o, "wb_max=")) {
			char *end;
			long n = strtol(v, &end, 10);
			bool thr = o[3] == 't';
			if (end == v || *end || n < 0 || n > (thr ? 64 : 65536) || (!thr && n < 2)) {
				usage_error("bad %s '%s'", thr ? "wb_threads" : "wb_max", v);
				goto bad;
			}
			if (thr)
				c->wb_threads = (unsigned)n;
			else
				c->wb_max = (size_t)n << 20;
		} else if (has_prefix(o, "spin=")) {
			char *end;
			long n = strcmp(v, "auto") == 0 ? -1 : strtol(v, &end, 10);
			if (n != -1 && (end == v || *end || n < 0 || n > LOOP_SPIN_US_MAX)) {
				usage_error("bad spin '%s' (auto, or microseconds 0..%d)", v,
					    LOOP_SPIN_US_MAX);
				goto bad;
			}
			c->spin_us = (int)n;
		} else if (has_prefix(o, "conns=")) {
			char *end;
			long n = strtol(v, &end, 10);
			if (end == v || *end || n < 1 || n > PFS_CONNS_MAX) {
				usage_error("bad conns '%s' (1..%u)", v, PFS_CONNS_MAX);
				goto bad;
			}
			c->conns = (unsigned)n;
		} else if (has_prefix(o, "cache_dir=")) {
			if (!v[0]) {
				usage_error("cache_dir needs a directory");
				goto bad;
			}
			free(c->cache_dir);
			c->cache_dir = dup_or_die(v);
		} else if (has_prefix(o, "cache_size=")) {
			if (!parse_size(v, &c->cache_size) || c->cache_size < ((uint64_t)1 << 20)) {
				usage_error("bad cache_size '%s' (a size with K/M/G/T, at least 1M)", v);
				goto bad;
			}
			p->cache_size = true;
		} else if (has_prefix(o, "log_level=")) {
			c->log_level = pfs_log_level_parse(v);
			if (c->log_level < 0) {
				usage_error("bad log_level '%s'", v);
				goto bad;
			}
		} else if (has_prefix(o, "fsname=") && v[0]) {
			free(p->fsname);
			p->fsname = dup_or_die(v);
		} else if (has_prefix(o, "subtype=") && v[0]) {
			free(p->subtype);
			p->subtype = dup_or_die(v);
		} else if (has_any_prefix(o, pass_prefixes)) {
			if (sb_add(&p->pass, o, strlen(o)) < 0)
				goto oom;
		} else {
			usage_error("unknown option '%s'", o);
			goto bad;
		}
	}
	free(copy);
	return rc;
oom:
	fputs("podfs: out of memory\n", stderr);
bad:
	free(copy);
	return -1;
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
			usage_error("bad server address '%s'", src);
			return -1;
		}
		p = hend + 1;
	} else {
		h = p;
		hend = p + strcspn(p, ":");
		p = hend;
	}
	if (hend == h) {
		usage_error("no server host in '%s'", src);
		return -1;
	}
	if (*p == ':') {
		p++;
		if (*p && *p != '/') {
			char *end;
			long n = strtol(p, &end, 10);
			if (end == p || n < 1 || n > 65535 || (*end && *end != ':')) {
				usage_error("bad server port in '%s'", src);
				return -1;
			}
			*port = n;
			p = *end ? end + 1 : end;
		}
		if (*p && *p != '/') {
			usage_error("bad server address '%s'", src);
			return -1;
		}
		/* mount(8) style HOST:/PATH: only the export root exists so far. */
		if (*p && strspn(p, "/") != strlen(p)) {
			fprintf(stderr, "podfs: cannot mount '%s': only the export root (HOST:/) "
					"can be mounted\n", p);
			return -1;
		}
	} else if (*p) {
		usage_error("bad server address '%s'", src);
		return -1;
	}
	c->host = strndup(h, (size_t)(hend - h));
	if (!c->host) {
		fputs("podfs: out of memory\n", stderr);
		exit(1);
	}
	return 0;
}

/* Fills c and the libfuse argument vector. Returns 0, or the exit code. */
static int parse_cmdline(struct client *c, int argc, char **argv, struct fuse_args *fa)
{
	struct parsed p = { .port_opt = -1 };
	const char *src = NULL, *mnt = NULL;
	long port = PFS_DEFAULT_PORT;
	int rc = EXIT_USAGE;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			rc = -1;
			goto out;
		} else if (strcmp(a, "-V") == 0 || strcmp(a, "--version") == 0) {
			printf("podfs %s (protocol %d, libfuse %d.%d)\n", PODFS_VERSION, PFS_VERSION,
			       FUSE_MAJOR_VERSION, FUSE_MINOR_VERSION);
			rc = -1;
			goto out;
		} else if (strcmp(a, "-f") == 0) {
			c->foreground = true;
		} else if (strcmp(a, "-d") == 0 || strcmp(a, "--debug") == 0) {
			c->debug = true;
			c->foreground = true;
		} else if (strcmp(a, "-o") == 0) {
			if (i + 1 >= argc) {
				usage_error("-o needs an argument");
				goto out;
			}
			if (parse_opts(c, &p, argv[++i]) < 0)
				goto out;
		} else if (strncmp(a, "-o", 2) == 0) {
			if (parse_opts(c, &p, a + 2) < 0)
				goto out;
		} else if (a[0] == '-' && a[1]) {
			usage_error("unknown option '%s'", a);
			goto out;
		} else if (!src) {
			src = a;
		} else if (!mnt) {
			mnt = a;
		} else {
			usage_error("unexpected argument '%s'", a);
			goto out;
		}
	}
	if (!src || !mnt) {
		usage_error("need a server and a mount point");
		goto out;
	}
	if (p.cache_size && !c->cache_dir) {
		usage_error("cache_size needs cache_dir");
		goto out;
	}
	if (parse_source(c, src, &port) < 0)
		goto out;
	if (p.port_opt > 0)
		port = p.port_opt;
	c->port = (uint16_t)port;

	char buf[PATH_MAX + 64];
	bool v6 = strchr(c->host, ':') != NULL;
	snprintf(buf, sizeof(buf), v6 ? "[%s]:%u" : "%s:%u", c->host, (unsigned)c->port);
	c->hostport = dup_or_die(buf);

	char *real = realpath(mnt, NULL);
	struct stat st;
	if (!real || stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "podfs: bad mount point '%s': %s\n", mnt,
			real ? strerror(ENOTDIR) : strerror(errno));
		free(real);
		rc = 1;
		goto out;
	}
	c->mountpoint = real;

	/* libfuse's arguments: allow_other and default_permissions always. */
	struct strbuf o = { 0 };
	snprintf(buf, sizeof(buf), "allow_other,default_permissions,fsname=%s%s,subtype=%s",
		 p.fsname ? "" : "podfs#", p.fsname ? p.fsname : c->hostport,
		 p.subtype ? p.subtype : "podfs");
	if (sb_add(&o, buf, strlen(buf)) < 0 || (p.pass.len && sb_add(&o, p.pass.s, p.pass.len) < 0) ||
	    fuse_opt_add_arg(fa, argv[0]) < 0 || (c->debug && fuse_opt_add_arg(fa, "-d") < 0) ||
	    fuse_opt_add_arg(fa, "-o") < 0 || fuse_opt_add_arg(fa, o.s) < 0) {
		free(o.s);
		fputs("podfs: out of memory\n", stderr);
		rc = 1;
		goto out;
	}
	free(o.s);
	rc = 0;
out:
	free(p.pass.s);
	free(p.fsname);
	free(p.subtype);
	return rc;
}

/* ---- signals ---- */

struct sigctl {
	struct client *c;
	int wake_fd; /* the request loop's (loop_wake) */
	pthread_t thr;
	atomic_bool loop_done;
};

/* sigwait()s for SIGTERM/SIGINT/SIGHUP; on one, ends the session loop.
 * libfuse's own handlers cannot be used: the loop joins its workers, and
 * a worker blocked in a hard-mount call would never return. */
static void *sig_main(void *arg)
{
	struct sigctl *sc = arg;
	sigset_t set;
	int sig;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR2);
	for (;;) {
		/* Wake up now and then: an unmount (fusermount3 -u) ends the
		 * session without a signal, and a worker blocked in a call to
		 * a lost server would then keep the loop from ever returning. */
		struct timespec tick = { 0, 200 * 1000 * 1000 };
		sig = sigtimedwait(&set, NULL, &tick);
		if (sig < 0) {
			if (fuse_session_exited(sc->c->se) && !atomic_load(&sc->loop_done)) {
				pfs_info("unmounted: finishing");
				break;
			}
			continue;
		}
		if (sig == SIGUSR2) {
			if (atomic_load(&sc->loop_done))
				return NULL;
			continue;
		}
		pfs_info("signal %d: unmounting", sig);
		break;
	}
	fuse_session_exit(sc->c->se);
	/* Calls waiting for a lost server fail now; live ones finish. */
	rpc_closing(sc->c->rpc);

	sigset_t usr2;
	sigemptyset(&usr2);
	sigaddset(&usr2, SIGUSR2);
	for (int i = 0; !atomic_load(&sc->loop_done); i++) {
		/* The loop's leader sleeps in poll(): wake it to see the exit
		 * flag. Repeat in case it was not asleep yet. */
		loop_wake(sc->wake_fd);
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		if (sigtimedwait(&usr2, NULL, &ts) == SIGUSR2 && atomic_load(&sc->loop_done))
			break;
		if (i == 100)
			rpc_kill(sc->c->rpc); /* 10 s: stop waiting for the server */
	}
	return NULL;
}

/* ---- what the transport tells (transport_i.h) ---- */

static void tr_up_cb(void *arg, const struct transport_up *u)
{
	struct client *c = arg;

	/* Before the pending requests go out again: lock requests wait for
	 * the reclaims (locks.c). */
	if (u->chan == 0 && c->lk)
		locks_connected(c->lk, u->boot_id, u->auth_flags, u->restarted);
	rpc_connected(c->rpc, u->chan, u->gen, u->codecs);
	/* Pushes sent while we were away are lost: revalidate. */
	if (u->chan == 0 && u->again && c->cache)
		cache_reconnected(c->cache);
}

static void tr_down_cb(void *arg, unsigned chan)
{
	struct client *c = arg;

	rpc_disconnected(c->rpc, chan);
	/* Pushes may be lost from now until the revalidation after the
	 * reconnect: nothing cached before counts as current (the locally
	 * answered GETATTR, trust_i.h). */
	if (chan == 0 && c->gate)
		gate_note_all(c->gate);
}

static void tr_reply_cb(void *arg, const struct pfs_frame_hdr *h, uint8_t *payload,
			uint64_t boot_id, uint64_t gen)
{
	struct client *c = arg;

	rpc_complete(c->rpc, h, payload, boot_id, gen);
}

static void tr_wake_cb(void *arg, const uint8_t *payload, size_t len)
{
	struct client *c = arg;

	locks_wake_push(c->lk, payload, len);
}

static uint64_t tr_note_cb(void *arg, uint16_t op, const uint8_t *payload, size_t len)
{
	return push_note(arg, op, payload, len);
}

static void tr_apply_cb(void *arg, uint16_t op, const uint8_t *payload, size_t len, uint64_t seq)
{
	struct client *c = arg;

	push_apply(c, op, payload, len, seq);
}

static bool tr_closing_cb(void *arg)
{
	struct client *c = arg;

	return rpc_is_closing(c->rpc);
}

/* ---- main ---- */

static int keygen(int argc, char **argv)
{
	if (argc != 3) {
		usage_error("usage: podfs keygen FILE");
		return EXIT_USAGE;
	}
	int rc = pfs_key_generate(argv[2]);
	if (rc < 0) {
		fprintf(stderr, "podfs: cannot create key file %s: %s\n", argv[2], strerror(-rc));
		return 1;
	}
	return 0;
}

int warm_main(int argc, char **argv); /* warm.c */

static void client_free(struct client *c)
{
	if (c->it)
		inode_table_on_forget(c->it, NULL, NULL);
	cache_free(c->cache);
	c->cache = NULL;
	locks_free(c->lk);
	c->lk = NULL;
	wb_free(c->wb);
	pcache_free(c->pc);
	ofile_free_all(c);
	inode_table_free(c->it);
	transport_free(c->tr);
	rpc_free(c->rpc);
	gate_free(c->gate);
	creds_cache_free(c->cc);
	free(c->host);
	free(c->hostport);
	free(c->mountpoint);
	free(c->keyfile);
	free(c->cache_dir);
	free(c->bdi_ra_path);
}

int main(int argc, char **argv)
{
	struct client c = {
		.of_lock = PTHREAD_MUTEX_INITIALIZER,
		.timeo = 30,
		.attr_timeout = 3600.0,
		.entry_timeout = 3600.0,
		.negative_timeout = 3600.0,
		.lock_retry = LOCKS_FALLBACK_MS / 1000.0,
		.max_inline = PFS_INLINE_MAX,
		.log_level = PFS_LOG_NOTICE,
		.wb_threads = 4,
		.conns = PFS_CONNS_DEFAULT,
		.spin_us = -1, /* auto */
		.estale = ESTALE_INIT,
		.wb_max = (size_t)128 << 20,
		.cache_size = (uint64_t)1 << 30,
	};
	struct fuse_args fa = FUSE_ARGS_INIT(0, NULL);
	struct sigctl sc = { .c = &c };
	struct pfs_entry root;
	char err[512];
	int rc, ret = 1;

	if (argc >= 2 && strcmp(argv[1], "keygen") == 0)
		return keygen(argc, argv);
	if (argc >= 2 && strcmp(argv[1], "warm") == 0)
		return warm_main(argc, argv);

	pfs_payload_alloc_tune();
	atomic_init(&c.next_fid, 1);
	atomic_init(&c.bdi_tuned, false);
	atomic_init(&sc.loop_done, false);
	rc = parse_cmdline(&c, argc, argv, &fa);
	if (rc != 0) {
		fuse_opt_free_args(&fa);
		client_free(&c);
		return rc < 0 ? 0 : rc;
	}
	if (c.debug)
		c.log_level = PFS_LOG_DEBUG;
	pfs_log_init("podfs", c.log_level);
	if (!c.keyfile)
		c.keyfile = dup_or_die(DEFAULT_KEY);

	if ((rc = pfs_key_load(c.keyfile, c.key, err, sizeof(err))) < 0) {
		fprintf(stderr, "podfs: %s\n", err);
		goto out_free;
	}
	if (pfs_random(&c.client_id, sizeof(c.client_id)) < 0) {
		fputs("podfs: no random bytes for the client id\n", stderr);
		goto out_free;
	}
	if (gethostname(c.hostname, sizeof(c.hostname) - 1) < 0)
		snprintf(c.hostname, sizeof(c.hostname), "unknown");
	c.hostname[PFS_HOSTNAME_MAX] = 0;

	if (c.cache_dir && (rc = pcache_open(c.cache_dir, c.cache_size, &c.pc, err, sizeof(err))) < 0) {
		fprintf(stderr, "podfs: %s\n", err);
		ret = EXIT_USAGE;
		goto out_free;
	}

	struct transport_cbs tcb = {
		.arg = &c, .up_cb = tr_up_cb, .down_cb = tr_down_cb, .reply_cb = tr_reply_cb,
		.wake_cb = tr_wake_cb, .note_cb = tr_note_cb, .apply_cb = tr_apply_cb,
		.closing_cb = tr_closing_cb,
	};
	if (rpc_new(&c, &c.rpc) < 0 || transport_new(&c, &tcb, &c.tr) < 0 ||
	    creds_cache_new(&c.cc) < 0 || gate_new(&c.gate) < 0 || cache_new(&c, &c.cache) < 0 ||
	    locks_new(&c, &c.lk) < 0 ||
	    wb_new(&c, c.wb_threads, c.wb_max, &c.wb) < 0) {
		fputs("podfs: out of memory\n", stderr);
		goto out_free;
	}

	signal(SIGPIPE, SIG_IGN);

	if ((rc = transport_connect_first(c.tr, &root, err, sizeof(err))) < 0) {
		fprintf(stderr, "podfs: %s\n", err);
		goto out_free;
	}
	if (inode_table_new(&root, &c.it) < 0) {
		fputs("podfs: out of memory\n", stderr);
		goto out_stop;
	}
	inode_table_on_forget(c.it, cache_forget_cb, c.cache);

	/* Signals: SIGTERM/INT/HUP go to the signal thread (sigwait), so
	 * every thread blocks them; a stray SIGUSR1 is ignored. Until here
	 * (connecting) they simply end the process: nothing is mounted. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGUSR1, SIG_IGN);

	c.se = fuse_session_new(&fa, &ops_fuse_ops, sizeof(ops_fuse_ops), &c);
	if (!c.se)
		goto out_stop; /* libfuse printed why */
	if (fuse_session_mount(c.se, c.mountpoint) != 0)
		goto out_destroy;
	readahead_find(&c);

	if (fuse_daemonize(c.foreground) != 0)
		goto out_unmount;
	if (!c.foreground)
		pfs_log_use_syslog();

	if ((rc = cache_start(c.cache)) < 0 || (rc = wb_start(c.wb)) < 0 ||
	    (rc = locks_start(c.lk)) < 0 ||
	    (c.pc && (rc = pcache_start(c.pc, &c)) < 0)) {
		pfs_err("cannot start threads: %s", strerror(-rc));
		goto out_unmount;
	}
	if ((rc = transport_start(c.tr)) < 0) {
		pfs_err("cannot start threads: %s", strerror(-rc));
		goto out_unmount;
	}
	sc.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (sc.wake_fd < 0) {
		pfs_err("cannot make an eventfd: %s", strerror(errno));
		goto out_unmount;
	}
	if ((rc = pthread_create(&sc.thr, NULL, sig_main, &sc)) != 0) {
		pfs_err("cannot start the signal thread: %s", strerror(rc));
		close(sc.wake_fd);
		goto out_unmount;
	}
	pfs_notice("mounted %s on %s", c.hostport, c.mountpoint);

	if (c.spin_us < 0 && loop_cpu_limited()) {
		c.spin_us = 0;
		pfs_notice("a CPU quota applies (cgroup): no keeper thread (spin=US forces one)");
	}
	if (c.spin_us < 0) {
		int64_t lat = loop_wake_latency_ns();
		c.spin_us = lat >= (int64_t)LOOP_SLOW_WAKE_US * 1000 ? LOOP_SPIN_US_DEFAULT : 0;
		if (lat >= 0)
			pfs_notice("an idle CPU takes %lld us to run a woken thread: %s", (long long)(lat / 1000),
				 c.spin_us ? "a keeper thread spins while the mount is busy (spin=0: never)"
					   : "no keeper thread");
	}
	rc = loop_run(c.se, LOOP_MAX_THREADS, LOOP_MAX_IDLE, (unsigned)c.spin_us, sc.wake_fd);
	ret = rc < 0 ? 1 : 0;
	if (rc < 0)
		pfs_err("session loop failed: %s", strerror(-rc));

	atomic_store(&sc.loop_done, true);
	pthread_kill(sc.thr, SIGUSR2);
	pthread_join(sc.thr, NULL);
	close(sc.wake_fd);
out_unmount:
	rpc_closing(c.rpc);
	/* Every file is closed: nothing is pending; the writer threads end. */
	wb_commit_all(c.wb);
	wb_free(c.wb);
	c.wb = NULL;
	/* Its thread may wait in a call: stop it before the connection. */
	cache_stop(c.cache);
	locks_stop(c.lk);
	pcache_stop(c.pc);
	if (rpc_is_up(c.rpc)) {
		struct rpc_reply rep = { 0 };
		(void)rpc_call_timeout(c.rpc, PFS_OP_GOODBYE, NULL, 0, &rep, 1000);
		rpc_reply_free(&rep);
	}
	transport_stop(c.tr);
	fuse_session_unmount(c.se);
	pfs_notice("unmounted %s", c.mountpoint);
out_destroy:
	fuse_session_destroy(c.se);
	c.se = NULL;
	goto out_free;
out_stop:
	transport_stop(c.tr);
out_free:
	fuse_opt_free_args(&fa);
	client_free(&c);
	return ret;
}
