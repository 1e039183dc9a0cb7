/* req_i.h: one request in flight: what the loop fills before it queues
 * the request on the thread pool (server.c), what the worker that runs
 * it fills (dispatch.c), and what the loop does with it once the worker
 * is done: its reply, the invalidations it made, the acknowledgements
 * the reply waits for.
 *
 * Threads: the loop thread owns a req, except while a worker runs it
 * (between uv_queue_work and its after-work callback); the worker writes
 * only the fields marked "filled by the worker" and reads the others.
 */
#ifndef PODFSD_REQ_I_H
#define PODFSD_REQ_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <uv.h>

#include "podfs/codec.h"
#include "conn_i.h"
#include "interest_i.h"
#include "push_i.h"

struct session;
struct pfsd;
struct drc_ent;
struct replylog_rec;

/* Holders recalled for one request at most (others: at its next run). */
#define OP_RECALL_MAX 8

struct req {
	uv_work_t work;
	struct conn *c;        /* referenced (conn_ref) */
	struct session *s;     /* referenced (session_ref) until the reply is queued */
	struct pfsd *d;
	struct pfs_frame_hdr h;
	uint8_t *in;           /* wire payload, owned */
	size_t acct;           /* bytes accounted in c->mem (conn_req_add) */
	struct drc_ent *drc;   /* its entry in s's reply cache, or NULL */
	/* Sent again after a restart, and answered by the instance before:
	 * that reply (owned; the worker takes it instead of running r), and
	 * whether it was one (the reply waits as a change's: server.c). */
	struct replylog_rec *replay;
	bool replayed;
	/* Or a WRITE whose append the instance before wrote and
	 * replylog_settle found where it began: at, its length and CRC32C.
	 * It is answered without writing it again if it carries those bytes
	 * (op_write). */
	bool landed;
	uint64_t landed_at;
	uint32_t landed_len, landed_crc;
	/* Or a change the instance before began and gave no reply to
	 * (REPLYLOG_BEGUN): it runs again, and the error of a change already
	 * made counts as made (dispatch_names.c); a rename's record may say
	 * what was at its old name (malloc'd, or NULL). */
	bool begun;
	struct pfs_fh *begun_was;
	unsigned codecs;       /* PFS_CAP_LZ4/ZR the session negotiated */
	bool dir_attr;         /* it negotiated PFS_CAP_DIR_ATTR */
	bool new_dir;          /* and PFS_CAP_NEW_DIR */
	bool new_xattrs;       /* and PFS_CAP_NEW_XATTRS */
	bool rename_attr;      /* it negotiated PFS_CAP_RENAME_ATTR */
	bool unlink_victim;    /* it negotiated PFS_CAP_UNLINK_VICTIM */
	bool post_attr;        /* it negotiated PFS_CAP_POST_ATTR */
	bool append_at;        /* it negotiated PFS_CAP_APPEND_AT */
	bool list_xattr;       /* it negotiated PFS_CAP_LIST_XATTR */
	bool list_cookies;     /* it negotiated PFS_CAP_LIST_COOKIES */
	bool deleg;            /* it negotiated PFS_CAP_DELEG (and the daemon grants) */
	bool no_splice;        /* its connection is TLS: READ replies are copied */
	uint32_t auth_flags;   /* AUTH reply flags (PFS_AUTH_*) */
	struct export_opts rule; /* c's export rule when it was queued */
	struct inflight fl;    /* its place in s's ordered requests (push.c) */
	uint64_t epoch;        /* s->forget_epoch when queued */
	struct keyvec keys;    /* interest keys the worker registered */
	/* s->ha->waitq: waiting for its host's share of the workers
	 * (workers.c); or c->paceq: a READ waiting for its connection's
	 * replies to drain (pace.c). */
	STAILQ_ENTRY(req) wlink;
	size_t pace;           /* a READ's reply bound (lim_reply_bound) */
	bool paced;            /* on c->paceq; its reply bound not in acct yet */
	bool pacing;           /* pace counted in c->pace_busy (pace.c) */
	bool pooled;           /* on the thread pool (counted in s->running) */
	/* Run on the loop thread first (workers_try_on_loop): its handler
	 * must not wait (data in the page cache, an open fid, a cached
	 * handle), else it answers -OP_WOULD_BLOCK and blocked is set: the
	 * request goes to the thread pool as it is, its bytes kept. */
	bool nowait;
	bool blocked;
	uint64_t t0;           /* uv_hrtime() when it was queued (its latency) */

	/* Filled by the worker. */
	bool violation;        /* close the connection (bad LZ4 payload) */
	bool keep_reply;       /* an appending WRITE, a truncating OPEN: its
				* reply is kept as a drc opcode's is (wire.h:
				* drc; drc_settle) */
	int32_t status;
	struct frame reply;    /* own[0]: the payload, own[1]: its coded copy */
	int pipe[2];           /* splice_len > 0: the rest of the payload */
	size_t splice_len;     /* payload bytes waiting in pipe after reply */
	struct inval *invals;  /* for other clients, once the reply is queued */

	/* Held back for a recall (op_recall_check): the object it names,
	 * and the sessions (client_ids) holding delegations on it or in
	 * it. The worker keeps `in` for the run after the recall. Or, with
	 * forewarn, held back to push the change of the object's rights to
	 * the other sessions that cache it before it is made (op_forewarn);
	 * forewarned: that was done (it runs for real). */
	bool recall;
	bool forewarn, forewarned;
	struct pfs_fh recall_fh;
	uint64_t recall_key;
	uint64_t recall_owners[OP_RECALL_MAX];
	size_t nrecall;
	unsigned recalls;       /* times it was held back */
	uint64_t recall_since;  /* uv_now when its RECALLs went (recall_hold) */

	/* Reply held until other clients acknowledged this change's pushes
	 * (loop thread, server.c); with recall, the holders' acknowledgement
	 * of their RECALL, after which it runs again. */
	struct acks acks;       /* each client's deadline is its own */
	/* A change made while the clients of the instance before have not
	 * all revalidated: its reply waits for them too (revalhold_i.h). */
	bool rvwait;
	uint64_t author;        /* its session's client_id */
	struct req *hnext;      /* d->held */
};

#endif /* PODFSD_REQ_I_H */
