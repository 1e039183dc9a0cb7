/* peer_i.h: peer-assisted reads on a mount (-o peers; wire_peer.h,
 * docs/peers.md).
 *
 * A READ of a large regular file (at least peer_min bytes) goes by
 * chunks: for the chunk it falls in, CHUNK asks the coordinator for its
 * digest and where to get it; the chunk comes from the peer named (whole,
 * checked against the digest: peercli.c) or from the coordinator in
 * READs of up to 1 MiB (each reader of the chunk READs the part it
 * needs, the thread that made the chunk the rest, then checks it), and
 * the kernel's READs of it are answered from the chunk store
 * (chunkstore.c), which the mount serves to its peers (peersrv.c).
 * CHUNK_REPORT tells the coordinator how it ended. Anything unusual (a
 * file the coordinator does not chunk, no room in the store, a chunk that
 * changed, an error) sends the READ the usual way.
 *
 * Coherence: data reaches the kernel only from a chunk whose digest the
 * coordinator gave after the read began, or a recent answer about the
 * chunk with no push about the file since (gate.c), as with any READ; a
 * peer's bytes only once they match that digest.
 *
 * Threads: peer_read on FUSE threads (many at once), the peer server's
 * threads, stats from any thread.
 */
#ifndef PODFS_PEER_I_H
#define PODFS_PEER_I_H

#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stddef.h>

struct client;
struct ofile;

/* Defaults of the mount options. */
#define PEER_CACHE_DEFAULT ((size_t)256 << 20) /* peer_cache= */
#define PEER_MIN_DEFAULT ((uint64_t)64 << 20)  /* peer_min= */
#define PEER_TIMEOUT_DEFAULT 5.0               /* peer_timeout=, seconds */

/* Makes c->peer (the store) if c->peers. Start-up thread. 0 or -ENOMEM. */
int peer_new(struct client *c);
/* Starts serving peers, on the address the main connection comes from
 * (after it is up, after fuse_daemonize). Returns 0 or -errno (logged);
 * the mount then reads without peers. */
int peer_start(struct client *c);
/* Stops serving and fetching (waits for the server's threads). After the
 * kernel is done with the mount. */
void peer_stop(struct client *c);
/* Frees c->peer. Safe when it is NULL. */
void peer_free(struct client *c);

/* Answers the kernel's READ (size bytes at off of open file of) by
 * chunks and returns true; false if it did not answer (the caller sends
 * READ): not a file read in chunks, or any trouble on the way. */
bool peer_read(fuse_req_t req, struct ofile *of, size_t size, off_t off);

/* Appends "name value\n" lines of its counters to buf[cap]; returns the
 * length written (0 if off or it does not fit). */
size_t peer_format_stats(struct client *c, char *buf, size_t cap);

#endif /* PODFS_PEER_I_H */
