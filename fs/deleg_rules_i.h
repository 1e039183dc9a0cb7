/* deleg_rules_i.h: what the server's kernel makes of a SETATTR of a
 * regular file, as far as a client holding a delegation of it may answer
 * it itself (docs/delegation.md). Pure logic, any thread.
 *
 * The server runs a SETATTR as the caller's ids (the export rule must not
 * squash them: a delegation is granted only then), in this order: chmod,
 * chown, utimensat (daemon/export_files.c). The client answers only what
 * it can be sure of, and leaves the rest to the server:
 *   - only the mode, owner, group and explicit times (no size, no
 *     UTIME_NOW: the server's clock), of a regular file;
 *   - only for root (CAP_CHOWN, CAP_FOWNER and CAP_FSETID on the server)
 *     or the file's owner;
 *   - an owner other than root keeps the owner and may only give the file
 *     a group it is in (or the one it has);
 *   - no set-user-ID or set-group-ID bit before or after: who clears them
 *     on a chown or a write differs with the kernel's version and the
 *     caller's capabilities.
 * Within those bounds the result is exact: the new mode's permission
 * bits, owner, group and times as asked.
 */
#ifndef PODFS_DELEG_RULES_I_H
#define PODFS_DELEG_RULES_I_H

#include <stdbool.h>
#include <stdint.h>

#include "podfs/codec.h"

/* The attributes a delegation answers for. */
struct dl_attr {
	uint32_t mode, uid, gid;
	int64_t atime_s, mtime_s;
	uint32_t atime_ns, mtime_ns;
};

/* The valid bits a client may answer itself (PFS_SET_CTIME rides along:
 * it changes nothing the client shows but the ctime). */
#define DL_LOCAL_BITS (PFS_SET_MODE | PFS_SET_UID | PFS_SET_GID | PFS_SET_ATIME | PFS_SET_MTIME | \
		       PFS_SET_CTIME)

/* The change m by the caller cr applied to cur: true with *out filled if
 * the client may answer it itself, false if it must go to the server
 * (also every error case: the server then answers EPERM or EINVAL). */
bool dl_setattr(const struct dl_attr *cur, const struct pfs_creds *cr,
		const struct pfs_setattr_req *m, struct dl_attr *out);

/* The same for a directory cur (whose directory delegation this client
 * holds, dirdeleg_i.h): within these bounds the server's kernel treats
 * a directory's mode, owner and times as a regular file's. False if cur
 * is not a directory. */
bool dl_setattr_dir(const struct dl_attr *cur, const struct pfs_creds *cr,
		    const struct pfs_setattr_req *m, struct dl_attr *out);

/* The attributes a delegation answers for, of a. */
void dl_attr_of(const struct pfs_attr *a, struct dl_attr *o);
/* The answer to a change answered here: base with o's mode, owner,
 * group and times, and this host's clock for the ctime (the server's
 * when it makes the change). */
void dl_answer(const struct pfs_attr *base, const struct dl_attr *o, struct pfs_attr *a);


#endif /* PODFS_DELEG_RULES_I_H */
