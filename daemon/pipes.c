/* pipes.c: the pool of pipes for zero-copy READ replies (pipes_i.h). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "podfs/log.h"
#include "podfs/wire.h"
#include "pipes_i.h"

void pipes_init(struct pipes *pp)
{
	pthread_mutex_init(&pp->lock, NULL);
	pp->n = 0;
	pp->out = 0;
	pp->off = false;
}

void pipes_fini(struct pipes *pp)
{
	for (unsigned i = 0; i < pp->n; i++) {
		close(pp->fds[i][0]);
		close(pp->fds[i][1]);
	}
	pp->n = 0;
	pthread_mutex_destroy(&pp->lock);
}

int pipes_get(struct pipes *pp, int p[2])
{
	int sz;

	pthread_mutex_lock(&pp->lock);
	if (pp->off) {
		pthread_mutex_unlock(&pp->lock);
		return -1;
	}
	if (pp->n) {
		pp->n--;
		p[0] = pp->fds[pp->n][0];
		p[1] = pp->fds[pp->n][1];
		pp->out++;
		pthread_mutex_unlock(&pp->lock);
		return 0;
	}
	pthread_mutex_unlock(&pp->lock);
	if (pipe2(p, O_NONBLOCK | O_CLOEXEC) < 0)
		return -1;
	/* Room for a whole reply even when its range is not page-aligned
	 * (one more page); without CAP_SYS_RESOURCE the system's
	 * pipe-max-size (1 MiB by default) still holds aligned replies. */
	sz = fcntl(p[1], F_SETPIPE_SZ, (int)(2 * PFS_MAX_IO));
	if (sz < 0)
		sz = fcntl(p[1], F_SETPIPE_SZ, (int)PFS_MAX_IO);
	if (sz < (int)PFS_MAX_IO) {
		int err = errno;
		close(p[0]);
		close(p[1]);
		pthread_mutex_lock(&pp->lock);
		/* With none in use, big pipes are not allowed at all; else it
		 * may be the per-user pipe budget: copy this time only. */
		if (!pp->out && !pp->n) {
			pfs_notice("pipes of %u bytes unavailable (%s): READ replies are copied",
				   PFS_MAX_IO, strerror(err));
			pp->off = true;
		}
		pthread_mutex_unlock(&pp->lock);
		return -1;
	}
	pthread_mutex_lock(&pp->lock);
	pp->out++;
	pthread_mutex_unlock(&pp->lock);
	return 0;
}

void pipes_put(struct pipes *pp, int p[2], bool empty)
{
	pthread_mutex_lock(&pp->lock);
	pp->out--;
	pthread_mutex_unlock(&pp->lock);
	if (empty) {
		pthread_mutex_lock(&pp->lock);
		if (pp->n < PIPES_POOL) {
			pp->fds[pp->n][0] = p[0];
			pp->fds[pp->n][1] = p[1];
			pp->n++;
			pthread_mutex_unlock(&pp->lock);
			return;
		}
		pthread_mutex_unlock(&pp->lock);
	}
	close(p[0]);
	close(p[1]);
}
