/* ctl.c: the mount's status socket (see ctl_i.h). */
#include "ctl_i.h"
#include "bg_i.h"

#include <errno.h>
#include <netinet/in.h>
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
#include "podfs/clock.h"
#include "podfs/httphead.h"
#include "podfs/log.h"
#include "podfs/netaddr.h"
#include "podfs/prom.h"
#include "podfs/sockfile.h"
#include "stats_i.h"

/* A metrics client: its request head so far and its deadline. */
struct hclient {
	int fd;
	size_t len;
	int64_t deadline; /* pfs_mono_ns */
	bool answered;    /* then what it sends is dropped until it closes */
	char buf[PFS_HTTP_HEAD_MAX];
};

struct ctl {
	struct client *c;
	int fd;      /* the listening status socket, or -1 */
	int mfd;     /* the listening metrics socket, or -1 */
	int stop_fd; /* eventfd: stop */
	pthread_t thr;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	/* path's file as bind made it: removed at the end only if it is
	 * still that file, not another podfs's (the kernel gives an
	 * unmounted filesystem's device number to the next mount at once,
	 * while this podfs may still be finishing). */
	struct pfs_sockfile made;
	struct hclient *h[CTL_HTTP_CLIENTS];
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

/* --- metrics over HTTP --- */

static void hclose(struct ctl *ctl, int i)
{
	close(ctl->h[i]->fd);
	free(ctl->h[i]);
	ctl->h[i] = NULL;
}

/* Sends all of buf to fd within the client's deadline. */
static void send_all(int fd, const char *buf, size_t len, int64_t deadline)
{
	for (size_t off = 0; off < len;) {
		int64_t left = (deadline - pfs_mono_ns()) / 1000000;
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return;
		ssize_t k = send(fd, buf + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (k <= 0)
			return;
		off += (size_t)k;
	}
}

/* Answers client i with status (200: the metrics) and closes the write
 * side: the client stays until it closes (or its deadline), what it
 * still sends read and dropped, since a close with unread bytes would
 * reset the connection and could lose the answer. */
static void hanswer(struct ctl *ctl, int i, int status, bool head_only)
{
	struct hclient *h = ctl->h[i];
	char head[256], *body = NULL;
	long blen;

	if (status == 200 && (blen = stats_metrics(ctl->c, &body)) < 0)
		status = 500;
	if (status != 200) {
		body = malloc(64);
		blen = body ? snprintf(body, 64, "%d %s\n", status, pfs_http_reason(status)) : 0;
	}
	int hl = pfs_http_reply_head(head, sizeof(head), status,
				     status == 200 ? PFS_PROM_CONTENT_TYPE : NULL, (size_t)blen);
	if (hl > 0)
		send_all(h->fd, head, (size_t)hl, h->deadline);
	if (body && !head_only)
		send_all(h->fd, body, (size_t)blen, h->deadline);
	free(body);
	h->answered = true;
	shutdown(h->fd, SHUT_WR);
}

/* Client i can be read. */
static void hread(struct ctl *ctl, int i)
{
	struct hclient *h = ctl->h[i];
	struct pfs_http_req r;

	ssize_t k = recv(h->fd, h->answered ? h->buf : h->buf + h->len,
			 h->answered ? sizeof(h->buf) : sizeof(h->buf) - h->len, MSG_DONTWAIT);
	if (k < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (k <= 0) {
		hclose(ctl, i);
		return;
	}
	if (h->answered)
		return;
	h->len += (size_t)k;
	int ret = pfs_http_parse((const uint8_t *)h->buf, h->len, sizeof(h->buf), &r);
	if (ret > 0)
		hanswer(ctl, i, pfs_http_route(&r, "/metrics"), pfs_http_is_head(&r));
	else if (ret == -E2BIG)
		hanswer(ctl, i, 431, false);
	else if (ret < 0)
		hanswer(ctl, i, 400, false);
}

static void haccept(struct ctl *ctl)
{
	int fd = accept4(ctl->mfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0)
		return;
	for (int i = 0; i < CTL_HTTP_CLIENTS; i++) {
		if (ctl->h[i])
			continue;
		if (!(ctl->h[i] = calloc(1, sizeof(struct hclient))))
			break;
		ctl->h[i]->fd = fd;
		ctl->h[i]->deadline = pfs_mono_ns() + (int64_t)CTL_HTTP_TIMEOUT_MS * 1000000;
		return;
	}
	close(fd); /* too many at once: the ones being served finish first */
}

static void *ctl_main(void *arg)
{
	struct ctl *ctl = arg;

	for (;;) {
		struct pollfd p[3 + CTL_HTTP_CLIENTS];
		int slot[CTL_HTTP_CLIENTS], n = 3, timeout = -1;
		int64_t now = pfs_mono_ns();

		p[0] = (struct pollfd){ .fd = ctl->stop_fd, .events = POLLIN };
		p[1] = (struct pollfd){ .fd = ctl->fd, .events = POLLIN };
		p[2] = (struct pollfd){ .fd = ctl->mfd, .events = POLLIN };
		for (int i = 0; i < CTL_HTTP_CLIENTS; i++) {
			if (!ctl->h[i])
				continue;
			if (ctl->h[i]->deadline <= now) {
				hclose(ctl, i);
				continue;
			}
			int ms = (int)((ctl->h[i]->deadline - now) / 1000000) + 1;
			if (timeout < 0 || ms < timeout)
				timeout = ms;
			slot[n - 3] = i;
			p[n++] = (struct pollfd){ .fd = ctl->h[i]->fd, .events = POLLIN };
		}
		if (poll(p, (nfds_t)n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			pfs_warn("status socket: poll: %s", strerror(errno));
			break;
		}
		if (p[0].revents)
			break;
		for (int k = 3; k < n; k++)
			if (p[k].revents)
				hread(ctl, slot[k - 3]);
		if (p[2].revents)
			haccept(ctl);
		if (p[1].revents) {
			int fd = accept4(ctl->fd, NULL, NULL, SOCK_CLOEXEC);
			if (fd >= 0) {
				serve(ctl, fd);
				close(fd);
			}
		}
	}
	for (int i = 0; i < CTL_HTTP_CLIENTS; i++)
		if (ctl->h[i])
			hclose(ctl, i);
	return NULL;
}

/* The metrics listener of -o metrics=. */
static int metrics_listen(struct ctl *ctl)
{
	struct client *c = ctl->c;
	struct sockaddr_storage ss = c->metrics_addr;
	socklen_t len = sizeof(ss);
	int one = 1, fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss,
		 ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in)) <
		    0 ||
	    listen(fd, 64) < 0 || getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	pfs_addr_name(&ss, c->metrics_name, sizeof(c->metrics_name));
	ctl->mfd = fd;
	pfs_notice("metrics on http://%s/metrics", c->metrics_name);
	return 0;
}

/* The status socket of the mount (CTL_DIR/mount-DEV.sock). */
static int status_listen(struct ctl *ctl)
{
	char dev[64], fstype[64];
	int rc, fd;

	if (!mountinfo_top(ctl->c->mountpoint, dev, sizeof(dev), fstype, sizeof(fstype)))
		return -ENOENT;
	ctl_path(dev, ctl->path, sizeof(ctl->path));
	if (mkdir(CTL_DIR, 0755) < 0 && errno != EEXIST)
		return -errno;
	/* A socket left by a podfs that died or is still finishing: its
	 * device number is this mount's now, so it is ours to replace. */
	if ((fd = pfs_sockfile_replace(&ctl->made, ctl->path, 077, 0)) < 0)
		return fd;
	if (listen(fd, 8) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	ctl->fd = fd;
	return 0;
}

int ctl_start(struct client *c, struct ctl **out)
{
	struct ctl *ctl;
	int rc;

	*out = NULL;
	if (!(ctl = calloc(1, sizeof(*ctl))))
		return -ENOMEM;
	ctl->c = c;
	ctl->fd = ctl->mfd = -1;
	ctl->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (ctl->stop_fd < 0) {
		rc = -errno;
		free(ctl);
		return rc;
	}
	rc = status_listen(ctl);
	if (rc < 0)
		pfs_notice("no status socket %s: %s (podfs status cannot show this mount)",
			   ctl->path[0] ? ctl->path : CTL_DIR, strerror(-rc));
	if (c->metrics) {
		char want[80];
		pfs_addr_name(&c->metrics_addr, want, sizeof(want));
		int mrc = metrics_listen(ctl);
		if (mrc < 0)
			pfs_err("cannot listen for metrics on %s: %s (no metrics for this mount)",
				want, strerror(-mrc));
	}
	if (ctl->fd < 0 && ctl->mfd < 0)
		goto fail;
	if ((rc = pthread_create(&ctl->thr, NULL, ctl_main, ctl)) != 0) {
		rc = -rc;
		goto fail;
	}
	bg_name(ctl->thr, "control");
	*out = ctl;
	return 0;
fail:
	if (ctl->fd >= 0) {
		close(ctl->fd);
		pfs_sockfile_remove(&ctl->made, ctl->path);
	}
	if (ctl->mfd >= 0)
		close(ctl->mfd);
	close(ctl->stop_fd);
	free(ctl);
	return rc < 0 ? rc : -ENOENT;
}

void ctl_stop(struct ctl *ctl)
{
	uint64_t one = 1;

	if (!ctl)
		return;
	if (write(ctl->stop_fd, &one, sizeof(one)) != sizeof(one))
		pfs_warn("status socket: cannot stop its thread: %s", strerror(errno));
	pthread_join(ctl->thr, NULL);
	if (ctl->fd >= 0) {
		close(ctl->fd);
		pfs_sockfile_remove(&ctl->made, ctl->path);
	}
	if (ctl->mfd >= 0)
		close(ctl->mfd);
	close(ctl->stop_fd);
	free(ctl);
}
