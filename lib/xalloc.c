/* xalloc.c: allocations that abort on failure (see xalloc.h). */
#include "podfs/xalloc.h"

#include <stdlib.h>
#include <string.h>

#include "podfs/log.h"

__attribute__((noreturn)) static void oom(size_t n)
{
	pfs_err("out of memory allocating %zu bytes; aborting", n);
	abort();
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		oom(n);
	return p;
}

void *xcalloc(size_t n, size_t m)
{
	void *p = calloc(n ? n : 1, m ? m : 1);

	if (!p)
		oom(n * m);
	return p;
}

void *xreallocarray(void *p, size_t n, size_t m)
{
	void *q = reallocarray(p, n ? n : 1, m ? m : 1);

	if (!q)
		oom(n * m);
	return q;
}

char *xstrdup(const char *s)
{
	char *p = strdup(s);

	if (!p)
		oom(strlen(s) + 1);
	return p;
}
