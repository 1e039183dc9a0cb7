/* test_sockfile.c: a status socket's file is removed at exit only if it
 * is still the one this process made (podfs/sockfile.h).
 *
 * Shown with regular files in a scratch directory (the mark does not care
 * what the file is): a file made at the same path after the first was
 * removed, which here often gets the same inode number, is not taken for
 * the first; the first's owner leaves it, and its own owner removes it.
 * The directory lock that keeps a removal and a replacement apart, and
 * a replacement.
 */
#include "podfs/sockfile.h"
#include "check.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char dir[] = "/tmp/podfs-test-sockfile.XXXXXX";
static char path[64];

static void make(void)
{
	int fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
}

int main(void)
{
	struct pfs_sockfile a, b;
	struct stat st;
	int same_ino = 0;

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/s", dir);
	CHECK_EQ(pfs_sockfile_mark(&a, path), -ENOENT);

	for (int round = 0; round < 20; round++) {
		make();
		CHECK_EQ(pfs_sockfile_mark(&a, path), 0);
		CHECK(pfs_sockfile_is(&a, path));
		/* Replaced by another's file: not a's, whatever its number. */
		CHECK_EQ(unlink(path), 0);
		make();
		CHECK(lstat(path, &st) == 0);
		same_ino += st.st_ino == a.ino;
		CHECK(!pfs_sockfile_is(&a, path));
		pfs_sockfile_remove(&a, path);
		CHECK(access(path, F_OK) == 0);
		/* ... and marked by that other: still not a's, but b's. */
		CHECK_EQ(pfs_sockfile_mark(&b, path), 0);
		CHECK(!pfs_sockfile_is(&a, path));
		CHECK(pfs_sockfile_is(&b, path));
		pfs_sockfile_remove(&a, path);
		CHECK(access(path, F_OK) == 0);
		pfs_sockfile_remove(&b, path);
		CHECK(access(path, F_OK) < 0 && errno == ENOENT);
		/* Gone: nothing to remove, no harm. */
		pfs_sockfile_remove(&b, path);
		CHECK(!pfs_sockfile_is(&b, path));
	}
	printf("the replacing file had the first one's inode number in %d of 20 rounds\n", same_ino);

	/* The lock of the directory (against a removal and a replacement
	 * interleaving): while held, no other open file description gets
	 * it; released, one does. */
	int lock = pfs_sockfile_lock(path);
	CHECK(lock >= 0);
	int other = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(other >= 0);
	CHECK(flock(other, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK);
	/* A second taker waits a bounded time, then goes on without. */
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CHECK_EQ(pfs_sockfile_lock(path), -1);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double waited = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	CHECK(waited >= 0.9 && waited < 30);
	pfs_sockfile_unlock(lock);
	CHECK_EQ(flock(other, LOCK_EX | LOCK_NB), 0);
	close(other);
	CHECK_EQ(pfs_sockfile_lock("/nonexistent-podfs-dir/x.sock"), -1);

	/* A replacement: whatever is at the path goes, the new socket is
	 * marked as its binder's, and the owner of the file before leaves it. */
	make();
	CHECK_EQ(pfs_sockfile_mark(&a, path), 0);
	int sfd = pfs_sockfile_replace(&b, path, 077, 0);
	CHECK(sfd >= 0);
	CHECK(lstat(path, &st) == 0 && S_ISSOCK(st.st_mode));
	CHECK(pfs_sockfile_is(&b, path) && !pfs_sockfile_is(&a, path));
	pfs_sockfile_remove(&a, path);
	CHECK(access(path, F_OK) == 0);
	pfs_sockfile_remove(&b, path);
	CHECK(access(path, F_OK) < 0 && errno == ENOENT);
	if (sfd >= 0)
		close(sfd);
	rmdir(dir);
	return check_done("test_sockfile");
}
