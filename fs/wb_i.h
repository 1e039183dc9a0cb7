/* wb_i.h: client-side write-behind with a commit verifier (NFS UNSTABLE +
 * COMMIT).
 *
 * A FUSE WRITE is copied into a request buffer, queued, and answered at
 * once; a few writer threads send the queued writes (synchronous rpc_call
 * each, so reconnects and resends work as for every other request), so
 * several 1 MiB writes are in flight per file and the application's next
 * write overlaps the network and the daemon's disk.
 *
 * Durability. A write the daemon acknowledged is only in its page cache.
 * The client keeps its data ("uncommitted") together with the verifier
 * of the reply (rpc_reply.verf: the daemon's write verifier, which names
 * the boot of its machine) until a COMMIT (FSYNC with datasync) answered
 * under the same verifier covers it. A COMMIT answered under another
 * (the daemon's machine restarted in between: its page cache, which held
 * the acknowledged writes, is gone) makes the client send the
 * uncommitted writes again and commit again. A daemon that restarted on
 * the same machine (kill -9, an upgrade) keeps the verifier: the writes
 * it acknowledged are in the page cache, and sending them again would
 * only land them over what other hosts wrote since. Uncommitted data is
 * committed in the background when a file holds more than WB_COMMIT_AT
 * bytes of it, and always by fsync and release (the end of an open file
 * description: its last close, which the kernel sends without making
 * close(2) wait for it).
 *
 * Coalescing. A program that writes in small pieces (8 KiB from a
 * Python file, 10 KiB from tar) would cost a WRITE request each, and the
 * requests, not the bytes, would bound its rate. So a write that
 * continues the file's last queued write (the bytes right after it, by
 * the same open file and caller, neither of them O_APPEND, O_DIRECT or
 * O_SYNC) is appended to that write while no writer thread has taken it
 * yet; and a queued write shorter than WB_GROW_MAX that is the last of
 * its file waits while another write of the file is being sent, unless
 * a thread waits for the file's writes (close, fsync, a read, a writer
 * short of memory). One piece then goes alone, and the next ones leave
 * together when it is answered: as many as the program wrote in that
 * round trip.
 *
 * Errors. A failed write (ENOSPC, EDQUOT, EIO...) is remembered per inode
 * and reported by the next write(), and by flush (close) and fsync, which
 * then forget it (as NFS does).
 *
 * Ordering. A write that overlaps a pending one of the same inode waits
 * for it first, so overlapping writes reach the daemon in order; writes
 * sent again after a restart keep that order too (wb_file_i.h). Anything
 * that must see the written bytes on the daemon (read, getattr, setattr,
 * lseek, fallocate, locks) calls wb_wait first; a change of the bytes
 * that is not a write calls wb_before_change.
 *
 * Close. flush (every close(2) of a descriptor, also of copies that a
 * forked child closes) waits for the file's writes and reports their
 * errors; it does not commit: a disk flush per close made creating many
 * small files wait for a journal commit each (2,000 x 1 KiB, three
 * alternating pairs here: 3.1-4.9 s before, 2.2-3.4 s now; the commits
 * still happen, one per file, at release). Close-to-open needs the data
 * on the daemon, not on its disk. Only one exception: when the daemon is
 * unreachable, a flush by a thread that never wrote the file (tid, the
 * FUSE request's thread id) returns at once instead of waiting for it, so
 * a process that forks (to restart the daemon, say) with a dirty file open
 * cannot hang on its child's close of the inherited copy.
 *
 * Memory. At most WB_MAX bytes of write data are held (pending plus
 * uncommitted); a writer blocks beyond that.
 *
 * Threads: every function may be called from any FUSE thread.
 */
#ifndef PODFS_WB_I_H
#define PODFS_WB_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "podfs/codec.h"

struct client;
struct inode;
struct wb;

/* Creates the write-behind state for nthreads writer threads (nthreads 0:
 * writes are synchronous, wb_write sends and waits). The threads start
 * with wb_start, after the process has daemonized (fork keeps no thread).
 * Returns 0 or -errno. */
int wb_new(struct client *c, unsigned nthreads, size_t max_bytes, struct wb **out);
/* Starts the writer threads. Returns 0 or -errno (wb_free still works).
 * The main thread, once. */
int wb_start(struct wb *wb);
/* Stops the writer threads (pending writes are sent first while the
 * connection allows) and frees everything. Safe on NULL. The main
 * thread, at shutdown. */
void wb_free(struct wb *wb);

/* Queues a write of buf[size] at off (copied). Returns 0 (the write is
 * accepted), or -errno: -ENOMEM, -EINTR (killed while waiting for
 * room); with no writer threads (synchronous), the write's own error.
 * An earlier write's failure does not stop it: the open file that wrote
 * hears of it once (ops_write, ofile_wb_err). cr, fh, fid and flags are
 * copied. */
int wb_write(struct wb *wb, struct inode *ip, const struct pfs_creds *cr,
	     const struct pfs_fh *fh, uint64_t fid, uint32_t flags, uint64_t off,
	     const void *buf, size_t size, uint32_t tid);

/* Waits until no write of ip is queued or in flight. Returns 0, or
 * -EINTR if the process this thread answers is being killed meanwhile
 * (killable_i.h; the writes stay queued). */
int wb_wait(struct wb *wb, struct inode *ip);

/* wb_wait, after the create of a file made under a directory
 * delegation, whose first bytes may travel with it (dirdeleg_i.h): all
 * of ip's data written so far is on the daemon after. Returns as
 * wb_wait. */
int wb_wait_data(struct wb *wb, struct inode *ip);

/* Before a change of ip's bytes at and after byte from that is not a
 * write (a truncate, an O_TRUNC open, fallocate's punch, zero, collapse
 * or insert): waits for ip's pending writes and for a commit in flight,
 * then commits the uncommitted writes that reach beyond from. Otherwise
 * a pending write would land after the change, and a daemon that
 * restarted after it would get the old bytes back over it, sent again
 * (wb.c). A commit that fails forgets those writes and keeps its error
 * for the next write, flush or fsync, as a failed write's. Returns 0, or
 * -EINTR (wb_wait). */
int wb_before_change(struct wb *wb, struct inode *ip, uint64_t from);

/* This host changed ip's attributes (the SETATTR m, answered here or by
 * the daemon): while ip has uncommitted writes, the mtime and mode it set
 * are remembered, and set again after those writes if a restarted daemon
 * makes them be sent again (their pwrite would move the mtime to the
 * time of the resend, and clear a set-user-ID bit set after them). A
 * later write, truncate or chown forgets what it changes itself. */
void wb_note_setattr(struct wb *wb, struct inode *ip, const struct pfs_setattr_req *m);

/* True if write-behind holds state for ip (writes pending, uncommitted
 * or an error to report): a flush or release of ip then talks to the
 * daemon. */
bool wb_holds(struct wb *wb, struct inode *ip);

/* Waits for the pending writes of ip, then commits: if any data of ip is
 * uncommitted or force is set, sends FSYNC (datasync as given) and
 * re-sends what a restarted daemon lost. Returns 0 or the first error of
 * a write (then forgotten) or of the FSYNC. */
int wb_sync(struct wb *wb, struct inode *ip, const struct pfs_creds *cr,
	    const struct pfs_fh *fh, uint64_t fid, bool datasync, bool force);

/* flush (close): waits for the pending writes of ip and returns the first
 * error of one (then forgotten), or 0; no commit (see above). Returns at
 * once, as said above, for a thread tid that never wrote ip while the
 * daemon is unreachable. */
int wb_flush(struct wb *wb, struct inode *ip, uint32_t tid);
/* flush of a file no other host can reach before its writes are done (a
 * file made under a directory delegation, dirdeleg_covers): the first
 * error of a write already answered (then forgotten), or 0; no wait. */
int wb_flush_nowait(struct wb *wb, struct inode *ip);

/* An open file of ip ends (RELEASE): waits for the pending writes of ip,
 * commits, and, if no other user remains, forgets what is left (logging
 * a lost error). */
void wb_release(struct wb *wb, struct inode *ip, const struct pfs_creds *cr,
		const struct pfs_fh *fh, uint64_t fid);

/* Unmount: commits whatever is still uncommitted (a release the kernel
 * dropped with the connection does not leave data uncommitted), while
 * the connection allows; failures are logged. Safe on NULL. The main
 * thread, at shutdown. */
void wb_commit_all(struct wb *wb);

/* Counters for stats (bytes). */
struct wb_stats {
	uint64_t written;   /* bytes of WRITE the daemon acknowledged */
	uint64_t resent;    /* bytes re-sent after a daemon restart */
	uint64_t commits;   /* COMMITs sent */
	uint64_t coalesced; /* writes appended to the queued write before them */
	uint64_t held;      /* bytes held now */
};
/* Copies the counters into *st (consistent with each other). */
void wb_get_stats(struct wb *wb, struct wb_stats *st);

#endif /* PODFS_WB_I_H */
