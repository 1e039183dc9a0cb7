/* main.c: podfsd's start-up checks, daemonizing, signals and
 * orderly shutdown. */
#include <dirent.h>
#include <errno.h>
#include <malloc.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <signal.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "podfs/auth.h"
#include "podfs/frame.h"
#include "podfs/log.h"
#include "bootverf_i.h"
#include "export_base_i.h"
#include "replylog_i.h"
#include "caps_i.h"
#include "podfs/tls.h"
#include "handles_i.h"
#include "hsecret_i.h"
#include "idtab_i.h"
#include "lockstate_i.h"
#include "revalhold_i.h"
#include "lscache_i.h"
#include "notify_i.h"
#include "observe_i.h"
#include "chunks_i.h"
#include "deleg_i.h"
#include "cmdline_i.h"
#include "pfsd_i.h"
#include "server_i.h"
#include "session_i.h"
#include "status_i.h"
#include "watch_i.h"

__attribute__((format(printf, 1, 2), noreturn)) static void fatal(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	pfs_vlog(PFS_LOG_ERR, fmt, ap);
	va_end(ap);
	exit(1);
}

/* The fair-use limits: --limits, the rest from the fd limit and memory. */
static void set_limits(struct pfsd *d, size_t nofile, size_t cache_max)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	char err[256];

	if (limits_defaults(&d->lim, nofile, pages > 0 && psz > 0 ? (size_t)pages * (size_t)psz
								 : (size_t)1 << 30,
			    cache_max, d->o.threads, err, sizeof(err)) < 0)
		usage_error("%s", err);
}

/* --- start-up checks --- */

static bool have_dac_read_search(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[2];

	if (syscall(SYS_capget, &h, data) < 0)
		return geteuid() == 0;
	return data[CAP_DAC_READ_SEARCH / 32].effective & (1u << (CAP_DAC_READ_SEARCH % 32));
}

/* The handle key must not be readable through the export. The state
 * directory may not exist yet: check the deepest part of it that does. */
static bool state_inside_export(const char *state, const char *export)
{
	char *p = xstrdup(state), *s = NULL, *e = realpath(export, NULL);
	bool inside = false;

	while (!(s = realpath(p, NULL))) {
		char *slash = strrchr(p, '/');
		if (!slash || slash == p) {
			s = realpath(slash == p ? "/" : ".", NULL);
			break;
		}
		*slash = '\0';
	}
	if (s && e) {
		size_t el = strlen(e);
		inside = strcmp(e, "/") == 0 ||
			 (strncmp(s, e, el) == 0 && (s[el] == '\0' || s[el] == '/'));
	}
	free(p);
	free(s);
	free(e);
	return inside;
}

static size_t raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return 1024;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	return rl.rlim_cur == RLIM_INFINITY ? 1u << 20 : (size_t)rl.rlim_cur;
}

/* Writes text to path (the pid and port files), mode 0644 whatever the
 * umask (podfsd runs with umask 0: requests carry their own). Never
 * follows a symlink at path: another user's link must not make root write
 * through it. */
static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	size_t len = strlen(text);
	ssize_t n;
	int ret = 0;

	if (fd < 0)
		return -errno;
	if (fchmod(fd, 0644) < 0) /* an existing file keeps its mode otherwise */
		ret = -errno;
	n = write(fd, text, len);
	if (!ret && n < 0)
		ret = -errno;
	else if (!ret && (size_t)n != len)
		ret = -EIO;
	if (close(fd) < 0 && !ret)
		ret = -errno;
	return ret;
}

static char *abs_path(const char *p)
{
	char cwd[PATH_MAX], *out;

	if (p[0] == '/' || !getcwd(cwd, sizeof(cwd)))
		return xstrdup(p);
	out = xmalloc(strlen(cwd) + strlen(p) + 2);
	sprintf(out, "%s/%s", cwd, p);
	return out;
}

/* Forks to the background: the parent writes the pid file and exits 0; the
 * child continues with a fresh session and stdio on /dev/null. */
static void daemonize(struct pfsd *d)
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		fatal("fork: %s", strerror(errno));
	if (pid > 0) {
		if (d->o.pidfile) {
			char buf[32];
			snprintf(buf, sizeof(buf), "%d\n", (int)pid);
			int ret = write_file(d->o.pidfile, buf);
			if (ret < 0) {
				pfs_err("cannot write pid file %s: %s", d->o.pidfile, strerror(-ret));
				kill(pid, SIGTERM);
				_exit(1);
			}
		}
		_exit(0);
	}
	setsid();
	if (chdir("/") < 0)
		pfs_warn("chdir /: %s", strerror(errno));
	if (uv_loop_fork(&d->loop) < 0)
		pfs_warn("uv_loop_fork failed");
	pfs_log_detach();
}

/* --- export rules --- */

/* The rules of the exports file (--exports, or the default one if it
 * exists), or those of --allow and the rule flags. A bad file or a file
 * with rule flags exits 2. */
static void rules_setup(struct pfsd *d)
{
	const char *file = d->o.exports;
	char err[512];
	int ret;

	if (!file && access(EXPORTS_DEFAULT_FILE, F_OK) == 0)
		file = EXPORTS_DEFAULT_FILE;
	if (file && d->o.rule_flag)
		usage_error("--%s cannot be used with the exports file %s: put it in its rules",
			    d->o.rule_flag, file);
	if (file) {
		d->rules_file = abs_path(file);
		ret = exports_load(d->rules_file, &d->rules, err, sizeof(err));
	} else {
		ret = exports_from_list(d->o.allow ? d->o.allow : "*", &d->o.rule, &d->rules, err,
					sizeof(err));
	}
	if (ret < 0) {
		fprintf(stderr, "podfsd: %s\n", err);
		exit(2);
	}
}

/* The server's TLS context: the pod key's PSK and, with --tls-cert, the
 * certificate (made absolute in main, so SIGHUP finds it after
 * daemonize). NULL with a one-line reason in err[errlen]. */
static SSL_CTX *tls_ctx_make(struct pfsd *d, char *err, size_t errlen)
{
	char info[PATH_MAX + 512];
	SSL_CTX *ctx = pfs_tls_ctx_new(true, d->key, err, errlen);
	int ret;

	if (!ctx || !d->o.tls_cert)
		return ctx;
	ret = pfs_tls_ctx_use_cert(ctx, d->o.tls_cert, d->o.tls_key, info, sizeof(info), err,
				   errlen);
	if (ret < 0) {
		pfs_tls_ctx_free(ctx);
		return NULL;
	}
	if (ret > 0)
		pfs_warn("TLS: %s", info);
	else
		pfs_notice("TLS: %s", info);
	return ctx;
}

/* --- the service manager (notify_i.h) --- */

static int listen_port; /* the port listened on (--listen's, or the one port 0 got) */

/* Tells the service manager (if any) that podfsd is "ready" (listening
 * and serving), "reloading" or "stopping". A failure is logged: the
 * manager would wait for READY=1 until its timeout. */
static void notify(struct pfsd *d, const char *what)
{
	char msg[PATH_MAX + 160], addr[INET6_ADDRSTRLEN + 8], host[INET6_ADDRSTRLEN];
	struct timespec ts;
	int ret;

	if (strcmp(what, "ready") == 0) {
		const struct sockaddr_storage *ss = &d->listen_addr;
		if (ss->ss_family == AF_INET6) {
			const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
			uv_ip6_name(a, host, sizeof(host));
			snprintf(addr, sizeof(addr), "[%s]:%d", host, listen_port);
		} else {
			uv_ip4_name((const struct sockaddr_in *)ss, host, sizeof(host));
			snprintf(addr, sizeof(addr), "%s:%d", host, listen_port);
		}
		notify_ready_msg(msg, sizeof(msg), d->o.export_dir, addr, (long)getpid());
	} else if (strcmp(what, "reloading") == 0) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		notify_reloading_msg(msg, sizeof(msg),
				     (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u);
	} else {
		snprintf(msg, sizeof(msg), "STOPPING=1\n");
	}
	ret = notify_send(msg);
	if (ret < 0)
		pfs_warn("cannot tell the service manager (NOTIFY_SOCKET) podfsd is %s: %s", what,
			 strerror(-ret));
}

/* SIGHUP: the certificate (--tls-cert) and the exports file again; a bad
 * one leaves what it replaces as it was. New connections get the new
 * certificate; those up keep theirs (their SSL objects hold the old
 * context). */
static void hup_cb(uv_signal_t *h, int signum)
{
	struct pfsd *d = h->data;
	struct exports rules;
	char err[PATH_MAX + 512];
	size_t n;
	unsigned closed;

	(void)signum;
	if (d->o.tls_cert) {
		SSL_CTX *ctx = tls_ctx_make(d, err, sizeof(err));
		if (!ctx) {
			pfs_err("SIGHUP: %s; keeping the TLS certificate as it was", err);
		} else {
			pfs_tls_ctx_free(d->tls_ctx);
			d->tls_ctx = ctx;
		}
	}
	if (!d->rules_file) {
		pfs_notice("SIGHUP: no exports file to reload (the rules are the command line's)");
		return;
	}
	notify(d, "reloading");
	if (exports_load(d->rules_file, &rules, err, sizeof(err)) < 0) {
		pfs_err("SIGHUP: %s; keeping the export rules as they were", err);
	} else {
		n = rules.n;
		closed = server_rules_replace(d, &rules);
		pfs_notice("SIGHUP: reloaded export rules from %s: %zu rules (%u connections "
			   "closed)",
			   d->rules_file, n, closed);
	}
	notify(d, "ready");
}

/* --- signals --- */

static void log_stats(struct pfsd *d)
{
	pfs_notice("bytes: received %llu on the wire (%llu uncompressed), sent %llu on the wire "
		   "(%llu uncompressed, %llu of them zero-copy), written %llu with O_DIRECT",
		   (unsigned long long)d->wire_in, (unsigned long long)d->raw_in,
		   (unsigned long long)d->wire_out, (unsigned long long)d->raw_out,
		   (unsigned long long)d->spliced, (unsigned long long)atomic_load(&d->direct));
}

static void usr1_cb(uv_signal_t *h, int signum)
{
	(void)signum;
	log_stats(h->data);
}

static void signal_cb(uv_signal_t *h, int signum)
{
	struct pfsd *d = h->data;

	pfs_notice("%s: shutting down", strsignal(signum));
	notify(d, "stopping");
	log_stats(d);
	observe_stop(d);
	uv_close((uv_handle_t *)&d->sig_usr1, NULL);
	uv_close((uv_handle_t *)&d->sig_hup, NULL);
	server_stop(d);
	lockstate_stop(d->ls);
	revalhold_stop(d->rh);
	uv_close((uv_handle_t *)&d->sig_term, NULL);
	uv_close((uv_handle_t *)&d->sig_int, NULL);
}

/* replylog_settle's way to a file: fh through the handle cache, then,
 * a regular file only (nothing else is opened, a device least of all),
 * opened again by its /proc path with flags (as root, before caps_drop). */
static int open_fh(void *ctx, const struct pfs_fh *fh, int flags)
{
	struct handles *hs = ctx;
	struct hent *e;
	struct stat st;
	char p[EXPORT_PROCPATH_LEN];
	int ret = handles_get(hs, fh, &e);

	if (ret < 0)
		return ret;
	if (fstat(e->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		handles_put(hs, e);
		return -EINVAL;
	}
	export_procpath(p, e->fd);
	ret = open(p, flags | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (ret < 0)
		ret = -errno;
	handles_put(hs, e);
	return ret;
}

/* The appends the instances before began and gave no reply to: each is
 * found written, cut back, or missing (replylog_i.h), before a client
 * can send it again. */
static void settle_appends(struct pfsd *d)
{
	struct replylog_settled st;

	replylog_settle(&d->replies, open_fh, d->hs, &st);
	if (st.landed + st.cut + st.missing + st.unknown)
		pfs_info("appends the instance before began and did not answer: %zu written (sent "
			 "again, they are answered, not written again), %zu cut short by its end "
			 "(the file is cut back to where they began, and they append again), %zu "
			 "not written, %zu that could not be checked", st.landed, st.cut, st.missing,
			 st.unknown);
}

/* The export on ext4 without a journal: there each inode allocation
 * passes over every inode freed in the last minutes, reading its
 * deletion time (recently_deleted() in the kernel's fs/ext4/ialloc.c),
 * so creates slow down after many removals (a venv rebuilt, checkpoints
 * replaced). Said once at the start. The kernel lists a mounted ext4 in
 * /proc/fs/ext4/DEV and its journal in /proc/fs/jbd2/DEV-N. */
static void notice_unjournaled_ext4(const char *dir)
{
	struct statfs sf;
	struct stat st;
	char path[96], line[128], dev[64] = "";

	if (statfs(dir, &sf) < 0 || sf.f_type != EXT4_SUPER_MAGIC || stat(dir, &st) < 0)
		return;
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/uevent", major(st.st_dev),
		 minor(st.st_dev));
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	while (!dev[0] && fgets(line, sizeof(line), f))
		if (sscanf(line, "DEVNAME=%63s", dev) != 1)
			dev[0] = '\0';
	fclose(f);
	snprintf(path, sizeof(path), "/proc/fs/ext4/%s", dev);
	if (!dev[0] || strchr(dev, '/') || access(path, F_OK) < 0)
		return;
	DIR *jd = opendir("/proc/fs/jbd2");
	size_t n = strlen(dev);
	bool journal = false;
	for (struct dirent *e; jd && !journal && (e = readdir(jd));)
		journal = strncmp(e->d_name, dev, n) == 0 && e->d_name[n] == '-';
	if (jd)
		closedir(jd);
	if (!journal)
		pfs_notice("%s is on ext4 without a journal (%s): creating files there slows down "
			   "after many were removed (ext4 passes over the inodes freed in the last "
			   "minutes); a file system with a journal does not", dir, dev);
}

int main(int argc, char **argv)
{
	/* Static: the exits below (usage_error, fatal) leave it allocated,
	 * and the leak checker must still find it, whatever register the
	 * compiler last kept it in. */
	static struct pfsd *d;
	uint8_t hkey[PFSD_HKEY_LEN];
	char err[1024], tp[16], portbuf[16];
	char *pidfile_abs = NULL;
	size_t nofile, cache_max;
	int export_fd, port, ret;

	if (argc >= 2 && strcmp(argv[1], "status") == 0)
		return status_main(argc - 1, argv + 1);
	pfs_payload_alloc_tune();
	/* READ replies are made by the workers and freed by the loop: with
	 * glibc's default of 8 arenas per CPU each worker's arena keeps the
	 * most it ever held, free but resident; and a second arena's heaps
	 * are unmapped whenever one empties, so its next replies fault in
	 * fresh zeroed pages. One arena, whose memory stays until 128 MiB
	 * are free at its top (pfs_payload_alloc_tune): less memory and less
	 * CPU than two (docs/limits.md, "Allocator arenas"). */
	if (!getenv("MALLOC_ARENA_MAX"))
		mallopt(M_ARENA_MAX, 1);
	d = xcalloc(1, sizeof(*d));
	d->started = (int64_t)time(NULL);
	parse_args(&d->o, argc, argv);
	pfs_log_init("podfsd", d->o.log_level);
	if (notify_init() < 0)
		pfs_warn("NOTIFY_SOCKET names no usable socket (an absolute path or @name): "
			 "the service manager will not hear that podfsd is ready");
	if (d->o.genkey) {
		const char *genkey = d->o.genkey;
		ret = pfs_key_generate(genkey);
		free(d);
		if (ret < 0) {
			pfs_err("cannot create key file %s: %s", genkey, strerror(-ret));
			return 1;
		}
		return 0;
	}
	if (server_parse_addr(d->o.listen, &d->listen_addr) < 0)
		usage_error("bad --listen address '%s' (want ADDR:PORT)", d->o.listen);
	rules_setup(d);
	if (d->o.limits && limits_parse(&d->lim, d->o.limits, err, sizeof(err)) < 0)
		usage_error("%s", err);

	ret = pfs_key_load(d->o.key_path, d->key, err, sizeof(err));
	if (ret < 0)
		fatal("%s", err); /* names the file */
	if (d->o.tls_cert) {
		d->o.tls_cert = abs_path(d->o.tls_cert);
		if (d->o.tls_key)
			d->o.tls_key = abs_path(d->o.tls_key);
	}
	d->tls_ctx = tls_ctx_make(d, err, sizeof(err));
	if (!d->tls_ctx)
		fatal("%s", err);
	if (!have_dac_read_search())
		fatal("podfsd needs CAP_DAC_READ_SEARCH to open files by handle (run it as root)");
	/* Not O_PATH: open_by_handle_at refuses an O_PATH mount fd (EBADF). */
	export_fd = open(d->o.export_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (export_fd < 0)
		fatal("cannot export %s: %s", d->o.export_dir, strerror(errno));
	if (state_inside_export(d->o.state_dir, d->o.export_dir)) {
		close(export_fd);
		fatal("state directory %s must not be inside the export %s", d->o.state_dir,
		      d->o.export_dir);
	}
	bool hkey_created;
	ret = handles_load_key(d->o.state_dir, hkey, &hkey_created, err, sizeof(err));
	if (ret < 0) {
		close(export_fd);
		fatal("%s", err);
	}
	nofile = raise_fd_limit();
	cache_max = nofile > 8192 ? (nofile - 4096) / 2 : 256;
	if (cache_max > PFSD_HCACHE_MAX)
		cache_max = PFSD_HCACHE_MAX;
	set_limits(d, nofile, cache_max);
	/* After the options' last checks (set_limits), before the
	 * capabilities go: the record is a trusted xattr. */
	if (hsecret_check(export_fd, hkey, d->o.export_dir, d->o.state_dir, hkey_created,
			  d->o.new_hsecret, err, sizeof(err)) < 0) {
		memset(hkey, 0, sizeof(hkey));
		close(export_fd);
		/* Leave the new state directory as it was: the next start
		 * with it must refuse the same way. */
		if (hkey_created) {
			char path[4096];
			snprintf(path, sizeof(path), "%s/handle.key", d->o.state_dir);
			unlink(path);
		}
		fatal("%s", err);
	}
	ret = handles_new(&d->hs, export_fd, hkey, cache_max, err, sizeof(err));
	memset(hkey, 0, sizeof(hkey));
	if (ret < 0)
		fatal("%s: %s", d->o.export_dir, err);
	d->atime_mode = (unsigned char)export_atime_mode(handles_export_fd(d->hs));
	if (pfs_random(&d->boot_id, sizeof(d->boot_id)) < 0)
		fatal("cannot get random bytes");
	ret = bootverf_read(BOOTVERF_PATH, &d->write_verf);
	if (ret < 0) {
		pfs_warn("cannot read %s (%s): each start of podfsd counts as a reboot, and "
			 "clients send the writes it had not committed again",
			 BOOTVERF_PATH, strerror(-ret));
		d->write_verf = d->boot_id | 1;
	}
	ret = lockstate_new(d->o.state_dir, d->o.grace, &d->ls, err, sizeof(err));
	if (ret < 0)
		fatal("%s", err);
	ret = revalhold_new(d->o.state_dir, d->o.reval_wait, &d->rh, err, sizeof(err));
	if (ret < 0)
		fatal("%s", err);
	ret = replylog_open(&d->replies, d->o.state_dir, d->write_verf, err, sizeof(err));
	if (ret < 0)
		fatal("%s", err);
	if (d->replies.n_old)
		pfs_info("%zu replies of the instances before read from %s/%s: a change they made "
			 "and a client sends again is answered, not made twice", d->replies.n_old,
			 d->o.state_dir, REPLYLOG_NAME);
	settle_appends(d);

	/* Requests carry their own umask; the process-wide one must not
	 * interfere (it is shared by all threads). */
	umask(0);
	signal(SIGPIPE, SIG_IGN);
	/* A write or truncate past RLIMIT_FSIZE (LimitFSIZE=, ulimit -f)
	 * fails with EFBIG for that client, instead of ending the daemon. */
	signal(SIGXFSZ, SIG_IGN);
	/* From the port file on, others may signal us (a test, a service
	 * manager, `scripts/setup --stop`). Until the handlers below are in
	 * place these signals wait, blocked, instead of ending the process by
	 * their default action (a SIGTERM right after the port file appeared
	 * did: exit status -15, and a daemonized podfsd could meet it from
	 * its pid file). Threads started meanwhile keep them blocked: they
	 * come to the loop's thread. */
	sigset_t early;
	sigemptyset(&early);
	sigaddset(&early, SIGTERM);
	sigaddset(&early, SIGINT);
	sigaddset(&early, SIGHUP);
	sigaddset(&early, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &early, NULL);
	snprintf(tp, sizeof(tp), "%u", d->o.threads);
	setenv("UV_THREADPOOL_SIZE", tp, 1);

	ret = uv_loop_init(&d->loop);
	if (ret < 0)
		fatal("uv_loop_init: %s", uv_strerror(ret));
	if (idtab_seed() < 0)
		fatal("no random bytes for the keys of podfsd's tables");
	sessions_init(d);
	LIST_INIT(&d->conns);
	LIST_INIT(&d->paused);
	LIST_INIT(&d->reads_held);
	LIST_INIT(&d->paced);
	srcq_init(&d->srcq);
	pipes_init(&d->pipes);
	d->it = interest_new();
	d->lc = lscache_new(LSCACHE_BYTES, LSCACHE_TTL_MS);
	if (d->o.peer_min) {
		struct chunks_conf cc = {
			.shift = (unsigned)__builtin_ctzll(d->o.peer_chunk),
			.min_size = d->o.peer_min,
			.max_bytes = d->lim.peer_table,
			.fanout = PFSD_PEER_FANOUT,
			.fetch_ms = PFSD_PEER_FETCH_MS,
			.per_peer = d->lim.peer_records,
		};
		d->chunks = chunks_new(&cc);
	}
	if (d->o.delegate)
		d->deleg = deleg_new(DELEG_MAX, DELEG_PER_OWNER);
	ret = server_listen(d, err, sizeof(err), &port);
	if (ret < 0)
		fatal("%s", err);
	d->port = port;
	if (observe_start(d, err, sizeof(err)) < 0)
		fatal("%s", err);
	if (d->o.portfile) {
		snprintf(portbuf, sizeof(portbuf), "%d\n", port);
		ret = write_file(d->o.portfile, portbuf);
		if (ret < 0)
			fatal("cannot write port file %s: %s", d->o.portfile, strerror(-ret));
	}
	if (d->o.pidfile)
		pidfile_abs = abs_path(d->o.pidfile);
	if (d->o.daemonize) {
		daemonize(d);
	} else if (d->o.pidfile) {
		snprintf(portbuf, sizeof(portbuf), "%d\n", (int)getpid());
		ret = write_file(d->o.pidfile, portbuf);
		if (ret < 0) {
			free(pidfile_abs); /* LeakSanitizer need not find it on the stack */
			fatal("cannot write pid file %s: %s", d->o.pidfile, strerror(-ret));
		}
	}

	watch_start(d);
	watch_ignore(d->watch, d->replies.fd, "the replies file");
	lockstate_start(d->ls, &d->loop);
	revalhold_start(d->rh, &d->loop);
	uv_signal_init(&d->loop, &d->sig_term);
	uv_signal_init(&d->loop, &d->sig_int);
	d->sig_term.data = d;
	d->sig_int.data = d;
	uv_signal_start(&d->sig_term, signal_cb, SIGTERM);
	uv_signal_start(&d->sig_int, signal_cb, SIGINT);
	uv_signal_init(&d->loop, &d->sig_usr1);
	d->sig_usr1.data = d;
	uv_signal_start(&d->sig_usr1, usr1_cb, SIGUSR1);
	uv_signal_init(&d->loop, &d->sig_hup);
	d->sig_hup.data = d;
	uv_signal_start(&d->sig_hup, hup_cb, SIGHUP);
	pthread_sigmask(SIG_UNBLOCK, &early, NULL);
	if (d->rules_file) {
		pfs_notice("export rules: %zu from %s%s", d->rules.n, d->rules_file,
			   d->rules.n ? "" : " (no client is admitted)");
	} else {
		char net[64], opts[96];
		export_opts_name(&d->o.rule, opts, sizeof(opts));
		for (size_t i = 0; i < d->rules.n; i++) {
			export_rule_name(&d->rules.v[i], net, sizeof(net));
			pfs_notice("export rule: %s %s", net, opts);
		}
	}
	/* Everything that needs more than caps_i.h keeps is done (the
	 * listener bound, fanotify set up), and no other thread runs yet
	 * (libuv starts its pool with the first request): they all get the
	 * reduced sets. */
	ret = caps_drop(err, sizeof(err));
	if (ret < 0)
		fatal("%s", err);
	pfs_notice("%s", err);
	pfs_notice("serving %s%s (pid %d, %u threads, lease %u s, %s)", d->o.export_dir,
		   d->o.ro ? " read-only" : "", (int)getpid(), d->o.threads, d->o.lease,
		   d->o.allow_plaintext ? "TLS or plaintext" : "TLS required");
	notice_unjournaled_ext4(d->o.export_dir);
	limits_format(&d->lim, err, sizeof(err));
	pfs_info("limits: %s (%zu fds, %zu for clients' files)", err, d->lim.nofile,
		 d->lim.fd_budget);
	listen_port = port;
	notify(d, "ready");

	uv_run(&d->loop, UV_RUN_DEFAULT);

	/* Everything is closed: every request finished and every session
	 * and connection was freed by its close callback. */
	ret = uv_loop_close(&d->loop);
	if (ret < 0)
		pfs_warn("uv_loop_close: %s", uv_strerror(ret));
	htab_fini(&d->sessions);
	htab_fini(&d->hosts);
	srcq_fini(&d->srcq);
	watch_free(d);
	interest_free(d->it);
	lscache_free(d->lc);
	chunks_free(d->chunks);
	deleg_free(d->deleg);
	lockstate_free(d->ls);
	revalhold_free(d->rh);
	replylog_close(&d->replies);
	pipes_fini(&d->pipes);
	handles_free(d->hs);
	free(d->obs);
	free(d->rbuf);
	free(d->cbuf);
	exports_free(&d->rules);
	free(d->rules_file);
	free((char *)d->o.tls_cert); /* abs_path's */
	free((char *)d->o.tls_key);
	pfs_tls_ctx_free(d->tls_ctx);
	if (pidfile_abs)
		unlink(pidfile_abs);
	free(pidfile_abs);
	free(d);
	pfs_notice("stopped");
	return 0;
}
