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
 * instance may have died before it told them of the change. The file
 * holds REPLYLOG_SLOTS slots of REPLYLOG_SLOT bytes, shared between the
 * hosts (below); each record carries a checksum. Records are written
 * with pwrite and never fsync'ed: they must outlive the process, not the
 * machine, and they are used only on the machine boot that wrote them
 * (the write verifier, bootverf_i.h). After a machine crash the change
 * itself may be lost while its record is not; a re-sent request then
 * runs again, as before.
 *
 * The slots are shared fairly between the hosts (rlslots_i.h): a record
 * goes to a free slot, else to the oldest of its own host's while that
 * host holds its share, else to the oldest of the host that holds the
 * most. So a host that makes changes without end does not push out the
 * records of the others. The records read at the start count as one
 * more host's until replylog_forget. (A change's reply takes a slot of
 * its own, not its record begun's: a kill between the two must leave
 * the record begun, and test_reply_cache.py makes that state by emptying
 * the reply's slot.)
 *
 * An append (a WRITE through an O_APPEND fid) also writes a record
 * before its data: where the file ended, its length and the CRC32C of
 * its bytes (replylog_intend; export_write takes them under a lock of the
 * inode's, so no other append of podfsd's lands between). A podfsd killed
 * after that record and before the reply's leaves the next instance an
 * append it cannot answer yet: it looks at the file before it serves
 * anyone (replylog_settle). The bytes are there: the re-sent WRITE is
 * answered that they landed there, without writing them again. The file
 * ends inside them: the kill cut the write, the file is cut back to where
 * the append began, and the re-sent WRITE appends, as the file ends where
 * it did before it. Neither: the re-sent WRITE appends.
 *
 * A change of names or xattrs writes a record too before it runs
 * (replylog_begin, REPLYLOG_BEGUN). Sent again to the next instance with
 * no reply after that record, it runs again, and the error of a change
 * already made (EEXIST, ENOENT, ENODATA) counts as the first run's
 * success (dispatch_names.c, made_before; dispatch_xattrs.c). An exchange
 * of two names (RENAME_EXCHANGE), which a second run would undo, has no
 * such error: its record names what was at its old name, and sent again
 * it runs only if that is still there.
 *
 * The window that is left: a podfsd killed between another change and
 * the write of its record (a few microseconds, in the worker) runs the
 * re-sent request again. A reply too big for a slot (a change's reply is
 * a few hundred bytes) is not written.
 *
 * Threads: replylog_put, replylog_intend and replylog_begin from any
 * thread (a slot each, taken under a lock); replylog_settle before the
 * loop serves anyone; replylog_find, replylog_forget and the hosts'
 * comings and goings on the loop thread only.
 */
#ifndef PODFSD_REPLYLOG_I_H
#define PODFSD_REPLYLOG_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "podfs/codec.h"
#include "podfs/htab.h"
#include "podfs/wire.h"
#include "rlslots_i.h"

#define REPLYLOG_NAME "replies"
#define REPLYLOG_SLOT 1024u
#define REPLYLOG_SLOTS 4096u   /* a 4 MiB file */
#define REPLYLOG_FIXED 56u     /* a record's fields before the frame header */
/* The largest reply payload a slot holds. */
#define REPLYLOG_MAX_WIRE (REPLYLOG_SLOT - REPLYLOG_FIXED - PFS_FRAME_HDR_SIZE)
/* An append's record before its data: at, len, crc and the handle. */
#define REPLYLOG_APPEND_FIXED 17u
/* Locks of the slots' writes (slot % REPLYLOG_STRIPES): a slot given to
 * a record while another's write to it is under way waits for that. */
#define REPLYLOG_STRIPES 64u

enum replylog_kind {
	REPLYLOG_REPLY = 0,  /* a reply */
	REPLYLOG_APPEND = 1, /* an append about to be written (no reply yet) */
	/* An append's record that an instance settled as not written: it
	 * stands in for it, so that an instance after that one does not
	 * settle it again (by then other bytes may be where it began). */
	REPLYLOG_DROPPED = 2,
	/* A change about to be made (replylog_begins: MKDIR, MKNOD, SYMLINK,
	 * LINK, CREATE, UNLINK, RMDIR, RENAME, SETXATTR, REMOVEXATTR), no
	 * reply yet: sent again, it runs again, and the error a second run
	 * gets because the first made the change (EEXIST, ENOENT, ENODATA)
	 * is taken for the first run's success. */
	REPLYLOG_BEGUN = 3,
};

/* A reply an instance before this one gave. */
struct replylog_rec {
	struct hnode hn;
	uint64_t client_id;
	uint64_t id;
	uint64_t seq;   /* its place in the order of records */
	uint32_t slot;  /* where it is in the file */
	uint16_t op;
	uint16_t kind;  /* enum replylog_kind */
	/* REPLYLOG_APPEND: the file, where it ended, the bytes' length and
	 * CRC32C; landed: replylog_settle found them there. REPLYLOG_BEGUN
	 * of a RENAME: fh, what was at the old name (len 0: not known). */
	struct pfs_fh fh;
	uint64_t at;
	uint32_t dlen, dcrc;
	bool landed;
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
	/* Which slot each record goes to (rlslots_i.h), under mu; a slot's
	 * write under its stripe, taken before mu is let go. */
	pthread_mutex_t mu;
	pthread_mutex_t stripe[REPLYLOG_STRIPES];
	struct rlslots slots;         /* n 0 while not kept */
	struct rlslots_host old_host; /* the records read at the start */
	struct rlslots_host nohost;   /* records of no host's (h NULL) */
};

/* Loop thread: h, a host (all the sessions from one address), gets its
 * share of the slots from now on; replylog_host_remove frees its slots
 * (its sessions are gone: what they hold is of no more use). Either is
 * a no-op while no file is kept (rl zeroed, or replylog_open failed). */
void replylog_host_add(struct replylog *rl, struct rlslots_host *h);
void replylog_host_remove(struct replylog *rl, struct rlslots_host *h);
/* Any thread: the slots free now (0 while no file is kept), and the
 * records not written (too big for a slot, or a failed write). */
unsigned replylog_free_slots(struct replylog *rl);
uint64_t replylog_not_written(const struct replylog *rl);

/* Opens (makes, 0600) STATE_DIR/replies and reads the records written on
 * this machine boot (verf) by the instances before. A file that is not a
 * regular file of ours is refused: -errno and a one-line reason in err.
 * Unreadable records (torn, another boot, garbage) are skipped. */
int replylog_open(struct replylog *rl, const char *state_dir, uint64_t verf, char *err,
		  size_t errlen);
/* Closes the file and frees the records read. */
void replylog_close(struct replylog *rl);

/* Any thread: writes the reply (its frame header hdr and wire[len], raw
 * bytes before coding) that client_id's request id of opcode op got,
 * into a slot of host h's share (NULL: of none). Best effort: a reply
 * too big for a slot, or a failed write, is counted and not kept. */
void replylog_put(struct replylog *rl, struct rlslots_host *h, uint64_t client_id, uint64_t id,
		  uint16_t op, const uint8_t hdr[PFS_FRAME_HDR_SIZE], const void *wire, size_t len,
		  size_t raw);

/* Any thread: the append client_id's request id is about to write: len
 * bytes whose CRC32C is crc, to the file fh, which ends at at. Its reply's
 * record, written after it (replylog_put), stands for it. h, and best
 * effort, as replylog_put. */
void replylog_intend(struct replylog *rl, struct rlslots_host *h, uint64_t client_id,
		     uint64_t id, const struct pfs_fh *fh, uint64_t at, uint32_t len, uint32_t crc);

/* Any thread: client_id's request id, a change of opcode op, is about
 * to be made (REPLYLOG_BEGUN). was (NULL or of length 0: none): a
 * RENAME's, what is at its old name now, so that an exchange sent again
 * can tell whether it was made (a second run would swap the names back).
 * h, and best effort, as replylog_put. */
void replylog_begin(struct replylog *rl, struct rlslots_host *h, uint64_t client_id, uint64_t id,
		    uint16_t op, const struct pfs_fh *was);
/* Whether op's requests get a REPLYLOG_BEGUN record. */
bool replylog_begins(unsigned op);

/* What replylog_settle found of the appends that had no reply. */
struct replylog_settled {
	size_t landed;  /* their bytes are where the file ended */
	size_t cut;     /* the file ended inside them: cut back to where it ended */
	size_t missing; /* not there: the re-sent WRITE appends */
	size_t unknown; /* the file could not be opened, read or cut */
};

/* Before the loop serves anyone: looks at each append an instance before
 * began and gave no reply to (REPLYLOG_APPEND records). open_fh(ctx, fh,
 * flags) opens the file fh names (-errno if it cannot). The bytes are
 * where the file ended: the record stays, landed, and the re-sent WRITE
 * is answered from it (replylog_find). Otherwise it goes, and a
 * REPLYLOG_DROPPED record is written in its stead; a file that ends
 * inside them is cut back to where the append began. */
void replylog_settle(struct replylog *rl, int (*open_fh)(void *ctx, const struct pfs_fh *fh,
							 int flags),
		     void *ctx, struct replylog_settled *out);

/* Loop thread: the reply an instance before gave to client_id's request
 * id of opcode op, or an append of its that landed (kind
 * REPLYLOG_APPEND: replylog_settle), or a change it began (kind
 * REPLYLOG_BEGUN), or NULL. Valid until replylog_forget. */
const struct replylog_rec *replylog_find(const struct replylog *rl, uint64_t client_id,
					 uint64_t id, uint16_t op);
/* A malloc'd copy of p (NULL without memory): a request answered from it
 * keeps it while it waits (server.c). */
struct replylog_rec *replylog_copy(const struct replylog_rec *p);
/* Loop thread: frees the records read at the start (the clients of the
 * instance before have had their lease to send their requests again);
 * their slots are free again. */
void replylog_forget(struct replylog *rl);

/* The record of a reply in slot[REPLYLOG_SLOT] (zeroed past it): its
 * length, or 0 if it does not fit. */
size_t replylog_pack(uint8_t *slot, uint64_t verf, uint64_t seq, uint64_t client_id, uint64_t id,
		     uint16_t op, const uint8_t hdr[PFS_FRAME_HDR_SIZE], const void *wire,
		     size_t len, size_t raw);
/* The record of an append about to be written (replylog_intend; kind
 * REPLYLOG_APPEND), or of one settled as not written (REPLYLOG_DROPPED):
 * its length (0: a handle of no valid length). */
size_t replylog_pack_append(uint8_t *slot, uint16_t kind, uint64_t verf, uint64_t seq,
			    uint64_t client_id, uint64_t id, const struct pfs_fh *fh, uint64_t at,
			    uint32_t len, uint32_t crc);
/* The record of a change begun (replylog_begin): its length (0: was
 * given for another opcode than RENAME, or of no valid length). */
size_t replylog_pack_begun(uint8_t *slot, uint64_t verf, uint64_t seq, uint64_t client_id,
			   uint64_t id, uint16_t op, const struct pfs_fh *was);
/* Reads the record in slot[REPLYLOG_SLOT]: a malloc'd struct replylog_rec
 * and its seq, or NULL when the slot holds none of boot verf (empty,
 * torn, another boot, a bad length, a frame header that is not a valid
 * reply header of the record's request and payload, an append's record
 * that is not a WRITE's or whose frame header is not zero, a change
 * begun's with a frame header that is not zero, or with a payload that is
 * not a RENAME's handle). */
struct replylog_rec *replylog_unpack(const uint8_t *slot, uint64_t verf, uint64_t *seq);

#endif /* PODFSD_REPLYLOG_I_H */
