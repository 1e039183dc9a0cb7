/* observe_i.h: what podfsd shows of itself, served from the loop: the
 * control socket that `podfsd status` reads, and the Prometheus metrics
 * endpoint (--metrics).
 *
 * The control socket is an AF_UNIX stream socket, mode 0600, owned by
 * the daemon's user; a peer whose SO_PEERCRED uid is neither root nor
 * that user is refused. A client sends one line, "status" or "status
 * verbose" (at most OBS_LINE_MAX bytes), and reads the answer until the
 * daemon closes: "key value" lines (report.c). The metrics endpoint is
 * HTTP/1.x: GET /metrics gets the text exposition format 0.0.4, anything
 * else 400, 404 or 405, and the connection closes after one answer.
 *
 * Bounds: at most OBS_MAX_CLIENTS clients of each at once (more are
 * closed at once), a request of at most OBS_LINE_MAX bytes (control) or
 * PFS_HTTP_HEAD_MAX (metrics), OBS_TIMEOUT_MS for a client to send its
 * request and read the answer. Every answer is built on the loop thread
 * from counters; nothing here waits for a disk or a worker.
 *
 * Loop thread only.
 */
#ifndef PODFSD_OBSERVE_I_H
#define PODFSD_OBSERVE_I_H

#include <stdbool.h>
#include <stddef.h>

struct pfsd;

#define OBS_MAX_CLIENTS 8
#define OBS_LINE_MAX 256
#define OBS_TIMEOUT_MS 5000
#define OBS_CTL_DIR "/run/podfs"
#define OBS_METRICS_PORT 7050 /* --metrics ADDR without a port */

/* The default control socket of the daemon listening on port. */
void observe_ctl_path(int port, char *buf, size_t len);

/* Starts the control socket (d->o.control; NULL: the default path of
 * d->port; "": none) and the metrics endpoint (d->o.metrics, parsed
 * into d's observe state by observe_parse_metrics). A control socket
 * that cannot be made is logged and left out; a metrics address that
 * cannot be bound fails: returns -1 with a one-line reason in err. */
int observe_start(struct pfsd *d, char *err, size_t errlen);
/* Closes both, and the clients being served; removes the socket.
 * Idempotent. */
void observe_stop(struct pfsd *d);

/* Checks --metrics ADDR[:PORT] (numeric). Returns 0 or -EINVAL. */
int observe_parse_metrics(const char *s);

/* The metrics endpoint's "addr:port" and the control socket's path, or
 * "-" where there is none. */
const char *observe_metrics_name(struct pfsd *d);
const char *observe_ctl_name(struct pfsd *d);

/* --- report.c: the answers --- */

/* The status as "key value" lines (podfsd status parses them) into a
 * malloc'd *out; verbose adds every lock held. Returns its length. */
size_t report_status(struct pfsd *d, bool verbose, char **out);
/* The metrics, text exposition format 0.0.4, into a malloc'd *out.
 * Returns its length. */
size_t report_metrics(struct pfsd *d, char **out);

#endif /* PODFSD_OBSERVE_I_H */
