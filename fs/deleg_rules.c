/* deleg_rules.c: a SETATTR under a delegation, as the server's kernel
 * would apply it (see deleg_rules_i.h). */
#include "deleg_rules_i.h"

#include <string.h>
#include <sys/stat.h>
#include <time.h>

static bool in_group(const struct pfs_creds *cr, uint32_t gid)
{
	if (cr->gid == gid)
		return true;
	for (unsigned i = 0; i < cr->ngroups && i < PFS_GROUPS_MAX; i++)
		if (cr->groups[i] == gid)
			return true;
	return false;
}

bool dl_setattr(const struct dl_attr *cur, const struct pfs_creds *cr,
		const struct pfs_setattr_req *m, struct dl_attr *out)
{
	uint32_t v = m->valid;
	bool root = cr->uid == 0;

	if (!(v & ~(uint32_t)PFS_SET_CTIME) || (v & ~(uint32_t)DL_LOCAL_BITS))
		return false;
	if (!S_ISREG(cur->mode) || (cur->mode & (S_ISUID | S_ISGID)))
		return false;
	/* chmod, chown and explicit times: the owner or root, nobody else. */
	if (!root && cr->uid != cur->uid)
		return false;
	*out = *cur;
	if (v & PFS_SET_MODE) {
		out->mode = (cur->mode & S_IFMT) | (m->mode & 07777);
		if (out->mode & (S_ISUID | S_ISGID))
			return false;
	}
	if (v & PFS_SET_UID) {
		if (!root && m->uid != cur->uid)
			return false;
		out->uid = m->uid;
	}
	if (v & PFS_SET_GID) {
		if (!root && m->gid != cur->gid && !in_group(cr, m->gid))
			return false;
		out->gid = m->gid;
	}
	/* -1 for an id means "unchanged" to chown: never sent as a value. */
	if (((v & PFS_SET_UID) && m->uid == UINT32_MAX) || ((v & PFS_SET_GID) && m->gid == UINT32_MAX))
		return false;
	if (v & PFS_SET_ATIME) {
		if (m->atime_ns > 999999999)
			return false;
		out->atime_s = m->atime_s;
		out->atime_ns = m->atime_ns;
	}
	if (v & PFS_SET_MTIME) {
		if (m->mtime_ns > 999999999)
			return false;
		out->mtime_s = m->mtime_s;
		out->mtime_ns = m->mtime_ns;
	}
	return true;
}

bool dl_setattr_dir(const struct dl_attr *cur, const struct pfs_creds *cr,
		    const struct pfs_setattr_req *m, struct dl_attr *out)
{
	struct dl_attr as_file = *cur;

	if (!S_ISDIR(cur->mode))
		return false;
	as_file.mode = S_IFREG | (cur->mode & 07777);
	if (!dl_setattr(&as_file, cr, m, out))
		return false;
	out->mode = S_IFDIR | (out->mode & 07777);
	return true;
}

void dl_attr_of(const struct pfs_attr *a, struct dl_attr *o)
{
	o->mode = a->mode;
	o->uid = a->uid;
	o->gid = a->gid;
	o->atime_s = a->atime_s;
	o->atime_ns = a->atime_ns;
	o->mtime_s = a->mtime_s;
	o->mtime_ns = a->mtime_ns;
}

void dl_answer(const struct pfs_attr *base, const struct dl_attr *o, struct pfs_attr *a)
{
	struct timespec now;

	*a = *base;
	a->mode = o->mode;
	a->uid = o->uid;
	a->gid = o->gid;
	a->atime_s = o->atime_s;
	a->atime_ns = o->atime_ns;
	a->mtime_s = o->mtime_s;
	a->mtime_ns = o->mtime_ns;
	clock_gettime(CLOCK_REALTIME, &now);
	a->ctime_s = now.tv_sec;
	a->ctime_ns = (uint32_t)now.tv_nsec;
}

