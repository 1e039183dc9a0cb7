/* bigbuf.c: large buffers kept for reuse (see bigbuf.h). */
#include "podfs/bigbuf.h"

#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>

#include "podfs/log.h"

#ifdef PFS_BIG_KEEPS
#define BIG_KEEP PFS_BIG_KEEP
#else
#define BIG_KEEP 0 /* glibc keeps them (bigbuf.h) */
#endif
#ifdef PFS_BIG_ASAN
#include <sanitizer/asan_interface.h>
#define poison(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define unpoison(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define poison(p, n) ((void)(p), (void)(n))
#define unpoison(p, n) ((void)(p), (void)(n))
#endif

void *pfs_big_xalloc(size_t n)
{
	void *p = pfs_big_alloc(n);

	if (!p) {
		pfs_err("out of memory allocating %zu bytes; aborting", n);
		abort();
	}
	return p;
}

#if !BIG_KEEP
void *pfs_big_alloc(size_t n)
{
	return malloc(n ? n : 1);
}

void pfs_big_free(void *p)
{
	free(p);
}

unsigned pfs_big_kept(void)
{
	return 0;
}
#else
/* A buffer is kept if it holds PFS_BIG_CAP bytes and not much more (an
 * allocator may give a chunk a little more than asked). */
#define BIG_SLACK (64u * 1024)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *kept[BIG_KEEP];
static unsigned nkept;

void *pfs_big_alloc(size_t n)
{
	void *p = NULL;

	if (n < PFS_BIG_MIN || n > PFS_BIG_CAP)
		return malloc(n ? n : 1);
	pthread_mutex_lock(&lock);
	if (nkept)
		p = kept[--nkept];
	pthread_mutex_unlock(&lock);
	if (!p && !(p = malloc(PFS_BIG_CAP)))
		return NULL;
	unpoison(p, n);
	poison((char *)p + n, PFS_BIG_CAP - n);
	return p;
}

void pfs_big_free(void *p)
{
	if (!p)
		return;
	size_t u = malloc_usable_size(p);
	if (u < PFS_BIG_CAP || u >= PFS_BIG_CAP + BIG_SLACK) {
		free(p);
		return;
	}
	poison(p, PFS_BIG_CAP);
	pthread_mutex_lock(&lock);
	for (unsigned i = 0; i < nkept; i++) {
		if (kept[i] == p) { /* freed twice: as free() would, stop */
			pfs_err("buffer %p freed twice; aborting", p);
			abort();
		}
	}
	if (nkept < BIG_KEEP) {
		kept[nkept++] = p;
		p = NULL;
	}
	pthread_mutex_unlock(&lock);
	if (p) {
		unpoison(p, PFS_BIG_CAP);
		free(p);
	}
}

unsigned pfs_big_kept(void)
{
	pthread_mutex_lock(&lock);
	unsigned n = nkept;
	pthread_mutex_unlock(&lock);
	return n;
}
#endif /* BIG_KEEP */
