/* lsfetch_i.h: fetching directory listings (LISTDIR, listing_i.h): now,
 * for a FUSE request, and ahead, for the subdirectories a walk opens next.
 *
 * A walk (find, ls -R, du, os.walk) reads a directory, then opens and
 * reads its subdirectories one after the other. Each would wait for its
 * own listing, and for an OPENDIR before it (the daemon's leave to read
 * the directory is only known once a listing came). So when READDIRPLUS
 * hands the kernel a directory's subdirectories, the client queues them
 * (lsfetch_ahead), and LSF_THREADS background threads fetch their
 * listings, several at once, in the order a depth-first walk meets them
 * (lsqueue_i.h); each listing fetched ahead queues its own subdirectories
 * in turn (their inodes made for it, held by the client alone until the
 * kernel is handed them). In a directory too big to be listed whole at
 * once (listed in pages, once a walk's lookups there keep coming), each
 * lookup of a subdirectory queues it and the next ones of the listing
 * (lsfetch_walk_on). By the time the walk gets there, its OPENDIR and
 * READDIR are answered locally.
 *
 * A listing fetched ahead is an ordinary listing (listing_set): it was
 * asked for with the credentials of the caller whose READDIR queued it,
 * the daemon registered the session's interest in the directory and its
 * entries before it read them, and it is used only while coherent (no
 * push about the directory since the request was sent, no own change
 * since: the checks of lookup_listed and readdir_listed). A FUSE
 * request that needs a listing being fetched ahead waits for it
 * (killable); one that needs a listing only queued takes it off the
 * queue and fetches it itself, with its own credentials.
 *
 * Bounds: the walk's progress paces the fetches: each READDIR answered
 * from a listing (lsfetch_walked) gives LSF_CREDIT_STEP fetches, at most
 * LSF_CREDIT_MAX banked, so a walk that stops leaves at most that much
 * work, and a lone `ls` little; a fetch starts with at least
 * LSF_CREDIT_RESUME of them (batches, not a request per credit). At
 * most LSQ_MAX directories are queued (those the walk meets last dropped
 * first), none older than LSF_MAX_AGE_NS is
 * fetched, LSF_THREADS fetches run at once, and none is queued while the
 * listings of the table take more than 1/LSF_LISTING_SHARE of
 * LISTING_TOTAL_MAX (demand fetches keep their room). Each directory
 * queued, and each whose listing was fetched ahead (LSF_PARK_MAX of
 * them, for LSF_PARK_NS: its inode and listing must outlive the wait for
 * the walk), holds one lookup of its inode (inode_hold). A failed fetch
 * ahead leaves no trace (the walk's own request decides again); an
 * incomplete listing is remembered (listing_drop) as for a demand fetch.
 *
 * Locking: the module's lock (bg.lock) guards its queue, its credits and
 * every inode's ls_ahead; it is never taken while holding the table lock
 * or an inode's lock, nor held across a call into them. Any thread (the
 * FUSE threads, its own).
 */
#ifndef PODFS_LSFETCH_I_H
#define PODFS_LSFETCH_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "inode_i.h"
#include "podfs/codec.h"

struct client;
struct lsfetch;

/* One under podfsd's default workers per session (4): the walk's own
 * requests need not wait behind the listings fetched ahead. */
#define LSF_THREADS 3
#define LSF_MAX_AGE_NS (2 * 1000000000LL)
#define LSF_LISTING_SHARE 2 /* queue nothing past 1/2 of LISTING_TOTAL_MAX */
#define LSF_CREDIT_STEP 4   /* fetches ahead per READDIR answered from a listing */
#define LSF_CREDIT_MAX 256
/* Once the credit ran low, fetching resumes only when this much is back:
 * a walk slower than the fetching then gets listings in batches (one
 * LISTDIRS with its subdirectories), not one request per READDIR. */
#define LSF_CREDIT_RESUME 32
#define LSF_WALK_ON 32 /* entries looked at after a walk's lookup (lsfetch_walk_on) */
#define LSF_PARK_MAX 8192
#define LSF_PARK_NS (10 * 1000000000LL)

/* Makes the module for c (which it reads: rpc, it, gate, cache) with no
 * thread yet. Returns 0 with *out, or -ENOMEM. Start-up thread. */
int lsfetch_new(struct client *c, struct lsfetch **out);
/* Starts its threads. Returns 0 or -errno (some may run: lsfetch_stop
 * stops them). After fuse_daemonize. */
int lsfetch_start(struct lsfetch *lf);
/* Stops its threads (a fetch in progress ends with its call: stop it
 * after rpc_closing) and gives back the lookups of what is queued. Safe
 * on NULL and more than once. */
void lsfetch_stop(struct lsfetch *lf);
/* Frees it (stopped first). Safe on NULL. */
void lsfetch_free(struct lsfetch *lf);

/* Fetches dir's listing (LISTDIR) with credentials cr, with the content
 * of files up to max_inline bytes, and keeps it if complete (an
 * incomplete or failed one makes dir listed name by name from now on; a
 * server without LISTDIR is remembered). If dir's listing is being
 * fetched ahead, waits for that one instead (giving up if the caller is
 * being killed); if it is only queued, takes it off the queue. The
 * caller checked that dir may be listed (listing_may_fetch, its size
 * limit); nothing is fetched if dir has a listing by then. A FUSE
 * thread; waits for the reply. */
void lsfetch_now(struct lsfetch *lf, struct inode *dir, const struct pfs_creds *cr,
		 uint32_t max_inline);

/* As lsfetch_now (without contents), for an OPENDIR of dir, whose
 * listing nothing queued: the listing the READDIR after it would fetch
 * anyway, fetched first, lets the open be answered locally too (no
 * OPENDIR, no RELEASEDIR). A refusal (a caller without leave to read
 * dir) leaves no trace, as a fetch ahead's: the OPENDIR then asks the
 * daemon, whose answer the caller gets. The caller checked as for
 * lsfetch_now. A FUSE thread; waits for the reply. */
void lsfetch_open(struct lsfetch *lf, struct inode *dir, const struct pfs_creds *cr);

/* True if dir's listing is queued or being fetched ahead (a hint: no
 * lock taken). Any thread. */
bool lsfetch_pending(struct inode *dir);
/* As lsfetch_now (without contents), but only if dir's listing is
 * queued or being fetched ahead: an OPENDIR of it, which a listing lets
 * be answered locally. A FUSE thread. */
void lsfetch_settle(struct lsfetch *lf, struct inode *dir, const struct pfs_creds *cr);

/* Where the directories one reading of a directory queues stand in the
 * queue (see lsfetch_ahead): zeroed when that reading starts (offset 0),
 * kept with it (the open directory's) across its replies. */
struct lsfetch_order {
	uint64_t base; /* 0: none yet */
	uint32_t next; /* directories queued so far by this reading */
};

/* The kernel was handed the n directories ips[] (in the order a walk
 * meets them) by a READDIRPLUS of a caller with credentials cr: queues
 * those whose listing may be fetched, the first of them on top. With
 * ord (the reading they came from), they go below those an earlier
 * reply of the same reading queued and still queued, and above all
 * queued before it: a walk, depth first, opens a directory's
 * subdirectories in its order, and the kernel reads a big directory in
 * several replies, the last of which would otherwise end on top. Takes
 * over one lookup of each (inode_hold before: their kernel lookups may
 * be forgotten meanwhile), given back once fetched or dropped. A FUSE
 * thread, without locks held. */
void lsfetch_ahead(struct lsfetch *lf, struct inode **ips, size_t n, const struct pfs_creds *cr,
		   struct lsfetch_order *ord);

/* A walk looked up subdirectory ip (a lookup held, taken over) named
 * name in dir, a directory listed in pages: queues ip, and below it the
 * subdirectories that follow name in dir's listing, LSF_WALK_ON entries
 * ahead, that no earlier lookup queued (listing_subdirs_next). A FUSE
 * thread, without locks held. */
void lsfetch_walk_on(struct lsfetch *lf, struct inode *dir, struct inode *ip, const char *name,
		     const struct pfs_creds *cr);

/* A READDIR was answered from a listing: the walk moved on, and may be
 * met LSF_CREDIT_STEP directories further ahead. Any thread. */
void lsfetch_walked(struct lsfetch *lf);

/* Its counts since the start (user.podfs.stats). */
struct lsfetch_stats {
	uint64_t listed;  /* listings fetched (LISTDIR, or an item of LISTDIRS) */
	uint64_t ahead;   /* of them, fetched ahead */
	uint64_t waited;  /* FUSE requests that waited for one being fetched */
	uint64_t taken;   /* FUSE requests that took a queued one themselves */
	uint64_t dropped; /* queued ones never fetched (queue full, too old) */
};
void lsfetch_get_stats(struct lsfetch *lf, struct lsfetch_stats *st);

#endif /* PODFS_LSFETCH_I_H */
