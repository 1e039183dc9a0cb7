/* statedir.h: a private state directory for the unit tests of podfsd's
 * files in it (test_lockstate, test_revalhold): a mkdtemp directory under
 * /tmp, made anew for each case, and the path of the one file a test
 * looks at in it. Header-only, as check.h.
 */
#ifndef PODFS_TEST_STATEDIR_H
#define PODFS_TEST_STATEDIR_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char dir[64];  /* the directory */
static char path[96]; /* the file in it */

/* Removes the directory made before, if any (its file gone). */
static void statedir_remove(void)
{
	if (dir[0]) {
		unlink(path);
		rmdir(dir);
		dir[0] = 0;
	}
}

/* A new empty directory /tmp/podfs-test-TEST-XXXXXX; path names FILE in it. */
static void statedir_fresh(const char *test, const char *file)
{
	statedir_remove();
	snprintf(dir, sizeof(dir), "/tmp/podfs-test-%s-XXXXXX", test);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/%s", dir, file);
}

/* Writes text as the whole file. */
static inline void write_list(const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f || fputs(text, f) == EOF || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

#endif /* PODFS_TEST_STATEDIR_H */
