/* dirdeleg_lost.c: a create answered here whose slot the coordinator
 * lost, made again by name (see dirdeleg_base_i.h, dd_make_again).
 *
 * A slot is an O_TMPFILE the coordinator holds open for the session
 * (docs/delegation.md, "Slots"). When the coordinator restarts, or the
 * session ends while this host is away, its slots go with it, and a
 * CREATES item still queued here (or in flight, its reply lost) gets
 * ESTALE. The file's close has returned 0 by then, and the item holds
 * what the coordinator needs to make it: the name, the caller, the mode,
 * the first bytes, the close and the attributes answered here. So the
 * item is made the usual way: CREATE with O_EXCL, WRITE of its bytes,
 * SETATTR of its times and attributes, FSYNC of the bytes (the client
 * keeps no copy once the item is answered), RELEASE if it was closed.
 * The file then has another handle than the slot's, which the inode keeps
 * as its name for it: every request maps it (fhmap_i.h).
 *
 * The name may be there already: the coordinator that died had named the
 * slot before its reply was lost. The file found under the name is then
 * the slot's own (the same handle, its bytes and attributes written
 * before the link), and the item is done. Any other file there is another
 * host's (the directory is not held any more): EEXIST, reported as a
 * refused create is. */
#include "dirdeleg_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "client_i.h"
#include "dirdeleg_base_i.h"
#include "fhmap_i.h"
#include "inode_i.h"
#include "ops_i.h"
#include "podfs/log.h"
#include "rpc_i.h"

/* The file named it->m.name, if it is the slot's: 1 with *fa, or
 * -EEXIST. */
static int named_before(struct dirdeleg *d, struct ditem *it, struct pfs_attr *fa)
{
	struct pfs_lookup_req m = { .cr = it->m.cr, .parent = it->m.parent, .name = it->m.name };
	struct rpc_reply rep = { 0 };
	struct pfs_entry_rep er;
	int rc = rpc_msg(d->c->rpc, PFS_OP_LOOKUP, lookup_req, &m, &rep);

	if (rc == 0 && pfs_dec_entry_rep(rep.buf, rep.len, &er) < 0)
		rc = -EIO;
	rpc_reply_free(&rep);
	if (rc < 0 || !pfs_fh_equal(&er.e.fh, &it->slot))
		return -EEXIST;
	*fa = er.e.attr;
	return 1;
}

int dd_make_again(struct dirdeleg *d, struct ditem *it, const struct pfs_setattr_req *sa,
		  struct pfs_attr *fa)
{
	struct client *c = d->c;
	struct rpc_reply rep = { 0 };
	struct pfs_entry_rep er;
	struct pfs_attr da;
	bool have_da;
	uint32_t mkflags;
	/* The item's open, or one of its own to be closed after. */
	uint64_t fid = it->fid ? it->fid : atomic_fetch_add(&c->next_fid, 1);
	bool release = it->closed || !it->fid;
	uint32_t oflags = it->flags & ~(uint32_t)(O_CREAT | O_EXCL | O_TRUNC);
	struct pfs_create_req m = { .cr = it->m.cr, .parent = it->m.parent, .name = it->m.name,
				    .fid = fid, .flags = oflags | O_CREAT | O_EXCL,
				    .mode = S_IFREG | (it->mode & 07777), .umask = 0 };

	int rc = rpc_msg(c->rpc, PFS_OP_CREATE, create_req, &m, &rep);
	if (rc == 0 && ops_dec_entry(&rep, &er, &da, &have_da, &mkflags) < 0)
		rc = -EIO;
	rpc_reply_free(&rep);
	if (rc == -EEXIST)
		return named_before(d, it, fa);
	if (rc < 0)
		return rc;
	/* A file delegation the CREATE may have brought is not used: the
	 * daemon's recall of it is answered at once (deleg_recall). */
	*fa = er.e.attr;
	if (!pfs_fh_equal(&er.e.fh, &it->file->fh) && (rc = fhmap_put(c->fm, &it->file->fh, &er.e.fh)) < 0)
		goto out;
	if (it->dlen) {
		struct pfs_write_req w = { .cr = it->m.cr, .fh = er.e.fh, .fid = fid, .flags = oflags,
					   .offset = 0, .data = { .p = it->data, .len = it->dlen } };
		struct pfs_write_rep wr;
		rc = rpc_msg_heap(c->rpc, PFS_OP_WRITE, write_req, &w, it->dlen + 1024, &rep);
		if (rc == 0 && (pfs_dec_write_rep(rep.buf, rep.len, &wr) < 0 || wr.written != it->dlen))
			rc = -EIO;
		if (rc == 0)
			*fa = wr.attr;
		rpc_reply_free(&rep);
		if (rc < 0)
			goto out;
	}
	if (sa) {
		struct pfs_setattr_req s = *sa;
		struct pfs_attr_rep ar;
		s.cr = it->m.cr;
		s.fh = er.e.fh;
		s.fid = 0;
		rc = rpc_msg(c->rpc, PFS_OP_SETATTR, setattr_req, &s, &rep);
		if (rc == 0 && pfs_dec_attr_rep(rep.buf, rep.len, &ar) < 0)
			rc = -EIO;
		if (rc == 0)
			*fa = ar.attr;
		rpc_reply_free(&rep);
		if (rc < 0)
			goto out;
	}
	if (it->dlen) {
		struct pfs_fsync_req f = { .cr = it->m.cr, .fh = er.e.fh, .fid = fid, .datasync = 1 };
		rc = rpc_msg(c->rpc, PFS_OP_FSYNC, fsync_req, &f, &rep);
		rpc_reply_free(&rep);
	}
out:
	if (release) {
		struct pfs_release_req r = { .cr = it->m.cr, .fh = er.e.fh, .fid = fid };
		(void)rpc_msg(c->rpc, PFS_OP_RELEASE, release_req, &r, &rep);
		rpc_reply_free(&rep);
	}
	return rc;
}
