/* ofile.c: the state of the files and directories the kernel opened
 * (see ofile_i.h). */
#include "ofile_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "client_i.h"
#include "creds_i.h"
#include "inode_i.h"
#include "podfs/log.h"
#include "trust_i.h"

struct ofile *ofile_new(struct client *c, struct inode *ip, int flags)
{
	struct ofile *of = calloc(1, sizeof(*of));
	if (!of)
		return NULL;
	of->fid = atomic_fetch_add(&c->next_fid, 1);
	/* A reopen by handle must not create or truncate again. */
	of->flags = (uint32_t)flags & ~(uint32_t)(O_CREAT | O_EXCL | O_TRUNC | O_NOCTTY);
	if (ip) /* a create's is set with its inode */
		ofile_set_ip(of, ip);
	of->c = c;
	/* The lock also orders ofile_attach_lazy before the RELEASE. */
	pthread_mutex_init(&of->lock, NULL);
	pthread_mutex_lock(&c->of_lock);
	of->next = c->open_files;
	if (of->next)
		of->next->prev = of;
	c->open_files = of;
	pthread_mutex_unlock(&c->of_lock);
	return of;
}

/* A lazy open of of stops being one (attached, or gone). */
static void lazy_done(struct ofile *of)
{
	atomic_fetch_sub(&of->ip->lazy_opens, 1);
	atomic_fetch_sub(&of->c->lazy_opens, 1);
}

void ofile_free(struct ofile *of)
{
	struct client *c = of->c;
	pthread_mutex_lock(&c->of_lock);
	if (of->local && !atomic_load(&of->remote))
		lazy_done(of);
	if (of->prev)
		of->prev->next = of->next;
	else
		c->open_files = of->next;
	if (of->next)
		of->next->prev = of->prev;
	pthread_mutex_unlock(&c->of_lock);
	rpc_reply_free(&of->dir);
	free(of->rd_iflags);
	free(of->lk_owners);
	pthread_mutex_destroy(&of->lock);
	free(of);
}

void ofile_release_fid(struct client *c, fuse_req_t req, const struct pfs_fh *fh, uint64_t fid,
		       uint16_t op)
{
	struct pfs_release_req m;
	struct rpc_reply rep = { 0 };
	creds_fill(c->cc, req, &m.cr, false);
	m.fh = *fh;
	m.fid = fid;
	int rc = rpc_msg(c->rpc, op, release_req, &m, &rep);
	if (rc < 0)
		pfs_debug("%s of fid %llu: %s", pfs_op_name(op), (unsigned long long)fid,
			  strerror(-rc));
	rpc_reply_free(&rep);
}

void ofile_release(struct ofile *of, fuse_req_t req, uint16_t op)
{
	pthread_mutex_lock(&of->lock);
	bool remote = atomic_load(&of->remote);
	pthread_mutex_unlock(&of->lock);
	if (remote)
		ofile_release_fid(of->c, req, &of->ip->fh, of->fid, op);
}

void ofile_attach_lazy(struct client *c, struct inode *dir, bool dirs, const struct pfs_fh *fh,
		       int timeout_ms)
{
	if (atomic_load(&c->lazy_opens) == 0)
		return;
	pthread_mutex_lock(&c->of_lock);
	for (struct ofile *of = c->open_files; of; of = of->next) {
		if (!of->local || atomic_load(&of->remote))
			continue;
		if (fh ? !pfs_fh_equal(&of->ip->fh, fh) : !inode_may_lose_name_in(of->ip, dir, dirs))
			continue;
		pthread_mutex_lock(&of->lock);
		if (!atomic_exchange(&of->remote, true)) {
			lazy_done(of);
			struct pfs_open_req m = { .cr = of->cr, .fh = of->ip->fh, .fid = of->fid,
						  .flags = of->flags };
			uint8_t b[RPC_SMALL];
			struct pfs_wr w;
			struct rpc_reply rep = { 0 };
			int rc = -EINVAL;
			pfs_wr_init(&w, b, sizeof(b));
			uint16_t op = of->ip->is_dir ? PFS_OP_OPENDIR : PFS_OP_OPEN;
			if (pfs_enc_open_req(&w, &m) == 0)
				rc = timeout_ms ? rpc_call_timeout(c->rpc, op, b, w.len, &rep,
								   timeout_ms)
						: rpc_call(c->rpc, op, b, w.len, &rep);
			rpc_reply_free(&rep);
			if (rc < 0)
				pfs_debug("%s of a locally opened %s losing a name: %s",
					  pfs_op_name(op), of->ip->is_dir ? "directory" : "file",
					  strerror(-rc));
		}
		pthread_mutex_unlock(&of->lock);
	}
	pthread_mutex_unlock(&c->of_lock);
}

void ofile_mark_local(struct ofile *of, const struct pfs_creds *cr)
{
	struct client *c = of->c;
	/* of is on the list already: the push thread's ofile_attach_lazy
	 * reads local, and then cr, under the list's lock. */
	pthread_mutex_lock(&c->of_lock);
	of->cr = *cr;
	of->local = true;
	atomic_fetch_add(&of->ip->lazy_opens, 1);
	atomic_fetch_add(&c->lazy_opens, 1);
	pthread_mutex_unlock(&c->of_lock);
}

void ofile_note_lock_owner(struct ofile *of, uint64_t owner)
{
	pthread_mutex_lock(&of->lock);
	unsigned i = 0;
	while (i < of->nlk_owners && of->lk_owners[i] != owner)
		i++;
	if (i == of->nlk_owners) {
		if (of->nlk_owners == of->lk_cap) {
			unsigned cap = of->lk_cap ? 2 * of->lk_cap : 4;
			uint64_t *v = realloc(of->lk_owners, cap * sizeof(*v));
			if (!v) {
				pthread_mutex_unlock(&of->lock);
				pfs_warn("out of memory: a lock taken through an open file may outlive it");
				return;
			}
			of->lk_owners = v;
			of->lk_cap = cap;
		}
		of->lk_owners[of->nlk_owners++] = owner;
	}
	pthread_mutex_unlock(&of->lock);
}

void ofile_flushed_owner(struct ofile *of, uint64_t owner)
{
	pthread_mutex_lock(&of->lock);
	for (unsigned i = 0; i < of->nlk_owners; i++)
		if (of->lk_owners[i] == owner) {
			of->lk_owners[i] = of->lk_owners[--of->nlk_owners];
			break;
		}
	pthread_mutex_unlock(&of->lock);
}

uint64_t *ofile_take_lock_owners(struct ofile *of, unsigned *n)
{
	pthread_mutex_lock(&of->lock);
	uint64_t *v = of->nlk_owners ? of->lk_owners : NULL;
	*n = of->nlk_owners;
	if (v) {
		of->lk_owners = NULL;
		of->nlk_owners = of->lk_cap = 0;
	}
	pthread_mutex_unlock(&of->lock);
	return v;
}

uint64_t ofile_fid(struct ofile *of)
{
	if (!atomic_load_explicit(&of->remote, memory_order_relaxed) &&
	    !atomic_exchange(&of->remote, true) && of->local)
		lazy_done(of);
	return of->fid;
}

void ofile_free_all(struct client *c)
{
	while (c->open_files)
		ofile_free(c->open_files);
}
