/* conn_i.h: one client connection: reading its frames, the write queue
 * and the memory it holds, backpressure, zero-copy sending, closing.
 *
 * A connection knows frames, not what they mean: its owner (server.c)
 * hands it two callbacks, one for each whole frame that arrives and one
 * for when it closes, and otherwise calls down into it. conn.c never
 * calls the session, push or server code. The handshake sets st, caps
 * and host; conn.c reads them to bound and filter frames (a handshake
 * frame is small; after AUTH a client sends requests and PUSH_ACKs) and
 * for its log lines.
 *
 * Lifetime: a connection is freed once it is closed (both its handles'
 * close callbacks ran), no request of it is in flight and nobody holds a
 * reference (conn_ref). Until then its memory stays valid, closed or not.
 *
 * Loop thread only, except backlog, which workers read.
 */
#ifndef PODFSD_CONN_I_H
#define PODFSD_CONN_I_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <uv.h>

#include "podfs/tls.h"
#include "podfs/wire.h"
#include "acklat_i.h"
#include "exports_i.h"
#include "framer_i.h"
#include "limits_i.h"
#include "tls_stream_i.h"

struct pfsd;
struct session;
struct conn;
struct req;

enum conn_state {
	CS_HELLO, /* waiting for HELLO */
	CS_AUTH,  /* HELLO answered, waiting for AUTH */
	CS_READY, /* authenticated */
};

/* What the connection speaks, told by its first bytes (pfs_tls_sniff). */
enum conn_mode {
	CM_SNIFF, /* nothing read yet */
	CM_PLAIN, /* frames in the clear (--allow-plaintext) */
	CM_TLS,   /* frames inside TLS (tls) */
};

#define CONN_RBUF 32768
/* How stale the kernel's part of a connection's backlog may be: time,
 * and bytes queued since (conn.c: note_backlog). */
#define CONN_BACKLOG_NS 100000u
#define CONN_BACKLOG_BYTES ((size_t)64 << 10)

/* Bytes of frames (headers included) on the wire and before/after LZ4,
 * in and out (loop thread): a connection's, a session's, the daemon's. */
struct traffic {
	uint64_t wire_in, raw_in, wire_out, raw_out;
};

/* A whole frame arrived on c: its header is c->h, payload its wire_len
 * bytes as received (malloc'd, or NULL when empty), which the callee
 * owns from now on. Not called once c is closing or ends
 * (conn_close_after_write). */
typedef void (*conn_frame_cb)(struct conn *c, uint8_t *payload);
/* c is closing (called once, by conn_close, before its handles close):
 * the owner lets go of it (lists, sessions). c stays valid until freed. */
typedef void (*conn_close_cb)(struct conn *c);
/* The deadline of conn_deadline passed. */
typedef void (*conn_deadline_cb)(struct conn *c);
/* c's socket took bytes of its write queue while READs of it wait for
 * their turn (npaced, pace_i.h): its owner may start some now. */
typedef void (*conn_drain_cb)(struct conn *c);

/* A frame to send: its packed header (pfs_frame_prepare), its payload as
 * it goes on the wire, and the buffers to free once it is written. */
struct frame {
	uint8_t hdr[PFS_FRAME_HDR_SIZE];
	const void *wire;      /* len payload bytes on the wire */
	size_t len;
	size_t raw;            /* payload bytes before coding (byte counters) */
	void *own[2];          /* freed once written or dropped (NULL: none) */
	bool sealed;           /* encrypted by its worker into the connection's
				  TLS stream already (tls_stream_seal): hdr and
				  wire are gone, len and raw count */
};

struct conn {
	/* The transport (conn.c). */
	uv_tcp_t tcp;
	uv_timer_t timer;      /* the owner's deadline (conn_deadline) */
	uv_timer_t kick;       /* reading resumes with rest (conn_flow) */
	struct pfsd *d;
	uint64_t id;
	char peer[64];         /* "addr:port" */
	int64_t since;         /* when it was accepted (wall clock, s) */
	struct traffic tr;     /* its frames (podfsd status, observe.c) */
	struct sockaddr_storage addr; /* the peer's address */
	struct pfs_srckey src;     /* its source for the handshake quota (server.c) */
	bool in_srcq;          /* counted in d->srcq (server.c) */
	bool closing;          /* uv_close issued */
	bool reading;
	bool close_after_write;
	const char *end_why;   /* close_after_write: the reason logged */
	unsigned open_handles; /* tcp + timer + kick, until their close_cb */
	unsigned refs;         /* conn_ref */
	unsigned inflight;     /* requests queued, running or being written */
	size_t mem;            /* request + reply bytes held for this conn */
	size_t making;         /* of them, the payload of the frame being read */
	size_t queued;         /* bytes of its uv_writes not called back yet */
	/* Its session's requests and bytes (once authenticated; also
	 * counted there), and what it waits for while not read: its
	 * session's replies (on acct->held by plink), and for the memory
	 * cap the daemon's as well (on d->paused too, by mlink); or its
	 * host's pace of refusals (on d->paced by plink). */
	struct lim_acct *acct;
	enum { CONN_READ, CONN_SHARE, CONN_PAUSED, CONN_PACED } held;
	LIST_ENTRY(conn) plink;
	LIST_ENTRY(conn) mlink;
	/* Its paced READs wait for the daemon's memory (on d->reads_held;
	 * pace.c). */
	LIST_ENTRY(conn) rlink;
	bool reads_held;
	/* Reply bytes written but not sent yet (loop writes, workers read):
	 * LZ4 only while the link is backed up (link.h). The kernel's part
	 * is asked for (an ioctl) at most every CONN_BACKLOG_NS, or after
	 * CONN_BACKLOG_BYTES more bytes were queued (note_backlog). */
	_Atomic size_t backlog;
	uint64_t written;      /* bytes given to uv_write or spliced, ever */
	size_t bl_kernel;      /* the kernel's unsent bytes, as last asked */
	uint64_t bl_written;   /* c->written then */
	uint64_t bl_at;        /* when (uv_hrtime) */
	/* A REVALIDATE came on it (workers): its REVALIDATED then counts
	 * (dispatch_dirs.c). */
	atomic_bool revalidated;
	conn_frame_cb frame_cb;
	conn_close_cb close_cb;
	conn_deadline_cb deadline_cb;
	conn_drain_cb drain_cb;

	/* READ replies paced (pace.c, above conn.c): the READs waiting for
	 * the replies ahead of them to leave, FIFO, and the most reply bytes
	 * of the READs started whose replies are not queued yet. */
	STAILQ_HEAD(, req) paceq;
	unsigned npaced;
	size_t pace_busy;

	/* Frame reader (framer_i.h): the header of the frame being read,
	 * or of the whole one just handed on. */
	struct framer fr;
	struct pfs_frame_hdr h;
	/* Bytes read but not parsed yet: reading stopped between two
	 * frames of one read (backpressure holds at every frame). */
	uint8_t *rest;
	size_t nrest;

	/* TLS: the first bytes decide the mode; then tls decrypts what is
	 * read and encrypts what is written. */
	enum conn_mode mode;
	uint8_t sniff[PFS_TLS_SNIFF_LEN];
	size_t nsniff;
	struct tls_stream tls; /* CM_TLS (tls_stream_i.h); else zeroed */

	/* The handshake (handshake.c) and the session it leads to. */
	enum conn_state st;
	char host[PFS_HOSTNAME_MAX + 1];
	uint64_t client_id;
	uint64_t caps;
	uint8_t cnonce[PFS_NONCE_LEN];
	uint8_t snonce[PFS_NONCE_LEN];
	struct session *sess;
	bool bulk;             /* a bulk connection of sess (PFS_CAP_BULK) */

	/* The options of the export rule that admits addr (server.c;
	 * replaced on SIGHUP). */
	struct export_opts rule;

	/* Pushes (push.c). Times are uv_now's, ms. */
	uint64_t push_sent;    /* pushes written on this connection */
	uint64_t push_acked;   /* of which the client acknowledged (PUSH_ACK) */
	/* The least push number a held reply waits for it to acknowledge
	 * (no more: a bound from below), valid while ack_gen is
	 * d->ack_gen, else none (push_acks_need). */
	uint64_t ack_need;
	uint64_t ack_gen;
	/* Where its wait is in the acks it was last added to (ackwait_add):
	 * a change pushed to a thousand hosts found each one's wait by
	 * looking through all those before it. */
	uint64_t ackw_id;
	size_t ackw_i;
	struct acklat lat;     /* its acknowledgement delays: its deadline */
	uint64_t probe_n;      /* the push being timed: its number (0: none) */
	uint64_t probe_at;     /* when it was written */
	uint64_t flushed_at;   /* pushes held in its session's FIFO last went */
	bool behind;           /* changes do not wait for its acknowledgements */
	uint64_t behind_at;    /* since when */
	uint64_t behind_mark;  /* until it acknowledged this many pushes */
	uint64_t recall_mark;  /* the number of the last RECALL pushed to it */
	bool pushes_ok;        /* its AUTH reply is queued: pushes may follow */
	uint64_t hello_at;     /* the HELLO reply went (handshake.c) */
	uint64_t rx_at;        /* its last frame arrived (server.c) */

	/* In the server's list of connections (d->conns, server.c). */
	LIST_ENTRY(conn) link;
};

/* A new connection of d, not connected yet: its handles initialised on
 * d's loop, a fresh id, st CS_HELLO. frame_cb and close_cb as above.
 * Never fails. Then conn_accept. */
struct conn *conn_new(struct pfsd *d, conn_frame_cb frame_cb, conn_close_cb close_cb);
/* Accepts the pending connection of listener into c, names its peer and
 * sets its socket options; reading starts with conn_flow. Returns 0, or
 * -1 after closing c (conn_close: "accept failed"). */
int conn_accept(struct conn *c, uv_stream_t *listener);

/* Writes "addr:port" ("[v6]:port") of ss into buf ("?" if unknown). */
void conn_addr_name(const struct sockaddr_storage *ss, char *buf, size_t len);

/* Starts (or stops) reading c as its requests in flight
 * (PFSD_MAX_INFLIGHT) and the bytes it holds (PFSD_MAX_QUEUED) allow,
 * its session's and the daemon's (lim_may_read), and its host's pace of
 * refusals (lim_pace; the first time a session is held back by one of
 * those, a log line says which). A no-op once c is closing or ends. */
void conn_flow(struct conn *c);
/* The timer that lets connections paced for their host's refusals read
 * again (server start and stop). */
void conn_pace_init(struct pfsd *d);
void conn_pace_stop(struct pfsd *d);
/* c authenticated: from now on its requests and bytes count in the
 * session's account a too (referenced until c is freed). */
void conn_set_acct(struct conn *c, struct lim_acct *a);
/* Stops reading c for good (a refused connection). */
void conn_stop_reading(struct conn *c);

/* cb runs whenever c's socket took bytes of its write queue while c has
 * paced READs (c->npaced), until c closes. */
void conn_on_drain(struct conn *c, conn_drain_cb cb);
/* Bytes of frames queued on c (replies, pushes, TLS records) whose
 * buffers are still held: not taken by its socket yet, or taken and
 * their write callback not run yet (libuv runs it on a later turn of
 * the loop). */
size_t conn_queued(const struct conn *c);
/* What c's client has not been sent at all: the bytes libuv has not
 * written to the socket yet, and those the kernel holds but did not send
 * (conn_queued once c is closing). */
size_t conn_unsent(const struct conn *c);

/* Arms c's deadline: cb(c) in ms milliseconds, unless conn_deadline_stop
 * or conn_close comes first. */
void conn_deadline(struct conn *c, uint64_t ms, conn_deadline_cb cb);
/* Disarms c's deadline. */
void conn_deadline_stop(struct conn *c);

/* Closes c: logs why (info once authenticated, else debug), calls its
 * close_cb and closes its handles. Idempotent. c stays valid while
 * requests or references hold it. */
void conn_close(struct conn *c, const char *why);
/* A protocol violation: logs what (rate-limited) and closes c. */
void conn_violation(struct conn *c, const char *what);
/* Ends c once every frame queued on it is written (why: the reason
 * logged then); frames it sends meanwhile are ignored. */
void conn_close_after_write(struct conn *c, const char *why);

/* Holds c's memory past its closing (a request, a reply waiting for c's
 * acknowledgement). */
void conn_ref(struct conn *c);
/* Lets go of a conn_ref: reconsiders reading (conn_flow) and frees c if
 * it is closed and nothing else holds it. */
void conn_unref(struct conn *c);

/* A request of c was queued: until its reply is written (conn_reply,
 * conn_reply_spliced) or it is dropped (conn_req_drop), it counts in
 * c's requests in flight and its acct bytes (its own and the most its
 * reply can take, lim_reply_bound) in c's memory, its session's and the
 * daemon's. Updates reading (conn_flow). */
void conn_req_add(struct conn *c, size_t acct);
/* n more bytes for a request of c already counted (a paced READ's reply,
 * once it starts): released with the request's acct. Updates reading. */
void conn_charge(struct conn *c, size_t n);
/* The payload buffer of the frame being read (c->making bytes, made at
 * its header) counts in c's memory until the frame is whole or c goes:
 * a key holder's connections each holding a frame but its last byte
 * would hold a payload each that no budget saw. Reading is not stopped
 * inside a frame: the next header is asked for (feed, conn_flow). */
void conn_making(struct conn *c, size_t n);
void conn_made(struct conn *c);
/* n bytes held for session account a that no connection holds (its
 * deferred pushes), counted in a's memory and the daemon's; and let go,
 * when the connections held back for memory may read again. */
void pfsd_mem_hold(struct pfsd *d, struct lim_acct *a, size_t n);
void pfsd_mem_release(struct pfsd *d, struct lim_acct *a, size_t n);
/* Session account a's session ended: what a holds leaves its host's
 * memory, and a counts there no more (its connections may outlive the
 * session). If the host fell below its share with it, its connections
 * held back for the daemon's memory may read, and start their paced
 * READs, again. */
void conn_acct_leave_host(struct pfsd *d, struct lim_acct *a);
/* A request of conn_req_add (acct as there) ends without a reply. Updates
 * reading. */
void conn_req_drop(struct conn *c, size_t acct);
/* A request of conn_req_add now holds only keep bytes (its reply, held
 * back: server.c): *acct becomes keep if it was more, the rest is let go.
 * Updates reading. */
void conn_req_shrink(struct conn *c, size_t *acct, size_t keep);

/* Queues the reply f of a request of c (conn_req_add with acct), taking
 * f->own. Dropped (and f->own freed) if c is closing; a failing write
 * closes c. Never frees c. */
void conn_reply(struct conn *c, struct frame *f, size_t acct);
/* The same for a READ reply whose payload continues with splice_len
 * bytes waiting in pipe (pipes_i.h): f is the header and the start of
 * the payload. If nothing else is queued on c, they go out now, the
 * pipe's pages moved into the socket without a copy as far as it takes
 * them without blocking; the rest is copied out of the pipe and queued
 * behind, so frames keep their order. Neither step waits for the disk.
 * Takes f->own and the pipe (back to the pool). */
void conn_reply_spliced(struct conn *c, struct frame *f, int pipe[2], size_t splice_len,
			size_t acct);

/* Queues a frame that answers no counted request, with a copy of
 * wire[len] (raw: its payload bytes before coding). hdr: packed header.
 * Dropped if c is closing. */
void conn_send_copy(struct conn *c, const uint8_t *hdr, const void *wire, size_t len, size_t raw);
/* Queues an uncoded frame built here (a handshake reply, a push, the
 * reply to a request answered on the loop) with a copy of payload. */
void conn_send_small(struct conn *c, uint64_t id, uint16_t op, uint16_t flags, int32_t status,
		     const void *payload, size_t len);

#endif /* PODFSD_CONN_I_H */
