/* test_rights.c: which changes may take away someone's right to open an
 * object (daemon/rights_i.h), so that podfsd pushes them to the other
 * clients before making them.
 *
 * A chmod that clears any read, write or search bit, a chown or chgrp to
 * other ids, and any change of the access ACL may; a chmod that only adds
 * bits or touches only the set-id and sticky bits, a chown to the same
 * ids, a size or time change and the default ACL may not.
 */
#include "rights_i.h"
#include "check.h"

static struct stat file(mode_t mode, uid_t uid, gid_t gid)
{
	struct stat st = { .st_mode = S_IFREG | mode, .st_uid = uid, .st_gid = gid };
	return st;
}

static void test_chmod(void)
{
	struct stat st = file(0644, 1000, 100);

	CHECK(rights_may_shrink(&st, PFS_SET_MODE, 0600, 0, 0));
	CHECK(rights_may_shrink(&st, PFS_SET_MODE, 0640, 0, 0));
	CHECK(rights_may_shrink(&st, PFS_SET_MODE, 0444, 0, 0));
	CHECK(rights_may_shrink(&st, PFS_SET_MODE, 0, 0, 0));
	/* Only bits added, or the same mode. */
	CHECK(!rights_may_shrink(&st, PFS_SET_MODE, 0644, 0, 0));
	CHECK(!rights_may_shrink(&st, PFS_SET_MODE, 0755, 0, 0));
	CHECK(!rights_may_shrink(&st, PFS_SET_MODE, 0777, 0, 0));
	/* Set-id and sticky bits grant no open. */
	CHECK(!rights_may_shrink(&st, PFS_SET_MODE, 04644, 0, 0));
	st = file(06755, 1000, 100);
	CHECK(!rights_may_shrink(&st, PFS_SET_MODE, 0755, 0, 0));
	/* A directory's search bit counts. */
	st = file(0755, 1000, 100);
	st.st_mode = S_IFDIR | 0755;
	CHECK(rights_may_shrink(&st, PFS_SET_MODE, 0754, 0, 0));
	CHECK(!rights_may_shrink(&st, PFS_SET_MODE, 01777, 0, 0));
}

static void test_chown(void)
{
	struct stat st = file(0644, 1000, 100);

	CHECK(rights_may_shrink(&st, PFS_SET_UID, 0, 1001, 0));
	CHECK(rights_may_shrink(&st, PFS_SET_GID, 0, 0, 101));
	CHECK(rights_may_shrink(&st, PFS_SET_UID | PFS_SET_GID, 0, 1000, 101));
	CHECK(!rights_may_shrink(&st, PFS_SET_UID, 0, 1000, 0));
	CHECK(!rights_may_shrink(&st, PFS_SET_GID, 0, 0, 100));
	CHECK(!rights_may_shrink(&st, PFS_SET_UID | PFS_SET_GID, 0, 1000, 100));
	/* The fields not in valid are not looked at. */
	CHECK(!rights_may_shrink(&st, PFS_SET_SIZE, 0, 5, 5));
	CHECK(!rights_may_shrink(&st, 0, 0, 5, 5));
	/* A chown that keeps the ids but a chmod that clears a bit. */
	CHECK(rights_may_shrink(&st, PFS_SET_MODE | PFS_SET_UID, 0640, 1000, 0));
}

static void test_xattrs(void)
{
	CHECK(rights_xattr("system.posix_acl_access"));
	CHECK(!rights_xattr("system.posix_acl_default"));
	CHECK(!rights_xattr("system.posix_acl_access2"));
	CHECK(!rights_xattr("user.system.posix_acl_access"));
	CHECK(!rights_xattr("security.selinux"));
	CHECK(!rights_xattr(""));
}

int main(void)
{
	test_chmod();
	test_chown();
	test_xattrs();
	return check_done("rights");
}
