/* creds.c: caller credentials with a short per-pid group cache. */
#include "creds_i.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "podfs/clock.h"
#include "podfs/log.h"

#define SLOTS 64          /* direct-mapped by pid */
#define TTL_NS 1000000000LL

struct slot {
	pid_t pid;
	uid_t uid;
	gid_t gid;
	int64_t stamp;    /* CLOCK_MONOTONIC ns; 0 = empty */
	uint16_t ngroups;
	uint32_t groups[PFS_GROUPS_MAX];
};

struct creds_cache {
	pthread_mutex_t lock;
	struct slot slots[SLOTS];
};

int creds_cache_new(struct creds_cache **out)
{
	struct creds_cache *cc = calloc(1, sizeof(*cc));
	if (!cc)
		return -ENOMEM;
	pthread_mutex_init(&cc->lock, NULL);
	*out = cc;
	return 0;
}

void creds_cache_free(struct creds_cache *cc)
{
	if (!cc)
		return;
	pthread_mutex_destroy(&cc->lock);
	free(cc);
}

void creds_fill(struct creds_cache *cc, fuse_req_t req, struct pfs_creds *cr, bool groups)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	cr->uid = ctx->uid;
	cr->gid = ctx->gid;
	cr->ngroups = 0;
	if (!groups || ctx->pid <= 0)
		return;

	struct slot *s = &cc->slots[(unsigned)ctx->pid % SLOTS];
	int64_t now = pfs_mono_ns();
	pthread_mutex_lock(&cc->lock);
	if (s->stamp && s->pid == ctx->pid && s->uid == ctx->uid && s->gid == ctx->gid &&
	    now - s->stamp < TTL_NS) {
		cr->ngroups = s->ngroups;
		memcpy(cr->groups, s->groups, s->ngroups * sizeof(uint32_t));
		pthread_mutex_unlock(&cc->lock);
		return;
	}
	pthread_mutex_unlock(&cc->lock);

	gid_t list[PFS_GROUPS_MAX];
	int n = fuse_req_getgroups(req, PFS_GROUPS_MAX, list);
	if (n < 0)
		return; /* no /proc entry (the caller is gone): uid/gid only */
	if (n > PFS_GROUPS_MAX) {
		/* The kernel here checked the whole list (default_permissions);
		 * the coordinator sees the first PFS_GROUPS_MAX only. */
		static atomic_bool warned;
		if (!atomic_exchange(&warned, true))
			pfs_warn("a caller (uid %u) is in %d supplementary groups: podfs sends "
				 "the coordinator the first %d, which refuses what only the "
				 "others would allow (logged once)",
				 (unsigned)ctx->uid, n, PFS_GROUPS_MAX);
		n = PFS_GROUPS_MAX;
	}
	cr->ngroups = (uint16_t)n;
	for (int i = 0; i < n; i++)
		cr->groups[i] = list[i];

	pthread_mutex_lock(&cc->lock);
	s->pid = ctx->pid;
	s->uid = ctx->uid;
	s->gid = ctx->gid;
	s->stamp = now;
	s->ngroups = cr->ngroups;
	memcpy(s->groups, cr->groups, cr->ngroups * sizeof(uint32_t));
	pthread_mutex_unlock(&cc->lock);
}
