/* export_xattrs.c: extended attributes of objects in the backing store,
 * through the magic link of their O_PATH fd (which needs a non-symlink);
 * the trusted namespace stays hidden. Worker threads only (see
 * export_i.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "export_base_i.h"

static bool is_trusted(const char *name)
{
	return strncmp(name, "trusted.", 8) == 0;
}

static int xattr_target(struct hent *obj, char p[EXPORT_PROCPATH_LEN], bool *symlink)
{
	struct stat st;

	if (fstat(obj->fd, &st) < 0)
		return -errno;
	*symlink = S_ISLNK(st.st_mode);
	export_procpath(p, obj->fd);
	return 0;
}

/* Whether the caller may change xattr name of obj: -EOPNOTSUPP for the
 * trusted namespace, -EPERM for security.* unless root (and for both
 * from a squashed caller, xop) and for symlinks
 * (user.* is not allowed on them either); else 0 with the magic link of
 * obj in p. */
static int may_change(struct xop *x, struct hent *obj, const char *name,
		      char p[EXPORT_PROCPATH_LEN])
{
	bool lnk = false, security = strncmp(name, "security.", 9) == 0;
	int ret;

	if (x->squashed && (security || is_trusted(name)))
		return -EPERM;
	if (is_trusted(name))
		return -EOPNOTSUPP;
	if (security && x->cr->uid != 0)
		return -EPERM;
	ret = xattr_target(obj, p, &lnk);
	if (ret < 0)
		return ret;
	return lnk ? -EPERM : 0;
}

int export_setxattr(struct xop *x, struct hent *obj, const char *name, const uint8_t *value,
		    uint32_t size, uint32_t flags)
{
	char p[EXPORT_PROCPATH_LEN];
	int ret;

	if (flags & ~(uint32_t)(XATTR_CREATE | XATTR_REPLACE))
		return -EINVAL;
	if (size > PFS_XATTR_SIZE_MAX)
		return -E2BIG;
	ret = may_change(x, obj, name, p);
	if (ret < 0)
		return ret;
	if (setxattr(p, name, value, size, (int)flags) < 0)
		return -errno;
	return 0;
}

ssize_t export_getxattr(struct xop *x, struct hent *obj, const char *name, uint8_t *buf,
			uint32_t size)
{
	char p[EXPORT_PROCPATH_LEN];
	ssize_t n;
	bool lnk = false;
	int ret;

	if (is_trusted(name))
		return -ENODATA;
	ret = xattr_target(obj, p, &lnk);
	if (ret < 0)
		return ret;
	if (lnk)
		return -ENODATA;
	if (size > PFS_XATTR_SIZE_MAX)
		size = PFS_XATTR_SIZE_MAX;
	n = getxattr(p, name, size ? buf : NULL, size);
	return n < 0 ? -errno : n;
}

ssize_t export_listxattr(struct xop *x, struct hent *obj, uint8_t *buf, uint32_t size)
{
	char p[EXPORT_PROCPATH_LEN];
	char *all;
	ssize_t n, out = 0;
	bool lnk = false;
	int ret;

	ret = xattr_target(obj, p, &lnk);
	if (ret < 0)
		return ret;
	if (lnk)
		return 0;
	all = xmalloc(PFS_XATTR_SIZE_MAX);
	n = listxattr(p, all, PFS_XATTR_SIZE_MAX);
	if (n < 0) {
		out = errno == ERANGE ? -E2BIG : -errno;
		goto out_free;
	}
	/* Hide the trusted namespace, which clients can never use. */
	for (ssize_t i = 0; i < n;) {
		size_t l = strnlen(all + i, (size_t)(n - i));
		if (l && !is_trusted(all + i)) {
			if (size) {
				if ((size_t)out + l + 1 > size) {
					out = -ERANGE;
					goto out_free;
				}
				memcpy(buf + out, all + i, l);
				buf[out + (ssize_t)l] = '\0';
			}
			out += (ssize_t)l + 1;
		}
		i += (ssize_t)l + 1;
	}
out_free:
	free(all);
	return out;
}

int export_removexattr(struct xop *x, struct hent *obj, const char *name)
{
	char p[EXPORT_PROCPATH_LEN];
	int ret = may_change(x, obj, name, p);

	if (ret < 0)
		return ret;
	if (removexattr(p, name) < 0)
		return -errno;
	return 0;
}

const struct export_asked_xattr export_asked_xattrs[EXPORT_ASKED_XATTRS] = {
	{ "security.capability", PFS_LD_NO_CAPS, PFS_MK_NO_CAPS },
	{ "system.posix_acl_access", PFS_LD_NO_ACL_ACCESS, PFS_MK_NO_ACL_ACCESS },
	{ "system.posix_acl_default", PFS_LD_NO_ACL_DEFAULT, PFS_MK_NO_ACL_DEFAULT },
	{ "security.selinux", PFS_LD_NO_SELINUX, PFS_MK_NO_SELINUX },
};

uint32_t export_xattrs_absent(int fd)
{
	uint32_t bits = 0;

	for (size_t i = 0; i < EXPORT_ASKED_XATTRS; i++)
		if (fgetxattr(fd, export_asked_xattrs[i].name, NULL, 0) < 0 && errno == ENODATA)
			bits |= export_asked_xattrs[i].mk;
	return bits;
}
