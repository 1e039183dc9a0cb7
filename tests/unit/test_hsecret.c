/* test_hsecret.c: the export's record of its handle secret
 * (daemon/hsecret.c).
 *
 * The id (a keyed hash: stable for one secret, different for another,
 * not the secret's bytes), the record's text, the decision at start, and
 * (as root, where trusted xattrs can be written) hsecret_check on a
 * scratch directory: first start records, the same secret serves, another
 * is refused until accept_new replaces the record.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "check.h"
#include "hsecret_i.h"

static void test_id(void)
{
	uint8_t a[32], b[32];
	uint64_t ia, ib;

	memset(a, 0x11, sizeof(a));
	memcpy(b, a, sizeof(b));
	b[31] ^= 1;
	ia = hsecret_id(a);
	ib = hsecret_id(b);
	CHECK(ia == hsecret_id(a));
	CHECK(ia != ib);
	CHECK(memcmp(&ia, a, sizeof(ia)) != 0); /* not the secret's own bytes */
}

static void test_text(void)
{
	char s[HSECRET_HEX + 1];
	uint64_t id = 0;

	hsecret_format(0x0123456789abcdefull, s);
	CHECK_STR(s, "0123456789abcdef");
	CHECK_EQ(hsecret_parse(s, strlen(s), &id), 0);
	CHECK(id == 0x0123456789abcdefull);
	hsecret_format(0, s);
	CHECK_STR(s, "0000000000000000");
	CHECK_EQ(hsecret_parse("0123456789abcde", 15, &id), -EINVAL);
	CHECK_EQ(hsecret_parse("0123456789abcdef0", 17, &id), -EINVAL);
	CHECK_EQ(hsecret_parse("0123456789ABCDEF", 16, &id), -EINVAL);
	CHECK_EQ(hsecret_parse("0123456789abcdeg", 16, &id), -EINVAL);
	CHECK_EQ(hsecret_parse("", 0, &id), -EINVAL);
}

static void test_decide(void)
{
	CHECK_EQ(hsecret_decide(HSR_NONE, false), HSA_RECORD);
	CHECK_EQ(hsecret_decide(HSR_NONE, true), HSA_RECORD);
	CHECK_EQ(hsecret_decide(HSR_SAME, false), HSA_SERVE);
	CHECK_EQ(hsecret_decide(HSR_SAME, true), HSA_SERVE);
	CHECK_EQ(hsecret_decide(HSR_OTHER, false), HSA_REFUSE);
	CHECK_EQ(hsecret_decide(HSR_OTHER, true), HSA_REPLACE);
	CHECK_EQ(hsecret_decide(HSR_UNREADABLE, false), HSA_UNCHECKED);
	CHECK_EQ(hsecret_decide(HSR_UNREADABLE, true), HSA_UNCHECKED);
}

static int record(int fd, char *buf, size_t n)
{
	ssize_t got = fgetxattr(fd, HSECRET_XATTR, buf, n - 1);
	if (got < 0)
		return -errno;
	buf[got] = 0;
	return (int)got;
}

static void test_check(void)
{
	char dir[] = "/tmp/test_hsecret.XXXXXX", msg[1024], buf[64], hex[HSECRET_HEX + 1];
	uint8_t a[32], b[32];
	int fd;

	if (!mkdtemp(dir)) {
		CHECK(!"mkdtemp");
		return;
	}
	memset(a, 0xa5, sizeof(a));
	memset(b, 0x5a, sizeof(b));
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(fd >= 0);
	if (fsetxattr(fd, "trusted.podfs.probe", "1", 1, 0) < 0) {
		/* Not root, or no trusted xattrs here: the daemon then serves
		 * unchecked, which is what hsecret_check says. */
		fprintf(stderr, "test_hsecret: no trusted xattrs in /tmp (%s): checking the "
			"unchecked path only\n", strerror(errno));
		CHECK_EQ(hsecret_check(fd, a, dir, "st", true, false, msg, sizeof(msg)), 0);
		close(fd);
		rmdir(dir);
		return;
	}
	fremovexattr(fd, "trusted.podfs.probe");

	/* First start: recorded. */
	CHECK_EQ(hsecret_check(fd, a, dir, "st", true, false, msg, sizeof(msg)), 0);
	hsecret_format(hsecret_id(a), hex);
	CHECK_EQ(record(fd, buf, sizeof(buf)), HSECRET_HEX);
	CHECK_STR(buf, hex);
	/* Restart with the same secret. */
	CHECK_EQ(hsecret_check(fd, a, dir, "st", false, false, msg, sizeof(msg)), 0);
	CHECK_EQ(record(fd, buf, sizeof(buf)), HSECRET_HEX);
	CHECK_STR(buf, hex);
	/* Another secret: refused, the record kept, the message says what
	 * to do. */
	msg[0] = 0;
	CHECK_EQ(hsecret_check(fd, b, dir, "st2", true, false, msg, sizeof(msg)), -1);
	CHECK(strstr(msg, "--state-dir") && strstr(msg, "--new-handle-secret"));
	CHECK(strstr(msg, hex) != NULL);
	CHECK_EQ(record(fd, buf, sizeof(buf)), HSECRET_HEX);
	CHECK_STR(buf, hex);
	/* Accepted: the record names b now, and a is refused. */
	CHECK_EQ(hsecret_check(fd, b, dir, "st2", false, true, msg, sizeof(msg)), 0);
	hsecret_format(hsecret_id(b), hex);
	CHECK_EQ(record(fd, buf, sizeof(buf)), HSECRET_HEX);
	CHECK_STR(buf, hex);
	CHECK_EQ(hsecret_check(fd, a, dir, "st", false, false, msg, sizeof(msg)), -1);
	/* A garbled record counts as another secret's. */
	CHECK_EQ(fsetxattr(fd, HSECRET_XATTR, "junk", 4, 0), 0);
	CHECK_EQ(hsecret_check(fd, b, dir, "st2", false, false, msg, sizeof(msg)), -1);
	CHECK(strstr(msg, "unreadable") != NULL);
	close(fd);
	rmdir(dir);
}

int main(void)
{
	test_id();
	test_text();
	test_decide();
	test_check();
	return check_done("test_hsecret");
}
