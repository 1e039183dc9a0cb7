/* pcache_i.h: the persistent content cache (-o cache_dir=DIR,cache_size=SIZE).
 *
 * Whole file contents on local disk, keyed by the file's server handle
 * and its data version (size, mtime, ctime as the server's lstat saw
 * them; see inode_i.h struct dver), so that a remount or a reboot finds
 * the tree warm: after the lookups (which bring fresh attributes), reads
 * are answered from local disk without READ round trips.
 *
 * Layout of DIR (created if missing, mode 0700):
 *   lock        flock'ed by the one mount that uses DIR (holds its pid);
 *               a second mount with the same DIR is refused.
 *   e/HASH      one entry per handle (HASH: 16 hex digits of a hash of
 *               the handle bytes); format in pcache_fmt.h.
 *   tmp/        entries being written; leftovers of a crash are removed
 *               at start-up.
 *
 * Crash safety: an entry is written under tmp/, its header (the key,
 * with its own CRC32C) and the table of CRC32Cs of each 64 KiB block of
 * the data written last, then renamed into e/. No fsync: after a power
 * loss an entry may be short or hold garbage, which the size check and
 * the checksums catch; it is then deleted and fetched again. Every use
 * checks the header and the blocks it reads (CRC32C with SSE4.2 costs
 * far less than reading the data; a whole-file check would read all of
 * an mmap'ed library of which a process touches a few pages).
 *
 * What is cached: files up to PCACHE_FILE_DIV-th of cache_size. A file
 * read whole by one READ (or arriving with its lookup, LOOKUP_DATA) is
 * stored from that data; a larger one is fetched whole by the
 * background thread after its first read (an mmap'ed library is read
 * only in part, but its next mount wants the rest too), unless it was
 * modified in the last 10 seconds (probably still being written).
 *
 * Size: the bytes of the entries (rounded up to 4 KiB blocks) stay
 * under cache_size; the least recently used go first. The last use is
 * kept in memory to the nanosecond and in the entry's mtime (updated at
 * most every PCACHE_TOUCH_S seconds), so the order survives a remount;
 * the index is rebuilt at start-up by a background thread that scans e/
 * (the mount does not wait for it).
 *
 * Freshness: the caller passes the version it knows to be current
 * (inode_data_version: not while a push about the file is pending). Data
 * stored under a version was read from the server after that version
 * was seen, so it is that version's content or newer, and a newer
 * content means that version is never current again (ctime moves).
 *
 * Hooks in ops_entry.c and ops_file.c: ops_lookup offers LOOKUP_DATA's
 * inline content; ops_read asks pcache_read before sending READ and,
 * after a READ, offers the data (whole file) or queues a fetch (part of
 * it).
 *
 * Threads: pcache_read and the offer/fetch calls run on FUSE threads;
 * one scan thread at start-up; one worker thread writes entries, runs
 * fetches and evicts. Thread-safe.
 */
#ifndef PODFS_PCACHE_I_H
#define PODFS_PCACHE_I_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "inode_i.h"
#include "podfs/codec.h"

struct client;
struct pcache;

#define PCACHE_FILE_DIV 8 /* largest cached file: cache_size / this */
#define PCACHE_TOUCH_S 1  /* last-use times are this coarse */

/* Opens (creating it if missing) and locks cache directory dir, for at
 * most max_bytes of entries. Start-up, before the session runs. Returns
 * 0, or -errno with a one-line reason in err[errlen] (-EBUSY: another
 * mount uses dir). */
int pcache_open(const char *dir, uint64_t max_bytes, struct pcache **out, char *err,
		size_t errlen);
/* Starts the scan and worker threads (after fuse_daemonize: the lock
 * file gets this process's pid). c is used for the background fetches.
 * 0 or -errno. */
int pcache_start(struct pcache *pc, struct client *c);
/* Writes the entries still queued, runs the queued fetches for at most
 * DRAIN_S (10) seconds more (the connection must still be up), stops
 * the threads. Call after the kernel is done with the mount. */
void pcache_stop(struct pcache *pc);
/* Stops if needed, unlocks and frees. Safe on NULL. */
void pcache_free(struct pcache *pc);

/* Copies up to size bytes at off of the content of fh at version v into
 * buf. Returns the byte count (short only at the end of the file), or
 * -ENOENT if there is no entry of that handle and version whose
 * header and blocks in the range check out (a damaged one is deleted). Counts a hit or a miss. */
ssize_t pcache_read(struct pcache *pc, const struct pfs_fh *fh, const struct dver *v,
		    uint64_t off, size_t size, void *buf);

/* data[len] is the whole content of fh at version v (len == v->size):
 * queues it to be stored (copied; dropped if too much is queued or the
 * file is too large). */
void pcache_offer(struct pcache *pc, const struct pfs_fh *fh, const struct dver *v,
		  const void *data, size_t len);

/* The kernel read part of fh (version v) from the server: queues a
 * background fetch of the whole file with credentials cr if it is not
 * too large nor modified in the last 10 s (nothing happens if an entry
 * exists by then). */
void pcache_fetch(struct pcache *pc, const struct pfs_creds *cr, const struct pfs_fh *fh,
		  const struct dver *v);

/* True if a file of size bytes may be cached. */
bool pcache_wants(struct pcache *pc, uint64_t size);

/* Appends "name value\n" lines of the counters to buf[cap]; returns the
 * length written (0 if it does not fit). */
size_t pcache_format_stats(struct pcache *pc, char *buf, size_t cap);

#endif /* PODFS_PCACHE_I_H */
