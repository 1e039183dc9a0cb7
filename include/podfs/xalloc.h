/* xalloc.h: allocations that cannot fail, for podfsd and for podfs's
 * start-up.
 *
 * Out-of-memory policy. podfsd: every allocation goes through these,
 * which log one line and abort the daemon; a daemon that cannot allocate
 * a few hundred bytes can do nothing useful, and its clients reconnect
 * and resend to a restarted daemon (peer-sized buffers are bounded by the
 * protocol's limits and each connection's backpressure first). podfs:
 * only its start-up uses these (nothing is mounted yet); once the mount
 * runs, a FUSE handler whose allocation fails answers ENOMEM and a
 * background thread drops or retries its work (see fs/client_i.h).
 * Any thread.
 */
#ifndef PODFS_XALLOC_H
#define PODFS_XALLOC_H

#include <stddef.h>

/* malloc(n) (n == 0 allocates one byte); never returns NULL. */
void *xmalloc(size_t n);
/* calloc(n, m) (zero counts as one); never returns NULL. An n * m that
 * overflows aborts too. */
void *xcalloc(size_t n, size_t m);
/* reallocarray(p, n, m) (zero counts as one); never returns NULL. An
 * n * m that overflows aborts too. */
void *xreallocarray(void *p, size_t n, size_t m);
/* strdup(s); never returns NULL. */
char *xstrdup(const char *s);

#endif /* PODFS_XALLOC_H */
