/* rights_i.h: whether a change may take away someone's right to open an
 * object: a chmod that clears a permission bit, a chown or chgrp to
 * other ids, any change of the access ACL. Such a change is first pushed
 * to the other clients that cache the object (op_forewarn, op_i.h), so
 * that what they opened of it without asking the daemon is opened here
 * while the rights still hold: rights are checked at open, as on a local
 * filesystem (fs/ofile_i.h, "lazy opens"). Pure.
 */
#ifndef PODFSD_RIGHTS_I_H
#define PODFSD_RIGHTS_I_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "podfs/wire.h"

/* A SETATTR of the fields valid (PFS_SET_*) to mode, uid, gid, on an
 * object now st. */
static inline bool rights_may_shrink(const struct stat *st, uint32_t valid, uint32_t mode,
				     uint32_t uid, uint32_t gid)
{
	if ((valid & PFS_SET_MODE) && (st->st_mode & 0777 & ~mode))
		return true;
	if ((valid & PFS_SET_UID) && uid != (uint32_t)st->st_uid)
		return true;
	return (valid & PFS_SET_GID) && gid != (uint32_t)st->st_gid;
}

/* A SETXATTR or REMOVEXATTR of the attribute name. */
static inline bool rights_xattr(const char *name)
{
	return strcmp(name, "system.posix_acl_access") == 0;
}

#endif /* PODFSD_RIGHTS_I_H */
