/* test_fhmap.c: handles of a server whose handle secret changed
 * (fs/fhmap.c).
 *
 * The map both ways, replacing and forgetting entries, and requests
 * rewritten: every handle field of the opcodes that carry two (RENAME,
 * LINK) or one beside other fields, a handle of another length, one
 * without an entry left as it is, opcodes without handles and payloads
 * that do not decode sent unchanged, and a rewritten request that
 * decodes to the original with the new handles.
 */
#include <errno.h>
#include <stdlib.h>

#include "check.h"
#include "fhmap_i.h"
#include "podfs/wire.h"

static struct pfs_fh mk(uint8_t len, uint8_t v)
{
	struct pfs_fh f;
	f.len = len;
	memset(f.data, v, len);
	return f;
}

static void test_map(void)
{
	struct fhmap *m = fhmap_new();
	struct pfs_fh a = mk(28, 1), a2 = mk(28, 2), b = mk(28, 3), b2 = mk(28, 4), out;

	CHECK(m != NULL);
	CHECK(!fhmap_get(m, &a, &out));
	CHECK(!fhmap_rev(m, &a2, &out));
	CHECK_EQ(fhmap_put(m, &a, &a2), 0);
	CHECK_EQ(fhmap_put(m, &b, &b2), 0);
	CHECK_EQ(fhmap_count(m), 2);
	CHECK(fhmap_get(m, &a, &out) && pfs_fh_equal(&out, &a2));
	CHECK(fhmap_rev(m, &b2, &out) && pfs_fh_equal(&out, &b));
	CHECK(!fhmap_get(m, &a2, &out)); /* keyed by the old handle only */
	/* A second change: a's entry is replaced, a2 no longer maps back. */
	struct pfs_fh a3 = mk(30, 5);
	CHECK_EQ(fhmap_put(m, &a, &a3), 0);
	CHECK_EQ(fhmap_count(m), 2);
	CHECK(fhmap_get(m, &a, &out) && pfs_fh_equal(&out, &a3));
	CHECK(!fhmap_rev(m, &a2, &out));
	CHECK(fhmap_rev(m, &a3, &out) && pfs_fh_equal(&out, &a));
	/* One server handle, one object: b's pairing goes. */
	CHECK_EQ(fhmap_put(m, &a, &b2), 0);
	CHECK(!fhmap_get(m, &b, &out));
	CHECK_EQ(fhmap_count(m), 1);
	fhmap_del(m, &a);
	fhmap_del(m, &a); /* twice: nothing */
	CHECK_EQ(fhmap_count(m), 0);
	CHECK(!fhmap_rev(m, &b2, &out));
	CHECK_EQ(fhmap_put(m, &b, &b2), 0);
	fhmap_free(m); /* with an entry: the sanitizer build checks leaks */
	fhmap_free(NULL);
}

static void test_rewrite(void)
{
	struct fhmap *m = fhmap_new();
	struct pfs_fh dir = mk(28, 0x11), dir2 = mk(32, 0x22), other = mk(28, 0x33),
		      file = mk(28, 0x44), file2 = mk(28, 0x55);
	uint8_t buf[4096], *out = NULL;
	size_t olen = 0;
	struct pfs_wr w;

	/* Empty map: nothing to do. */
	struct pfs_rename_req rn;
	memset(&rn, 0, sizeof(rn));
	rn.cr.uid = 7;
	rn.parent = dir;
	rn.name.len = 1;
	memcpy(rn.name.s, "a", 1);
	rn.newparent = other;
	rn.newname.len = 1;
	memcpy(rn.newname.s, "b", 1);
	rn.flags = 3;
	pfs_wr_init(&w, buf, sizeof(buf));
	CHECK_EQ(pfs_enc_rename_req(&w, &rn), 0);
	CHECK_EQ(fhmap_rewrite(m, PFS_OP_RENAME, buf, w.len, &out, &olen), 0);

	/* RENAME: the first handle has an entry (a longer one), the second
	 * none; the rest of the request is kept. */
	CHECK_EQ(fhmap_put(m, &dir, &dir2), 0);
	CHECK_EQ(fhmap_rewrite(m, PFS_OP_RENAME, buf, w.len, &out, &olen), 1);
	CHECK_EQ(olen, w.len + 4);
	struct pfs_rename_req got;
	CHECK_EQ(pfs_dec_rename_req(out, olen, &got), 0);
	CHECK(pfs_fh_equal(&got.parent, &dir2));
	CHECK(pfs_fh_equal(&got.newparent, &other));
	CHECK_EQ(got.cr.uid, 7);
	CHECK_EQ(got.flags, 3);
	CHECK(got.name.len == 1 && got.name.s[0] == 'a');
	CHECK(got.newname.len == 1 && got.newname.s[0] == 'b');
	free(out);

	/* LINK: both handles mapped. */
	struct pfs_link_req lk;
	memset(&lk, 0, sizeof(lk));
	lk.fh = file;
	lk.newparent = dir;
	lk.newname.len = 2;
	memcpy(lk.newname.s, "ln", 2);
	CHECK_EQ(fhmap_put(m, &file, &file2), 0);
	pfs_wr_init(&w, buf, sizeof(buf));
	CHECK_EQ(pfs_enc_link_req(&w, &lk), 0);
	CHECK_EQ(fhmap_rewrite(m, PFS_OP_LINK, buf, w.len, &out, &olen), 1);
	struct pfs_link_req lg;
	CHECK_EQ(pfs_dec_link_req(out, olen, &lg), 0);
	CHECK(pfs_fh_equal(&lg.fh, &file2));
	CHECK(pfs_fh_equal(&lg.newparent, &dir2));
	free(out);

	/* WRITE: the data after the handle comes through. */
	struct pfs_write_req wr;
	static uint8_t data[100000];
	memset(data, 0xab, sizeof(data));
	memset(&wr, 0, sizeof(wr));
	wr.fh = file;
	wr.fid = 9;
	wr.offset = 4096;
	wr.data.p = data;
	wr.data.len = sizeof(data);
	uint8_t *big = malloc(sizeof(data) + 1024);
	pfs_wr_init(&w, big, sizeof(data) + 1024);
	CHECK_EQ(pfs_enc_write_req(&w, &wr), 0);
	CHECK_EQ(fhmap_rewrite(m, PFS_OP_WRITE, big, w.len, &out, &olen), 1);
	struct pfs_write_req wg;
	CHECK_EQ(pfs_dec_write_req(out, olen, &wg), 0);
	CHECK(pfs_fh_equal(&wg.fh, &file2));
	CHECK_EQ(wg.fid, 9);
	CHECK_EQ(wg.offset, 4096);
	CHECK(wg.data.len == sizeof(data) && memcmp(wg.data.p, data, sizeof(data)) == 0);
	free(out);

	/* A payload that does not decode, and opcodes without handles. */
	CHECK_EQ(fhmap_rewrite(m, PFS_OP_WRITE, big, 10, &out, &olen), 0);
	CHECK_EQ(fhmap_rewrite(m, PFS_OP_PING, big, w.len, &out, &olen), 0);
	CHECK_EQ(fhmap_rewrite(m, PFS_OP_FORGET, big, w.len, &out, &olen), 0);
	CHECK_EQ(fhmap_rewrite(m, 999, big, w.len, &out, &olen), 0);
	free(big);

	/* GETATTR of a handle without an entry. */
	struct pfs_getattr_req ga;
	memset(&ga, 0, sizeof(ga));
	ga.fh = other;
	pfs_wr_init(&w, buf, sizeof(buf));
	CHECK_EQ(pfs_enc_getattr_req(&w, &ga), 0);
	CHECK_EQ(fhmap_rewrite(m, PFS_OP_GETATTR, buf, w.len, &out, &olen), 0);
	fhmap_free(m);
}

int main(void)
{
	test_map();
	test_rewrite();
	return check_done("test_fhmap");
}
