/* listing.c: directory listings (see listing_i.h). */
#include "listing_i.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "names_i.h"
#include "podfs/clock.h"
#include "podfs/htab.h"
#include "podfs/le.h"

/* One item of a listing: where it starts in the payload. */
struct litem {
	struct hnode hn; /* listing index, by name_hash */
	uint32_t off;
};

struct listing {
	struct listing_info li;
	uint8_t *buf;             /* the LISTDIR reply payload */
	size_t len;
	size_t hdr;               /* its header's bytes: the items start there */
	uint64_t dots[4];         /* li.cookies: where "." and ".." are (wire_list.h) */
	struct litem *items;      /* n of cap, in payload order */
	size_t n, cap;
	struct htab index;        /* items by name */
	size_t ngone;             /* items removed by listing_remove */
	bool uncookied;           /* listing_add put in an item without a cookie */
	size_t next_upto;         /* items looked at by listing_subdirs_next */
	_Atomic int64_t *total;   /* the table's listing_total */
	int64_t bytes;            /* counted in *total */
};

#define MIN_ITEMS 16

/* The bytes a listing of len payload bytes with room for cap items
 * counts against LISTING_TOTAL_MAX: the payload, the items and about one
 * index bucket per item. */
static int64_t cost(size_t len, size_t cap)
{
	return (int64_t)(len + cap * (sizeof(struct litem) + sizeof(struct hnode *)));
}

void listing_free(struct listing *ls)
{
	if (!ls)
		return;
	atomic_fetch_sub(ls->total, ls->bytes);
	htab_fini(&ls->index);
	free(ls->buf);
	free(ls->items);
	free(ls);
}

/* Reads the item at rd, which has a cookie if ck (wire_list.h; *cookie
 * 0 if not): 1 = got one, 0 = end, -EBADMSG. */
static int listing_item(struct pfs_rd *rd, bool ck, struct pfs_name *name, struct pfs_entry *e,
			uint32_t *flags, uint64_t *cookie, struct pfs_bytes *data)
{
	uint64_t unused;

	if (!cookie)
		cookie = &unused;
	*cookie = 0;
	if (rd->left == 0)
		return 0;
	if (!pfs_get_NAME(rd, name) || !pfs_get_ENTRY(rd, e) || !pfs_get_U32(rd, flags) ||
	    (ck && !pfs_get_U64(rd, cookie)) || !pfs_get_BYTES(rd, data))
		return -EBADMSG;
	return 1;
}

/* Adds the item at offset off, named name[nl], to ls's index. Room for it
 * is there (n < cap). */
static void index_add(struct listing *ls, const char *name, size_t nl, uint32_t off)
{
	struct litem *it = &ls->items[ls->n++];

	it->off = off;
	htab_insert(&ls->index, &it->hn, name_hash(name, nl));
}

/* Whether the item at off was removed by this client (INODE_LS_GONE). */
static bool item_gone(const struct listing *ls, uint32_t off)
{
	struct pfs_rd rd;
	struct pfs_name n;
	struct pfs_entry e;
	struct pfs_bytes d;
	uint32_t fl;

	pfs_rd_init(&rd, ls->buf + off, ls->len - off);
	return listing_item(&rd, ls->li.cookies, &n, &e, &fl, NULL, &d) == 1 &&
	       (fl & INODE_LS_GONE);
}

/* Builds the index again, after the items moved (each keeps its hash;
 * removed items stay out). */
static void index_rebuild(struct listing *ls)
{
	htab_fini(&ls->index);
	htab_init(&ls->index);
	for (size_t i = 0; i < ls->n; i++)
		if (!ls->ngone || !item_gone(ls, ls->items[i].off))
			htab_insert(&ls->index, &ls->items[i].hn, ls->items[i].hn.hash);
}

/* Puts the items of ls->buf from its header up to end into the index. */
static void index_fill(struct listing *ls, size_t end)
{
	struct pfs_rd rd;

	pfs_rd_init(&rd, ls->buf + ls->hdr, end - ls->hdr);
	for (;;) {
		struct pfs_name n;
		struct pfs_entry e;
		struct pfs_bytes d;
		uint32_t fl, off = (uint32_t)(rd.p - ls->buf);
		if (listing_item(&rd, ls->li.cookies, &n, &e, &fl, NULL, &d) != 1)
			break;
		index_add(ls, n.s, n.len, off);
	}
}

/* The item named name[nl] in ls, or NULL. An item starts with its name
 * (a 16-bit length, then the bytes), checked when the item was indexed:
 * compared here as it lies. */
static const struct litem *item_named(const struct listing *ls, const char *name, size_t nl)
{
	uint64_t h = name_hash(name, nl);

	for (struct hnode *hn = htab_first(&ls->index, h); hn; hn = htab_next(hn, h)) {
		const struct litem *it = container_of(hn, struct litem, hn);
		const uint8_t *p = ls->buf + it->off;
		size_t left = ls->len - it->off;
		if (left >= 2 && pfs_load_le16(p) == nl && left - 2 >= nl &&
		    memcmp(p + 2, name, nl) == 0)
			return it;
	}
	return NULL;
}

/* The item named name in ls: 1 (fills the out-parameters), or 0. Only
 * the rest of the item that matches is decoded. */
static int listing_lookup(const struct listing *ls, const char *name, size_t nl,
			  struct pfs_entry *e, uint32_t *flags, struct pfs_bytes *data)
{
	const struct litem *it = item_named(ls, name, nl);
	struct pfs_rd rd;

	if (!it)
		return 0;
	uint64_t cookie;
	pfs_rd_init(&rd, ls->buf + it->off + 2 + nl, ls->len - it->off - 2 - nl);
	return pfs_get_ENTRY(&rd, e) && pfs_get_U32(&rd, flags) &&
	       (!ls->li.cookies || pfs_get_U64(&rd, &cookie)) && pfs_get_BYTES(&rd, data);
}

/* No listing of dir is fetched for LISTING_QUIET_NS from now. The
 * caller holds dir->lock. */
static void hold_off_locked(struct inode *dir)
{
	dir->list_after = pfs_mono_ns() + LISTING_QUIET_NS;
}

int listing_set(struct inode_table *t, struct inode *dir, uint8_t *buf, size_t len,
		const struct listing_info *li)
{
	struct pfs_name name;
	struct pfs_entry e;
	struct pfs_bytes data;
	uint32_t fl;
	struct pfs_rd rd;
	size_t n = 0, hdr = PFS_LS_HDR_SIZE(li->cookies);
	uint64_t dots[4] = { 0, 0, 0, 0 };
	int r;

	if (len < hdr || len > UINT32_MAX - 1)
		goto bad;
	pfs_rd_init(&rd, buf + 4, len - 4);
	for (int i = 0; li->cookies && i < 4; i++)
		if (!pfs_get_U64(&rd, &dots[i]))
			goto bad;
	while ((r = listing_item(&rd, li->cookies, &name, &e, &fl, NULL, &data)) == 1)
		n++;
	if (r < 0)
		goto bad;
	struct listing *ls = calloc(1, sizeof(*ls));
	size_t cap = n < MIN_ITEMS ? MIN_ITEMS : n;
	if (!ls || !(ls->items = malloc(cap * sizeof(*ls->items)))) {
		free(ls);
		free(buf);
		return -ENOMEM;
	}
	htab_init(&ls->index);
	ls->li = *li;
	ls->buf = buf;
	ls->len = len;
	ls->hdr = hdr;
	memcpy(ls->dots, dots, sizeof(dots));
	ls->cap = cap;
	ls->total = &t->listing_total;
	ls->bytes = cost(len, cap);
	if (atomic_fetch_add(&t->listing_total, ls->bytes) + ls->bytes > LISTING_TOTAL_MAX) {
		listing_free(ls);
		return -ENOSPC;
	}
	index_fill(ls, len);
	pthread_mutex_lock(&dir->lock);
	if (dir->ls_gen != li->ns) {
		/* Changed here meanwhile: the directory is busy with this
		 * client's changes, so none is fetched for a while. */
		hold_off_locked(dir);
		pthread_mutex_unlock(&dir->lock);
		listing_free(ls);
		return -ESTALE;
	}
	struct listing *old = dir->listing;
	dir->listing = ls;
	dir->cold_lookups = 0;
	pthread_mutex_unlock(&dir->lock);
	listing_free(old);
	return 0;
bad:
	free(buf);
	return -EBADMSG;
}

int listing_find(struct inode *dir, const char *name, struct pfs_entry *e, uint8_t **data,
		 uint32_t *dlen, uint32_t *flags, struct listing_info *li)
{
	size_t nl = strlen(name);
	int ret = LS_NONE;

	*data = NULL;
	*dlen = 0;
	*flags = 0;
	pthread_mutex_lock(&dir->lock);
	struct listing *ls = dir->listing;
	if (!ls)
		goto out;
	*li = ls->li;
	ret = LS_ABSENT;
	struct pfs_bytes d;
	uint32_t fl;
	if (listing_lookup(ls, name, nl, e, &fl, &d)) {
		ret = LS_PRESENT;
		*flags = fl;
		if ((fl & PFS_LD_DATA) && S_ISREG(e->attr.mode) && d.len == e->attr.size &&
		    (*data = malloc(d.len ? d.len : 1)) != NULL) {
			memcpy(*data, d.p, d.len);
			*dlen = d.len;
		}
	}
out:
	pthread_mutex_unlock(&dir->lock);
	return ret;
}

int listing_add(struct inode *dir, const char *name, const struct pfs_entry *e)
{
	size_t nl = strlen(name), wcap = 64 + nl + sizeof(struct pfs_entry);
	struct pfs_name pn;
	struct pfs_bytes none = { 0 };
	uint32_t flags = 0;
	struct pfs_wr w;
	int ret = -ENOENT;

	if (nl > PFS_NAME_MAX)
		return -ENAMETOOLONG;
	pn.len = (uint16_t)nl;
	memcpy(pn.s, name, nl + 1);
	pfs_wr_init(&w, malloc(wcap), wcap);
	if (!w.buf)
		return -ENOMEM;
	pthread_mutex_lock(&dir->lock);
	struct listing *ls = dir->listing;
	if (!ls) {
		/* A listing asked for before is not kept; one set after has
		 * the name. */
		dir->ls_gen++;
		goto out;
	}
	/* Its cookie is not known (0): readdir is no longer answered from
	 * this listing (listing_readdir). */
	uint64_t no_cookie = 0;
	ret = -EINVAL;
	if (pfs_put_NAME(&w, &pn) < 0 || pfs_put_ENTRY(&w, e) < 0 || pfs_put_U32(&w, &flags) < 0 ||
	    (ls->li.cookies && pfs_put_U64(&w, &no_cookie) < 0) || pfs_put_BYTES(&w, &none) < 0)
		goto out;
	struct pfs_entry pe;
	struct pfs_bytes d;
	uint32_t fl;
	ret = -EEXIST;
	if (listing_lookup(ls, name, nl, &pe, &fl, &d))
		goto out;
	ret = -ENOMEM;
	size_t cap = ls->cap;
	while (cap < ls->n + 1)
		cap *= 2;
	int64_t more = cost(ls->len + w.len, cap) - ls->bytes;
	if (ls->len + w.len > UINT32_MAX - 1 ||
	    atomic_fetch_add(ls->total, more) + more > LISTING_TOTAL_MAX) {
		atomic_fetch_sub(ls->total, more);
		goto out;
	}
	uint8_t *buf = realloc(ls->buf, ls->len + w.len);
	if (buf)
		ls->buf = buf;
	struct litem *items = buf && cap != ls->cap ? realloc(ls->items, cap * sizeof(*items))
						       : ls->items;
	if (!buf || !items) {
		atomic_fetch_sub(ls->total, more);
		goto out;
	}
	ls->bytes += more;
	memcpy(ls->buf + ls->len, w.buf, w.len);
	uint32_t off = (uint32_t)ls->len;
	ls->len += w.len;
	if (cap != ls->cap) {
		/* The items moved: index them again. */
		ls->items = items;
		ls->cap = cap;
		index_rebuild(ls);
	}
	index_add(ls, name, nl, off);
	ls->uncookied = true;
	dir->ls_gen++; /* a listing asked for before this change is not kept */
	ret = 0;
out:
	pthread_mutex_unlock(&dir->lock);
	free(w.buf);
	return ret;
}

void listing_changing(struct inode *dir)
{
	pthread_mutex_lock(&dir->lock);
	dir->ls_gen++;
	pthread_mutex_unlock(&dir->lock);
}

/* Ors flag into the flags of ls's item it, if it is named name[nl] (name
 * NULL: any name) and has the handle fh (NULL: any). Returns whether it
 * did. */
static bool item_flag(struct listing *ls, const struct litem *it, const char *name, size_t nl,
		      const struct pfs_fh *fh, uint32_t flag)
{
	struct pfs_rd rd;
	struct pfs_name n;
	struct pfs_entry e;
	struct pfs_wr w;
	uint32_t fl;

	pfs_rd_init(&rd, ls->buf + it->off, ls->len - it->off);
	if (!pfs_get_NAME(&rd, &n) || (name && (n.len != nl || memcmp(n.s, name, nl) != 0)) ||
	    !pfs_get_ENTRY(&rd, &e) || (fh && !pfs_fh_equal(&e.fh, fh)))
		return false;
	size_t foff = (size_t)(rd.p - ls->buf);
	if (!pfs_get_U32(&rd, &fl))
		return false;
	fl |= flag;
	pfs_wr_init(&w, ls->buf + foff, 4);
	(void)pfs_put_U32(&w, &fl);
	return true;
}

int listing_remove(struct inode *dir, const char *name)
{
	size_t nl = strlen(name);
	uint64_t h = name_hash(name, nl);
	int ret = -ENOENT;

	pthread_mutex_lock(&dir->lock);
	struct listing *ls = dir->listing;
	dir->ls_gen++; /* a listing asked for before the change is not kept */
	if (!ls)
		goto out;
	for (struct hnode *hn = htab_first(&ls->index, h); hn; hn = htab_next(hn, h)) {
		struct litem *it = container_of(hn, struct litem, hn);
		if (item_flag(ls, it, name, nl, NULL, INODE_LS_GONE)) {
			htab_remove(&ls->index, &it->hn);
			ls->ngone++;
			ret = 0;
			break;
		}
	}
out:
	pthread_mutex_unlock(&dir->lock);
	return ret;
}

void listing_mark(struct inode *dir, uint64_t nh, const struct pfs_fh *fh)
{
	struct listing *ls = dir->listing;

	/* A listing asked for before the change is not kept (which holds
	 * listings off: listing_set). One asked for after it may come at
	 * once: its item of the object is not used while the change is
	 * pending or after it (inode_listed_stale). */
	dir->ls_gen++;
	if (!ls)
		return;
	for (struct hnode *hn = htab_first(&ls->index, nh); hn; hn = htab_next(hn, nh))
		(void)item_flag(ls, container_of(hn, struct litem, hn), NULL, 0, fh, INODE_LS_STALE);
}

/* Takes dir's listing away (and frees it): with no_list, for good; with
 * quiet, none is fetched for LISTING_QUIET_NS; with gen, a listing asked
 * for before is not kept either. */
static void take(struct inode *dir, bool no_list, bool quiet, bool gen)
{
	pthread_mutex_lock(&dir->lock);
	struct listing *ls = dir->listing;
	dir->listing = NULL;
	if (no_list)
		dir->no_list = true;
	if (quiet)
		hold_off_locked(dir);
	if (gen)
		dir->ls_gen++;
	pthread_mutex_unlock(&dir->lock);
	listing_free(ls);
}

void listing_drop(struct inode *dir)
{
	take(dir, true, false, false);
}

void listing_stale(struct inode *dir)
{
	take(dir, false, true, false);
}

void listing_touch(struct inode *dir)
{
	take(dir, false, true, true);
}

uint64_t listing_gen(struct inode *dir)
{
	pthread_mutex_lock(&dir->lock);
	uint64_t g = dir->ls_gen;
	pthread_mutex_unlock(&dir->lock);
	return g;
}

/* Reads the item at rd into *e: 1 if it is a subdirectory to fetch
 * ahead (at most max_size bytes, not marked by an own change), 0 if not,
 * -1 at the end (or a malformed item). */
static int subdir_item(struct pfs_rd *rd, bool ck, uint64_t max_size, struct pfs_entry *e)
{
	struct pfs_name name;
	struct pfs_bytes data;
	uint32_t fl;

	if (listing_item(rd, ck, &name, e, &fl, NULL, &data) != 1)
		return -1;
	return S_ISDIR(e->attr.mode) && e->attr.size <= max_size &&
	       !(fl & (INODE_LS_STALE | INODE_LS_GONE));
}

size_t listing_subdirs(struct inode *dir, uint64_t max_size, struct pfs_entry *out, size_t max)
{
	struct pfs_rd rd;
	size_t n = 0;

	pthread_mutex_lock(&dir->lock);
	struct listing *ls = dir->listing;
	if (ls) {
		pfs_rd_init(&rd, ls->buf + ls->hdr, ls->len - ls->hdr);
		int r;
		while (n < max && (r = subdir_item(&rd, ls->li.cookies, max_size, &out[n])) >= 0)
			n += (size_t)r;
	}
	pthread_mutex_unlock(&dir->lock);
	return n;
}

size_t listing_subdirs_next(struct inode *dir, const char *name, size_t span, uint64_t max_size,
			    struct pfs_entry *out, size_t max)
{
	struct pfs_rd rd;
	size_t n = 0;

	pthread_mutex_lock(&dir->lock);
	struct listing *ls = dir->listing;
	const struct litem *at = ls ? item_named(ls, name, strlen(name)) : NULL;
	if (at) {
		size_t from = (size_t)(at - ls->items) + 1, end = from + span;
		if (from < ls->next_upto)
			from = ls->next_upto;
		if (end > ls->n)
			end = ls->n;
		for (size_t i = from; i < end && n < max; i++) {
			uint32_t off = ls->items[i].off;
			pfs_rd_init(&rd, ls->buf + off, ls->len - off);
			if (subdir_item(&rd, ls->li.cookies, max_size, &out[n]) > 0)
				n++;
			ls->next_upto = i + 1;
		}
	}
	pthread_mutex_unlock(&dir->lock);
	return n;
}

int64_t listing_bytes(struct inode_table *t)
{
	return atomic_load(&t->listing_total);
}

/* Whether dir may be listed now (of at most max_size bytes). Called with
 * dir->lock. */
static bool may_fetch(struct inode *dir, uint64_t max_size)
{
	return !dir->no_list && !dir->listing && !dir->list_fetching && S_ISDIR(dir->attr.mode) &&
	       dir->attr.size <= max_size && pfs_mono_ns() >= dir->list_after;
}

bool listing_may_fetch(struct inode *dir, uint64_t max_size)
{
	pthread_mutex_lock(&dir->lock);
	bool ok = may_fetch(dir, max_size);
	pthread_mutex_unlock(&dir->lock);
	return ok;
}

bool listing_missing(struct inode *dir)
{
	pthread_mutex_lock(&dir->lock);
	bool ok = !dir->no_list && !dir->listing && S_ISDIR(dir->attr.mode);
	pthread_mutex_unlock(&dir->lock);
	return ok;
}

bool listing_fetch_begin(struct inode *dir, uint64_t max_size, uint32_t after,
			 uint32_t per_bytes)
{
	pthread_mutex_lock(&dir->lock);
	bool ok = may_fetch(dir, max_size);
	uint64_t need = after;
	if (per_bytes && dir->attr.size / per_bytes > need)
		need = dir->attr.size / per_bytes;
	if (ok && need && ++dir->cold_lookups < need)
		ok = false;
	if (ok)
		dir->list_fetching = true;
	pthread_mutex_unlock(&dir->lock);
	return ok;
}

void listing_fetch_end(struct inode *dir)
{
	pthread_mutex_lock(&dir->lock);
	dir->list_fetching = false;
	dir->cold_lookups = 0;
	pthread_mutex_unlock(&dir->lock);
}

/* Appends one synthesized READDIR entry. */
static int put_dirent(struct pfs_wr *w, const char *name, size_t nl, uint64_t cookie,
		      const struct pfs_entry *e, uint64_t ino, uint32_t mode)
{
	struct pfs_dirent de;

	memset(&de, 0, sizeof(de));
	de.name.len = (uint16_t)nl;
	memcpy(de.name.s, name, nl);
	de.name.s[nl] = '\0';
	de.next_off = cookie;
	de.ino = ino;
	de.mode = mode;
	if (e) {
		de.flags = PFS_DE_HAS_ENTRY;
		de.e = *e;
	}
	return pfs_enc_dirent(w, &de);
}

/* Writes the dots that start at cookie *at into w, in turn ("." and ".."
 * may follow each other), moving *at past them; done[] marks those
 * written, and fls (if not NULL) gets flags 0 for each. */
static int put_dots(struct pfs_wr *w, const struct listing *ls, struct inode *dir,
		    uint64_t *at, bool done[2], uint32_t *fls, size_t *shown)
{
	for (int k = 0; k < 2; k++) {
		if (done[k] || ls->dots[2 * k] != *at)
			continue;
		if (put_dirent(w, k ? ".." : ".", (size_t)k + 1, ls->dots[2 * k + 1], NULL,
			       k ? dir->parent_ino : dir->attr.ino, S_IFDIR) < 0)
			return -EBADMSG;
		if (fls)
			fls[*shown] = 0;
		++*shown;
		done[k] = true;
		*at = ls->dots[2 * k + 1];
		k = -1; /* the other one may start there */
	}
	return 0;
}

int listing_readdir(struct inode_table *t, struct inode *dir, uint8_t **buf, size_t *len,
		    uint32_t **iflags, struct listing_info *li, uint64_t *parent_seq)
{
	uint32_t *fls = NULL;
	size_t i = 0, shown = 0;
	struct pfs_name name;
	struct pfs_entry e;
	struct pfs_bytes data;
	struct pfs_wr w;
	struct pfs_rd rd;
	uint64_t cookie, at = 0;
	uint32_t fl;
	uint8_t eof = 1;
	bool done[2] = { false, false };
	int r, ret = -ENOENT;

	pthread_mutex_lock(&dir->lock);
	struct listing *ls = dir->listing;
	/* Only with the server's own cookies (wire_list.h): a reading that
	 * goes on at one in another open (the kernel's readdir cache, shared
	 * by opens, lost a page or was dropped by a push) goes on at the
	 * server, where it left off. */
	if (!ls || !ls->li.cookies || ls->uncookied || !ls->dots[1] || !ls->dots[3] ||
	    !dir->parent_ino || dir->parent_renames != atomic_load(&t->renames))
		goto out;
	*li = ls->li;
	*parent_seq = dir->parent_seq;
	/* Each item becomes a dirent at most 21 bytes longer (cookie, ino,
	 * mode, flags minus the item's flags and data length), and the
	 * two dots. */
	size_t cap = 1 + ls->len + 21 * ls->n + 2 * 32;
	uint8_t *p = malloc(cap);
	if (!p) {
		ret = -ENOMEM;
		goto out;
	}
	pfs_wr_init(&w, p, cap);
	if (iflags && !(fls = malloc((ls->n + 2) * sizeof(*fls)))) {
		free(p);
		ret = -ENOMEM;
		goto out;
	}
	ret = -EBADMSG;
	if (pfs_put_U8(&w, &eof) < 0 || put_dots(&w, ls, dir, &at, done, fls, &shown) < 0)
		goto out_free;
	pfs_rd_init(&rd, ls->buf + ls->hdr, ls->len - ls->hdr);
	while ((r = listing_item(&rd, true, &name, &e, &fl, &cookie, &data)) == 1) {
		if (i >= ls->n)
			goto out_free;
		i++;
		/* One without a cookie (as this client's own, uncookied):
		 * the server is asked. */
		if (!cookie) {
			ret = -ENOENT;
			goto out_free;
		}
		/* A name this client removed is left out (the server's
		 * stream no longer has it either). */
		if (!(fl & INODE_LS_GONE)) {
			if (put_dirent(&w, name.s, name.len, cookie,
				       (fl & INODE_LS_STALE) ? NULL : &e, e.attr.ino,
				       e.attr.mode) < 0)
				goto out_free;
			if (fls)
				fls[shown] = fl;
			shown++;
		}
		at = cookie;
		if (put_dots(&w, ls, dir, &at, done, fls, &shown) < 0)
			goto out_free;
	}
	if (r < 0)
		goto out_free;
	if (!done[0] || !done[1]) { /* where the server said they were: no */
		ret = -ENOENT;
		goto out_free;
	}
	*buf = w.buf;
	*len = w.len;
	if (iflags)
		*iflags = fls;
	ret = 0;
	goto out;
out_free:
	free(fls);
	free(w.buf);
out:
	pthread_mutex_unlock(&dir->lock);
	return ret;
}
