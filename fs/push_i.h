/* push_i.h: what the server's pushes do to this client (wire.h: INVAL_INODE,
 * INVAL_ENTRY; LOCK_WAKE goes to locks.c).
 *
 * A push is numbered as it arrives (push_note, the main connection
 * thread: see gate_i.h) and applied later, in order, by the push thread
 * (push_apply): the inode table forgets what the push makes stale, lazy
 * opens of a file whose attributes changed elsewhere are made known to
 * the daemon (ofile_attach_lazy), and the kernel's caches are invalidated
 * (fuse_lowlevel_notify_*, which may wait for the kernel: never on the
 * connection thread).
 */
#ifndef PODFS_PUSH_I_H
#define PODFS_PUSH_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct client;

/* Main connection thread, as push op (payload[len], borrowed) arrives:
 * numbers it in the gate (INVAL_INODE: the object; INVAL_ENTRY: the
 * parent) and returns its number, 0 for a malformed or unknown one.
 * *applied_first: whether it must reach the kernel before it is
 * acknowledged: the data of a file the kernel knows (pushq_i.h);
 * *name_key (INVAL_ENTRY): the parent's own name (pushq_name_key). Never
 * blocks on the kernel or the network. */
uint64_t push_note(struct client *c, uint16_t op, const uint8_t *payload, size_t len,
		   bool *applied_first, uint64_t *name_key);

/* Push thread: applies push op (payload[len], borrowed) to the inode
 * table and the kernel's caches, then records that pushes up to seq (its
 * push_note number; 0: none) reached the kernel (gate_set_applied). A
 * malformed push is logged and ignored. May wait for the kernel, and up
 * to 500 ms per lazy open for the daemon. */
void push_apply(struct client *c, uint16_t op, const uint8_t *payload, size_t len, uint64_t seq);

/* What must be true before a push is acknowledged (the ack thread, maybe
 * before push_apply): an INVAL_INODE drops the kernel's attributes of its
 * object, so that a stat on this host cannot answer the old ones once
 * the change's author was told it is done. Attributes only: unlike
 * pages, they never wait for a lock held by a request podfs must answer
 * first. */
void push_early(struct client *c, uint16_t op, const uint8_t *payload, size_t len);

#endif /* PODFS_PUSH_I_H */
