/* test_mountwait.c: mount-time waiting for the coordinator
 * (fs/mountwait.c): which errors are retried, the backoff, the lock
 * file's name, and the lock itself in a scratch directory (a second
 * taker is refused and told the holder's pid; a released lock leaves no
 * file; a lock file replaced under a taker is not trusted).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "mountwait_i.h"

static void test_transient(void)
{
	CHECK(mountwait_transient(-ECONNREFUSED));
	CHECK(mountwait_transient(-ETIMEDOUT));
	CHECK(mountwait_transient(-EHOSTUNREACH));
	CHECK(mountwait_transient(-ENETUNREACH));
	CHECK(mountwait_transient(-EADDRNOTAVAIL));
	/* The coordinator answered: retrying changes nothing. */
	CHECK(!mountwait_transient(-EACCES));
	CHECK(!mountwait_transient(-EPROTO));
	CHECK(!mountwait_transient(-ECONNRESET));
	CHECK(!mountwait_transient(-EOPNOTSUPP));
	CHECK(!mountwait_transient(-ENOMEM));
	CHECK(!mountwait_transient(0));
}

static void test_backoff(void)
{
	CHECK_EQ(mountwait_backoff_ms(1, 0), 1000);
	CHECK_EQ(mountwait_backoff_ms(2, 0), 2000);
	CHECK_EQ(mountwait_backoff_ms(3, 0), 4000);
	CHECK_EQ(mountwait_backoff_ms(4, 0), 8000);
	CHECK_EQ(mountwait_backoff_ms(5, 0), MOUNTWAIT_BACKOFF_MAX_MS);
	CHECK_EQ(mountwait_backoff_ms(1000000, 0), MOUNTWAIT_BACKOFF_MAX_MS);
	/* Jitter takes off at most a fifth. */
	CHECK_EQ(mountwait_backoff_ms(1, 999), 1000 - 199);
	CHECK_EQ(mountwait_backoff_ms(1, 5000), 1000 - 199);
	CHECK_EQ(mountwait_backoff_ms(9, 500), MOUNTWAIT_BACKOFF_MAX_MS - 1000);
}

static void name_is(const char *mnt, const char *want)
{
	char buf[256];

	mountwait_lock_name(mnt, buf, sizeof(buf));
	if (!CHECK_STR(buf, want))
		fprintf(stderr, "  for '%s': '%s', want '%s'\n", mnt, buf, want);
}

static void test_lock_name(void)
{
	char long_path[400], buf[256];

	name_is("/mnt/podfs", "mount-mnt-podfs.lock");
	name_is("/", "mount--.lock");
	name_is("/mnt/pod-fs", "mount-mnt-pod\\x2dfs.lock");
	name_is("/mnt/pod/fs", "mount-mnt-pod-fs.lock"); /* differs from the one above */
	name_is("/srv/.hidden/a b", "mount-srv-.hidden-a\\x20b.lock");
	name_is("/.x", "mount-\\x2ex.lock");
	name_is("//mnt//podfs/", "mount-mnt-podfs.lock");
	/* Too long for a file name: a hash, the same each time. */
	memset(long_path, 'a', sizeof(long_path) - 1);
	long_path[0] = '/';
	long_path[sizeof(long_path) - 1] = '\0';
	mountwait_lock_name(long_path, buf, sizeof(buf));
	CHECK(strncmp(buf, "mount-h", 7) == 0);
	CHECK_EQ(strlen(buf), strlen("mount-h") + 16 + strlen(".lock"));
	char again[256];
	long_path[300] = 'b';
	mountwait_lock_name(long_path, again, sizeof(again));
	CHECK(strcmp(buf, again) != 0);
}

static void test_lock(void)
{
	char dir[] = "/tmp/test_mountwait.XXXXXX", sub[64], path[320], name[256];
	struct mountwait_lock a = { -1, NULL }, b = { -1, NULL };
	pid_t holder = -1;
	struct stat st;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(sub, sizeof(sub), "%s/run", dir); /* made by the first lock */
	CHECK_EQ(mountwait_lock(sub, "/mnt/x", &a, &holder), 0);
	CHECK(a.fd >= 0);
	mountwait_lock_name("/mnt/x", name, sizeof(name));
	snprintf(path, sizeof(path), "%s/%s", sub, name);
	CHECK_EQ(stat(path, &st), 0);

	/* Taken: refused, with the holder's pid; another point is free. */
	CHECK_EQ(mountwait_lock(sub, "/mnt/x", &b, &holder), -EBUSY);
	CHECK_EQ(holder, getpid());
	CHECK_EQ(b.fd, -1);
	CHECK_EQ(mountwait_lock(sub, "/mnt/y", &b, &holder), 0);
	mountwait_unlock(&b);

	/* Handed on (as to a bg child): the new owner's pid is what others see. */
	mountwait_lock_owner(&a, 4242);
	CHECK_EQ(mountwait_lock(sub, "/mnt/x", &b, &holder), -EBUSY);
	CHECK_EQ(holder, 4242);

	/* Released: no file left, and it can be taken again. */
	mountwait_unlock(&a);
	CHECK_EQ(a.fd, -1);
	CHECK(stat(path, &st) < 0 && errno == ENOENT);
	CHECK_EQ(mountwait_lock(sub, "/mnt/x", &a, &holder), 0);

	/* Forgetting closes our descriptor but leaves the file (the child
	 * that holds it removes it). */
	int keep = dup(a.fd); /* stands for the child's copy */
	mountwait_lock_forget(&a);
	CHECK_EQ(stat(path, &st), 0);
	CHECK_EQ(mountwait_lock(sub, "/mnt/x", &b, &holder), -EBUSY);
	close(keep);
	CHECK_EQ(mountwait_lock(sub, "/mnt/x", &b, &holder), 0);
	mountwait_unlock(&b);

	/* A directory that cannot be made: an error, no lock. */
	CHECK(mountwait_lock("/proc/no/such/dir", "/mnt/x", &b, &holder) < 0);
	CHECK_EQ(b.fd, -1);
	unlink(path);
	rmdir(sub);
	rmdir(dir);
}

int main(void)
{
	test_transient();
	test_backoff();
	test_lock_name();
	test_lock();
	return check_done("test_mountwait");
}
