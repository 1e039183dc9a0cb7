/* pushq_i.h: the queue of server pushes between the connection thread
 * that receives them and the two threads that act on them.
 *
 * The push thread applies each push (in arrival order; a RECALL may
 * be applied earlier, below) through apply_cb:
 * invalidating the kernel's caches can wait for the kernel (a directory
 * lock, a page lock held by a READ whose reply the connection thread must
 * deliver), so it never runs on the connection thread. The ack thread
 * acknowledges them (ack_cb, PUSH_ACK in wire.h): neither the connection
 * thread (which must never block on a send) nor the push thread (which
 * can wait on the kernel, e.g. for a directory lock held by an operation
 * whose reply waits for another client's ack) may do it.
 *
 * When a push is acknowledged. The daemon holds the reply to a change
 * until the others acknowledged its pushes, so an acknowledgement sent
 * before the kernel applied the invalidation lets the change's author
 * return while this host's kernel still answers from the old state: a
 * stat of an unlinked name, answered from the dentry cache without
 * asking podfs. So an entry invalidation (INVAL_ENTRY) is acknowledged
 * once it was applied; the count being cumulative, so are the pushes
 * after it. Attribute and data invalidations (INVAL_INODE) are
 * acknowledged without waiting for the push thread: dropping pages can
 * wait for page locks, the race gate (gate_i.h) keeps podfs from
 * answering anything they contradict, and an open drops pages a
 * received push made stale. But a stat is answered from the kernel's
 * attributes without asking podfs, so before the ack thread counts a
 * push it calls early_cb for it, which drops those (a quick call that
 * waits for no page lock): once the change's author is told it is done,
 * no stat here shows the old attributes. Except the data of a file the
 * kernel knows (note_cb's applied_first: another host wrote, truncated
 * or grew it), which is acknowledged once applied, as an entry
 * invalidation is: every invalidation the kernel takes makes it drop
 * the replies to the attribute requests it sent before, so the data
 * invalidation applied after its early one made a read on a descriptor
 * held open here, which asks for the size it needs once the early one
 * dropped it, keep the old size and stop there (1 to 3% of the reads
 * right after another host appended and closed). An open's own request
 * goes after any such invalidation (close-to-open) and did not meet it.
 * So are the attributes of an object opened here without the daemon (a
 * lazy open, ofile_i.h): applying the push opens it on the daemon, and
 * the daemon holds a change that may take rights away until then
 * (daemon/rights_i.h), so that the open is made under the old rights.
 *
 * Applying it takes the directory's lock, and a local operation in that
 * directory (create, unlink, rename... the VFS holds the lock across
 * it) may be waiting for its own reply, which the daemon holds until
 * another client acknowledges, which may be waiting the same way: two
 * hosts changing one directory would wait for each other for good. So
 * the FUSE handlers of such operations mark their directories busy
 * (pushq_busy) while they wait for the daemon; while the first
 * unapplied entry invalidation's directory is busy, every push received
 * is acknowledged at once (those behind it could not be applied first
 * either). A directory whose lock the kernel holds for an operation in
 * its parent (moved or replaced by a rename, removed by an rmdir) is
 * marked busy by its name (pushq_busy_name). Acknowledging early is then
 * safe for the local operation
 * itself (the daemon orders it after the change), not for a reader of
 * that directory on this host during it: see docs/coherence.md. The VFS
 * takes the lock a moment before podfs sees the request; the ack thread
 * waits for that moment (pushq_busy wakes it). Any other wait (a lock
 * holder podfs does not know of) is cut at PUSHQ_APPLY_WAIT_MS: that
 * push is then acknowledged unapplied.
 *
 * The page locks that applying data may wait for are held by reads and
 * writebacks, whose replies the daemon does not hold for another
 * client; only a writeback of this host's own pages there, while another
 * host wrote the same pages, could wait for that host: such a push is
 * acknowledged unapplied after PUSHQ_APPLY_WAIT_MS, as an entry
 * invalidation is.
 *
 * A RECALL (deleg_i.h) is acknowledged only once applied, busy
 * directories or not, however long it takes: applying it sends what
 * this client's delegations answered, and the daemon holds another
 * client's request until it has them. (The daemon stops waiting at its
 * acknowledgement deadlines, and then revokes the delegations.) So it
 * does not wait its turn: a thread of its own applies it as it comes,
 * while the push thread may be held in the kernel by a directory lock.
 * Two hosts taking turns through a name (mkdir as a lock) met that: B's
 * mkdir holds the parent's lock while its reply waits for A's
 * acknowledgement; B's push thread waits for that lock, to drop an
 * entry A's rmdir changed; A's lookup of the new name holds A's lock of
 * the parent, and waits for B to answer the recall of the directory B
 * just made; and A cannot apply the invalidation of B's mkdir under
 * that lock. Each round took 500 ms (PUSHQ_APPLY_WAIT_MS broke it). A
 * RECALL touches no kernel cache, and the acknowledgement's count
 * still covers the pushes before it only as the rules above allow.
 *
 * While a push is held back so (the kernel takes its time: dropping a
 * big file's pages in an INVAL_INODE before it, a directory lock), the
 * ack thread sends the count it sent last again every PUSHQ_ALIVE_MS:
 * the daemon ignores a count that does not grow, but it sees that this
 * client runs, and waits for it rather than leaving it behind as a
 * stopped one (docs/coherence.md, "Late and stalled clients"). It does
 * the same while the bytes of large replies keep arriving on the main
 * connection (pushq_note_rx): a push travels behind the replies queued before it,
 * and a host reading a big file at full speed on two shared CPUs took
 * 45 ms to read through them to a push, without sending a frame.
 */
#ifndef PODFS_PUSHQ_I_H
#define PODFS_PUSHQ_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "podfs/codec.h"

/* An entry invalidation not applied this long after its receipt is
 * acknowledged anyway (far below the daemon's 2 s bound). */
#define PUSHQ_APPLY_WAIT_MS 500
/* While one is held back, the last count goes again this often (well
 * below the daemon's least deadline, 30 ms by default). */
#define PUSHQ_ALIVE_MS 10
/* The largest push early_cb sees (an INVAL_INODE is far smaller). */
#define PUSHQ_EARLY_MAX 512
/* Buckets of the busy-directory counts. */
#define PUSHQ_BUSY_BUCKETS 1024

struct pushq;

struct pushq_cbs {
	void *arg;
	/* Connection thread, as a push is queued: numbers it (the gate's
	 * number, 0 for none), before it is visible to the other threads,
	 * and sets *applied_first if it is acknowledged only once applied
	 * (besides entry invalidations and recalls: see above); for an
	 * entry invalidation, *name_key: the pushq_name_key of its
	 * directory's own name (0: unknown; pushq_busy_name). payload is
	 * borrowed for the call. */
	uint64_t (*note_cb)(void *arg, uint16_t op, const uint8_t *payload, size_t len,
			    bool *applied_first, uint64_t *name_key);
	/* Push thread: applies the push numbered seq (0: none). payload is
	 * borrowed for the call. May block on the kernel. */
	void (*apply_cb)(void *arg, uint16_t op, const uint8_t *payload, size_t len, uint64_t seq);
	/* Ack thread: what must hold before the push is acknowledged (it may
	 * run before, during or after apply_cb; once per push not applied
	 * yet when the ack thread gets to it). payload (at most
	 * PUSHQ_EARLY_MAX bytes; larger pushes are not passed) is borrowed
	 * for the call. NULL: nothing. */
	void (*early_cb)(void *arg, uint16_t op, const uint8_t *payload, size_t len);
	/* Ack thread: the first count pushes received on connection gen are
	 * received, and their entry invalidations applied, or waiting for
	 * a busy directory (counting from 1 at the connection's first push).
	 * May block on a send. */
	void (*ack_cb)(void *arg, uint64_t gen, uint64_t count);
};

/* Creates an empty queue with callbacks *cbs (copied). Returns 0 or
 * -ENOMEM. Start-up thread. */
int pushq_new(const struct pushq_cbs *cbs, struct pushq **out);

/* Starts the push, recall and ack threads (after fuse_daemonize).
 * Returns 0 or -errno (pushq_stop then stops what started). */
int pushq_start(struct pushq *q);

/* Stops the push thread once it applied every push queued, and the
 * recall and ack threads (pushes not acknowledged yet stay so). Safe if
 * not started, and twice. Not from one of its threads. */
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

/* Connection thread: bytes of a large payload (a READ reply) came on the
 * main connection gen (the one that carries pushes; stream_i.h
 * STREAM_RX_NOTE_MIN). While they keep coming, the ack thread sends the
 * count it sent last again every PUSHQ_ALIVE_MS: a push may be on its
 * way behind them (a stream of READ replies this host reads through),
 * and the daemon must see that this client runs meanwhile. Lock-free but
 * for one wake-up of the ack thread per PUSHQ_ALIVE_MS. */
void pushq_note_rx(struct pushq *q, uint64_t gen);

/* Connection thread: counts for the acknowledgement of gen a push that
 * was handled on the connection thread instead of queued (LOCK_WAKE). The
 * daemon numbers every push it sends on a connection, and PUSH_ACK
 * carries how many were received (wire.h): a push left out would keep
 * the count behind for the rest of the connection. */
void pushq_count(struct pushq *q, uint64_t gen);

/* Waits until the push thread applied every push queued before this
 * call (the pushes that came before a reply the caller just got: the
 * connection thread queues a push before it delivers the frames behind
 * it), or ms passed, or the queue stops. Returns true if they were
 * applied. Any thread but the push thread; it waits while the push
 * thread waits for the kernel. */
bool pushq_wait_applied(struct pushq *q, int64_t ms);

/* The lock key of directory dir: what pushq_busy takes for it. */
uint64_t pushq_lock_key(const struct pfs_fh *dir);

/* FUSE threads: a local operation holding the kernel's lock of the
 * directory with lock key key (pushq_lock_key) starts waiting for the
 * daemon (delta 1), or stopped (delta -1): see "when a push is
 * acknowledged" above. Every +1 needs its -1. */
void pushq_busy(struct pushq *q, uint64_t key, int delta);

/* The key of the name name_hash (names_i.h) in the directory whose
 * inode table hash is parent_hash (inode_i.h: hn.hash, parent_hash). */
static inline uint64_t pushq_name_key(uint64_t parent_hash, uint64_t name_hash)
{
	return (parent_hash ^ (name_hash * 0x9e3779b97f4a7c15ull)) | 1;
}

/* A local operation under way (delta +1, then -1) that the kernel runs
 * holding the lock of the directory named by key (pushq_name_key) besides
 * its parents': the directory a rename moves to another parent or
 * replaces, the one an rmdir removes. podfs does not know that
 * directory's handle (FUSE gives names), but an entry invalidation in a
 * directory knows its name (note_cb): while it is busy so, the push is
 * treated as if its directory were busy (pushq_busy). */
void pushq_busy_name(struct pushq *q, uint64_t key, int delta);

/* How many acknowledgements went out past an entry invalidation not
 * applied yet: because its directory was busy (*busy), or after
 * PUSHQ_APPLY_WAIT_MS (*unapplied); and how many times the last count
 * went again while one was held back (*alive, PUSHQ_ALIVE_MS). Any
 * thread. */
void pushq_stats(struct pushq *q, uint64_t *busy, uint64_t *unapplied, uint64_t *alive);

#endif /* PODFS_PUSHQ_I_H */
