/* wb_base_i.h: write-behind's own state, shared by its two rooms: wb.c
 * (the writer threads, the send queue, writes and waits) and
 * wb_commit.c (COMMIT, the re-send after a restart, and the commits that
 * fsync, a change of the bytes, a release and the unmount ask for). Not
 * for the rest of the client: that is wb_i.h.
 *
 * Everything here is called with wb->bg.lock held unless said otherwise.
 */
#ifndef PODFS_WB_BASE_I_H
#define PODFS_WB_BASE_I_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bg_i.h"
#include "podfs/codec.h"
#include "podfs/htab.h"
#include "rpc_i.h"
#include "wb_file_i.h"
#include "wb_i.h"

#define WB_COMMIT_AT (32u << 20) /* uncommitted bytes per file before a background commit */
#define WB_COMMIT_TRIES 8    /* restarts survived by one commit before giving up (EIO) */
#define WB_POOL 16           /* full-size request buffers kept for reuse */
#define WB_BUFSZ ((size_t)PFS_MAX_IO + RPC_SMALL)
/* A QUEUED write shorter than this, the last of its file, waits while
 * another write of the file is being sent, and grows (wb_i.h,
 * "Coalescing"). */
#define WB_GROW_MAX ((size_t)256 << 10)
/* ... and, with no other write of the file being sent, this long after
 * it was queued. */
#define WB_HOLD_NS ((int64_t)500 * 1000)

/* What this host set on a file after its uncommitted writes: their
 * pwrite, sent again after a restart, would move the mtime to the time
 * of the resend and clear a set-user-ID bit set after them; it is set
 * again after them (wb_note_setattr). Two SETATTRs to send then, each
 * with the credentials of the change it repeats (valid 0: none; fh is
 * filled in when sent). */
struct wb_after {
	struct pfs_setattr_req mode;
	struct pfs_setattr_req mtime;
};

/* Write-behind state of one inode with pending or uncommitted writes. */
/* A write or commit of ip failed with rc (< 0): counted for the opens
 * of the file to report (inode_i.h, wb_err_seq). */
void wb_note_err(struct inode *ip, int rc);

struct wbi {
	struct hnode hn;         /* wb->files, by ip */
	struct inode *ip;
	struct wbf f;            /* its writes (wb_file_i.h) */
	unsigned users;          /* threads inside a wait or a commit */
	unsigned sending;        /* its writes writer threads are sending */
	unsigned dropping;       /* failed writes whose pages the kernel is dropping */
	bool bg_commit;          /* a background commit was asked for */
	bool final_done;         /* wb_commit_all tried it */
	bool reapply;            /* writes were sent again: set `after` again once they are done */
	bool reapplying;         /* that SETATTR is out: writes and waits wait for it */
	struct wb_after after;
	struct pfs_creds cr;     /* of the last write, for commits */
	struct pfs_fh fh;
	uint64_t fid;
	pthread_cond_t cond;     /* f.npending/f.committing changed */
};

struct wb {
	struct client *c;
	/* The writer threads; bg.lock guards everything below (and the
	 * struct wbi and wbe), bg.cond: queue non-empty, or stopping. */
	struct bg bg;
	pthread_cond_t space;    /* held or inflight decreased, a commit ended */
	struct wbe *qhead, **qtail;
	struct htab files;       /* struct wbi, by inode */
	size_t held, max;
	size_t inflight;         /* bytes QUEUED or SENDING */
	/* Free full-size request buffers: a fresh 1 MiB allocation costs
	 * page faults and zeroing on every write. */
	void *pool[WB_POOL];
	unsigned npool;
	unsigned want;      /* writer threads wb_start starts (0: synchronous) */
	struct wb_stats st;
};

/* The write-behind state of ip, or NULL. */
struct wbi *wbi_find(struct wb *wb, struct inode *ip);
/* Frees w if nothing refers to it any more. */
void wbi_maybe_free(struct wb *wb, struct wbi *w);
/* Puts e, QUEUED in its file's ledger, in the send queue. */
void wb_enqueue(struct wb *wb, struct wbe *e);
/* Frees e, no longer in its file's ledger, and its memory. */
void wb_free_entry(struct wb *wb, struct wbe *e);
/* Waits on cond (the lock dropped meanwhile) for a change, or
 * KILLABLE_POLL_MS; the caller re-checks its condition after. Returns
 * -EINTR if the process this thread answers is being killed: a write
 * held for an absent server must not keep it in state D (killable_i.h).
 * Held data stays held either way. */
int wb_wait_killable(struct wb *wb, pthread_cond_t *cond);
/* Waits for w's pending writes (and a commit in progress, and the
 * kernel's dropping of the pages of a failed write). Returns 0, or
 * -EINTR (wb_wait_killable). */
int wb_wait_idle(struct wb *wb, struct wbi *w);

/* wb_commit.c. COMMIT: FSYNC of w's file; DONE entries acknowledged by
 * the daemon instance that answers it are durable and released, the
 * others are sent again (and, if wait, committed again). wait: first
 * wait for every pending write (fsync, close); otherwise (background, to
 * free memory) commit only what is acknowledged now. w->users raised;
 * drops the lock while waiting for the daemon. Returns 0 or -errno (of
 * the FSYNC, or EIO after too many restarts). */
int wb_commit_locked(struct wb *wb, struct wbi *w, bool datasync, bool force, bool wait);
/* A commit (datasync) of w that nobody asked for: holds w across it and
 * frees w after if nothing else uses it. Returns the commit's result. */
int wb_commit_unasked(struct wb *wb, struct wbi *w, bool wait);

#endif /* PODFS_WB_BASE_I_H */
