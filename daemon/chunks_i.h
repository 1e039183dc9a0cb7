/* chunks_i.h: peer-assisted reads on the coordinator's side
 * (wire_peer.h): the digests of large files' chunks, which clients hold
 * which chunk, and the choice of where a client should get
 * a chunk from.
 *
 * Digests. For each file (by its interest key, handles_key) at one
 * version (inode, size, mtime, ctime as fstat saw them), the SHA-256 of
 * each chunk, taken the first time a client asks for it (by the worker
 * that got the request, outside the table's lock: chunks_digest hands it
 * a ticket, chunks_digest_done takes the result) and kept until the file
 * changes: a change made through podfs (op.c) or seen by the export's
 * watch (watch.c) calls chunks_drop; a request that finds another
 * version forgets the old one's digests and holders; a digest taken
 * while the file changed (a drop, or another version before and after
 * the read) is not kept.
 *
 * Holders. Per chunk, up to CHUNKS_HOLDERS records of clients that serve
 * peers (registered with chunks_peer_set) and hold the chunk (HOLDING,
 * from their CHUNK_REPORT) or were sent to fetch it (FETCHING, for at
 * most conf.fetch_ms unless they report). chunks_choose picks the source
 * for a client: the holder or fetcher that serves fewest clients right
 * now (fewer than conf.fanout), holders before fetchers and, among
 * fetchers, the one closest to the coordinator (depth: a client sent to
 * the coordinator is depth 0, one sent to a depth d client is d + 1), so
 * that clients that all start at one chunk form a tree of fan-out
 * conf.fanout under the one that reads it from the coordinator instead
 * of a chain; with none, the coordinator. So each chunk leaves the
 * coordinator about once however many clients read it at once.
 *
 * A peer reported bad (PFS_CKR_PEER_BAD) for three chunks (reports about one chunk count once) within
 * CHUNKS_STRIKE_MS is not offered for CHUNKS_BAD_MS; one whose session
 * lost its connection (chunks_peer_away) is not offered until it asks
 * again; one whose session ended (chunks_peer_gone) loses every record.
 *
 * Bounds: the table's memory (digests, records, files) stays under
 * conf.max_bytes by dropping the least recently used files; at most
 * CHUNKS_PEERS clients serve at once (later ones are only sent
 * elsewhere); a peer has at most conf.per_peer records; a chunk at most
 * CHUNKS_HOLDERS.
 *
 * Pure logic: no I/O, no libuv; time comes in as now_ms (any monotonic
 * clock). Thread-safe: one mutex; chunks_digest may wait (on a condition
 * variable) while another thread takes the same chunk's digest.
 */
#ifndef PODFSD_CHUNKS_I_H
#define PODFSD_CHUNKS_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "podfs/wire.h"

#define CHUNKS_HOLDERS 16     /* records per chunk */
#define CHUNKS_PEERS 1024     /* clients serving peers at once */
#define CHUNKS_STRIKES 3      /* PEER_BAD reports that make a peer bad */
#define CHUNKS_STRIKE_MS 60000
#define CHUNKS_BAD_MS 30000   /* how long a bad peer is not offered */
#define CHUNKS_NO_PEER 0xffffu

struct chunks_conf {
	unsigned shift;    /* chunks are 1 << shift bytes (PFS_CHUNK_SHIFT_MIN..MAX) */
	uint64_t min_size; /* files smaller than this are not served in chunks */
	size_t max_bytes;  /* the table's memory */
	unsigned fanout;   /* clients one holder is sent at once (>= 1) */
	unsigned fetch_ms; /* a fetch not reported within this is forgotten */
	unsigned per_peer; /* records per peer */
};

/* A file's version (fstat). */
struct chunk_ver {
	uint64_t ino, size;
	int64_t mtime_s, ctime_s;
	uint32_t mtime_ns, ctime_ns;
};

/* Where chunks_choose sends a client. */
struct chunk_source {
	unsigned kind;       /* PFS_CK_SERVER, PFS_CK_PEER, PFS_CK_HELD */
	uint32_t peer, gen;  /* PFS_CK_PEER: the peer (for reports) */
	uint8_t addr[16];    /* and where it listens */
	uint8_t alen;        /* 4 or 16 */
	uint16_t port;
};

/* A digest the caller takes (chunks_digest returned 1). */
struct chunk_ticket {
	void *f;        /* the file's entry, pinned until chunks_digest_done */
	uint64_t gen;   /* its change count when the ticket was given */
	uint64_t index;
	uint64_t off;   /* the chunk's bytes: [off, off + len) */
	uint32_t len;
};

struct chunks_stats {
	uint64_t files, bytes, records, peers;
	uint64_t digests, digest_bytes;     /* digests taken, bytes read for them */
	uint64_t to_server, to_peer, held;  /* chunks_choose answers */
	uint64_t reports_have, reports_bad; /* CHUNK_REPORTs */
	uint64_t drops, evictions;          /* files forgotten: changed, for room */
};

struct chunks;

/* A table with conf's figures (copied; the caller checked them). Never
 * fails (allocation failure aborts, as everywhere in podfsd). */
struct chunks *chunks_new(const struct chunks_conf *conf);
/* Frees it; no thread uses it any more. Safe on NULL. */
void chunks_free(struct chunks *t);
/* The figures it was made with. */
const struct chunks_conf *chunks_conf(const struct chunks *t);

/* Peers: the client client_id serves chunks at addr[alen] (4 or 16
 * bytes) port. Returns its peer number (>= 0, stable while its session
 * lives), or -1 if it cannot be offered (port 0, a bad address, or
 * CHUNKS_PEERS others serve). Marks it reachable again after
 * chunks_peer_away. */
int chunks_peer_set(struct chunks *t, uint64_t client_id, const uint8_t *addr, size_t alen,
		    uint16_t port);
/* Its peer number, or -1. */
int chunks_peer_find(struct chunks *t, uint64_t client_id);
/* Its session lost its connection: not offered until chunks_peer_set. */
void chunks_peer_away(struct chunks *t, uint64_t client_id);
/* Its session ended: every record of it is forgotten, its number freed. */
void chunks_peer_gone(struct chunks *t, uint64_t client_id);

/* The file key changed (or may have): its digests and holders go. */
void chunks_drop(struct chunks *t, uint64_t key);
/* Any file may have changed (change notifications were lost): all go. */
void chunks_drop_all(struct chunks *t);

/* The digest of chunk index of file key at version v. Returns 0 with it
 * in out; 1 if the caller must take it: *tk says which bytes, and the
 * caller must call chunks_digest_done with the result or a failure;
 * -EOPNOTSUPP if the file is below conf.min_size or the table cannot
 * hold it; -ERANGE if index is past its end. Waits while another
 * thread takes the same digest. */
int chunks_digest(struct chunks *t, uint64_t key, const struct chunk_ver *v, uint64_t index,
		  uint8_t out[PFS_DIGEST_LEN], struct chunk_ticket *tk);
/* The caller of a ticket took digest d (NULL: it failed) and then saw
 * the file at version after. Returns 0 if the digest is kept (the file
 * did not change meanwhile), else -EAGAIN. Unpins the file. */
int chunks_digest_done(struct chunks *t, struct chunk_ticket *tk, const uint8_t *d,
		       const struct chunk_ver *after);

/* Where the client `requester` (a peer number, or -1 for a client that
 * serves nobody) should get chunk index of key (version v), whose
 * digest it was given as d; lost: it holds no copy although listed.
 * Fills *out and lists the requester as fetching (unless PFS_CK_HELD).
 * Returns 0, or -EAGAIN if d is no longer the chunk's digest (the file
 * changed: the client reads from the coordinator). */
int chunks_choose(struct chunks *t, uint64_t key, const struct chunk_ver *v, uint64_t index,
		  const uint8_t d[PFS_DIGEST_LEN], int requester, bool lost, uint64_t now_ms,
		  struct chunk_source *out);

/* CHUNK_REPORT of requester (-1: serves nobody) about chunk index of
 * key, digest d: status PFS_CKR_*; peer/gen the source chunks_choose
 * named (CHUNKS_NO_PEER: none). Ignored unless d is the chunk's digest. */
void chunks_report(struct chunks *t, uint64_t key, uint64_t index,
		   const uint8_t d[PFS_DIGEST_LEN], int requester, uint32_t status, uint32_t peer,
		   uint32_t gen, uint64_t now_ms);

/* The counters and sizes now. */
void chunks_stats(struct chunks *t, struct chunks_stats *st);

#endif /* PODFSD_CHUNKS_I_H */
