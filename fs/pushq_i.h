/* pushq_i.h: the queue of server pushes between the connection thread
 * that receives them and the two threads that act on them.
 *
 * The push thread applies each push (in arrival order) through apply_cb:
 * invalidating the kernel's caches can wait for the kernel (a directory
 * lock, a page lock held by a READ whose reply the connection thread must
 * deliver), so it never runs on the connection thread. The ack thread
 * acknowledges them (ack_cb, PUSH_ACK in wire.h) as soon as they are
 * queued: neither the connection thread (which must never block on a
 * send) nor the push thread (which can wait on the kernel, e.g. for a
 * directory lock held by an operation whose reply waits for another
 * client's ack) may do it.
 */
#ifndef PODFS_PUSHQ_I_H
#define PODFS_PUSHQ_I_H

#include <stddef.h>
#include <stdint.h>

struct pushq;

struct pushq_cbs {
	void *arg;
	/* Connection thread, as a push is queued: numbers it (the gate's
	 * number, 0 for none), before it is visible to the other threads.
	 * payload is borrowed for the call. */
	uint64_t (*note_cb)(void *arg, uint16_t op, const uint8_t *payload, size_t len);
	/* Push thread: applies the push numbered seq (0: none). payload is
	 * borrowed for the call. May block on the kernel. */
	void (*apply_cb)(void *arg, uint16_t op, const uint8_t *payload, size_t len, uint64_t seq);
	/* Ack thread: the first count pushes received on connection gen are
	 * received (counting from 1 at the connection's first push). May
	 * block on a send. */
	void (*ack_cb)(void *arg, uint64_t gen, uint64_t count);
};

/* Creates an empty queue with callbacks *cbs (copied). Returns 0 or
 * -ENOMEM. Start-up thread. */
int pushq_new(const struct pushq_cbs *cbs, struct pushq **out);

/* Starts the push thread and the ack thread (after fuse_daemonize).
 * Returns 0 or -errno (pushq_stop then stops what started). */
int pushq_start(struct pushq *q);

/* Stops the push thread once it applied every push queued, and the ack
 * thread (pushes not acknowledged yet stay so). Safe if not started, and
 * twice. Not from either thread. */
void pushq_stop(struct pushq *q);

/* Frees the queue and the pushes left in it (stopped first). Safe on
 * NULL. */
void pushq_free(struct pushq *q);

/* Connection thread: queues the push op with payload buf[len] (malloc'd;
 * the queue takes it) received on connection gen, numbers it (note_cb)
 * and counts it for the acknowledgement of gen (a new gen starts the
 * count again). On ENOMEM the push is dropped (buf freed, not numbered,
 * not acknowledged). */
void pushq_add(struct pushq *q, uint64_t gen, uint16_t op, uint8_t *buf, size_t len);

/* Connection thread: counts for the acknowledgement of gen a push that
 * was handled on the connection thread instead of queued (LOCK_WAKE). The
 * daemon numbers every push it sends on a connection, and PUSH_ACK
 * carries how many were received (wire.h): a push left out would keep
 * the count behind for the rest of the connection. */
void pushq_count(struct pushq *q, uint64_t gen);

#endif /* PODFS_PUSHQ_I_H */
