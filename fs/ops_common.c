/* ops_common.c: what the FUSE operations of several kinds share: entry
 * replies through the gate, the snapshot and bookkeeping of our own
 * namespace changes, directory listings, and opens answered locally (see
 * ops_i.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "cache_i.h"
#include "gate_i.h"
#include "listing_i.h"
#include "lsfetch_i.h"
#include "names_i.h"
#include "ops_i.h"
#include "podfs/le.h"
#include "podfs/log.h"
#include "pushq_i.h"
#include "transport_i.h"
#include "trust_i.h"

int ops_set_name(struct pfs_name *n, const char *s)
{
	size_t len = strlen(s);
	if (len > PFS_NAME_MAX)
		return -ENAMETOOLONG;
	if (!pfs_name_valid(s, len))
		return -EINVAL;
	n->len = (uint16_t)len;
	memcpy(n->s, s, len + 1);
	return 0;
}

void answer_early(void *arg)
{
	struct early_answer *ea = arg;

	fuse_reply_err(ea->req, EINTR);
	ea->answered = true;
}

int ops_bad_reply(fuse_req_t req, const char *what)
{
	(void)req;
	pfs_warn("malformed %s reply from the server", what);
	return -EIO;
}

int ops_name_err(fuse_req_t req, int rc)
{
	if (rc == -ESTALE && estale_again(&CL(req)->estale, fuse_req_ctx(req)->pid))
		return -ENOENT;
	return rc;
}

/* The entry parameters of pe for the kernel, and its inode (one lookup
 * added), or NULL on ENOMEM. dir: the directory pe was found in under
 * name by a request sent at push number seq (NULL: none). */
struct inode *ops_entry_param(struct client *c, struct inode *dir, const char *name,
			      uint64_t seq, const struct pfs_entry *pe,
			      struct fuse_entry_param *e, bool *made)
{
	struct inode *ip = inode_ref(c->it, pe, made, seq);
	if (!ip)
		return NULL;
	if (dir)
		inode_set_parent(c->it, ip, dir, seq, name);
	memset(e, 0, sizeof(*e));
	e->ino = ip->nodeid;
	struct pfs_attr a = pe->attr;
	inode_overlay(ip, &a); /* what a delegation answered (deleg_i.h) */
	attr_to_stat(&a, &e->attr);
	e->attr_timeout = c->attr_timeout;
	e->entry_timeout = c->entry_timeout;
	return ip;
}

/* Replies with entry e of ip (under dir/name, which may be NULL) for a
 * request sent at push number seq: with timeout 0 if a push about the
 * directory or the object was applied since (see gate_i.h). */
void ops_reply_entry(fuse_req_t req, struct inode *dir, const char *name,
		     struct inode *ip, struct fuse_entry_param *e, uint64_t seq)
{
	struct client *c = CL(req);

	if (dir && name)
		inode_note_name(dir, name);
	gate_enter(c->gate);
	if (gate_pushed_since(c->gate, seq, dir ? &dir->fh : NULL) ||
	    (ip && gate_pushed_since(c->gate, seq, &ip->fh))) {
		e->entry_timeout = 0;
		e->attr_timeout = 0;
	}
	/* The VFS's retry of an open answered ESTALE sends its OPEN as soon
	 * as it has this reply, maybe to another thread of ours: noted
	 * before replying (req and maybe ip are gone once replied). If the
	 * kernel drops the reply, the note is never used by an open. */
	if (ip)
		estale_looked(&c->estale, fuse_req_ctx(req)->pid, e->ino);
	int r = fuse_reply_entry(req, e);
	gate_leave(c->gate);
	/* If the kernel dropped the reply (interrupted), it took no lookup. */
	if (r != 0 && ip)
		inode_forget(c->it, ip, 1);
}

void ops_dir_busy(struct client *c, const struct inode *dir, int delta)
{
	pushq_busy(transport_pushq(c->tr), pushq_lock_key(&dir->fh), delta);
}

void ops_name_busy(struct client *c, const struct inode *dir, const char *name, int delta)
{
	pushq_busy_name(transport_pushq(c->tr),
			pushq_name_key(dir->hn.hash, name_hash(name, strlen(name))), delta);
}

struct ops_own ops_own_change(struct client *c, struct inode *ip, bool ns)
{
	struct ops_own o = { 0 };
	o.any = inode_own_snap(c->it, &o.ns);
	o.seq = gate_seq(c->gate);
	o.ns_change = ns;
	o.at = inode_own_touch(c->it, ip, ns);
	return o;
}

void ops_own_done(struct client *c, struct ops_own *o)
{
	o->ns_trust = o->ns;
	if (!o->ns_change)
		return;
	/* Our own start and end moved the count (2), nothing else of ours
	 * did: the attributes of the reply are as current as the count.
	 * Otherwise another unlink or rename of ours overlapped it (o->ns
	 * is past, and is never trusted at again). */
	uint64_t now = inode_own_ns_end(c->it);
	if (now == o->ns + 2)
		o->ns_trust = now;
}

/* dir's attributes right after our namespace change in it (the reply's
 * PFS_CAP_DIR_ATTR part): the kernel drops its copy after every create or
 * unlink, and asks again before the next lookup there. They are current,
 * so GETATTR may answer them locally, if nothing else of ours moved dir
 * since the change announced it (trust_i.h) and no push about dir came
 * since (the caller of inode_attr_trusted checks that against o->seq).
 * The kernel holds dir's lock across every change in it and across its
 * own setattr, unlink or move to another parent, but not across its
 * rename within its parent, which we do not announce as a change of dir
 * (FUSE names only the parent): that one moves the namespace count, at
 * its start and at its end, so attributes taken while it ran are not
 * used once it ended. */
void ops_own_dir_attr(struct client *c, struct inode *dir, const struct pfs_attr *a,
		      const struct ops_own *o, uint64_t at)
{
	inode_own_end(c->it, dir, a, o->seq, at, o->ns_trust);
}

/* dir's listing after our own create of name there (e: the new entry, or
 * NULL if the create failed): the entry is added to it, so that the next
 * lookups there (a miss before the next create, mostly) are still
 * answered locally; otherwise it goes, with a quiet period (see
 * listing_stale). Without a listing, none is held off: in a directory
 * too large to be listed at its first lookup, the lookups of the names
 * this client creates one after another get it listed after a few
 * (listing_fetch_begin), and answered here from then on. Called before
 * the reply to the kernel, which holds dir's lock till then. */
void ops_own_listing(struct inode *dir, const char *name, const struct pfs_entry *e)
{
	int r = e ? listing_add(dir, name, e) : 0;

	if (!e || (r < 0 && r != -ENOENT))
		listing_touch(dir);
}

/* Decodes an entry reply, with or without the directory's attributes
 * (*have_dir says which); *mkflags: PFS_MK_* of a mkdir_rep, else 0. */
int ops_dec_entry(const struct rpc_reply *rep, struct pfs_entry_rep *er, struct pfs_attr *dir,
		  bool *have_dir, uint32_t *mkflags)
{
	struct pfs_entry_dir_rep edr;
	struct pfs_mkdir_rep mr;

	*mkflags = 0;
	if (pfs_dec_mkdir_rep(rep->buf, rep->len, &mr) == 0) {
		er->e = mr.e;
		*dir = mr.dir;
		*have_dir = true;
		*mkflags = mr.flags;
		return 0;
	}
	*have_dir = pfs_dec_entry_dir_rep(rep->buf, rep->len, &edr) == 0;
	if (*have_dir) {
		er->e = edr.e;
		*dir = edr.dir;
		return 0;
	}
	return pfs_dec_entry_rep(rep->buf, rep->len, er);
}

void ops_listed_absent(struct client *c, struct inode *ip, uint32_t lflags, uint64_t any)
{
	uint8_t nox = ((lflags & PFS_LD_NO_ACL_ACCESS) ? NOX_ACL_ACCESS : 0) |
		      ((lflags & PFS_LD_NO_ACL_DEFAULT) ? NOX_ACL_DEFAULT : 0) |
		      ((lflags & PFS_LD_NO_SELINUX) ? NOX_SELINUX : 0);
	bool caps = (lflags & PFS_LD_NO_CAPS) != 0;

	if (nox || caps)
		inode_note_absent(c->it, ip, nox, caps, c->attr_timeout, any);
}

void ops_made_absent(struct client *c, struct inode *ip, uint32_t mkflags, uint64_t seq,
		     uint64_t any)
{
	uint32_t lflags = ((mkflags & PFS_MK_NO_CAPS) ? PFS_LD_NO_CAPS : 0) |
			  ((mkflags & PFS_MK_NO_ACL_ACCESS) ? PFS_LD_NO_ACL_ACCESS : 0) |
			  ((mkflags & PFS_MK_NO_ACL_DEFAULT) ? PFS_LD_NO_ACL_DEFAULT : 0) |
			  ((mkflags & PFS_MK_NO_SELINUX) ? PFS_LD_NO_SELINUX : 0);

	if (!lflags)
		return;
	gate_enter(c->gate);
	if (!gate_pushed_since(c->gate, seq, &ip->fh))
		ops_listed_absent(c, ip, lflags, any);
	gate_leave(c->gate);
}

void ops_fetch_listing(fuse_req_t req, struct inode *dir, const struct pfs_creds *cr,
		       uint32_t max_inline)
{
	lsfetch_now(CL(req)->lf, dir, cr, max_inline);
}

/* Appends the items of a LISTDIR_PAGE reply (after its flags and
 * cookie) to *buf (*len bytes of *cap). Returns 0, -EFBIG (the listings'
 * memory bound) or -ENOMEM. */
static int append_page(uint8_t **buf, size_t *len, size_t *cap, const uint8_t *p, size_t n)
{
	if (*len + n > (size_t)LISTING_TOTAL_MAX)
		return -EFBIG;
	if (*len + n > *cap) {
		size_t ncap = *cap * 2 > *len + n ? *cap * 2 : *len + n;
		uint8_t *nb = realloc(*buf, ncap);
		if (!nb)
			return -ENOMEM;
		*buf = nb;
		*cap = ncap;
	}
	memcpy(*buf + *len, p, n);
	*len += n;
	return 0;
}

void ops_fetch_listing_pages(fuse_req_t req, struct inode *dir, const struct pfs_creds *cr)
{
	struct client *c = CL(req);
	struct listing_info li;
	size_t len, cap = PFS_MAX_IO;
	uint64_t cookie = 0;
	int rc = -EFBIG; /* more pages than LIST_PAGES_MAX */

	li.any = inode_own_snap(c->it, &li.own_ns);
	li.ns = listing_gen(dir);
	li.seq = gate_seq(c->gate);
	li.uid = cr->uid;
	li.gid = cr->gid;
	li.cookies = transport_list_cookies(c->tr);
	/* The listing's header: its flags, and where the dots are, from the
	 * page that read them (wire_list.h); then every page's items. */
	len = PFS_LS_HDR_SIZE(li.cookies);
	uint8_t *buf = malloc(cap);
	if (!buf)
		return;
	memset(buf, 0, len);
	for (unsigned page = 0; page < LIST_PAGES_MAX; page++) {
		struct pfs_listdir_page_req m = { .cr = *cr, .fh = dir->fh, .max_inline = 0,
						  .max_bytes = PFS_MAX_IO, .cookie = cookie };
		struct rpc_reply rep = { 0 };
		struct pfs_rd rd;
		uint32_t flags = 0;
		uint64_t next = 0;
		rc = rpc_msg(c->rpc, PFS_OP_LISTDIR_PAGE, listdir_page_req, &m, &rep);
		if (rc < 0)
			break;
		pfs_rd_init(&rd, rep.buf, rep.len);
		rc = 0;
		if (!pfs_get_U32(&rd, &flags) || !pfs_get_U64(&rd, &next))
			rc = -EBADMSG;
		for (int k = 0; rc == 0 && li.cookies && k < 2; k++) {
			uint64_t at, own;
			if (!pfs_get_U64(&rd, &at) || !pfs_get_U64(&rd, &own))
				rc = -EBADMSG;
			else if (own) { /* this page read that dot */
				pfs_store_le64(buf + 4 + 16 * k, at);
				pfs_store_le64(buf + 4 + 16 * k + 8, own);
			}
		}
		if (rc == 0)
			rc = append_page(&buf, &len, &cap, rd.p, rd.left);
		rpc_reply_free(&rep);
		if (rc < 0 || (flags & PFS_LS_COMPLETE))
			break;
		rc = -ERANGE; /* incomplete: a name it cannot carry */
		if (!(flags & PFS_LS_MORE) || next == 0)
			break;
		/* A name made, removed or renamed in dir since the first page
		 * was asked for: the pages may list it twice, or miss it. */
		gate_enter(c->gate);
		bool stale = gate_pushed_since(c->gate, li.seq, &dir->fh);
		gate_leave(c->gate);
		if (stale) {
			rc = -ESTALE;
			break;
		}
		cookie = next;
		rc = -EFBIG;
	}
	if (rc == 0 && li.cookies != transport_list_cookies(c->tr))
		rc = -ESTALE; /* a reconnect to a server of the other format */
	if (rc == 0) {
		buf[0] = PFS_LS_COMPLETE;
		buf[1] = buf[2] = buf[3] = 0;
		rc = listing_set(c->it, dir, buf, len, &li); /* takes buf */
		buf = NULL;
		if (rc == 0)
			inode_note_reader(dir, cr->uid, cr->gid);
	}
	free(buf);
	if (rc == -ENOSYS) {
		pfs_info("server has no LISTDIR_PAGE: large directories looked up name by name");
		cache_set_nosys(c->cache, PFS_OP_LISTDIR_PAGE);
	} else if (rc == -ESTALE) {
		listing_stale(dir); /* a quiet period, then again */
	} else if (rc < 0) {
		if (rc == -EBADMSG)
			pfs_warn("malformed LISTDIR_PAGE reply from the server");
		listing_drop(dir); /* not again */
	}
}

bool ops_current_attr(struct client *c, struct inode *ip, struct pfs_attr *a, uint64_t *seq)
{
	uint64_t aseq;

	if (!inode_attr_trusted(c->it, ip, a, &aseq))
		return false;
	gate_enter(c->gate);
	bool pushed = gate_pushed_since(c->gate, aseq, &ip->fh);
	gate_leave(c->gate);
	if (seq)
		*seq = aseq;
	return !pushed;
}

/* Close-to-open without a round trip. A read-only open is answered
 * locally when the file's attributes are known current (see
 * inode_attr_trusted: connected, no push about it since they came, no
 * own change) and no push about it is waiting to reach the kernel, for
 * a caller the server let read it (inode_is_reader). That is as good as
 * asking: the daemon holds the reply to every change until each client
 * that caches the object acknowledged receiving its invalidation
 * (PUSH_ACK, see wire.h), so the push of a change whose close (or write,
 * or setattr) returned on another host was received before this open,
 * and its number sends this open to the daemon (keep_cache off). The fid stays
 * unknown to the daemon until a request carries it (ofile_fid). Sets
 * fi->keep_cache (files) and returns true when answered. Directories
 * (dir): the same, for OPENDIR; READDIR opens the directory on the
 * daemon only when the kernel's cached listing is gone. */
bool ops_open_locally(fuse_req_t req, struct inode *ip, struct fuse_file_info *fi, bool dir)
{
	struct client *c = CL(req);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct pfs_attr a;
	uint64_t aseq;
	bool ok, attrs_stale;

	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & (O_TRUNC | O_CREAT)) ||
	    !transport_push_acked(c->tr) || !inode_is_reader(ip, ctx->uid, ctx->gid) ||
	    !inode_attr_trusted(c->it, ip, &a, &aseq) || !transport_quiet(c->tr))
		return false;
	/* A file without names (its attributes came after another host
	 * removed it) was reached through a name the kernel has not dropped
	 * yet: only the daemon's OPEN tells (see ops_open's ESTALE). */
	if (a.nlink == 0 && !dir)
		return false;
	gate_enter(c->gate);
	ok = !gate_pushed_since(c->gate, aseq, &ip->fh) &&
	     !gate_pushed_since(c->gate, gate_applied(c->gate), &ip->fh);
	if (ok && !dir)
		fi->keep_cache = inode_open_version(ip, &a, &attrs_stale, aseq);
	gate_leave(c->gate);
	return ok;
}

int ops_open_remote(fuse_req_t req, struct ofile *of, struct fuse_file_info *fi, uint16_t op,
		    struct ops_opened *o)
{
	struct client *c = CL(req);
	struct pfs_open_req m;
	struct pfs_attr_rep ar;
	struct rpc_reply rep = { 0 };

	fill_creds(req, &m.cr, true);
	m.fh = of->ip->fh;
	m.fid = ofile_fid(of);
	m.flags = (uint32_t)fi->flags;
	o->any = inode_own_snap(c->it, &o->ns);
	o->seq = gate_seq(c->gate);
	o->applied = gate_applied(c->gate);
	/* After what this client answered of the object only (its create,
	 * its unlink; a directory's items): the daemon opens it by handle. */
	int rc = rpc_msg_in(c->rpc, of->ip, op, open_req, &m, &rep);
	if (rc == 0 && pfs_dec_attr_rep(rep.buf, rep.len, &ar) < 0)
		rc = ops_bad_reply(req, pfs_op_name(op));
	rpc_reply_free(&rep);
	if (rc < 0) {
		ofile_free(of);
		fuse_reply_err(req, -rc);
		return rc;
	}
	o->cr = m.cr;
	o->attr = ar.attr;
	return 0;
}
