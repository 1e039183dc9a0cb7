/* deleg_i.h: the attribute delegations of new files (docs/delegation.md).
 *
 * A session that creates a regular file may be granted a delegation on
 * it (CREATE's reply, PFS_CR_DELEG): while it holds it, its client
 * answers its own chmod, chown and utimens of the file itself and sends
 * them later (SETATTR with PFS_SET_DELEG). Any other session's request
 * that names the file, or the directory it was created in, is first held
 * back while the holder is recalled (server.c, recall.c): the holder
 * sends what it answered, acknowledges, and the delegation ends.
 *
 * The table: per delegation its holder (the client_id of its session),
 * the file and directory keys (handles_key), the fid the CREATE opened,
 * and its state: held, or revoked (recalled without an answer: the
 * holder's late SETATTRs under it fail). A delegation ends when its
 * holder closes that fid, when it is recalled, and when its session
 * ends. Bounded: at most `max` delegations in all and `per_owner` per
 * session; past either, nothing more is granted.
 *
 * A directory delegation (DELEG_DIR, deleg_grant_dir) is an entry of
 * the same table whose file is the directory and whose "directory" is
 * the directory's parent, with fid DELEG_FID_DIR: a request naming
 * either recalls it, with the same machinery.
 *
 * A leaf: no I/O, no sessions; any thread (one mutex).
 */
#ifndef PODFSD_DELEG_I_H
#define PODFSD_DELEG_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DELEG_MAX 16384      /* delegations, all sessions */
#define DELEG_PER_OWNER 1024 /* delegations per session */
#define DELEG_FID_DIR UINT64_MAX /* the fid of a directory delegation */

struct deleg;

struct deleg *deleg_new(unsigned max, unsigned per_owner);
void deleg_free(struct deleg *t);

/* Records owner's delegation on file (made in directory parent, opened
 * as fid). Returns false (nothing recorded) if a limit is reached or
 * file already has one. */
bool deleg_grant(struct deleg *t, uint64_t owner, uint64_t file, uint64_t parent, uint64_t fid);
/* Records owner's delegation on directory dir (whose parent is parent;
 * the export root is its own). Returns true if recorded now (*fresh) or
 * already held by owner (!*fresh), false if a limit is reached or
 * another session has one on dir. */
bool deleg_grant_dir(struct deleg *t, uint64_t owner, uint64_t dir, uint64_t parent, bool *fresh);
/* owner's delegation on directory dir ends (returned; owner 0: anyone's,
 * the directory is gone; no session has id 0, HELLO refuses it). */
void deleg_drop_dir(struct deleg *t, uint64_t owner, uint64_t dir);
/* Undoes a grant that was not handed out (deleg_grant returned true). */
void deleg_ungrant(struct deleg *t, uint64_t owner, uint64_t file);

/* Whether any delegation is held (a quick test before deleg_conflicts). */
bool deleg_any(struct deleg *t);
/* The sessions other than self holding a delegation on key or on a file
 * made in directory key: up to max of their client_ids, each once, in
 * out. Returns how many. */
size_t deleg_conflicts(struct deleg *t, uint64_t self, uint64_t key, uint64_t *out, size_t max);
/* owner was recalled for key (as deleg_conflicts matched it): each of its
 * held delegations on key or in directory key ends if it acknowledged
 * (acked), else it is revoked. Returns how many it touched. */
size_t deleg_recalled(struct deleg *t, uint64_t owner, uint64_t key, bool acked);
/* owner's SETATTR of file under its delegation (PFS_SET_DELEG): 0 if it
 * may be applied (held, or unknown here: after a restart, or one that
 * ended normally), -EIO if it was revoked. */
int deleg_check(struct deleg *t, uint64_t owner, uint64_t file);
/* Whether owner holds a delegation on file (or directory), not revoked. */
bool deleg_holds(struct deleg *t, uint64_t owner, uint64_t file);
/* owner closed fid: the delegation it opened ends (held or revoked). */
void deleg_release(struct deleg *t, uint64_t owner, uint64_t fid);
/* owner renamed file (one it holds) into directory newparent. */
void deleg_moved(struct deleg *t, uint64_t owner, uint64_t file, uint64_t newparent);
/* owner's session ended: all of its delegations go. */
void deleg_drop_owner(struct deleg *t, uint64_t owner);
/* Delegations in the table: held and revoked. */
void deleg_counts(struct deleg *t, size_t *held, size_t *revoked);

#endif /* PODFSD_DELEG_I_H */
