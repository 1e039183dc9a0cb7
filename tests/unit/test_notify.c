/* test_notify.c: the service manager's readiness messages
 * (daemon/notify.c): $NOTIFY_SOCKET names (paths, abstract names, bad
 * ones), the messages' text, and one datagram really sent to a socket of
 * the test's own (an abstract name: nothing on disk).
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "notify_i.h"

static void test_parse(void)
{
	struct sockaddr_un sa;
	socklen_t len;
	char longname[sizeof(sa.sun_path) + 8];

	CHECK_EQ(notify_parse("/run/systemd/notify", &sa, &len), 0);
	CHECK_EQ(sa.sun_family, AF_UNIX);
	CHECK(strcmp(sa.sun_path, "/run/systemd/notify") == 0);
	CHECK_EQ(len, offsetof(struct sockaddr_un, sun_path) + strlen("/run/systemd/notify") + 1);

	/* Abstract: a NUL first, and the length ends the name (no NUL). */
	CHECK_EQ(notify_parse("@podfs/test", &sa, &len), 0);
	CHECK_EQ(sa.sun_path[0], '\0');
	CHECK(memcmp(sa.sun_path + 1, "podfs/test", 10) == 0);
	CHECK_EQ(len, offsetof(struct sockaddr_un, sun_path) + 11);

	CHECK_EQ(notify_parse(NULL, &sa, &len), -EINVAL);
	CHECK_EQ(notify_parse("", &sa, &len), -EINVAL);
	CHECK_EQ(notify_parse("@", &sa, &len), -EINVAL);
	CHECK_EQ(notify_parse("/", &sa, &len), -EINVAL);
	CHECK_EQ(notify_parse("run/notify", &sa, &len), -EINVAL);
	memset(longname, 'a', sizeof(longname) - 1);
	longname[0] = '/';
	longname[sizeof(longname) - 1] = '\0';
	CHECK_EQ(notify_parse(longname, &sa, &len), -EINVAL);
	longname[sizeof(sa.sun_path) - 1] = '\0'; /* the longest that fits */
	CHECK_EQ(notify_parse(longname, &sa, &len), 0);
}

static void test_messages(void)
{
	char buf[256], tiny[40];

	notify_ready_msg(buf, sizeof(buf), "/srv/podfs", "127.0.0.1:7049", 4242);
	CHECK(strcmp(buf, "READY=1\nSTATUS=serving /srv/podfs on 127.0.0.1:7049\nMAINPID=4242\n") ==
	      0);
	/* A newline in the export's name cannot add a line of its own. */
	notify_ready_msg(buf, sizeof(buf), "/srv/a\nSTOPPING=1", "[::1]:7", 1);
	CHECK(strcmp(buf, "READY=1\nSTATUS=serving /srv/a?STOPPING=1 on [::1]:7\nMAINPID=1\n") == 0);
	/* Too long: STATUS is cut, MAINPID stays whole. */
	notify_ready_msg(tiny, sizeof(tiny), "/a/very/long/export/directory", "1.2.3.4:5", 77);
	CHECK(strncmp(tiny, "READY=1\nSTATUS=serving /a/", 26) == 0);
	CHECK(strlen(tiny) < sizeof(tiny));
	CHECK(strcmp(tiny + strlen(tiny) - strlen("\nMAINPID=77\n"), "\nMAINPID=77\n") == 0);
	notify_ready_msg(tiny, 12, "/x", "y", 1);
	CHECK(strcmp(tiny, "READY=1\n") == 0);

	notify_reloading_msg(buf, sizeof(buf), 123456789012ull);
	CHECK(strcmp(buf, "RELOADING=1\nMONOTONIC_USEC=123456789012\n") == 0);
}

/* notify_init and notify_send against a datagram socket of our own. */
static void test_send(void)
{
	struct sockaddr_un sa;
	socklen_t len;
	char name[64], got[128];
	int fd;
	ssize_t n;

	/* Without the variable: nothing sent, no error. */
	unsetenv("NOTIFY_SOCKET");
	CHECK_EQ(notify_init(), 0);
	CHECK_EQ(notify_send("READY=1\n"), 0);

	setenv("NOTIFY_SOCKET", "relative", 1);
	CHECK_EQ(notify_init(), -EINVAL);
	CHECK(getenv("NOTIFY_SOCKET") == NULL);
	CHECK_EQ(notify_send("READY=1\n"), 0);

	snprintf(name, sizeof(name), "@podfs-test-notify-%d-%ld", (int)getpid(), (long)time(NULL));
	CHECK_EQ(notify_parse(name, &sa, &len), 0);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0);
	CHECK_EQ(bind(fd, (struct sockaddr *)&sa, len), 0);
	setenv("NOTIFY_SOCKET", name, 1);
	CHECK_EQ(notify_init(), 1);
	CHECK(getenv("NOTIFY_SOCKET") == NULL); /* not inherited */
	CHECK_EQ(notify_send("STOPPING=1\n"), 0);
	n = recv(fd, got, sizeof(got) - 1, MSG_DONTWAIT);
	CHECK_EQ(n, 11);
	got[n > 0 ? n : 0] = '\0';
	CHECK(strcmp(got, "STOPPING=1\n") == 0);
	close(fd);
	/* The listener is gone: the error is reported, not hidden. */
	CHECK_EQ(notify_send("READY=1\n"), -ECONNREFUSED);
}

int main(void)
{
	test_parse();
	test_messages();
	test_send();
	return check_done("test_notify");
}
