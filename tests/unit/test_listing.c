/* test_listing.c: unit tests of directory listings (fs/listing.c) on a
 * real inode table (fs/inode.c, fs/trust.c, fs/names.c), with no FUSE
 * mount and no daemon: LISTDIR payloads made here. Covers: malformed
 * payloads, lookups (present, absent, no listing, inline content), our
 * own creates joining the listing (and its index growing), a listing
 * asked for before an own change not kept, stale and dropped listings,
 * the quiet period, own changes marking an item stale, the copy of a
 * file made here that follows this host's writes, READDIR made from
 * a listing (dots, the server's cookies, stale items without entries, an
 * unknown parent; none without cookies, or after an own create), names
 * removed by our own unlinks (gone from lookups and READDIR, the others'
 * cookies kept, kept out of the rebuilt index), and the cap on all
 * listings' bytes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "inode_i.h"
#include "listing_i.h"
#include "names_i.h"
#include "podfs/codec.h"
#include "trust_i.h"

static struct pfs_entry entry(uint32_t n, uint32_t mode, uint64_t size)
{
	struct pfs_entry e;
	memset(&e, 0, sizeof(e));
	e.fh.len = 16;
	for (int i = 0; i < 16; i++)
		e.fh.data[i] = (uint8_t)(n >> (8 * (i % 4)) ^ (uint32_t)i);
	e.attr.ino = 1000 + n;
	e.attr.mode = mode;
	e.attr.size = size;
	e.attr.nlink = S_ISDIR(mode) ? 2 : 1;
	e.attr.mtime_s = 1700000000 + n;
	return e;
}

/* A listing's header, as podfsd sends it with PFS_CAP_LIST_COOKIES
 * (wire_list.h): flags, and where "." and ".." are: dots[4] (the cookie
 * before each, its own), or first, with cookies 1 and 2, if NULL. */
static void put_head_dots(struct pfs_wr *w, uint32_t flags, const uint64_t *dots)
{
	static const uint64_t first[4] = { 0, 1, 1, 2 };

	CHECK_EQ(pfs_put_U32(w, &flags), 0);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(pfs_put_U64(w, dots ? &dots[i] : &first[i]), 0);
}

static void put_head(struct pfs_wr *w, uint32_t flags)
{
	put_head_dots(w, flags, NULL);
}

/* An item of such a listing; the i-th (from 0) has cookie 3 + i here. */
static void put_item(struct pfs_wr *w, const struct pfs_name *nm, const struct pfs_entry *e,
		     uint32_t fl, unsigned i, const struct pfs_bytes *d)
{
	uint64_t cookie = 3 + i;

	CHECK(pfs_put_NAME(w, nm) == 0 && pfs_put_ENTRY(w, e) == 0 && pfs_put_U32(w, &fl) == 0 &&
	      pfs_put_U64(w, &cookie) == 0 && pfs_put_BYTES(w, d) == 0);
}

/* A LISTDIR payload: flags, then n items "f0".."f<n-1>" (regular files,
 * entry(i)); item `with_data` (if < n) carries data[dlen] with
 * PFS_LD_DATA. Returns a malloc'd buffer, *len. */
static uint8_t *payload(unsigned n, uint32_t flags, unsigned with_data, const char *data,
			uint32_t dlen, size_t *len)
{
	size_t cap = 64 + (size_t)n * (PFS_NAME_MAX + 2 * sizeof(struct pfs_entry) + 16) + dlen;
	uint8_t *buf = malloc(cap);
	struct pfs_wr w;

	pfs_wr_init(&w, buf, cap);
	put_head(&w, flags);
	for (unsigned i = 0; i < n; i++) {
		struct pfs_name nm;
		struct pfs_entry e = entry(i, S_IFREG | 0644, i == with_data ? dlen : 10);
		struct pfs_bytes d = { 0 };
		uint32_t fl = 0;
		nm.len = (uint16_t)snprintf(nm.s, sizeof(nm.s), "f%u", i);
		if (i == with_data) {
			fl = PFS_LD_DATA | PFS_LD_READABLE;
			d.p = (const uint8_t *)data;
			d.len = dlen;
		}
		put_item(&w, &nm, &e, fl, i, &d);
	}
	*len = w.len;
	return buf;
}

struct fixture {
	struct inode_table *t;
	struct inode *root, *dir;
};

static void setup(struct fixture *f)
{
	struct pfs_entry root = entry(900000, S_IFDIR | 0755, 4096);
	struct pfs_entry d = entry(900001, S_IFDIR | 0755, 4096);

	CHECK_EQ(inode_table_new(&root, &f->t), 0);
	f->root = inode_get(f->t, FUSE_ROOT_ID);
	f->dir = inode_ref(f->t, &d, NULL, 0);
	CHECK(f->dir != NULL);
	inode_set_parent(f->t, f->dir, f->root, 1, "d");
}

static void teardown(struct fixture *f)
{
	inode_table_free(f->t);
}

static struct listing_info info(struct fixture *f)
{
	struct listing_info li;
	li.any = inode_own_snap(f->t, &li.own_ns);
	li.ns = listing_gen(f->dir);
	li.seq = 5;
	li.uid = 1000;
	li.gid = 100;
	li.cookies = true;
	return li;
}

/* Gives f->dir a listing of n items (as payload makes them), asked for
 * now. Returns listing_set's result. */
static int list(struct fixture *f, unsigned n)
{
	struct listing_info li = info(f);
	size_t len;
	uint8_t *buf = payload(n, PFS_LS_COMPLETE, ~0u, NULL, 0, &len);

	return listing_set(f->t, f->dir, buf, len, &li);
}

/* listing_find of name in dir: its result, with the item's flags in *fl
 * (the data copy, if any, freed). */
static int find(struct inode *dir, const char *name, uint32_t *fl)
{
	struct pfs_entry e;
	struct listing_info got;
	uint8_t *data;
	uint32_t dlen, flags;
	int r = listing_find(dir, name, &e, &data, &dlen, &flags, &got);

	free(data);
	if (fl)
		*fl = flags;
	return r;
}

static void test_malformed(void)
{
	struct fixture f;
	size_t len, bound[4];

	setup(&f);
	struct listing_info li = info(&f);
	/* Where each item ends. */
	for (unsigned n = 0; n < 4; n++)
		free(payload(n, PFS_LS_COMPLETE, ~0u, NULL, 0, &bound[n]));
	uint8_t *buf = payload(3, PFS_LS_COMPLETE, ~0u, NULL, 0, &len);
	CHECK_EQ(len, bound[3]);
	/* Every cut inside the flags or an item is refused (and the buffer
	 * freed); a cut between items is a shorter listing. */
	for (size_t cut = 0; cut < len; cut++) {
		uint8_t *b = malloc(cut ? cut : 1);
		memcpy(b, buf, cut);
		bool boundary = cut == bound[0] || cut == bound[1] || cut == bound[2];
		CHECK_EQ(listing_set(f.t, f.dir, b, cut, &li), boundary ? 0 : -EBADMSG);
	}
	free(buf);
	teardown(&f);
}

static void test_find(void)
{
	struct fixture f;
	struct pfs_entry e;
	struct listing_info li, got;
	uint8_t *data;
	uint32_t dlen, fl;
	size_t len;

	setup(&f);
	CHECK_EQ(find(f.dir, "f1", NULL), LS_NONE);
	CHECK(listing_may_fetch(f.dir, 64 * 1024));
	CHECK(!listing_may_fetch(f.dir, 100)); /* too large a directory */
	li = info(&f);
	uint8_t *buf = payload(200, PFS_LS_COMPLETE, 7, "hello", 5, &len);
	CHECK_EQ(listing_set(f.t, f.dir, buf, len, &li), 0);
	CHECK(!listing_may_fetch(f.dir, 64 * 1024)); /* it has one */
	for (unsigned i = 0; i < 200; i++) {
		char name[16];
		snprintf(name, sizeof(name), "f%u", i);
		CHECK_EQ(listing_find(f.dir, name, &e, &data, &dlen, &fl, &got), LS_PRESENT);
		struct pfs_entry want = entry(i, S_IFREG | 0644, i == 7 ? 5 : 10);
		CHECK(pfs_fh_equal(&e.fh, &want.fh));
		CHECK_EQ(e.attr.ino, want.attr.ino);
		CHECK_EQ(got.seq, 5);
		CHECK_EQ(got.uid, 1000);
		if (i == 7) {
			CHECK(fl & PFS_LD_DATA);
			CHECK(data && dlen == 5 && memcmp(data, "hello", 5) == 0);
		} else {
			CHECK(data == NULL);
		}
		free(data);
	}
	CHECK_EQ(find(f.dir, "nope", NULL), LS_ABSENT);
	CHECK_EQ(find(f.dir, "f", NULL), LS_ABSENT);
	CHECK_EQ(find(f.dir, "f2000", NULL), LS_ABSENT);
	teardown(&f);
}

static void test_add(void)
{
	struct fixture f;
	struct pfs_entry e;
	struct listing_info got;
	uint8_t *data;
	uint32_t dlen, fl;

	setup(&f);
	struct pfs_entry ne = entry(5000, S_IFREG | 0600, 0);
	/* No listing: nothing to add to. */
	CHECK_EQ(listing_add(f.dir, "new", &ne), -ENOENT);
	CHECK_EQ(list(&f, 3), 0);
	uint64_t gen = listing_gen(f.dir);
	CHECK_EQ(listing_add(f.dir, "f1", &ne), -EEXIST);
	CHECK_EQ(listing_gen(f.dir), gen);
	/* Many creates: the index grows and is rebuilt; every name stays. */
	for (unsigned i = 0; i < 300; i++) {
		char name[16];
		struct pfs_entry x = entry(6000 + i, S_IFREG | 0600, 0);
		snprintf(name, sizeof(name), "new%u", i);
		CHECK_EQ(listing_add(f.dir, name, &x), 0);
	}
	CHECK(listing_gen(f.dir) > gen); /* a listing asked for before is not kept */
	for (unsigned i = 0; i < 300; i++) {
		char name[16];
		struct pfs_entry x = entry(6000 + i, S_IFREG | 0600, 0);
		snprintf(name, sizeof(name), "new%u", i);
		CHECK_EQ(listing_find(f.dir, name, &e, &data, &dlen, &fl, &got), LS_PRESENT);
		CHECK(pfs_fh_equal(&e.fh, &x.fh));
		CHECK_EQ(fl, 0);
	}
	CHECK_EQ(find(f.dir, "f2", NULL), LS_PRESENT);
	char big[PFS_NAME_MAX + 2];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	CHECK_EQ(listing_add(f.dir, big, &ne), -ENAMETOOLONG);
	teardown(&f);
}

static void test_remove(void)
{
	struct fixture f;
	struct listing_info got;
	uint64_t pseq;
	uint8_t *out;
	size_t olen;

	setup(&f);
	uint64_t gen = listing_gen(f.dir);
	CHECK_EQ(listing_remove(f.dir, "f1"), -ENOENT); /* no listing */
	CHECK(listing_gen(f.dir) > gen);
	CHECK_EQ(list(&f, 4), 0);
	gen = listing_gen(f.dir);
	listing_changing(f.dir);
	CHECK(listing_gen(f.dir) > gen); /* a listing asked for before is not kept */
	CHECK_EQ(find(f.dir, "f1", NULL), LS_PRESENT); /* this one is */
	CHECK_EQ(listing_remove(f.dir, "f1"), 0);
	CHECK_EQ(find(f.dir, "f1", NULL), LS_ABSENT);
	CHECK_EQ(listing_remove(f.dir, "f1"), -ENOENT);
	CHECK_EQ(listing_remove(f.dir, "nope"), -ENOENT);
	CHECK_EQ(find(f.dir, "f2", NULL), LS_PRESENT);
	/* READDIR leaves it out; the others keep their cookies. */
	CHECK_EQ(listing_readdir(f.t, f.dir, &out, &olen, NULL, &got, &pseq), 0);
	struct pfs_rd rd;
	uint8_t eof = 0;
	pfs_rd_init(&rd, out, olen);
	CHECK(pfs_get_U8(&rd, &eof) && eof == 1);
	const char *names[] = { ".", "..", "f0", "f2", "f3" };
	const uint64_t offs[] = { 1, 2, 3, 5, 6 };
	for (unsigned i = 0; i < 5; i++) {
		struct pfs_dirent de;
		CHECK_EQ(pfs_dec_dirent(&rd, &de), 1);
		CHECK_STR(de.name.s, names[i]);
		CHECK_EQ(de.next_off, offs[i]);
	}
	struct pfs_dirent de;
	CHECK_EQ(pfs_dec_dirent(&rd, &de), 0);
	free(out);
	/* The name made again by a create joins it; the index is rebuilt as
	 * it grows, and the removed item stays out of it. */
	struct pfs_entry ne = entry(7000, S_IFREG | 0600, 0);
	CHECK_EQ(listing_add(f.dir, "f1", &ne), 0);
	CHECK_EQ(listing_remove(f.dir, "f3"), 0);
	for (unsigned i = 0; i < 40; i++) {
		char name[16];
		struct pfs_entry x = entry(8000 + i, S_IFREG | 0600, 0);
		snprintf(name, sizeof(name), "n%u", i);
		CHECK_EQ(listing_add(f.dir, name, &x), 0);
	}
	CHECK_EQ(find(f.dir, "f3", NULL), LS_ABSENT);
	struct pfs_entry e;
	uint8_t *data;
	uint32_t dlen, fl;
	CHECK_EQ(listing_find(f.dir, "f1", &e, &data, &dlen, &fl, &got), LS_PRESENT);
	CHECK(pfs_fh_equal(&e.fh, &ne.fh));
	teardown(&f);
}

static void test_stale_and_gen(void)
{
	struct fixture f;
	size_t len;

	setup(&f);
	/* A listing asked for before an own change in dir is not kept. */
	struct listing_info li = info(&f);
	listing_touch(f.dir);
	uint8_t *buf = payload(3, PFS_LS_COMPLETE, ~0u, NULL, 0, &len);
	CHECK_EQ(listing_set(f.t, f.dir, buf, len, &li), -ESTALE);
	CHECK_EQ(find(f.dir, "f1", NULL), LS_NONE);
	/* ...and none is fetched for the quiet period after the change. */
	CHECK(!listing_may_fetch(f.dir, 64 * 1024));

	CHECK_EQ(list(&f, 3), 0);
	CHECK_EQ(find(f.dir, "f1", NULL), LS_PRESENT);
	listing_stale(f.dir);
	CHECK_EQ(find(f.dir, "f1", NULL), LS_NONE);
	CHECK(!listing_may_fetch(f.dir, 64 * 1024));

	/* Dropped for good (it was incomplete). */
	struct pfs_entry d2 = entry(900002, S_IFDIR | 0755, 4096);
	struct inode *dir2 = inode_ref(f.t, &d2, NULL, 0);
	CHECK(listing_may_fetch(dir2, 64 * 1024));
	listing_drop(dir2);
	CHECK(!listing_may_fetch(dir2, 64 * 1024));
	/* Not a directory: never listed. */
	struct pfs_entry fe = entry(900003, S_IFREG | 0644, 1);
	CHECK(!listing_may_fetch(inode_ref(f.t, &fe, NULL, 0), 64 * 1024));
	teardown(&f);
}

/* Our own change of an object marks its item in the listing of the
 * directory it was found in stale (its lookups go to the daemon). */
static void test_own_change_marks(void)
{
	struct fixture f;
	uint32_t fl;

	setup(&f);
	uint64_t ns, any = inode_own_snap(f.t, &ns);
	CHECK_EQ(list(&f, 10), 0);
	struct pfs_entry fe = entry(4, S_IFREG | 0644, 10);
	struct inode *ip = inode_ref(f.t, &fe, NULL, 0);
	inode_set_parent(f.t, ip, f.dir, 5, "f4");
	CHECK(!inode_listed_stale(f.t, &fe.fh, any));
	inode_own_touch(f.t, ip, false);
	CHECK(inode_listed_stale(f.t, &fe.fh, any));
	CHECK_EQ(find(f.dir, "f4", &fl), LS_PRESENT);
	CHECK(fl & INODE_LS_STALE);
	CHECK_EQ(find(f.dir, "f3", &fl), LS_PRESENT);
	CHECK(!(fl & INODE_LS_STALE));
	/* A file with several links: every listing goes. */
	fe.attr.nlink = 2;
	inode_set_attr(ip, &fe.attr, 0);
	inode_own_touch(f.t, ip, false);
	CHECK_EQ(find(f.dir, "f3", NULL), LS_NONE);
	teardown(&f);
}

/* A write of this host's, sent and answered with attributes a. */
static void own_write(struct fixture *f, struct inode *ip, const struct pfs_attr *a)
{
	uint64_t ns;
	(void)inode_own_snap(f->t, &ns);
	inode_write_queued(ip);
	uint64_t at = inode_write_sent(f->t, ip);
	inode_write_done(f->t, ip, at, a, 5, ns);
}

/* What inode_read_inline gives of ip from 0 (at most 64 bytes), as a
 * string; "-" if it answers nothing. */
static const char *read_back(struct inode *ip)
{
	static char buf[65];
	size_t got;
	if (!inode_read_inline(ip, 0, 64, buf, &got))
		return "-";
	buf[got] = 0;
	return buf;
}

/* The copy a file made here keeps of this host's writes (inode_write
 * _inline): it follows appends and overwrites as their own changes come
 * back, and goes at a hole, past max, at a write of unknown outcome and
 * at a push; it is never handed out for the kernel's page cache. */
static void test_own_inline(void)
{
	struct fixture f;
	uint32_t len;

	setup(&f);
	struct pfs_entry fe = entry(7, S_IFREG | 0644, 0);
	struct inode *ip = inode_ref(f.t, &fe, NULL, 0);
	inode_set_inline(ip, &fe.attr, "", 0);
	inode_write_inline(ip, 0, "hello", 5, 64);
	struct pfs_attr a = fe.attr;
	a.size = 5;
	a.mtime_s++;
	own_write(&f, ip, &a);
	CHECK(inode_inline_copy(ip, &len) == NULL); /* own: not for the kernel's pages */
	inode_write_inline(ip, 1, "EY", 2, 64);
	inode_write_inline(ip, 5, "!", 1, 64);
	a.size = 6;
	a.mtime_ns++;
	own_write(&f, ip, &a);
	CHECK_STR(read_back(ip), "hEYlo!");
	/* Read to the end: freed (the kernel's pages hold it). */
	CHECK_STR(read_back(ip), "-");

	/* An answer that is not this host's own change: not current. */
	inode_set_inline(ip, &a, "hEYlo!", 6);
	inode_write_inline(ip, 6, "?", 1, 64);
	struct pfs_attr other = a;
	other.size = 7;
	other.mtime_s += 5;
	inode_set_attr(ip, &other, 0);
	CHECK_STR(read_back(ip), "-");

	/* A hole, past max, a write of unknown outcome, a push: freed. */
	const struct {
		uint64_t off;
		size_t size;
		bool unknown;
	} drops[] = { { 7, 1, false }, { 0, 65, false }, { 60, 5, false }, { 0, 3, true } };
	for (size_t i = 0; i < sizeof(drops) / sizeof(drops[0]); i++) {
		inode_set_inline(ip, &other, "abcdefg", 7);
		inode_write_inline(ip, drops[i].off, "0123456789012345678901234567890123456789"
				   "0123456789012345678901234", drops[i].size, 64);
		if (drops[i].unknown)
			own_write(&f, ip, NULL);
		CHECK_STR(read_back(ip), "-");
	}
	inode_set_inline(ip, &other, "abcdefg", 7);
	fuse_ino_t nodeid;
	CHECK(inode_find(f.t, &fe.fh, true, &nodeid, NULL, 1));
	CHECK_STR(read_back(ip), "-");
	teardown(&f);
}

static void test_readdir(void)
{
	struct fixture f;
	struct listing_info got;
	uint64_t pseq;
	uint8_t *out;
	size_t olen;

	setup(&f);
	/* No listing yet. */
	CHECK_EQ(listing_readdir(f.t, f.dir, &out, &olen, NULL, &got, &pseq), -ENOENT);
	CHECK_EQ(list(&f, 4), 0);
	struct pfs_entry fe = entry(2, S_IFREG | 0644, 10);
	struct inode *ip = inode_ref(f.t, &fe, NULL, 0);
	inode_set_parent(f.t, ip, f.dir, 5, "f2");
	inode_own_touch(f.t, ip, false); /* f2 goes out without its entry */

	CHECK_EQ(listing_readdir(f.t, f.dir, &out, &olen, NULL, &got, &pseq), 0);
	CHECK_EQ(pseq, 1); /* the request that found ".." */
	CHECK_EQ(got.seq, 5);
	struct pfs_rd rd;
	uint8_t eof = 0;
	pfs_rd_init(&rd, out, olen);
	CHECK(pfs_get_U8(&rd, &eof) && eof == 1);
	const char *names[] = { ".", "..", "f0", "f1", "f2", "f3" };
	for (unsigned i = 0; i < 6; i++) {
		struct pfs_dirent de;
		CHECK_EQ(pfs_dec_dirent(&rd, &de), 1);
		CHECK_STR(de.name.s, names[i]);
		CHECK_EQ(de.next_off, i + 1);
		if (i == 0)
			CHECK_EQ(de.ino, f.dir->attr.ino);
		else if (i == 1)
			CHECK_EQ(de.ino, f.root->attr.ino);
		else
			CHECK_EQ(de.ino, 1000 + (i - 2));
		bool has = (de.flags & PFS_DE_HAS_ENTRY) != 0;
		CHECK_EQ(has, i >= 2 && i != 4);
	}
	struct pfs_dirent de;
	CHECK_EQ(pfs_dec_dirent(&rd, &de), 0);
	free(out);
	/* A rename of ours makes every recorded ".." unknown. */
	inode_note_rename(f.t);
	CHECK_EQ(listing_readdir(f.t, f.dir, &out, &olen, NULL, &got, &pseq), -ENOENT);
	teardown(&f);
}

/* listing_readdir's item flags (one per name after the dots) and
 * listing_subdirs: the directories of a listing, small ones only, items
 * marked stale left out; the absences noted from them only without an
 * own change since (inode_note_absent). */
static void test_item_flags_and_subdirs(void)
{
	struct fixture f;
	struct listing_info li, got;
	uint64_t pseq;
	uint8_t *out;
	uint32_t *fl = NULL;
	size_t olen, len, cap = 4096;
	uint8_t *buf = malloc(cap);
	struct pfs_wr w;
	uint32_t complete = PFS_LS_COMPLETE;
	struct pfs_entry es[4] = { entry(0, S_IFDIR | 0755, 4096), entry(1, S_IFREG | 0644, 10),
				   entry(2, S_IFDIR | 0755, 1 << 20), entry(3, S_IFDIR | 0755, 4096) };
	const uint32_t flags[4] = { PFS_LD_NO_XATTRS, PFS_LD_NO_SELINUX, 0, PFS_LD_NO_CAPS };

	setup(&f);
	pfs_wr_init(&w, buf, cap);
	put_head(&w, complete);
	for (unsigned i = 0; i < 4; i++) {
		struct pfs_name nm;
		struct pfs_bytes d = { 0 };
		nm.len = (uint16_t)snprintf(nm.s, sizeof(nm.s), "e%u", i);
		put_item(&w, &nm, &es[i], flags[i], i, &d);
	}
	li = info(&f);
	len = w.len;
	CHECK_EQ(listing_set(f.t, f.dir, buf, len, &li), 0);
	CHECK_EQ(listing_readdir(f.t, f.dir, &out, &olen, &fl, &got, &pseq), 0);
	CHECK(fl != NULL);
	for (unsigned i = 0; fl && i < 4; i++) /* after the dots */
		CHECK_EQ(fl[2 + i], flags[i]);
	free(out);
	free(fl);

	struct pfs_entry sub[4];
	CHECK_EQ(listing_subdirs(f.dir, 64 * 1024, sub, 4), 2); /* e2 is too big */
	CHECK(pfs_fh_equal(&sub[0].fh, &es[0].fh) && pfs_fh_equal(&sub[1].fh, &es[3].fh));
	CHECK_EQ(listing_subdirs(f.dir, 64 * 1024, sub, 1), 1);
	/* e3 changed by this client: not a subdirectory to fetch ahead. */
	pthread_mutex_lock(&f.dir->lock);
	listing_mark(f.dir, name_hash("e3", 2), &es[3].fh);
	pthread_mutex_unlock(&f.dir->lock);
	CHECK_EQ(listing_subdirs(f.dir, 64 * 1024, sub, 4), 1);

	/* Absences: noted with no own change since, not after one. */
	struct inode *ip = inode_ref(f.t, &es[1], NULL, 0);
	inode_note_absent(f.t, ip, NOX_SELINUX, false, 3600, li.any);
	CHECK(inode_noxattr(ip, NOX_SELINUX));
	CHECK(!inode_noxattr(ip, NOX_ACL_ACCESS));
	inode_clear_nocaps(ip);
	inode_own_touch(f.t, ip, false);
	inode_note_absent(f.t, ip, NOX_SELINUX, true, 3600, li.any);
	CHECK(!inode_noxattr(ip, NOX_SELINUX));
	CHECK(!inode_nocaps(ip));
	teardown(&f);
}

/* The listing of test_subdirs_next: d0 f1 d2 d3 f4 d5 d6 (d: small
 * directories, but d6 too big to fetch ahead), entries in es[7]. */
static uint8_t *subdirs_payload(struct pfs_entry *es, size_t *len)
{
	static const char *names[7] = { "d0", "f1", "d2", "d3", "f4", "d5", "d6" };
	size_t cap = 4096;
	uint8_t *buf = malloc(cap);
	uint32_t complete = PFS_LS_COMPLETE, none = 0;
	struct pfs_wr w;

	pfs_wr_init(&w, buf, cap);
	put_head(&w, complete);
	for (unsigned i = 0; i < 7; i++) {
		struct pfs_name nm;
		struct pfs_bytes d = { 0 };
		bool dir = names[i][0] == 'd';
		es[i] = entry(i, dir ? S_IFDIR | 0755 : S_IFREG | 0644, i == 6 ? 1 << 20 : 4096);
		nm.len = (uint16_t)snprintf(nm.s, sizeof(nm.s), "%s", names[i]);
		put_item(&w, &nm, &es[i], none, i, &d);
	}
	*len = w.len;
	return buf;
}

/* listing_subdirs_next: the subdirectories after a name, in order, each
 * entry looked at once per listing. */
static void test_subdirs_next(void)
{
	struct fixture f;
	struct pfs_entry es[7], out[8];
	struct listing_info li;
	size_t len;

	setup(&f);
	/* No listing yet: nothing. */
	CHECK_EQ(listing_subdirs_next(f.dir, "d0", 4, 64 * 1024, out, 8), 0);
	uint8_t *buf = subdirs_payload(es, &len);
	li = info(&f);
	CHECK_EQ(listing_set(f.t, f.dir, buf, len, &li), 0);
	/* A name not listed: nothing, and nothing counted as looked at. */
	CHECK_EQ(listing_subdirs_next(f.dir, "zz", 4, 64 * 1024, out, 8), 0);
	/* After d0, within 3 entries (f1 d2 d3): d2 and d3, in order. */
	CHECK_EQ(listing_subdirs_next(f.dir, "d0", 3, 64 * 1024, out, 8), 2);
	CHECK(pfs_fh_equal(&out[0].fh, &es[2].fh) && pfs_fh_equal(&out[1].fh, &es[3].fh));
	/* After d2, within 3 (d3 f4 d5): d3 was looked at already: d5. */
	CHECK_EQ(listing_subdirs_next(f.dir, "d2", 3, 64 * 1024, out, 8), 1);
	CHECK(pfs_fh_equal(&out[0].fh, &es[5].fh));
	/* After d3: the rest looked at already, or too big (d6). */
	CHECK_EQ(listing_subdirs_next(f.dir, "d3", 8, 64 * 1024, out, 8), 0);
	CHECK_EQ(listing_subdirs_next(f.dir, "d0", 8, 64 * 1024, out, 8), 0);

	/* A new listing is looked at again; max bounds the result, and
	 * what was not returned stays to come. */
	buf = subdirs_payload(es, &len);
	li = info(&f);
	CHECK_EQ(listing_set(f.t, f.dir, buf, len, &li), 0);
	CHECK_EQ(listing_subdirs_next(f.dir, "d0", 8, 64 * 1024, out, 1), 1);
	CHECK(pfs_fh_equal(&out[0].fh, &es[2].fh));
	CHECK_EQ(listing_subdirs_next(f.dir, "d0", 8, 64 * 1024, out, 8), 2);
	CHECK(pfs_fh_equal(&out[0].fh, &es[3].fh) && pfs_fh_equal(&out[1].fh, &es[5].fh));
	teardown(&f);
}

static void test_total_cap(void)
{
	struct fixture f;
	size_t len;

	setup(&f);
	free(payload(3, PFS_LS_COMPLETE, ~0u, NULL, 0, &len));
	/* All listings of a table stay under LISTING_TOTAL_MAX bytes. */
	atomic_store(&f.t->listing_total, LISTING_TOTAL_MAX - 100);
	CHECK_EQ(list(&f, 3), -ENOSPC);
	CHECK_EQ(atomic_load(&f.t->listing_total), LISTING_TOTAL_MAX - 100);
	atomic_store(&f.t->listing_total, 0);
	CHECK_EQ(list(&f, 3), 0);
	CHECK(atomic_load(&f.t->listing_total) > (int64_t)len);
	listing_stale(f.dir);
	CHECK_EQ(atomic_load(&f.t->listing_total), 0);
	teardown(&f);
}

/* A fetch is made by one thread at a time; a large directory is listed
 * only once enough lookups there missed (more, the larger it is). */
static void test_fetch_begin(void)
{
	struct fixture f;

	setup(&f);
	CHECK(listing_fetch_begin(f.dir, 64 * 1024, 0, 0));
	CHECK(!listing_fetch_begin(f.dir, 64 * 1024, 0, 0)); /* another thread: not again */
	CHECK(!listing_may_fetch(f.dir, 64 * 1024));
	listing_fetch_end(f.dir);
	CHECK(listing_may_fetch(f.dir, 64 * 1024));
	/* The 16th miss fetches; those before do not. */
	for (int i = 0; i < 15; i++)
		CHECK(!listing_fetch_begin(f.dir, 64 * 1024, 16, 0));
	CHECK(listing_fetch_begin(f.dir, 64 * 1024, 16, 0));
	listing_fetch_end(f.dir); /* and counting starts again */
	CHECK(!listing_fetch_begin(f.dir, 64 * 1024, 2, 0));
	CHECK(listing_fetch_begin(f.dir, 64 * 1024, 2, 0));
	listing_fetch_end(f.dir);
	/* A larger directory needs more: one per per_bytes of its size. */
	struct pfs_attr a = f.dir->attr;
	a.size = 40 * 1024;
	inode_set_attr(f.dir, &a, 0);
	for (int i = 0; i < 39; i++)
		CHECK(!listing_fetch_begin(f.dir, 64 * 1024, 16, 1024));
	CHECK(listing_fetch_begin(f.dir, 64 * 1024, 16, 1024));
	listing_fetch_end(f.dir);
	/* Too large, or listed already: never. */
	CHECK(!listing_fetch_begin(f.dir, 1024, 0, 0));
	CHECK_EQ(list(&f, 3), 0);
	CHECK(!listing_fetch_begin(f.dir, 64 * 1024, 0, 0));
	teardown(&f);
}

/* READDIR is made from a listing only with the server's cookies
 * (wire_list.h): not from one without them (an older server), nor one
 * whose dots' cookies are 0 ("." and ".." not first there), nor once a
 * name this client made joined it (its cookie unknown). The item flags
 * go with the names written, a removed one left out. */
static void test_readdir_needs_cookies(void)
{
	struct fixture f;
	struct listing_info li, got;
	uint64_t pseq;
	uint8_t *out;
	uint32_t *fl = NULL;
	size_t olen, cap = 4096;
	struct pfs_wr w;
	uint32_t complete = PFS_LS_COMPLETE, none = 0;

	setup(&f);
	/* Without cookies: lookups yes, READDIR no. */
	uint8_t *buf = malloc(cap);
	pfs_wr_init(&w, buf, cap);
	CHECK_EQ(pfs_put_U32(&w, &complete), 0);
	for (unsigned i = 0; i < 3; i++) {
		struct pfs_name nm;
		struct pfs_entry e = entry(i, S_IFREG | 0644, 10);
		struct pfs_bytes d = { 0 };
		nm.len = (uint16_t)snprintf(nm.s, sizeof(nm.s), "f%u", i);
		CHECK(pfs_put_NAME(&w, &nm) == 0 && pfs_put_ENTRY(&w, &e) == 0 &&
		      pfs_put_U32(&w, &none) == 0 && pfs_put_BYTES(&w, &d) == 0);
	}
	li = info(&f);
	li.cookies = false;
	CHECK_EQ(listing_set(f.t, f.dir, buf, w.len, &li), 0);
	CHECK_EQ(find(f.dir, "f2", NULL), LS_PRESENT);
	CHECK_EQ(find(f.dir, "f3", NULL), LS_ABSENT);
	CHECK_EQ(listing_readdir(f.t, f.dir, &out, &olen, NULL, &got, &pseq), -ENOENT);

	/* Dots not read (0, 0), or not where the server said. */
	const uint64_t unread[4] = { 0, 0, 1, 2 }, nowhere[4] = { 0, 1, 77, 2 };
	for (int k = 0; k < 2; k++) {
		buf = malloc(cap);
		pfs_wr_init(&w, buf, cap);
		put_head_dots(&w, complete, k ? nowhere : unread);
		li = info(&f);
		CHECK_EQ(listing_set(f.t, f.dir, buf, w.len, &li), 0);
		CHECK_EQ(find(f.dir, "f0", NULL), LS_ABSENT);
		CHECK_EQ(listing_readdir(f.t, f.dir, &out, &olen, NULL, &got, &pseq), -ENOENT);
	}

	/* The dots where the stream has them (ext4's one-block directories:
	 * hash order): ".." first, "." after f1 (cookie 4); a name removed
	 * here: left out, and the flags follow the entries written. */
	const uint64_t mid[4] = { 4, 50, 0, 40 };
	buf = malloc(cap);
	pfs_wr_init(&w, buf, cap);
	put_head_dots(&w, complete, mid);
	for (unsigned i = 0; i < 3; i++) {
		struct pfs_name nm;
		struct pfs_entry e = entry(i, S_IFREG | 0644, 10);
		struct pfs_bytes d = { 0 };
		nm.len = (uint16_t)snprintf(nm.s, sizeof(nm.s), "f%u", i);
		put_item(&w, &nm, &e, PFS_LD_NO_CAPS << i, i, &d);
	}
	li = info(&f);
	CHECK_EQ(listing_set(f.t, f.dir, buf, w.len, &li), 0);
	CHECK_EQ(listing_remove(f.dir, "f0"), 0);
	CHECK_EQ(listing_readdir(f.t, f.dir, &out, &olen, &fl, &got, &pseq), 0);
	/* Cookies: ".." 40 (items from 0: f0 3, f1 4, f2 5), then f1 4, "." 50,
	 * f2 5; f0 removed. (The items' cookies are made up; the order is
	 * what counts.) */
	const char *names[] = { "..", "f1", ".", "f2" };
	const uint64_t offs[] = { 40, 4, 50, 5 };
	const uint32_t want_fl[] = { 0, PFS_LD_NO_CAPS << 1, 0, PFS_LD_NO_CAPS << 2 };
	struct pfs_rd rd;
	uint8_t eof;
	pfs_rd_init(&rd, out, olen);
	CHECK(pfs_get_U8(&rd, &eof) && eof == 1);
	for (unsigned i = 0; i < 4; i++) {
		struct pfs_dirent de;
		CHECK_EQ(pfs_dec_dirent(&rd, &de), 1);
		CHECK_STR(de.name.s, names[i]);
		CHECK_EQ(de.next_off, offs[i]);
		CHECK(fl != NULL && fl[i] == want_fl[i]);
	}
	struct pfs_dirent de;
	CHECK_EQ(pfs_dec_dirent(&rd, &de), 0);
	free(fl);
	free(out);
	/* A name of ours joins it: no READDIR from it any more. */
	struct pfs_entry ne = entry(50, S_IFREG | 0600, 0);
	CHECK_EQ(listing_add(f.dir, "mine", &ne), 0);
	CHECK_EQ(find(f.dir, "mine", NULL), LS_PRESENT);
	CHECK_EQ(listing_readdir(f.t, f.dir, &out, &olen, NULL, &got, &pseq), -ENOENT);
	teardown(&f);
}

int main(void)
{
	test_remove();
	test_malformed();
	test_find();
	test_add();
	test_stale_and_gen();
	test_own_change_marks();
	test_own_inline();
	test_readdir();
	test_readdir_needs_cookies();
	test_item_flags_and_subdirs();
	test_subdirs_next();
	test_total_cap();
	test_fetch_begin();
	return check_done("test_listing");
}
