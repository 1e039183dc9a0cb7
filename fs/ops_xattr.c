/* ops_xattr.c: FUSE operations on extended attributes, and the
 * user.podfs.stats xattr of the mount's root (see ops_i.h). */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deleg_i.h"
#include "dirdeleg_i.h"
#include "gate_i.h"
#include "ops_i.h"
#include "pcache_i.h"
#include "stats_i.h"
#include "podfs/log.h"
#include "trust_i.h"
#include "wb_i.h"

static int set_xname(struct pfs_xname *n, const char *s)
{
	size_t len = strlen(s);
	if (len == 0 || len > PFS_XATTR_NAME_MAX)
		return -ERANGE;
	n->len = (uint16_t)len;
	memcpy(n->s, s, len + 1);
	return 0;
}

/* This client's own change of ino's xattrs is about to be sent: the
 * absences known and the trust of its attributes go (the own change
 * counted first: see inode_note_absent). Fills the request's *cr and
 * *fh; returns the change's stamp for own_xattr_end. */
static uint64_t own_xattr_change(fuse_req_t req, fuse_ino_t ino, const char *name,
				 struct pfs_creds *cr, struct pfs_fh *fh)
{
	struct inode *ip = IP(req, ino);

	/* An access ACL changes the rights, checked at open: what this host
	 * opened without the daemon is opened there first (ofile_i.h). */
	if (strcmp(name, "system.posix_acl_access") == 0)
		ofile_attach_lazy(CL(req), NULL, false, &ip->fh, 0);

	/* An ACL changes what chmod means: no delegation past it. */
	if (CL(req)->dl)
		deleg_end(CL(req)->dl, ip);
	/* And what a create answered here would make. */
	if (CL(req)->dd)
		dirdeleg_dir_changed(CL(req)->dd, ip);
	uint64_t at = inode_own_touch(CL(req)->it, ip, false);
	inode_clear_nocaps(ip);
	fill_creds(req, cr, true);
	*fh = ip->fh;
	return at;
}

/* The change of own_xattr_change (stamp at) ended: its ctime moved, and
 * the reply does not say to what: the kernel asks for the attributes,
 * and they come from the daemon; what was read of them meanwhile is
 * not trusted. */
static void own_xattr_end(fuse_req_t req, fuse_ino_t ino, uint64_t at)
{
	inode_own_end(CL(req)->it, IP(req, ino), NULL, 0, at, 0);
}

/* The own xattr change of ino was answered: an answer to a request that
 * overlapped it (a GETXATTR, a listing) may have been read before the
 * change was made; its absences are forgotten, and none is noted from
 * such answers any more. */
static void own_xattr_done(fuse_req_t req, fuse_ino_t ino)
{
	struct inode *ip = IP(req, ino);

	inode_own_touch(CL(req)->it, ip, false);
	inode_clear_nocaps(ip);
}

void ops_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
		  size_t size, int flags)
{
	struct client *c = CL(req);
	struct pfs_setxattr_req m;
	struct rpc_reply rep = { 0 };
	int rc;

	uint64_t at = own_xattr_change(req, ino, name, &m.cr, &m.fh);
	m.flags = (uint32_t)flags;
	m.value.p = (const uint8_t *)value;
	m.value.len = (uint32_t)size;
	if (size > PFS_XATTR_SIZE_MAX)
		rc = -E2BIG;
	else if ((rc = set_xname(&m.name, name)) == 0) {
		ops_dir_busy(c, IP(req, ino), 1); /* the kernel holds its lock */
		rc = rpc_msg_heap(c->rpc, PFS_OP_SETXATTR, setxattr_req, &m, size + RPC_SMALL,
				  &rep);
		ops_dir_busy(c, IP(req, ino), -1);
		own_xattr_done(req, ino);
	}
	own_xattr_end(req, ino, at);
	rpc_reply_free(&rep);
	fuse_reply_err(req, -rc);
}

/* Replies to GETXATTR/LISTXATTR: the size for a size query, else the value. */
static void finish_xattr(fuse_req_t req, size_t size, int rc, struct rpc_reply *rep)
{
	struct pfs_xattr_rep r;

	if (rc == 0 && pfs_dec_xattr_rep(rep->buf, rep->len, &r) < 0)
		rc = ops_bad_reply(req, "xattr");
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
	const size_t cap = STATS_MAX;
	char *buf = malloc(cap);

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	int n = stats_format(CL(req), buf, cap, false);
	if (n < 0)
		fuse_reply_err(req, -n);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else if ((size_t)n > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

void ops_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
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
	 * this client's own xattr change forgets it; a push about the object
	 * received but not applied yet (acknowledged: its change may have
	 * returned on another host) sends the question to the daemon. A
	 * dropped connection does not: like the attributes, the absence
	 * stands until the reconnect's revalidation says otherwise. */
	if ((caps && inode_nocaps(ip)) || (nox && inode_noxattr(ip, nox))) {
		gate_enter(c->gate);
		bool pending = gate_push_pending(c->gate, &ip->fh);
		gate_leave(c->gate);
		if (!pending) {
			fuse_reply_err(req, ENODATA);
			return;
		}
	}
	fill_creds(req, &m.cr, true);
	m.fh = ip->fh;
	m.size = (uint32_t)(size > PFS_XATTR_SIZE_MAX ? PFS_XATTR_SIZE_MAX : size);
	uint64_t ns, any = inode_own_snap(c->it, &ns);
	uint64_t seq = gate_seq(c->gate);
	if ((rc = set_xname(&m.name, name)) == 0)
		rc = rpc_msg(c->rpc, PFS_OP_GETXATTR, getxattr_req, &m, &rep);
	/* The absence is remembered only if no push about the object came
	 * since the request was sent: another host's setxattr meanwhile
	 * would otherwise be hidden for attr_timeout. */
	if ((caps || nox) && rc == -ENODATA) {
		gate_enter(c->gate);
		if (!gate_pushed_since(c->gate, seq, &ip->fh))
			inode_note_absent(c->it, ip, nox, caps, c->attr_timeout, any);
		gate_leave(c->gate);
	}
	finish_xattr(req, size, rc, &rep);
}

void ops_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
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

void ops_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct client *c = CL(req);
	struct pfs_removexattr_req m;
	struct rpc_reply rep = { 0 };
	int rc;

	uint64_t at = own_xattr_change(req, ino, name, &m.cr, &m.fh);
	if ((rc = set_xname(&m.name, name)) == 0) {
		ops_dir_busy(c, IP(req, ino), 1); /* the kernel holds its lock */
		rc = rpc_msg(c->rpc, PFS_OP_REMOVEXATTR, removexattr_req, &m, &rep);
		ops_dir_busy(c, IP(req, ino), -1);
		own_xattr_done(req, ino);
	}
	own_xattr_end(req, ino, at);
	rpc_reply_free(&rep);
	fuse_reply_err(req, -rc);
}
