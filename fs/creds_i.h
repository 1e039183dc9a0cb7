/* creds_i.h: the caller's credentials for a request.
 *
 * Supplementary groups come from fuse_req_getgroups(), which reads
 * /proc/PID/task/PID/status; the result is cached per pid for up to one
 * second. Thread-safe.
 */
#ifndef PODFS_CREDS_I_H
#define PODFS_CREDS_I_H

#include <fuse_lowlevel.h>
#include <stdbool.h>

#include "podfs/codec.h"

struct creds_cache;

/* Creates an empty cache. Returns 0 or -ENOMEM. Start-up thread. */
int creds_cache_new(struct creds_cache **out);
/* Frees it. Safe on NULL. */
void creds_cache_free(struct creds_cache *cc);

/* Fills cr with the uid and gid of req's caller and, if groups is true,
 * its supplementary groups (at most PFS_GROUPS_MAX; none if they cannot
 * be read). Never fails. Any FUSE thread, before req is replied to. */
void creds_fill(struct creds_cache *cc, fuse_req_t req, struct pfs_creds *cr, bool groups);

#endif /* PODFS_CREDS_I_H */
