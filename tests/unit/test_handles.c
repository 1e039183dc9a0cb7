/* test_handles.c: podfsd's fd cache of file handles (daemon/handles.c).
 *
 * The cache keeps at most its bound of unused fds, however many entries
 * are in use: deleted files kept openable for the push about them
 * (handles_orphan) and the entries requests hold stay open, and every
 * unused fd beyond the bound is closed as others come in. A file handle
 * made here opens the same file again through the cache. Runs on a
 * scratch directory under $TMPDIR (or /tmp).
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "handles_i.h"

#define FILES 300
#define CACHE_MAX 16
#define ORPHANS 100

static char dir[256];

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static void make_files(void)
{
	const char *tmp = getenv("TMPDIR");
	char p[320];

	snprintf(dir, sizeof dir, "%s/podfs-handles-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		exit(1);
	}
	for (int i = 0; i < FILES; i++) {
		snprintf(p, sizeof p, "%s/f%d", dir, i);
		int fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
		if (fd < 0) {
			perror(p);
			exit(1);
		}
		close(fd);
	}
}

static void remove_files(void)
{
	char p[320];

	for (int i = 0; i < FILES; i++) {
		snprintf(p, sizeof p, "%s/f%d", dir, i);
		unlink(p);
	}
	rmdir(dir);
}

static struct handles *new_handles(void)
{
	uint8_t key[PFSD_HKEY_LEN];
	struct handles *h = NULL;
	char err[256];

	memset(key, 7, sizeof key);
	int efd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (efd < 0 || handles_new(&h, efd, key, CACHE_MAX, err, sizeof err) < 0) {
		fprintf(stderr, "handles_new: %s\n", efd < 0 ? "open" : err);
		exit(1);
	}
	return h;
}

/* An O_PATH fd of file i and its handle in *fh. */
static int open_file(struct handles *h, int i, struct pfs_fh *fh)
{
	char name[32];
	int dfd = handles_export_fd(h);

	snprintf(name, sizeof name, "f%d", i);
	int fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK_EQ(handles_encode(h, fd, fh), 0);
	return fd;
}

static void test_bound_holds_past_entries_in_use(void)
{
	struct handles *h = new_handles();
	struct pfs_fh fh, held_fh;
	struct hent *held = NULL;
	int base = count_fds();

	/* Files kept for a push, then one held by a request: all in use,
	 * and soon the least recently used. */
	for (int i = 0; i < ORPHANS; i++) {
		int fd = open_file(h, i, &fh);
		CHECK(handles_orphan(h, &fh, fd, 60000));
	}
	int fd = open_file(h, ORPHANS, &held_fh);
	handles_adopt(h, &held_fh, fd);
	CHECK_EQ(handles_get(h, &held_fh, &held), 0);
	/* The rest comes in as a walk's lookups would. */
	int most = 0;
	for (int i = ORPHANS + 1; i < FILES; i++) {
		fd = open_file(h, i, &fh);
		handles_adopt(h, &fh, fd);
		if (count_fds() - base > most)
			most = count_fds() - base;
	}
	CHECK(most <= ORPHANS + 1 + CACHE_MAX);
	/* The held entry is still open, and still the file. */
	struct stat a, b;
	char name[32];
	snprintf(name, sizeof name, "f%d", ORPHANS);
	CHECK(held && fstat(held->fd, &a) == 0);
	CHECK(fstatat(handles_export_fd(h), name, &b, 0) == 0);
	CHECK(a.st_ino == b.st_ino);
	handles_put(h, held);
	handles_free(h);
}

static void test_expired_orphans_leave_the_bound(void)
{
	struct handles *h = new_handles();
	struct pfs_fh fh;
	int base = count_fds();

	for (int i = 0; i < ORPHANS; i++) {
		int fd = open_file(h, i, &fh);
		CHECK(handles_orphan(h, &fh, fd, 0));
	}
	for (int i = ORPHANS; i < 2 * ORPHANS; i++) {
		int fd = open_file(h, i, &fh);
		handles_adopt(h, &fh, fd);
	}
	CHECK_EQ(handles_orphans_expire(h), 0);
	/* One more lookup, and the cache is back to its bound. */
	int fd = open_file(h, 2 * ORPHANS, &fh);
	handles_adopt(h, &fh, fd);
	CHECK(count_fds() - base <= CACHE_MAX);
	handles_free(h);
}

static void test_handle_opens_the_file_again(void)
{
	struct handles *h = new_handles();
	struct pfs_fh fh;
	struct hent *e = NULL;
	struct stat a, b;

	int fd = open_file(h, 5, &fh);
	CHECK(fstat(fd, &a) == 0);
	close(fd);
	/* Not cached: opened by handle. */
	CHECK_EQ(handles_get(h, &fh, &e), 0);
	CHECK(e && fstat(e->fd, &b) == 0);
	CHECK(a.st_ino == b.st_ino);
	handles_put(h, e);
	/* A handle whose MAC does not verify opens nothing. */
	fh.data[fh.len - 1] ^= 1;
	CHECK(handles_get(h, &fh, &e) < 0);
	handles_free(h);
}

int main(void)
{
	make_files();
	test_bound_holds_past_entries_in_use();
	test_expired_orphans_leave_the_bound();
	test_handle_opens_the_file_again();
	remove_files();
	return check_done("test_handles");
}
