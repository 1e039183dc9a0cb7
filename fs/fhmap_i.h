/* fhmap_i.h: handles of a server whose handle secret changed.
 *
 * podfsd's handles carry a MAC under its handle secret; a podfsd started
 * with another secret (--new-handle-secret after its state directory was
 * lost) answers ESTALE to every handle this client holds. The client
 * notices at the reconnect (the AUTH reply's root handle is another one:
 * it is the root's handle under the new secret), re-resolves by name what
 * it holds (recover.c) and records here, for each object it found again,
 * its handle as the client knows it (the inode's, "old") and as the server
 * knows it now ("new"). Then:
 *
 *  - every request goes out with the new handles (fhmap_rewrite, at each
 *    send of rpc.c, also of a request queued before the change);
 *  - a handle the server sends (a reply's entry, a push) that is the new
 *    handle of an object the client knows maps back to its inode
 *    (fhmap_rev, inode.c's lookup), so the kernel keeps its nodeids.
 *
 * An entry goes when its inode is forgotten (fhmap_del), so the map never
 * holds more than the inodes the kernel holds. Empty, it costs one atomic
 * load per send.
 *
 * Thread-safety: every function may be called from any thread.
 */
#ifndef PODFS_FHMAP_I_H
#define PODFS_FHMAP_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "podfs/codec.h"

struct fhmap;

/* Returns the empty map, or NULL on ENOMEM. */
struct fhmap *fhmap_new(void);
/* Frees m. Safe on NULL. */
void fhmap_free(struct fhmap *m);

/* Records that the object the client knows as old is now new (replacing
 * what was recorded for old). Returns 0 or -ENOMEM. */
int fhmap_put(struct fhmap *m, const struct pfs_fh *old, const struct pfs_fh *new_fh);
/* Forgets old's entry, if any. */
void fhmap_del(struct fhmap *m, const struct pfs_fh *old);
/* The new handle of old: true with *out set, or false. */
bool fhmap_get(struct fhmap *m, const struct pfs_fh *old, struct pfs_fh *out);
/* The handle the client knows for the server's handle nh: true with
 * *out set, or false. */
bool fhmap_rev(struct fhmap *m, const struct pfs_fh *nh, struct pfs_fh *out);
/* Entries held. */
size_t fhmap_count(struct fhmap *m);

/* The request payload req[len] of opcode op with every handle field
 * that has an entry replaced by its new handle. Returns 0 when nothing
 * changes (the map is empty, no handle has an entry, or the payload does
 * not decode: it goes as it is), 1 with *out (malloc'd, *outlen bytes;
 * the caller frees it), or -ENOMEM. */
int fhmap_rewrite(struct fhmap *m, uint16_t op, const uint8_t *req, size_t len, uint8_t **out,
		  size_t *outlen);

#endif /* PODFS_FHMAP_I_H */
