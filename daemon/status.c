/* status.c: `podfsd status` (see status_i.h). */
#include "status_i.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "podfs/kvtext.h"
#include "observe_i.h"

#define ANSWER_MAX (64u << 20)
#define TOP_OPS 4

static void usage(FILE *f)
{
	fputs("usage: podfsd status [-v] [-i SECONDS] [--raw] [--control-socket PATH | --port PORT]\n"
	      "\n"
	      "Shows a running podfsd: its export, address, uptime, boot verifier and\n"
	      "grace period; each client (address, host, since when, requests, bytes,\n"
	      "open files, lock owners, memory, limits reached); the locks held (-v:\n"
	      "each lock). Read from the daemon's control socket (root or the daemon's\n"
	      "user only): --control-socket PATH, or " OBS_CTL_DIR "/podfsd-PORT.sock\n"
	      "for --port PORT, or the only podfsd socket in " OBS_CTL_DIR ".\n"
	      "\n"
	      "  -v, --verbose   list every lock held\n"
	      "  -i SECONDS      also each client's requests and bytes per second, over\n"
	      "                  SECONDS (0 < S <= 3600)\n"
	      "  --raw           print the daemon's answer as it is: \"key value\" lines\n"
	      "                  (clients and locks as key=value words), for scripts\n",
	      f);
}

__attribute__((format(printf, 1, 2))) static int bad(const char *fmt, ...)
{
	va_list ap;

	fputs("podfsd status: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (try --help)\n", stderr);
	return 2;
}

/* Whether a daemon listens on the Unix socket at path (connecting to
 * one is answered at once, or refused). */
static bool live(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n = strlen(path);
	int fd;
	bool ok;

	if (n >= sizeof(sa.sun_path))
		return false;
	memcpy(sa.sun_path, path, n + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ok = fd >= 0 && (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EACCES);
	if (fd >= 0)
		close(fd);
	return ok;
}

/* The only live podfsd-*.sock in OBS_CTL_DIR, or an error. */
static int find_socket(char *path, size_t len)
{
	DIR *dir = opendir(OBS_CTL_DIR);
	struct dirent *e;
	int n = 0;

	if (!dir) {
		fprintf(stderr, "podfsd status: no podfsd control socket in %s (is podfsd running?)\n",
			OBS_CTL_DIR);
		return 1;
	}
	while ((e = readdir(dir))) {
		size_t l = strlen(e->d_name);
		char p[300];
		if (strncmp(e->d_name, "podfsd-", 7) != 0 || l < 5 ||
		    strcmp(e->d_name + l - 5, ".sock") != 0)
			continue;
		snprintf(p, sizeof(p), "%s/%s", OBS_CTL_DIR, e->d_name);
		if (!live(p)) /* left by a podfsd that was killed */
			continue;
		if (n++ == 0)
			snprintf(path, len, "%s", p);
	}
	closedir(dir);
	if (n == 1)
		return 0;
	if (n == 0)
		fprintf(stderr, "podfsd status: no podfsd control socket in %s (is podfsd running?)\n",
			OBS_CTL_DIR);
	else
		fprintf(stderr, "podfsd status: %d podfsd control sockets in %s: choose one with "
			"--port PORT or --control-socket PATH\n", n, OBS_CTL_DIR);
	return 1;
}

/* The opcodes of a client's ops= word, the TOP_OPS most frequent first. */
static void top_ops(const char *ops, char *out, size_t len)
{
	struct {
		char name[24];
		unsigned long long n;
	} v[TOP_OPS] = { 0 };
	const char *p = ops;

	while (p && *p && *p != '-') {
		char name[24];
		unsigned long long n;
		int used = 0;
		if (sscanf(p, "%23[^:]:%llu%n", name, &n, &used) != 2)
			break;
		for (int i = 0; i < TOP_OPS; i++) {
			if (n > v[i].n) {
				memmove(&v[i + 1], &v[i], (size_t)(TOP_OPS - 1 - i) * sizeof(v[0]));
				snprintf(v[i].name, sizeof(v[i].name), "%s", name);
				v[i].n = n;
				break;
			}
		}
		p += used;
		if (*p != ',')
			break;
		p++;
	}
	size_t o = 0;
	out[0] = 0;
	for (int i = 0; i < TOP_OPS && v[i].n; i++)
		o += (size_t)snprintf(out + o, o < len ? len - o : 0, "%s%s %llu", i ? ", " : "",
				      v[i].name, v[i].n);
}

/* "s" unless n is 1. */
static const char *pl(unsigned long long n)
{
	return n == 1 ? "" : "s";
}

static unsigned long long wnum(const char *val, const char *k)
{
	char b[32];
	return pfs_kv_word(val, k, b, sizeof(b)) ? strtoull(b, NULL, 10) : 0;
}

/* The client line of session id in kv, or NULL. */
static const char *client_of(const struct pfs_kv *kv, const char *id)
{
	char b[20];

	for (int i = 0; kv && i < kv->n; i++)
		if (strcmp(kv->key[i], "client") == 0 && pfs_kv_word(kv->val[i], "id", b, sizeof(b)) &&
		    strcmp(b, id) == 0)
			return kv->val[i];
	return NULL;
}

/* kv, and with -i the reading secs seconds before (prev; NULL: none)
 * for the rates. */
static void show(const struct pfs_kv *kv, const struct pfs_kv *prev, double secs, bool verbose)
{
	char t1[64], t2[64], t3[32], t4[32];
	long long now = (long long)pfs_kv_num(kv, "now");
	long long started = (long long)pfs_kv_num(kv, "started");
	unsigned long long clients = 0;

	printf("podfsd %s (pid %llu): serving %s%s on %s\n", pfs_kv_get(kv, "version"),
	       pfs_kv_num(kv, "pid"), pfs_kv_get(kv, "export"),
	       pfs_kv_num(kv, "read_only") ? " read-only" : "", pfs_kv_get(kv, "listen"));
	printf("  up %s (since %s); boot verifier %s\n", pfs_fmt_secs(now - started, t1, sizeof(t1)),
	       pfs_fmt_time(started, t2, sizeof(t2)), pfs_kv_get(kv, "boot_id"));
	printf("  metrics: %s\n", strcmp(pfs_kv_get(kv, "metrics"), "-") == 0
					  ? "off"
					  : pfs_kv_get(kv, "metrics"));
	if (pfs_kv_num(kv, "grace")) {
		long long until = (long long)pfs_kv_num(kv, "grace_until");
		printf("  GRACE PERIOD until %s (%s left): only lock reclaims; ",
		       pfs_fmt_time(until, t1, sizeof(t1)), pfs_fmt_secs(until - now, t2, sizeof(t2)));
		if (pfs_kv_num(kv, "grace_unknown"))
			printf("the list of lock holders was lost\n");
		else
			printf("%llu of %llu lock holders came back\n", pfs_kv_num(kv, "grace_reclaimed"),
			       pfs_kv_num(kv, "grace_expected"));
	} else {
		printf("  grace period: none now");
		if (pfs_kv_num(kv, "grace_expected"))
			printf(" (after the restart: %llu of %llu lock holders came back)",
			       pfs_kv_num(kv, "grace_reclaimed"), pfs_kv_num(kv, "grace_expected"));
		printf("\n");
	}
	if (pfs_kv_num(kv, "reval_hold")) {
		long long until = (long long)pfs_kv_num(kv, "reval_hold_until");
		printf("  CHANGES WAIT until %s (%s left) for the clients of the instance before "
		       "to revalidate: %llu of %llu did\n", pfs_fmt_time(until, t1, sizeof(t1)),
		       pfs_fmt_secs(until - now, t2, sizeof(t2)), pfs_kv_num(kv, "reval_back"),
		       pfs_kv_num(kv, "reval_expected"));
	} else if (pfs_kv_num(kv, "reval_expected")) {
		printf("  after the restart, changes waited %llu ms for %llu of %llu clients to "
		       "revalidate\n", pfs_kv_num(kv, "reval_held_ms"), pfs_kv_num(kv, "reval_back"),
		       pfs_kv_num(kv, "reval_expected"));
	}
	if (pfs_kv_num(kv, "locks_reclaimed") || pfs_kv_num(kv, "locks_lost"))
		printf("  locks reclaimed after the restart: %llu (%llu lost)\n",
		       pfs_kv_num(kv, "locks_reclaimed"), pfs_kv_num(kv, "locks_lost"));
	unsigned long long ns = pfs_kv_num(kv, "sessions"), nc = pfs_kv_num(kv, "conns");
	unsigned long long nl = pfs_kv_num(kv, "lock_owners");
	printf("  %llu client%s (%llu lingering), %llu connection%s (%llu handshaking), %llu "
	       "accepted since start\n",
	       ns, pl(ns), pfs_kv_num(kv, "lingering"), nc, pl(nc), pfs_kv_num(kv, "preauth"),
	       pfs_kv_num(kv, "accepted"));
	unsigned long long nr = pfs_kv_num(kv, "lock_ranges");
	printf("  memory %s of %s; %llu of %llu fds for clients' files; %llu lock owner%s "
	       "holding %llu byte range%s\n",
	       pfs_fmt_bytes(pfs_kv_num(kv, "mem"), t1, sizeof(t1)),
	       pfs_fmt_bytes(pfs_kv_num(kv, "mem_max"), t2, sizeof(t2)), pfs_kv_num(kv, "fds"),
	       pfs_kv_num(kv, "fd_budget"), nl, pl(nl), nr, pl(nr));
	printf("  wire: received %s (%s uncompressed), sent %s (%s uncompressed); %llu pushes\n",
	       pfs_fmt_bytes(pfs_kv_num(kv, "wire_in"), t1, sizeof(t1)),
	       pfs_fmt_bytes(pfs_kv_num(kv, "raw_in"), t2, sizeof(t2)),
	       pfs_fmt_bytes(pfs_kv_num(kv, "wire_out"), t3, sizeof(t3)),
	       pfs_fmt_bytes(pfs_kv_num(kv, "raw_out"), t4, sizeof(t4)), pfs_kv_num(kv, "pushes"));
	if (pfs_kv_get(kv, "peer_files"))
		printf("  peer reads: %llu files (table %s of %s), %llu chunks listed for %llu "
		       "serving clients; clients sent to the server %llu times, to a peer %llu; "
		       "%llu peers reported failing\n",
		       pfs_kv_num(kv, "peer_files"),
		       pfs_fmt_bytes(pfs_kv_num(kv, "peer_table_bytes"), t1, sizeof(t1)),
		       pfs_fmt_bytes(pfs_kv_num(kv, "peer_table_max"), t2, sizeof(t2)),
		       pfs_kv_num(kv, "peer_records"), pfs_kv_num(kv, "peer_peers"),
		       pfs_kv_num(kv, "peer_to_server"), pfs_kv_num(kv, "peer_to_peer"),
		       pfs_kv_num(kv, "peer_reports_bad"));
	if (pfs_kv_num(kv, "ack_misses") || pfs_kv_num(kv, "ack_cutoffs") ||
	    pfs_kv_num(kv, "clients_behind"))
		printf("  acknowledgements: %llu client%s behind now; %llu fell behind, %llu cut "
		       "off since start\n",
		       pfs_kv_num(kv, "clients_behind"), pl(pfs_kv_num(kv, "clients_behind")),
		       pfs_kv_num(kv, "ack_misses"), pfs_kv_num(kv, "ack_cutoffs"));
	unsigned long long total = 0;
	for (int i = 0; i < kv->n; i++)
		if (strncmp(kv->key[i], "req_", 4) == 0)
			total += strtoull(kv->val[i], NULL, 10);
	printf("  requests: %llu", total);
	if (pfs_kv_num(kv, "loop_reads"))
		printf(" (%llu small READs answered on the event loop)", pfs_kv_num(kv, "loop_reads"));
	printf("\n");

	for (int i = 0; i < kv->n; i++) {
		if (strcmp(kv->key[i], "client") != 0)
			continue;
		const char *v = kv->val[i];
		char addr[80], host[300], state[16], lim[128], ops[2048], top[256], id[20];
		long long since = (long long)wnum(v, "since");
		if (!clients++)
			printf("\n  %-22s %-16s %-9s %-12s %10s %10s %10s %6s %5s %9s\n", "CLIENT",
			       "HOST", "STATE", "SINCE", "REQUESTS", "IN", "OUT", "FILES", "LOCKS",
			       "MEMORY");
		pfs_kv_word(v, "addr", addr, sizeof(addr));
		pfs_kv_word(v, "host", host, sizeof(host));
		pfs_kv_word(v, "state", state, sizeof(state));
		pfs_kv_word(v, "id", id, sizeof(id));
		if (!pfs_kv_word(v, "limits", lim, sizeof(lim)))
			snprintf(lim, sizeof(lim), "-");
		if (!pfs_kv_word(v, "ops", ops, sizeof(ops)))
			snprintf(ops, sizeof(ops), "-");
		char files[24], locks[24];
		pfs_kv_word(v, "open_files", files, sizeof(files));
		pfs_kv_word(v, "lock_owners", locks, sizeof(locks));
		printf("  %-22s %-16s %-9s %-12s %10llu %10s %10s %6s %5s %9s\n", addr, host, state,
		       pfs_fmt_secs(now - since, t1, sizeof(t1)), wnum(v, "requests"),
		       pfs_fmt_bytes(wnum(v, "wire_in"), t2, sizeof(t2)),
		       pfs_fmt_bytes(wnum(v, "wire_out"), t3, sizeof(t3)),
		       strcmp(files, "-1") ? files : "busy", strcmp(locks, "-1") ? locks : "busy",
		       pfs_fmt_bytes(wnum(v, "mem"), t4, sizeof(t4)));
		top_ops(ops, top, sizeof(top));
		printf("      session %s, %llu connection%s now, %llu made; top requests: %s\n", id,
		       wnum(v, "conns"), pl(wnum(v, "conns")), wnum(v, "made"),
		       top[0] ? top : "none");
		const char *pv = client_of(prev, id);
		if (pv)
			printf("      now: %.1f requests/s, receiving %s/s, sending %s/s\n",
			       (double)(wnum(v, "requests") - wnum(pv, "requests")) / secs,
			       pfs_fmt_bytes((unsigned long long)((double)(wnum(v, "wire_in") -
									   wnum(pv, "wire_in")) /
								   secs),
					     t1, sizeof(t1)),
			       pfs_fmt_bytes((unsigned long long)((double)(wnum(v, "wire_out") -
									   wnum(pv, "wire_out")) /
								   secs),
					     t2, sizeof(t2)));
		if (strcmp(lim, "-") != 0)
			printf("      LIMIT REACHED: %s\n", lim);
		if (wnum(v, "behind"))
			printf("      BEHIND on acknowledging invalidations: changes do not wait "
			       "for it\n");
	}
	if (!clients)
		printf("\n  no clients\n");
	if (!verbose)
		return;
	unsigned long long nlocks = 0;
	for (int i = 0; i < kv->n; i++) {
		const char *v = kv->val[i];
		char file[4200], type[16], kind[16], start[24], end[24], addr[80], host[300];
		if (strcmp(kv->key[i], "locks_busy") == 0) {
			printf("  (the locks of session %s could not be read just now)\n", v);
			continue;
		}
		if (strcmp(kv->key[i], "lock") != 0)
			continue;
		if (!nlocks++)
			printf("\n  %-40s %-16s %-6s %-6s %s\n", "LOCKED FILE", "RANGE", "TYPE", "KIND",
			       "HOLDER");
		pfs_kv_word(v, "file", file, sizeof(file));
		pfs_kv_word(v, "type", type, sizeof(type));
		pfs_kv_word(v, "kind", kind, sizeof(kind));
		pfs_kv_word(v, "start", start, sizeof(start));
		pfs_kv_word(v, "end", end, sizeof(end));
		pfs_kv_word(v, "addr", addr, sizeof(addr));
		pfs_kv_word(v, "host", host, sizeof(host));
		char range[56];
		snprintf(range, sizeof(range), "%s-%s", start, end);
		printf("  %-40s %-16s %-6s %-6s %s (%s)\n", file, range, type, kind, addr, host);
	}
	if (!nlocks)
		printf("\n  no locks held\n");
}

/* The daemon's answer at path into a malloc'd *text; or -1 after a line
 * on stderr. */
static int ask(const char *path, bool verbose, char **text)
{
	ssize_t n = pfs_unix_ask(path, verbose ? "status verbose\n" : "status\n", ANSWER_MAX, 10,
				 text);

	if (n < 0) {
		fprintf(stderr, "podfsd status: %s: %s%s\n", path, strerror((int)-n),
			n == -EACCES ? " (only root or the daemon's user may read it)"
			: n == -ENOENT || n == -ECONNREFUSED ? " (is podfsd running?)"
			: "");
		return -1;
	}
	if (strncmp(*text, "error ", 6) == 0)
		fprintf(stderr, "podfsd status: %s: %s", path, *text + 6);
	else if (n == 0 || !strstr(*text, "\nend\n"))
		fprintf(stderr, "podfsd status: %s: the answer was cut short\n", path);
	else
		return 0;
	free(*text);
	*text = NULL;
	return -1;
}

int status_main(int argc, char **argv)
{
	const char *sock = NULL;
	char path[4200];
	bool verbose = false, raw = false;
	double interval = 0;
	char *text;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
			verbose = true;
		} else if (strcmp(a, "--raw") == 0) {
			raw = true;
		} else if (strcmp(a, "-i") == 0) {
			char *end;
			if (i + 1 == argc)
				return bad("-i needs an argument");
			interval = strtod(argv[++i], &end);
			if (*end || end == argv[i] || !(interval > 0 && interval <= 3600))
				return bad("bad interval '%s' (seconds, 0 < S <= 3600)", argv[i]);
		} else if (strcmp(a, "--control-socket") == 0 || strcmp(a, "--port") == 0) {
			if (i + 1 == argc)
				return bad("%s needs an argument", a);
			if (a[2] == 'c') {
				sock = argv[++i];
				if (!sock[0])
					return bad("--control-socket is empty");
				snprintf(path, sizeof(path), "%s", sock);
			} else {
				char *end;
				long port = strtol(argv[++i], &end, 10);
				if (*end || end == argv[i] || port < 1 || port > 65535)
					return bad("bad --port '%s' (1..65535)", argv[i]);
				observe_ctl_path((int)port, path, sizeof(path));
			}
			sock = path;
		} else {
			return bad("unknown argument '%s'", a);
		}
	}
	if (!sock && find_socket(path, sizeof(path)) != 0)
		return 1;
	struct pfs_kv first = { 0 }, kv;
	if (interval > 0 && !raw) {
		if (ask(path, verbose, &text) < 0 || pfs_kv_parse(&first, text) < 0)
			return 1;
		struct timespec ts = { (time_t)interval,
				       (long)((interval - (double)(time_t)interval) * 1e9) };
		nanosleep(&ts, NULL);
	}
	if (ask(path, verbose, &text) < 0) {
		pfs_kv_free(&first);
		return 1;
	}
	if (raw) {
		fputs(text, stdout);
		free(text);
		return 0;
	}
	if (pfs_kv_parse(&kv, text) < 0) {
		pfs_kv_free(&first);
		return 1;
	}
	show(&kv, first.n ? &first : NULL, interval, verbose);
	pfs_kv_free(&kv);
	pfs_kv_free(&first);
	return 0;
}
