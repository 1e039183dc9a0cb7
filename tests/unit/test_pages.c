/* test_pages.c: unit tests of whether the kernel's pages of a file stay
 * current (fs/pages.c inode_open_version; inode_own_change_locked), on
 * a real inode table: this client's own writes keep them, whatever order
 * their replies come in, also one that comes after an open, and what
 * attributes seen while they were in flight showed; a version no change
 * of ours made, a push, or a failed write drops them. Attributes from a
 * reply to a request sent before a push leave the data version unknown.
 */
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "inode_i.h"
#include "podfs/codec.h"
#include "trust_i.h"

/* The attributes of regular file n at version t (its mtime and ctime,
 * in ns) with size bytes. */
static struct pfs_attr at(uint32_t n, int64_t t, uint64_t size)
{
	struct pfs_attr a;
	memset(&a, 0, sizeof(a));
	a.ino = n;
	a.mode = S_IFREG | 0644;
	a.nlink = 1;
	a.size = size;
	a.mtime_s = a.ctime_s = t / 1000000000;
	a.mtime_ns = a.ctime_ns = (uint32_t)(t % 1000000000);
	return a;
}

static struct inode *file(struct inode_table *t, uint32_t n)
{
	struct pfs_entry e;
	memset(&e, 0, sizeof(e));
	e.fh.len = 8;
	memcpy(e.fh.data, &n, sizeof(n));
	e.attr = at(n, 1, 0);
	return inode_ref(t, &e, NULL, 0);
}

/* The reply of this client's change that left ip at a. */
static void own(struct inode *ip, struct pfs_attr a)
{
	pthread_mutex_lock(&ip->lock);
	inode_own_change_locked(ip, &a, 0);
	pthread_mutex_unlock(&ip->lock);
}

/* An open that the server answered with a: whether the pages stay. */
static bool open_keeps(struct inode *ip, struct pfs_attr a)
{
	bool stale;
	return inode_open_version(ip, &a, &stale, 0);
}

/* File n, opened at version 1 and written once by this client (version
 * 2, 10 bytes). */
static struct inode *written(struct inode_table *t, uint32_t n)
{
	struct inode *ip = file(t, n);
	CHECK(open_keeps(ip, at(n, 1, 0)));
	own(ip, at(n, 2, 10));
	return ip;
}

int main(void)
{
	struct pfs_entry r;
	memset(&r, 0, sizeof(r));
	r.fh.len = 8;
	r.attr.mode = S_IFDIR | 0755;
	r.attr.nlink = 2;
	struct inode_table *t;
	CHECK_EQ(inode_table_new(&r, &t), 0);

	/* The first open keeps nothing to drop; an open of the same version
	 * keeps the pages; one of another version drops them. */
	struct inode *f = file(t, 10);
	CHECK(open_keeps(f, at(10, 1, 0)));
	CHECK(open_keeps(f, at(10, 1, 0)));
	CHECK(!open_keeps(f, at(10, 2, 0)));
	CHECK(open_keeps(f, at(10, 2, 0)));

	/* Writes whose replies come in order. */
	own(f, at(10, 3, 100));
	own(f, at(10, 4, 200));
	CHECK(open_keeps(f, at(10, 4, 200)));

	/* Four writes in flight at once: the server made 5, 6, 7, 8; the
	 * replies came 8, 6, 5, 7. The server's version is the last made. */
	own(f, at(10, 8, 600));
	own(f, at(10, 6, 400));
	own(f, at(10, 5, 300));
	own(f, at(10, 7, 500));
	CHECK(open_keeps(f, at(10, 8, 600)));
	/* ... and again, with no change between. */
	CHECK(open_keeps(f, at(10, 8, 600)));

	/* A reply that comes after the open its write preceded. */
	own(f, at(10, 10, 800));
	CHECK(open_keeps(f, at(10, 10, 800))); /* 9's reply still on its way */
	own(f, at(10, 9, 700));
	CHECK(open_keeps(f, at(10, 10, 800)));

	/* A version none of our changes made: another host's change (with
	 * no push, as after a reconnect): the pages go, and with them what
	 * our changes made before. */
	own(f, at(10, 11, 900));
	CHECK(!open_keeps(f, at(10, 12, 900)));
	CHECK(!open_keeps(f, at(10, 11, 900)));

	/* Another host's change that was pushed: a reply of ours that came
	 * after it does not make the pages current again. */
	struct inode *g = written(t, 20);
	struct pfs_fh fh = g->fh;
	fuse_ino_t nodeid;
	struct nameset *names;
	CHECK(inode_mark_changed(t, &fh, NULL, &nodeid, &names));
	own(g, at(20, 3, 20));
	CHECK(!open_keeps(g, at(20, 3, 20)));
	CHECK(!open_keeps(g, at(20, 2, 10)));

	/* A failed write (its pages are not the file's): dropped. */
	struct inode *h = written(t, 30);
	inode_drop_cached(h);
	CHECK(!open_keeps(h, at(30, 2, 10)));

	/* Attributes seen (a GETATTR) while two writes of ours are in
	 * flight show what the second one made before either reply came:
	 * the pages hold that version too. */
	struct inode *w = written(t, 50);
	inode_write_queued(w);
	inode_write_queued(w);
	uint64_t s1 = inode_write_sent(t, w), s2 = inode_write_sent(t, w);
	struct pfs_attr w4 = at(50, 4, 30), w3 = at(50, 3, 20);
	inode_set_attr(w, &w4, 0);
	inode_write_done(t, w, s2, &w4, 0, 0);
	inode_write_done(t, w, s1, &w3, 0, 0);
	CHECK(open_keeps(w, at(50, 4, 30)));
	/* ... and while none is: another host's version breaks the chain. */
	struct pfs_attr foreign = at(50, 5, 30);
	inode_set_attr(w, &foreign, 0);
	own(w, at(50, 6, 40));
	CHECK(!open_keeps(w, at(50, 6, 40)));

	/* Attributes seen between (a GETATTR) that no change of ours made
	 * break the chain: our next change does not vouch for the pages. */
	struct inode *k = file(t, 40);
	CHECK(open_keeps(k, at(40, 1, 0)));
	struct pfs_attr other = at(40, 2, 5);
	inode_set_attr(k, &other, 0);
	own(k, at(40, 3, 15));
	CHECK(!open_keeps(k, at(40, 3, 15)));

	/* A reply to a request sent before a push that dropped the data (a
	 * smaller push number) may carry the version from before the
	 * change: the data version stays unknown, and neither the
	 * persistent cache nor the inline copy answers from it, until
	 * attributes come from a request sent after the push. */
	struct inode *v = file(t, 60);
	struct pfs_attr v1 = at(60, 1, 7), v2 = at(60, 2, 7);
	fh = v->fh;
	struct dver dv;
	char buf[16];
	size_t got;
	bool stale;
	inode_set_attr(v, &v1, 5);
	CHECK(inode_data_version(v, &dv));
	CHECK(inode_find(t, &fh, true, &nodeid, NULL, 7)); /* push 7 */
	CHECK(!inode_data_version(v, &dv));
	inode_set_attr(v, &v1, 6); /* sent before push 7 */
	CHECK(!inode_data_version(v, &dv));
	inode_set_inline(v, &v1, "content", 7);
	CHECK(!inode_read_inline(v, 0, sizeof(buf), buf, &got));
	inode_open_version(v, &v1, &stale, 6);
	CHECK(!inode_data_version(v, &dv));
	pthread_mutex_lock(&v->lock);
	inode_own_change_locked(v, &v1, 6);
	pthread_mutex_unlock(&v->lock);
	CHECK(!inode_data_version(v, &dv));
	inode_set_attr(v, &v2, 7); /* sent after it */
	CHECK(inode_data_version(v, &dv));
	inode_set_inline(v, &v2, "CONTENT", 7);
	CHECK(inode_read_inline(v, 0, sizeof(buf), buf, &got));
	CHECK_EQ(got, 7);
	CHECK(memcmp(buf, "CONTENT", 7) == 0);
	/* A reply with no push number to ask about (0) knows the version. */
	CHECK(inode_find(t, &fh, true, &nodeid, NULL, 9));
	inode_set_attr(v, &v2, 0);
	CHECK(inode_data_version(v, &dv));

	inode_table_free(t);
	return check_done("test_pages");
}
