/* dirdeleg_i.h: directory delegations held by this client, and the
 * unlinks and creates answered under them (-o delegate; wire_deleg.h,
 * docs/delegation.md).
 *
 * After a few unlinks or creates in one directory (DD_ASK_AFTER), a
 * sender thread asks the daemon for the directory (DELEG_DIR), and after
 * creates for slots there (SLOTS: files the daemon made as the caller,
 * not named yet). The daemon grants it while no other session caches
 * the directory; a request of another session that names the directory
 * or its parent recalls it (RECALL push).
 *
 * While the client holds it, ops_unlink asks dirdeleg_unlink first: the
 * unlink of a name that the directory's listing knows, whose file this
 * client trusts the attributes of, with one link and not a directory, is
 * answered here. The name leaves the listing (listing_remove), the file
 * is stamped as changed by this client (its attributes are asked for
 * again), and the UNLINK is queued. ops_create asks dirdeleg_create: the
 * create of a regular file under a name the listing does not have, by
 * the ids the slots were made for, is answered with a slot (its handle
 * and inode number are final); the name joins the listing and the
 * CREATES item is queued. DD_SENDERS threads send the queue, several
 * requests in flight at once, each carrying the items at the head of the
 * queue of one kind, in one directory by one caller (up to
 * PFS_UNLINKS_MAX); unlinks and creates are never in flight together.
 *
 * The first writes of a file made here, by the open its create made,
 * travel in its CREATES item while it is queued (dirdeleg_write), and
 * its close too if it comes first (dirdeleg_release): a small file
 * costs one item, no WRITE, FSYNC or RELEASE; the changes of its mode,
 * owner and times answered before its close go in the item too. A
 * change of the held directory's own mode, owner or times is answered
 * here and queued as a SETATTR (dirdeleg_dir_setattr). A sender holds back a
 * create whose file is still open, up to DD_HOLD_NS, and one at the head
 * of the queue up to DD_LINGER_NS after its close for more to go with it
 * (its rename into place, the next files' creates), unless a
 * thread waits for the queue (hurry) or a full batch is queued.
 *
 * Order: every other request of this client that touches names or
 * attributes (rpc.c calls the barrier set with rpc_set_barrier first)
 * waits until nothing is queued or in flight; a GETATTR, RELEASE or
 * FSYNC of a file only for its own item (dirdeleg_wait_for), and a WRITE
 * of a file made here goes once it is named (dirdeleg_wait_made). So
 * the daemon sees this client's requests in the order the application
 * made them, as if each had waited for its reply. A MKDIR, MKNOD,
 * SYMLINK or CREATE made the usual way, a SETATTR or an OPEN, and a
 * rename within a held directory (dirdeleg_renaming), wait only for the
 * items of the directory they make a name in or change, or of the file
 * they change (rpc_call_in, dirdeleg_wait_in): no other item can change
 * their outcome, and no other host sees what the items change before
 * they are answered (a host that looks there recalls the delegation,
 * which sends the queue first). The directory's
 * attributes stay known meanwhile, its mtime and ctime of this host's
 * clock (inode_own_local), until its last item's reply brings the
 * daemon's.
 *
 * Files made here are covered (dirdeleg_covers): no other host reaches
 * them without a recall, so their close does not wait for their writes;
 * every end of the delegation (recall, return, dirdeleg_dir_changed)
 * waits for them first, and so does a rename or link by this client.
 *
 * A recall ends every delegation of this client and waits for the queue
 * and those writes (push thread: the push is acknowledged only after,
 * so the daemon runs the other host's request after everything answered
 * here). A reconnect ends them too, without waiting (what is queued is
 * still sent, and retried like any request). An item that fails (not an
 * unlink's ENOENT: the name is gone either way; EIO for all of them once
 * the daemon revoked the delegation of a holder that stalled; ESTALE for
 * a create whose slot a restarted daemon no longer has) is reported by
 * the next unlink, create or rmdir in that directory, or its fsync, as a
 * write behind's error is reported later.
 *
 * Bounded: at most DD_QUEUE_MAX items queued or in flight (past that, an
 * unlink or create waits for room), DD_DIRS directories tracked,
 * DD_SLOTS_MAX slots and DD_MADE_MAX covered files per directory.
 *
 * Any thread. One mutex (bg.lock) guards the state and is never held
 * across a call to the daemon; another (ask) is held across DELEG_DIR,
 * SLOTS and DELEG_RETURN only, so that a return never overtakes a later
 * grant.
 */
#ifndef PODFS_DIRDELEG_I_H
#define PODFS_DIRDELEG_I_H

#include <stdbool.h>
#include <stdint.h>

#include "podfs/codec.h"

struct client;
struct deleg;
struct inode;
struct dirdeleg;

#define DD_ASK_AFTER 2     /* unlinks in a directory sent the usual way before asking */
#define DD_RETRY_NS 1000000000LL /* no new ask for a directory that was refused or recalled */
#define DD_QUEUE_MAX 1024  /* unlinks queued or in flight */
#define DD_SENDERS 4       /* threads sending them */
#define DD_DIRS 64         /* directories tracked */
#define DD_SLOTS 32        /* slots asked for at once, at most */
#define DD_SLOTS_FIRST 4   /* the first time (doubling each time after) */
#define DD_SLOTS_WAIT_NS 100000000LL /* a create waits this long, at most, for slots asked for */
#define DD_SLOTS_MAX 64    /* slots kept per directory */
#define DD_SLOTS_NEW_DIR 4 /* slots asked for with a directory's MKDIR */
#define DD_SLOTS_HELD 192  /* slots held in all, at most (podfsd's limit: 256) */
#define DD_MADE_MAX 8192   /* files made under one grant whose close need not wait */
#define DD_INLINE_MAX (64u << 10)  /* a made file's first bytes sent with its create */
#define DD_INLINE_HELD (8u << 20)  /* such bytes held in all, at most */
#define DD_INLINE_BATCH (512u << 10) /* such bytes in one CREATES, at most */
#define DD_HOLD_NS 5000000LL /* a create whose file is open waits this long for its close */
#define DD_LINGER_NS 2000000LL /* a closed create waits this long for others to go with */

struct dirdeleg_stats {
	uint64_t asked;    /* DELEG_DIR sent */
	uint64_t granted;  /* of them granted */
	uint64_t local;    /* unlinks answered here */
	uint64_t creates;  /* creates answered here */
	uint64_t slots;    /* slots received */
	uint64_t slot_waits; /* creates that waited for slots asked for */
	uint64_t slot_timeouts; /* of them, waited DD_SLOTS_WAIT_NS in vain */
	uint64_t sent;     /* requests that carried them (UNLINK, UNLINKS, CREATES) */
	uint64_t recalls;  /* delegations recalled (or ended by a reconnect) */
	uint64_t errors;   /* unlinks and creates answered here that the daemon refused */
	uint64_t waits;    /* requests that waited for the queue */
	uint64_t inlined;  /* creates that carried their file's data */
	uint64_t closed;   /* creates that carried their file's close */
	uint64_t dir_attrs; /* changes of held directories' attributes answered here */
	uint64_t dir_attrs_joined; /* of them, sent with the one queued before */
	uint64_t renames;  /* renames answered here */
	uint64_t made_again; /* creates whose slot the coordinator lost, made by name */
};

/* Creates the state; no thread yet. Returns 0 or -errno. */
int dirdeleg_new(struct client *c, struct dirdeleg **out);
/* Starts the sender threads, after the process has daemonized (fork
 * keeps no thread), and installs the barrier. Returns 0 or -errno (the
 * threads started are stopped by dirdeleg_stop). The main thread, once. */
int dirdeleg_start(struct dirdeleg *d);
/* Sends what is queued, stops the threads (before the connection
 * closes). Safe on NULL and twice. */
void dirdeleg_stop(struct dirdeleg *d);
void dirdeleg_free(struct dirdeleg *d);

/* The unlink of name in dir by cr (FUSE thread; the kernel holds dir's
 * lock and the file). Returns true if it was answered here: *err is 0
 * (queued), or an earlier item's error (a positive errno) being reported
 * now. False: the caller sends it as usual, then calls dirdeleg_synced. */
bool dirdeleg_unlink(struct dirdeleg *d, struct inode *dir, const char *name,
		     const struct pfs_creds *cr, int *err);
/* The object the unlink (or with isdir, the rmdir) of name in dir
 * removes, if this client knows it (dir's listing names it, coherent)
 * and knows from attributes it trusts that it has one link and is not a
 * directory (isdir: that it is a directory): held (inode_forget(it, ip,
 * 1) gives it back). The change then moves no object but dir and it (an
 * unlink or rmdir that does not name it moves the namespace count,
 * trust_i.h). NULL: not known. With or without delegations; a rename
 * within dir asks it for what it moves and replaces (ops_rename.c). */
struct inode *dirdeleg_victim(struct client *c, struct inode *dir, const char *name, bool isdir);
/* A rename of name to newname, both in dir, which this client holds. */
struct dd_rename {
	struct inode *moved;  /* the object moved (held: inode_forget) */
	struct inode *victim; /* the one newname named, replaced (held), or NULL */
	struct pfs_entry e;   /* moved's item in dir's listing */
};
/* Before a rename of name to newname within dir: if dir is held and its
 * listing and trusted attributes tell what moves (a directory, or a file
 * with one link) and what it replaces (the same, or nothing), fills *rn
 * and returns true, after dir's items were answered (the RENAME, sent
 * with rpc_call_in(dir), waits for nothing else). The change then moves
 * those objects and dir only, and dir's listing stays, with the name
 * moved (a rename that cannot name them moves the namespace count and
 * drops the listings, trust_i.h). */
bool dirdeleg_renaming(struct dirdeleg *d, struct inode *dir, const char *name,
		       const char *newname, struct dd_rename *rn);
/* A rename of name to newname within dir (flags: 0 or RENAME_NOREPLACE)
 * by cr: answered here if dir is held and name is a file with one link,
 * made here or known, and newname is absent or such a file with no change
 * of attributes pending (*err: 0, EEXIST, or an earlier item's error
 * there, positive), and queued: the RENAME (PFS_RN_DELEG) goes alone, after the
 * items before it. Returns whether it was answered. */
bool dirdeleg_rename(struct dirdeleg *d, struct inode *dir, const char *name, const char *newname,
		     uint32_t flags, const struct pfs_creds *cr, int *err);
/* An unlink or (create) a create in dir was sent the usual way and
 * succeeded: after DD_ASK_AFTER of them, asks for the directory (one
 * DELEG_DIR, which a sender thread sends: the reply does not wait for it),
 * and after creates for slots there too. */
void dirdeleg_synced(struct dirdeleg *d, struct inode *dir, const struct pfs_creds *cr, bool create);
/* dir was just made by this client (mkdir, known empty) by a MKDIR that
 * did not ask for it (dirdeleg_mkdir_ask): nobody else knows it, it is
 * asked for at once. */
void dirdeleg_new_dir(struct dirdeleg *d, struct inode *dir, const struct pfs_creds *cr);
/* What a MKDIR asks for with the directory it makes (its slots: 0,
 * nothing; else its delegation and that many slots, DD_SLOTS_NEW_DIR),
 * and in *ended what dirdeleg_made_dir needs. */
uint32_t dirdeleg_mkdir_ask(struct dirdeleg *d, uint64_t *ended);
/* The reply to a MKDIR that asked (dirdeleg_mkdir_ask, ended) granted the
 * directory it made, dir (known empty), with the slots in the n bytes at
 * p (packed ENTRYs) for callers with ids cr: it is held from now on, and
 * its first creates are answered here. Given back if a delegation ended
 * meanwhile (a recall may have crossed the reply). */
void dirdeleg_made_dir(struct dirdeleg *d, struct inode *dir, const struct pfs_creds *cr,
		       uint64_t ended, const uint8_t *p, size_t n);
/* The create (FUSE's CREATE: open with O_CREAT of a name the kernel
 * believes absent) of a regular file name in dir with permission bits
 * perm (umask applied) by cr, opened as fid with open flags flags (the
 * daemon opens the file so when it names it: ofile_fid). Answered here if dir is held, a slot made
 * for cr's ids is left, the listing says the name is absent and perm has
 * nothing above 0777: true, with *pe the new file's entry (the slot's
 * handle; attributes as the daemon will make them, times of this host's
 * clock) and *out its inode with one lookup for the kernel; the CREATES
 * is queued. True with *err set (a positive errno) and *out NULL: an
 * earlier item's error, reported now. False: the caller sends CREATE as usual (and then calls
 * dirdeleg_synced). */
bool dirdeleg_create(struct dirdeleg *d, struct inode *dir, const char *name, uint32_t perm,
		     const struct pfs_creds *cr, uint64_t fid, uint32_t flags, struct pfs_entry *pe,
		     struct inode **out, int *err);
/* A write of buf[size] at off through fid to ip: if ip's create is
 * queued still, fid is the open it made, the write continues what the
 * item carries and the bounds allow, the data joins the item (sent with
 * it, written before the file is named) and true is returned, at being
 * the write's stamp (inode_own_touch). Else false (the caller writes the
 * usual way; later writes of ip never join). */
bool dirdeleg_write(struct dirdeleg *d, struct inode *ip, uint64_t fid, uint64_t off,
		    const void *buf, size_t size, uint64_t at);
/* The release of open fid of ip: if write-behind holds nothing for ip,
 * and ip's create is queued still and made fid, the item ends that open
 * (the daemon then never makes it), syncs the data it carries and makes
 * the change of attributes answered under fid's attribute delegation
 * (dl, if not NULL: deleg_take), and true is returned: no RELEASE, no
 * commit and no SETATTR follow. Else false. */
bool dirdeleg_release(struct dirdeleg *d, struct inode *ip, uint64_t fid, struct deleg *dl);
/* If ip's create is queued still and every byte written to it so far
 * went with it: its attributes as they are (size, times of the writes)
 * in *a, and true (a change of its mode, owner or times may then be
 * answered here without waiting for it). Else false. */
bool dirdeleg_attr(struct dirdeleg *d, struct inode *ip, struct pfs_attr *a);
/* The same for a stat, also once the file is closed (and renamed: its
 * ctime then the rename's): while its create is queued, no other host
 * knows the file, and every change of it went with the item or waits
 * for it. False if a change of its mode, owner or times answered here
 * went with the item (the daemon's attributes are asked for). */
bool dirdeleg_stat(struct dirdeleg *d, struct inode *ip, struct pfs_attr *a);
/* A change m of directory dir this client holds (its mode, owner or
 * explicit times, that the caller may make: deleg_rules_i.h), leaving
 * it with attributes na: queued behind what is queued there (the
 * SETATTR goes once they are answered, and is refused if the grant was
 * revoked meanwhile), dir's attributes become na, and true: the caller
 * answers it (as tar sets each directory's times, owner and mode at its
 * end); one that follows another of dir by the same caller, still the
 * last queued, goes in its SETATTR. A change of its mode or owner ends
 * the slots there (made under the rights before). False: not held; the
 * caller goes on as usual (dirdeleg_dir_changed first). */
bool dirdeleg_dir_setattr(struct dirdeleg *d, struct inode *dir, const struct pfs_setattr_req *m,
			  const struct pfs_attr *na);
/* Before this client changes dir's own attributes or extended
 * attributes (its mode, owner, ACL: the rights its slots were made
 * under): its delegation, if held, is given back, once what is queued
 * was sent. */
void dirdeleg_dir_changed(struct dirdeleg *d, struct inode *dir);
/* Whether ip was made here under a delegation this client still holds:
 * a close of it need not wait for its writes (no other host reaches the
 * file without a recall, and a recall waits for them). */
bool dirdeleg_covers(struct dirdeleg *d, struct inode *ip);
/* Waits for the writes of every file made under a delegation held now
 * (before a rename or link may name one where no recall guards it). */
void dirdeleg_settle_all(struct dirdeleg *d);
/* Whether this client holds dir's delegation now: a push about dir is
 * then its own change coming back, which dir's listing has. */
bool dirdeleg_holds(struct dirdeleg *d, const struct inode *dir);
/* The first error (-errno) of an unlink answered here in dir not reported
 * yet, forgotten now (0: none), after waiting for the queue: rmdir,
 * fsync. */
int dirdeleg_error(struct dirdeleg *d, struct inode *dir);
/* fsync of dir: dirdeleg_error, and the data of the files made in dir
 * under its delegation is on the daemon after, as the delegation's end
 * would have it (their close does not wait for their writes). Returns
 * dirdeleg_error's error, or -EINTR (the caller is being killed),
 * -ENOMEM. */
int dirdeleg_sync(struct dirdeleg *d, struct inode *dir);
/* Before a GETATTR of ip: waits for the queue if ip is a directory or a
 * file removed by an unlink answered here (a GETATTR of another object
 * goes at once: the barrier lets GETATTR through). */
void dirdeleg_wait_for(struct dirdeleg *d, struct inode *ip);
/* Waits until the unlink or create answered here of file ip, if any, was
 * answered by the daemon (a WRITE of a file made here goes after). */
void dirdeleg_wait_made(struct dirdeleg *d, struct inode *ip);
/* Before a request that makes a name in directory ip or changes the
 * attributes of ip: waits until the items there (a directory) or its own
 * (a file) were answered by the daemon. A no-op in a sender thread. */
void dirdeleg_wait_in(struct dirdeleg *d, struct inode *ip);
/* Waits until no unlink is queued or in flight. A no-op in a sender
 * thread. */
void dirdeleg_drain(struct dirdeleg *d);
/* RECALL push (push thread): every delegation ends; returns once the
 * queue is empty. */
void dirdeleg_recall(struct dirdeleg *d);
/* The connection went down or came back: every delegation ends (no
 * wait: connection thread); the next RECALL waits for the writes of the
 * files made under them. */
void dirdeleg_reconnected(struct dirdeleg *d);
void dirdeleg_get_stats(struct dirdeleg *d, struct dirdeleg_stats *st);

#endif /* PODFS_DIRDELEG_I_H */
