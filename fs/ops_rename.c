/* ops_rename.c: FUSE's rename (see ops_i.h): what the reply and this
 * client's own knowledge let it keep of the listing and the attributes
 * of the objects a rename moves and replaces. */
#include <errno.h>
#include <stdio.h> /* RENAME_EXCHANGE */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dirdeleg_i.h"
#include "gate_i.h"
#include "listing_i.h"
#include "ops_i.h"
#include "podfs/log.h"
#include "trust_i.h"

struct moved_attr {
	struct client *c;
	const struct pfs_attr *a;
	const struct ops_own *o;
};

/* inode_with's callback: the moved object's attributes from RENAME's
 * reply (PFS_CAP_RENAME_ATTR), trusted as a GETATTR's sent when the
 * rename was, at the namespace count after it (ops_own_done): unless
 * anything else of ours happened to it since, or another rename or
 * unlink of ours overlapped this one. */
static void moved_attr_cb(void *arg, struct inode *ip)
{
	struct moved_attr *ma = arg;

	if (inode_set_attr_since(ip, ma->a, ma->o->seq, ma->o->any))
		inode_trust_attr(ma->c->it, ip, ma->o->seq, ma->o->any, ma->o->ns_trust);
}

/* This client's own rename of name to newname within dir, answered with
 * the moved object's entry e (NULL: not known), in dir's listing, or the
 * listing goes. The name replaced, if any, may or may not be listed; the
 * name moved must be (else the listing was not the directory as the
 * rename found it). */
static void listing_moved(struct inode *dir, const char *name, const char *newname,
			  const struct pfs_entry *e)
{
	if (!e || listing_remove(dir, name) < 0) {
		listing_touch(dir);
		return;
	}
	(void)listing_remove(dir, newname);
	if (listing_add(dir, newname, e) < 0)
		listing_touch(dir);
}

/* Whether dir's listing says it has no name name, and no push about dir
 * came since it was fetched. */
static bool listed_absent(struct client *c, struct inode *dir, const char *name)
{
	struct pfs_entry pe;
	struct listing_info li;
	uint8_t *data = NULL;
	uint32_t dlen, lflags;

	int r = listing_find(dir, name, &pe, &data, &dlen, &lflags, &li);
	free(data);
	if (r != LS_ABSENT)
		return false;
	gate_enter(c->gate);
	bool pushed = gate_pushed_since(c->gate, li.seq, &dir->fh);
	gate_leave(c->gate);
	return !pushed;
}

/* Before a rename of name to newname within dir: the object it moves and
 * the one it replaces (NULL: none), as dir's listing names them, both
 * known as an unlink's victim is (dirdeleg_victim: trusted attributes,
 * one link, not a directory, no push about dir since); held. Returns false if either is not known:
 * the rename then names nothing. */
static bool rename_known(struct client *c, struct inode *dir, const char *name,
			 const char *newname, struct inode **moved, struct inode **victim)
{
	*victim = NULL;
	if (!(*moved = dirdeleg_victim(c, dir, name, false)))
		return false;
	if ((*victim = dirdeleg_victim(c, dir, newname, false)) || listed_absent(c, dir, newname))
		return true;
	inode_forget(c->it, *moved, 1);
	*moved = NULL;
	return false;
}

/* Whether the reply rr says the rename moved moved and replaced victim
 * (NULL: nothing), as rename_known found them. */
static bool renamed_as_known(const struct pfs_rename_rep *rr, const struct inode *moved,
			     const struct inode *victim)
{
	if (!pfs_fh_equal(&rr->moved.fh, &moved->fh))
		return false;
	if (!victim)
		return (rr->flags & PFS_RR_NONE) != 0;
	return (rr->flags & PFS_RR_VICTIM) && pfs_bytes_are_fh(&rr->victim, &victim->fh);
}

void ops_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		const char *newname, unsigned int flags)
{
	struct client *c = CL(req);
	struct pfs_rename_req m;
	struct rpc_reply rep = { 0 };
	int rc;

	fill_creds(req, &m.cr, true);
	m.parent = IP(req, parent)->fh;
	m.newparent = IP(req, newparent)->fh;
	m.flags = flags;
	if (!(flags & RENAME_EXCHANGE))
		ofile_attach_lazy(c, IP(req, newparent), true, NULL, 0);
	/* Within a directory this client holds: answered here (dirdeleg_i.h). */
	int err;
	if (c->dd && parent == newparent &&
	    dirdeleg_rename(c->dd, IP(req, parent), name, newname, flags, &m.cr, &err)) {
		fuse_reply_err(req, err);
		return;
	}
	/* The objects moved and replaced are not named (FUSE gives the
	 * names): the namespace count moves; unless, within a directory
	 * this client holds, it knows them (dirdeleg_renaming): then they
	 * are stamped, and the listing stays, the name moved in it. */
	struct dd_rename rn;
	bool known = c->dd && parent == newparent && !(flags & RENAME_EXCHANGE) &&
		     dirdeleg_renaming(c->dd, IP(req, parent), name, newname, &rn);
	/* Within one directory, its listing stays too, the name moved in
	 * it, if the reply brings the moved object's entry
	 * (PFS_CAP_RENAME_ATTR): an atomic replace (a compiled module, a
	 * checkpoint) no longer sends the next lookups there to the
	 * coordinator. The kernel holds the directory meanwhile: no lookup
	 * or READDIR of ours uses the listing until it is put right. */
	bool moves = !known && parent == newparent && !(flags & ~RENAME_NOREPLACE);
	/* And if its listing and trusted attributes tell what moves and
	 * what is replaced (rename_known), those are stamped instead of
	 * moving the namespace count, which would leave every attribute
	 * this client trusts unused (pip stats each module's source after
	 * compiling the one before); the reply says whether they were
	 * right (PFS_RR_NONE, PFS_RR_VICTIM). */
	struct inode *kmoved = NULL, *kvictim = NULL;
	bool cand = moves && rename_known(c, IP(req, parent), name, newname, &kmoved, &kvictim);
	struct ops_own o = ops_own_change(c, IP(req, parent), !known && !cand);
	/* Within one directory, it is announced once: a second stamp would
	 * leave the attributes the reply brings for it untrusted. */
	o.at2 = parent != newparent ? inode_own_also(c->it, IP(req, newparent)) : 0;
	/* The objects stamped instead (held), whichever way they are known. */
	struct inode *smoved = known ? rn.moved : kmoved, *svictim = known ? rn.victim : kvictim;
	uint64_t moved_at = smoved ? inode_own_also(c->it, smoved) : 0;
	uint64_t victim_at = svictim ? inode_own_also(c->it, svictim) : 0;
	inode_note_rename(c->it); /* a moved directory's ".." */
	if (known || moves) {
		listing_changing(IP(req, parent));
	} else {
		listing_touch(IP(req, parent));
		listing_touch(IP(req, newparent));
	}
	ops_dir_busy(c, IP(req, parent), 1);
	ops_dir_busy(c, IP(req, newparent), 1);
	/* The kernel also holds a directory moved to another parent, and
	 * one replaced: another host's change in either waits for it. */
	ops_name_busy(c, IP(req, parent), name, 1);
	ops_name_busy(c, IP(req, newparent), newname, 1);
	if ((rc = ops_set_name(&m.name, name)) == 0 && (rc = ops_set_name(&m.newname, newname)) == 0)
		rc = rpc_msg_in(c->rpc, known ? IP(req, parent) : NULL, PFS_OP_RENAME, rename_req, &m,
				&rep);
	ops_name_busy(c, IP(req, newparent), newname, -1);
	ops_name_busy(c, IP(req, parent), name, -1);
	ops_dir_busy(c, IP(req, newparent), -1);
	ops_dir_busy(c, IP(req, parent), -1);
	if (known && (rc < 0 || (rn.victim && listing_remove(IP(req, parent), newname) < 0) ||
		      listing_remove(IP(req, parent), name) < 0 ||
		      listing_add(IP(req, parent), newname, &rn.e) < 0))
		listing_touch(IP(req, parent));
	ops_own_done(c, &o);
	/* Within one directory, the reply may carry its attributes after
	 * (PFS_CAP_DIR_ATTR); the others the kernel asks for. With
	 * PFS_CAP_RENAME_ATTR, the moved object's too. */
	struct pfs_attr da;
	struct pfs_rename_rep rr;
	bool have_moved = false;
	int have_da = 0;
	if (rc == 0 && rep.len && pfs_dec_rename_rep(rep.buf, rep.len, &rr) == 0) {
		have_moved = true;
		have_da = (rr.flags & PFS_RR_DIR) != 0;
		da = rr.dir;
	} else if (rc == 0) {
		have_da = rpc_dir_rep(&rep, &da);
	}
	if (have_da < 0 || (have_da > 0 && parent != newparent)) {
		rc = ops_bad_reply(req, "RENAME");
		have_da = 0;
		have_moved = false;
	}
	/* Not what rename_known found (another host's change came first,
	 * the rename failed, or the reply does not say): the namespace
	 * count moves now, before the kernel hears of the rename, and what
	 * was trusted before is not used after. */
	bool as_known = cand && rc == 0 && have_moved && renamed_as_known(&rr, kmoved, kvictim);
	if (cand && !as_known)
		(void)inode_own_ns_end(c->it);
	ops_own_dir_attr(c, IP(req, parent), have_da > 0 ? &da : NULL, &o, o.at);
	if (parent != newparent)
		inode_own_end(c->it, IP(req, newparent), NULL, o.seq, o.at2, o.ns_trust);
	/* The moved object's attributes after it (its ctime moved), as a
	 * reply to a request sent when this one was: the kernel asks for
	 * them next. */
	if (have_moved && !known && !cand) {
		struct moved_attr ma = { .c = c, .a = &rr.moved.attr, .o = &o };
		(void)inode_with(c->it, &rr.moved.fh, moved_attr_cb, &ma);
	}
	if (moves)
		listing_moved(IP(req, parent), name, newname,
			      have_moved && (!cand || as_known) ? &rr.moved : NULL);
	/* The moved object's attributes after it only where the reply said
	 * the rename was what rename_known found (as_known: never when known). */
	if (smoved) {
		inode_own_end(c->it, smoved, as_known ? &rr.moved.attr : NULL, o.seq, moved_at,
			      o.ns_trust);
		inode_forget(c->it, smoved, 1);
	}
	if (svictim) {
		inode_own_end(c->it, svictim, NULL, o.seq, victim_at, o.ns_trust);
		inode_forget(c->it, svictim, 1);
	}
	rpc_reply_free(&rep);
	fuse_reply_err(req, -ops_name_err(req, rc));
}
