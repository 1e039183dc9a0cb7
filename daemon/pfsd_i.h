/* pfsd_i.h: the podfsd context shared by all daemon modules.
 *
 * The files, top to bottom; each calls only files below it, and upward
 * only through callbacks it was handed:
 *   main.c          command line, start-up checks, daemonizing, signals
 *   server.c        accept, the path of a request, held replies
 *   sweep.c         the periodic sweep: handle cache, ended sessions' interest slots
 *   admit.c         connections before AUTH: export rules, pending quota
 *   handshake.c     HELLO and AUTH          dispatch.c  the opcode table,
 *                                           the ladder, FORGET
 *   dispatch_*.c    the handlers by kind    op.c, creds.c  their helpers
 *   export*.c       the operations on the backing store
 *   watch.c         changes made beside podfs -> pushes
 *   session.c       sessions, fids, lock fds, lock wake-ups
 *   push.c          push fan-out, push/reply order, acknowledgements
 *   pace.c          a connection's READ replies paced (read-queue)
 *   conn.c          one connection: frames, write queue, backpressure
 *   leaves          handles.c hsecret.c interest.c lockstate.c pipes.c drc.c idtab.c framer.c
 *                   tls_stream.c (a connection's TLS on byte-queue BIOs)
 *                   ratelimit.c caps.c exports.c (export rules) limits.c,
 *                   acklat.c (acknowledgement deadlines), and lib/
 *
 * Threads: one libuv loop thread owns the listener, the connections, the
 * session table, every reply cache and the push order; worker threads
 * (uv_queue_work) run the operations on the export and touch only
 * per-session tables guarded by the session's mutexes, the handle cache,
 * the interest table, the lock state, the pipe pool and the inotify
 * watch list (each under its own mutex), and the atomic counters marked
 * below.
 *
 * Out-of-memory policy: every allocation goes through xmalloc() and its
 * kin (podfs/xalloc.h), which abort the daemon with a log line.
 */
#ifndef PODFSD_PFSD_I_H
#define PODFSD_PFSD_I_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <uv.h>

#include "podfs/wire.h"
#include "podfs/link.h"
#include "podfs/htab.h"
#include "podfs/lathist.h"
#include "podfs/xalloc.h"
#include "drc_i.h"
#include "exports_i.h"
#include "interest_i.h"
#include "limits_i.h"
#include "pipes_i.h"
#include "ratelimit_i.h"
#include "replylog_i.h"

struct handles;
struct conn;
struct req;
struct session;
struct watch;
struct lockstate;
struct observe;
struct chunks;
struct deleg;

struct pfsd_opts {
	const char *listen;    /* "ADDR:PORT" */
	const char *key_path;
	const char *state_dir;
	const char *pidfile;
	const char *portfile;
	const char *export_dir;
	const char *genkey;    /* --genkey FILE: make a pod key and exit */
	bool daemonize;
	bool ro;
	bool allow_plaintext;  /* --allow-plaintext: TLS optional (conn.c) */
	const char *tls_cert;  /* --tls-cert FILE: a certificate too (tls.h) */
	const char *tls_key;   /* --tls-key FILE: its key (default: tls_cert) */
	bool buffered;         /* --buffered-writes: no O_DIRECT for big writes */
	bool new_hsecret;      /* --new-handle-secret: serve an export recorded
				* under another handle secret (hsecret_i.h) */
	int log_level;
	unsigned threads;
	unsigned lease;        /* seconds a disconnected session lingers */
	unsigned lock_lease;   /* seconds its locks survive (capped by lease) */
	unsigned grace;        /* seconds of grace period after a restart */
	unsigned reval_wait;   /* seconds a change waits after a restart for the
				* clients before to revalidate (revalhold_i.h) */
	unsigned ack_timeout;  /* ms: the least a change waits for a client's
				* PUSH_ACK (acklat_i.h; 1..PFSD_ACK_WAIT_MS) */
	unsigned recall_timeout; /* ms: a recall waits for a silent holder
				  * (1..PFSD_RECALL_WAIT_MS) */
	enum pfs_lz4_mode lz4; /* when replies are LZ4-compressed (link.h) */
	/* Export rules (exports_i.h): --exports FILE, or --allow and the
	 * options of its rules; rule_flag: the last of those given, if any. */
	const char *exports;
	const char *allow;
	struct export_opts rule;
	const char *rule_flag;
	const char *limits;    /* --limits key=value,... (limits_i.h) */
	const char *control;   /* --control-socket PATH ("" none; NULL: the default) */
	const char *metrics;   /* --metrics ADDR[:PORT], or NULL: none */
	uint64_t peer_min;     /* --peer-min: smallest file served in chunks (0: off) */
	uint64_t peer_chunk;   /* --peer-chunk: chunk bytes (a power of two) */
	bool delegate;         /* --delegate: grant attribute delegations */
};

struct pfsd {
	struct pfsd_opts o;
	struct sockaddr_storage listen_addr;
	uv_loop_t loop;
	uv_tcp_t listener;
	uv_signal_t sig_term;
	uv_signal_t sig_int;
	uv_timer_t sweep_timer;   /* handle cache sweep (sweep.c) */
	uv_timer_t ack_timer;     /* held replies' deadlines (server.c) */
	uint64_t ack_gen;         /* conns' ack_need older than this count no more
				     (held_scan, push.c) */
	uint64_t acks_seq;        /* the last struct acks' id (push.c) */
	uv_timer_t pace_timer;    /* paced refusals' connections resume (conn.c) */
	uint64_t pace_due;        /* when it fires (uv_hrtime) */
	uint64_t ack_due;         /* when it fires (uv_now ms; UINT64_MAX: idle) */
	uv_idle_t ack_idle;       /* once it fired: the verdicts come after the */
	uv_check_t ack_check;     /* poll for I/O of that turn of the loop */
	struct req *held;         /* replies waiting for PUSH_ACKs (loop, server.c) */
	uv_work_t sweep_work;
	bool sweeping;
	unsigned sweep_ticks;     /* PFSD_TICK_MS ticks since the last full sweep */
	uint8_t key[PFS_KEY_LEN]; /* pod key: handshake only */
	struct ssl_ctx_st *tls_ctx; /* TLS keyed by the pod key (tls.h, conn.c) */
	uint64_t boot_id;         /* random per start: this instance (locks, sessions) */
	uint64_t write_verf;      /* the write verifier: the machine's boot (bootverf_i.h) */
	struct handles *hs;       /* export fd, handle MACs, fd cache */
	struct htab sessions;     /* client_id -> struct session (loop) */
	struct htab hosts;        /* address -> struct hostacct (loop; session.c) */
	struct drc_pool drcpool;  /* the sessions' kept replies (loop; drc_i.h) */
	struct interest *it;      /* who caches what (any thread) */
	struct lscache *lc;       /* listings kept to serve again (any thread) */
	struct session *slot_sess[INTEREST_SLOTS]; /* live session of each slot (loop) */
	unsigned nslotless;       /* live sessions without a slot (loop) */
	uint64_t sessions_made;   /* sessions made since start (loop): their numbers */
	struct watch *watch;      /* changes made beside podfs (loop) */
	struct lockstate *ls;     /* lock waiters, holders, grace (any thread) */
	struct revalhold *rh;     /* sessions on disk, the hold after a restart (any thread) */
	struct replylog replies;  /* the replies of changes on disk, for the next instance */
	uint64_t rl_forget_ms;    /* uv_now when the replies read at start go */
	uint64_t rl_answered;     /* re-sent requests answered from them (loop) */
	struct chunks *chunks;    /* peer-assisted reads (any thread), NULL: off */
	struct deleg *deleg;      /* delegations (any thread), NULL: --delegate off */
	uint64_t st_recalls;      /* requests held back for a recall (loop) */
	uint64_t st_revoked;      /* holders that did not answer a recall (loop) */
	uint64_t st_recalls_beside; /* holders recalled for a change beside podfs (loop) */
	uint64_t st_forewarns;    /* changes of rights pushed before made (loop) */
	LIST_HEAD(, conn) conns;  /* open connections, newest first (loop) */
	unsigned nconns;
	unsigned npreauth;        /* connections not yet authenticated */
	unsigned npaced;          /* READs waiting for their connection (pace.c) */
	struct srcq srcq;         /* of which per source address (loop) */
	struct limits lim;        /* the fair-use limits (limits_i.h) */
	size_t mem;               /* request + reply bytes of all connections (loop) */
	/* Where every connection's reads land (CONN_RBUF each; loop,
	 * conn_read.c): each read is parsed, or kept by copying, before
	 * its callback returns, so one of each serves them all. */
	uint8_t *rbuf;            /* bytes read, or decrypted */
	uint8_t *cbuf;            /* TLS: ciphertext read */
	LIST_HEAD(, conn) paused; /* connections not read for their session's or the
				     daemon's memory or requests (loop, conn.c) */
	LIST_HEAD(, conn) paced;  /* not read for their host's refusals (conn.c) */
	LIST_HEAD(, conn) reads_held; /* their paced READs wait for the daemon's
				     memory (pace.c) */
	_Atomic size_t fds;       /* sessions' fids and lock fds (any thread) */
	_Atomic size_t lock_ranges; /* their POSIX locks' ranges (any thread) */
	TAILQ_HEAD(, session) lingering; /* disconnected sessions, oldest first (loop) */
	unsigned nlingering;
	struct ratelimit rl;      /* log lines about hostile input (loop) */
	uint64_t next_conn_id;
	bool stopping;
	uv_signal_t sig_usr1;     /* logs the byte counters */
	uv_signal_t sig_hup;      /* reloads the exports file */
	struct exports rules;     /* who may connect, and how (loop) */
	char *rules_file;         /* where they came from, or NULL: flags */
	/* Byte counters (loop thread): frames on the wire (headers
	 * included) and their payloads before/after LZ4. */
	uint64_t wire_in, raw_in, wire_out, raw_out;
	uint64_t spliced;         /* READ reply bytes sent zero-copy (loop) */
	_Atomic uint64_t direct;  /* WRITE bytes written with O_DIRECT (workers) */
	struct pipes pipes;       /* for zero-copy READ replies (any thread) */

	/* What podfsd status and the metrics show (loop thread; observe.c
	 * serves them). */
	struct observe *obs;      /* the control socket and metrics endpoint */
	int64_t started;          /* wall clock at start, s */
	int port;                 /* the port listened on */
	uint64_t accepted;        /* connections accepted */
	uint64_t st_req[PFS_OP_MAX]; /* requests by opcode, all clients */
	/* Their latency, from the frame's arrival to its reply being
	 * queued (lathist.h), and its sum in us. */
	uint64_t st_lat[PFS_OP_MAX][LATHIST_BUCKETS];
	uint64_t st_lat_sum_us[PFS_OP_MAX];
	uint64_t st_pushes;       /* pushes sent */
	uint64_t st_loop_reads;   /* READs answered on the loop thread (workers.c) */
	uint64_t st_watch_own;    /* fanotify events of podfsd's own changes, read and skipped */
	/* The loop's time spent trying them in the window that began at
	 * loop_read_window (uv_now, ms): capped at half of it (workers.c). */
	uint64_t loop_read_window;
	uint64_t loop_read_ns;
	unsigned char atime_mode; /* the export's (export_atime_mode) */
	/* Clients late with a PUSH_ACK (push.c): stalled ones that fell
	 * behind, running ones cut off at PFSD_ACK_WAIT_MS, and waits given
	 * another deadline because the client was running. */
	uint64_t st_ack_misses, st_ack_cutoffs, st_ack_extended;
	uint64_t st_hits[LIM_NCAPS]; /* limit hits by enum lim_cap bit (limits_i.h) */
};

/* Limits of the daemon (not of the protocol). */
#define PFSD_MAX_CONNS 1024
#define PFSD_MAX_BULK PFS_BULK_MAX        /* bulk connections per session */
#define PFSD_MAX_INFLIGHT 256             /* requests per connection */
#define PFSD_MAX_QUEUED (64u << 20)       /* bytes per connection */
#define PFSD_HANDSHAKE_MS 10000
#define PFSD_DRC_MAX 1024                 /* cached replies per session */
#define PFSD_HCACHE_MAX 16384             /* cached O_PATH fds */
#define PFSD_SWEEP_MS 30000               /* handle cache sweep period */
#define PFSD_TICK_MS 1000                 /* held deleted files are let go this often */
#define PFSD_ORPHAN_MS 5000               /* a deleted file stays openable by handle
					     (handles_orphan): longer than a push
					     takes to be acknowledged (PFSD_ACK_WAIT_MS) */
#define PFSD_MAX_DEFERRED 65536           /* pushes waiting per session */
#define PFSD_GRACE_MAX 600                /* --grace seconds */
#define PFSD_REVAL_WAIT_MAX 600           /* --revalidate-wait seconds */
#define PFSD_PEER_FANOUT 4                /* clients one holder serves at once (chunks_i.h) */
#define PFSD_PEER_FETCH_MS 30000          /* a chunk fetch unreported this long is forgotten */
#define PFSD_ACK_WAIT_MS 2000             /* a change waits at most this long for a
					     PUSH_ACK (of a client that is running) */
#define PFSD_ACK_TIMEOUT_MS 30            /* --ack-timeout: the least it waits */
#define PFSD_RECALL_TIMEOUT_MS 5000       /* --recall-timeout: a recall waits this long
					     for a holder that sends nothing */
#define PFSD_RECALL_WAIT_MS 120000        /* and at most this long for one that does */

/* Whether a log line about hostile input may go now (ratelimit_i.h).
 * Loop thread. */
static inline bool pfsd_log_allowed(struct pfsd *d)
{
	return ratelimit_allow(&d->rl, uv_now(&d->loop));
}

/* pfs_warn, held back while hostile input makes too many lines. Loop
 * thread. */
#define pfsd_warn_rl(d, ...)                      \
	do {                                      \
		if (pfsd_log_allowed(d))          \
			pfs_warn(__VA_ARGS__);    \
	} while (0)

#endif /* PODFSD_PFSD_I_H */
