/* ops_entry.c: FUSE operations on names: lookup, forget, readlink,
 * mknod, mkdir, symlink, unlink, rmdir, link (see ops_i.h; rename:
 * ops_rename.c; attributes: ops_attr.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h> /* RENAME_EXCHANGE */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cache_i.h"
#include "deleg_i.h"
#include "dirdeleg_i.h"
#include "gate_i.h"
#include "listing_i.h"
#include "lsfetch_i.h"
#include "ops_i.h"
#include "pcache_i.h"
#include "podfs/log.h"
#include "readahead_i.h"
#include "transport_i.h"
#include "trust_i.h"
#include "wb_i.h"

/* The directory ip we just made was empty once the daemon pushes us every
 * entry made in it (PFS_MK_EMPTY): its listing is known, empty, as of the
 * snapshot o taken before the MKDIR was sent. Lookups in it are then
 * answered locally (misses, and our own creates, which join the listing)
 * like in any listed directory, unless a push about it came since. */
static void new_dir_listing(fuse_req_t req, struct inode *ip, const struct ops_own *o)
{
	struct client *c = CL(req);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct listing_info li = { .seq = o->seq, .any = o->any, .own_ns = o->ns,
				   .ns = listing_gen(ip), .uid = ctx->uid, .gid = ctx->gid };
	uint8_t *buf;

	if (cache_nosys(c->cache, PFS_OP_LISTDIR) || !(buf = calloc(1, 4)))
		return;
	buf[0] = PFS_LS_COMPLETE; /* and no items */
	if (listing_set(c->it, ip, buf, 4, &li) < 0)
		pfs_debug("no listing kept for a new directory");
	else /* the daemon read it with the caller's ids */
		inode_note_reader(ip, ctx->uid, ctx->gid);
}

/* Replies to an entry-returning namespace change (rc from rpc_call, rep
 * its reply) sent after snapshot o for name under dir, which it stamped
 * with dir_at; obj_at: the stamp it gave the object the reply names (a
 * LINK's file), 0 for a new one. */
static void finish_entry(fuse_req_t req, int rc, struct rpc_reply *rep, struct inode *dir,
			 uint64_t dir_at, const char *name, struct ops_own *o, uint64_t obj_at,
			 const uint64_t *dd_ended)
{
	struct client *c = CL(req);
	struct pfs_entry_rep er;
	struct fuse_entry_param e;
	struct pfs_attr da;
	struct inode *ip;
	bool have_da = false, made;
	uint32_t mkflags = 0;
	uint64_t seq = o->seq;

	if (rc == 0 && ops_dec_entry(rep, &er, &da, &have_da, &mkflags) < 0)
		rc = ops_bad_reply(req, "entry");
	ops_own_listing(dir, name, rc == 0 ? &er.e : NULL);
	ops_own_done(c, o);
	ops_own_dir_attr(c, dir, rc == 0 && have_da ? &da : NULL, o, dir_at);
	if (rc < 0) {
		rpc_reply_free(rep);
		fuse_reply_err(req, -ops_name_err(req, rc));
		return;
	}
	if (!(ip = ops_entry_param(c, dir, name, seq, &er.e, &e, &made))) {
		rpc_reply_free(rep);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* The object's attributes after the change: a new object's are
	 * current (nothing else of ours knew it); the file a LINK named is
	 * as current as nothing else of ours moved it meanwhile. An object
	 * the table held before that the change did not announce is left
	 * to GETATTR (and stamped: what was read of it meanwhile goes). */
	if (made && obj_at == 0) {
		inode_trust_attr(c->it, ip, seq, o->any, o->ns_trust);
		/* What the kernel asks a new directory before the first
		 * create in it: its ACLs. */
		ops_made_absent(c, ip, mkflags, seq, o->any);
	} else
		inode_own_end(c->it, ip, &er.e.attr, seq, obj_at, o->ns_trust);
	if ((mkflags & PFS_MK_EMPTY) && S_ISDIR(er.e.attr.mode)) {
		new_dir_listing(req, ip, o);
		/* Files are made in a new directory next, mostly: held from
		 * its MKDIR's reply on (before the kernel hears of it), else
		 * asked for now. */
		struct pfs_mkdir_rep mr;
		if (c->dd) {
			struct pfs_creds cr;
			fill_creds(req, &cr, true);
			if (dd_ended && (mkflags & PFS_MK_DELEG) &&
			    pfs_dec_mkdir_rep(rep->buf, rep->len, &mr) == 0)
				dirdeleg_made_dir(c->dd, ip, &cr, *dd_ended, mr.slots.p, mr.slots.len);
			else if (!dd_ended)
				dirdeleg_new_dir(c->dd, ip, &cr);
		}
	}
	rpc_reply_free(rep);
	ops_reply_entry(req, dir, name, ip, &e, seq);
}


/* LOOKUP_DATA: the entry and, for a small regular file, its content.
 * Returns 0 with *er filled and *readable (PFS_LD_READABLE), -ENOSYS if
 * the server lacks it, or -errno. */
static int lookup_data(fuse_req_t req, struct pfs_lookup_req *lm, struct pfs_entry_rep *er,
		       struct rpc_reply *rep, struct pfs_bytes *data, bool *readable)
{
	struct client *c = CL(req);
	struct pfs_lookup_data_req m;
	struct pfs_lookup_data_rep r;

	m.cr = lm->cr;
	m.parent = lm->parent;
	m.name = lm->name;
	m.max_inline = c->max_inline;
	int rc = rpc_msg(c->rpc, PFS_OP_LOOKUP_DATA, lookup_data_req, &m, rep);
	if (rc < 0)
		return rc;
	if (pfs_dec_lookup_data_rep(rep->buf, rep->len, &r) < 0 || r.data.len > c->max_inline) {
		rpc_reply_free(rep);
		return ops_bad_reply(req, "LOOKUP_DATA");
	}
	er->e = r.e;
	data->p = NULL;
	data->len = 0;
	if ((r.flags & PFS_LD_DATA) && S_ISREG(r.e.attr.mode) && r.data.len == r.e.attr.size)
		*data = r.data;
	*readable = data->p || ((r.flags & PFS_LD_READABLE) && S_ISREG(r.e.attr.mode));
	return 0;
}

/* A lookup of name in dir whose listing names fh, current but for what
 * this client itself changed of the object since (its attributes: a
 * create in a subdirectory moves its mtime; the listing keeps up with
 * this client's own renames and unlinks, or is dropped). Answered with
 * the object's own attributes if they are known current (as a GETATTR
 * is answered here): `mkdir -p` of a directory made here, whose lookup
 * the kernel always sends (LOOKUP_EXCL), costs no round trip. Listing
 * asked for at push number seq. Returns true if it replied. */
static bool lookup_known(fuse_req_t req, struct inode *dir, const char *name,
			 const struct pfs_fh *fh, uint64_t seq)
{
	struct client *c = CL(req);
	struct fuse_entry_param e;
	struct pfs_attr a;
	uint64_t aseq;
	struct inode *ip = inode_hold_fh(c->it, fh);

	if (!ip)
		return false;
	if (!ops_current_attr(c, ip, &a, &aseq)) {
		inode_forget(c->it, ip, 1);
		return false;
	}
	inode_set_parent(c->it, ip, dir, seq, name);
	memset(&e, 0, sizeof(e));
	e.ino = ip->nodeid;
	attr_to_stat(&a, &e.attr);
	e.attr_timeout = c->attr_timeout;
	e.entry_timeout = c->entry_timeout;
	/* Timeout 0 if a push about dir or the object came since either. */
	ops_reply_entry(req, dir, name, ip, &e, aseq < seq ? aseq : seq);
	return true;
}

/* Cold start: answers a lookup in dir from the directory's complete
 * listing (fetched here at the first lookup in a small directory) while
 * it is coherent: no push about the directory since it was fetched (a
 * name created, removed or renamed there is pushed; a dropped connection
 * counts as a push about everything); this client's own changes there
 * drop it (listing_touch). A name not in it does not exist.
 * Returns true if it replied. */
static bool lookup_listed(fuse_req_t req, struct inode *dir, const char *name,
			  const struct pfs_creds *cr)
{
	struct client *c = CL(req);
	struct pfs_entry pe;
	struct fuse_entry_param e;
	struct listing_info li;
	uint8_t *data;
	uint32_t dlen, lflags;

	if (cache_nosys(c->cache, PFS_OP_LISTDIR) || !rpc_is_up(c->rpc))
		return false;
	int r = listing_find(dir, name, &pe, &data, &dlen, &lflags, &li);
	if (r == LS_NONE) {
		bool fetched = true;
		if (listing_fetch_begin(dir, LIST_DIR_MAX_SIZE, 0, 0))
			ops_fetch_listing(req, dir, cr, c->max_inline);
		else if (!cache_nosys(c->cache, PFS_OP_LISTDIR_PAGE) &&
			 listing_fetch_begin(dir, LIST_PAGED_MAX_SIZE, LIST_STORM,
					     LIST_STORM_BYTES))
			ops_fetch_listing_pages(req, dir, cr);
		else
			fetched = false;
		if (fetched) {
			listing_fetch_end(dir);
			r = listing_find(dir, name, &pe, &data, &dlen, &lflags, &li);
		}
	}
	if (r == LS_NONE || !transport_quiet(c->tr)) {
		free(data);
		return false;
	}
	/* Changed by us since the listing was asked for (never pushed). */
	bool own_stale = r == LS_PRESENT && (inode_listed_stale(c->it, &pe.fh, li.any) ||
					     !inode_listed_current(c->it, &pe.attr, li.own_ns));
	gate_enter(c->gate);
	bool stale = gate_pushed_since(c->gate, li.seq, &dir->fh);
	bool entry_stale = r == LS_PRESENT && gate_pushed_since(c->gate, li.seq, &pe.fh);
	/* A small file that came without its content (the listing's data
	 * budget ran out) from a server that does not say whether the caller
	 * may read it: LOOKUP_DATA brings both in the same round trip.
	 * Otherwise its first READ does, if it is read at all (a .py file
	 * next to its .pyc is only stat'ed), or the persistent cache. */
	bool readable = data || ((lflags & PFS_LD_READABLE) && S_ISREG(pe.attr.mode));
	if (r == LS_PRESENT && !readable && S_ISREG(pe.attr.mode) && pe.attr.size > 0 &&
	    pe.attr.size <= c->max_inline)
		entry_stale = true;
	/* Only its attributes are stale, and only by our own doing. */
	bool own_only = !entry_stale && (own_stale || (lflags & INODE_LS_STALE));
	if (own_stale || (lflags & INODE_LS_STALE))
		entry_stale = true;
	gate_leave(c->gate);
	/* Under a directory delegation, a push about dir is one of this
	 * client's own changes coming back (dirdeleg_i.h), which the
	 * listing already has. */
	if (stale && c->dd && dirdeleg_holds(c->dd, dir))
		stale = false;
	if (stale)
		listing_stale(dir);
	if (!stale && own_only && lookup_known(req, dir, name, &pe.fh, li.seq)) {
		free(data);
		return true;
	}
	if (stale || entry_stale) {
		free(data);
		return false;
	}
	if (r == LS_ABSENT) {
		if (c->negative_timeout <= 0) {
			fuse_reply_err(req, ENOENT);
			return true;
		}
		memset(&e, 0, sizeof(e));
		e.entry_timeout = c->negative_timeout;
		ops_reply_entry(req, dir, name, NULL, &e, li.seq);
		return true;
	}
	struct inode *ip = ops_entry_param(c, dir, name, li.seq, &pe, &e, NULL);
	if (!ip) {
		free(data);
		return false;
	}
	inode_trust_attr(c->it, ip, li.seq, li.any, li.own_ns);
	if (lflags & PFS_LD_NO_XATTRS) {
		gate_enter(c->gate);
		if (!gate_pushed_since(c->gate, li.seq, &pe.fh))
			ops_listed_absent(c, ip, lflags, li.any);
		gate_leave(c->gate);
	}
	if (readable)
		inode_note_reader(ip, li.uid, li.gid);
	if (data) {
		inode_set_inline(ip, &pe.attr, data, dlen);
		if (c->pc) {
			struct dver v = dver_of(&pe.attr);
			pcache_offer(c->pc, &pe.fh, &v, data, dlen);
		}
		free(data);
	}
	/* A subdirectory of a large directory a walk reads (listed in
	 * pages, see readdir_listed): the walk opens it next, its listing
	 * is fetched ahead (held here: the kernel may forget it once
	 * replied), queued before the reply as in ops_lookup, and so are
	 * those of the next subdirectories, which the walk opens after. */
	if (S_ISDIR(pe.attr.mode) && c->max_inline && inode_walked(dir, WALK_LOOKUP_NS)) {
		inode_hold(c->it, ip);
		inode_note_walk(dir); /* the walk goes on */
		lsfetch_walk_on(c->lf, dir, ip, name, cr);
	}
	ops_reply_entry(req, dir, name, ip, &e, li.seq);
	return true;
}

void ops_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct client *c = CL(req);
	struct inode *dir = IP(req, parent);
	struct pfs_lookup_req m;
	struct pfs_entry_rep er;
	struct pfs_bytes data = { 0 };
	struct rpc_reply rep = { 0 };
	struct fuse_entry_param e;
	struct inode *ip;
	bool readable = false;
	int rc;

	readahead_raise(c);
	fill_creds(req, &m.cr, true);
	m.parent = dir->fh;
	uint64_t ns, any = inode_own_snap(c->it, &ns);
	uint64_t seq = gate_seq(c->gate);
	if ((rc = ops_set_name(&m.name, name)) < 0)
		goto out_err;
	if (c->max_inline && lookup_listed(req, dir, name, &m.cr))
		return;
	rc = -ENOSYS;
	if (c->max_inline && !cache_nosys(c->cache, PFS_OP_LOOKUP_DATA)) {
		rc = lookup_data(req, &m, &er, &rep, &data, &readable);
		if (rc == -ENOSYS) {
			pfs_info("server has no LOOKUP_DATA: plain lookups");
			cache_set_nosys(c->cache, PFS_OP_LOOKUP_DATA);
		}
	}
	if (rc == -ENOSYS) {
		rc = rpc_msg(c->rpc, PFS_OP_LOOKUP, lookup_req, &m, &rep);
		if (rc == 0 && pfs_dec_entry_rep(rep.buf, rep.len, &er) < 0) {
			rpc_reply_free(&rep);
			rc = ops_bad_reply(req, "LOOKUP");
		}
	}
	if (rc == -ENOENT && c->negative_timeout > 0) {
		/* A negative entry: the kernel remembers the miss, until the
		 * timeout or a push for this directory. */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = c->negative_timeout;
		ops_reply_entry(req, dir, name, NULL, &e, seq);
		return;
	}
	if (rc < 0)
		goto out_err;
	ip = ops_entry_param(c, dir, name, seq, &er.e, &e, NULL);
	if (ip)
		inode_trust_attr(c->it, ip, seq, any, ns);
	/* A subdirectory of a directory a walk reads from the daemon (too
	 * big to be listed): the walk opens it next, its listing is fetched
	 * ahead (held here: the kernel may forget it once replied). */
	bool ahead = ip && S_ISDIR(er.e.attr.mode) && inode_walked(dir, WALK_LOOKUP_NS);
	if (ahead) {
		inode_hold(c->it, ip);
		inode_note_walk(dir); /* the walk goes on */
	}
	if (ip && data.p)
		inode_set_inline(ip, &er.e.attr, data.p, data.len);
	if (ip && readable)
		inode_note_reader(ip, m.cr.uid, m.cr.gid); /* see LOOKUP_DATA */
	if (ip && data.p && c->pc) {
		struct dver v = dver_of(&er.e.attr);
		pcache_offer(c->pc, &er.e.fh, &v, data.p, data.len);
	}
	rpc_reply_free(&rep);
	if (!ip) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* Queued before the reply: the walk's OPENDIR of it may follow at
	 * once, on another thread, and must find it queued. */
	if (ahead)
		lsfetch_ahead(c->lf, &ip, 1, &m.cr, NULL);
	ops_reply_entry(req, dir, name, ip, &e, seq);
	return;
out_err:
	rpc_reply_free(&rep);
	fuse_reply_err(req, -ops_name_err(req, rc));
}

void ops_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	atomic_fetch_add(&CL(req)->st_forgotten, 1);
	inode_forget(CL(req)->it, IP(req, ino), nlookup);
	fuse_reply_none(req);
}

void ops_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct client *c = CL(req);
	atomic_fetch_add(&c->st_forgotten, count);
	for (size_t i = 0; i < count; i++)
		inode_forget(c->it, inode_get(c->it, forgets[i].ino), forgets[i].nlookup);
	fuse_reply_none(req);
}


void ops_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct client *c = CL(req);
	struct pfs_readlink_req m;
	struct pfs_readlink_rep r;
	struct rpc_reply rep = { 0 };

	fill_creds(req, &m.cr, false);
	m.fh = IP(req, ino)->fh;
	int rc = rpc_msg(c->rpc, PFS_OP_READLINK, readlink_req, &m, &rep);
	if (rc == 0 && pfs_dec_readlink_rep(rep.buf, rep.len, &r) < 0)
		rc = ops_bad_reply(req, "READLINK");
	rpc_reply_free(&rep);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_readlink(req, r.target.s);
}

void ops_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
	       dev_t rdev)
{
	struct client *c = CL(req);
	struct pfs_mknod_req m;
	struct rpc_reply rep = { 0 };
	int rc;

	fill_creds(req, &m.cr, true);
	m.parent = IP(req, parent)->fh;
	m.mode = mode;
	m.rdev = (uint32_t)rdev;
	m.umask = fuse_req_ctx(req)->umask;
	struct ops_own o = ops_own_change(c, IP(req, parent), false);
	ops_dir_busy(c, IP(req, parent), 1);
	if ((rc = ops_set_name(&m.name, name)) == 0)
		rc = rpc_msg_in(c->rpc, IP(req, parent), PFS_OP_MKNOD, mknod_req, &m, &rep);
	ops_dir_busy(c, IP(req, parent), -1);
	finish_entry(req, rc, &rep, IP(req, parent), o.at, name, &o, 0, NULL);
}

void ops_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct client *c = CL(req);
	struct pfs_mkdir_req m;
	struct rpc_reply rep = { 0 };
	int rc;

	fill_creds(req, &m.cr, true);
	m.parent = IP(req, parent)->fh;
	m.mode = mode;
	m.umask = fuse_req_ctx(req)->umask;
	uint64_t ended = 0;
	m.slots = c->dd ? dirdeleg_mkdir_ask(c->dd, &ended) : 0;
	struct ops_own o = ops_own_change(c, IP(req, parent), false);
	ops_dir_busy(c, IP(req, parent), 1);
	if ((rc = ops_set_name(&m.name, name)) == 0)
		rc = rpc_msg_in(c->rpc, IP(req, parent), PFS_OP_MKDIR, mkdir_req, &m, &rep);
	ops_dir_busy(c, IP(req, parent), -1);
	finish_entry(req, rc, &rep, IP(req, parent), o.at, name, &o, 0, m.slots ? &ended : NULL);
}

void ops_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	struct client *c = CL(req);
	struct pfs_symlink_req m;
	struct rpc_reply rep = { 0 };
	size_t tlen = strlen(link);
	int rc;

	struct ops_own o = ops_own_change(c, IP(req, parent), false);
	fill_creds(req, &m.cr, true);
	m.parent = IP(req, parent)->fh;
	if (tlen == 0) {
		rc = -ENOENT;
	} else if (tlen > PFS_PATH_MAX) {
		rc = -ENAMETOOLONG;
	} else {
		m.target.len = (uint16_t)tlen;
		memcpy(m.target.s, link, tlen + 1);
		ops_dir_busy(c, IP(req, parent), 1);
		if ((rc = ops_set_name(&m.name, name)) == 0)
			rc = rpc_msg_in(c->rpc, IP(req, parent), PFS_OP_SYMLINK, symlink_req, &m,
					&rep);
		ops_dir_busy(c, IP(req, parent), -1);
	}
	finish_entry(req, rc, &rep, IP(req, parent), o.at, name, &o, 0, NULL);
}

static void unlink_common(fuse_req_t req, fuse_ino_t parent, const char *name, uint16_t op)
{
	struct client *c = CL(req);
	struct pfs_unlink_req m;
	struct rpc_reply rep = { 0 };
	int rc;

	fill_creds(req, &m.cr, true);
	m.parent = IP(req, parent)->fh;
	ofile_attach_lazy(c, IP(req, parent), op == PFS_OP_RMDIR, NULL, 0);
	if (c->dd) {
		/* Answered here under a directory delegation, or an error
		 * of one answered before reported now (dirdeleg_i.h). */
		int err;
		if (op == PFS_OP_UNLINK ? dirdeleg_unlink(c->dd, IP(req, parent), name, &m.cr, &err)
					: (err = -dirdeleg_error(c->dd, IP(req, parent))) != 0) {
			fuse_reply_err(req, err);
			return;
		}
	}
	/* The object removed is not named (FUSE gives the name): its link
	 * count and ctime move unannounced, so the namespace count does;
	 * unless this client knows it, from the directory's listing: a file
	 * with one link, an (empty) directory (dirdeleg_victim). Then only
	 * it is stamped, and the reply must say that it was the one removed
	 * (unlink_rep, PFS_UR_VICTIM); where it does not (another host's
	 * change came first, the unlink failed), the count moves before the
	 * kernel hears of the unlink (as for renames, ops_rename.c). */
	struct inode *victim = dirdeleg_victim(c, IP(req, parent), name, op == PFS_OP_RMDIR);
	struct ops_own o = ops_own_change(c, IP(req, parent), victim == NULL);
	uint64_t victim_at = victim ? inode_own_also(c->it, victim) : 0;
	/* An unlink or rmdir keeps the directory's listing, without the
	 * name once it is gone (the unlinks answered under a directory
	 * delegation find their files there; the lookups after an own
	 * removal stay local). The kernel holds the directory's lock
	 * meanwhile: no lookup or READDIR of ours uses it. */
	listing_changing(IP(req, parent));
	ops_dir_busy(c, IP(req, parent), 1);
	if (op == PFS_OP_RMDIR)
		ops_name_busy(c, IP(req, parent), name, 1); /* the kernel holds it too */
	if ((rc = ops_set_name(&m.name, name)) == 0)
		rc = rpc_msg(c->rpc, op, unlink_req, &m, &rep);
	if (op == PFS_OP_RMDIR)
		ops_name_busy(c, IP(req, parent), name, -1);
	ops_dir_busy(c, IP(req, parent), -1);
	if (rc < 0 || listing_remove(IP(req, parent), name) < 0)
		listing_touch(IP(req, parent));
	ops_own_done(c, &o);
	struct pfs_attr da;
	struct pfs_unlink_rep ur;
	int have_da = 0;
	bool said = false, as_known = false;
	if (rc == 0 && rep.len && pfs_dec_unlink_rep(rep.buf, rep.len, &ur) == 0) {
		said = true;
		if ((have_da = (ur.flags & PFS_UR_DIR) != 0))
			da = ur.dir;
		as_known = victim && (ur.flags & PFS_UR_VICTIM) && pfs_bytes_are_fh(&ur.victim, &victim->fh);
	} else if (rc == 0) {
		have_da = rpc_dir_rep(&rep, &da);
	}
	if (have_da < 0)
		rc = ops_bad_reply(req, "UNLINK");
	/* A server without unlink_rep says nothing: there only a client
	 * with directory delegations trusts its listing's victim, as before
	 * unlink_rep was. */
	if (victim && !as_known && (said || rc != 0 || !c->dd))
		(void)inode_own_ns_end(c->it);
	ops_own_dir_attr(c, IP(req, parent), have_da > 0 ? &da : NULL, &o, o.at);
	if (victim) {
		inode_own_end(c->it, victim, NULL, o.seq, victim_at, o.ns_trust);
		inode_forget(c->it, victim, 1);
	}
	rpc_reply_free(&rep);
	/* A burst of unlinks here may ask for the directory (while the
	 * kernel still holds it for us). */
	if (c->dd && rc == 0 && op == PFS_OP_UNLINK)
		dirdeleg_synced(c->dd, IP(req, parent), &m.cr, false);
	fuse_reply_err(req, -ops_name_err(req, rc));
}

void ops_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	unlink_common(req, parent, name, PFS_OP_UNLINK);
}

void ops_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	unlink_common(req, parent, name, PFS_OP_RMDIR);
}

void ops_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	if (CL(req)->dl) /* its other name would escape a recall */
		deleg_end(CL(req)->dl, IP(req, ino));
	struct client *c = CL(req);
	struct pfs_link_req m;
	struct rpc_reply rep = { 0 };
	int rc;

	fill_creds(req, &m.cr, true);
	m.fh = IP(req, ino)->fh;
	m.newparent = IP(req, newparent)->fh;
	/* The file (link count, ctime) and the new directory: both named. */
	struct ops_own o = ops_own_change(c, IP(req, ino), false);
	o.at2 = inode_own_also(c->it, IP(req, newparent));
	ops_dir_busy(c, IP(req, newparent), 1);
	if ((rc = ops_set_name(&m.newname, newname)) == 0)
		rc = rpc_msg(c->rpc, PFS_OP_LINK, link_req, &m, &rep);
	ops_dir_busy(c, IP(req, newparent), -1);
	if (rc < 0) /* the file was announced too */
		inode_own_end(c->it, IP(req, ino), NULL, o.seq, o.at, o.ns);
	finish_entry(req, rc, &rep, IP(req, newparent), o.at2, newname, &o, o.at, NULL);
}
