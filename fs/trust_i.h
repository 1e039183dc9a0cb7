/* trust_i.h: what podfs may answer from what it knows, without asking
 * the daemon: attributes known current, and the parents of directories.
 *
 * Attributes answered locally. The server pushes every change of an
 * object to the clients that cache it, except changes this client made
 * itself, so attr is current while (1) it came from a reply to a request
 * sent at push number seq, with no push about the object numbered since
 * (the caller checks that with gate_pushed_since inside the gate, and a
 * dropped connection numbers an "everything" push), and (2) no change of
 * this client may have moved it since: attrtrust_i.h has the rules, per
 * object, which these functions apply under the inode's lock. In short:
 * every own change of an object stamps it when it is announced (the
 * trust goes) and when it ends, where the reply's post-operation
 * attributes are trusted if nothing else of ours happened to the object
 * meanwhile; a reply to any other request is trusted if no stamp of the
 * object came after the request was sent; nothing is trusted while a
 * write behind of the object is pending. The changes and what they stamp:
 * a write, setattr, fallocate, an open with O_TRUNC, xattrs, a granted
 * lock: the object; a create, mknod, mkdir, symlink: the directory (the
 * new object comes with its attributes); a link: the file and the new
 * directory; an unlink, rmdir, rename: the directories, and since FUSE
 * does not name the object they remove, replace or move, the namespace
 * count, at their start and at their end: trust taken at another count
 * is not used.
 *
 * A directory's listing holds its entries' attributes (and small files'
 * contents) as they were when it was fetched. The server does not push
 * this client's own changes back to it, so inode_own_touch of an object
 * marks its item in the listing of the directory it was last seen in
 * stale (INODE_LS_STALE in the item's flags: lookups of it go to the
 * daemon, READDIR gives it without attributes), and a listing of that
 * directory asked for before is not kept; it drops every listing for a
 * file with several links (any directory may list it). And
 * inode_listed_stale tells whether this client changed the object fh
 * since a listing taken when the clock read any, or has writes of it
 * still pending (then the listing's entry for it is not used): so a
 * listing fetched while a change may be on its way is safe, and that
 * covers an object another host moved into a directory listed here.
 *
 * ".." of directories, for READDIR answered from a listing. The server
 * pushes a change of a directory (a rename moving it changes its ctime)
 * to the other clients: the parent is used only if no push about the
 * directory came since the request that found it (seq; the caller checks,
 * listing_readdir returns it), and a push forgets it (inode_find).
 * This client's own renames (inode_note_rename, before sending one) make
 * every parent recorded before unknown.
 *
 * Every function may be called from any thread; they take the inodes'
 * locks (and the table's, through inode.c) themselves.
 */
#ifndef PODFS_TRUST_I_H
#define PODFS_TRUST_I_H

#include <stdbool.h>
#include <stdint.h>

#include "inode_i.h"

/* Take before sending a request whose reply may be trusted: returns the
 * clock's last stamp (any), and the namespace count in *ns. */
uint64_t inode_own_snap(struct inode_table *t, uint64_t *ns);

/* A change by this client of ip (or NULL) is about to be sent (call
 * BEFORE sending it): ip loses its trust and its item in the listing of
 * its directory goes stale (see above); with ns, the change also moves
 * objects this client cannot name (unlink, rmdir, rename): the namespace
 * count moves, and inode_own_ns_end must follow once it ended. Returns
 * ip's stamp (0 for NULL), for inode_own_end. */
uint64_t inode_own_touch(struct inode_table *t, struct inode *ip, bool ns);

/* A change by this client of the directory ip answered here (an unlink
 * under a directory delegation, dirdeleg_i.h) moved its mtime and ctime
 * to (sec, nsec), this host's clock: if its attributes were trusted, they
 * stay trusted with those times, and the stamp of the change's end is
 * returned (the daemon's attributes after it are recorded with
 * inode_own_end at that stamp: trusted if nothing else of ours happened
 * to ip since); else 0 and its trust goes. Its item in its parent's
 * listing goes stale either way. */
uint64_t inode_own_local(struct inode_table *t, struct inode *ip, int64_t sec, uint32_t nsec);
/* The same for a change answered here that leaves ip with attributes a
 * (a change of a held directory's mode, owner or times). */
uint64_t inode_own_local_attr(struct inode_table *t, struct inode *ip, const struct pfs_attr *a);

/* A second object the change just announced moves (the other directory
 * of a link or rename): the same for ip. Returns its stamp. */
uint64_t inode_own_also(struct inode_table *t, struct inode *ip);

/* The change announced with ns ended (answered or failed): the
 * namespace count moves again. Returns the new count. */
uint64_t inode_own_ns_end(struct inode_table *t);

/* The change of ours that stamped ip with at (0: it did not announce
 * ip) ended. a: ip's attributes after it from its reply (recorded), or
 * NULL (unknown, or it failed). They are trusted from push number seq at
 * namespace count ns if nothing else of ours happened to ip since at
 * and no write of ip is pending; else ip's trust goes. Returns whether
 * they are trusted. Replies to requests sent while it ran are not
 * trusted (it stamps ip). */
bool inode_own_end(struct inode_table *t, struct inode *ip, const struct pfs_attr *a,
		   uint64_t seq, uint64_t at, uint64_t ns);

/* Writes behind (wb.c), after the write's announcement
 * (inode_own_touch): one is queued; one queued is sent (returns its
 * stamp); one sent ended (at: that stamp, or 0 for a write dropped
 * unsent; a: the attributes of its reply, or NULL), trusting them from
 * seq at ns if it was the only write of ip pending and nothing else
 * happened to ip since it was sent. Returns whether they are trusted. */
void inode_write_queued(struct inode *ip);
uint64_t inode_write_sent(struct inode_table *t, struct inode *ip);
bool inode_write_done(struct inode_table *t, struct inode *ip, uint64_t at,
		      const struct pfs_attr *a, uint64_t seq, uint64_t ns);

/* True if this client changed the object fh (one the table knows) since
 * a listing taken when the clock read any, or has writes of it pending
 * (attr_trust_listed_stale). */
bool inode_listed_stale(struct inode_table *t, const struct pfs_fh *fh, uint64_t any);

/* False if an item with attributes a of a listing (or READDIRPLUS chunk)
 * taken at namespace count ns (inode_own_snap) may be out of date by an
 * unlink, rmdir or rename of this client since: its object has several
 * links (attr_trust_listed). Then the item gives no attributes. */
bool inode_listed_current(struct inode_table *t, const struct pfs_attr *a, uint64_t ns);

/* The answer to a request sent at own-change count any (inode_own_snap)
 * says ip lacks the xattrs of NOX_* bits nox and, with caps,
 * security.capability (a GETXATTR's ENODATA, a listing's PFS_LD_NO_*
 * bits): remembered for ttl seconds (inode_absent_locked), unless this
 * client changed anything since (the server may have read the object
 * before an own xattr change in flight was made). The caller holds the
 * gate and checked that no push about ip was numbered since the request
 * was sent; an own xattr change calls inode_own_touch before it forgets
 * the absences (inode_clear_nocaps), and again once answered. */
void inode_note_absent(struct inode_table *t, struct inode *ip, uint8_t nox, bool caps,
		       double ttl, uint64_t any);

/* ip->attr came from a reply to a request sent at push number seq with
 * snapshot (any, ns) of inode_own_snap: trusts it, unless this client
 * changed ip since or a write of ip is pending (then ip's trust is
 * cleared). Returns whether it is trusted. */
bool inode_trust_attr(struct inode_table *t, struct inode *ip, uint64_t seq, uint64_t any,
		      uint64_t ns);

/* If ip's attributes are trusted (at the current namespace count): copies
 * them to *a, their push number to *seq and returns true; the caller
 * still checks for a push since *seq. Else false. */
bool inode_attr_trusted(struct inode_table *t, struct inode *ip, struct pfs_attr *a,
			uint64_t *seq);

/* ip was found (looked up, made, listed) under name in dir by a request
 * sent at push number seq: records dir as ip's parent if ip is a
 * directory, and for any ip dir as the directory whose listing holds it
 * (parent_hash, see inode_own_touch) under name (NULL: unknown), and the
 * earliest seq at which it was handed to the kernel under a name. */
void inode_set_parent(struct inode_table *t, struct inode *ip, struct inode *dir, uint64_t seq,
		      const char *name);

/* The push number at the request that first handed ip to the kernel
 * under a name (0 if none did): every push about ip since may have
 * removed a name the kernel still walks to it. */
uint64_t inode_named_seq(struct inode *ip);

/* True if removing or replacing a name in dir may take away the last name
 * of the regular file ip: it was last looked up or made in dir, or its
 * place is unknown, or it has other links (found under another name).
 * With dirs (an rmdir, a rename over a name), also if ip is a directory
 * whose one name may be there: last looked up or made in dir, or its
 * place unknown. */
bool inode_may_lose_name_in(struct inode *ip, const struct inode *dir, bool dirs);

/* A rename of ours is about to be sent: every ".." recorded so far
 * becomes unknown. */
void inode_note_rename(struct inode_table *t);

#endif /* PODFS_TRUST_I_H */
