/* ops.c: the FUSE low-level operations table of podfs, and the session's
 * init, destroy and statfs (the handlers of each kind are in ops_*.c; see
 * ops_i.h). */
#include <errno.h>
#include <string.h>
#include <sys/statvfs.h>

#include "ops_i.h"
#include "podfs/log.h"

static void ops_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	unsigned want = FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO | FUSE_CAP_DONT_MASK |
			FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS | FUSE_CAP_ATOMIC_O_TRUNC |
			FUSE_CAP_CACHE_SYMLINKS | FUSE_CAP_ASYNC_READ | FUSE_CAP_PARALLEL_DIROPS |
			FUSE_CAP_POSIX_ACL;

	/* POSIX ACLs: the kernel checks them (default_permissions alone
	 * reads only the mode, which denied what an ACL entry grants and
	 * granted a group what its entry denies, where an open or a read is
	 * answered here), caching each object's as it does its attributes:
	 * a push about the object drops both. They are the coordinator's
	 * xattrs, which its file system keeps in step with the mode. */
	conn->want |= want & conn->capable;
	/* No writeback cache yet: sizes must stay coherent across hosts.
	 * No export support: nodeids are not persistent. No automatic
	 * invalidation of a file's pages when the kernel sees its mtime
	 * move: podfs says which pages go (a push names the range another
	 * host changed, an open whose version moved drops them all; see
	 * coherence.md), and this host's own writes, which the kernel's
	 * pages already hold, move the mtime too: with it, a file written
	 * here was read back whole from the coordinator. */
	conn->want &= ~(unsigned)(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_EXPORT_SUPPORT |
				  FUSE_CAP_AUTO_INVAL_DATA);
	/* Over 128 KiB makes libfuse ask for max_pages: 1 MiB requests. */
	conn->max_write = PFS_MAX_IO;
	conn->max_readahead = PFS_MAX_IO;
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	conn->time_gran = 1;
}

static void ops_destroy(void *userdata)
{
	(void)userdata;
}

static void ops_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct client *c = CL(req);
	struct pfs_statfs_req m;
	struct pfs_statfs_rep r;
	struct rpc_reply rep = { 0 };

	fill_creds(req, &m.cr, false);
	m.fh = IP(req, ino)->fh;
	int rc = rpc_msg(c->rpc, PFS_OP_STATFS, statfs_req, &m, &rep);
	if (rc == 0 && pfs_dec_statfs_rep(rep.buf, rep.len, &r) < 0)
		rc = ops_bad_reply(req, "STATFS");
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

const struct fuse_lowlevel_ops ops_fuse_ops = {
	.init = ops_init,
	.destroy = ops_destroy,
	.lookup = ops_lookup,
	.forget = ops_forget,
	.forget_multi = ops_forget_multi,
	.getattr = ops_getattr,
	.setattr = ops_setattr,
	.readlink = ops_readlink,
	.mknod = ops_mknod,
	.mkdir = ops_mkdir,
	.unlink = ops_unlink,
	.rmdir = ops_rmdir,
	.symlink = ops_symlink,
	.rename = ops_rename,
	.link = ops_link,
	.open = ops_open,
	.create = ops_create,
	.read = ops_read,
	.write = ops_write,
	.flush = ops_flush,
	.release = ops_release,
	.fsync = ops_fsync,
	.opendir = ops_opendir,
	.readdir = ops_readdir,
	.readdirplus = ops_readdirplus,
	.releasedir = ops_releasedir,
	.fsyncdir = ops_fsyncdir,
	.statfs = ops_statfs,
	.setxattr = ops_setxattr,
	.getxattr = ops_getxattr,
	.listxattr = ops_listxattr,
	.removexattr = ops_removexattr,
	.getlk = ops_getlk,
	.setlk = ops_setlk,
	.flock = ops_flock,
	.fallocate = ops_fallocate,
	.copy_file_range = ops_copy_file_range,
	.lseek = ops_lseek,
};
