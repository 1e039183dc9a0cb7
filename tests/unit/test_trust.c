/* test_trust.c: unit tests of which locally opened objects may lose their
 * name in a directory (fs/trust.c inode_may_lose_name_in), on a real
 * inode table: a file last seen in the directory, elsewhere, nowhere
 * known, or with other links; a directory only when the change may
 * remove one (an rmdir, a rename over a name), and only its own place.
 */
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "inode_i.h"
#include "podfs/codec.h"
#include "trust_i.h"

/* An entry numbered n, of mode, with nlink links. */
static struct pfs_entry ent(uint32_t n, uint32_t mode, uint32_t nlink)
{
	struct pfs_entry e;
	memset(&e, 0, sizeof(e));
	e.fh.len = 8;
	memcpy(e.fh.data, &n, sizeof(n));
	e.attr.ino = n;
	e.attr.mode = mode;
	e.attr.nlink = nlink;
	return e;
}

int main(void)
{
	struct pfs_entry r = ent(1, S_IFDIR | 0755, 3);
	struct inode_table *t;

	CHECK_EQ(inode_table_new(&r, &t), 0);
	struct inode *root = inode_get(t, FUSE_ROOT_ID);
	struct pfs_entry de = ent(2, S_IFDIR | 0755, 2), oe = ent(3, S_IFDIR | 0755, 2);
	struct inode *d = inode_ref(t, &de, NULL, 0), *other = inode_ref(t, &oe, NULL, 0);
	inode_set_parent(t, d, root, 1, "d");
	inode_set_parent(t, other, root, 1, "other");

	/* A regular file: where it was seen, with one link. */
	struct pfs_entry fe = ent(10, S_IFREG | 0644, 1);
	struct inode *f = inode_ref(t, &fe, NULL, 0);
	CHECK(inode_may_lose_name_in(f, d, false)); /* place unknown */
	inode_set_parent(t, f, d, 2, "f");
	CHECK(inode_may_lose_name_in(f, d, false));
	CHECK(inode_may_lose_name_in(f, d, true));
	CHECK(!inode_may_lose_name_in(f, other, false));
	/* With another link, its last name may be anywhere. */
	struct pfs_entry fl = ent(10, S_IFREG | 0644, 2);
	inode_set_attr(f, &fl.attr, 0);
	CHECK(inode_may_lose_name_in(f, other, false));

	/* A directory: never for an unlink, for an rmdir or a rename over a
	 * name only in its own parent (or where its place is unknown). */
	struct pfs_entry se = ent(20, S_IFDIR | 0755, 2);
	struct inode *s = inode_ref(t, &se, NULL, 0);
	CHECK(inode_may_lose_name_in(s, d, true)); /* place unknown */
	CHECK(!inode_may_lose_name_in(s, d, false));
	inode_set_parent(t, s, d, 3, "s");
	CHECK(inode_may_lose_name_in(s, d, true));
	CHECK(!inode_may_lose_name_in(s, d, false));
	CHECK(!inode_may_lose_name_in(s, other, true)); /* its links count no name */

	/* Neither a symlink nor anything else. */
	struct pfs_entry le = ent(30, S_IFLNK | 0777, 1);
	struct inode *l = inode_ref(t, &le, NULL, 0);
	inode_set_parent(t, l, d, 4, "l");
	CHECK(!inode_may_lose_name_in(l, d, true));

	inode_table_free(t);
	return check_done("test_trust");
}
