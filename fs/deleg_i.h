/* deleg_i.h: attribute delegations held by this client (-o delegate;
 * wire_deleg.h, docs/delegation.md).
 *
 * The daemon may grant a delegation on a file this client just created
 * (CREATE's reply, PFS_CR_DELEG). While it holds one and the file is
 * open, ops_setattr asks deleg_setattr first: a chmod, chown or utimens
 * that deleg_rules_i.h allows is answered here, its result kept as the
 * file's attributes (inode_overlay shows them over older ones from the
 * daemon), and noted as pending: one SETATTR (PFS_SET_DELEG) that carries
 * the final mode, owner, group and times of every change answered here
 * since the last one sent (the daemon applies chmod, chown, then times:
 * with no set-id bit involved the result is the same). deleg_flush sends
 * it and waits: before any other SETATTR or write of the file, at every
 * close (ops_flush) and fsync, before the commit at release, and on a
 * recall (RECALL push: deleg_recall, on the push thread; the push is
 * acknowledged only once it returns). An error (the daemon revoked the
 * delegation: EIO) is reported by the next close or fsync, as a write
 * behind's is.
 *
 * A delegation ends at the first close of the open file its CREATE made
 * (deleg_closed: the kernel's release comes later, on its own; a
 * duplicated descriptor closed first ends it too), at its release
 * (deleg_release), when it is recalled, when the connection goes down
 * (deleg_reconnected: what is pending is sent after the reconnect, but
 * nothing more is answered here), and before this client links the file or changes its
 * xattrs (deleg_end).
 *
 * Any thread; one mutex, never held across a call to the daemon.
 */
#ifndef PODFS_DELEG_I_H
#define PODFS_DELEG_I_H

#include <stdbool.h>
#include <stdint.h>

#include "podfs/codec.h"

struct client;
struct inode;
struct deleg;

/* Counters for podfs status. */
struct deleg_stats {
	uint64_t granted;  /* delegations received */
	uint64_t local;    /* SETATTRs answered here */
	uint64_t sent;     /* SETATTRs sent for them */
	uint64_t recalls;  /* delegations recalled */
	uint64_t errors;   /* those refused by the daemon */
};

int deleg_new(struct client *c, struct deleg **out);
void deleg_free(struct deleg *d);

/* CREATE granted a delegation on ip (made in directory parent, opened as
 * fid); a the file's attributes in the reply. */
void deleg_granted(struct deleg *d, struct inode *ip, const struct pfs_fh *parent, uint64_t fid,
		   const struct pfs_attr *a);
/* Whether ip has a delegation entry (held or ending). Cheap. */
bool deleg_has(struct deleg *d, struct inode *ip);
/* The SETATTR m of ip by cr, with base: ip's attributes as last known.
 * Returns true if it was answered here (*a: the attributes after it; the
 * caller records them and replies), false if it must go to the daemon
 * (the caller first calls deleg_flush, and after the reply
 * deleg_note_attr). */
bool deleg_setattr(struct deleg *d, struct inode *ip, const struct pfs_creds *cr,
		   const struct pfs_setattr_req *m, const struct pfs_attr *base, struct pfs_attr *a);
/* Sends what was answered here for ip and waits for the daemon's answer.
 * With report, returns the first error not reported yet (and forgets
 * it); else 0 and the error waits for the next report. */
int deleg_flush(struct deleg *d, struct inode *ip, bool report);
/* The daemon's attributes of ip after a change of ours it answered. */
void deleg_note_attr(struct deleg *d, struct inode *ip, const struct pfs_attr *a);
/* Nothing more is answered here for ip; what is pending is sent. */
void deleg_end(struct deleg *d, struct inode *ip);
/* A close (FLUSH) of ip's open file fid: if its CREATE brought the
 * delegation, nothing more is answered here (the file may be closed for
 * good: the kernel sends its release later, on its own). */
void deleg_closed(struct deleg *d, struct inode *ip, uint64_t fid);
/* The fid of ip is released: if its CREATE brought the delegation, it
 * ends (flushed first) and its entry goes. */
void deleg_release(struct deleg *d, struct inode *ip, uint64_t fid);
/* The change answered here for ip under the delegation of open fid, not
 * sent yet, made by cr: moved to *m (valid, mode, uid, gid, times; the
 * caller sends it another way: a create's item, dirdeleg_i.h) and true;
 * false if there is none (or another caller's, or one on its way). */
bool deleg_take(struct deleg *d, struct inode *ip, uint64_t fid, const struct pfs_creds *cr,
		struct pfs_setattr_req *m);
/* RECALL push (push thread) of fh: the delegations of this client end,
 * what is pending for them sent and answered (all of them: the daemon
 * may name the directory a file of ours was renamed into). */
void deleg_recall(struct deleg *d, const struct pfs_fh *fh);
/* The connection went down or came back: nothing is answered here any
 * more (no blocking: connection thread). */
void deleg_reconnected(struct deleg *d);
void deleg_get_stats(struct deleg *d, struct deleg_stats *st);

#endif /* PODFS_DELEG_I_H */
