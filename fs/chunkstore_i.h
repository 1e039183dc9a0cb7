/* chunkstore_i.h: the chunks a mount holds for peer-assisted reads
 * (wire_peer.h), in memory, by content.
 *
 * A chunk is named by its SHA-256 (the digest podfsd gave): the store
 * holds at most one chunk per digest, so two files (or two places of
 * one file) with the same bytes share it, and a chunk never goes stale:
 * a file that changes has other digests, which only a fresh CHUNK gives
 * out. The page cache has the file's data, not podfs: this store is
 * what the mount can serve to its peers (peersrv.c) and what its own
 * readers of a chunk being fetched wait for (peer.c).
 *
 * A chunk's life:
 *   CK_PEER  its owner (the thread that made it) fetches it whole from a
 *            peer; others wait (cstore_wait).
 *   CK_COORD it is read from the coordinator in slots of CSTORE_SLOT
 *            bytes: any thread that needs a slot claims it (cstore_claim)
 *            and READs it, the owner claims and READs the ones nobody
 *            needed, then checks the whole against the digest.
 *   CK_READY checked against its digest: whole, served to peers.
 *   CK_FAILED not that digest's bytes after all, or abandoned: out of
 *            the index, freed with its last reference.
 * Slot data that a thread READ from the coordinator is good for the
 * reader that needed it whatever the final check says (it is what a
 * READ returned); only a CK_READY chunk is served to peers.
 *
 * Memory: the chunks' bytes (being filled or not) stay under the bound
 * given at creation; unreferenced CK_READY chunks go, least recently
 * used first, to make room; cstore_make fails when the rest is in use.
 *
 * Recent chunks: what CHUNK said of (file, index) a moment ago (its
 * digest, its length, the push number before it was asked and the
 * file's data version the caller knew then), so that the kernel's other
 * READs of the same chunk (1 MiB each) need no CHUNK of their own while
 * no push about the file came since (the caller asks gate.c) and the
 * file is at that version: this host's own writes send it no push, but
 * change the version its replies give. At most CSTORE_RECENT of them.
 *
 * Pure logic (pthreads only): any thread; waits are bounded by the
 * deadline given (CLOCK_MONOTONIC ms; -1: none).
 */
#ifndef PODFS_CHUNKSTORE_I_H
#define PODFS_CHUNKSTORE_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "podfs/codec.h"
#include "podfs/htab.h"

#define CSTORE_SLOT PFS_MAX_IO /* bytes per READ of a chunk */
#define CSTORE_SLOTS ((1u << PFS_CHUNK_SHIFT_MAX) / CSTORE_SLOT)
#define CSTORE_RECENT 1024
#define CSTORE_GONE 256      /* dropped digests remembered (cstore_serve) */
/* How long a peer waits for a chunk not held yet: the coordinator names
 * a client as the source as soon as it sends it to fetch the chunk, and
 * the client's thread may take more than a second to get that answer on
 * a loaded host (the peers sent there would then all fail it). */
#define CSTORE_ABSENT_MS 3000

_Static_assert(CSTORE_SLOTS <= 64, "a chunk's slots fit a 64-bit mask");

enum ck_mode { CK_PEER, CK_COORD, CK_READY, CK_FAILED };

struct chunk {
	/* Read-only once made. */
	uint8_t digest[PFS_DIGEST_LEN];
	uint32_t len;
	unsigned nslots;
	struct pfs_fh fh;         /* the file and chunk it was made for */
	uint64_t index;
	/* The bytes: written by the owner (CK_PEER) or by the holder of a
	 * slot's claim (CK_COORD) without the store's lock; read by anyone
	 * once the slot is filled or the chunk CK_READY. */
	uint8_t *data;
	/* The store's (under its lock). */
	struct hnode hn;          /* by digest, unless CK_FAILED */
	TAILQ_ENTRY(chunk) lru;   /* CK_READY, unreferenced or only sent to peers */
	unsigned refs;
	enum ck_mode mode;
	uint64_t filled, claimed; /* slot bits (CK_COORD) */
	bool in_lru;
};

struct cstore;

struct cstore_stats {
	uint64_t bytes, chunks, max_bytes;
	uint64_t evicted;  /* chunks dropped for room */
	uint64_t no_room;  /* cstore_make refused */
	/* cstore_serve found none: dropped lately, never made within
	 * CSTORE_ABSENT_MS, or still being filled at the deadline. */
	uint64_t miss_gone, miss_absent, miss_late;
};

/* A store of at most max_bytes. Returns 0 or -ENOMEM. */
int cstore_new(size_t max_bytes, struct cstore **out);
/* Frees it and every chunk (no reference may be left). Safe on NULL. */
void cstore_free(struct cstore *s);

/* The chunk of digest d with a reference (release with cstore_put), or
 * NULL; for a reader of chunk index of fh (fh NULL: anyone), only one
 * that reader may use: checked (CK_READY), or made for that same chunk
 * of that file (its slots are READ through the file of their claimer). */
struct chunk *cstore_find(struct cstore *s, const uint8_t d[PFS_DIGEST_LEN],
			  const struct pfs_fh *fh, uint64_t index);
/* What a chunk dropped for room was made for (the coordinator lists its
 * maker as holding it until told otherwise). */
struct cstore_gone {
	struct pfs_fh fh;
	uint64_t index;
	uint8_t digest[PFS_DIGEST_LEN];
};
#define CSTORE_GONE_MAX 8 /* of them, told per cstore_make */

/* The chunk of digest d, referenced: the one held (*created false), or a
 * new one of len bytes (1..1 << PFS_CHUNK_SHIFT_MAX) in mode (CK_PEER or
 * CK_COORD) for chunk index of fh, whose owner the caller is (*created
 * true). NULL when there is no room (or a bad len), or when the one held
 * is not checked yet and was made for another file or chunk (as
 * cstore_find: the caller reads the usual way). The chunks dropped
 * to make room go into gone[CSTORE_GONE_MAX] (*ngone of them; more are
 * not told). */
struct chunk *cstore_make(struct cstore *s, const uint8_t d[PFS_DIGEST_LEN], uint32_t len,
			  enum ck_mode mode, const struct pfs_fh *fh, uint64_t index,
			  bool *created, struct cstore_gone *gone, unsigned *ngone);
/* Drops a reference; an unreferenced chunk waits in the LRU (CK_READY)
 * or is freed (CK_FAILED). */
void cstore_put(struct cstore *s, struct chunk *c);

/* Waits while c is CK_PEER, until deadline: returns its mode then, or
 * -ETIMEDOUT. */
int cstore_wait(struct cstore *s, struct chunk *c, int64_t deadline);
/* The owner of a CK_PEER chunk: it is CK_READY (its bytes checked), or
 * CK_COORD (the peer failed: every slot empty; the waiters claim theirs),
 * or CK_FAILED. Wakes the waiters. A CK_COORD chunk becomes CK_READY or
 * CK_FAILED the same way. */
void cstore_set_mode(struct cstore *s, struct chunk *c, enum ck_mode mode);

/* CK_COORD: the caller needs slots first..last. Claims the empty ones
 * (their bits go into *mine: the caller READs them and calls
 * cstore_filled for each), all at once: while another thread holds a
 * claim on one of them it claims none and waits (holding some while
 * waiting for others, two threads could wait for each other). Returns 0
 * once each is filled or the caller's, its mode if c is no longer
 * CK_COORD (CK_READY: all there; CK_FAILED), or -ETIMEDOUT. */
int cstore_claim(struct cstore *s, struct chunk *c, unsigned first, unsigned last,
		 uint64_t *mine, int64_t deadline);
/* The caller's claimed slot is filled (ok) or given back (the READ
 * failed). Wakes the waiters. */
void cstore_filled(struct cstore *s, struct chunk *c, unsigned slot, bool ok);
/* Whether every slot of c is filled. */
bool cstore_complete(struct cstore *s, struct chunk *c);

/* For a peer: the CK_READY chunk of digest d, referenced, waiting until
 * deadline while it is being filled here, and up to CSTORE_ABSENT_MS for
 * one not held yet (the coordinator names a client as soon as it sends
 * it to fetch the chunk); NULL if it is not held (or failed, or went
 * lately, or the deadline passed). */
struct chunk *cstore_serve(struct cstore *s, const uint8_t d[PFS_DIGEST_LEN], int64_t deadline);

/* Unmount: cstore_serve waits no more (it returns NULL from now on). */
void cstore_close(struct cstore *s);

/* Recent CHUNK answers: chunk index of file fkey (a hash of its handle)
 * has digest d and len bytes, as asked at push number seq with the
 * file at data version ver (a hash of it: compared, not read). */
void cstore_recent_put(struct cstore *s, uint64_t fkey, uint64_t index, uint64_t ver,
		       const uint8_t d[PFS_DIGEST_LEN], uint32_t len, uint64_t seq);
/* Copies what is known of (fkey, index) at version ver; false if
 * nothing, or only an answer for another version. */
bool cstore_recent_get(struct cstore *s, uint64_t fkey, uint64_t index, uint64_t ver,
		       uint8_t d[PFS_DIGEST_LEN], uint32_t *len, uint64_t *seq);

/* One CHUNK at a time per (fkey, index): the kernel sends the READs of
 * one chunk at once, and a second question before the first one's
 * answer is in the store would look to the coordinator like a client
 * that lost its copy. cstore_ask_begin returns true if the caller is to
 * ask (it then calls cstore_ask_done once the answer and its chunk are
 * in the store), false once another thread's question about it ended
 * (the caller looks at the recent answer again); it waits for that at
 * most until deadline (then the caller asks too: true). */
bool cstore_ask_begin(struct cstore *s, uint64_t fkey, uint64_t index, int64_t deadline);
void cstore_ask_done(struct cstore *s, uint64_t fkey, uint64_t index);

void cstore_stats(struct cstore *s, struct cstore_stats *st);

#endif /* PODFS_CHUNKSTORE_I_H */
