/* ops_dir.c: FUSE operations on open directories: opendir, readdir,
 * readdirplus, releasedir, fsyncdir (see ops_i.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cache_i.h"
#include "dirdeleg_i.h"
#include "gate_i.h"
#include "listing_i.h"
#include "lsfetch_i.h"
#include "ops_i.h"
#include "podfs/log.h"
#include "transport_i.h"
#include "trust_i.h"

/* Bytes of READDIR reply asked for at once; the kernel takes them a page
 * at a time from the open directory's buffer. */
#define READDIR_BYTES (128u * 1024)

/* Subdirectories of one READDIRPLUS reply whose listings are fetched
 * ahead (lsfetch_ahead), at most: the queue keeps those a walk meets
 * first anyway. */
#define AHEAD_BATCH 256

/* Whether directories may be read from listings (readdir_listed): the
 * server has LISTDIR and is reachable, with its cookies in them. */
static bool listings_usable(struct client *c)
{
	return c->max_inline && !cache_nosys(c->cache, PFS_OP_LISTDIR) && rpc_is_up(c->rpc) &&
	       transport_list_cookies(c->tr);
}

void ops_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct client *c = CL(req);
	struct inode *ip = IP(req, ino);
	struct ops_opened o;
	struct pfs_creds cr;
	struct ofile *of;

	if (!(of = ofile_new(c, ip, fi->flags))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fill_creds(req, &cr, true);
	/* A walk opens the directory whose listing it queued a moment ago:
	 * with that listing, the daemon's leave to read it is known, and
	 * both this open and the READDIR after it are answered locally. */
	if (c->max_inline && lsfetch_pending(ip)) {
		lsfetch_settle(c->lf, ip, &cr);
	} else if (listings_usable(c) && listing_fetch_begin(ip, LIST_DIR_MAX_SIZE, 0, 0)) {
		/* Nothing queued it (a lone ls; a walk whose lookups the
		 * kernel answered itself, as after an ls -l of the parent):
		 * the READDIR after this open would fetch the listing anyway.
		 * Fetched first, it answers the open too: one round trip, not
		 * an OPENDIR, a LISTDIR and a RELEASEDIR. */
		lsfetch_open(c->lf, ip, &cr);
		listing_fetch_end(ip);
	}
	if (ops_open_locally(req, ip, fi, true)) {
		/* Made known to the daemon if another host removes it while
		 * open here (ofile_i.h), as a file is. */
		ofile_mark_local(of, &cr);
		goto reply;
	}
	if (ops_open_remote(req, of, fi, PFS_OP_OPENDIR, &o) < 0)
		return;
	inode_set_attr(ip, &o.attr, o.seq);
	inode_trust_attr(c->it, ip, o.seq, o.any, o.ns);
	inode_note_reader(ip, o.cr.uid, o.cr.gid);
reply:
	/* The server pushes an invalidation of the directory on every
	 * change, which drops the kernel's cached listing. This kernel
	 * drops cache_readdir at every opendir unless keep_cache is set too:
	 * it is not between a drop of the connection, which may have lost
	 * pushes, and the end of the revalidation after it. */
	fi->cache_readdir = 1;
	fi->keep_cache = cache_current(c->cache);
	fi->fh = (uint64_t)(uintptr_t)of;
	if (fuse_reply_open(req, fi) != 0) {
		ofile_release(of, req, PFS_OP_RELEASEDIR);
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
	free(of->rd_iflags);
	of->rd_iflags = NULL;
	of->rd_valid = false;
	of->rd_synth = false;
	of->rd_paged = true;
	of->rd_idx = 0;
	of->rd_any = inode_own_snap(c->it, &of->rd_ns);
	of->rd_seq = gate_seq(c->gate);
	ops_file_req(req, of, &m.cr, &m.fh, &m.fid);
	m.offset = off;
	m.max_bytes = READDIR_BYTES;
	m.plus = plus;
	rc = rpc_msg(c->rpc, PFS_OP_READDIR, readdir_req, &m, &of->dir);
	if (rc < 0)
		return rc;
	pfs_rd_init(&of->rd, of->dir.buf, of->dir.len);
	if (!pfs_get_U8(&of->rd, &eof)) {
		rpc_reply_free(&of->dir);
		return ops_bad_reply(req, "READDIR");
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

/* Whether dir's listing (li, its parent's push number pseq) may answer a
 * reading from offset 0: every frame the server sent was handled, and no
 * push about dir came since (one about it makes the listing stale). */
static bool listed_current(struct client *c, struct inode *dir, const struct listing_info *li,
			   uint64_t pseq)
{
	if (!transport_quiet(c->tr))
		return false;
	gate_enter(c->gate);
	bool stale = gate_pushed_since(c->gate, li->seq, &dir->fh);
	bool parent_stale = gate_pushed_since(c->gate, pseq, &dir->fh);
	gate_leave(c->gate);
	if (stale)
		listing_stale(dir);
	return !stale && !parent_stale;
}

/* Cold start: READDIR answered from the directory's complete listing
 * (fetched now if it has none and is small), while it is coherent as for
 * lookup_listed: no READDIR round trips, and the daemon never opens the
 * directory (no RELEASEDIR). Sets of's chunk to the whole listing, with
 * the server's own cookies (wire_list.h: a reading that goes on at one
 * of them later, in this open or another, goes on at the server where it
 * left off) and entries (readdirplus too): of->rd_synth; and returns
 * true; false to ask the server. At offset 0, with of->lock held. */
static bool readdir_listed(fuse_req_t req, struct ofile *of)
{
	struct client *c = CL(req);
	struct inode *dir = of->ip;
	struct listing_info li;
	struct pfs_creds cr;
	uint64_t pseq;
	uint32_t *iflags;
	uint8_t *buf, eof;
	size_t len;

	/* Without the server's cookies a listing answers no readdir
	 * (listing_readdir): none is fetched for it. */
	if (!listings_usable(c))
		return false;
	/* Without contents: whoever lists a directory (find, ls -l, a
	 * walk, Python's import path cache) mostly reads no file in it, and
	 * reading them all from a cold disk tripled find's cold time. A
	 * file read later costs its READ; one looked up first rides along
	 * as before (LISTDIR at the lookup, LOOKUP_DATA). */
	if (listing_fetch_begin(dir, LIST_DIR_MAX_SIZE, 0, 0)) {
		fill_creds(req, &cr, true);
		ops_fetch_listing(req, dir, &cr, 0);
		listing_fetch_end(dir);
	} else if (!cache_nosys(c->cache, PFS_OP_LISTDIR_PAGE) &&
		   listing_fetch_begin(dir, LIST_PAGED_MAX_SIZE, 0, 0)) {
		/* A larger one read from the start is read whole: in pages,
		 * which cost the daemon what READDIRPLUS does, and whose items
		 * say which xattrs `ls -l` asks for next are absent; the
		 * lookups after it are answered from it too. */
		fill_creds(req, &cr, true);
		ops_fetch_listing_pages(req, dir, &cr);
		listing_fetch_end(dir);
	}
	if (listing_readdir(c->it, dir, &buf, &len, &iflags, &li, &pseq) < 0)
		return false;
	if (!listed_current(c, dir, &li, pseq)) {
		free(iflags);
		free(buf);
		return false;
	}
	rpc_reply_free(&of->dir);
	free(of->rd_iflags);
	of->rd_iflags = iflags;
	of->dir.buf = buf;
	of->dir.len = len;
	pfs_rd_init(&of->rd, buf, len);
	(void)pfs_get_U8(&of->rd, &eof);
	of->rd_eof = true;
	of->rd_off = 0;
	of->rd_plus = true;
	of->rd_valid = true;
	of->rd_synth = true;
	of->rd_idx = 0;
	of->rd_seq = li.seq;
	of->rd_any = li.any;
	of->rd_ns = li.own_ns;
	lsfetch_walked(c->lf); /* paces the listings fetched ahead */
	/* A directory too big for one listing (listed in pages), read
	 * whole: more subdirectories than one READDIR reply queues ahead;
	 * those a walk looks up next get theirs fetched ahead
	 * (lookup_listed), as in a directory read from the daemon
	 * (do_readdir notes the walk). */
	pthread_mutex_lock(&dir->lock);
	of->rd_paged = dir->attr.size > LIST_DIR_MAX_SIZE;
	pthread_mutex_unlock(&dir->lock);
	return true;
}

/* Moves a readdir_listed chunk's position to just after the entry whose
 * cookie is off: true, or false if none has it (the position is then
 * the chunk's start). The cookies are the server's, in its order, but
 * not necessarily increasing. */
static bool synth_seek(struct ofile *of, uint64_t off)
{
	struct pfs_rd rd;
	struct pfs_dirent de;
	uint8_t eof;
	size_t idx = 0;

	pfs_rd_init(&rd, of->dir.buf, of->dir.len);
	(void)pfs_get_U8(&rd, &eof);
	of->rd = rd;
	of->rd_off = 0;
	of->rd_idx = 0;
	while (pfs_dec_dirent(&rd, &de) == 1) {
		idx++;
		if (de.next_off == off) {
			of->rd = rd;
			of->rd_off = off;
			of->rd_idx = idx;
			return true;
		}
	}
	return false;
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
	struct inode *ahead[AHEAD_BATCH];
	size_t nahead = 0;
	struct pfs_creds cr; /* for the listings fetched ahead */

	char *buf = malloc(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_lock(&of->lock);
	if (off == 0) /* a reading starts (again) */
		of->rd_order = (struct lsfetch_order){ 0, 0 };
	/* A plain READDIR can use a READDIRPLUS chunk (the kernel asks
	 * with plus only at offset 0 under READDIRPLUS_AUTO). */
	if (of->rd_synth && off != 0 && (of->rd_off == (uint64_t)off || synth_seek(of, (uint64_t)off))) {
		/* Going on in the listing. (A cookie it does not have, as
		 * after a seekdir, is the server's to go on from.) */
	} else if (!of->rd_valid || of->rd_off != (uint64_t)off || (plus && !of->rd_plus)) {
		if (off != 0 || !readdir_listed(req, of))
			rc = dir_fetch(req, of, (uint64_t)off, plus);
		fresh = true;
	}
	/* A directory read in pages, by a walk: the subdirectories it looks
	 * up in it next get their listings fetched ahead (ops_lookup,
	 * lookup_listed: while inode_walked). Each READDIR of the reading
	 * says it goes on, as each such lookup does: a reading slowed down
	 * (a loaded machine) between two pages would otherwise stop counting
	 * as a walk, and its later chunks would queue what it looks up. */
	if (rc == 0 && of->rd_paged)
		inode_note_walk(of->ip);
	/* Subdirectories are fetched ahead from a READDIRPLUS, and from a
	 * plain READDIR of a listing: under READDIRPLUS_AUTO the kernel asks
	 * with plus only for a directory's first chunk, and a walk then
	 * looks up and opens the subdirectories of the rest. In a directory
	 * read in pages (rd_paged: the walk's lookups there
	 * queue the subdirectories it opens and the next ones, in its
	 * order: lsfetch_walk_on), only those of the first reply: the rest
	 * would queue thousands at once, most dropped from the queue or
	 * fetched long before the walk got there and given back unused
	 * (LSF_PARK_NS), then fetched again. */
	bool ahead_ok = c->max_inline && (plus || of->rd_synth) && (off == 0 || !of->rd_paged);
	if (ahead_ok)
		fill_creds(req, &cr, true);
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
			rc = ops_bad_reply(req, "READDIR");
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
			 * was asked for, nor a file with several links after
			 * an unlink or rename of ours (the kernel looks it up
			 * instead). */
			if ((de.flags & PFS_DE_HAS_ENTRY) && !is_dot(&de.name) &&
			    !inode_listed_stale(c->it, &de.e.fh, of->rd_any) &&
			    inode_listed_current(c->it, &de.e.attr, of->rd_ns))
				ip = ops_entry_param(c, of->ip, de.name.s, of->rd_seq, &de.e, &e,
						    NULL);
			if (!ip) {
				e.attr.st_ino = de.ino;
				e.attr.st_mode = de.mode;
			} else if (dir_pushed || gate_pushed_since(c->gate, of->rd_seq, &ip->fh)) {
				e.entry_timeout = 0;
				e.attr_timeout = 0;
			} else if (of->rd_synth && of->rd_iflags) {
				/* The xattrs `ls -l` asks for next, known absent. */
				ops_listed_absent(c, ip, of->rd_iflags[of->rd_idx], of->rd_any);
			}
			n = fuse_add_direntry_plus(req, buf + pos, size - pos, de.name.s, &e,
						   (off_t)de.next_off);
			if (n > size - pos && ip) {
				inode_forget(c->it, ip, 1); /* not handed to the kernel */
			} else if (ip) {
				inode_note_name(of->ip, de.name.s);
				inode_trust_attr(c->it, ip, of->rd_seq, of->rd_any, of->rd_ns);
				/* The walk opens it next: its listing is fetched
				 * ahead (held here: the kernel may forget it as
				 * soon as it has the reply). */
				if (S_ISDIR(de.e.attr.mode) && nahead < AHEAD_BATCH && ahead_ok) {
					inode_hold(c->it, ip);
					ahead[nahead++] = ip;
				}
			}
		} else {
			struct stat st;
			memset(&st, 0, sizeof(st));
			st.st_ino = de.ino;
			st.st_mode = de.mode;
			n = fuse_add_direntry(req, buf + pos, size - pos, de.name.s, &st,
					      (off_t)de.next_off);
			/* A subdirectory listed here, not handed to the kernel:
			 * its inode is made (held here) for its listing to be
			 * fetched ahead, as after a READDIRPLUS. */
			if (n <= size - pos && ahead_ok && S_ISDIR(de.mode) &&
			    (de.flags & PFS_DE_HAS_ENTRY) && !is_dot(&de.name) &&
			    nahead < AHEAD_BATCH && !dir_pushed &&
			    !inode_listed_stale(c->it, &de.e.fh, of->rd_any)) {
				struct inode *ip = inode_hold_entry(c->it, &de.e);
				if (ip)
					ahead[nahead++] = ip;
			}
		}
		if (n > size - pos) {
			of->rd = save; /* the kernel asks for it next time */
			break;
		}
		pos += n;
		of->rd_off = de.next_off;
		of->rd_idx++;
	}
	/* Queued before the reply: the walk's OPENDIR of one of them may
	 * follow at once, on another thread, and must find it queued. */
	if (nahead)
		lsfetch_ahead(c->lf, ahead, nahead, &cr, &of->rd_order);
	if (rc < 0 && pos == 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_buf(req, buf, pos);
	gate_leave(c->gate);
	pthread_mutex_unlock(&of->lock);
	free(buf);
}

void ops_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		 struct fuse_file_info *fi)
{
	(void)ino;
	do_readdir(req, size, off, fi, false);
}

void ops_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	(void)ino;
	do_readdir(req, size, off, fi, true);
}

void ops_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ofile *of = OF(fi);
	(void)ino;
	ofile_release(of, req, PFS_OP_RELEASEDIR);
	ofile_free(of);
	fuse_reply_err(req, 0);
}

void ops_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct client *c = CL(req);

	(void)datasync;
	(void)fi;
	/* Directory operations are synchronous on the server, once sent:
	 * the unlinks and creates answered under a directory delegation
	 * are sent first, and an error of one here is reported now. So is
	 * the data of the files made there, whose close did not wait for
	 * it: a process beside podfs on the coordinator, which recalls
	 * nothing, reads them whole after. */
	fuse_reply_err(req, c->dd ? -dirdeleg_sync(c->dd, IP(req, ino)) : 0);
}
