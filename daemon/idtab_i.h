/* idtab_i.h: tables of objects found by a 64-bit id: a struct htab
 * (podfs/htab.h) whose hash of an object is pfs_hash_u64_keyed of its id
 * under idtab_key. podfsd's sessions (by client id), fids, reply cache
 * entries (by request id), lock waiters (by file and client) and inotify
 * watches (by watch descriptor) are such tables. Clients choose most of
 * those ids: unkeyed, the hash is a bijection anyone can invert, and a
 * client could put all its fids (65,536) in one bucket and make each
 * lookup walk them.
 *
 * Header only. The caller serialises the calls on a table as htab.h
 * asks (its own thread or mutex).
 */
#ifndef PODFSD_IDTAB_I_H
#define PODFSD_IDTAB_I_H

#include <stdint.h>

#include "podfs/hash.h"
#include "podfs/htab.h"

/* The key of every id table: random, set once at start (idtab_seed) before
 * any table holds anything; zero (still a fine hash) where no one sets it. */
extern uint64_t idtab_key[2];
/* Sets idtab_key from the system's random source. Returns 0, or -EIO. */
int idtab_seed(void);

static inline uint64_t idtab_hash(uint64_t id)
{
	return pfs_hash_u64_keyed(id, idtab_key);
}

/* Links n, the hnode of an object whose id is id, into t. Never fails. */
static inline void idtab_insert(struct htab *t, struct hnode *n, uint64_t id)
{
	htab_insert(t, n, idtab_hash(id));
}

/* The object of type `type` in t whose member `field` equals id (its
 * struct hnode member is `hn`), or NULL. */
#define IDTAB_FIND(t, id, type, hn, field)                                          \
	({                                                                          \
		uint64_t id_ = (uint64_t)(id), h_ = idtab_hash(id_);                    \
		type *found_ = NULL;                                                \
		for (struct hnode *n_ = htab_first((t), h_); n_ && !found_;         \
		     n_ = htab_next(n_, h_))                                        \
			if ((uint64_t)container_of(n_, type, hn)->field == id_)     \
				found_ = container_of(n_, type, hn);                \
		found_;                                                             \
	})

#endif /* PODFSD_IDTAB_I_H */
