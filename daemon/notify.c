/* notify.c: the service manager's readiness messages (see notify_i.h). */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "notify_i.h"

static struct sockaddr_un notify_sa;
static socklen_t notify_len; /* 0: no socket */

int notify_parse(const char *name, struct sockaddr_un *sa, socklen_t *len)
{
	size_t n = name ? strlen(name) : 0;

	if (n < 2 || (name[0] != '/' && name[0] != '@') || n >= sizeof(sa->sun_path))
		return -EINVAL;
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path, name, n);
	if (name[0] == '@') {
		sa->sun_path[0] = '\0'; /* abstract: the length says where it ends */
		*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
	} else {
		*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
	}
	return 0;
}

int notify_init(void)
{
	const char *name = getenv("NOTIFY_SOCKET");
	int ret;

	notify_len = 0;
	if (!name)
		return 0;
	ret = notify_parse(name, &notify_sa, &notify_len);
	if (ret < 0)
		notify_len = 0;
	unsetenv("NOTIFY_SOCKET");
	return ret < 0 ? ret : 1;
}

int notify_send(const char *msg)
{
	int fd, ret = 0;

	if (!notify_len)
		return 0;
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (const struct sockaddr *)&notify_sa,
		   notify_len) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

void notify_ready_msg(char *buf, size_t len, const char *export_dir, const char *addr, long pid)
{
	char tail[48];
	int n;

	snprintf(tail, sizeof(tail), "\nMAINPID=%ld\n", pid);
	if (len <= strlen("READY=1\n") + strlen(tail)) {
		snprintf(buf, len, "READY=1\n");
		return;
	}
	n = snprintf(buf, len - strlen(tail), "READY=1\nSTATUS=serving %s on %s", export_dir, addr);
	if (n < 0)
		n = 0;
	if ((size_t)n >= len - strlen(tail))
		n = (int)(len - strlen(tail) - 1);
	/* A newline in a name would start a line of its own. */
	for (int i = (int)strlen("READY=1\n"); i < n; i++)
		if (buf[i] == '\n')
			buf[i] = '?';
	memcpy(buf + n, tail, strlen(tail) + 1);
}

void notify_reloading_msg(char *buf, size_t len, uint64_t now_us)
{
	snprintf(buf, len, "RELOADING=1\nMONOTONIC_USEC=%llu\n", (unsigned long long)now_us);
}
