/* dispatch_xattrs.c: the handlers of extended attributes (SETXATTR,
 * GETXATTR, LISTXATTR, REMOVEXATTR). Worker threads (see op_i.h). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "handles_i.h"
#include "op_i.h"
#include "rights_i.h"

/* A change of the attribute name of fh: 1 if it is the access ACL and is
 * held back to forewarn the others (rights_i.h, op_forewarn). */
static int acl_forewarn(struct op *o, const struct pfs_fh *fh, const char *name)
{
	struct stat st;

	return rights_xattr(name) && fstat(o->obj->fd, &st) == 0 && op_forewarn(o, fh, &st);
}

int op_setxattr(struct op *o)
{
	const struct pfs_setxattr_req *m = &o->m.setxattr_req;
	int ret;

	if (acl_forewarn(o, &m->fh, m->name.s))
		return -OP_RECALL;
	ret = export_setxattr(&o->x, o->obj, m->name.s, m->value.p, m->value.len, m->flags);
	if (ret == -EEXIST && o->r->begun && m->value.len <= PFS_XATTR_SIZE_MAX) {
		/* Set by the instance before (req_i.h: begun) if the value
		 * there is the one asked for. */
		uint8_t *buf = xmalloc(m->value.len + 1);
		ssize_t n = export_getxattr(&o->x, o->obj, m->name.s, buf, m->value.len + 1);
		if (n == (ssize_t)m->value.len && memcmp(buf, m->value.p, m->value.len) == 0)
			ret = 0;
		free(buf);
	}
	if (ret == 0)
		op_inval_inode(o, &m->fh, -1, 0);
	return ret;
}

/* GETXATTR (name) or LISTXATTR (name NULL): the value's (or the list's)
 * size, and with size != 0 the value itself (at most size bytes). */
static int xattr_query(struct op *o, const char *name, uint32_t size)
{
	struct pfs_xattr_rep rep;
	uint8_t *buf = NULL;
	ssize_t n;
	int ret;

	if (size > PFS_XATTR_SIZE_MAX)
		size = PFS_XATTR_SIZE_MAX;
	if (size)
		buf = xmalloc(size);
	n = name ? export_getxattr(&o->x, o->obj, name, buf, size)
		 : export_listxattr(&o->x, o->obj, buf, size);
	ret = (int)n;
	if (n >= 0) {
		rep.size = (uint32_t)n;
		rep.value.p = buf;
		rep.value.len = size ? (uint32_t)n : 0;
		op_reply_alloc(o, 16 + rep.value.len);
		ret = OP_ENCODE(o, xattr_rep, &rep);
	}
	free(buf);
	return ret;
}

int op_getxattr(struct op *o)
{
	return xattr_query(o, o->m.getxattr_req.name.s, o->m.getxattr_req.size);
}

int op_listxattr(struct op *o)
{
	return xattr_query(o, NULL, o->m.listxattr_req.size);
}

int op_removexattr(struct op *o)
{
	const struct pfs_removexattr_req *m = &o->m.removexattr_req;
	int ret;

	if (acl_forewarn(o, &m->fh, m->name.s))
		return -OP_RECALL;
	ret = export_removexattr(&o->x, o->obj, m->name.s);
	if (ret == -ENODATA && o->r->begun)
		ret = 0; /* removed by the instance before (req_i.h: begun) */
	if (ret == 0)
		op_inval_inode(o, &m->fh, -1, 0);
	return ret;
}
