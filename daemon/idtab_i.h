/* idtab_i.h: tables of objects found by a 64-bit id: a struct htab
 * (podfs/htab.h) whose hash of an object is pfs_hash_u64 of its id.
 * podfsd's sessions (by client id), fids, reply cache entries (by
 * request id) and inotify watches (by watch descriptor) are such tables.
 *
 * Header only. The caller serialises the calls on a table as htab.h
 * asks (its own thread or mutex).
 */
#ifndef PODFSD_IDTAB_I_H
#define PODFSD_IDTAB_I_H

#include <stdint.h>

#include "podfs/hash.h"
#include "podfs/htab.h"

/* Links n, the hnode of an object whose id is id, into t. Never fails. */
static inline void idtab_insert(struct htab *t, struct hnode *n, uint64_t id)
{
	htab_insert(t, n, pfs_hash_u64(id));
}

/* The object of type `type` in t whose member `field` equals id (its
 * struct hnode member is `hn`), or NULL. */
#define IDTAB_FIND(t, id, type, hn, field)                                          \
	({                                                                          \
		uint64_t id_ = (uint64_t)(id), h_ = pfs_hash_u64(id_);              \
		type *found_ = NULL;                                                \
		for (struct hnode *n_ = htab_first((t), h_); n_ && !found_;         \
		     n_ = htab_next(n_, h_))                                        \
			if ((uint64_t)container_of(n_, type, hn)->field == id_)     \
				found_ = container_of(n_, type, hn);                \
		found_;                                                             \
	})

#endif /* PODFSD_IDTAB_I_H */
