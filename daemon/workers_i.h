/* workers_i.h: a host's share of the thread pool (limit "workers",
 * limits_i.h): all the sessions from one address (struct hostacct)
 * together. Their requests beyond the share wait in the host's queue, in
 * the order they were read. Loop thread only. */
#ifndef PODFSD_WORKERS_I_H
#define PODFSD_WORKERS_I_H

#include <stdbool.h>
#include <uv.h>

struct req;
struct session;

/* Hands r to the thread pool (dispatch_work_cb, then after), or queues it
 * behind its host's others when the host has its share running.
 * Returns 0 or a libuv error (r not queued: workers_failed). */
int workers_submit(struct req *r, uv_after_work_cb after);
/* done, one of s's requests, left the pool: the next ones waiting in
 * s's host's queue go (of any of its sessions). */
void workers_left(struct session *s, const struct req *done, uv_after_work_cb after);
/* Runs r on the loop thread, now, if it is a small READ that needs no
 * wait and its host has nothing on the pool (docs/limits.md, "Reads
 * answered on the loop"), then after, as a worker's run would. Returns
 * whether it did; if not, r is as it was, for workers_submit. */
bool workers_try_on_loop(struct req *r, uv_after_work_cb after);
/* r could not be queued (ret): logged, and finished as cancelled (its
 * connection closes). */
void workers_failed(struct req *r, int ret, uv_after_work_cb after);

#endif /* PODFSD_WORKERS_I_H */
