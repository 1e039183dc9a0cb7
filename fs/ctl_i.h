/* ctl_i.h: the mount's status socket.
 *
 * `podfs status` must work when the mount does not: while the server is
 * away, anything that touches the mount (a stat, even the permission
 * check of a getxattr) may wait for it. So each mount also serves its
 * figures (stats_i.h) on a Unix socket of its own,
 * CTL_DIR/mount-MAJOR_MINOR.sock, named by the mount's device number
 * (the third field of /proc/self/mountinfo), mode 0600: root reads it.
 * A connection gets the text, then the socket closes. One thread, which
 * never touches the mount.
 *
 * With -o metrics=ADDR:PORT the same thread serves the figures as
 * Prometheus text (stats_metrics) over HTTP: GET /metrics, one answer
 * per connection, at most CTL_HTTP_CLIENTS at once, each given
 * CTL_HTTP_TIMEOUT_MS to send its request head (PFS_HTTP_HEAD_MAX bytes
 * at most) and to read the answer. Nothing it does waits for the server.
 */
#ifndef PODFS_CTL_I_H
#define PODFS_CTL_I_H

#include <stddef.h>

struct client;
struct ctl;

#define CTL_DIR "/run/podfs"
#define CTL_HTTP_CLIENTS 8
#define CTL_HTTP_TIMEOUT_MS 5000

/* The socket path of the mount with device dev ("MAJOR:MINOR") into
 * path[len]. */
void ctl_path(const char *dev, char *path, size_t len);

/* Serves c's figures on its socket (and on c->metrics_addr if
 * c->metrics; a metrics address that cannot be bound is logged, the
 * mount goes on without), from a thread of its own. Returns 0
 * with *out set, or -errno after a log line (the mount works without it:
 * not root, say). After the mount exists (its device is known). */
int ctl_start(struct client *c, struct ctl **out);
/* Stops the thread and removes the socket. Safe on NULL. */
void ctl_stop(struct ctl *ctl);

#endif /* PODFS_CTL_I_H */
