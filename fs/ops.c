/* ops.c: the FUSE low-level operations of podfs.
 *
 * Each handler decodes the FUSE arguments, builds the request, calls
 * rpc.c and replies: exactly one fuse_reply_* on every path. Handlers run
 * on FUSE worker threads and may block in rpc_call.
 */
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "cache_i.h"
#include "gate_i.h"
#include "client_i.h"
#include "creds_i.h"
#include "inode_i.h"
#include "listing_i.h"
#include "locks_i.h"
#include "pcache_i.h"
#include "podfs/clock.h"
#include "podfs/codec.h"
#include "podfs/log.h"
#include "rpc_i.h"
#include "transport_i.h"
#include "trust_i.h"
#include "wb_i.h"

/* Bytes of READDIR reply asked for at once; the kernel takes them a page
 * at a time from the open directory's buffer. */
#define READDIR_BYTES (128u * 1024)

/* State of one open file or directory (fi->fh). */
struct ofile {
	struct client *c;
	struct ofile *prev, *next; /* the client's list of open files */
	uint64_t fid;     /* client-chosen id the daemon knows the open by */
	/* The daemon may know fid: the open went to it, or a request
	 * carried fid (the daemon opens the file again by handle under an
	 * unknown fid), so RELEASE must be sent. See fid_use. */
	atomic_bool remote;
	bool local;       /* opened locally (counted in lazy_opens while !remote) */
	uint32_t flags;   /* open flags, for a reopen by handle */
	struct inode *ip; /* pinned by the kernel while the file is open */
	struct pfs_creds cr; /* the opener's, if opened locally (attach_lazy_opens) */

	/* Directories: the last READDIR reply and the position in it. */
	pthread_mutex_t lock;
	struct rpc_reply dir;
	struct pfs_rd rd;
	uint64_t rd_off;  /* cookie of the position rd is at */
	bool rd_valid;
	bool rd_eof;
	bool rd_plus;
	bool rd_synth;    /* the chunk is the whole listing (readdir_listed) */
	uint64_t rd_seq;  /* push number when the chunk was requested */
	uint64_t rd_any, rd_ns; /* inode_own_snap then */
};

static struct client *CL(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static struct inode *IP(fuse_req_t req, fuse_ino_t ino)
{
	return inode_get(CL(req)->it, ino);
}

static struct ofile *OF(const struct fuse_file_info *fi)
{
	return (struct ofile *)(uintptr_t)fi->fh;
}

static void fill_creds(fuse_req_t req, struct pfs_creds *cr, bool groups)
{
	creds_fill(CL(req)->cc, req, cr, groups);
}

void client_tune_bdi(struct client *c);

/* Raises the mount's readahead once INIT is done (see main.c). */
static void maybe_tune(struct client *c)
{
	if (!atomic_load_explicit(&c->bdi_tuned, memory_order_relaxed) &&
	    !atomic_exchange(&c->bdi_tuned, true))
		client_tune_bdi(c);
}

static int set_name(struct pfs_name *n, const char *s)
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

static int set_xname(struct pfs_xname *n, const char *s)
{
	size_t len = strlen(s);
	if (len == 0 || len > PFS_XATTR_NAME_MAX)
		return -ERANGE;
	n->len = (uint16_t)len;
	memcpy(n->s, s, len + 1);
	return 0;
}

static int bad_reply(fuse_req_t req, const char *what)
{
	(void)req;
	pfs_warn("malformed %s reply from the server", what);
	return -EIO;
}

static struct ofile *ofile_new(struct client *c, struct inode *ip, int flags)
{
	struct ofile *of = calloc(1, sizeof(*of));
	if (!of)
		return NULL;
	of->fid = atomic_fetch_add(&c->next_fid, 1);
	/* A reopen by handle must not create or truncate again. */
	of->flags = (uint32_t)flags & ~(uint32_t)(O_CREAT | O_EXCL | O_TRUNC | O_NOCTTY);
	of->ip = ip;
	of->c = c;
	/* Files: lock also orders attach_lazy_opens before the RELEASE. */
	pthread_mutex_init(&of->lock, NULL);
	pthread_mutex_lock(&c->of_lock);
	of->next = c->open_files;
	if (of->next)
		of->next->prev = of;
	c->open_files = of;
	pthread_mutex_unlock(&c->of_lock);
	return of;
}

static void ofile_free(struct ofile *of)
{
	struct client *c = of->c;
	pthread_mutex_lock(&c->of_lock);
	if (of->local && !atomic_load(&of->remote))
		atomic_fetch_sub(&c->lazy_opens, 1);
	if (of->prev)
		of->prev->next = of->next;
	else
		c->open_files = of->next;
	if (of->next)
		of->next->prev = of->prev;
	pthread_mutex_unlock(&c->of_lock);
	rpc_reply_free(&of->dir);
	pthread_mutex_destroy(&of->lock);
	free(of);
}

/* RELEASE or RELEASEDIR of fid on the server; errors are only logged. */
static void release_fid(fuse_req_t req, const struct pfs_fh *fh, uint64_t fid, uint16_t op)
{
	struct pfs_release_req m;
	struct rpc_reply rep = { 0 };
	fill_creds(req, &m.cr, false);
	m.fh = *fh;
	m.fid = fid;
	int rc = rpc_msg(CL(req)->rpc, op, release_req, &m, &rep);
	if (rc < 0)
		pfs_debug("%s of fid %llu: %s", pfs_op_name(op), (unsigned long long)fid,
			  strerror(-rc));
	rpc_reply_free(&rep);
}

static void release_remote(fuse_req_t req, struct ofile *of, uint16_t op)
{
	pthread_mutex_lock(&of->lock);
	bool remote = atomic_load(&of->remote);
	pthread_mutex_unlock(&of->lock);
	if (remote)
		release_fid(req, &of->ip->fh, of->fid, op);
}

/* A call made while applying a push delays its acknowledgement, which the
 * daemon waits for (2 s at most, then it drops the connection): it gives
 * up waiting after this long. The request still reaches the daemon. */
#define PUSH_CALL_MS 500

/* A file opened without the daemon (open_locally) stays unknown to it
 * until a request carries its fid; the daemon then opens it by handle.
 * Once the file's last name is gone that fails with ESTALE, where a local
 * filesystem keeps an open file readable to its close: `open; unlink;
 * read`, or a running program whose mapped library an upgrade replaced.
 * So such an open is made known to the daemon (an OPEN under its fid,
 * with the opener's ids) whenever the file may be losing a name:
 *   - before this client removes or replaces a name in a directory, for
 *     files that may have their last name there (inode_may_lose_name_in);
 *   - when a push says another client changed the file's attributes (an
 *     unlink changes its link count), before the push is acknowledged:
 *     the daemon keeps a deleted file openable by handle until then
 *     (daemon/handles.c handles_orphan).
 * At most one OPEN per open file, and none while no file is open locally.
 * The open-file list stays locked meanwhile, so that none is released
 * under us, and each one's lock keeps its RELEASE behind its OPEN.
 * timeout_ms: 0 waits like any call (a hard mount waits for the server). */
static void attach_lazy_opens(struct client *c, struct inode *dir, const struct pfs_fh *fh,
			      int timeout_ms)
{
	if (atomic_load(&c->lazy_opens) == 0)
		return;
	pthread_mutex_lock(&c->of_lock);
	for (struct ofile *of = c->open_files; of; of = of->next) {
		if (!of->local || atomic_load(&of->remote))
			continue;
		if (fh ? !pfs_fh_equal(&of->ip->fh, fh) : !inode_may_lose_name_in(of->ip, dir))
			continue;
		pthread_mutex_lock(&of->lock);
		if (!atomic_exchange(&of->remote, true)) {
			atomic_fetch_sub(&c->lazy_opens, 1);
			struct pfs_open_req m = { .cr = of->cr, .fh = of->ip->fh, .fid = of->fid,
						  .flags = of->flags };
			uint8_t b[RPC_SMALL];
			struct pfs_wr w;
			struct rpc_reply rep = { 0 };
			int rc = -EINVAL;
			pfs_wr_init(&w, b, sizeof(b));
			if (pfs_enc_open_req(&w, &m) == 0)
				rc = timeout_ms ? rpc_call_timeout(c->rpc, PFS_OP_OPEN, b, w.len,
								   &rep, timeout_ms)
						: rpc_call(c->rpc, PFS_OP_OPEN, b, w.len, &rep);
			rpc_reply_free(&rep);
			if (rc < 0)
				pfs_debug("OPEN of a locally opened file losing a name: %s",
					  strerror(-rc));
		}
		pthread_mutex_unlock(&of->lock);
	}
	pthread_mutex_unlock(&c->of_lock);
}

/* The fid of of, for a request about to carry it to the daemon. */
static uint64_t fid_use(struct ofile *of)
{
	if (!atomic_load_explicit(&of->remote, memory_order_relaxed) &&
	    !atomic_exchange(&of->remote, true) && of->local)
		atomic_fetch_sub(&of->c->lazy_opens, 1);
	return of->fid;
}

/* Fills e for an entry the kernel will hold one more lookup of. */
/* The entry parameters of pe for the kernel, and its inode (one lookup
 * added), or NULL on ENOMEM. dir: the directory pe was found in under
 * name by a request sent at push number seq (NULL: none). */
static struct inode *entry_param(struct client *c, struct inode *dir, const char *name,
				 uint64_t seq, const struct pfs_entry *pe,
				 struct fuse_entry_param *e)
{
	struct inode *ip = inode_ref(c->it, pe);
	if (!ip)
		return NULL;
	if (dir)
		inode_set_parent(c->it, ip, dir, seq, name);
	memset(e, 0, sizeof(*e));
	e->ino = ip->nodeid;
	attr_to_stat(&pe->attr, &e->attr);
	e->attr_timeout = c->attr_timeout;
	e->entry_timeout = c->entry_timeout;
	return ip;
}

/* ESTALE from OPEN, and the VFS's retry. The VFS retries an open that
 * failed with ESTALE once, after looking the name up afresh
 * (LOOKUP_REVAL); a second ESTALE would reach the application. The
 * retry's open is recognised by its thread and by the inode its fresh
 * lookup returned: it is taken even if that file lost its last name
 * too (the removal raced with this very open, and the file it found is
 * a fair answer). Slots by thread id; a collision costs a retry. */
#define ESTALE_RETRY_NS (1000LL * 1000 * 1000)

/* pfs_open answers ESTALE to tid. */
static void estale_arm(struct client *c, pid_t tid)
{
	pthread_mutex_lock(&c->estale_lock);
	c->estale[(unsigned)tid % ESTALE_SLOTS] =
		(struct estale_slot){ .tid = tid, .ino = 0, .when = pfs_mono_ns() };
	pthread_mutex_unlock(&c->estale_lock);
}

/* A lookup by tid returned ino (the retry's fresh lookup, if armed). */
static void estale_looked(struct client *c, pid_t tid, fuse_ino_t ino)
{
	struct estale_slot *e = &c->estale[(unsigned)tid % ESTALE_SLOTS];
	pthread_mutex_lock(&c->estale_lock);
	if (e->tid == tid && pfs_mono_ns() - e->when < ESTALE_RETRY_NS)
		e->ino = ino;
	pthread_mutex_unlock(&c->estale_lock);
}

/* Is this open of ino by tid the VFS's retry? Consumes the slot. */
static bool estale_retry(struct client *c, pid_t tid, fuse_ino_t ino)
{
	struct estale_slot *e = &c->estale[(unsigned)tid % ESTALE_SLOTS];
	pthread_mutex_lock(&c->estale_lock);
	bool yes = e->tid == tid && e->ino == ino && pfs_mono_ns() - e->when < ESTALE_RETRY_NS;
	if (e->tid == tid)
		e->tid = 0;
	pthread_mutex_unlock(&c->estale_lock);
	return yes;
}

/* Replies with entry e of ip (under dir/name, which may be NULL) for a
 * request sent at push number seq: with timeout 0 if a push about the
 * directory or the object was applied since (see gate_i.h). */
static void reply_entry_gated(fuse_req_t req, struct inode *dir, const char *name,
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
	/* req is gone once replied, and ip may be (a FORGET on another
	 * thread): take what is needed before. */
	pid_t tid = fuse_req_ctx(req)->pid;
	fuse_ino_t nodeid = ip ? e->ino : 0;
	int r = fuse_reply_entry(req, e);
	gate_leave(c->gate);
	if (r == 0 && nodeid)
		estale_looked(c, tid, nodeid);
	/* If the kernel dropped the reply (interrupted), it took no lookup. */
	if (r != 0 && ip)
		inode_forget(c->it, ip, 1);
}

/* The count snapshot for a namespace change of ours: take it before
 * inode_own_touch(..., true); own_dir_attr then trusts the directory's
 * attributes from the reply if that touch was our only change since. */
struct own_snap {
	uint64_t any, ns, seq;
	bool renaming; /* a rename of ours was under way */
};

static struct own_snap own_snap(struct client *c)
{
	struct own_snap o;
	o.any = inode_own_snap(c->it, &o.ns);
	o.renaming = inode_renames_busy(c->it);
	o.seq = gate_seq(c->gate);
	return o;
}

/* dir's attributes right after our namespace change in it (the reply's
 * PFS_CAP_DIR_ATTR part): the kernel drops its copy after every create or
 * unlink, and asks again before the next lookup there. They are current,
 * so GETATTR may answer them locally, if no other change of ours
 * overlapped and no push about dir came since (the caller of
 * inode_attr_trusted checks that against o->seq). The kernel holds dir's
 * lock across every change in it and across its own setattr, unlink or
 * move to another parent, but not across its rename within its parent:
 * so no rename of ours may have been under way when the change was sent,
 * and none (nor any other change of ours) may have started since. */
static void own_dir_attr(struct client *c, struct inode *dir, const struct pfs_attr *a,
			 const struct own_snap *o)
{
	inode_own_change(dir, a);
	if (!o->renaming)
		inode_trust_attr(c->it, dir, o->seq, o->any + 1, o->ns + 1);
}

/* dir's listing after our own create of name there (e: the new entry, or
 * NULL if the create failed): the entry is added to it, so that the next
 * lookups there (a miss before the next create, mostly) are still
 * answered locally; otherwise it goes, with a quiet period (see
 * listing_stale). Called before the reply to the kernel, which
 * holds dir's lock till then. */
static void own_listing(struct inode *dir, const char *name, const struct pfs_entry *e)
{
	if (!e || listing_add(dir, name, e) < 0)
		listing_touch(dir);
}

/* Decodes an entry reply, with or without the directory's attributes
 * (*have_dir says which); *mkflags: PFS_MK_* of a mkdir_rep, else 0. */
static int dec_entry(const struct rpc_reply *rep, struct pfs_entry_rep *er, struct pfs_attr *dir,
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

/* The directory ip we just made was empty once the daemon pushes us every
 * entry made in it (PFS_MK_EMPTY): its listing is known, empty, as of the
 * snapshot o taken before the MKDIR was sent. Lookups in it are then
 * answered locally (misses, and our own creates, which join the listing)
 * like in any listed directory, unless a push about it came since. */
static void new_dir_listing(fuse_req_t req, struct inode *ip, const struct own_snap *o)
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
 * its reply) sent after snapshot o for name under dir. */
static void finish_entry(fuse_req_t req, int rc, struct rpc_reply *rep, struct inode *dir,
			 const char *name, const struct own_snap *o)
{
	struct client *c = CL(req);
	struct pfs_entry_rep er;
	struct fuse_entry_param e;
	struct pfs_attr da;
	struct inode *ip;
	bool have_da = false;
	uint32_t mkflags = 0;
	uint64_t seq = o->seq;

	if (rc == 0 && dec_entry(rep, &er, &da, &have_da, &mkflags) < 0)
		rc = bad_reply(req, "entry");
	rpc_reply_free(rep);
	own_listing(dir, name, rc == 0 ? &er.e : NULL);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	if (have_da)
		own_dir_attr(c, dir, &da, o);
	if (!(ip = entry_param(c, dir, name, seq, &er.e, &e))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if ((mkflags & PFS_MK_EMPTY) && S_ISDIR(er.e.attr.mode))
		new_dir_listing(req, ip, o);
	reply_entry_gated(req, dir, name, ip, &e, seq);
}

/* Replies to a request answered with attributes of ip. */
static void finish_attr(fuse_req_t req, struct inode *ip, int rc, struct rpc_reply *rep,
			bool own_change, uint64_t seq, uint64_t any, uint64_t ns)
{
	struct client *c = CL(req);
	struct pfs_attr_rep ar;
	struct stat st;

	if (rc == 0 && pfs_dec_attr_rep(rep->buf, rep->len, &ar) < 0)
		rc = bad_reply(req, "attr");
	rpc_reply_free(rep);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	if (own_change) {
		inode_own_change(ip, &ar.attr);
		/* The attributes right after our own change are current if no
		 * other change of ours overlapped it (any: the count with our
		 * own touch alone; a write still queued before it was waited
		 * for). The kernel holds a file's inode lock across a
		 * setattr, so a write, link, unlink or rename of the same file
		 * cannot overlap it; a directory's rename can (the VFS does
		 * not lock the directory moved), so directories are left to
		 * GETATTR. */
		if (S_ISREG(ar.attr.mode))
			inode_trust_attr(c->it, ip, seq, any, ns);
	} else {
		inode_set_attr(ip, &ar.attr);
		inode_trust_attr(c->it, ip, seq, any, ns);
	}
	attr_to_stat(&ar.attr, &st);
	gate_enter(c->gate);
	double t = gate_pushed_since(c->gate, seq, &ip->fh) ? 0 : c->attr_timeout;
	fuse_reply_attr(req, &st, t);
	gate_leave(c->gate);
}

/* ---- session ---- */

static void pfs_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	unsigned want = FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO | FUSE_CAP_DONT_MASK |
			FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS | FUSE_CAP_ATOMIC_O_TRUNC |
			FUSE_CAP_CACHE_SYMLINKS | FUSE_CAP_ASYNC_READ | FUSE_CAP_PARALLEL_DIROPS |
			FUSE_CAP_AUTO_INVAL_DATA;

	conn->want |= want & conn->capable;
	/* No writeback cache yet: sizes must stay coherent across hosts.
	 * No export support: nodeids are not persistent. */
	conn->want &= ~(unsigned)(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_EXPORT_SUPPORT);
	/* Over 128 KiB makes libfuse ask for max_pages: 1 MiB requests. */
	conn->max_write = PFS_MAX_IO;
	conn->max_readahead = PFS_MAX_IO;
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	conn->time_gran = 1;
}

static void pfs_destroy(void *userdata)
{
	(void)userdata;
}

/* ---- names ---- */

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
		return bad_reply(req, "LOOKUP_DATA");
	}
	er->e = r.e;
	data->p = NULL;
	data->len = 0;
	if ((r.flags & PFS_LD_DATA) && S_ISREG(r.e.attr.mode) && r.data.len == r.e.attr.size)
		*data = r.data;
	*readable = data->p || ((r.flags & PFS_LD_READABLE) && S_ISREG(r.e.attr.mode));
	return 0;
}

/* Directories up to this size (st_size; ext4: 4 KiB blocks of names)
 * are listed whole at their first lookup. */
#define LIST_DIR_MAX_SIZE (64u * 1024)

/* Fetches dir's listing (LISTDIR), with the content of files up to
 * max_inline bytes, and keeps it if complete. */
static void fetch_listing(fuse_req_t req, struct inode *dir, const struct pfs_creds *cr,
			  uint32_t max_inline)
{
	struct client *c = CL(req);
	struct pfs_listdir_req m;
	struct rpc_reply rep = { 0 };
	struct listing_info li;

	m.cr = *cr;
	m.fh = dir->fh;
	m.max_inline = max_inline;
	m.max_bytes = PFS_MAX_IO;
	li.any = inode_own_snap(c->it, &li.own_ns);
	li.ns = listing_gen(dir);
	li.seq = gate_seq(c->gate);
	li.uid = cr->uid;
	li.gid = cr->gid;
	int rc = rpc_msg(c->rpc, PFS_OP_LISTDIR, listdir_req, &m, &rep);
	if (rc == -ENOSYS) {
		pfs_info("server has no LISTDIR: lookups name by name");
		cache_set_nosys(c->cache, PFS_OP_LISTDIR);
		return;
	}
	if (rc < 0 || rep.len < 4 || !(rep.buf[0] & PFS_LS_COMPLETE)) {
		rpc_reply_free(&rep);
		listing_drop(dir); /* not again */
		return;
	}
	rc = listing_set(c->it, dir, rep.buf, rep.len, &li);
	if (rc == 0) /* the daemon opened and read it with the caller's ids */
		inode_note_reader(dir, cr->uid, cr->gid);
	if (rc == -EBADMSG)
		pfs_warn("malformed LISTDIR reply from the server");
	if (rc < 0 && rc != -ESTALE)
		listing_drop(dir);
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
	if (r == LS_NONE && listing_may_fetch(dir, LIST_DIR_MAX_SIZE)) {
		fetch_listing(req, dir, cr, c->max_inline);
		r = listing_find(dir, name, &pe, &data, &dlen, &lflags, &li);
	}
	if (r == LS_NONE || !transport_quiet(c->tr)) {
		free(data);
		return false;
	}
	/* Changed by us since the listing was asked for (never pushed). */
	bool own_stale = r == LS_PRESENT && inode_listed_stale(c->it, &pe.fh, li.any);
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
	if (own_stale || (lflags & INODE_LS_STALE))
		entry_stale = true;
	gate_leave(c->gate);
	if (stale)
		listing_stale(dir);
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
		reply_entry_gated(req, dir, name, NULL, &e, li.seq);
		return true;
	}
	struct inode *ip = entry_param(c, dir, name, li.seq, &pe, &e);
	if (!ip) {
		free(data);
		return false;
	}
	inode_trust_attr(c->it, ip, li.seq, li.any, li.own_ns);
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
	reply_entry_gated(req, dir, name, ip, &e, li.seq);
	return true;
}

static void pfs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
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

	maybe_tune(c);
	fill_creds(req, &m.cr, true);
	m.parent = dir->fh;
	uint64_t ns, any = inode_own_snap(c->it, &ns);
	uint64_t seq = gate_seq(c->gate);
	if ((rc = set_name(&m.name, name)) < 0)
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
			rc = bad_reply(req, "LOOKUP");
		}
	}
	if (rc == -ENOENT && c->negative_timeout > 0) {
		/* A negative entry: the kernel remembers the miss, until the
		 * timeout or a push for this directory. */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = c->negative_timeout;
		reply_entry_gated(req, dir, name, NULL, &e, seq);
		return;
	}
	if (rc < 0)
		goto out_err;
	ip = entry_param(c, dir, name, seq, &er.e, &e);
	if (ip)
		inode_trust_attr(c->it, ip, seq, any, ns);
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
	reply_entry_gated(req, dir, name, ip, &e, seq);
	return;
out_err:
	rpc_reply_free(&rep);
	fuse_reply_err(req, -rc);
}

static void pfs_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	inode_forget(CL(req)->it, IP(req, ino), nlookup);
	fuse_reply_none(req);
}

static void pfs_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct client *c = CL(req);
	for (size_t i = 0; i < count; i++)
		inode_forget(c->it, inode_get(c->it, forgets[i].ino), forgets[i].nlookup);
	fuse_reply_none(req);
}

static void pfs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct client *c = CL(req);
	struct inode *ip = IP(req, ino);
	struct pfs_getattr_req m;
	struct rpc_reply rep = { 0 };
	(void)fi;

	maybe_tune(c);
	/* The kernel asks again after every read (atime) and after its
	 * attribute timeout: answer from attributes known to be current
	 * (see inode_attr_trusted), with no round trip, once every frame
	 * the server sent was handled (transport_quiet). */
	struct pfs_attr a;
	uint64_t aseq;
	if (inode_attr_trusted(c->it, ip, &a, &aseq) && transport_quiet(c->tr)) {
		gate_enter(c->gate);
		if (!gate_pushed_since(c->gate, aseq, &ip->fh)) {
			struct stat st;
			attr_to_stat(&a, &st);
			fuse_reply_attr(req, &st, c->attr_timeout);
			gate_leave(c->gate);
			return;
		}
		gate_leave(c->gate);
	}
	wb_wait(c->wb, ip); /* the size includes our pending writes */
	fill_creds(req, &m.cr, false);
	m.fh = ip->fh;
	uint64_t ns, any = inode_own_snap(c->it, &ns);
	uint64_t seq = gate_seq(c->gate);
	int rc = rpc_msg(c->rpc, PFS_OP_GETATTR, getattr_req, &m, &rep);
	finish_attr(req, ip, rc, &rep, false, seq, any, ns);
}

static void pfs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
			struct fuse_file_info *fi)
{
	struct client *c = CL(req);
	struct inode *ip = IP(req, ino);
	struct pfs_setattr_req m;
	struct rpc_reply rep = { 0 };

	/* Before the wait: a write queued after it moves the count again. */
	uint64_t ns, any = inode_own_snap(c->it, &ns);
	wb_wait(c->wb, ip); /* a truncate comes after our pending writes */
	inode_own_touch(c->it, ip, false);
	inode_drop_inline(ip); /* our own changes are never pushed back to us */
	memset(&m, 0, sizeof(m));
	fill_creds(req, &m.cr, true);
	m.fh = ip->fh;
	m.fid = fi && fi->fh ? fid_use(OF(fi)) : 0;
	if (to_set & FUSE_SET_ATTR_MODE) {
		m.valid |= PFS_SET_MODE;
		m.mode = attr->st_mode;
	}
	if (to_set & FUSE_SET_ATTR_UID) {
		m.valid |= PFS_SET_UID;
		m.uid = attr->st_uid;
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		m.valid |= PFS_SET_GID;
		m.gid = attr->st_gid;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		m.valid |= PFS_SET_SIZE;
		m.size = (uint64_t)attr->st_size;
	}
	if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
		m.valid |= PFS_SET_ATIME_NOW;
	} else if (to_set & FUSE_SET_ATTR_ATIME) {
		m.valid |= PFS_SET_ATIME;
		m.atime_s = attr->st_atim.tv_sec;
		m.atime_ns = (uint32_t)attr->st_atim.tv_nsec;
	}
	if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
		m.valid |= PFS_SET_MTIME_NOW;
	} else if (to_set & FUSE_SET_ATTR_MTIME) {
		m.valid |= PFS_SET_MTIME;
		m.mtime_s = attr->st_mtim.tv_sec;
		m.mtime_ns = (uint32_t)attr->st_mtim.tv_nsec;
	}
	if (to_set & FUSE_SET_ATTR_CTIME)
		m.valid |= PFS_SET_CTIME;
	uint64_t seq = gate_seq(c->gate);
	int rc = rpc_msg(c->rpc, PFS_OP_SETATTR, setattr_req, &m, &rep);
	/* any + 1: our own touch is the only change of ours since. */
	finish_attr(req, ip, rc, &rep, true, seq, any + 1, ns);
}

static void pfs_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct client *c = CL(req);
	struct pfs_readlink_req m;
	struct pfs_readlink_rep r;
	struct rpc_reply rep = { 0 };

	fill_creds(req, &m.cr, false);
	m.fh = IP(req, ino)->fh;
	int rc = rpc_msg(c->rpc, PFS_OP_READLINK, readlink_req, &m, &rep);
	if (rc == 0 && pfs_dec_readlink_rep(rep.buf, rep.len, &r) < 0)
		rc = bad_reply(req, "READLINK");
	rpc_reply_free(&rep);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_readlink(req, r.target.s);
}

static void pfs_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
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
	struct own_snap o = own_snap(c);
	inode_own_touch(c->it, IP(req, parent), true);
	if ((rc = set_name(&m.name, name)) == 0)
		rc = rpc_msg(c->rpc, PFS_OP_MKNOD, mknod_req, &m, &rep);
	finish_entry(req, rc, &rep, IP(req, parent), name, &o);
}

static void pfs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct client *c = CL(req);
	struct pfs_mkdir_req m;
	struct rpc_reply rep = { 0 };
	int rc;

	fill_creds(req, &m.cr, true);
	m.parent = IP(req, parent)->fh;
	m.mode = mode;
	m.umask = fuse_req_ctx(req)->umask;
	struct own_snap o = own_snap(c);
	inode_own_touch(c->it, IP(req, parent), true);
	if ((rc = set_name(&m.name, name)) == 0)
		rc = rpc_msg(c->rpc, PFS_OP_MKDIR, mkdir_req, &m, &rep);
	finish_entry(req, rc, &rep, IP(req, parent), name, &o);
}

static void pfs_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	struct client *c = CL(req);
	struct pfs_symlink_req m;
	struct rpc_reply rep = { 0 };
	size_t tlen = strlen(link);
	int rc;

	struct own_snap o = own_snap(c);
	inode_own_touch(c->it, IP(req, parent), true);
	fill_creds(req, &m.cr, true);
	m.parent = IP(req, parent)->fh;
	if (tlen == 0) {
		rc = -ENOENT;
	} else if (tlen > PFS_PATH_MAX) {
		rc = -ENAMETOOLONG;
	} else {
		m.target.len = (uint16_t)tlen;
		memcpy(m.target.s, link, tlen + 1);
		if ((rc = set_name(&m.name, name)) == 0)
			rc = rpc_msg(c->rpc, PFS_OP_SYMLINK, symlink_req, &m, &rep);
	}
	finish_entry(req, rc, &rep, IP(req, parent), name, &o);
}

static void unlink_common(fuse_req_t req, fuse_ino_t parent, const char *name, uint16_t op)
{
	struct client *c = CL(req);
	struct pfs_unlink_req m;
	struct rpc_reply rep = { 0 };
	int rc;

	fill_creds(req, &m.cr, true);
	m.parent = IP(req, parent)->fh;
	if (op == PFS_OP_UNLINK)
		attach_lazy_opens(c, IP(req, parent), NULL, 0);
	struct own_snap o = own_snap(c);
	inode_own_touch(c->it, IP(req, parent), true);
	listing_touch(IP(req, parent));
	if ((rc = set_name(&m.name, name)) == 0)
		rc = rpc_msg(c->rpc, op, unlink_req, &m, &rep);
	if (rc == 0 && rep.len > 0) {
		struct pfs_dir_rep dr;
		if (pfs_dec_dir_rep(rep.buf, rep.len, &dr) < 0)
			rc = bad_reply(req, "UNLINK");
		else
			own_dir_attr(c, IP(req, parent), &dr.dir, &o);
	}
	rpc_reply_free(&rep);
	fuse_reply_err(req, -rc);
}

static void pfs_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	unlink_common(req, parent, name, PFS_OP_UNLINK);
}

static void pfs_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	unlink_common(req, parent, name, PFS_OP_RMDIR);
}

static void pfs_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
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
		attach_lazy_opens(c, IP(req, newparent), NULL, 0);
	inode_own_touch(c->it, IP(req, parent), true);
	inode_own_also(c->it, IP(req, newparent));
	inode_note_rename(c->it); /* a moved directory's ".." */
	listing_touch(IP(req, parent));
	listing_touch(IP(req, newparent));
	if ((rc = set_name(&m.name, name)) == 0 && (rc = set_name(&m.newname, newname)) == 0)
		rc = rpc_msg(c->rpc, PFS_OP_RENAME, rename_req, &m, &rep);
	inode_rename_done(c->it);
	rpc_reply_free(&rep);
	fuse_reply_err(req, -rc);
}

static void pfs_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct client *c = CL(req);
	struct pfs_link_req m;
	struct rpc_reply rep = { 0 };
	int rc;

	fill_creds(req, &m.cr, true);
	m.fh = IP(req, ino)->fh;
	m.newparent = IP(req, newparent)->fh;
	struct own_snap o = own_snap(c);
	inode_own_touch(c->it, IP(req, ino), true);
	inode_own_also(c->it, IP(req, newparent));
	if ((rc = set_name(&m.newname, newname)) == 0)
		rc = rpc_msg(c->rpc, PFS_OP_LINK, link_req, &m, &rep);
	finish_entry(req, rc, &rep, IP(req, newparent), newname, &o);
}

/* ---- files ---- */

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
 * unknown to the daemon until a request carries it (fid_use). Sets
 * fi->keep_cache (files) and returns true when answered. Directories
 * (dir): the same, for OPENDIR; READDIR opens the directory on the
 * daemon only when the kernel's cached listing is gone. */
static bool open_locally(fuse_req_t req, struct inode *ip, struct fuse_file_info *fi, bool dir)
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
	 * yet: only the daemon's OPEN tells (see pfs_open's ESTALE). */
	if (a.nlink == 0 && !dir)
		return false;
	gate_enter(c->gate);
	ok = !gate_pushed_since(c->gate, aseq, &ip->fh) &&
	     !gate_pushed_since(c->gate, gate_applied(c->gate), &ip->fh);
	if (ok && !dir)
		fi->keep_cache = inode_open_version(ip, &a, &attrs_stale);
	gate_leave(c->gate);
	return ok;
}

/* A read-only open of a file whose whole content is at hand (it came
 * with the lookup or the listing) and whose pages the kernel may keep
 * gives the kernel that content as pages before the open returns: the
 * reads that follow need no READ, and the next stat no GETATTR (the
 * kernel forgets a file's atime after every READ it sends). A push about
 * the file numbered after `since` (taken before the open was decided)
 * may have reached the kernel before the pages did: keep_cache=0 then
 * makes the kernel drop them as the open completes. */
static void open_store_inline(struct client *c, struct inode *ip, fuse_ino_t ino,
			      struct fuse_file_info *fi, uint64_t since)
{
	uint32_t len;
	uint8_t *data;

	if (!fi->keep_cache || (fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC) ||
	    !(data = inode_inline_copy(ip, &len)))
		return;
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(len);
	bv.buf[0].mem = data;
	int rc = len ? fuse_lowlevel_notify_store(c->se, ino, 0, &bv, 0) : -1;
	free(data);
	if (rc != 0)
		return;
	gate_enter(c->gate);
	if (gate_pushed_since(c->gate, since, &ip->fh))
		fi->keep_cache = 0;
	gate_leave(c->gate);
	if (fi->keep_cache)
		inode_drop_inline(ip); /* the kernel has it now */
}

static void pfs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct client *c = CL(req);
	struct inode *ip = IP(req, ino);
	struct pfs_open_req m;
	struct pfs_attr_rep ar;
	struct rpc_reply rep = { 0 };
	struct ofile *of;
	int rc;

	maybe_tune(c);
	if (fi->flags & O_TRUNC)
		inode_own_touch(c->it, ip, false);
	if (!(of = ofile_new(c, ip, fi->flags))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	uint64_t before = gate_seq(c->gate);
	if (open_locally(req, ip, fi, false)) {
		open_store_inline(c, ip, ino, fi, before);
		fill_creds(req, &of->cr, true);
		of->local = true;
		atomic_fetch_add(&c->lazy_opens, 1);
		fi->fh = (uint64_t)(uintptr_t)of;
		if (fuse_reply_open(req, fi) != 0)
			ofile_free(of);
		return;
	}
	fill_creds(req, &m.cr, true);
	m.fh = ip->fh;
	m.fid = fid_use(of);
	m.flags = (uint32_t)fi->flags;
	uint64_t ns, any = inode_own_snap(c->it, &ns);
	uint64_t seq = gate_seq(c->gate);
	uint64_t applied = gate_applied(c->gate);
	rc = rpc_msg(c->rpc, PFS_OP_OPEN, open_req, &m, &rep);
	if (rc == 0 && pfs_dec_attr_rep(rep.buf, rep.len, &ar) < 0)
		rc = bad_reply(req, "OPEN");
	rpc_reply_free(&rep);
	if (rc < 0) {
		ofile_free(of);
		fuse_reply_err(req, -rc);
		return;
	}
	/* The kernel found this file under a name that another host removed
	 * or renamed another file over: ESTALE makes the VFS look the name
	 * up again (LOOKUP_REVAL) and open what it names now, as
	 * close-to-open requires. Its push may not have reached the kernel
	 * yet (the dentry still names this file), or it may have reached it
	 * while this open was already past the name (the walk holds the
	 * inode): any push about the file since the kernel was first handed
	 * it counts, not only those not yet applied. Reopening a file
	 * removed by another host through /proc/PID/fd thus fails with
	 * ESTALE, as on NFS; one this host removed opens (unless over 1,024
	 * pushes came since: the check then errs towards ESTALE). */
	if (ar.attr.nlink == 0 && !S_ISDIR(ar.attr.mode)) {
		uint64_t since = inode_named_seq(ip);
		if (since > applied)
			since = applied;
		gate_enter(c->gate);
		bool gone = gate_pushed_since(c->gate, since, &ip->fh);
		gate_leave(c->gate);
		pid_t tid = fuse_req_ctx(req)->pid;
		if (gone && !estale_retry(c, tid, ino)) {
			estale_arm(c, tid);
			release_remote(req, of, PFS_OP_RELEASE);
			ofile_free(of);
			fuse_reply_err(req, ESTALE);
			return;
		}
	}
	if ((fi->flags & O_ACCMODE) != O_WRONLY)
		inode_note_reader(ip, m.cr.uid, m.cr.gid);
	/* Close-to-open: the kernel's pages may stay only if the file has
	 * not changed since they were cached (keep_cache=0 makes the kernel
	 * drop them). Its cached attributes go too if they differ from the
	 * fresh ones (offset -1: attributes only, safe in a handler). */
	bool attrs_stale;
	fi->keep_cache = inode_open_version(ip, &ar.attr, &attrs_stale);
	if (!attrs_stale)
		open_store_inline(c, ip, ino, fi, applied);
	/* The version (size, mtime, ctime) misses a change made within one
	 * timestamp tick. The server's push does not: one about this file
	 * that arrived but may not have reached the kernel yet (the server
	 * sends it before the OPEN reply when the change came first) means
	 * the pages are stale. */
	gate_enter(c->gate);
	if (gate_pushed_since(c->gate, applied, &ip->fh)) {
		fi->keep_cache = 0;
		attrs_stale = true;
	}
	gate_leave(c->gate);
	if (!(fi->flags & O_TRUNC))
		inode_trust_attr(c->it, ip, seq, any, ns);
	if (attrs_stale)
		fuse_lowlevel_notify_inval_inode(c->se, ino, -1, 0);
	fi->fh = (uint64_t)(uintptr_t)of;
	if (fuse_reply_open(req, fi) != 0) {
		release_remote(req, of, PFS_OP_RELEASE);
		ofile_free(of);
	}
}

static void pfs_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		       struct fuse_file_info *fi)
{
	struct client *c = CL(req);
	struct pfs_create_req m;
	struct pfs_entry_rep er;
	struct fuse_entry_param e;
	struct rpc_reply rep = { 0 };
	struct inode *ip = NULL;
	struct ofile *of;
	int rc;

	if (!(of = ofile_new(c, NULL, fi->flags))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	struct own_snap o = own_snap(c);
	uint64_t seq = o.seq;
	inode_own_touch(c->it, IP(req, parent), true);
	fill_creds(req, &m.cr, true);
	m.parent = IP(req, parent)->fh;
	m.fid = fid_use(of);
	m.flags = (uint32_t)fi->flags;
	m.mode = mode;
	m.umask = fuse_req_ctx(req)->umask;
	if ((rc = set_name(&m.name, name)) == 0)
		rc = rpc_msg(c->rpc, PFS_OP_CREATE, create_req, &m, &rep);
	/* The kernel sent CREATE for a name it believed absent (a cached
	 * negative entry), but another host made it a symlink, which the
	 * server never follows. ESTALE makes the VFS redo the open with
	 * LOOKUP_REVAL: a fresh lookup, and the kernel follows the link. */
	if (rc == -ELOOP && !(fi->flags & O_EXCL))
		rc = -ESTALE;
	struct pfs_attr da;
	bool have_da = false;
	uint32_t mkflags;
	if (rc == 0 && dec_entry(&rep, &er, &da, &have_da, &mkflags) < 0)
		rc = bad_reply(req, "CREATE");
	rpc_reply_free(&rep);
	own_listing(IP(req, parent), name, rc == 0 ? &er.e : NULL);
	if (have_da)
		own_dir_attr(c, IP(req, parent), &da, &o);
	if (rc == 0 && !(ip = entry_param(c, NULL, NULL, 0, &er.e, &e))) {
		/* The file was created and opened; the kernel will never
		 * release this fid, so do it here. */
		release_fid(req, &er.e.fh, of->fid, PFS_OP_RELEASE);
		rc = -ENOMEM;
	}
	if (rc < 0) {
		ofile_free(of);
		fuse_reply_err(req, -rc);
		return;
	}
	of->ip = ip;
	inode_set_parent(c->it, ip, IP(req, parent), seq, name);
	bool attrs_stale;
	inode_open_version(ip, &er.e.attr, &attrs_stale);
	/* A new file has no capabilities (they are never inherited). */
	inode_set_nocaps(ip, c->attr_timeout);
	fi->fh = (uint64_t)(uintptr_t)of;
	inode_note_name(IP(req, parent), name);
	gate_enter(c->gate);
	if (gate_pushed_since(c->gate, seq, &IP(req, parent)->fh) ||
	    gate_pushed_since(c->gate, seq, &ip->fh)) {
		e.entry_timeout = 0;
		e.attr_timeout = 0;
	}
	int rr = fuse_reply_create(req, &e, fi);
	gate_leave(c->gate);
	if (rr != 0) {
		release_remote(req, of, PFS_OP_RELEASE);
		ofile_free(of);
		inode_forget(c->it, ip, 1);
	}
}

/* ---- persistent content cache (pcache.c) ---- */

/* Answers a READ of ip (at data version v) from the persistent cache;
 * returns false (nothing replied) on a miss. */
static bool pc_serve(fuse_req_t req, struct inode *ip, const struct dver *v, size_t size,
		     off_t off)
{
	char *buf = malloc(size ? size : 1);
	ssize_t n = buf ? pcache_read(CL(req)->pc, &ip->fh, v, (uint64_t)off, size, buf) : -ENOMEM;
	if (n >= 0)
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
	return n >= 0;
}

/* The server answered a READ of ip at off with data (version v seen
 * before it was sent): the whole file is stored, a part makes the
 * background thread fetch the whole file (creds cr). The data is of v or
 * newer, and a newer one ends v, so no stale data is ever kept under v. */
static void pc_fill(struct client *c, const struct pfs_creds *cr, struct inode *ip,
		    const struct dver *v, uint64_t off, const struct pfs_bytes *data)
{
	if (off == 0 && data->len == v->size)
		pcache_offer(c->pc, &ip->fh, v, data->p, data->len);
	else
		pcache_fetch(c->pc, cr, &ip->fh, v);
}

static void pfs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct client *c = CL(req);
	struct ofile *of = OF(fi);
	struct pfs_read_req m;
	struct pfs_read_rep r;
	struct rpc_reply rep = { 0 };
	(void)ino;

	wb_wait(c->wb, of->ip); /* see our own writes */
	if (of->ip->inline_data && size <= PFS_MAX_IO) {
		/* The content came with the lookup (LOOKUP_DATA). */
		char *buf = malloc(size ? size : 1);
		size_t got;
		if (buf && inode_read_inline(of->ip, (uint64_t)off, size, buf, &got)) {
			fuse_reply_buf(req, buf, got);
			free(buf);
			return;
		}
		free(buf);
	}
	/* The persistent cache, for a file whose current version is known. */
	struct dver pv;
	bool pc = c->pc && inode_data_version(of->ip, &pv) && pcache_wants(c->pc, pv.size);
	if (pc && pc_serve(req, of->ip, &pv, size, off))
		return;
	fill_creds(req, &m.cr, false);
	m.fh = of->ip->fh;
	m.fid = fid_use(of);
	m.flags = of->flags;
	m.offset = (uint64_t)off;
	m.size = (uint32_t)(size > PFS_MAX_IO ? PFS_MAX_IO : size);
	uint64_t seq = pc ? gate_seq(c->gate) : 0;
	int rc = rpc_msg(c->rpc, PFS_OP_READ, read_req, &m, &rep);
	if (rc == 0 && (pfs_dec_read_rep(rep.buf, rep.len, &r) < 0 || r.data.len > m.size))
		rc = bad_reply(req, "READ");
	if (rc < 0) {
		fuse_reply_err(req, -rc);
	} else {
		atomic_fetch_add_explicit(&c->st_file_read, r.data.len, memory_order_relaxed);
		/* Data read after a change pushed since the READ went out
		 * (the reply may come on another connection than the push)
		 * is not kept under the version seen before. Outside the
		 * gate: a push numbered after this check ends pv anyway
		 * (pc_fill), and the gate must not wait for disk I/O. */
		if (pc && !gate_pushed_since(c->gate, seq, &of->ip->fh))
			pc_fill(c, &m.cr, of->ip, &pv, m.offset, &r.data);
		fuse_reply_buf(req, (const char *)r.data.p, r.data.len);
	}
	rpc_reply_free(&rep);
}

static void pfs_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	struct client *c = CL(req);
	struct ofile *of = OF(fi);
	struct pfs_creds cr;
	(void)ino;

	if (size > PFS_MAX_IO) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	inode_own_touch(c->it, of->ip, false);
	inode_drop_inline(of->ip); /* our own writes are never pushed back to us */
	/* Write-behind (wb.c): the data is copied and sent by a writer
	 * thread; its errors come back at the next write, flush or fsync. */
	fill_creds(req, &cr, false);
	int rc = wb_write(c->wb, of->ip, &cr, &of->ip->fh, fid_use(of), of->flags, (uint64_t)off, buf,
			  size, (uint32_t)fuse_req_ctx(req)->pid);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_write(req, size);
}

static void pfs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct client *c = CL(req);
	struct inode *ip = IP(req, ino);
	struct pfs_creds cr;

	/* close(2): the file's writes are on the daemon (close-to-open),
	 * and their errors (ENOSPC, EDQUOT, EIO) are reported, as NFS does;
	 * the commit follows at release (wb_i.h). */
	int err = wb_flush(c->wb, ip, (uint32_t)fuse_req_ctx(req)->pid);

	/* Drop this owner's POSIX locks, as close(2) must, only where this
	 * client ever took any: no round trip otherwise. */
	if (inode_had_posix_locks(ip)) {
		fill_creds(req, &cr, false);
		int rc = locks_unlock_owner(c->lk, &cr, &ip->fh, fi->lock_owner);
		if (rc == -EIO && err == 0)
			err = rc; /* a lock of this owner was lost (locks_i.h) */
		else if (rc < 0)
			pfs_debug("UNLOCK_OWNER: %s", strerror(-rc));
	}
	fuse_reply_err(req, -err);
}

static void pfs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct client *c = CL(req);
	struct ofile *of = OF(fi);
	struct pfs_creds cr;

	/* Writes of mmap'ed pages may come after the last flush. */
	fill_creds(req, &cr, false);
	uint64_t fid = wb_holds(c->wb, of->ip) ? fid_use(of) : of->fid;
	wb_release(c->wb, of->ip, &cr, &of->ip->fh, fid);
	if (fi->flock_release) {
		struct pfs_lock_req m;
		fill_creds(req, &m.cr, false);
		m.fh = of->ip->fh;
		m.fid = fid_use(of);
		m.owner = fi->lock_owner;
		m.type = PFS_LK_UN;
		m.start = 0;
		m.end = UINT64_MAX;
		m.pid = (uint32_t)fuse_req_ctx(req)->pid;
		m.flags = PFS_LKF_FLOCK;
		(void)locks_setlk(c->lk, NULL, &m, false, ino);
	}
	release_remote(req, of, PFS_OP_RELEASE);
	ofile_free(of);
	fuse_reply_err(req, 0);
}

static void pfs_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct client *c = CL(req);
	struct ofile *of = OF(fi);
	struct pfs_creds cr;
	(void)ino;

	/* Returns once the daemon's fsync covered every write, re-sending
	 * what a restarted daemon may have lost (wb.c). */
	fill_creds(req, &cr, false);
	int rc = wb_sync(c->wb, of->ip, &cr, &of->ip->fh, fid_use(of), datasync != 0, true);
	fuse_reply_err(req, -rc);
}

static void pfs_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
			  struct fuse_file_info *fi)
{
	struct client *c = CL(req);
	struct ofile *of = OF(fi);
	struct pfs_fallocate_req m;
	struct rpc_reply rep = { 0 };
	(void)ino;

	inode_own_touch(c->it, of->ip, false);
	inode_drop_inline(of->ip);
	fill_creds(req, &m.cr, false);
	m.fh = of->ip->fh;
	m.fid = fid_use(of);
	wb_wait(c->wb, of->ip);
	m.mode = (uint32_t)mode;
	m.offset = (uint64_t)offset;
	m.length = (uint64_t)length;
	int rc = rpc_msg(c->rpc, PFS_OP_FALLOCATE, fallocate_req, &m, &rep);
	rpc_reply_free(&rep);
	fuse_reply_err(req, -rc);
}

static void pfs_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		      struct fuse_file_info *fi)
{
	struct client *c = CL(req);
	struct ofile *of = OF(fi);
	struct pfs_lseek_req m;
	struct pfs_lseek_rep r;
	struct rpc_reply rep = { 0 };
	(void)ino;

	fill_creds(req, &m.cr, false);
	m.fh = of->ip->fh;
	m.fid = fid_use(of);
	m.offset = (uint64_t)off;
	m.whence = (uint32_t)whence;
	wb_wait(c->wb, of->ip);
	int rc = rpc_msg(c->rpc, PFS_OP_LSEEK, lseek_req, &m, &rep);
	if (rc == 0 && (pfs_dec_lseek_rep(rep.buf, rep.len, &r) < 0 || r.offset > INT64_MAX))
		rc = bad_reply(req, "LSEEK");
	rpc_reply_free(&rep);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_lseek(req, (off_t)r.offset);
}

/* ---- locks ---- */

static void lock_fill(fuse_req_t req, struct pfs_lock_req *m, struct ofile *of,
		      struct fuse_file_info *fi, const struct flock *lk)
{
	/* Writes made under a lock reach the server before it changes. */
	wb_wait(CL(req)->wb, of->ip);
	fill_creds(req, &m->cr, false);
	m->fh = of->ip->fh;
	m->fid = fid_use(of);
	m->owner = fi->lock_owner;
	m->type = lk->l_type == F_RDLCK ? PFS_LK_RD : lk->l_type == F_WRLCK ? PFS_LK_WR : PFS_LK_UN;
	m->start = (uint64_t)lk->l_start;
	m->end = lk->l_len <= 0 ? UINT64_MAX : (uint64_t)lk->l_start + (uint64_t)lk->l_len - 1;
	m->pid = (uint32_t)lk->l_pid;
	m->flags = 0;
}

/* A lock was granted: what another host wrote before releasing it must
 * be seen now, so the cached pages and attributes of the file go (NFS
 * revalidates on lock too). Safe in this handler: the kernel holds no
 * inode or page lock while it waits for a lock request. */
static void lock_revalidate(fuse_req_t req, fuse_ino_t ino)
{
	struct client *c = CL(req);
	inode_own_touch(c->it, IP(req, ino), false);
	inode_drop_inline(IP(req, ino));
	fuse_lowlevel_notify_inval_inode(c->se, ino, 0, 0);
}

static void pfs_getlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		      struct flock *lock)
{
	struct client *c = CL(req);
	struct pfs_lock_req m;
	struct pfs_getlk_rep r;
	struct rpc_reply rep = { 0 };
	(void)ino;

	lock_fill(req, &m, OF(fi), fi, lock);
	int rc = locks_getlk(c->lk, req, &m, &rep);
	if (rc == 0 && (pfs_dec_getlk_rep(rep.buf, rep.len, &r) < 0 || r.type > PFS_LK_UN ||
			r.start > INT64_MAX || (r.end != UINT64_MAX && r.end < r.start)))
		rc = bad_reply(req, "GETLK");
	rpc_reply_free(&rep);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	struct flock out;
	memset(&out, 0, sizeof(out));
	out.l_type = r.type == PFS_LK_RD ? F_RDLCK : r.type == PFS_LK_WR ? F_WRLCK : F_UNLCK;
	out.l_whence = SEEK_SET;
	out.l_start = (off_t)r.start;
	out.l_len = r.end == UINT64_MAX || r.end > INT64_MAX ? 0 : (off_t)(r.end - r.start + 1);
	out.l_pid = (pid_t)r.pid;
	fuse_reply_lock(req, &out);
}

static void pfs_setlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		      struct flock *lock, int sleep)
{
	struct pfs_lock_req m;

	/* Mark first, so a flush racing with this lock still unlocks. */
	inode_mark_posix_locks(IP(req, ino));
	lock_fill(req, &m, OF(fi), fi, lock);
	int rc = locks_setlk(CL(req)->lk, req, &m, sleep != 0, ino);
	if (rc == 0 && m.type != PFS_LK_UN)
		lock_revalidate(req, ino);
	fuse_reply_err(req, -rc);
}

static void pfs_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, int op)
{
	struct ofile *of = OF(fi);
	struct pfs_lock_req m;

	wb_wait(CL(req)->wb, of->ip);
	fill_creds(req, &m.cr, false);
	m.fh = of->ip->fh;
	m.fid = fid_use(of);
	m.owner = fi->lock_owner;
	switch (op & ~LOCK_NB) {
	case LOCK_SH:
		m.type = PFS_LK_RD;
		break;
	case LOCK_EX:
		m.type = PFS_LK_WR;
		break;
	case LOCK_UN:
		m.type = PFS_LK_UN;
		break;
	default:
		fuse_reply_err(req, EINVAL);
		return;
	}
	m.start = 0;
	m.end = UINT64_MAX;
	m.pid = (uint32_t)fuse_req_ctx(req)->pid;
	m.flags = PFS_LKF_FLOCK;
	int rc = locks_setlk(CL(req)->lk, req, &m, !(op & LOCK_NB), ino);
	if (rc == 0 && m.type != PFS_LK_UN)
		lock_revalidate(req, ino);
	fuse_reply_err(req, -rc);
}

/* ---- directories ---- */

static void pfs_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct client *c = CL(req);
	struct inode *ip = IP(req, ino);
	struct pfs_open_req m;
	struct pfs_attr_rep ar;
	struct rpc_reply rep = { 0 };
	struct ofile *of;
	int rc;

	if (!(of = ofile_new(c, ip, fi->flags))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (open_locally(req, ip, fi, true))
		goto reply;
	fill_creds(req, &m.cr, true);
	m.fh = ip->fh;
	m.fid = fid_use(of);
	m.flags = (uint32_t)fi->flags;
	uint64_t ns, any = inode_own_snap(c->it, &ns);
	uint64_t seq = gate_seq(c->gate);
	rc = rpc_msg(c->rpc, PFS_OP_OPENDIR, open_req, &m, &rep);
	if (rc == 0 && pfs_dec_attr_rep(rep.buf, rep.len, &ar) < 0)
		rc = bad_reply(req, "OPENDIR");
	rpc_reply_free(&rep);
	if (rc < 0) {
		ofile_free(of);
		fuse_reply_err(req, -rc);
		return;
	}
	inode_set_attr(ip, &ar.attr);
	inode_trust_attr(c->it, ip, seq, any, ns);
	inode_note_reader(ip, m.cr.uid, m.cr.gid);
reply:
	/* The server pushes an invalidation of the directory on every
	 * change, which drops the kernel's cached listing. This kernel
	 * drops cache_readdir at every opendir unless keep_cache is set too. */
	fi->cache_readdir = 1;
	fi->keep_cache = 1;
	fi->fh = (uint64_t)(uintptr_t)of;
	if (fuse_reply_open(req, fi) != 0) {
		release_remote(req, of, PFS_OP_RELEASEDIR);
		ofile_free(of);
	}
}

/* Fetches the READDIR chunk after cookie off into of. Called with of->lock. */
static int dir_fetch(fuse_req_t req, struct ofile *of, uint64_t off, bool plus)
{
	struct client *c = CL(req);
	struct pfs_readdir_req m;
	uint8_t eof;
	int rc;

	rpc_reply_free(&of->dir);
	of->rd_valid = false;
	of->rd_synth = false;
	of->rd_any = inode_own_snap(c->it, &of->rd_ns);
	of->rd_seq = gate_seq(c->gate);
	fill_creds(req, &m.cr, false);
	m.fh = of->ip->fh;
	m.fid = fid_use(of);
	m.offset = off;
	m.max_bytes = READDIR_BYTES;
	m.plus = plus;
	rc = rpc_msg(c->rpc, PFS_OP_READDIR, readdir_req, &m, &of->dir);
	if (rc < 0)
		return rc;
	pfs_rd_init(&of->rd, of->dir.buf, of->dir.len);
	if (!pfs_get_U8(&of->rd, &eof)) {
		rpc_reply_free(&of->dir);
		return bad_reply(req, "READDIR");
	}
	of->rd_eof = eof != 0;
	of->rd_off = off;
	of->rd_plus = plus;
	of->rd_valid = true;
	return 0;
}

static bool is_dot(const struct pfs_name *n)
{
	return n->s[0] == '.' && (n->len == 1 || (n->len == 2 && n->s[1] == '.'));
}

/* Cold start: READDIR answered from the directory's complete listing
 * (fetched now if it has none and is small), while it is coherent as for
 * lookup_listed: no READDIR round trips, and the daemon never opens the
 * directory (no RELEASEDIR). Sets of's chunk to the whole listing, with
 * cookies of its own (1, 2, ...: of->rd_synth) and entries (readdirplus
 * too), and returns true; false to ask the server. At offset 0 only,
 * with of->lock held. */
static bool readdir_listed(fuse_req_t req, struct ofile *of)
{
	struct client *c = CL(req);
	struct inode *dir = of->ip;
	struct listing_info li;
	struct pfs_creds cr;
	uint64_t pseq;
	uint8_t *buf, eof;
	size_t len;

	if (!c->max_inline || cache_nosys(c->cache, PFS_OP_LISTDIR) || !rpc_is_up(c->rpc))
		return false;
	/* Without contents: whoever lists a directory (find, ls -l, a
	 * walk, Python's import path cache) mostly reads no file in it, and
	 * reading them all from a cold disk tripled find's cold time. A
	 * file read later costs its READ; one looked up first rides along
	 * as before (LISTDIR at the lookup, LOOKUP_DATA). */
	if (listing_may_fetch(dir, LIST_DIR_MAX_SIZE)) {
		fill_creds(req, &cr, true);
		fetch_listing(req, dir, &cr, 0);
	}
	if (listing_readdir(c->it, dir, &buf, &len, &li, &pseq) < 0)
		return false;
	if (!transport_quiet(c->tr)) {
		free(buf);
		return false;
	}
	gate_enter(c->gate);
	bool stale = gate_pushed_since(c->gate, li.seq, &dir->fh);
	bool parent_stale = gate_pushed_since(c->gate, pseq, &dir->fh);
	gate_leave(c->gate);
	if (stale)
		listing_stale(dir);
	if (stale || parent_stale) {
		free(buf);
		return false;
	}
	rpc_reply_free(&of->dir);
	of->dir.buf = buf;
	of->dir.len = len;
	pfs_rd_init(&of->rd, buf, len);
	(void)pfs_get_U8(&of->rd, &eof);
	of->rd_eof = true;
	of->rd_off = 0;
	of->rd_plus = true;
	of->rd_valid = true;
	of->rd_synth = true;
	of->rd_seq = li.seq;
	of->rd_any = li.any;
	of->rd_ns = li.own_ns;
	return true;
}

/* Moves a readdir_listed chunk's position to just after cookie off. */
static void synth_seek(struct ofile *of, uint64_t off)
{
	uint8_t eof;

	pfs_rd_init(&of->rd, of->dir.buf, of->dir.len);
	(void)pfs_get_U8(&of->rd, &eof);
	of->rd_off = 0;
	while (of->rd_off < off) {
		struct pfs_rd save = of->rd;
		struct pfs_dirent de;
		if (pfs_dec_dirent(&of->rd, &de) != 1) {
			of->rd = save;
			break;
		}
		of->rd_off = de.next_off;
	}
}

static void do_readdir(fuse_req_t req, size_t size, off_t off, struct fuse_file_info *fi,
		       bool plus)
{
	struct client *c = CL(req);
	struct ofile *of = OF(fi);
	size_t pos = 0;
	int rc = 0;
	bool fresh = false; /* the current chunk was fetched by this call */
	bool chunk_had_entries = false;

	char *buf = malloc(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_lock(&of->lock);
	/* A plain READDIR can use a READDIRPLUS chunk (the kernel asks
	 * with plus only at offset 0 under READDIRPLUS_AUTO). */
	if (of->rd_synth && off != 0) {
		/* Its cookies are ours: never sent to the server. */
		if (of->rd_off != (uint64_t)off)
			synth_seek(of, (uint64_t)off);
	} else if (!of->rd_valid || of->rd_off != (uint64_t)off || (plus && !of->rd_plus)) {
		if (off != 0 || !readdir_listed(req, of))
			rc = dir_fetch(req, of, (uint64_t)off, plus);
		fresh = true;
	}
	/* Entries handed to the kernel get timeout 0 if a push about the
	 * directory or the entry came after their chunk was asked for; the
	 * gate is held until the reply is written (see gate_i.h), but never
	 * across a fetch. */
	gate_enter(c->gate);
	bool dir_pushed = gate_pushed_since(c->gate, of->rd_seq, &of->ip->fh);
	while (rc == 0) {
		struct pfs_rd save = of->rd;
		struct pfs_dirent de;
		int r = pfs_dec_dirent(&of->rd, &de);
		if (r == 0) {
			if (of->rd_eof || (fresh && !chunk_had_entries) || pos > 0)
				break; /* the end, no progress, or reply what we have */
			gate_leave(c->gate);
			rc = dir_fetch(req, of, of->rd_off, plus);
			gate_enter(c->gate);
			dir_pushed = gate_pushed_since(c->gate, of->rd_seq, &of->ip->fh);
			fresh = true;
			chunk_had_entries = false;
			continue;
		}
		if (r < 0) {
			of->rd_valid = false;
			rc = bad_reply(req, "READDIR");
			break;
		}
		chunk_had_entries = true;
		size_t n;
		if (plus) {
			struct fuse_entry_param e;
			struct inode *ip = NULL;
			memset(&e, 0, sizeof(e));
			/* "." and ".." never go through the inode table, nor
			 * does an entry this client changed since the listing
			 * was asked for (the kernel looks it up instead). */
			if ((de.flags & PFS_DE_HAS_ENTRY) && !is_dot(&de.name) &&
			    !inode_listed_stale(c->it, &de.e.fh, of->rd_any))
				ip = entry_param(c, of->ip, de.name.s, of->rd_seq, &de.e, &e);
			if (!ip) {
				e.attr.st_ino = de.ino;
				e.attr.st_mode = de.mode;
			} else if (dir_pushed || gate_pushed_since(c->gate, of->rd_seq, &ip->fh)) {
				e.entry_timeout = 0;
				e.attr_timeout = 0;
			}
			n = fuse_add_direntry_plus(req, buf + pos, size - pos, de.name.s, &e,
						   (off_t)de.next_off);
			if (n > size - pos && ip) {
				inode_forget(c->it, ip, 1); /* not handed to the kernel */
			} else if (ip) {
				inode_note_name(of->ip, de.name.s);
				inode_trust_attr(c->it, ip, of->rd_seq, of->rd_any, of->rd_ns);
			}
		} else {
			struct stat st;
			memset(&st, 0, sizeof(st));
			st.st_ino = de.ino;
			st.st_mode = de.mode;
			n = fuse_add_direntry(req, buf + pos, size - pos, de.name.s, &st,
					      (off_t)de.next_off);
		}
		if (n > size - pos) {
			of->rd = save; /* the kernel asks for it next time */
			break;
		}
		pos += n;
		of->rd_off = de.next_off;
	}
	if (rc < 0 && pos == 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_buf(req, buf, pos);
	gate_leave(c->gate);
	pthread_mutex_unlock(&of->lock);
	free(buf);
}

static void pfs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			struct fuse_file_info *fi)
{
	(void)ino;
	do_readdir(req, size, off, fi, false);
}

static void pfs_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			    struct fuse_file_info *fi)
{
	(void)ino;
	do_readdir(req, size, off, fi, true);
}

static void pfs_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ofile *of = OF(fi);
	(void)ino;
	release_remote(req, of, PFS_OP_RELEASEDIR);
	ofile_free(of);
	fuse_reply_err(req, 0);
}

static void pfs_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	/* Directory operations are synchronous on the server. */
	fuse_reply_err(req, 0);
}

/* ---- file system ---- */

static void pfs_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct client *c = CL(req);
	struct pfs_statfs_req m;
	struct pfs_statfs_rep r;
	struct rpc_reply rep = { 0 };

	fill_creds(req, &m.cr, false);
	m.fh = IP(req, ino)->fh;
	int rc = rpc_msg(c->rpc, PFS_OP_STATFS, statfs_req, &m, &rep);
	if (rc == 0 && pfs_dec_statfs_rep(rep.buf, rep.len, &r) < 0)
		rc = bad_reply(req, "STATFS");
	rpc_reply_free(&rep);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	struct statvfs st;
	memset(&st, 0, sizeof(st));
	st.f_bsize = r.bsize;
	st.f_frsize = r.frsize;
	st.f_blocks = r.blocks;
	st.f_bfree = r.bfree;
	st.f_bavail = r.bavail;
	st.f_files = r.files;
	st.f_ffree = r.ffree;
	st.f_favail = r.favail;
	st.f_namemax = r.namemax;
	fuse_reply_statfs(req, &st);
}

/* ---- extended attributes ---- */

static void pfs_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			 size_t size, int flags)
{
	struct client *c = CL(req);
	struct pfs_setxattr_req m;
	struct rpc_reply rep = { 0 };
	int rc;

	inode_clear_nocaps(IP(req, ino));
	inode_own_touch(c->it, IP(req, ino), false);
	fill_creds(req, &m.cr, true);
	m.fh = IP(req, ino)->fh;
	m.flags = (uint32_t)flags;
	m.value.p = (const uint8_t *)value;
	m.value.len = (uint32_t)size;
	if (size > PFS_XATTR_SIZE_MAX)
		rc = -E2BIG;
	else if ((rc = set_xname(&m.name, name)) == 0)
		rc = rpc_msg_heap(c->rpc, PFS_OP_SETXATTR, setxattr_req, &m, size + RPC_SMALL,
				  &rep);
	rpc_reply_free(&rep);
	fuse_reply_err(req, -rc);
}

/* Replies to GETXATTR/LISTXATTR: the size for a size query, else the value. */
static void finish_xattr(fuse_req_t req, size_t size, int rc, struct rpc_reply *rep)
{
	struct pfs_xattr_rep r;

	if (rc == 0 && pfs_dec_xattr_rep(rep->buf, rep->len, &r) < 0)
		rc = bad_reply(req, "xattr");
	if (rc == 0 && size > 0 && r.value.len > size)
		rc = -ERANGE;
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else if (size == 0)
		fuse_reply_xattr(req, r.size);
	else
		fuse_reply_buf(req, (const char *)r.value.p, r.value.len);
	rpc_reply_free(rep);
}

/* "user.podfs.stats" of the root: the byte counters, one "name value"
 * per line (see client_i.h and wb_i.h). */
#define PFS_STATS_XATTR "user.podfs.stats"
static void stats_xattr(fuse_req_t req, size_t size)
{
	struct client *c = CL(req);
	struct wb_stats ws;
	char buf[4096];

	wb_get_stats(c->wb, &ws);
	int n = snprintf(buf, sizeof(buf),
			 "wire_out %llu\nraw_out %llu\nwire_in %llu\nraw_in %llu\n"
			 "file_written %llu\nfile_read %llu\nresent %llu\ncommits %llu\n"
			 "wb_held %llu\nconns %u\nconns_up %u\n",
			 (unsigned long long)atomic_load(&c->st_wire_out),
			 (unsigned long long)atomic_load(&c->st_raw_out),
			 (unsigned long long)atomic_load(&c->st_wire_in),
			 (unsigned long long)atomic_load(&c->st_raw_in),
			 (unsigned long long)ws.written,
			 (unsigned long long)atomic_load(&c->st_file_read),
			 (unsigned long long)ws.resent, (unsigned long long)ws.commits,
			 (unsigned long long)ws.held, c->conns, rpc_conns_up(c->rpc));
	for (unsigned op = 0; op < PFS_OP_MAX && n > 0 && (size_t)n < sizeof(buf); op++) {
		uint64_t k = atomic_load(&c->st_req[op]);
		if (k)
			n += snprintf(buf + n, sizeof(buf) - (size_t)n, "req_%s %llu\n", pfs_op_name(op),
				      (unsigned long long)k);
	}
	if (c->pc && n > 0 && (size_t)n < sizeof(buf))
		n += (int)pcache_format_stats(c->pc, buf + n, sizeof(buf) - (size_t)n);
	if (n < 0 || (size_t)n >= sizeof(buf)) { /* cannot happen: 4 KiB holds every line */
		fuse_reply_err(req, EOVERFLOW);
		return;
	}
	if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else if ((size_t)n > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

static void pfs_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct client *c = CL(req);
	struct pfs_getxattr_req m;
	struct rpc_reply rep = { 0 };
	int rc;

	struct inode *ip = IP(req, ino);
	bool caps = strcmp(name, "security.capability") == 0;
	uint8_t nox = strcmp(name, "system.posix_acl_access") == 0    ? NOX_ACL_ACCESS
		      : strcmp(name, "system.posix_acl_default") == 0 ? NOX_ACL_DEFAULT
		      : strcmp(name, "security.selinux") == 0         ? NOX_SELINUX
								      : 0;

	if (ino == FUSE_ROOT_ID && strcmp(name, PFS_STATS_XATTR) == 0) {
		stats_xattr(req, size);
		return;
	}

	/* Asked before every write(2) (capability) and by every ls -l
	 * (ACLs, SELinux label): answer a known absence locally. A push or
	 * this client's own xattr change forgets it. */
	if ((caps && inode_nocaps(ip)) || (nox && inode_noxattr(ip, nox))) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	fill_creds(req, &m.cr, true);
	m.fh = ip->fh;
	m.size = (uint32_t)(size > PFS_XATTR_SIZE_MAX ? PFS_XATTR_SIZE_MAX : size);
	if ((rc = set_xname(&m.name, name)) == 0)
		rc = rpc_msg(c->rpc, PFS_OP_GETXATTR, getxattr_req, &m, &rep);
	if (caps && rc == -ENODATA)
		inode_set_nocaps(ip, c->attr_timeout);
	if (nox && rc == -ENODATA)
		inode_set_noxattr(ip, nox, c->attr_timeout);
	finish_xattr(req, size, rc, &rep);
}

static void pfs_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct client *c = CL(req);
	struct pfs_listxattr_req m;
	struct rpc_reply rep = { 0 };

	fill_creds(req, &m.cr, true);
	m.fh = IP(req, ino)->fh;
	m.size = (uint32_t)(size > PFS_XATTR_SIZE_MAX ? PFS_XATTR_SIZE_MAX : size);
	int rc = rpc_msg(c->rpc, PFS_OP_LISTXATTR, listxattr_req, &m, &rep);
	finish_xattr(req, size, rc, &rep);
}

static void pfs_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct client *c = CL(req);
	struct pfs_removexattr_req m;
	struct rpc_reply rep = { 0 };
	int rc;

	inode_clear_nocaps(IP(req, ino));
	inode_own_touch(c->it, IP(req, ino), false);
	fill_creds(req, &m.cr, true);
	m.fh = IP(req, ino)->fh;
	if ((rc = set_xname(&m.name, name)) == 0)
		rc = rpc_msg(c->rpc, PFS_OP_REMOVEXATTR, removexattr_req, &m, &rep);
	rpc_reply_free(&rep);
	fuse_reply_err(req, -rc);
}

void ops_free_open_files(struct client *c)
{
	while (c->open_files)
		ofile_free(c->open_files);
}

/* ---- server pushes ---- */

uint64_t ops_note_push(struct client *c, uint16_t op, const uint8_t *payload, size_t len)
{
	struct pfs_inval_inode_push ii;
	struct pfs_inval_entry_push ie;

	if (op == PFS_OP_INVAL_INODE && pfs_dec_inval_inode_push(payload, len, &ii) == 0)
		return gate_note_push(c->gate, &ii.fh);
	if (op == PFS_OP_INVAL_ENTRY && pfs_dec_inval_entry_push(payload, len, &ie) == 0)
		return gate_note_push(c->gate, &ie.parent);
	return 0;
}

void ops_apply_push(struct client *c, uint16_t op, const uint8_t *payload, size_t len)
{
	fuse_ino_t nodeid;

	switch (op) {
	case PFS_OP_INVAL_INODE: {
		struct pfs_inval_inode_push m;
		if (pfs_dec_inval_inode_push(payload, len, &m) < 0)
			goto bad;
		bool is_dir = false;
		if (!inode_find(c->it, &m.fh, m.offset >= 0, &nodeid, &is_dir))
			return;
		/* A directory's listing goes too, cached by the kernel
		 * (cache_readdir): a move to another parent changes only the
		 * directory's ctime, and its "..". */
		if (m.offset < 0 && is_dir) {
			m.offset = 0;
			m.length = 0;
		}
		if (m.offset < 0 && !is_dir)
			attach_lazy_opens(c, NULL, &m.fh, PUSH_CALL_MS);
		fuse_lowlevel_notify_inval_inode(c->se, nodeid, m.offset, m.length);
		return;
	}
	case PFS_OP_INVAL_ENTRY: {
		struct pfs_inval_entry_push m;
		if (pfs_dec_inval_entry_push(payload, len, &m) < 0)
			goto bad;
		/* This also drops a negative entry of the name. */
		if (inode_find(c->it, &m.parent, false, &nodeid, NULL))
			fuse_lowlevel_notify_inval_entry(c->se, nodeid, m.name.s, m.name.len);
		return;
	}
	default:
		pfs_debug("ignoring push %s", pfs_op_name(op));
		return;
	}
bad:
	pfs_warn("malformed %s push from the server", pfs_op_name(op));
}

const struct fuse_lowlevel_ops pfs_fuse_ops = {
	.init = pfs_init,
	.destroy = pfs_destroy,
	.lookup = pfs_lookup,
	.forget = pfs_forget,
	.forget_multi = pfs_forget_multi,
	.getattr = pfs_getattr,
	.setattr = pfs_setattr,
	.readlink = pfs_readlink,
	.mknod = pfs_mknod,
	.mkdir = pfs_mkdir,
	.unlink = pfs_unlink,
	.rmdir = pfs_rmdir,
	.symlink = pfs_symlink,
	.rename = pfs_rename,
	.link = pfs_link,
	.open = pfs_open,
	.create = pfs_create,
	.read = pfs_read,
	.write = pfs_write,
	.flush = pfs_flush,
	.release = pfs_release,
	.fsync = pfs_fsync,
	.opendir = pfs_opendir,
	.readdir = pfs_readdir,
	.readdirplus = pfs_readdirplus,
	.releasedir = pfs_releasedir,
	.fsyncdir = pfs_fsyncdir,
	.statfs = pfs_statfs,
	.setxattr = pfs_setxattr,
	.getxattr = pfs_getxattr,
	.listxattr = pfs_listxattr,
	.removexattr = pfs_removexattr,
	.getlk = pfs_getlk,
	.setlk = pfs_setlk,
	.flock = pfs_flock,
	.fallocate = pfs_fallocate,
	.lseek = pfs_lseek,
};
