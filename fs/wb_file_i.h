/* wb_file_i.h: the ledger of one file's writes in write-behind.
 *
 * Write-behind (wb.c) keeps, per file, its writes in submission order,
 * each in one state:
 *
 *   QUEUED -> SENDING -> DONE -> COMMITTING -> (released)
 *      ^         |                   |
 *      |         +-> (failed: removed, error kept)
 *      +-----------------------------+  (acknowledged by another daemon
 *                                        instance: sent again)
 *
 * Sent again, a write must not land over the bytes of a later write of
 * the file: after a restart, the daemon instance that answers a commit
 * may hold later writes (acknowledged by it, or on their way) over the
 * bytes of an earlier one it never had. So from the first write to be
 * sent again, every later one is sent again too, in order: acknowledged
 * ones are queued again, one being sent is sent once more after
 * ("redo"), and none of them goes out while an earlier write it
 * overlaps is pending (wbf_sendable). Before, an earlier write sent
 * again after a restart could undo a later one (a write made after the
 * restart, then fsync: the file held the earlier bytes).
 *
 * The ledger counts what the waits of wb.c look at: the writes pending
 * (QUEUED or SENDING), the bytes acknowledged but not committed (DONE or
 * COMMITTING), whether a commit is in flight, the first write error not
 * yet reported, and the threads that wrote since everything was last
 * committed (wb_flush). It decides, when a commit ends, which writes are
 * durable (acknowledged by the daemon instance that answered the commit:
 * the verifier, see wb_i.h) and which must be sent again.
 *
 * Pure logic: no locks, no I/O, no allocation, no other module. The
 * caller serializes (wb.c holds its lock around every call) and owns the
 * entries: it allocates them, and frees those the ledger hands back
 * removed. The send queue, memory accounting and request buffers are the
 * caller's.
 */
#ifndef PODFS_WB_FILE_I_H
#define PODFS_WB_FILE_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WBF_WRITERS 8 /* writer thread ids remembered per file */

enum wbe_state {
	WBE_QUEUED,     /* in the send queue */
	WBE_SENDING,    /* a writer thread is sending it */
	WBE_DONE,       /* acknowledged, uncommitted, verf set */
	WBE_COMMITTING, /* DONE, covered by a COMMIT in flight */
};

struct wbi;

/* One write. The ledger's fields are next, prev, st and verf (set by the
 * wbf_ functions) and off, len (set by the caller before wbf_add; len
 * may grow while the write is QUEUED and the last of its file, a write
 * of the bytes right after it appended to it, then fixed); the rest are
 * the caller's. */
struct wbe {
	struct wbe *next, *prev; /* the file's list, in submission order */
	/* The send queue (wb.c); also the chains wbf_commit_end hands back
	 * (an entry COMMITTING is in no send queue). */
	struct wbe *qnext;
	struct wbi *wi;          /* the file's write-behind state (wb.c) */
	enum wbe_state st;
	uint64_t off;
	uint32_t len;
	/* Its request buffer holds the encoded WRITE request; the data is
	 * its last len bytes (wb.c). */
	uint8_t *req;
	size_t reqlen;
	size_t bufsz;            /* allocated size of req */
	uint64_t verf;           /* boot_id of the daemon that acknowledged it */
	bool again;              /* pending again after a restart (wbf.nagain) */
	bool redo;               /* SENDING when a restart was found: sent again after */
	bool grows;              /* wb.c: a contiguous write may be appended (wb_i.h) */
	/* An O_APPEND write (wb.c), and, once a reply said so
	 * (PFS_CAP_APPEND_AT), where it landed: sent again, it goes there
	 * (PFS_WR_AT) instead of to the file's end once more. */
	bool append;
	bool landed;
	uint64_t landed_at;
	bool grown;              /* wb.c: one was */
	int64_t queued_ns;       /* wb.c: CLOCK_MONOTONIC when it was queued */
};

/* The writes of one file. Zero-initialized is empty; the fields are read
 * freely, changed only through the wbf_ functions. */
struct wbf {
	struct wbe *head, *tail;
	unsigned npending;       /* QUEUED + SENDING */
	size_t uncommitted;      /* bytes in DONE/COMMITTING */
	int err;                 /* first write error not yet reported (positive errno) */
	bool committing;         /* between wbf_commit_begin and wbf_commit_end */
	unsigned nagain;         /* pending writes that are pending again */
	/* Threads that wrote since the data was last all committed; many:
	 * more than fit here. */
	uint32_t writers[WBF_WRITERS];
	unsigned nwriters;
	bool many_writers;
};

/* Appends e (off and len set, not in any list) at the tail of f as
 * QUEUED: one more pending write. The caller puts it in its send queue. */
void wbf_add(struct wbf *f, struct wbe *e);

/* e, QUEUED, is taken from the send queue to be sent: SENDING. */
void wbf_sending(struct wbe *e);

/* True if e, QUEUED, may be sent now: no earlier write of f that it
 * overlaps is pending. (Only writes sent again can meet one: a new write
 * waits for the pending ones it overlaps before it is queued.) */
bool wbf_sendable(const struct wbf *f, const struct wbe *e);

/* e, SENDING, was sent with result rc (0 or -errno): one pending write
 * fewer. rc 0: e is DONE with verifier verf, its bytes uncommitted.
 * rc < 0: -rc is kept as f's error (unless one is kept already) and e is
 * unlinked from f; the caller frees it. Returns true instead if e is to
 * be sent once more (redo, rc 0): e is QUEUED, still pending, and the
 * caller puts it in its send queue again. */
bool wbf_sent(struct wbf *f, struct wbe *e, int rc, uint64_t verf);

/* Unlinks e, DONE or COMMITTING (no longer counted uncommitted), from f;
 * the caller frees it. Not for a pending write. */
void wbf_remove(struct wbf *f, struct wbe *e);

/* True if a pending write (QUEUED or SENDING) of f overlaps the size
 * bytes at off. */
bool wbf_overlaps_pending(const struct wbf *f, uint64_t off, size_t size);

/* True if an uncommitted write (DONE or COMMITTING) of f ends beyond
 * byte from: a change of the file's bytes from there on would be undone
 * if it were sent again. */
bool wbf_uncommitted_beyond(const struct wbf *f, uint64_t from);

/* Keeps -rc (rc < 0) as f's error, unless one is kept already: reported
 * as a failed write is. */
void wbf_keep_err(struct wbf *f, int rc);

/* Records that thread tid wrote f (beyond WBF_WRITERS threads: "many",
 * and every thread counts as a writer). */
void wbf_note_writer(struct wbf *f, uint32_t tid);
/* True if thread tid wrote f since the writers were last forgotten (or
 * too many threads did to tell). */
bool wbf_is_writer(const struct wbf *f, uint32_t tid);
/* Forgets the writers (everything of f is committed). */
void wbf_forget_writers(struct wbf *f);

/* Returns the kept error as -errno (0 if none) and forgets it: a failed
 * write is reported once. */
int wbf_take_err(struct wbf *f);

/* True if f holds something: writes (pending or uncommitted), an error
 * to report, or a commit in flight. */
bool wbf_holds(const struct wbf *f);

/* A COMMIT of f goes out: every DONE write is COMMITTING (covered by it),
 * and f is committing. Not while f is committing already. */
void wbf_commit_begin(struct wbf *f);

/* The COMMIT of f ended with result rc (0 or -errno), answered by the
 * daemon instance verf (its boot_id). rc < 0: every COMMITTING write is
 * DONE again (still uncommitted; a later commit retries). Otherwise, up
 * to the first write acknowledged by another instance (one that
 * restarted since, maybe losing its page cache), every COMMITTING write
 * is durable: unlinked from f and chained (through qnext, in list order)
 * to *released, which the caller frees. From that write on (see the top):
 * every DONE or COMMITTING write is no longer uncommitted, QUEUED again
 * (one more pending write, still in f's list) and chained to *resend,
 * which the caller puts in its send queue; a SENDING one is marked to be
 * sent again (wbf_sent); a QUEUED one waits as it is. *released and
 * *resend are set (NULL: none). f is no longer committing. */
void wbf_commit_end(struct wbf *f, int rc, uint64_t verf, struct wbe **released,
		    struct wbe **resend);

#endif /* PODFS_WB_FILE_I_H */
