/* lscache_i.h: whole listings (LISTDIR, LISTDIRS) kept to be served again.
 *
 * When a pod starts the same venv, every host lists the same directories
 * with the same credentials within seconds, and building a listing (a
 * lookup, a handle, a stat, an access check or a read of each entry, and
 * its xattr names) was most of the coordinator's CPU per host. The cache
 * keeps a listing's reply bytes (the flag word and the items, exactly as
 * export_listdir wrote them), keyed by what decides them: the directory's
 * wire handle, the caller's effective credentials (uid, gid, groups, and
 * whether they were squashed), max_inline, whether xattr absences and
 * cookies are asked, and, for a listing with contents, the reply's room.
 *
 * Validity: one change sequence for the whole export. Every invalidation
 * the coordinator makes (a change by a client, one noticed beside podfs
 * by fanotify, lost notifications) bumps it, before it looks up whom to
 * push to. A listing is stored with the sequence read before its
 * directory was opened, and served only while the sequence is still that
 * value once the session's interest in the directory and in every listed
 * entry is registered: a change after that registration is pushed to the
 * session, one before it makes the sequence differ. So a listing served
 * from the cache is one that a listing built at its time would have
 * given, with the same pushes to follow. fanotify's events are pushed only
 * for objects some session is interested in: the sequence also moves when
 * an object loses its last interested session (a FORGET, a session's
 * end), so that every object of a
 * servable listing has an interested session and a change beside podfs
 * to it moves the sequence. A change beside podfs counts when
 * the loop reads its fanotify event (watch.c), as it reaches clients that
 * cache the objects; a listing served in between is followed by its push. A listing also expires
 * LSCACHE_TTL_MS after it was built: what changes without a push (atime,
 * st_blocks settling after delayed allocation) is never older than that.
 *
 * A listing is stored the second time it is asked for under one sequence
 * (lscache_miss): one host alone costs no copies.
 *
 * Memory: at most max_bytes (entries and their keys counted) for the whole
 * daemon, and LSCACHE_ASKS hashes of listings asked for; the least recently used go first, and every entry goes at the
 * first store or lookup after the sequence moved.
 *
 * Pure bookkeeping: no I/O, no logging. Thread-safe: any thread.
 */
#ifndef PODFSD_LSCACHE_I_H
#define PODFSD_LSCACHE_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "podfs/codec.h"

#define LSCACHE_BYTES (32u << 20) /* podfsd's limit */
#define LSCACHE_TTL_MS 10000
#define LSCACHE_ASKS 4096 /* listings asked for, remembered (a power of two) */

/* What decides a listing's bytes. Made by lscache_key_make. */
struct lscache_key {
	uint8_t b[PFS_FH_MAX + 2 + 4 * 6 + 4 * PFS_GROUPS_MAX];
	size_t len;
};

/* The key of a listing of the directory whose wire handle is dir, for
 * caller cr (NULL: as root, no switch) after squashing (squashed), with
 * contents up to max_inline bytes each (0: none) in a reply of max_bytes
 * (ignored without contents: such a listing is stored only complete, and
 * a complete listing without contents is the same in any room it fits),
 * with what the items carry (how: export_listdir's, two bits: xattr
 * absences, cookies). */
void lscache_key_make(struct lscache_key *k, const struct pfs_fh *dir,
		      const struct pfs_creds *cr, bool squashed, uint32_t max_inline,
		      uint32_t max_bytes, unsigned how);

struct lscache;
struct lsent;

/* An empty cache of at most max_bytes, whose listings live ttl_ms. Never
 * fails. */
struct lscache *lscache_new(size_t max_bytes, int64_t ttl_ms);
/* Frees it and every entry (no reference may be held). Safe on NULL. */
void lscache_free(struct lscache *c);

/* The change sequence now (sequentially consistent). */
uint64_t lscache_seq(struct lscache *c);
/* A change: every listing stored so far is no longer served. Call it
 * before looking up the sessions to push the change to. */
void lscache_bump(struct lscache *c);

/* The listing of k, with a reference (lscache_put), if one is stored
 * under the current sequence and younger than the TTL at now_ms; else
 * NULL. The caller registers interest, then checks lsent_seq against
 * lscache_seq before using it (see above). */
struct lsent *lscache_get(struct lscache *c, const struct lscache_key *k, int64_t now_ms);
/* The entry's bytes (valid while the reference is held) and sequence. */
const uint8_t *lsent_data(const struct lsent *e, size_t *len);
uint64_t lsent_seq(const struct lsent *e);
/* Drops the reference of lscache_get. Safe on NULL. */
void lscache_put(struct lscache *c, struct lsent *e);

/* Stores a copy of len bytes as k's listing, built from sequence seq at
 * now_ms, replacing any, unless the sequence moved since seq (nothing is
 * stored) or the entry is larger than a quarter of the cache. Evicts the
 * least recently used beyond the limit. */
void lscache_store(struct lscache *c, const struct lscache_key *k, uint64_t seq, int64_t now_ms,
		   const void *data, size_t len);

/* Counts a listing served from the cache. */
void lscache_hit(struct lscache *c);
/* Counts a listing built (k not served from the cache), and says whether
 * it is worth storing: only if k was asked for before under the current
 * sequence. A listing asked for once (one host, or a tree that keeps
 * changing) is not copied; the second host's is, for the others. Asks
 * are remembered by the key's hash in LSCACHE_ASKS slots (a collision
 * only stores a listing early, or a second time). */
bool lscache_miss(struct lscache *c, const struct lscache_key *k);

struct lscache_stats {
	uint64_t hits, misses;
	size_t entries, bytes;
};
/* The counters and what is kept now, without waiting for a lock (the
 * loop thread asks). */
void lscache_stats(struct lscache *c, struct lscache_stats *out);

#endif /* PODFSD_LSCACHE_I_H */
