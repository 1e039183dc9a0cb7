/* export_dirs.c: directory listings of the backing store: directory
 * streams under the session's fids (OPENDIR, READDIR) and whole listings
 * with small files' contents (LISTDIR) and their read-ahead. Worker
 * threads only (see export_i.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "podfs/clock.h"
#include "podfs/le.h"
#include "export_base_i.h"

/* An open directory is its fd alone: each READDIR reads it through a
 * stream of its own. */
int export_opendir(struct xop *x, struct hent *obj, uint64_t fid, struct pfs_attr *a)
{
	struct fid *f;
	int fd, ret;

	ret = session_fid_reserve(x->s);
	if (ret < 0)
		return ret;
	fd = export_dir_reopen(obj->fd);
	if (fd < 0) {
		session_fid_unreserve(x->s);
		return fd;
	}
	ret = export_getattr(fd, a);
	if (ret < 0) {
		close(fd);
		session_fid_unreserve(x->s);
		return ret;
	}
	f = session_fid_install(x->s, fid, fd, true, O_RDONLY, true);
	session_fid_put(x->s, f);
	return 0;
}

/* Listing read-ahead. A listing reads its small files one after the other;
 * when they are not in the page cache (a cold server), each read waits
 * for the disk in turn. Once one did, a second stream over the directory
 * runs LISTING_RA entries ahead and asks for the small files there with
 * POSIX_FADV_WILLNEED, so the disk fetches them side by side while the
 * listing goes on. Its opens are for reading only, non-blocking, of
 * regular files only (by O_PATH, then reopened, as every open here), never
 * follow a link, and are made with the caller's credentials. */
#define LISTING_RA 48

struct listing_ra {
	DIR *d;	   /* the read-ahead stream, or NULL */
	long pos;  /* entries it has passed */
	bool done; /* it reached the end (or failed) */
};

/* Prefetches the small files among the entries past from, up to upto
 * (positions in readdir order, counting from 1). */
static void listing_ra_advance(struct listing_ra *ra, int dirfd, long from, long upto,
			       uint32_t max_size)
{
	if (ra->done)
		return;
	if (!ra->d && export_dir_open(dirfd, &ra->d) < 0) {
		ra->done = true;
		return;
	}
	while (ra->pos < from && readdir(ra->d))
		ra->pos++;
	while (ra->pos < upto) {
		struct dirent *de = readdir(ra->d);
		struct stat st;
		int pfd, fd;

		if (!de) {
			ra->done = true;
			return;
		}
		ra->pos++;
		if (de->d_type != DT_REG)
			continue;
		/* As every other open: by O_PATH first, and only what is a
		 * regular file now (the entry's type may be stale: a FIFO or
		 * a device put there since is never opened). */
		pfd = openat(dirfd, de->d_name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (pfd < 0)
			continue;
		if (fstat(pfd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
		    (uint64_t)st.st_size <= max_size) {
			fd = export_reopen(pfd, O_RDONLY | O_NONBLOCK | O_NOATIME);
			if (fd == -EPERM) /* O_NOATIME needs the file's owner */
				fd = export_reopen(pfd, O_RDONLY | O_NONBLOCK);
			if (fd >= 0) {
				(void)posix_fadvise(fd, 0, st.st_size, POSIX_FADV_WILLNEED);
				close(fd);
			}
		}
		close(pfd);
	}
}

/* How much of a listing's reply goes to file contents: up to
 * PFS_LISTDIR_DATA_MAX, less the room its items are likely to need, so
 * that the listing stays complete. dir_size is the directory's st_size:
 * about 16-40 bytes per entry on ext4, xfs, tmpfs and btrfs, against
 * about 160 for an item on the wire (name, handle, attributes). */
static uint32_t listing_data_budget(uint64_t dir_size, uint32_t max_bytes)
{
	uint64_t reserve = dir_size * 10;
	if (reserve < 64 * 1024)
		reserve = 64 * 1024;
	if (reserve + 4 >= max_bytes)
		return 0;
	uint64_t b = max_bytes - 4 - reserve;
	return b < PFS_LISTDIR_DATA_MAX ? (uint32_t)b : PFS_LISTDIR_DATA_MAX;
}

/* Python content a listing does not spend its budget on (the file is
 * listed as usual, and read if it is read):
 *  - optimized bytecode (name.cpython-311.opt-1.pyc, .opt-2.pyc), read
 *    only by `python -O`/`-OO`, yet two thirds of a __pycache__ that
 *    holds it (the standard library's);
 *  - a source (name.py) in a directory with a __pycache__: an import
 *    reads the compiled module from there and only stats the source
 *    (a traceback, or a .pyc that is stale or missing, reads it then).
 * In a cold import they were most of what listings carried. */
static bool python_unread(const char *name, size_t nl, bool has_pycache)
{
	if (nl > 3 && has_pycache && memcmp(name + nl - 3, ".py", 3) == 0)
		return true;
	return nl > 10 && memcmp(name + nl - 4, ".pyc", 4) == 0 &&
	       memcmp(name + nl - 10, ".opt-", 5) == 0;
}

#define XATTR_NAMES_MAX 4096 /* a longer list of names: nothing said */

/* The PFS_LD_NO_* bits a listing of directory dir may give at all: the
 * names whose absence getxattr reports as ENODATA on its filesystem (a
 * filesystem without ACLs, for one, answers EOPNOTSUPP, which a client
 * must not be told is ENODATA). */
static uint32_t xattr_bits_known(int dir)
{
	char p[EXPORT_PROCPATH_LEN];
	uint32_t bits = 0;

	export_procpath(p, dir);
	for (size_t i = 0; i < EXPORT_ASKED_XATTRS; i++) {
		errno = 0;
		if (getxattr(p, export_asked_xattrs[i].name, NULL, 0) >= 0 || errno == ENODATA ||
		    errno == ERANGE)
			bits |= export_asked_xattrs[i].ld;
	}
	return bits;
}

/* listxattrat(2) (Linux 6.13): the names of dirfd's entry name, without
 * the /proc path of an O_PATH fd (which listxattrat refuses). */
#if defined(SYS_listxattrat)
#define NR_LISTXATTRAT SYS_listxattrat
#elif defined(__x86_64__) || defined(__aarch64__)
#define NR_LISTXATTRAT 465
#endif

/* The names of entry name of directory dir (open), the object of inode
 * number ino whose O_PATH fd the handle cache holds for fh; -1 with errno
 * when they cannot be listed. */
static ssize_t entry_xattr_names(struct xop *x, int dir, const char *name,
				 const struct pfs_fh *fh, uint64_t ino, char *names)
{
	char p[EXPORT_PROCPATH_LEN];
	struct hent *h;
	ssize_t n;

#ifdef NR_LISTXATTRAT
	static atomic_bool no_listxattrat;
	if (!atomic_load_explicit(&no_listxattrat, memory_order_relaxed)) {
		struct stat st;
		n = syscall(NR_LISTXATTRAT, dir, name, AT_SYMLINK_NOFOLLOW, names,
			    (size_t)XATTR_NAMES_MAX);
		if (n < 0 && errno != ENOSYS)
			return n;
		/* Still the object listed (its fd, held by the handle
		 * cache, keeps its inode number taken): nothing is said of
		 * another object that took the name meanwhile. */
		if (n >= 0 && (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
			       st.st_ino != ino)) {
			errno = ESTALE;
			return -1;
		}
		if (n >= 0)
			return n;
		atomic_store(&no_listxattrat, true);
	}
#else
	(void)dir;
	(void)name;
	(void)ino;
#endif
	/* Just adopted by the handle cache: a hit, unless evicted meanwhile
	 * (then nothing is said, rather than opened again). */
	if (handles_get(x->hs, fh, &h) < 0) {
		errno = ESTALE;
		return -1;
	}
	export_procpath(p, h->fd);
	n = listxattr(p, names, XATTR_NAMES_MAX);
	int err = errno;
	handles_put(x->hs, h);
	errno = err;
	return n;
}

/* The PFS_LD_NO_* bits (of known) of entry e, listed as name in directory
 * dir (open): the asked-for names its object lacks. Its names are listed
 * after export_lookup_data registered the session's interest in it, so a
 * change since is pushed (INVAL_INODE). They are asked by name, which
 * costs a lookup in dir rather than a walk of /proc, and the name is
 * checked to stand for the object still afterwards. A symlink has none
 * as clients see it (export_getxattr). 0 when they cannot be listed.
 * names: room for XATTR_NAMES_MAX bytes. */
static uint32_t xattrs_absent(struct xop *x, int dir, const char *name,
			      const struct pfs_entry *e, uint32_t known, char *names)
{
	uint32_t bits = known;
	ssize_t n;

	if (!known)
		return 0;
	if (S_ISLNK(e->attr.mode))
		return PFS_LD_NO_XATTRS;
	n = entry_xattr_names(x, dir, name, &e->fh, e->attr.ino, names);
	if (n < 0)
		return 0;
	for (ssize_t i = 0; i < n;) {
		size_t l = strnlen(names + i, (size_t)(n - i));
		for (size_t k = 0; k < EXPORT_ASKED_XATTRS; k++)
			if (strlen(export_asked_xattrs[k].name) == l &&
			    memcmp(names + i, export_asked_xattrs[k].name, l) == 0)
				bits &= ~export_asked_xattrs[k].ld;
		i += (ssize_t)l + 1;
	}
	return bits;
}

/* An item of a listing; with cookies (PFS_CAP_LIST_COOKIES), cookie
 * after its flags. */
static int put_item(struct pfs_wr *w, const struct pfs_name *name, const struct pfs_entry *e,
		    uint32_t flags, bool cookies, uint64_t cookie, const struct pfs_bytes *data)
{
	if (pfs_put_NAME(w, name) < 0 || pfs_put_ENTRY(w, e) < 0 || pfs_put_U32(w, &flags) < 0 ||
	    (cookies && pfs_put_U64(w, &cookie) < 0) || pfs_put_BYTES(w, data) < 0)
		return -ENOSPC;
	return 0;
}

/* Where a page stopped: at the end (PFS_LS_COMPLETE), at a limit with the
 * position after its last item (PFS_LS_MORE), or at a name it cannot
 * carry (0); and where "." and ".." were, if they were read (wire_list.h:
 * the cookie before each and its own; 0, 0 if not). */
struct page_end {
	uint32_t flags;
	uint64_t cookie;
	uint64_t dot[4];
};

/* Lists directory d (open, positioned at its first entry to list) into
 * lim as listing items, as export_listdir says; page: as a page of
 * LISTDIR_PAGE starting at cookie (which d is positioned at), ending at
 * a limit with PFS_LS_MORE instead of starting again without contents;
 * how: what the items carry (export_listdir). Returns how it ended. */
static struct page_end list_items(struct xop *x, struct hent *obj, DIR *d, uint32_t max_inline,
				  uint32_t data_left, bool has_pycache, bool page,
				  uint64_t cookie, unsigned how, struct pfs_wr *lim)
{
	bool xattrs = how & EXPORT_LS_XATTRS, cookies = how & EXPORT_LS_COOKIES;
	uint64_t first = cookie;
	uint32_t xknown = 0;
	char *names = NULL;
	struct listing_ra ra = { 0 };
	struct page_end end = { PFS_LS_COMPLETE, 0, { 0, 0, 0, 0 } };
	long pos = 0;
	bool cold = false;
	uint32_t data_taken = 0, n = 0;
	unsigned restarts = 0;
	size_t start = lim->len;
	uint8_t *buf = xmalloc((size_t)max_inline + 1);

	if (xattrs && !x->xknown_set) {
		x->xknown = xattr_bits_known(obj->fd);
		x->xknown_set = true;
	}
	if (xattrs && (xknown = x->xknown) != 0)
		names = xmalloc(XATTR_NAMES_MAX);
	for (;;) {
		struct pfs_name name;
		struct pfs_entry e;
		struct pfs_bytes data;
		uint32_t iflags = 0, len = 0, mi;
		struct dirent *de;
		size_t nl, save;

		errno = 0;
		if (!(de = readdir(d))) {
			if (errno)
				end.flags = 0;
			break;
		}
		pos++;
		if (export_dot_or_dotdot(de->d_name)) {
			/* Not always first: ext4 gives a one-block directory
			 * in hash order, dots included. */
			uint64_t *dot = &end.dot[de->d_name[1] ? 2 : 0];
			dot[0] = cookie;
			dot[1] = cookie = (uint64_t)de->d_off;
			continue;
		}
		nl = strlen(de->d_name);
		if (page && n >= PFS_LISTDIR_ITEMS_MAX) {
			end.flags = PFS_LS_MORE; /* this entry starts the next page */
			break;
		}
		/* A name the protocol cannot carry, an entry that cannot be
		 * looked up, or no room: the listing is not complete. */
		if (nl > PFS_NAME_MAX || !pfs_name_valid(de->d_name, nl) ||
		    n >= PFS_LISTDIR_ITEMS_MAX) {
			end.flags = 0;
			break;
		}
		mi = max_inline < data_left ? max_inline : data_left;
		if (python_unread(de->d_name, nl, has_pycache))
			mi = 0;
		if (cold && mi > 0)
			listing_ra_advance(&ra, obj->fd, pos, pos + LISTING_RA, mi);
		if (export_lookup_data(x, obj->fd, de->d_name, mi, &e, buf, &len, &iflags,
				       &cold) < 0) {
			end.flags = 0;
			break;
		}
		iflags |= xattrs_absent(x, dirfd(d), de->d_name, &e, xknown, names);
		name.len = (uint16_t)nl;
		memcpy(name.s, de->d_name, nl + 1);
		data.p = buf;
		data.len = (iflags & PFS_LD_DATA) ? len : 0;
		save = lim->len;
		int pr = put_item(lim, &name, &e, iflags, cookies, (uint64_t)de->d_off, &data);
		if (pr < 0 && page && data.len) {
			/* A page: the item without its content, if that fits. */
			lim->len = save;
			iflags &= ~(uint32_t)PFS_LD_DATA;
			data.len = 0;
			pr = put_item(lim, &name, &e, iflags, cookies, (uint64_t)de->d_off, &data);
		}
		if (pr < 0) {
			lim->len = save;
			if (page) {
				/* Full: this entry starts the next page. */
				end.flags = n > 0 ? PFS_LS_MORE : 0;
				break;
			}
			if (data_taken == 0 && data.len == 0) {
				end.flags = 0;
				break;
			}
			/* Out of room because of the contents taken (the
			 * budget's guess of the room the items need fell
			 * short): the names matter more, a complete listing
			 * answers misses. Start again with half the contents,
			 * the third time without. */
			rewinddir(d);
			pos = 0;
			n = 0;
			cookie = first;
			lim->len = start;
			data_left = ++restarts < 3 ? data_taken / 2 : 0;
			data_taken = 0;
			continue;
		}
		data_taken += data.len;
		data_left -= data.len;
		cookie = (uint64_t)de->d_off;
		n++;
	}
	if (end.flags == PFS_LS_MORE)
		end.cookie = cookie;
	if (ra.d)
		closedir(ra.d);
	free(names);
	free(buf);
	return end;
}

/* Serves the listing of key k from the cache into w: the session's
 * interest in the directory and in every listed entry registered first,
 * then the change sequence checked (see lscache_i.h). Returns 0 if it
 * did, -ENOENT if the listing must be built. */
static int listing_cached(struct xop *x, struct hent *obj, const struct lscache_key *k,
			  uint32_t max_bytes, unsigned how, struct pfs_wr *w)
{
	bool cookies = how & EXPORT_LS_COOKIES;
	size_t hdr = PFS_LS_HDR_SIZE(cookies);
	struct lsent *e = lscache_get(x->lc, k, pfs_mono_ms());
	const uint8_t *p;
	struct pfs_rd rd;
	size_t len;
	int ret = -ENOENT;

	if (!e)
		return -ENOENT;
	p = lsent_data(e, &len);
	/* A listing without contents is kept only complete: in any room it
	 * fits, it is what a listing built now would give. */
	if (len < hdr || len > max_bytes || w->cap - w->len < len)
		goto out_put;
	export_note(x, &obj->fh);
	pfs_rd_init(&rd, p + hdr, len - hdr);
	while (rd.left > 0) {
		struct pfs_name name;
		struct pfs_entry ent;
		struct pfs_bytes data;
		uint32_t fl;
		uint64_t cookie;
		if (!pfs_get_NAME(&rd, &name) || !pfs_get_ENTRY(&rd, &ent) || !pfs_get_U32(&rd, &fl) ||
		    (cookies && !pfs_get_U64(&rd, &cookie)) || !pfs_get_BYTES(&rd, &data))
			goto out_put;
		export_note(x, &ent.fh);
	}
	if (lscache_seq(x->lc) != lsent_seq(e))
		goto out_put;
	memcpy(w->buf + w->len, p, len);
	w->len += len;
	ret = 0;
out_put:
	lscache_put(x->lc, e);
	return ret;
}

int export_listdir(struct xop *x, struct hent *obj, uint32_t max_inline, uint32_t max_bytes,
		   const uint64_t *page, unsigned how, struct pfs_wr *w)
{
	struct stat dst;
	struct pfs_wr lim;
	struct lscache_key key;
	size_t at, at_cookie = 0, at_dots = 0;
	bool cookies = how & EXPORT_LS_COOKIES;
	uint64_t seq = 0;
	DIR *d = NULL;
	int ret;

	if (max_bytes > PFS_MAX_IO)
		max_bytes = PFS_MAX_IO;
	if (max_inline > PFS_INLINE_MAX)
		max_inline = PFS_INLINE_MAX;
	if (max_bytes < (page ? PFS_LISTDIR_PAGE_MIN : PFS_LS_HDR_SIZE(cookies)) ||
	    w->cap - w->len < max_bytes)
		return -EINVAL;
	/* Whole listings are kept to be served again, from the second time
	 * one is asked for (pages are not: a large directory listed in pages
	 * is rarely listed by many hosts). */
	bool keep = x->lc && !page;
	if (keep) {
		lscache_key_make(&key, &obj->fh, x->cr, x->squashed, max_inline, max_bytes, how);
		if (listing_cached(x, obj, &key, max_bytes, how, w) == 0) {
			lscache_hit(x->lc);
			return 0;
		}
		seq = lscache_seq(x->lc); /* before the directory is read */
		keep = lscache_miss(x->lc, &key);
	}
	ret = export_dir_open(obj->fd, &d);
	if (ret < 0)
		return ret;
	if (page && *page)
		seekdir(d, (long)*page);
	/* The contents' budget and what it skips matter only with contents
	 * (a listing for a walk comes without: two stats less each). */
	uint32_t data_left = 0;
	bool has_pycache = false;
	if (max_inline > 0) {
		data_left = listing_data_budget(
			fstat(dirfd(d), &dst) == 0 ? (uint64_t)dst.st_size : 0, max_bytes);
		if (page) /* a page stops at its limits rather than dropping contents */
			data_left = PFS_LISTDIR_DATA_MAX;
		has_pycache = fstatat(dirfd(d), "__pycache__", &dst, AT_SYMLINK_NOFOLLOW) == 0 &&
			      S_ISDIR(dst.st_mode);
	}
	/* Items go into a cursor limited to max_bytes, after the flags (and
	 * a page's cookie, and the dot cookies). */
	pfs_wr_init(&lim, w->buf + w->len, max_bytes);
	pfs_wr_skip(&lim, 4, &at);
	if (page)
		pfs_wr_skip(&lim, 8, &at_cookie);
	if (cookies)
		pfs_wr_skip(&lim, PFS_LS_DOTS_SIZE, &at_dots);
	struct page_end end = list_items(x, obj, d, max_inline, data_left, has_pycache,
					 page != NULL, page ? *page : 0, how, &lim);
	closedir(d);
	pfs_patch_U32(&lim, at, end.flags);
	/* (The room was checked: max_bytes holds the header.) */
	if (page)
		pfs_store_le64(lim.buf + at_cookie, end.cookie);
	for (int i = 0; cookies && i < 4; i++)
		pfs_store_le64(lim.buf + at_dots + 8 * (size_t)i, end.dot[i]);
	if (keep && (max_inline > 0 || (end.flags & PFS_LS_COMPLETE)))
		lscache_store(x->lc, &key, seq, pfs_mono_ms(), lim.buf, lim.len);
	w->len += lim.len;
	return 0;
}

int export_readdir(struct xop *x, struct hent *obj, uint64_t fid, uint64_t off,
		   uint32_t max_bytes, bool plus, struct pfs_wr *w)
{
	struct fid *f = session_fid_get(x->s, fid);
	struct pfs_wr lim;
	unsigned count = 0;
	uint8_t eof = 0;
	size_t at;
	int ret = 0;

	DIR *dir;

	if (!f) {
		ret = session_fid_reserve(x->s);
		if (ret < 0)
			return ret;
		int fd = export_dir_reopen(obj->fd);
		if (fd < 0) {
			session_fid_unreserve(x->s);
			return fd;
		}
		f = session_fid_install(x->s, fid, fd, true, O_RDONLY, false);
	}
	if (!f->is_dir) {
		session_fid_put(x->s, f);
		return -ENOTDIR;
	}
	if (max_bytes > PFS_READDIR_MAX)
		max_bytes = PFS_READDIR_MAX;
	if (max_bytes < 1 || w->cap - w->len < max_bytes) {
		session_fid_put(x->s, f);
		return -EINVAL;
	}
	/* Entries go into a cursor limited to max_bytes, after eof. */
	pfs_wr_init(&lim, w->buf + w->len, max_bytes);
	pfs_wr_skip(&lim, 1, &at);

	pthread_mutex_lock(&f->dmu);
	/* A stream for this call over the fid's open directory (a dup
	 * shares its offset, which seekdir sets): entries from off on. */
	int sfd = fcntl(f->fd, F_DUPFD_CLOEXEC, 0);
	dir = sfd < 0 ? NULL : fdopendir(sfd);
	if (!dir) {
		ret = -errno;
		if (sfd >= 0)
			close(sfd);
		pthread_mutex_unlock(&f->dmu);
		session_fid_put(x->s, f);
		return ret;
	}
	if (off == 0)
		rewinddir(dir);
	else
		seekdir(dir, (long)off);
	f->pos = off;
	for (;;) {
		struct pfs_dirent de;
		struct dirent *d;
		size_t nl;

		errno = 0;
		d = readdir(dir);
		if (!d) {
			if (errno) {
				ret = -errno;
				break;
			}
			eof = 1;
			break;
		}
		nl = strlen(d->d_name);
		if (nl > PFS_NAME_MAX)
			continue;
		memset(&de.e, 0, sizeof(de.e));
		memcpy(de.name.s, d->d_name, nl + 1);
		de.name.len = (uint16_t)nl;
		de.next_off = (uint64_t)d->d_off;
		de.ino = d->d_ino;
		de.mode = d->d_type == DT_UNKNOWN ? 0 : DTTOIF(d->d_type);
		de.flags = 0;
		if (plus && !export_dot_or_dotdot(d->d_name) &&
		    export_entry_at(x, f->fd, d->d_name, &de.e) == 0) {
			de.flags = PFS_DE_HAS_ENTRY;
			de.mode = de.e.attr.mode;
		}
		ret = pfs_enc_dirent(&lim, &de);
		if (ret == -EINVAL) { /* a name the protocol cannot carry */
			ret = 0;
			f->pos = de.next_off;
			continue;
		}
		if (ret < 0) {
			/* Full: the next call starts with this entry. */
			ret = count == 0 ? -EINVAL : 0;
			break;
		}
		f->pos = de.next_off;
		count++;
	}
	closedir(dir);
	pthread_mutex_unlock(&f->dmu);
	session_fid_put(x->s, f);
	if (ret < 0 && count == 0)
		return ret;
	pfs_patch_U8(&lim, at, eof);
	w->len += lim.len;
	return 0;
}
