/* ctl.c: the mount's status socket (see ctl_i.h). */
#include "ctl_i.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "client_i.h"
#include "mountinfo_i.h"
#include "podfs/log.h"
#include "stats_i.h"

struct ctl {
	struct client *c;
	int fd;      /* the listening socket */
	int stop_fd; /* eventfd: stop */
	pthread_t thr;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

void ctl_path(const char *dev, char *path, size_t len)
{
	char d[64];

	snprintf(d, sizeof(d), "%s", dev);
	for (char *p = d; *p; p++)
		if (*p == ':')
			*p = '_';
	snprintf(path, len, "%s/mount-%s.sock", CTL_DIR, d);
}

/* Sends the figures to one connection; a reader that does not read
 * within a second is dropped. */
static void serve(struct ctl *ctl, int fd)
{
	struct timeval tv = { .tv_sec = 1 };
	char *buf = malloc(STATS_MAX);

	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	int n = buf ? stats_format(ctl->c, buf, STATS_MAX, true) : -ENOMEM;
	for (int off = 0; n > 0 && off < n;) {
		ssize_t k = send(fd, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
		if (k <= 0)
			break;
		off += (int)k;
	}
	free(buf);
}

static void *ctl_main(void *arg)
{
	struct ctl *ctl = arg;

	for (;;) {
		struct pollfd p[2] = { { .fd = ctl->fd, .events = POLLIN },
				       { .fd = ctl->stop_fd, .events = POLLIN } };
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			pfs_warn("status socket: poll: %s", strerror(errno));
			break;
		}
		if (p[1].revents)
			break;
		int fd = accept4(ctl->fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		serve(ctl, fd);
		close(fd);
	}
	return NULL;
}

int ctl_start(struct client *c, struct ctl **out)
{
	char dev[64], fstype[64];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct ctl *ctl;
	int rc;

	*out = NULL;
	if (!mountinfo_top(c->mountpoint, dev, sizeof(dev), fstype, sizeof(fstype)))
		return -ENOENT;
	if (!(ctl = calloc(1, sizeof(*ctl))))
		return -ENOMEM;
	ctl->c = c;
	ctl->fd = ctl->stop_fd = -1;
	ctl_path(dev, ctl->path, sizeof(ctl->path));
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", ctl->path);
	if (mkdir(CTL_DIR, 0755) < 0 && errno != EEXIST) {
		rc = -errno;
		goto fail;
	}
	ctl->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ctl->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (ctl->fd < 0 || ctl->stop_fd < 0) {
		rc = -errno;
		goto fail;
	}
	/* A socket left by a podfs that died: its device number is this
	 * mount's now, so it is ours to replace. */
	unlink(ctl->path);
	mode_t old = umask(077);
	rc = bind(ctl->fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc < 0 || listen(ctl->fd, 8) < 0) {
		rc = -errno;
		goto fail;
	}
	if ((rc = pthread_create(&ctl->thr, NULL, ctl_main, ctl)) != 0) {
		rc = -rc;
		unlink(ctl->path);
		goto fail;
	}
	*out = ctl;
	return 0;
fail:
	pfs_notice("no status socket %s: %s (podfs status cannot show this mount)", ctl->path,
		   strerror(-rc));
	if (ctl->fd >= 0)
		close(ctl->fd);
	if (ctl->stop_fd >= 0)
		close(ctl->stop_fd);
	free(ctl);
	return rc;
}

void ctl_stop(struct ctl *ctl)
{
	uint64_t one = 1;

	if (!ctl)
		return;
	if (write(ctl->stop_fd, &one, sizeof(one)) != sizeof(one))
		pfs_warn("status socket: cannot stop its thread: %s", strerror(errno));
	pthread_join(ctl->thr, NULL);
	close(ctl->fd);
	close(ctl->stop_fd);
	unlink(ctl->path);
	free(ctl);
}
