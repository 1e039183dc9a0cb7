/* limits_i.h: the fair-use limits of podfsd: what one client may hold
 * (open files, lock owners and the byte ranges of their locks, requests in
 * flight, reply memory), what the
 * whole daemon may hold (memory for requests and replies, file
 * descriptors, disconnected sessions), and the quota of unauthenticated
 * connections per source address.
 *
 * Pure logic: the figures and their parsing (--limits), the accounting
 * the loop thread keeps per session and for the daemon, the check of
 * whether a connection may read another request, the bound on a
 * request's reply, the file descriptor budget shared by worker threads
 * (atomic) and the per-source table of pending handshakes. No libuv.
 */
#ifndef PODFSD_LIMITS_I_H
#define PODFSD_LIMITS_I_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "podfs/netaddr.h"

/* The figures (--limits key=value,...); 0 in a field not given means
 * "the default" until limits_defaults fills it. */
struct limits {
	unsigned open_files;  /* open-files: fids per host (all the sessions
				 from one address: struct hostacct) */
	unsigned lock_owners; /* lock-owners: lock fds per host */
	unsigned lock_ranges; /* lock-ranges: byte ranges its POSIX locks hold in
				 the kernel's lock table, per host */
	unsigned lock_table;  /* lock-table: the same, over all hosts */
	unsigned requests;    /* requests: in flight per client session */
	unsigned workers;     /* workers: worker threads one host's requests
				 (all its sessions') may occupy at once */
	size_t client_mem;    /* client-memory: request + reply bytes per session */
	size_t memory;        /* memory: the same, over all sessions */
	unsigned fd_reserve;  /* fd-reserve: fds never given to sessions' files */
	unsigned lingering;   /* lingering: disconnected sessions kept */
	size_t reply_cache;   /* reply-cache: bytes of replies kept for resent
				 requests, over all sessions (drc_i.h) */
	unsigned preauth;     /* preauth: unauthenticated connections */
	unsigned preauth_per_source; /* preauth-per-source: of which per address (/64) */
	size_t peer_table;    /* peer-table: memory of the chunk table (chunks_i.h) */
	unsigned peer_records; /* peer-records: chunks one client is listed as holding */
	size_t read_queue;    /* read-queue: READ reply bytes one connection may have
				 being made or waiting to be sent (pace.c) */
	unsigned refusals;    /* refusals: requests of one host a limit refuses
				 (EMFILE, ENFILE, ENOLCK) per second, before its
				 connections stop reading for a while (lim_pace) */
	/* Derived by limits_defaults. */
	size_t nofile;        /* RLIMIT_NOFILE */
	size_t fd_budget;     /* fds for sessions' fids and lock fds */
	size_t hcache_max;    /* the handle cache's size when fds are plenty */
};

/* A host (all the sessions from its address) may always hold this much,
 * whatever the daemon-wide memory: a client is never starved by others'
 * use of it. Per host, not per session: a key holder's sessions cost
 * one login each, and a floor each let 100 of them hold 800 MiB past
 * the budget. */
#define LIM_MIN_SHARE (8u << 20)
/* A host may always hold this many lock ranges, whatever the others
 * hold of lock-table (within its own lock-ranges). */
#define LIM_LOCK_MIN_SHARE 256u
/* read-queue's default: a connection's READ replies being made or
 * waiting for its socket (see docs/limits.md, "Pacing READ replies"). */
#define LIM_READ_QUEUE (2u << 20)
/* The handle cache keeps at least this many fds under fd pressure. */
#define LIM_HCACHE_MIN 256

/* Parses "key=value,key=value" into l (sizes take a K, M or G suffix).
 * Returns 0, or -1 with a one-line reason in err. */
int limits_parse(struct limits *l, const char *spec, char *err, size_t errlen);
/* Fills the figures not given from nofile (RLIMIT_NOFILE), ram (bytes of
 * physical memory), hcache_max (the handle cache's configured size) and
 * threads (--threads), and derives the fd budget. Returns 0, or -1 with
 * a reason in err when the figures given leave no fds for sessions. */
int limits_defaults(struct limits *l, size_t nofile, size_t ram, size_t hcache_max,
		    unsigned threads, char *err, size_t errlen);
/* Writes the figures as "key=value,..." (the log line at start). */
void limits_format(const struct limits *l, char *buf, size_t len);

/* What a cap that was hit is (bits of lim_acct.logged / session hits). */
enum lim_cap {
	LIM_OPEN_FILES = 1,
	LIM_LOCK_OWNERS = 2,
	LIM_REQUESTS = 4,
	LIM_CLIENT_MEM = 8,
	LIM_MEMORY = 16,
	LIM_FDS = 32,
	LIM_LOCK_RANGES = 64,
	LIM_LOCK_TABLE = 128,
	LIM_REFUSALS = 256,
};
#define LIM_NCAPS 9
/* The option key of a cap ("open-files"...). */
const char *lim_cap_name(enum lim_cap cap);

/* One session's requests in flight and the bytes they hold, shared by
 * its connections, which each keep a reference (loop thread). */
struct conn;
struct lim_acct {
	unsigned refs;
	unsigned inflight;
	size_t mem;
	unsigned logged; /* caps already logged (enum lim_cap bits) */
	struct lim_pace *pace; /* its host's refusals; NULL once the session ended */
	/* Its host's memory (struct hostacct), where mem's changes are
	 * counted too; NULL once the session ended (its rest left it then). */
	size_t *host_mem;
	/* Its connections not read for its share (requests,
	 * client-memory, memory), which its own replies let go: the list's
	 * head, kept by conn.c (LIST_HEAD(, conn)). */
	struct {
		struct conn *lh_first;
	} held;
};

/* The refusals of one host (requests a limit refused: EMFILE, ENFILE,
 * ENOLCK), paced: refusals=N a second, and a burst of N at once; past
 * that, its connections stop reading until the pace allows one more. A
 * client that keeps asking past a cap otherwise kept a worker and the
 * loop busy for nothing, as fast as it could send (25,000 refused OPENs
 * a second doubled another host's round trip on two cores). A generic
 * cell rate algorithm: tat is when the next refusal would be on time
 * (ns, the loop's clock). Loop thread. */
struct lim_pace {
	uint64_t tat;
};

/* Counts one refusal at now (ns) at rate a second. */
void lim_pace_note(struct lim_pace *p, uint64_t now, unsigned rate);
/* 0 if p is within its pace at now, else the ns until it is. */
uint64_t lim_pace_wait(const struct lim_pace *p, uint64_t now, unsigned rate);

/* A new account with one reference. */
struct lim_acct *lim_acct_new(void);
void lim_acct_ref(struct lim_acct *a);
/* Frees a at its last reference (its counts are 0 by then). */
void lim_acct_unref(struct lim_acct *a);

/* Whether a connection of the session a (NULL: not authenticated) may
 * read another request while the daemon holds total bytes: 0, or the
 * cap (enum lim_cap) that holds it back. Over the daemon's memory, a
 * waits once its host holds LIM_MIN_SHARE (a ended: once it does). */
unsigned lim_may_read(const struct limits *l, const struct lim_acct *a, size_t total);
/* Whether the daemon holds total bytes, at least its memory, and a's
 * host its share (LIM_MIN_SHARE; a ended: a itself; a NULL: never):
 * a's connections then read nothing more, nor start paced READs. */
bool lim_over_share(const struct limits *l, const struct lim_acct *a, size_t total);

/* The most reply bytes the request (op, frame flags, its wire payload)
 * can make: a READ's asked size, a listing's maximum, a small bound for
 * the rest. Reserved before the request is queued. */
size_t lim_reply_bound(uint16_t op, uint16_t flags, const uint8_t *payload, size_t len);

/* Whether a connection may start another READ while busy bytes of its
 * READ replies are being made or wait to be sent (written to it but not
 * yet taken by its socket) and paced READs of it wait already: only
 * behind none of those, and below bound (read-queue). One READ may thus
 * take it past bound by at most its own size; a connection with nothing
 * busy may always start one. */
bool lim_read_may_start(size_t busy, bool others_wait, size_t bound);

/* Takes one fd of the budget max from *used (workers, lock-free):
 * returns false if none is left. */
bool lim_fd_take(_Atomic size_t *used, size_t max);
/* Gives one back. */
void lim_fd_give(_Atomic size_t *used);
/* The handle cache's size when sessions hold used fds: what is left of
 * nofile after the reserve and theirs, within [LIM_HCACHE_MIN,
 * l->hcache_max]. */
size_t lim_hcache_room(const struct limits *l, size_t used);

/* --- pending handshakes per source --- */

/* Pending handshakes by source: a small array (one entry per source
 * with some pending; at most the preauth cap of them). Loop thread. */
struct srcq {
	struct srcq_ent {
		struct pfs_srckey k;
		unsigned n;
	} *v;
	size_t n, cap;
};

void srcq_init(struct srcq *q);
void srcq_fini(struct srcq *q);
/* Pending handshakes from k. */
unsigned srcq_count(const struct srcq *q, const struct pfs_srckey *k);
/* One more from k; returns the new count. */
unsigned srcq_add(struct srcq *q, const struct pfs_srckey *k);
/* One less from k (an entry at 0 goes). */
void srcq_del(struct srcq *q, const struct pfs_srckey *k);
/* The source with the most pending (ties: any), or false if none. */
bool srcq_busiest(const struct srcq *q, struct pfs_srckey *out);

#endif /* PODFSD_LIMITS_I_H */
