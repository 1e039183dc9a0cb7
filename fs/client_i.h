/* client_i.h: the podfs client context shared by the fs/ modules.
 *
 * One struct client per process, created in main.c and handed to every
 * module (and to libfuse as the session userdata); there are no mutable
 * globals.
 *
 * Threads of a mount (all started after fuse_daemonize, which forks):
 *  - the main thread: start-up (main.c), then loop_run's wait for the
 *    request threads, then the shutdown;
 *  - the FUSE request threads (loop.c): a pool, idle ones in read(), up to
 *    LOOP_MAX_THREADS processing requests (ops_*.c handlers), LOOP_MAX_IDLE
 *    idle ones kept; they block in rpc_call, wb, locks;
 *  - the keeper (loop.c), while spin_us > 0: a nice 19 thread that keeps
 *    a CPU awake while the mount is busy; and, once at mount with
 *    spin=auto, a short-lived thread that measures a wake-up;
 *  - one connection thread per connection (transport.c: conn_main for the
 *    main connection, bulk_main for each bulk one): connect, handshake
 *    (sock.c), receive frames (their bytes, TLS or not: stream.c), hand
 *    replies to rpc.c and pushes to the push queue, reconnect with
 *    backoff; never blocks on the kernel;
 *  - the push thread (pushq.c): applies server invalidations in order
 *    (push.c), the only thread that calls fuse_lowlevel_notify_* for them;
 *  - the ack thread (pushq.c): acknowledges pushes (PUSH_ACK);
 *  - the cache thread (cache.c): FORGET batches, REVALIDATE after a
 *    reconnect;
 *  - the locks thread (locks.c): reclaims locks after a daemon restart;
 *  - the listing threads (lsfetch.c): LSF_THREADS of them, fetching the
 *    listings of the subdirectories a walk opens next;
 *  - the write-behind writers (wb.c): wb_threads of them (default 4),
 *    each sending queued WRITEs and background commits;
 *  - with -o delegate, the senders of unlinks answered under a directory
 *    delegation (dirdeleg_send.c, DD_SENDERS of them);
 *  - with cache_dir: the persistent cache's worker (pcache.c: stores
 *    entries, runs fetches, evicts) and its start-up scan thread
 *    (pcache_disk.c, ends after the scan);
 *  - the signal thread (main.c): SIGTERM/INT/HUP, and the unmount that
 *    ends the session without a signal.
 * The background ones (cache, locks, listings, writers, pcache, push and ack)
 * share one skeleton, bg.c. `podfs warm` runs in a process of its own
 * with its reader threads (warm.c).
 *
 * Out-of-memory policy: a FUSE handler whose allocation fails answers
 * ENOMEM; the connection thread, which has nobody to answer, drops the
 * connection instead (it reconnects and the pending requests are resent);
 * start-up allocations that fail make podfs exit with a message.
 */
#ifndef PODFS_CLIENT_I_H
#define PODFS_CLIENT_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "estale_i.h"
#include "mountwait_i.h"
#include "podfs/lathist.h"
#include "podfs/link.h"
#include "podfs/wire.h"

/* -o conns=N: the connections of a mount (transport.c). */
#define PFS_CONNS_MAX (1 + PFS_BULK_MAX)
#define PFS_CONNS_DEFAULT 1

struct fuse_session;
struct rpc;
struct transport;
struct inode_table;
struct creds_cache;
struct cache;
struct gate;
struct pcache;
struct wb;
struct locks;
struct lsfetch;
struct peer;
struct dirdeleg;

struct client {
	/* Options (read-only once the session runs). */
	char *host;        /* host name or address, without brackets */
	uint16_t port;
	char *hostport;    /* "HOST:PORT" for messages */
	char *mountpoint;  /* absolute */
	char *keyfile;
	bool foreground;
	bool debug;
	bool soft;
	double timeo;            /* soft-mount timeout, seconds */
	double attr_timeout;     /* seconds */
	double entry_timeout;
	double negative_timeout;
	uint32_t max_inline;     /* LOOKUP_DATA inline bytes (0: plain LOOKUP) */
	int log_level;
	unsigned conns;          /* TCP connections: 1 main + conns-1 bulk */
	int spin_us;             /* keeper window, us (loop_i.h); -1: auto */
	unsigned wb_threads;     /* write-behind writer threads (0: synchronous) */
	size_t wb_max;           /* bytes of write data write-behind may hold */
	double lock_retry;       /* seconds between retries of a blocked lock */
	enum pfs_lz4_mode lz4;   /* when requests are LZ4-compressed (link.h) */
	char *cache_dir;         /* persistent content cache directory, or NULL */
	uint64_t cache_size;     /* its size cap in bytes */
	bool metrics;            /* -o metrics=: serve metrics_addr (ctl.c) */
	struct sockaddr_storage metrics_addr;
	char metrics_name[64];   /* "addr:port" once listening (before ctl.c's thread) */
	bool tls;                /* tls=on (default) / off */
	char *tls_ca;            /* tls_ca=FILE: verify the server's certificate, no PSK */
	char *tls_name;          /* tls_name=: the name it must carry (with tls_ca, host if not given) */
	bool bg;                 /* bg: retry in a background child (mountwait_i.h) */
	double retry_min;        /* retry=MINUTES; -1: the default (fg 2, bg 10000) */
	/* Peer-assisted reads (peer_i.h). */
	bool peers;              /* -o peers: read large files in chunks, also from peers */
	uint16_t peer_port;      /* peer_port=: where to serve them (0: any port) */
	size_t peer_cache;       /* peer_cache=: bytes of chunks held */
	uint64_t peer_min;       /* peer_min=: smallest file read in chunks */
	double peer_timeout;     /* peer_timeout=: seconds a peer may take for a chunk */
	bool delegate;           /* -o delegate: attribute delegations of new files (deleg_i.h) */
	struct mountwait_lock mlock; /* held from opts_parse until mounted or given up */

	/* Session identity. */
	uint8_t key[PFS_KEY_LEN];
	struct ssl_ctx_st *tls_ctx; /* TLS keyed by key (tls.h); NULL: tls=off */
	struct ssl_ctx_st *tls_ca_ctx; /* tls_ca: the server's, by certificate (peers: tls_ctx) */
	uint64_t client_id;      /* random, kept across reconnects */
	char hostname[PFS_HOSTNAME_MAX + 1];

	/* The modules, made at start-up (main.c), freed at exit. */
	struct fuse_session *se;
	struct rpc *rpc;         /* pending calls (rpc.c) */
	struct transport *tr;    /* the connections (transport.c) */
	struct inode_table *it;  /* nodeid <-> handle (inode.c) */
	struct creds_cache *cc;  /* callers' groups (creds.c) */
	struct gate *gate;       /* the push/reply race gate (gate.c) */
	struct cache *cache;     /* FORGET, REVALIDATE, ENOSYS memory (cache.c) */
	struct fhmap *fm;        /* handles after a change of the server's secret (fhmap.c) */
	struct pcache *pc;       /* persistent content cache (pcache.c), or NULL */
	struct wb *wb;           /* write-behind (wb.c) */
	struct locks *lk;        /* locks held, reclaim, wake-ups (locks.c) */
	struct lsfetch *lf;      /* listings fetched now and ahead of a walk (lsfetch.c) */
	struct ctl *ctl;         /* the status socket (ctl.c), or NULL */
	struct peer *peer;       /* peer-assisted reads (peer.c), or NULL */
	struct deleg *dl;        /* delegations held (deleg.c), or NULL: -o delegate off */
	struct dirdeleg *dd;     /* directory delegations (dirdeleg.c), or NULL: off */

	atomic_uint_fast64_t next_fid; /* client-chosen open-file ids */
	/* Files the kernel opened and has not released yet (ofile.c). An
	 * unmount can end the session before the kernel's last RELEASEs. */
	pthread_mutex_t of_lock;
	struct ofile *open_files;
	atomic_uint lazy_opens; /* of them, opened locally and not yet known to the daemon */
	/* OPENs answered ESTALE, by thread, to know the VFS's retry (estale.c). */
	struct estale estale;

	/* Byte counters, shown by the "user.podfs.stats" xattr of the
	 * mount's root: frames on the wire (headers included) and their
	 * payloads before LZ4, and file data read. */
	atomic_uint_fast64_t st_wire_out, st_raw_out, st_wire_in, st_raw_in;
	atomic_uint_fast64_t st_file_read;
	/* Requests sent to the daemon, by opcode (re-sends not counted). */
	atomic_uint_fast64_t st_req[PFS_OP_MAX];
	/* Of them, the ones answered, by the time from the call to its
	 * reply (podfs/lathist.h), and the sum of those times in us. */
	atomic_uint_fast64_t st_lat[PFS_OP_MAX][LATHIST_BUCKETS];
	atomic_uint_fast64_t st_lat_sum_us[PFS_OP_MAX];
	/* The main connection: reconnects since the mount, and when (wall
	 * clock, s) the current one came up; pushes received. */
	atomic_uint_fast64_t st_reconnects, st_up_since, st_pushes;
	/* Inodes the kernel forgot (evicted: memory reclaim, drop_caches,
	 * a removed file), counted as its FORGETs come, unlike the FORGET
	 * requests to the daemon (batched, and never sent for an inode the
	 * kernel looked up again first). */
	atomic_uint_fast64_t st_forgotten;
	atomic_uint_fast64_t st_down_since; /* wall clock, s; 0 while up */
	/* The mount's readahead (readahead.c). */
	atomic_bool bdi_tuned;         /* read_ahead_kb raised (after INIT) */
	char *bdi_ra_path;             /* /sys/class/bdi/MAJ:MIN/read_ahead_kb or NULL */
};

#endif /* PODFS_CLIENT_I_H */
