/* test_deleg_rules.c: what a client holding a delegation answers itself
 * (fs/deleg_rules.c): the rules as a function of the attributes, the
 * caller's credentials and the request, and every case that must go to
 * the server (errors included: they are the server's to answer).
 */
#include <sys/stat.h>

#include "check.h"
#include "deleg_rules_i.h"

static const struct dl_attr file = {
	.mode = S_IFREG | 0600, .uid = 1000, .gid = 1000,
	.atime_s = 5, .atime_ns = 6, .mtime_s = 7, .mtime_ns = 8,
};
static const struct pfs_creds root = { .uid = 0, .gid = 0 };
static const struct pfs_creds owner = { .uid = 1000, .gid = 1000, .ngroups = 2,
					.groups = { 1000, 50 } };
static const struct pfs_creds other = { .uid = 1001, .gid = 1000 };

static bool run(const struct dl_attr *cur, const struct pfs_creds *cr, uint32_t valid,
		uint32_t mode, uint32_t uid, uint32_t gid, struct dl_attr *out)
{
	struct pfs_setattr_req m = { .valid = valid, .mode = mode, .uid = uid, .gid = gid,
				     .atime_s = 100, .atime_ns = 200, .mtime_s = 300,
				     .mtime_ns = 400 };
	return dl_setattr(cur, cr, &m, out);
}

static void test_root(void)
{
	struct dl_attr o;

	CHECK(run(&file, &root, PFS_SET_MODE, 0755, 0, 0, &o));
	CHECK_EQ(o.mode, S_IFREG | 0755);
	CHECK_EQ(o.uid, 1000);
	CHECK(run(&file, &root, PFS_SET_UID | PFS_SET_GID, 0, 42, 43, &o));
	CHECK_EQ(o.uid, 42);
	CHECK_EQ(o.gid, 43);
	CHECK_EQ(o.mode, S_IFREG | 0600);
	CHECK(run(&file, &root, PFS_SET_ATIME | PFS_SET_MTIME | PFS_SET_CTIME, 0, 0, 0, &o));
	CHECK_EQ(o.atime_s, 100);
	CHECK_EQ(o.atime_ns, 200);
	CHECK_EQ(o.mtime_s, 300);
	CHECK_EQ(o.mtime_ns, 400);
	/* Only the mtime: the atime stays. */
	CHECK(run(&file, &root, PFS_SET_MTIME, 0, 0, 0, &o));
	CHECK_EQ(o.atime_s, 5);
	CHECK_EQ(o.mtime_s, 300);
	/* The type bits of a request never change the file's type. */
	CHECK(run(&file, &root, PFS_SET_MODE, S_IFDIR | 0644, 0, 0, &o));
	CHECK_EQ(o.mode, S_IFREG | 0644);
}

static void test_owner(void)
{
	struct dl_attr o;

	CHECK(run(&file, &owner, PFS_SET_MODE, 0640, 0, 0, &o));
	CHECK_EQ(o.mode, S_IFREG | 0640);
	CHECK(run(&file, &owner, PFS_SET_GID, 0, 0, 50, &o)); /* a group it is in */
	CHECK_EQ(o.gid, 50);
	CHECK(run(&file, &owner, PFS_SET_GID, 0, 0, 1000, &o)); /* the one it has */
	CHECK(run(&file, &owner, PFS_SET_UID, 0, 1000, 0, &o)); /* itself */
	CHECK(run(&file, &owner, PFS_SET_ATIME | PFS_SET_MTIME, 0, 0, 0, &o));
	/* Not its group, not another owner: the server says EPERM. */
	CHECK(!run(&file, &owner, PFS_SET_GID, 0, 0, 51, &o));
	CHECK(!run(&file, &owner, PFS_SET_UID, 0, 1001, 0, &o));
}

static void test_others_go_to_the_server(void)
{
	struct dl_attr o, setid = file, dir = file;

	/* Neither owner nor root: EPERM (or, for UTIME_NOW, maybe allowed)
	 * is the server's answer. */
	CHECK(!run(&file, &other, PFS_SET_MODE, 0644, 0, 0, &o));
	CHECK(!run(&file, &other, PFS_SET_MTIME, 0, 0, 0, &o));
	/* Sizes, the server's clock, a change of nothing but the ctime,
	 * nothing at all, an unknown bit. */
	CHECK(!run(&file, &root, PFS_SET_SIZE, 0, 0, 0, &o));
	CHECK(!run(&file, &root, PFS_SET_MODE | PFS_SET_SIZE, 0644, 0, 0, &o));
	CHECK(!run(&file, &root, PFS_SET_MTIME_NOW, 0, 0, 0, &o));
	CHECK(!run(&file, &root, PFS_SET_ATIME_NOW | PFS_SET_MTIME_NOW, 0, 0, 0, &o));
	CHECK(!run(&file, &root, PFS_SET_CTIME, 0, 0, 0, &o));
	CHECK(!run(&file, &root, 0, 0, 0, 0, &o));
	CHECK(!run(&file, &root, PFS_SET_DELEG | PFS_SET_MODE, 0644, 0, 0, &o));
	/* Set-id bits, asked or present: who clears them differs. */
	CHECK(!run(&file, &root, PFS_SET_MODE, 04755, 0, 0, &o));
	CHECK(!run(&file, &root, PFS_SET_MODE, 02755, 0, 0, &o));
	CHECK(!run(&file, &owner, PFS_SET_MODE, 02755, 0, 0, &o));
	setid.mode = S_IFREG | 04755;
	CHECK(!run(&setid, &root, PFS_SET_UID, 0, 5, 0, &o));
	CHECK(!run(&setid, &root, PFS_SET_MTIME, 0, 0, 0, &o));
	setid.mode = S_IFREG | 02700;
	CHECK(!run(&setid, &root, PFS_SET_MODE, 0700, 0, 0, &o));
	/* Not a regular file. */
	dir.mode = S_IFDIR | 0755;
	CHECK(!run(&dir, &root, PFS_SET_MODE, 0700, 0, 0, &o));
	/* A held directory: the same rules, its type kept. */
	struct pfs_setattr_req dm = { .valid = PFS_SET_MODE | PFS_SET_MTIME, .mode = 0700,
				      .mtime_s = 9 };
	CHECK(dl_setattr_dir(&dir, &root, &dm, &o));
	CHECK_EQ(o.mode, S_IFDIR | 0700);
	CHECK_EQ(o.mtime_s, 9);
	dm.mode = 02755; /* set-group-ID: the server decides */
	CHECK(!dl_setattr_dir(&dir, &root, &dm, &o));
	dm.mode = 0700;
	CHECK(!dl_setattr_dir(&file, &root, &dm, &o));
	/* -1 is "unchanged" to chown, not an id. */
	CHECK(!run(&file, &root, PFS_SET_UID, 0, UINT32_MAX, 0, &o));
	CHECK(!run(&file, &root, PFS_SET_GID, 0, 0, UINT32_MAX, &o));
	/* Nanoseconds out of range: EINVAL from the server. */
	struct pfs_setattr_req m = { .valid = PFS_SET_MTIME, .mtime_ns = 1000000000 };
	CHECK(!dl_setattr(&file, &root, &m, &o));
	m = (struct pfs_setattr_req){ .valid = PFS_SET_ATIME, .atime_ns = 1000000000 };
	CHECK(!dl_setattr(&file, &root, &m, &o));
}

static void test_creds_equal(void)
{
	struct pfs_creds a = owner, b = owner;

	CHECK(pfs_creds_equal(&a, &b));
	b.groups[1] = 51;
	CHECK(!pfs_creds_equal(&a, &b));
	b = owner;
	b.ngroups = 1;
	CHECK(!pfs_creds_equal(&a, &b));
	CHECK(!pfs_creds_equal(&root, &owner));
}

int main(void)
{
	test_root();
	test_owner();
	test_others_go_to_the_server();
	test_creds_equal();
	return check_done("test_deleg_rules");
}
