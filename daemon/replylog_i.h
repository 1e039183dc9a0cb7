/* replylog_i.h: the reply cache's copy in the state directory, for the
 * next instance of podfsd.
 *
 * A client sends a request again, with the same id, after it reconnects;
 * the reply cache (drc_i.h) answers a once-only one (wire.h: drc, and a
 * WRITE that appended) from the reply its first try gave. That cache
 * lives in memory: a podfsd killed (-9, a crash) after a change but
 * before its reply reached the client forgot it, and the next instance
 * ran the re-sent change again: an append landed twice, a re-sent mkdir
 * got EEXIST, a re-sent unlink ENOENT.
 *
 * So a worker writes each such reply, as it is made, into
 * STATE_DIR/replies, and a new instance reads the replies the instances
 * before it wrote and answers a re-sent request from them. Such an
 * answer goes the way of a change's reply (server.c, dispatch.c): it
 * waits, as a change made after the restart does, for the other clients
 * of the instance before to revalidate (revalhold_i.h), since that
 * instance may have died before it told them of the change. The file is a
 * ring of REPLYLOG_SLOTS slots of REPLYLOG_SLOT bytes, the oldest
 * overwritten first; each record carries a checksum. Records are written
 * with pwrite and never fsync'ed: they must outlive the process, not the
 * machine, and they are used only on the machine boot that wrote them
 * (the write verifier, bootverf_i.h). After a machine crash the change
 * itself may be lost while its record is not; a re-sent request then
 * runs again, as before.
 *
 * The window that is left: a podfsd killed between a change and the
 * write of its record (a few microseconds, in the worker) runs the
 * re-sent request again. A reply too big for a slot (a change's reply is
 * a few hundred bytes) is not written.
 *
 * Threads: replylog_put from any thread (a slot each, taken atomically);
 * replylog_find and replylog_forget on the loop thread only.
 */
#ifndef PODFSD_REPLYLOG_I_H
#define PODFSD_REPLYLOG_I_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "podfs/htab.h"
#include "podfs/wire.h"

#define REPLYLOG_NAME "replies"
#define REPLYLOG_SLOT 1024u
#define REPLYLOG_SLOTS 4096u   /* a 4 MiB file */
#define REPLYLOG_FIXED 56u     /* a record's fields before the frame header */
/* The largest reply payload a slot holds. */
#define REPLYLOG_MAX_WIRE (REPLYLOG_SLOT - REPLYLOG_FIXED - PFS_FRAME_HDR_SIZE)

/* A reply an instance before this one gave. */
struct replylog_rec {
	struct hnode hn;
	uint64_t client_id;
	uint64_t id;
	uint64_t seq;   /* its place in the order of records */
	uint16_t op;
	int32_t status; /* the reply's: 0 or an errno */
	uint8_t hdr[PFS_FRAME_HDR_SIZE];
	size_t len;  /* wire bytes */
	size_t raw;  /* bytes before coding */
	uint8_t wire[];
};

struct replylog {
	int fd;                 /* -1: not kept (the file could not be opened) */
	uint64_t verf;          /* the write verifier of this machine boot */
	atomic_uint_fast64_t seq; /* of the next record written */
	struct htab old;        /* (client_id, id) -> struct replylog_rec */
	size_t n_old;
	atomic_uint_fast64_t too_big, failed; /* replies not written */
};

/* Opens (makes, 0600) STATE_DIR/replies and reads the records written on
 * this machine boot (verf) by the instances before. A file that is not a
 * regular file of ours is refused: -errno and a one-line reason in err.
 * Unreadable records (torn, another boot, garbage) are skipped. */
int replylog_open(struct replylog *rl, const char *state_dir, uint64_t verf, char *err,
		  size_t errlen);
/* Closes the file and frees the records read. */
void replylog_close(struct replylog *rl);

/* Any thread: writes the reply (its frame header hdr and wire[len], raw
 * bytes before coding) that client_id's request id of opcode op got.
 * Best effort: a reply too big for a slot, or a failed write, is counted
 * and not kept. */
void replylog_put(struct replylog *rl, uint64_t client_id, uint64_t id, uint16_t op,
		  const uint8_t hdr[PFS_FRAME_HDR_SIZE], const void *wire, size_t len, size_t raw);

/* Loop thread: the reply an instance before gave to client_id's request
 * id of opcode op, or NULL. Valid until replylog_forget. */
const struct replylog_rec *replylog_find(const struct replylog *rl, uint64_t client_id,
					 uint64_t id, uint16_t op);
/* A malloc'd copy of p (NULL without memory): a request answered from it
 * keeps it while it waits (server.c). */
struct replylog_rec *replylog_copy(const struct replylog_rec *p);
/* Loop thread: frees the records read at the start (the clients of the
 * instance before have had their lease to send their requests again). */
void replylog_forget(struct replylog *rl);

/* The record of a reply in slot[REPLYLOG_SLOT] (zeroed past it): its
 * length, or 0 if it does not fit. */
size_t replylog_pack(uint8_t *slot, uint64_t verf, uint64_t seq, uint64_t client_id, uint64_t id,
		     uint16_t op, const uint8_t hdr[PFS_FRAME_HDR_SIZE], const void *wire,
		     size_t len, size_t raw);
/* Reads the record in slot[REPLYLOG_SLOT]: a malloc'd struct replylog_rec
 * and its seq, or NULL when the slot holds none of boot verf (empty,
 * torn, another boot, a bad length, a frame header that is not a valid
 * reply header of the record's request and payload). */
struct replylog_rec *replylog_unpack(const uint8_t *slot, uint64_t verf, uint64_t *seq);

#endif /* PODFSD_REPLYLOG_I_H */
