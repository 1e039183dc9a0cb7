/* fuzz_listing.c: what podfs makes of a directory listing the daemon
 * sent (fs/listing.c): listing_set checks a LISTDIR reply's payload and
 * keeps it; lookups, readdir, the walk's subdirectories and this
 * client's own creates and removals then read and edit it in place.
 *
 * An input: u8 mode, then the payload. Mode bit 0: the payload has the
 * cookies of PFS_CAP_LIST_COOKIES (wire_list.h: dots[4] after the flags,
 * a cookie in each item); bit 1: this client then removes the first name
 * readdir gave and creates one of its own, and the listing is read again.
 *
 * Properties: no crash or read outside the input (the listing is kept in
 * a copy); a payload is kept only if it parses whole; readdir's reply
 * parses whole as READDIR entries; every name it gives (but the dots) is
 * found by a lookup, and a name removed here is not; after a create of
 * this client's, a listing with cookies answers no readdir (that name's
 * cookie is not known).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "inode_i.h"
#include "listing_i.h"
#include "podfs/codec.h"
#include "trust_i.h"

static struct pfs_entry dir_entry(uint8_t n)
{
	struct pfs_entry e;

	memset(&e, 0, sizeof(e));
	e.fh.len = 8;
	memset(e.fh.data, n, 8);
	e.attr.ino = 100 + n;
	e.attr.mode = S_IFDIR | 0755;
	e.attr.nlink = 2;
	e.attr.size = 4096;
	return e;
}

/* listing_readdir of dir, checked; the first name that is not a dot
 * into first[] (empty if none). Returns listing_readdir's result. */
static int read_dir(struct inode_table *t, struct inode *dir, char *first, size_t cap)
{
	struct listing_info li;
	struct pfs_rd rd;
	struct pfs_dirent de;
	uint64_t pseq;
	uint32_t *fl = NULL;
	uint8_t *out, eof;
	size_t olen, n = 0;
	int r, rc = listing_readdir(t, dir, &out, &olen, &fl, &li, &pseq);

	first[0] = 0;
	if (rc < 0) {
		FUZZ_ASSERT(rc == -ENOENT || rc == -EBADMSG || rc == -ENOMEM);
		return rc;
	}
	pfs_rd_init(&rd, out, olen);
	FUZZ_ASSERT(pfs_get_U8(&rd, &eof) && eof == 1);
	while ((r = pfs_dec_dirent(&rd, &de)) == 1) {
		bool dot = !strcmp(de.name.s, ".") || !strcmp(de.name.s, "..");
		if (!dot) {
			struct pfs_entry e;
			struct listing_info got;
			uint8_t *data;
			uint32_t dlen, flags;
			FUZZ_ASSERT(listing_find(dir, de.name.s, &e, &data, &dlen, &flags, &got) ==
				    LS_PRESENT);
			free(data);
			if (!first[0] && de.name.len < cap)
				memcpy(first, de.name.s, (size_t)de.name.len + 1);
		}
		volatile uint32_t one = fl[n]; /* one flag word per entry written */
		(void)one;
		n++;
	}
	FUZZ_ASSERT(r == 0);
	free(fl);
	free(out);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pfs_entry root = dir_entry(1), d = dir_entry(2), sub[8];
	struct inode_table *t;
	struct listing_info li;
	char first[PFS_NAME_MAX + 1];

	if (size < 1 || inode_table_new(&root, &t) < 0)
		return 0;
	struct inode *rootip = inode_get(t, FUSE_ROOT_ID);
	struct inode *dir = inode_ref(t, &d, NULL, 0);
	FUZZ_ASSERT(dir != NULL);
	inode_set_parent(t, dir, rootip, 1, "d");
	memset(&li, 0, sizeof(li));
	li.any = inode_own_snap(t, &li.own_ns);
	li.ns = listing_gen(dir);
	li.seq = 1;
	li.cookies = data[0] & 1;
	uint8_t *copy = malloc(size - 1 ? size - 1 : 1);
	FUZZ_ASSERT(copy != NULL);
	memcpy(copy, data + 1, size - 1);
	int rc = listing_set(t, dir, copy, size - 1, &li); /* takes copy */
	if (rc < 0) {
		FUZZ_ASSERT(rc == -EBADMSG || rc == -ENOMEM || rc == -ENOSPC);
		goto out;
	}
	(void)listing_subdirs(dir, 64 * 1024, sub, 8);
	if (read_dir(t, dir, first, sizeof(first)) < 0 || !(data[0] & 2) || !first[0])
		goto out;
	/* This client's own changes. */
	struct pfs_entry e = dir_entry(3);
	e.attr.mode = S_IFREG | 0644;
	e.attr.nlink = 1;
	FUZZ_ASSERT(listing_remove(dir, first) == 0);
	struct pfs_entry got;
	struct listing_info gli;
	uint8_t *fdata;
	uint32_t dlen, flags;
	int found = listing_find(dir, first, &got, &fdata, &dlen, &flags, &gli);
	free(fdata);
	/* (A name listed twice is still there once.) */
	FUZZ_ASSERT(found == LS_ABSENT || found == LS_PRESENT);
	int added = listing_add(dir, "podfs-fuzz-new", &e);
	FUZZ_ASSERT(added == 0 || added == -EEXIST || added == -ENOMEM || added == -EINVAL);
	rc = read_dir(t, dir, first, sizeof(first));
	if (li.cookies && added == 0)
		FUZZ_ASSERT(rc == -ENOENT);
out:
	inode_table_free(t);
	return 0;
}
