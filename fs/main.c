/* main.c: podfs start-up, the wiring of the modules' callbacks, the FUSE
 * session, the signal thread and an orderly shutdown (the command line
 * is opts.c's).
 *
 *   podfs HOST[:PORT][:/] MOUNTPOINT [-f] [-d] [-o OPTIONS]
 *   podfs keygen FILE
 *   podfs warm PATH...   (warm.c)
 *   podfs status [MNT]   (status.c)
 *   podfs pod up|down|status HOSTS_FILE   (runs podfs-pod, scripts/podfs-pod)
 *
 * Start-up order matters: the first connection and the handshake run in
 * the foreground (their errors exit 1 on the terminal), then the session
 * is mounted, then the process daemonizes (fork: no thread may exist
 * before it), and only then the modules' threads (cache, writers, locks,
 * persistent cache, connections, pushes, acks) and the signal thread
 * start.
 */
#include <errno.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "bg_i.h"
#include "deleg_i.h"
#include "dirdeleg_i.h"
#include "cache_i.h"
#include "client_i.h"
#include "creds_i.h"
#include "fhmap_i.h"
#include "gate_i.h"
#include "inode_i.h"
#include "locks_i.h"
#include "lsfetch_i.h"
#include "cpuquota_i.h"
#include "loop_i.h"
#include "mountwait_i.h"
#include "ofile_i.h"
#include "ops_i.h"
#include "opts_i.h"
#include "pcache_i.h"
#include "peer_i.h"
#include "podfs/auth.h"
#include "podfs/clock.h"
#include "podfs/frame.h"
#include "podfs/log.h"
#include "podfs/tls.h"
#include "push_i.h"
#include "readahead_i.h"
#include "recover_i.h"
#include "rpc_i.h"
#include "transport_i.h"
#include "ctl_i.h"
#include "status_i.h"
#include "warm_i.h"
#include "wb_i.h"

/* ---- signals ---- */

struct sigctl {
	struct client *c;
	int wake_fd; /* the request loop's (loop_wake) */
	pthread_t thr;
	atomic_bool loop_done;
};

/* The signals the signal thread waits for (every other thread blocks
 * them): SIGTERM, SIGINT and SIGHUP end the mount; SIGUSR2 wakes it. */
static void signal_set(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGHUP);
	sigaddset(set, SIGUSR2);
}

/* sigwait()s for SIGTERM/SIGINT/SIGHUP; on one, ends the session loop.
 * libfuse's own handlers cannot be used: the loop joins its workers, and
 * a worker blocked in a hard-mount call would never return. */
static void *sig_main(void *arg)
{
	struct sigctl *sc = arg;
	sigset_t set;
	int sig;

	signal_set(&set);
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
		/* The loop's thread sleeps in poll(): wake it to see the exit
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

	/* Before the pending requests go out again: they name the root by
	 * its new handle from now on; the rest is found again by name. */
	if (u->chan == 0 && u->handles_changed && c->it) {
		pfs_info("%s names another root handle: its handle secret changed; finding "
			 "the cached objects again by name", c->hostport);
		if (fhmap_put(c->fm, &c->it->root->fh, &u->root) == 0) {
			rpc_hold(c->rpc, RECOVER_HOLD_MS);
			cache_handles_changed(c->cache);
		}
	}
	/* Before the pending requests go out again: lock requests wait for
	 * the reclaims (locks.c). */
	if (u->chan == 0 && c->lk)
		locks_connected(c->lk, u->boot_id, u->auth_flags, u->restarted);
	rpc_connected(c->rpc, u->chan, u->gen, u->codecs);
	if (u->chan == 0) {
		atomic_store(&c->st_up_since, (uint64_t)time(NULL));
		atomic_store(&c->st_down_since, 0);
		if (u->again)
			atomic_fetch_add(&c->st_reconnects, 1);
	}
	/* Pushes sent while we were away are lost: revalidate. */
	if (u->chan == 0 && u->again && c->cache)
		cache_reconnected(c->cache);
	/* A delegation does not survive a reconnect (deleg_i.h). */
	if (u->chan == 0 && u->again && c->dl)
		deleg_reconnected(c->dl);
	if (u->chan == 0 && u->again && c->dd)
		dirdeleg_reconnected(c->dd);
}

static void tr_down_cb(void *arg, unsigned chan)
{
	struct client *c = arg;

	rpc_disconnected(c->rpc, chan);
	if (chan == 0)
		atomic_store(&c->st_down_since, (uint64_t)time(NULL));
	/* Pushes may be lost from now until the revalidation after the
	 * reconnect: nothing cached before counts as current (the locally
	 * answered GETATTR, trust_i.h). */
	if (chan == 0 && c->gate)
		gate_note_all(c->gate);
	if (chan == 0 && c->cache)
		cache_disconnected(c->cache);
	/* Nor is anything answered under a delegation any more (deleg_i.h). */
	if (chan == 0 && c->dl)
		deleg_reconnected(c->dl);
	if (chan == 0 && c->dd)
		dirdeleg_reconnected(c->dd);
}

static void tr_reply_cb(void *arg, const struct pfs_frame_hdr *h, uint8_t *payload,
			uint64_t boot_id, uint64_t verf, uint64_t gen)
{
	struct client *c = arg;

	rpc_complete(c->rpc, h, payload, boot_id, verf, gen);
}

static void tr_wake_cb(void *arg, const uint8_t *payload, size_t len)
{
	struct client *c = arg;

	locks_wake_push(c->lk, payload, len);
}

static uint64_t tr_note_cb(void *arg, uint16_t op, const uint8_t *payload, size_t len,
			   bool *applied_first, uint64_t *name_key)
{
	struct client *c = arg;

	atomic_fetch_add_explicit(&c->st_pushes, 1, memory_order_relaxed);
	return push_note(arg, op, payload, len, applied_first, name_key);
}

static void tr_apply_cb(void *arg, uint16_t op, const uint8_t *payload, size_t len, uint64_t seq)
{
	struct client *c = arg;

	push_apply(c, op, payload, len, seq);
}

static void tr_early_cb(void *arg, uint16_t op, const uint8_t *payload, size_t len)
{
	push_early(arg, op, payload, len);
}

static bool tr_closing_cb(void *arg)
{
	struct client *c = arg;

	return rpc_is_closing(c->rpc);
}

static void tr_unreachable_cb(void *arg, int64_t down_ms, const char *err)
{
	struct client *c = arg;
	struct wb_stats ws = { 0 };
	size_t waiting;
	uint64_t abandoned;

	rpc_waiting(c->rpc, &waiting, &abandoned);
	if (c->wb)
		wb_get_stats(c->wb, &ws);
	pfs_warn("server %s unreachable for %lld s (%s): %zu requests waiting, "
		 "%llu bytes of writes held%s",
		 c->hostport, (long long)(down_ms / 1000), err, waiting,
		 (unsigned long long)ws.held,
		 c->soft ? "" : "; a hard mount waits for it (kill -9 ends a waiting process)");
}

/* ---- main ---- */

/* libfuse's own messages, into podfs's log (its levels are syslog's).
 * (The format attribute lets clang check the vsnprintf below.) */
__attribute__((format(printf, 2, 0)))
static void fuse_log_cb(enum fuse_log_level level, const char *fmt, va_list ap)
{
	int lv = level <= FUSE_LOG_ERR ? PFS_LOG_ERR : (int)level;
	char line[1024];

	if (lv > pfs_log_level())
		return;
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	if (n < 0)
		return;
	if (n >= (int)sizeof(line))
		n = (int)sizeof(line) - 1;
	while (n > 0 && line[n - 1] == '\n')
		line[--n] = '\0';
	pfs_log(lv, "%s", line);
}

static int keygen(int argc, char **argv)
{
	if (argc == 3 && (strcmp(argv[2], "-h") == 0 || strcmp(argv[2], "--help") == 0)) {
		fputs("usage: podfs keygen FILE\n"
		      "\n"
		      "Creates a new pod key in FILE (64 hex digits, mode 0600); FILE must\n"
		      "not exist. Copy it to every host of the pod.\n",
		      stdout);
		return 0;
	}
	if (argc == 3 && argv[2][0] == '-' && argv[2][1]) {
		/* An option, not a file name (a file named so: ./-name). */
		opts_usage_error("keygen: unknown option '%s'", argv[2]);
		return OPTS_EXIT_USAGE;
	}
	if (argc != 3) {
		opts_usage_error("usage: podfs keygen FILE");
		return OPTS_EXIT_USAGE;
	}
	int rc = pfs_key_generate(argv[2]);
	if (rc < 0) {
		fprintf(stderr, "podfs: cannot create key file %s: %s\n", argv[2], strerror(-rc));
		return 1;
	}
	return 0;
}

/* `podfs pod ARGS...`: execs podfs-pod ARGS..., the one beside this
 * program (/proc/self/exe) first, then the one on PATH. Returns only if
 * neither runs: 2 when there is none, 1 when one failed to start. */
static int pod(int argc, char **argv)
{
	char path[4096];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
	int err = ENOENT;

	(void)argc;
	argv[1] = (char *)"podfs-pod";
	if (n > 0) {
		path[n] = '\0';
		char *slash = strrchr(path, '/');
		if (slash && (size_t)(slash - path) + sizeof("/podfs-pod") <= sizeof(path)) {
			strcpy(slash + 1, "podfs-pod");
			execv(path, argv + 1);
			err = errno;
		}
	}
	if (err == ENOENT || err == ENOTDIR) {
		execvp("podfs-pod", argv + 1);
		err = errno;
	}
	if (err == ENOENT || err == ENOTDIR) {
		fputs("podfs: pod: podfs-pod is neither beside podfs nor on PATH (it is installed "
		      "with podfs)\n", stderr);
		return OPTS_EXIT_USAGE;
	}
	fprintf(stderr, "podfs: pod: cannot run podfs-pod: %s\n", strerror(err));
	return 1;
}

static void client_free(struct client *c)
{
	if (c->it)
		inode_table_on_forget(c->it, NULL, NULL);
	lsfetch_free(c->lf);
	c->lf = NULL;
	cache_free(c->cache);
	c->cache = NULL;
	locks_free(c->lk);
	c->lk = NULL;
	wb_free(c->wb);
	deleg_free(c->dl);
	c->dl = NULL;
	dirdeleg_free(c->dd);
	c->dd = NULL;
	pcache_free(c->pc);
	peer_free(c);
	ofile_free_all(c);
	inode_table_free(c->it);
	fhmap_free(c->fm);
	transport_free(c->tr);
	pfs_tls_ctx_free(c->tls_ctx);
	c->tls_ctx = NULL;
	pfs_tls_ctx_free(c->tls_ca_ctx);
	c->tls_ca_ctx = NULL;
	rpc_free(c->rpc);
	gate_free(c->gate);
	creds_cache_free(c->cc);
	free(c->host);
	free(c->hostport);
	free(c->mountpoint);
	free(c->keyfile);
	free(c->cache_dir);
	free(c->tls_ca);
	free(c->tls_name);
	free(c->bdi_ra_path);
	mountwait_unlock(&c->mlock);
}

/* Reads the key, makes the session's identity and every module (nothing
 * started yet). Returns 0, or the exit code after a line on stderr. */
static int prepare(struct client *c)
{
	struct transport_cbs tcb = {
		.arg = c, .up_cb = tr_up_cb, .down_cb = tr_down_cb, .reply_cb = tr_reply_cb,
		.wake_cb = tr_wake_cb, .note_cb = tr_note_cb, .apply_cb = tr_apply_cb,
		.early_cb = tr_early_cb,
		.closing_cb = tr_closing_cb, .unreachable_cb = tr_unreachable_cb,
	};
	char err[512];

	if (pfs_key_load(c->keyfile, c->key, err, sizeof(err)) < 0) {
		fprintf(stderr, "podfs: %s\n", err);
		return 1;
	}
	if (c->tls && !(c->tls_ctx = pfs_tls_ctx_new(false, c->key, err, sizeof(err)))) {
		fprintf(stderr, "podfs: %s\n", err);
		return 1;
	}
	if (c->tls_ca && !(c->tls_ca_ctx = pfs_tls_ctx_new_ca(c->tls_ca, err, sizeof(err)))) {
		fprintf(stderr, "podfs: %s\n", err);
		return 1;
	}
	do { /* 0 is no client's id (podfsd refuses it) */
		if (pfs_random(&c->client_id, sizeof(c->client_id)) < 0) {
			fputs("podfs: no random bytes for the client id\n", stderr);
			return 1;
		}
	} while (c->client_id == 0);
	if (gethostname(c->hostname, sizeof(c->hostname) - 1) < 0)
		snprintf(c->hostname, sizeof(c->hostname), "unknown");
	c->hostname[PFS_HOSTNAME_MAX] = 0;

	if (c->cache_dir && pcache_open(c->cache_dir, c->cache_size, &c->pc, err, sizeof(err)) < 0) {
		fprintf(stderr, "podfs: %s\n", err);
		return OPTS_EXIT_USAGE;
	}
	if (!(c->fm = fhmap_new()) || rpc_new(c, &c->rpc) < 0 || transport_new(c, &tcb, &c->tr) < 0 ||
	    creds_cache_new(&c->cc) < 0 || gate_new(&c->gate) < 0 || cache_new(c, &c->cache) < 0 ||
	    locks_new(c, &c->lk) < 0 || wb_new(c, c->wb_threads, c->wb_max, &c->wb) < 0 ||
	    lsfetch_new(c, &c->lf) < 0 || peer_new(c) < 0 ||
	    (c->delegate && (deleg_new(c, &c->dl) < 0 || dirdeleg_new(c, &c->dd) < 0))) {
		fputs("podfs: out of memory\n", stderr);
		return 1;
	}
	return 0;
}

/* A line about reaching the coordinator: on stderr, or in the log once
 * a bg child has left the terminal. */
static void say(bool in_bg, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(bool in_bg, int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (in_bg) {
		pfs_vlog(level, fmt, ap);
	} else {
		fputs("podfs: ", stderr);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
	}
	va_end(ap);
}

/* After a first failed attempt with bg: the parent says so and is done
 * (returns true); the child leaves the terminal (and, holding the mount
 * point's lock, keeps trying). */
static bool go_background(struct client *c, const char *why, const char *minutes)
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "podfs: cannot fork to retry in the background: %s\n",
			strerror(errno));
		return false; /* retry in the foreground instead */
	}
	if (pid > 0) {
		fprintf(stderr, "podfs: %s; mounting %s in the background (pid %d), retrying for "
				"up to %s minutes\n", why, c->mountpoint, (int)pid, minutes);
		mountwait_lock_forget(&c->mlock); /* the child holds it */
		return true;
	}
	setsid();
	pfs_log_detach();
	mountwait_lock_owner(&c->mlock, getpid());
	pfs_notice("%s; retrying in the background for up to %s minutes to mount %s", why,
		   minutes, c->mountpoint);
	return false;
}

/* The first connection, retried within retry= while the coordinator
 * cannot be reached (mountwait_i.h). Returns 0 once connected, -1 in the
 * parent of a bg child (exit 0), or the exit code after a line on
 * stderr (or, in a bg child, in the log). */
static int connect_waiting(struct client *c, struct pfs_entry *root)
{
	double minutes = c->retry_min >= 0 ? c->retry_min
					   : c->bg ? MOUNTWAIT_RETRY_BG : MOUNTWAIT_RETRY_FG;
	int64_t start = pfs_mono_ms(), deadline = start + (int64_t)(minutes * 60000);
	char mins[32];
	unsigned seed = (unsigned)getpid() ^ (unsigned)start, n;
	bool in_bg = false;
	char err[512], why[512];
	int rc;

	snprintf(mins, sizeof(mins), "%g", minutes);
	for (n = 1;; n++) {
		rc = transport_connect_first(c->tr, root, err, sizeof(err));
		if (rc == 0) {
			if (n > 1)
				say(in_bg, PFS_LOG_NOTICE, "reached the coordinator %s after %u attempts",
				    c->hostport, n);
			return 0;
		}
		if (!mountwait_transient(rc)) {
			say(in_bg, PFS_LOG_ERR, "%s", err);
			return 1;
		}
		int64_t now = pfs_mono_ms();
		if (now >= deadline)
			break;
		if (n == 1) {
			snprintf(why, sizeof(why), "%s", err); /* names the coordinator */
			if (c->bg && !c->foreground) {
				if (go_background(c, why, mins))
					return -1;
				in_bg = true;
			} else {
				say(false, PFS_LOG_NOTICE,
				    "%s; retrying for up to %s minutes (mount option retry=MINUTES)",
				    why, mins);
			}
		}
		int64_t wait = mountwait_backoff_ms(n, (unsigned)rand_r(&seed) % 1000);
		if (wait > deadline - now)
			wait = deadline - now;
		struct timespec ts = { (time_t)(wait / 1000), (long)(wait % 1000) * 1000000 };
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
	if (n == 1)
		say(in_bg, PFS_LOG_ERR, "%s", err);
	else
		say(in_bg, PFS_LOG_ERR, "gave up: the coordinator %s could not be reached in %s minutes "
			"(retry=%s, %u attempts; last: %s)", c->hostport, mins, mins, n, err);
	return 1;
}

/* Starts the modules' threads (after fuse_daemonize) and the signal
 * thread. Returns 0, or -1 after logging why. */
static int start_threads(struct client *c, struct sigctl *sc)
{
	int rc;

	if ((rc = cache_start(c->cache)) < 0 || (rc = wb_start(c->wb)) < 0 ||
	    (rc = locks_start(c->lk)) < 0 || (rc = lsfetch_start(c->lf)) < 0 ||
	    (c->pc && (rc = pcache_start(c->pc, c)) < 0) ||
	    (c->dd && (rc = dirdeleg_start(c->dd)) < 0)) {
		pfs_err("cannot start threads: %s", strerror(-rc));
		return -1;
	}
	if ((rc = transport_start(c->tr)) < 0) {
		pfs_err("cannot start threads: %s", strerror(-rc));
		return -1;
	}
	(void)peer_start(c); /* the mount works without serving peers (logged) */
	sc->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (sc->wake_fd < 0) {
		pfs_err("cannot make an eventfd: %s", strerror(errno));
		return -1;
	}
	if ((rc = pthread_create(&sc->thr, NULL, sig_main, sc)) != 0) {
		pfs_err("cannot start the signal thread: %s", strerror(rc));
		close(sc->wake_fd);
		return -1;
	}
	bg_name(sc->thr, "signals");
	return 0;
}

/* spin=auto: no keeper where a CPU quota applies, else one where a
 * woken thread is slow to run (loop_i.h). */
static void choose_spin(struct client *c)
{
	if (c->spin_us < 0 && cpuquota_applies()) {
		c->spin_us = 0;
		pfs_notice("a CPU quota applies (cgroup): no keeper thread (spin=US forces one)");
	}
	if (c->spin_us < 0) {
		int64_t lat = loop_wake_latency_ns();
		c->spin_us = lat >= (int64_t)LOOP_SLOW_WAKE_US * 1000 ? LOOP_SPIN_US_DEFAULT : 0;
		if (lat >= 0)
			pfs_notice("an idle CPU takes %lld us to run a woken thread: %s",
				   (long long)(lat / 1000),
				   c->spin_us ? "a keeper thread spins while the mount is busy (spin=0: never)"
					      : "no keeper thread");
	}
}

/* The kernel is done with the mount (or never used it): what is held is
 * committed, the background threads stop, the daemon is told (GOODBYE),
 * the connections close. */
/* A step of finish that took long is logged: an exit that hangs says
 * where. */
static void finish_step(const char *what, int64_t *t)
{
	int64_t now = pfs_mono_ns();
	if (now - *t > 2000000000LL)
		pfs_notice("exiting: %s took %.1f s", what, (double)(now - *t) / 1e9);
	*t = now;
}

static void finish(struct client *c)
{
	int64_t t = pfs_mono_ns();

	ctl_stop(c->ctl);
	c->ctl = NULL;
	rpc_closing(c->rpc);
	/* Every file is closed: nothing is pending. Write-behind itself
	 * stays until client_free: a RECALL (push thread) or a disconnect
	 * (connection thread) until transport_stop still asks it. */
	wb_commit_all(c->wb);
	/* And the unlinks answered under a directory delegation. */
	dirdeleg_stop(c->dd);
	finish_step("committing held writes and unlinks", &t);
	/* Their threads may wait in a call: stop them before the connection
	 * (the listings' first: what they queued holds lookups). */
	lsfetch_stop(c->lf);
	finish_step("stopping the listing threads", &t);
	cache_stop(c->cache);
	locks_stop(c->lk);
	pcache_stop(c->pc);
	peer_stop(c);
	finish_step("stopping the cache, lock, persistent cache and peer threads", &t);
	if (rpc_is_up(c->rpc)) {
		struct rpc_reply rep = { 0 };
		(void)rpc_call_timeout(c->rpc, PFS_OP_GOODBYE, NULL, 0, &rep, 1000);
		rpc_reply_free(&rep);
	}
	transport_stop(c->tr);
	finish_step("closing the connections", &t);
}

int main(int argc, char **argv)
{
	struct client c = {
		.of_lock = PTHREAD_MUTEX_INITIALIZER,
		.estale = ESTALE_INIT,
	};
	struct fuse_args fa = FUSE_ARGS_INIT(0, NULL);
	struct sigctl sc = { .c = &c };
	struct pfs_entry root;
	int rc, ret = 1;

	if (argc >= 2 && strcmp(argv[1], "keygen") == 0)
		return keygen(argc, argv);
	if (argc >= 2 && strcmp(argv[1], "warm") == 0)
		return warm_main(argc, argv);
	if (argc >= 2 && strcmp(argv[1], "status") == 0)
		return status_main(argc, argv);
	if (argc >= 2 && strcmp(argv[1], "pod") == 0)
		return pod(argc, argv);

	pfs_payload_alloc_tune();
	opts_defaults(&c);
	atomic_init(&c.next_fid, 1);
	atomic_init(&c.bdi_tuned, false);
	atomic_init(&sc.loop_done, false);
	rc = opts_parse(&c, argc, argv, &fa);
	if (rc != 0) {
		fuse_opt_free_args(&fa);
		client_free(&c);
		return rc < 0 ? 0 : rc;
	}
	if (c.debug)
		c.log_level = PFS_LOG_DEBUG;
	pfs_log_init("podfs", c.log_level);
	fuse_set_log_func(fuse_log_cb);

	if ((ret = prepare(&c)) != 0)
		goto out_free;
	ret = 1;
	signal(SIGPIPE, SIG_IGN);

	if ((rc = connect_waiting(&c, &root)) != 0) {
		ret = rc < 0 ? 0 : rc;
		goto out_free;
	}
	if (inode_table_new(&root, &c.it) < 0) {
		fputs("podfs: out of memory\n", stderr);
		goto out_stop;
	}
	inode_table_on_forget(c.it, cache_forget_cb, c.cache);
	c.it->fm = c.fm;

	/* Signals: SIGTERM/INT/HUP go to the signal thread (sigwait), so
	 * every thread blocks them; a stray SIGUSR1 is ignored. Until here
	 * (connecting) they simply end the process: nothing is mounted. */
	sigset_t set;
	signal_set(&set);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGUSR1, SIG_IGN);

	c.se = fuse_session_new(&fa, &ops_fuse_ops, sizeof(ops_fuse_ops), &c);
	if (!c.se)
		goto out_stop; /* libfuse printed why */
	if (fuse_session_mount(c.se, c.mountpoint) != 0)
		goto out_destroy;
	/* Mounted: from now on mountinfo says so (opts.c's check). */
	mountwait_unlock(&c.mlock);
	readahead_find(&c);

	if (fuse_daemonize(c.foreground) != 0)
		goto out_unmount;
	if (!c.foreground)
		pfs_log_use_syslog();
	if (start_threads(&c, &sc) < 0)
		goto out_unmount;
	pfs_notice("mounted %s on %s", c.hostport, c.mountpoint);
	(void)ctl_start(&c, &c.ctl); /* the mount works without it */

	choose_spin(&c);
	rc = loop_run(c.se, LOOP_MAX_THREADS, LOOP_MAX_IDLE, (unsigned)c.spin_us, sc.wake_fd);
	ret = rc < 0 ? 1 : 0;
	if (rc < 0)
		pfs_err("session loop failed: %s", strerror(-rc));

	atomic_store(&sc.loop_done, true);
	pthread_kill(sc.thr, SIGUSR2);
	pthread_join(sc.thr, NULL);
	close(sc.wake_fd);
out_unmount:
	finish(&c);
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
