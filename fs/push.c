/* push.c: what the server's pushes do here (see push_i.h). */
#include "push_i.h"

#include <fuse_lowlevel.h>

#include "client_i.h"
#include "deleg_i.h"
#include "dirdeleg_i.h"
#include "gate_i.h"
#include "inode_i.h"
#include "ofile_i.h"
#include "podfs/log.h"
#include "pushq_i.h"

/* A call made while applying a push delays its acknowledgement, which the
 * daemon waits for (2 s at most, then it drops the connection): it gives
 * up waiting after this long. The request still reaches the daemon. */
#define PUSH_CALL_MS 500

uint64_t push_note(struct client *c, uint16_t op, const uint8_t *payload, size_t len,
		   bool *applied_first, uint64_t *name_key)
{
	struct pfs_inval_inode_push ii;
	struct pfs_inval_entry_push ie;
	fuse_ino_t nodeid;
	bool is_dir;

	*applied_first = false;
	if (op == PFS_OP_INVAL_INODE && pfs_dec_inval_inode_push(payload, len, &ii) == 0) {
		/* Data of a file the kernel knows (pushq_i.h); or the
		 * attributes of an object opened here without the daemon:
		 * applying the push opens it there (ofile_attach_lazy), which
		 * the daemon may wait for before a change of its rights
		 * (daemon/rights_i.h). */
		*applied_first = ii.offset >= 0
			? inode_find_nodeid(c->it, &ii.fh, &nodeid, &is_dir) && !is_dir
			: inode_lazily_open(c->it, &ii.fh);
		return gate_note_push(c->gate, &ii.fh);
	}
	if (op == PFS_OP_INVAL_ENTRY && pfs_dec_inval_entry_push(payload, len, &ie) == 0) {
		uint64_t ph, nh;
		if (inode_name_of(c->it, &ie.parent, &ph, &nh))
			*name_key = pushq_name_key(ph, nh);
		return gate_note_push(c->gate, &ie.parent);
	}
	return 0;
}

static void apply(struct client *c, uint16_t op, const uint8_t *payload, size_t len,
		  uint64_t seq)
{
	fuse_ino_t nodeid;

	switch (op) {
	case PFS_OP_INVAL_INODE: {
		struct pfs_inval_inode_push m;
		if (pfs_dec_inval_inode_push(payload, len, &m) < 0)
			goto bad;
		bool is_dir = false;
		if (!inode_find(c->it, &m.fh, m.offset >= 0, &nodeid, &is_dir, seq))
			return;
		/* Its attributes changed (a link count: the last name of a
		 * file may be gone, or a directory removed): opens made here
		 * without the daemon are made known to it (ofile_i.h). */
		if (m.offset < 0)
			ofile_attach_lazy(c, NULL, false, &m.fh, PUSH_CALL_MS);
		/* A directory's listing goes too, cached by the kernel
		 * (cache_readdir): a move to another parent changes only the
		 * directory's ctime, and its "..". */
		if (m.offset < 0 && is_dir) {
			m.offset = 0;
			m.length = 0;
		}
		fuse_lowlevel_notify_inval_inode(c->se, nodeid, m.offset, m.length);
		return;
	}
	case PFS_OP_INVAL_ENTRY: {
		struct pfs_inval_entry_push m;
		if (pfs_dec_inval_entry_push(payload, len, &m) < 0)
			goto bad;
		/* This also drops a negative entry of the name. */
		if (inode_find(c->it, &m.parent, false, &nodeid, NULL, seq))
			fuse_lowlevel_notify_inval_entry(c->se, nodeid, m.name.s, m.name.len);
		return;
	}
	case PFS_OP_RECALL: {
		struct pfs_recall_push m;
		if (pfs_dec_recall_push(payload, len, &m) < 0)
			goto bad;
		/* Acknowledged once this returns (pushq_i.h): the daemon
		 * then has what the delegations answered. */
		if (c->dl)
			deleg_recall(c->dl, &m.fh);
		if (c->dd)
			dirdeleg_recall(c->dd);
		return;
	}
	default:
		pfs_debug("ignoring push %s", pfs_op_name(op));
		return;
	}
bad:
	pfs_warn("malformed %s push from the server", pfs_op_name(op));
}

void push_early(struct client *c, uint16_t op, const uint8_t *payload, size_t len)
{
	struct pfs_inval_inode_push m;
	fuse_ino_t nodeid;

	if (op != PFS_OP_INVAL_INODE || pfs_dec_inval_inode_push(payload, len, &m) < 0)
		return;
	if (inode_find_nodeid(c->it, &m.fh, &nodeid, NULL))
		fuse_lowlevel_notify_inval_inode(c->se, nodeid, -1, 0);
}

void push_apply(struct client *c, uint16_t op, const uint8_t *payload, size_t len, uint64_t seq)
{
	apply(c, op, payload, len, seq);
	if (seq)
		gate_set_applied(c->gate, seq);
}
