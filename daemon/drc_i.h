/* drc_i.h: the duplicate request cache of one session.
 *
 * A client that loses its connection sends its unanswered requests again
 * once it reconnects; a non-idempotent one (wire.h: drc) must not run a
 * second time, and a WRITE (once) must not run while its first try still
 * runs. The cache keeps, by request id: the requests of those opcodes
 * while they run, and the replies of the drc ones once they are done, the
 * newest PFSD_DRC_MAX (or the max given to drc_init) of them. Finished
 * replies are forgotten oldest first; running requests are never
 * forgotten by the cache itself.
 *
 * Pure bookkeeping: no libuv, no sockets, no logging. Not thread-safe:
 * podfsd uses it on its loop thread only.
 */
#ifndef PODFSD_DRC_I_H
#define PODFSD_DRC_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "podfs/htab.h"
#include "podfs/wire.h"

/* One request: running (done false), or its reply (done true). */
struct drc_ent {
	struct hnode hn;
	TAILQ_ENTRY(drc_ent) lru; /* oldest first */
	uint64_t id;
	uint16_t op;
	bool done;             /* the reply is stored below */
	bool resend;           /* a duplicate arrived while it ran: send it again */
	uint64_t resend_conn;  /* id of the connection the duplicate came on */
	/* The reply frame as it went out: its packed header and its payload
	 * (owned), wire bytes and bytes before coding. */
	uint8_t hdr[PFS_FRAME_HDR_SIZE];
	uint8_t *wire;
	size_t len;
	size_t raw;
};

struct drc {
	struct htab tab;                /* id -> struct drc_ent */
	TAILQ_HEAD(, drc_ent) lru;      /* oldest first */
	size_t n;
	size_t max;                     /* done replies kept, at most */
};

/* Makes c empty; it keeps at most max finished replies. Never fails. */
void drc_init(struct drc *c, size_t max);
/* Frees every entry (running ones too: their requests no longer need
 * them) and the table. */
void drc_fini(struct drc *c);

/* The entry of request id, running or done, or NULL. */
struct drc_ent *drc_find(struct drc *c, uint64_t id);
/* Starts remembering request id of opcode op, running (the caller checked
 * that drc_find(c, id) is NULL), and forgets the oldest finished replies
 * beyond the maximum. Returns the entry, which stays valid until
 * drc_forget, or until drc_done and max later replies. Never fails. */
struct drc_ent *drc_begin(struct drc *c, uint64_t id, uint16_t op);
/* The request of e finished with this reply: hdr (PFS_FRAME_HDR_SIZE
 * bytes) and wire[len] (copied; wire may be NULL when len is 0), raw
 * payload bytes before coding. */
void drc_done(struct drc_ent *e, const uint8_t *hdr, const void *wire, size_t len, size_t raw);
/* Forgets e and frees it (a request that produced no reply, or whose
 * reply is not to be kept), so that a resend runs again. */
void drc_forget(struct drc *c, struct drc_ent *e);

#endif /* PODFSD_DRC_I_H */
