/* dirdeleg_base_i.h: what dirdeleg*.c share (for them only; the module's
 * interface is dirdeleg_i.h): the state of the directory delegations
 * this client holds, and the functions the three files call in each
 * other.
 *
 *   dirdeleg.c       the directories, asking and giving back, the
 *                    barrier, unlinks answered here, recalls, waits
 *   dirdeleg_send.c  the sender threads: the queue sent in batches
 *                    (UNLINK, UNLINKS, CREATES), each item's end
 *   dirdeleg_make.c  creates answered here: slots, the files made
 *                    under a grant (covered: their close does not wait)
 *
 * Locks as dirdeleg_i.h says: bg.lock guards everything below; ask is
 * held across DELEG_DIR, SLOTS and DELEG_RETURN.
 */
#ifndef PODFS_DIRDELEG_BASE_I_H
#define PODFS_DIRDELEG_BASE_I_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "bg_i.h"
#include "dirdeleg_i.h"
#include "podfs/codec.h"

struct client;
struct inode;

/* A directory this client asked for, holds, or has an error to report in. */
struct ddir {
	struct ddir *next;
	struct pfs_fh fh;
	bool held;          /* unlinks there are answered here */
	unsigned syncs;     /* unlinks sent the usual way since the last ask */
	int64_t retry_ns;   /* no ask before (a refusal, a recall) */
	int err;            /* an unlink answered here failed; not reported yet */
	unsigned pending;   /* unlinks answered here, not answered by the daemon yet */
	uint64_t at;        /* the directory's stamp after the last one (0: not trusted) */
	int64_t used_ns;    /* for the choice of the one to forget */
	bool asking;        /* a DELEG_DIR for it is queued or in flight */
	/* Slots (SLOTS): files the daemon made there for creates answered
	 * here, for callers with ids scr; a SLOTS is queued or in flight. */
	struct pfs_entry *slots;
	unsigned nslots;
	struct pfs_creds scr;
	bool slots_asking;
	bool rights_moved;  /* its mode or owner changed under this grant: no slots */
	int64_t slots_retry_ns; /* no SLOTS before (one brought none) */
	unsigned slot_batches;  /* SLOTS answered: the next asks for more */
	unsigned slots_low;     /* more are asked for when this few are left: half the last batch */
	/* Files made here under the grant (one lookup held each, dd_cover
	 * = grant): their close does not wait for their writes, which the
	 * end of the delegation does (settle). */
	uint64_t grant;     /* while held: this grant's number */
	struct inode **made;
	unsigned nmade, made_cap;
};

/* Files whose writes the end of a delegation waits for. */
struct madev {
	struct inode **v;
	size_t n, cap;
};

/* Work for the senders besides the queue: a DELEG_DIR to send (dir, held
 * with inode_hold, and cr) or with slots, a SLOTS for dir; a directory to
 * give back (ret); or both. */
struct dask {
	struct dask *next;
	struct inode *dir;
	struct pfs_creds cr;
	bool has_ask;   /* DELEG_DIR (else: only SLOTS, or only the return) */
	bool slots;     /* SLOTS after it (creates were asking) */
	bool has_ret;
	struct pfs_fh ret;
};

/* An unlink or (create) a create answered here, to send. */
struct ditem {
	struct ditem *next;
	struct inode *dir, *file;  /* one lookup each held (inode_hold) */
	struct pfs_unlink_req m;   /* ids, directory, name */
	bool create;
	bool setattr;              /* a change of the directory's attributes (sa; file = dir) */
	/* A rename of name (file: what it names) to newname (victim: the
	 * file it replaced, held, or NULL), flags rflags, in dir. */
	bool rename;
	struct pfs_name newname;
	uint32_t rflags;
	struct inode *victim;
	uint64_t at_victim;
	uint32_t mode;             /* create: its permission bits */
	uint64_t fid;              /* create: the open it made, and its flags */
	uint32_t flags;
	struct pfs_fh slot;        /* create: the slot it names */
	uint64_t seq, ns;          /* push number, namespace count: when it was answered */
	uint64_t at_file;          /* the stamp it gave the file (trust_i.h) */
	/* create: the file's first writes, sent with it (at offset 0), while
	 * it is queued and the open it made writes nothing elsewhere
	 * (dirdeleg_write); closed: that open ended, the item ends it
	 * (dirdeleg_release); no_inline: a write went the usual way. */
	uint8_t *data;
	uint32_t dlen, dcap;
	bool closed, no_inline;
	int64_t since_ns; /* queued at, then closed at (hold_ns) */
	/* create: the file's attributes as answered here while it is queued
	 * (dirdeleg_attr); has_sa: the change of attributes answered under
	 * its attribute delegation, taken at its close, made before the
	 * name (deleg_take). */
	struct pfs_attr attr;
	bool has_sa;
	struct pfs_setattr_req sa;
};

struct dirdeleg {
	struct client *c;
	struct bg bg;               /* lock: all below; cond: the senders' work */
	pthread_cond_t idle;        /* an unlink was answered by the daemon */
	pthread_cond_t slots_came;  /* a SLOTS was answered (dd_get_slots) */
	pthread_mutex_t ask;        /* held across DELEG_DIR and DELEG_RETURN: a
				     * return never overtakes a later grant */
	struct ddir *dirs;
	unsigned ndirs;
	struct ditem *head, **tail;
	struct dask *asks;          /* LIFO: their order does not matter */
	unsigned queued, inflight;
	unsigned inflight_kind[4];  /* of them unlinks [0], creates [1], changes of attributes [2],
				     * renames [3] */
	unsigned hurry;             /* threads waiting for the queue: nothing is held back */
	size_t inline_held;         /* bytes of data in items (DD_INLINE_HELD at most) */
	_Atomic unsigned pending;   /* queued + inflight, read without the lock */
	uint64_t ended;             /* end_all calls: a grant asked for before one is not held */
	uint64_t grants;            /* grants numbered so far */
	bool off;                   /* the daemon does not grant them (ENOSYS) */
	bool no_batch;              /* the daemon does not know UNLINKS (ENOSYS) */
	bool no_slots;              /* nor SLOTS (ENOSYS) */
	bool started;               /* the senders run (dirdeleg_start) */
	/* Files made under delegations a lost connection ended here: the
	 * daemon's session may still hold them (it resumes), and its RECALL
	 * must then wait for their writes, sent again after the reconnect. */
	struct madev unsettled;
	struct dirdeleg_stats st;
};

/* True in a sender thread (it never waits for the queue it sends). */
extern __thread bool dd_in_sender;

/* dirdeleg.c. */
/* fh's entry, or NULL (bg.lock held). */
struct ddir *dd_find(struct dirdeleg *d, const struct pfs_fh *fh);
/* dir's entry, with bg.lock held, and in *held whether dir is held now
 * (its use noted). An earlier item's error not reported yet is taken
 * into *err (a positive errno; else 0): the caller answers with it. */
struct ddir *dd_enter_dir(struct dirdeleg *d, struct inode *dir, int *err, bool *held);
/* A sender's DELEG_DIR, SLOTS and DELEG_RETURN of a (freed). */
void dd_do_ask(struct dirdeleg *d, struct dask *a);

/* dirdeleg.c: it joins the queue, a sender is woken (bg.lock held). */
void dd_enqueue(struct dirdeleg *d, struct ditem *it);
/* The queue is wanted now (hurry; bg.lock held, as is the end). */
void dd_hurry(struct dirdeleg *d);
void dd_hurry_end(struct dirdeleg *d);

/* dirdeleg_send.c. */
/* A sender thread (bg_start's). */
void *dd_sender_main(void *arg);

/* dirdeleg_lost.c: create item it, whose slot the daemon no longer has
 * (ESTALE), made by name with its bytes, its attributes sa (NULL: none)
 * and its close; a name the daemon made of the slot before (its reply
 * lost) counts as made. Returns 0 (made) or 1 (found named) with the
 * file's attributes after in *fa, or -errno (EEXIST: another file has
 * the name). A sender thread. */
int dd_make_again(struct dirdeleg *d, struct ditem *it, const struct pfs_setattr_req *sa,
		  struct pfs_attr *fa);

/* dirdeleg_make.c. */
/* Moves e's made files to mv (bg.lock held); they are no longer
 * covered. On ENOMEM the rest are let go unwaited (logged). */
void dd_take_made(struct dirdeleg *d, struct ddir *e, struct madev *mv);
/* The end of a delegation for the files in mv (bg.lock not held): waits
 * for their writes and ends their attribute delegations (wait), and lets
 * them go. */
void dd_settle(struct dirdeleg *d, struct madev *mv, bool wait);
/* Drops from e's made files those write-behind and the attribute
 * delegations hold nothing for (bg.lock held). */
void dd_prune_made(struct dirdeleg *d, struct ddir *e);
/* The same for d->unsettled (bg.lock held). */
void dd_prune_unsettled(struct dirdeleg *d);
/* A SLOTS for dir (held) by cr, kept if dir is still held as of ended
 * (end_all calls). d->ask held. */
void dd_get_slots(struct dirdeleg *d, struct inode *dir, const struct pfs_creds *cr,
		  uint64_t ended);
/* fh's entry, made if needed: when DD_DIRS are tracked, the least
 * recently used one without an error to report or unlinks pending goes,
 * one not held first; if it was held, its handle is put in *ret (the
 * caller returns it to the daemon, DELEG_RETURN) and *has_ret set. NULL:
 * ENOMEM, or none can go. bg.lock held. */
struct ddir *dd_find_or_add(struct dirdeleg *d, const struct pfs_fh *fh, struct pfs_fh *ret,
			    bool *has_ret);
/* A grant of dir arrived: a listing of it fetched before, that a push
 * about it since may have made stale, is dropped (the one fetched next
 * is coherent: nobody else changes dir any more). */
void dd_grant_listing(struct client *c, struct inode *dir);
/* What dd_known_file looks for. */
enum {
	KF_HELD = 1,   /* dir is held */
	KF_DIR = 2,    /* a directory (else a file with one link) */
	KF_ANSWER = 4, /* for a change answered here (an unlink) */
	KF_ANY = 8,    /* either */
};

/* The file named name in dir, held, if dir's listing knows it and this
 * client trusts the file's attributes (*a), current as of now. NULL: not
 * known here. The listing only names the file: its item may be marked
 * stale (this client wrote the file since: the inode has its
 * attributes), and a push about the directory since it was fetched does
 * not matter. Under a delegation no other session changes the directory
 * without a recall first, and the listing was coherent at the grant
 * (dd_grant_listing): such a push is this client's own change coming back
 * (the daemon sends one to its author when other requests of it were in
 * flight). Otherwise (!held: dirdeleg_victim) the listing must be
 * coherent: no push about dir since it was fetched. A file has one link
 * and, for a change answered here, no attribute change pending under a
 * delegation. */
struct inode *dd_known_file(struct client *c, struct inode *dir, const char *name, unsigned how,
			    struct pfs_attr *a);
/* A new item by cr about name in dir (ids, directory, name set), or NULL. */
struct ditem *dd_item_new(const struct pfs_creds *cr, const struct inode *dir, const char *name);
/* Item it, about file in dir (e: dir's entry; one lookup of each held
 * for it), was answered here: the directory's times are this host's
 * clock, the file is stamped, and it is queued. bg.lock held, under
 * which a recall either sees it queued or ended the delegation first. */
void dd_answered(struct dirdeleg *d, struct ddir *e, struct ditem *it, struct inode *dir,
		 struct inode *file);
/* ip (a file made here) was renamed, or lost its name (unlinked), by a
 * change answered here at now: if its create is still queued, what
 * dirdeleg_stat answers shows it (ctime now; link count 0). bg.lock
 * held. */
void dd_made_changed(struct inode *ip, const struct timespec *now, bool unlinked);
/* Queues a for the senders (bg.lock held). */
void dd_ask(struct dirdeleg *d, struct dask *a);
/* If this client holds more than DD_SLOTS_HELD slots with more to come:
 * forgets the least recently used directory other than keep that is held
 * with slots, nothing pending and no file made there waiting, and puts
 * its handle in *ret for the caller to give back (DELEG_RETURN, which
 * frees its slots on the daemon). Returns whether it did. bg.lock held. */
bool dd_spare_slots(struct dirdeleg *d, const struct ddir *keep, unsigned more,
		    struct pfs_fh *ret);
/* Adds the n slots got, for callers with ids cr, to e's (bg.lock held);
 * none if e keeps slots for other ids. */
void dd_add_slots(struct dirdeleg *d, struct ddir *e, const struct pfs_entry *got, unsigned n,
		  const struct pfs_creds *cr);
/* If name in dir is a file made here whose writes are on their way,
 * waits for them; returns whether it waited. */
bool dd_writes_settled(struct dirdeleg *d, struct inode *dir, const char *name);

#endif /* PODFS_DIRDELEG_BASE_I_H */
