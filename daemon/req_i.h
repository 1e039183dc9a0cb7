/* req_i.h: one request in flight: what the loop thread fills before it
 * queues the request on the thread pool (server.c), what the worker that
 * runs it fills (dispatch.c), and what the loop does with it once the
 * worker is done (its reply, the invalidations it made).
 *
 * Threads: the loop thread owns a req except while a worker runs it
 * (between uv_queue_work and its after-work callback); the worker writes
 * only the fields marked "filled by the worker".
 */
#ifndef PODFSD_REQ_I_H
#define PODFSD_REQ_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "podfs/codec.h"
#include "interest_i.h"

struct conn;
struct session;
struct pfsd;
struct drc_ent;

/* Invalidation to push to other sessions once a request completes. */
struct inval {
	struct inval *next;
	uint16_t op;           /* PFS_OP_INVAL_INODE, PFS_OP_INVAL_ENTRY or
				* PFS_OP_LOCK_WAKE (server_lock_wake) */
	struct pfs_fh fh;
	int64_t off, len;
	struct pfs_name name;
};

/* A client whose acknowledgement a held reply waits for (see server.c,
 * "acknowledged pushes"). */
struct ackwait {
	struct session *s;     /* referenced */
	uint64_t conn_id;      /* the connection the push went out on */
	uint64_t target;       /* its push_sent once the push is written */
};

struct req {
	uv_work_t work;
	struct conn *c;
	struct session *s;
	struct pfsd *d;
	struct pfs_frame_hdr h;
	uint8_t *in;           /* wire payload, owned */
	size_t acct;           /* bytes accounted in c->mem */
	struct drc_ent *drc;
	unsigned codecs;       /* PFS_CAP_LZ4/ZR the session negotiated */
	bool dir_attr;         /* it negotiated PFS_CAP_DIR_ATTR */
	bool new_dir;          /* and PFS_CAP_NEW_DIR */
	uint32_t auth_flags;   /* AUTH reply flags (bit0: session resumed) */

	/* Push ordering (loop thread; see server.c). */
	bool ordered;          /* in s's in-flight list: pushes wait for its reply */
	bool meta;             /* hands out metadata (LOOKUP, GETATTR, READDIR...) */
	uint64_t seq;          /* position in s's in-flight list */
	struct req *iprev, *inext;
	uint64_t epoch;        /* s->forget_epoch when queued */
	struct keyvec keys;    /* interest keys the worker registered */

	/* Filled by the worker. */
	bool violation;        /* close the connection (bad LZ4 payload) */
	int32_t status;
	uint8_t *out;          /* raw reply payload, owned */
	size_t outlen;         /* reply payload bytes before coding */
	uint8_t hdr[PFS_FRAME_HDR_SIZE];
	void *scratch;         /* compressed payload, owned */
	const void *wire;
	size_t wirelen;
	int pipe[2];           /* splice_len > 0: the rest of the payload */
	size_t splice_len;     /* payload bytes waiting in pipe after wire */
	struct inval *invals;

	/* Reply held until other clients acknowledged this change's pushes
	 * (loop thread). */
	struct ackwait *aw;
	size_t naw, caw;
	uint64_t ack_deadline;  /* uv_now, ms */
	struct req *hnext;      /* d->held */
};

#endif /* PODFSD_REQ_I_H */
