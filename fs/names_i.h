/* names_i.h: a set of names, for the names the kernel may cache (as
 * positive or negative entries) under one directory: after a reconnect,
 * or when a push says the directory changed, each of them is invalidated
 * (cache.c). A pure data structure: the caller serialises every call on
 * one set (inode.c holds the directory's lock).
 */
#ifndef PODFS_NAMES_I_H
#define PODFS_NAMES_I_H

#include <stddef.h>
#include <stdint.h>

#include "podfs/hash.h"

struct nameset;

/* The hash of name[len] that names.c, listing.c and trust.c agree on. */
static inline uint64_t name_hash(const char *name, size_t len)
{
	return pfs_hash_bytes(name, len, 0);
}

/* Adds name[len] (copied) to *nsp, creating the set if *nsp is NULL. A
 * name already there is not added twice. Returns 0, or -ENOMEM (the name
 * is then not in the set; *nsp stays valid, or NULL). */
int nameset_add(struct nameset **nsp, const char *name, size_t len);

/* Calls cb(arg, name, len) once for each name of ns (in no particular
 * order; name is NUL-terminated and valid during the call only; cb may
 * be NULL), then frees ns. Safe on NULL. */
void nameset_each_free(struct nameset *ns, void (*cb)(void *arg, const char *name, size_t len),
		       void *arg);

/* Frees ns and its names. Safe on NULL. */
void nameset_free(struct nameset *ns);

#endif /* PODFS_NAMES_I_H */
