/* observe.c: the control socket and the metrics endpoint, on the loop
 * (see observe_i.h). */
#include "observe_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "podfs/httphead.h"
#include "podfs/log.h"
#include "podfs/netaddr.h"
#include "podfs/prom.h"
#include "podfs/sockfile.h"
#include "conn_i.h"
#include "pfsd_i.h"

struct obs_srv;

/* A stream of either kind: TCP (metrics) or Unix (control). */
union obs_handle {
	uv_tcp_t tcp;
	uv_pipe_t pipe;
	uv_stream_t stream;
	uv_handle_t handle;
};

/* One client being served. */
struct obs_client {
	union obs_handle u;
	uv_timer_t timer;   /* OBS_TIMEOUT_MS to ask and read the answer */
	uv_write_t wr;
	uv_shutdown_t sd;
	struct obs_srv *srv;
	unsigned open;      /* handles until their close_cb */
	bool answered;      /* the answer is being written */
	bool closing;
	char *reply;        /* the answer, until written */
	size_t len;         /* request bytes read */
	char buf[PFS_HTTP_HEAD_MAX];
	LIST_ENTRY(obs_client) link;
};

/* A listener: the control socket or the metrics endpoint. */
struct obs_srv {
	union obs_handle u;
	struct pfsd *d;
	bool http;          /* the metrics endpoint, else the control socket */
	bool on;            /* initialised, not closed */
	unsigned n;         /* clients being served */
	LIST_HEAD(, obs_client) clients;
};

struct observe {
	struct obs_srv ctl, met;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* "" if none */
	struct pfs_sockfile made; /* path's file: removed at stop only if still it */
	char met_name[64];  /* "addr:port" of the metrics endpoint */
};

void observe_ctl_path(int port, char *buf, size_t len)
{
	snprintf(buf, len, "%s/podfsd-%d.sock", OBS_CTL_DIR, port);
}

int observe_parse_metrics(const char *s)
{
	struct sockaddr_storage ss;

	return pfs_addr_parse(s, OBS_METRICS_PORT, &ss);
}

/* --- clients --- */

static void client_close_cb(uv_handle_t *h)
{
	struct obs_client *cl = h->data;

	if (--cl->open)
		return;
	free(cl->reply);
	free(cl);
}

static void client_close(struct obs_client *cl)
{
	if (cl->closing)
		return;
	cl->closing = true;
	LIST_REMOVE(cl, link);
	cl->srv->n--;
	uv_close(&cl->u.handle, client_close_cb);
	uv_close((uv_handle_t *)&cl->timer, client_close_cb);
}

static void shutdown_cb(uv_shutdown_t *req, int status)
{
	if (status < 0)
		client_close(req->data);
}

/* The answer is out: the write side closes, and what the client still
 * sends is read and dropped until it closes too (or its time is up). A
 * close with unread bytes would reset the connection, and the client
 * could lose the answer (a 400 to a request it has not finished
 * sending). */
static void written_cb(uv_write_t *w, int status)
{
	struct obs_client *cl = w->data;

	if (status < 0 || cl->closing) {
		client_close(cl);
		return;
	}
	cl->sd.data = cl;
	if (uv_shutdown(&cl->sd, &cl->u.stream, shutdown_cb) < 0)
		client_close(cl);
}

/* Sends text (taken) and closes once it is written. */
static void answer(struct obs_client *cl, char *text, size_t len)
{
	uv_buf_t b = uv_buf_init(text, (unsigned)len);

	cl->answered = true;
	cl->reply = text;
	cl->wr.data = cl;
	if (uv_write(&cl->wr, &cl->u.stream, &b, 1, written_cb) < 0)
		client_close(cl);
}

static void answer_http(struct obs_client *cl, int status, bool head_only)
{
	struct pfsd *d = cl->srv->d;
	char *body = NULL, *out;
	size_t blen;
	char h[256];

	if (status == 200) {
		blen = report_metrics(d, &body);
	} else {
		body = xmalloc(64);
		blen = (size_t)snprintf(body, 64, "%d %s\n", status, pfs_http_reason(status));
	}
	int hl = pfs_http_reply_head(h, sizeof(h), status,
				     status == 200 ? PFS_PROM_CONTENT_TYPE : NULL, blen);
	if (hl < 0)
		hl = 0;
	out = xmalloc((size_t)hl + blen);
	memcpy(out, h, (size_t)hl);
	if (!head_only)
		memcpy(out + hl, body, blen);
	free(body);
	answer(cl, out, (size_t)hl + (head_only ? 0 : blen));
}

/* The control socket's request, once its line is whole. */
static void answer_ctl(struct obs_client *cl, const char *line)
{
	char *text;
	size_t len;

	if (strcmp(line, "status") == 0 || strcmp(line, "status verbose") == 0) {
		len = report_status(cl->srv->d, line[6] != 0, &text);
	} else {
		text = xstrdup("error unknown request (want \"status\" or \"status verbose\")\n");
		len = strlen(text);
	}
	answer(cl, text, len);
}

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
	struct obs_client *cl = h->data;
	size_t cap = cl->srv->http ? PFS_HTTP_HEAD_MAX : OBS_LINE_MAX;

	if (cl->answered) /* what comes after the request is dropped */
		*b = uv_buf_init(cl->buf, sizeof(cl->buf));
	else
		*b = uv_buf_init(cl->buf + cl->len, (unsigned)(cap - cl->len));
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
	struct obs_client *cl = s->data;
	struct pfs_http_req r;

	if (cl->closing)
		return;
	if (n < 0) {
		client_close(cl);
		return;
	}
	if (cl->answered)
		return;
	cl->len += (size_t)n;
	if (cl->srv->http) {
		int ret = pfs_http_parse((const uint8_t *)cl->buf, cl->len, PFS_HTTP_HEAD_MAX, &r);
		if (ret > 0)
			answer_http(cl, pfs_http_route(&r, "/metrics"), pfs_http_is_head(&r));
		else if (ret == -E2BIG)
			answer_http(cl, 431, false);
		else if (ret < 0)
			answer_http(cl, 400, false);
		return;
	}
	char *nl = memchr(cl->buf, '\n', cl->len);
	if (nl) {
		*nl = 0;
		if (nl > cl->buf && nl[-1] == '\r')
			nl[-1] = 0;
		answer_ctl(cl, cl->buf);
	} else if (cl->len >= OBS_LINE_MAX) {
		char *e = xstrdup("error request too long\n");
		answer(cl, e, strlen(e));
	}
}

static void timeout_cb(uv_timer_t *t)
{
	client_close(t->data);
}

/* Whether the peer of the control socket client cl may read the status:
 * root or the daemon's user. */
static bool peer_allowed(struct obs_client *cl, unsigned *uid_out)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	uv_os_fd_t fd;

	*uid_out = (unsigned)-1;
	if (uv_fileno(&cl->u.handle, &fd) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
		return false;
	*uid_out = cr.uid;
	return cr.uid == 0 || cr.uid == geteuid();
}

static void connection_cb(uv_stream_t *server, int status)
{
	struct obs_srv *srv = server->data;
	struct pfsd *d = srv->d;
	struct obs_client *cl;
	unsigned uid;

	if (status < 0) {
		pfsd_warn_rl(d, "%s: accept: %s", srv->http ? "metrics" : "control socket",
			     uv_strerror(status));
		return;
	}
	cl = xcalloc(1, sizeof(*cl));
	cl->srv = srv;
	if (srv->http)
		uv_tcp_init(&d->loop, &cl->u.tcp);
	else
		uv_pipe_init(&d->loop, &cl->u.pipe, 0);
	uv_timer_init(&d->loop, &cl->timer);
	cl->u.handle.data = cl;
	cl->timer.data = cl;
	cl->open = 2;
	LIST_INSERT_HEAD(&srv->clients, cl, link);
	srv->n++;
	if (uv_accept(server, &cl->u.stream) < 0) {
		client_close(cl);
		return;
	}
	/* Past the bound, the newest is closed: the ones being served
	 * finish within their timeout. */
	if (srv->n > OBS_MAX_CLIENTS) {
		pfsd_warn_rl(d, "%s: more than %d clients at once; closing one",
			     srv->http ? "metrics" : "control socket", OBS_MAX_CLIENTS);
		client_close(cl);
		return;
	}
	if (!srv->http && !peer_allowed(cl, &uid)) {
		if (pfsd_log_allowed(d))
			pfs_notice("control socket: refused a peer of uid %d (only root or uid %u "
				   "may read the status)", (int)uid, (unsigned)geteuid());
		char *e = xstrdup("error permission denied: only root or the daemon's user may "
				  "read its status\n");
		answer(cl, e, strlen(e));
	}
	uv_timer_start(&cl->timer, timeout_cb, OBS_TIMEOUT_MS, 0);
	if (!cl->closing && uv_read_start(&cl->u.stream, alloc_cb, read_cb) < 0)
		client_close(cl);
}

/* --- listeners --- */

/* Clears path for a new control socket: removes a socket left by a
 * podfsd that died. 0, -EEXIST (not a socket) or -EADDRINUSE (a live
 * podfsd answers on it). */
static int clear_ctl_path(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t len = strlen(path);
	struct stat st;

	if (len >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	if (lstat(path, &st) < 0)
		return 0;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	memcpy(sa.sun_path, path, len + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool live = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	if (fd >= 0)
		close(fd);
	if (live)
		return -EADDRINUSE;
	unlink(path);
	return 0;
}

/* Makes the control socket at path: a socket left by a podfsd that
 * died is replaced; one a live podfsd answers on is left alone. */
static int ctl_start(struct observe *o, struct pfsd *d, const char *path)
{
	size_t len = strlen(path);
	int ret;

	if (len >= sizeof(o->path))
		return -ENAMETOOLONG;
	if (strncmp(path, OBS_CTL_DIR "/", sizeof(OBS_CTL_DIR)) == 0 && mkdir(OBS_CTL_DIR, 0755) < 0 &&
	    errno != EEXIST)
		return -errno;
	/* Under the directory's lock, against another podfsd's removal of
	 * its own file there (sockfile.h). Bound here, not by
	 * uv_pipe_bind: libuv removes the path of a pipe it bound when
	 * closing it, even if another podfsd's socket is there by then;
	 * observe_stop removes it only if still ours. Born 0600: never a
	 * moment in which others could connect. No other thread runs yet,
	 * so the umask may change. */
	int lock = pfs_sockfile_lock(path);
	ret = clear_ctl_path(path);
	int fd = ret < 0 ? ret : pfs_sockfile_bind(&o->made, path, 0177, SOCK_NONBLOCK);
	pfs_sockfile_unlock(lock);
	if (fd < 0)
		return fd;
	memcpy(o->path, path, len + 1);
	uv_pipe_init(&d->loop, &o->ctl.u.pipe, 0);
	o->ctl.on = true;
	ret = uv_pipe_open(&o->ctl.u.pipe, fd);
	if (ret < 0)
		close(fd);
	else
		ret = uv_listen(&o->ctl.u.stream, 16, connection_cb);
	return ret;
}

static int met_start(struct observe *o, struct pfsd *d, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	int len = sizeof(ss), ret;

	if (pfs_addr_parse(d->o.metrics, OBS_METRICS_PORT, &ss) < 0) {
		snprintf(err, errlen, "bad --metrics '%s' (want ADDR[:PORT])", d->o.metrics);
		return -1;
	}
	uv_tcp_init(&d->loop, &o->met.u.tcp);
	o->met.on = true;
	ret = uv_tcp_bind(&o->met.u.tcp, (struct sockaddr *)&ss, 0);
	if (ret == 0)
		ret = uv_listen(&o->met.u.stream, 64, connection_cb);
	if (ret == 0)
		ret = uv_tcp_getsockname(&o->met.u.tcp, (struct sockaddr *)&ss, &len);
	if (ret < 0) {
		snprintf(err, errlen, "cannot listen for metrics on %s: %s", d->o.metrics,
			 uv_strerror(ret));
		return -1;
	}
	pfs_addr_name(&ss, o->met_name, sizeof(o->met_name));
	pfs_notice("metrics on http://%s/metrics", o->met_name);
	return 0;
}

int observe_start(struct pfsd *d, char *err, size_t errlen)
{
	struct observe *o = xcalloc(1, sizeof(*o));
	char path[sizeof(o->path) + 1];

	d->obs = o;
	o->ctl.d = o->met.d = d;
	o->met.http = true;
	o->ctl.u.handle.data = &o->ctl;
	o->met.u.handle.data = &o->met;
	LIST_INIT(&o->ctl.clients);
	LIST_INIT(&o->met.clients);
	if (d->o.metrics) {
		if (met_start(o, d, err, errlen) < 0)
			return -1;
		o->met.u.handle.data = &o->met;
	}
	if (!d->o.control || d->o.control[0]) {
		if (d->o.control)
			snprintf(path, sizeof(path), "%s", d->o.control);
		else
			observe_ctl_path(d->port, path, sizeof(path));
		int ret = ctl_start(o, d, path);
		o->ctl.u.handle.data = &o->ctl;
		if (ret == -EADDRINUSE)
			pfs_warn("control socket %s is another live podfsd's: podfsd status cannot "
				 "reach this one (give it --control-socket PATH)", path);
		else if (ret < 0)
			pfs_warn("no control socket %s: %s (podfsd status cannot reach this daemon)",
				 path, ret == -EEXIST ? "something else is there" : strerror(-ret));
		else
			pfs_info("control socket %s", path);
	}
	return 0;
}

static void srv_stop(struct obs_srv *srv)
{
	while (!LIST_EMPTY(&srv->clients))
		client_close(LIST_FIRST(&srv->clients));
	if (srv->on && !uv_is_closing(&srv->u.handle))
		uv_close(&srv->u.handle, NULL);
	srv->on = false;
}

void observe_stop(struct pfsd *d)
{
	struct observe *o = d->obs;

	if (!o)
		return;
	/* Removed first, while still listening, and only if it is still
	 * ours: a podfsd that replaced it (after this one stopped
	 * answering) keeps its own. */
	if (o->path[0])
		pfs_sockfile_remove(&o->made, o->path);
	o->path[0] = 0;
	srv_stop(&o->ctl);
	srv_stop(&o->met);
}

const char *observe_metrics_name(struct pfsd *d)
{
	return d->obs && d->obs->met_name[0] ? d->obs->met_name : "-";
}

const char *observe_ctl_name(struct pfsd *d)
{
	return d->obs && d->obs->path[0] ? d->obs->path : "-";
}
