/* pipes_i.h: a pool of pipes for zero-copy READ replies.
 *
 * A READ whose reply goes out uncoded moves the file's pages into a pipe
 * in a worker thread (splice from the file: the disk wait happens there)
 * and from the pipe into the socket on the loop (conn.c). Both ends are
 * non-blocking, so a full pipe or socket makes the caller fall back to
 * copying, never wait. Any thread.
 */
#ifndef PODFSD_PIPES_I_H
#define PODFSD_PIPES_I_H

#include <pthread.h>
#include <stdbool.h>

#define PIPES_POOL 16

struct pipes {
	pthread_mutex_t lock;
	int fds[PIPES_POOL][2]; /* idle, empty pipes */
	unsigned n;
	unsigned out;           /* handed out by pipes_get, not yet put back */
	bool off;               /* pipes too small here: splice is not used */
};

/* An empty pool. Never fails. */
void pipes_init(struct pipes *pp);
/* Closes the idle pipes (every pipe is back: no worker runs). */
void pipes_fini(struct pipes *pp);
/* An empty pipe able to hold a PFS_MAX_IO reply, p[0] read end, p[1]
 * write end, both O_NONBLOCK. Returns 0, or -1 if none can be had (then
 * copy instead). */
int pipes_get(struct pipes *pp, int p[2]);
/* Gives back a pipe from pipes_get; empty: pooled, else closed. */
void pipes_put(struct pipes *pp, int p[2], bool empty);

#endif /* PODFSD_PIPES_I_H */
