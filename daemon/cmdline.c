/* cmdline.c: podfsd's command line: the usage text, the option table and
 * its parsing into struct pfsd_opts (see cmdline_i.h). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <linux/capability.h>
#include <signal.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "podfs/auth.h"
#include "podfs/frame.h"
#include "podfs/log.h"
#include "caps_i.h"
#include "podfs/tls.h"
#include "handles_i.h"
#include "hsecret_i.h"
#include "lockstate_i.h"
#include "notify_i.h"
#include "observe_i.h"
#include "chunks_i.h"
#include "pfsd_i.h"
#include "server_i.h"
#include "status_i.h"
#include "watch_i.h"
#include "cmdline_i.h"

#define DEFAULT_KEY "/etc/podfs/pod.key"
#define DEFAULT_STATE "/var/lib/podfs"

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

static const char usage_text[] =
	"usage: podfsd [options] EXPORT_DIR\n"
	"       podfsd --genkey FILE\n"
	"       podfsd status [-v] [-i S] [--raw] [--control-socket PATH | --port PORT]\n"
	"\n"
	"Serves EXPORT_DIR to podfs clients.\n"
	"\n"
	"  --listen ADDR:PORT   address to listen on (default 0.0.0.0:7049; port 0: any)\n"
	"  --key FILE           pod key shared with the clients (default " DEFAULT_KEY ")\n"
	"  --state-dir DIR      server state: handle key, lock holders (default " DEFAULT_STATE ");\n"
	"                       keep it: the export records which handle key served it,\n"
	"                       and podfsd refuses to start with another one\n"
	"  --new-handle-secret  start even though the export was served under another\n"
	"                       handle key (its state dir is lost): clients must remount\n"
	"  --daemon             run in the background once listening; log to syslog\n"
	"  --pidfile FILE       write the daemon's pid to FILE\n"
	"  --port-file FILE     write the port listened on to FILE\n"
	"  --log-level LEVEL    err, warning, notice, info or debug (default notice)\n"
	"  --threads N          worker threads for disk operations (default 16)\n"
	"  --lease SECONDS      keep a disconnected client's open files and locks this\n"
	"                       long (default 60)\n"
	"  --lock-lease SECONDS release the locks of a client whose connection closed\n"
	"                       after this long, if it has not come back (default 15,\n"
	"                       at most --lease): a dead client blocks nobody for long\n"
	"  --grace SECONDS      after a restart, grant only lock reclaims this long, or\n"
	"                       until every client that held locks came back (default\n"
	"                       30, 0..600; no grace period when nobody held locks)\n"
	"  --revalidate-wait SECONDS\n"
	"                       after a restart, a change waits this long at most for\n"
	"                       the clients of the instance before to revalidate what\n"
	"                       they cache (default 10, 0..600; 0: no wait)\n"
	"  --ack-timeout MS     a change waits at least this long for another client to\n"
	"                       acknowledge its invalidation (default "
	STRINGIFY(PFSD_ACK_TIMEOUT_MS) ", 1.." STRINGIFY(PFSD_ACK_WAIT_MS) "; more\n"
	"                       for a client that acknowledges slowly); one that sends\n"
	"                       nothing meanwhile falls behind and is not waited for\n"
	"                       until it caught up\n"
	"  --lz4 MODE           LZ4 for replies: auto (only while the link is backed\n"
	"                       up: it costs more time than it saves on fast links),\n"
	"                       always (slow or metered links) or never (default auto)\n"
	"  --allow-plaintext    also accept clients without TLS (mounted with\n"
	"                       tls=off): their traffic is readable and forgeable\n"
	"                       on the network; only for a trusted fabric\n"
	"                       (default: TLS is required)\n"
	"  --tls-cert FILE      also hold this certificate chain (PEM, the server's\n"
	"                       first) for clients mounted with tls_ca=, which verify\n"
	"                       it instead of using the pod key's PSK (the others\n"
	"                       keep the PSK); SIGHUP reloads it\n"
	"  --tls-key FILE       its private key (PEM, mode 0600; default: in\n"
	"                       --tls-cert's file)\n"
	"  --ro                 export read-only (to every client, whatever the rules)\n"
	"  --exports FILE       export rules: who may connect, and how (podfs-exports(5);\n"
	"                       default " EXPORTS_DEFAULT_FILE " if it exists; SIGHUP\n"
	"                       reloads it). Without a file, these make one rule:\n"
	"  --allow CIDR[,CIDR]  networks that may connect (default: any; the pod key is\n"
	"                       still required)\n"
	"  --squash MODE        root (uid and gid 0 become the anonymous ids), all (every\n"
	"                       id does) or none (default root)\n"
	"  --anonuid N          the anonymous uid (default 65534)\n"
	"  --anongid N          the anonymous gid (default 65534)\n"
	"  --buffered-writes    write big aligned WRITEs through this host's page\n"
	"                       cache too (default: O_DIRECT, which keeps the cache\n"
	"                       for what clients read)\n"
	"  --limits KEY=N,...   fair-use limits (README: Limits): open-files,\n"
	"                       lock-owners, lock-ranges, refusals, workers (per host);\n"
	"                       requests, client-memory (per client); read-queue (per\n"
	"                       connection); memory, lock-table, fd-reserve, lingering,\n"
	"                       reply-cache, preauth, preauth-per-source (the daemon)\n"
	"  --control-socket PATH where podfsd status reads this daemon (default\n"
	"                       " OBS_CTL_DIR "/podfsd-PORT.sock; mode 0600, root and the\n"
	"                       daemon's user only; \"\" for none)\n"
	"  --metrics ADDR[:PORT] serve Prometheus metrics at http://ADDR:PORT/metrics\n"
	"                       (port " STRINGIFY(OBS_METRICS_PORT) " by default; off unless given; they show\n"
	"                       client addresses and file counts to whoever can connect)\n"
	"  --peer-min SIZE      peer-assisted reads (clients mounted with -o peers\n"
	"                       fetch chunks from each other) for files of at least\n"
	"                       SIZE bytes (K, M, G; default 64M; 0: off)\n"
	"  --peer-chunk SIZE    their chunk size, a power of two from 1M to 64M\n"
	"                       (default 4M)\n"
	"  --delegate           grant attribute delegations of new files to clients\n"
	"                       mounted with -o delegate (their chmod, chown and\n"
	"                       utimens of a file they just created and hold open\n"
	"                       are answered without a round trip; off by default)\n"
	"  --recall-timeout MS  a request that needs a client's delegations back waits\n"
	"                       this long for that client while it sends nothing\n"
	"                       (default " STRINGIFY(PFSD_RECALL_TIMEOUT_MS) ", 1.." STRINGIFY(PFSD_RECALL_WAIT_MS) "; at most " STRINGIFY(PFSD_RECALL_WAIT_MS) " while it\n"
	"                       sends), then revokes them: what the client answered\n"
	"                       under them fails\n"
	"  --genkey FILE        create a new pod key in FILE and exit\n"
	"  -V, --version        print the version\n"
	"  -h, --help           show this help\n";

__attribute__((format(printf, 1, 2), noreturn)) void usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("podfsd: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (try --help)\n", stderr);
	exit(2);
}

/* One option of the command line: what its argument (if it has one)
 * sets in struct pfsd_opts. */
struct optdef {
	const char *name;
	int has_arg;       /* no_argument or required_argument */
	void (*set)(struct pfsd_opts *o, const struct optdef *def, const char *arg);
	size_t off;        /* the field of struct pfsd_opts it sets */
	unsigned min, max; /* set_uint: the range */
};

#define FIELD(f) offsetof(struct pfsd_opts, f)

static void *field(struct pfsd_opts *o, const struct optdef *def)
{
	return (char *)o + def->off;
}

static void set_str(struct pfsd_opts *o, const struct optdef *def, const char *arg)
{
	*(const char **)field(o, def) = arg;
}

static void set_true(struct pfsd_opts *o, const struct optdef *def, const char *arg)
{
	*(bool *)field(o, def) = true;
}

static void set_uint(struct pfsd_opts *o, const struct optdef *def, const char *arg)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || end == arg || *end || arg[0] == '-' || v < def->min || v > def->max)
		usage_error("--%s wants a number from %u to %u, not '%s'", def->name, def->min,
			    def->max, arg);
	*(unsigned *)field(o, def) = (unsigned)v;
}

/* --peer-min, --peer-chunk: a size with an optional K, M or G suffix. */
static void set_peer_size(struct pfsd_opts *o, const struct optdef *def, const char *arg)
{
	bool chunk = strcmp(def->name, "peer-chunk") == 0;
	const char *sfx = "KkMmGg", *at;
	char *end;

	errno = 0;
	uint64_t v = strtoull(arg, &end, 10);
	unsigned shift = *end && (at = strchr(sfx, *end)) ? 10 * (unsigned)((at - sfx) / 2 + 1) : 0;
	if (errno || end == arg || arg[0] == '-' || end[shift ? 1 : 0] || v > (UINT64_MAX >> 2) >> shift)
		usage_error("--%s wants a size (K, M, G suffixes), not '%s'", def->name, arg);
	v <<= shift;
	if (chunk && (v < (1ull << PFS_CHUNK_SHIFT_MIN) || v > (1ull << PFS_CHUNK_SHIFT_MAX) ||
		      (v & (v - 1))))
		usage_error("--peer-chunk wants a power of two from 1M to 64M, not '%s'", arg);
	*(chunk ? &o->peer_chunk : &o->peer_min) = v;
}

static void set_log_level(struct pfsd_opts *o, const struct optdef *def, const char *arg)
{
	o->log_level = pfs_log_level_parse(arg);
	if (o->log_level < 0)
		usage_error("unknown log level '%s' (err, warning, notice, info, debug)", arg);
}

static void set_lz4(struct pfsd_opts *o, const struct optdef *def, const char *arg)
{
	if (pfs_lz4_mode_parse(arg, &o->lz4) < 0)
		usage_error("bad --lz4 '%s' (auto, always or never)", arg);
}

/* --allow, --squash, --anonuid, --anongid: the options of the rules made
 * without an exports file. */
static void set_rule(struct pfsd_opts *o, const struct optdef *def, const char *arg)
{
	char *end;
	unsigned long long v;

	o->rule_flag = def->name;
	if (strcmp(def->name, "allow") == 0) {
		o->allow = arg;
	} else if (strcmp(def->name, "squash") == 0) {
		if (export_squash_parse(arg, &o->rule.squash) < 0)
			usage_error("bad --squash '%s' (root, none or all)", arg);
	} else {
		errno = 0;
		v = strtoull(arg, &end, 10);
		if (errno || end == arg || *end || arg[0] == '-' || v > 4294967294ull)
			usage_error("--%s wants a number from 0 to 4294967294, not '%s'", def->name,
				    arg);
		*(def->name[4] == 'u' ? &o->rule.anonuid : &o->rule.anongid) = (uint32_t)v;
	}
}

static void set_metrics(struct pfsd_opts *o, const struct optdef *def, const char *arg)
{
	if (observe_parse_metrics(arg) < 0)
		usage_error("bad --metrics '%s' (want a numeric ADDR[:PORT], e.g. 127.0.0.1:%d)",
			    arg, OBS_METRICS_PORT);
	o->metrics = arg;
}

static void show_help(struct pfsd_opts *o, const struct optdef *def, const char *arg)
{
	fputs(usage_text, stdout);
	exit(0);
}

static void show_version(struct pfsd_opts *o, const struct optdef *def, const char *arg)
{
	printf("podfsd %s (protocol %d)\n", PODFS_VERSION, PFS_VERSION);
	exit(0);
}

#define STR(name, f) { name, required_argument, set_str, FIELD(f), 0, 0 }
#define FLAG(name, f) { name, no_argument, set_true, FIELD(f), 0, 0 }
#define UINT(name, f, min, max) { name, required_argument, set_uint, FIELD(f), min, max }
#define FUNC(name, has_arg, fn) { name, has_arg, fn, 0, 0, 0 }
static const struct optdef optdefs[] = {
	STR("listen", listen),
	STR("key", key_path),
	STR("state-dir", state_dir),
	FLAG("daemon", daemonize),
	STR("pidfile", pidfile),
	STR("port-file", portfile),
	FUNC("log-level", required_argument, set_log_level),
	UINT("threads", threads, 1, 1024),
	UINT("lease", lease, 0, 86400 * 365),
	UINT("lock-lease", lock_lease, 0, 86400 * 365),
	UINT("grace", grace, 0, PFSD_GRACE_MAX),
	UINT("revalidate-wait", reval_wait, 0, PFSD_REVAL_WAIT_MAX),
	UINT("ack-timeout", ack_timeout, 1, PFSD_ACK_WAIT_MS),
	UINT("recall-timeout", recall_timeout, 1, PFSD_RECALL_WAIT_MS),
	FUNC("lz4", required_argument, set_lz4),
	FLAG("allow-plaintext", allow_plaintext),
	STR("tls-cert", tls_cert),
	STR("tls-key", tls_key),
	FLAG("ro", ro),
	STR("exports", exports),
	FUNC("allow", required_argument, set_rule),
	FUNC("squash", required_argument, set_rule),
	FUNC("anonuid", required_argument, set_rule),
	FUNC("anongid", required_argument, set_rule),
	FLAG("buffered-writes", buffered),
	FLAG("new-handle-secret", new_hsecret),
	FLAG("delegate", delegate),
	STR("limits", limits),
	STR("control-socket", control),
	FUNC("metrics", required_argument, set_metrics),
	FUNC("peer-min", required_argument, set_peer_size),
	FUNC("peer-chunk", required_argument, set_peer_size),
	STR("genkey", genkey),
	FUNC("help", no_argument, show_help),
	FUNC("version", no_argument, show_version),
};
#define NOPTS (sizeof(optdefs) / sizeof(optdefs[0]))
#define OPT_BASE 256 /* getopt_long's value of optdefs[i] is OPT_BASE + i */

void parse_args(struct pfsd_opts *o, int argc, char **argv)
{
	struct option long_opts[NOPTS + 1];
	int c;

	for (size_t i = 0; i < NOPTS; i++)
		long_opts[i] = (struct option){ optdefs[i].name, optdefs[i].has_arg, NULL,
						OPT_BASE + (int)i };
	long_opts[NOPTS] = (struct option){ NULL, 0, NULL, 0 };
	o->listen = "0.0.0.0:7049";
	o->key_path = DEFAULT_KEY;
	o->state_dir = DEFAULT_STATE;
	o->log_level = PFS_LOG_NOTICE;
	o->threads = 16;
	o->lease = 60;
	o->lock_lease = 15;
	o->grace = 30;
	o->reval_wait = 10;
	o->peer_min = 64ull << 20;
	o->peer_chunk = 4ull << 20;
	o->ack_timeout = PFSD_ACK_TIMEOUT_MS;
	o->recall_timeout = PFSD_RECALL_TIMEOUT_MS;
	export_opts_default(&o->rule);
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":hV", long_opts, NULL)) != -1) {
		if (c >= OPT_BASE && c < OPT_BASE + (int)NOPTS)
			optdefs[c - OPT_BASE].set(o, &optdefs[c - OPT_BASE], optarg);
		else if (c == 'h')
			show_help(o, NULL, NULL);
		else if (c == 'V')
			show_version(o, NULL, NULL);
		else if (c == ':')
			usage_error("option '%s' needs an argument", argv[optind - 1]);
		else
			usage_error("unknown option '%s'", argv[optind - 1]);
	}
	if (o->genkey) {
		if (optind != argc)
			usage_error("--genkey takes no export directory");
		return;
	}
	if (optind == argc)
		usage_error("no export directory given");
	if (optind + 1 != argc)
		usage_error("unexpected argument '%s'", argv[optind + 1]);
	o->export_dir = argv[optind];
	if (!o->state_dir[0])
		usage_error("--state-dir is empty");
	if (o->tls_key && !o->tls_cert)
		usage_error("--tls-key needs --tls-cert");
	if ((o->tls_cert && !o->tls_cert[0]) || (o->tls_key && !o->tls_key[0]))
		usage_error("--tls-cert and --tls-key need a file");
}
