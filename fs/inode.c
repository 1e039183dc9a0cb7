/* inode.c: the client inode table (see inode_i.h). */
#include "inode_i.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fhmap_i.h"
#include "listing_i.h"
#include "names_i.h"
#include "podfs/clock.h"
#include "podfs/hash.h"

static uint64_t fh_hash(const struct pfs_fh *fh)
{
	return pfs_hash_words(fh->data, fh->len, 0);
}

static struct inode *inode_alloc(const struct pfs_entry *e)
{
	struct inode *ip = calloc(1, sizeof(*ip));
	if (!ip)
		return NULL;
	pthread_mutex_init(&ip->lock, NULL);
	ip->fh = e->fh;
	ip->attr = e->attr;
	ip->is_dir = S_ISDIR(e->attr.mode);
	ip->nodeid = (fuse_ino_t)(uintptr_t)ip;
	return ip;
}

/* Frees ip's inline copy. Called with ip->lock (or when unshared). */
static void inline_free(struct inode *ip)
{
	if (ip->inline_data) {
		atomic_fetch_sub(ip->inline_total, (int64_t)ip->inline_len);
		free(ip->inline_data);
		ip->inline_data = NULL;
	}
}

static void inode_destroy(struct inode *ip)
{
	free(ip->name);
	listing_free(ip->listing);
	nameset_free(ip->names);
	inline_free(ip);
	pthread_mutex_destroy(&ip->lock);
	free(ip);
}

static struct inode *find_fh(struct inode_table *t, const struct pfs_fh *fh)
{
	uint64_t hash = fh_hash(fh);

	for (struct hnode *n = htab_first(&t->tab, hash); n; n = htab_next(n, hash)) {
		struct inode *ip = container_of(n, struct inode, hn);
		if (pfs_fh_equal(&ip->fh, fh))
			return ip;
	}
	return NULL;
}

/* The inode of fh, or NULL: fh may also be the server's new handle of an
 * inode the table holds under its old one (fhmap_i.h). Called with the
 * table lock. */
static struct inode *find(struct inode_table *t, const struct pfs_fh *fh)
{
	struct inode *ip = find_fh(t, fh);
	struct pfs_fh old;

	if (!ip && t->fm && fhmap_rev(t->fm, fh, &old))
		ip = find_fh(t, &old);
	return ip;
}

int inode_table_new(const struct pfs_entry *root, struct inode_table **out)
{
	struct inode_table *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->root = inode_alloc(root);
	if (!t->root) {
		free(t);
		return -ENOMEM;
	}
	t->root->nodeid = FUSE_ROOT_ID;
	t->root->inline_total = &t->inline_total;
	t->root->nlookup = 1;
	pthread_mutex_init(&t->lock, NULL);
	htab_init(&t->tab);
	htab_insert(&t->tab, &t->root->hn, fh_hash(&root->fh));
	*out = t;
	return 0;
}

void inode_table_free(struct inode_table *t)
{
	if (!t)
		return;
	for (struct hnode *n; (n = htab_pop(&t->tab));)
		inode_destroy(container_of(n, struct inode, hn));
	htab_fini(&t->tab);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

struct inode *inode_get(struct inode_table *t, fuse_ino_t ino)
{
	if (ino == FUSE_ROOT_ID)
		return t->root;
	return (struct inode *)(uintptr_t)ino;
}

/* Finds or makes the inode of e->fh (a new one takes e->attr) and adds
 * one lookup; *made (if given) says whether it was made. NULL on ENOMEM. */
static struct inode *ref_entry(struct inode_table *t, const struct pfs_entry *e, bool *made)
{
	struct inode *ip;

	pthread_mutex_lock(&t->lock);
	ip = find(t, &e->fh);
	if (made)
		*made = !ip;
	if (!ip) {
		ip = inode_alloc(e);
		if (!ip) {
			pthread_mutex_unlock(&t->lock);
			return NULL;
		}
		ip->inline_total = &t->inline_total;
		htab_insert(&t->tab, &ip->hn, fh_hash(&e->fh));
	}
	ip->nlookup++;
	pthread_mutex_unlock(&t->lock);
	return ip;
}

struct inode *inode_ref(struct inode_table *t, const struct pfs_entry *e, bool *made,
			uint64_t seq)
{
	struct inode *ip = ref_entry(t, e, made);

	if (ip)
		inode_set_attr(ip, &e->attr, seq);
	return ip;
}

struct inode *inode_hold_entry(struct inode_table *t, const struct pfs_entry *e)
{
	return ref_entry(t, e, NULL);
}

void inode_hold(struct inode_table *t, struct inode *ip)
{
	pthread_mutex_lock(&t->lock);
	ip->nlookup++;
	pthread_mutex_unlock(&t->lock);
}

struct inode *inode_hold_fh(struct inode_table *t, const struct pfs_fh *fh)
{
	pthread_mutex_lock(&t->lock);
	struct inode *ip = find(t, fh);
	if (ip)
		ip->nlookup++;
	pthread_mutex_unlock(&t->lock);
	return ip;
}

struct unlist {
	uint64_t nh;
	const struct pfs_fh *fh;
};

static void unlist_mark_cb(void *arg, struct inode *dir)
{
	const struct unlist *f = arg;

	pthread_mutex_lock(&dir->lock);
	listing_mark(dir, f->nh, f->fh);
	pthread_mutex_unlock(&dir->lock);
}

static void unlist_touch_cb(void *arg, struct inode *dir)
{
	(void)arg;
	listing_touch(dir);
}

struct inode_listed inode_listed_at_locked(const struct inode *ip)
{
	return (struct inode_listed){
		.ph = ip->parent_hash,
		.nh = ip->name_hash,
		.all = !S_ISDIR(ip->attr.mode) && ip->attr.nlink > 1,
	};
}

void inode_unlist(struct inode_table *t, const struct pfs_fh *fh, const struct inode_listed *where)
{
	if (where->all) {
		inode_each_dir(t, NULL, unlist_touch_cb, NULL);
	} else if (where->ph) {
		struct unlist f = { where->nh, fh };
		uint64_t ph = where->ph;
		inode_each_dir(t, &ph, unlist_mark_cb, &f);
	}
}

void inode_forget(struct inode_table *t, struct inode *ip, uint64_t n)
{
	pthread_mutex_lock(&t->lock);
	ip->nlookup = n > ip->nlookup ? 0 : ip->nlookup - n;
	if (ip->nlookup == 0 && ip != t->root) {
		htab_remove(&t->tab, &ip->hn);
		pthread_mutex_unlock(&t->lock);
		if (t->fm)
			fhmap_del(t->fm, &ip->fh);
		if (t->forget_cb) {
			pthread_mutex_lock(&ip->lock);
			struct inode_listed where = inode_listed_at_locked(ip);
			pthread_mutex_unlock(&ip->lock);
			t->forget_cb(t->forget_arg, &ip->fh, &where);
		}
		inode_destroy(ip);
		return;
	}
	pthread_mutex_unlock(&t->lock);
}

/* A malloc'd array of one elem-byte slot per inode (root included),
 * each filled by fill under the table lock and the inode's lock: the
 * snapshots below. Returns 0 with *out and *n, or -ENOMEM. */
static int snapshot(struct inode_table *t, size_t elem, void (*fill)(void *slot, struct inode *ip),
		    void **out, size_t *n)
{
	pthread_mutex_lock(&t->lock);
	size_t cap = t->tab.n, k = 0, pos;
	char *v = calloc(cap ? cap : 1, elem);
	if (!v) {
		pthread_mutex_unlock(&t->lock);
		return -ENOMEM;
	}
	for (struct hnode *hn = htab_iter(&t->tab, &pos, NULL); hn && k < cap;
	     hn = htab_iter(&t->tab, &pos, hn)) {
		struct inode *ip = container_of(hn, struct inode, hn);
		pthread_mutex_lock(&ip->lock);
		fill(v + k * elem, ip);
		pthread_mutex_unlock(&ip->lock);
		k++;
	}
	pthread_mutex_unlock(&t->lock);
	*out = v;
	*n = k;
	return 0;
}

static void fill_named(void *slot, struct inode *ip)
{
	struct inode_named *v = slot;
	v->fh = ip->fh;
	v->hash = ip->hn.hash;
	v->root = ip->nodeid == FUSE_ROOT_ID;
	v->attr = ip->attr;
	v->parent_hash = ip->parent_hash;
	v->name = ip->name ? strdup(ip->name) : NULL;
}

int inode_snapshot_named(struct inode_table *t, struct inode_named **out, size_t *n)
{
	void *v;
	int rc = snapshot(t, sizeof(**out), fill_named, &v, n);
	if (rc == 0)
		*out = v;
	return rc;
}

void inode_named_free(struct inode_named *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i].name);
	free(v);
}

void inode_table_on_forget(struct inode_table *t,
			   void (*cb)(void *arg, const struct pfs_fh *fh,
				      const struct inode_listed *where),
			   void *arg)
{
	t->forget_cb = cb;
	t->forget_arg = arg;
}

static void fill_snap(void *slot, struct inode *ip)
{
	struct inode_snap *v = slot;
	v->nodeid = ip->nodeid;
	v->fh = ip->fh;
	v->attr = ip->attr;
}

int inode_snapshot(struct inode_table *t, struct inode_snap **out, size_t *n)
{
	void *v;
	int rc = snapshot(t, sizeof(**out), fill_snap, &v, n);
	if (rc == 0)
		*out = v;
	return rc;
}

bool inode_mark_changed(struct inode_table *t, const struct pfs_fh *fh, const struct pfs_attr *a,
			fuse_ino_t *nodeid, struct nameset **names)
{
	*names = NULL;
	pthread_mutex_lock(&t->lock);
	struct inode *ip = find(t, fh);
	if (ip) {
		*nodeid = ip->nodeid;
		pthread_mutex_lock(&ip->lock);
		if (a)
			ip->attr = *a;
		ip->ver_unknown = !a;
		inode_pages_gone_locked(ip);
		inline_free(ip);
		ip->nocaps_until = 0;
		ip->noxattr = 0;
		*names = ip->names;
		ip->names = NULL;
		pthread_mutex_unlock(&ip->lock);
	}
	pthread_mutex_unlock(&t->lock);
	return ip != NULL;
}

void inode_note_name(struct inode *dir, const char *name)
{
	pthread_mutex_lock(&dir->lock);
	(void)nameset_add(&dir->names, name, strlen(name));
	pthread_mutex_unlock(&dir->lock);
}

void inode_set_inline(struct inode *ip, const struct pfs_attr *a, const void *data, uint32_t len)
{
	if (atomic_fetch_add(ip->inline_total, (int64_t)len) + (int64_t)len >
	    INODE_INLINE_TOTAL_MAX) {
		atomic_fetch_sub(ip->inline_total, (int64_t)len);
		return;
	}
	uint8_t *copy = malloc(len ? len : 1);
	if (!copy) {
		atomic_fetch_sub(ip->inline_total, (int64_t)len);
		return;
	}
	memcpy(copy, data, len);
	pthread_mutex_lock(&ip->lock);
	inline_free(ip);
	ip->inline_data = copy;
	ip->inline_len = len;
	ip->inline_ver = dver_of(a);
	ip->inline_own = false;
	pthread_mutex_unlock(&ip->lock);
}

/* Whether the inline content belongs to the attributes last seen. Under
 * ip->lock. */
static bool inline_current(const struct inode *ip)
{
	struct dver cur = dver_of(&ip->attr);
	return !ip->ver_unknown && dver_eq(&cur, &ip->inline_ver) &&
	       ip->inline_len == ip->attr.size;
}

bool inode_read_inline(struct inode *ip, uint64_t off, size_t size, void *buf, size_t *got)
{
	bool ok = false;
	pthread_mutex_lock(&ip->lock);
	if (ip->inline_data) {
		if (!inline_current(ip)) {
			inline_free(ip);
		} else {
			size_t n = 0;
			if (off < ip->inline_len) {
				n = ip->inline_len - (size_t)off;
				if (n > size)
					n = size;
				memcpy(buf, ip->inline_data + off, n);
			}
			*got = n;
			ok = true;
			/* Read to the end: the kernel's page cache has it now. */
			if (off + n >= ip->inline_len)
				inline_free(ip);
		}
	}
	pthread_mutex_unlock(&ip->lock);
	return ok;
}

uint8_t *inode_inline_copy(struct inode *ip, uint32_t *len)
{
	uint8_t *copy = NULL;
	pthread_mutex_lock(&ip->lock);
	if (ip->inline_data && !ip->inline_own && inline_current(ip) &&
	    (copy = malloc(ip->inline_len ? ip->inline_len : 1))) {
		memcpy(copy, ip->inline_data, ip->inline_len);
		*len = ip->inline_len;
	}
	pthread_mutex_unlock(&ip->lock);
	return copy;
}

bool inode_has_inline(struct inode *ip)
{
	pthread_mutex_lock(&ip->lock);
	bool has = ip->inline_data != NULL;
	pthread_mutex_unlock(&ip->lock);
	return has;
}

void inode_drop_inline(struct inode *ip)
{
	pthread_mutex_lock(&ip->lock);
	inline_free(ip);
	pthread_mutex_unlock(&ip->lock);
}

void inode_write_inline(struct inode *ip, uint64_t off, const void *data, size_t size,
			uint32_t max)
{
	pthread_mutex_lock(&ip->lock);
	if (!ip->inline_data)
		goto out;
	if (off > ip->inline_len || size > max || off > max - size) {
		inline_free(ip);
		goto out;
	}
	uint32_t len = off + size > ip->inline_len ? (uint32_t)(off + size) : ip->inline_len;
	int64_t grow = (int64_t)len - (int64_t)ip->inline_len;
	uint8_t *nd = NULL;
	/* Half the budget at most: the rest stays for copies that came with
	 * lookups, which a big install here must not crowd out. */
	if (atomic_fetch_add(ip->inline_total, grow) + grow > INODE_INLINE_TOTAL_MAX / 2 ||
	    !(nd = realloc(ip->inline_data, len ? len : 1))) {
		atomic_fetch_sub(ip->inline_total, grow);
		inline_free(ip);
		goto out;
	}
	memcpy(nd + off, data, size);
	ip->inline_data = nd;
	ip->inline_len = len;
	ip->inline_own = true;
out:
	pthread_mutex_unlock(&ip->lock);
}

bool inode_noxattr(struct inode *ip, uint8_t bit)
{
	pthread_mutex_lock(&ip->lock);
	bool v = (ip->noxattr & bit) && pfs_mono_ns() < ip->noxattr_until;
	pthread_mutex_unlock(&ip->lock);
	return v;
}

void inode_absent_locked(struct inode *ip, uint8_t nox, bool caps, double ttl)
{
	int64_t now = pfs_mono_ns();
	int64_t until = now + (int64_t)(ttl * 1e9);

	if (ttl <= 0)
		return;
	if (caps)
		ip->nocaps_until = until;
	if (!nox)
		return;
	if (ip->noxattr_until <= now)
		ip->noxattr = 0;
	/* All bits share one expiry: the earliest keeps every bit honest. */
	if (!ip->noxattr || until < ip->noxattr_until)
		ip->noxattr_until = until;
	ip->noxattr |= nox;
}

void inode_set_noxattr(struct inode *ip, uint8_t bit, double ttl)
{
	pthread_mutex_lock(&ip->lock);
	inode_absent_locked(ip, bit, false, ttl);
	pthread_mutex_unlock(&ip->lock);
}

bool inode_with(struct inode_table *t, const struct pfs_fh *fh,
		void (*cb)(void *arg, struct inode *ip), void *arg)
{
	pthread_mutex_lock(&t->lock);
	struct inode *ip = find(t, fh);
	if (ip && cb)
		cb(arg, ip);
	pthread_mutex_unlock(&t->lock);
	return ip != NULL;
}

bool inode_known(struct inode_table *t, const struct pfs_fh *fh)
{
	return inode_with(t, fh, NULL, NULL);
}

void inode_each_dir(struct inode_table *t, const uint64_t *hash,
		    void (*cb)(void *arg, struct inode *dir), void *arg)
{
	size_t pos;

	pthread_mutex_lock(&t->lock);
	struct hnode *n = hash ? htab_first(&t->tab, *hash) : htab_iter(&t->tab, &pos, NULL);
	for (; n; n = hash ? htab_next(n, *hash) : htab_iter(&t->tab, &pos, n)) {
		struct inode *d = container_of(n, struct inode, hn);
		if (d->is_dir)
			cb(arg, d);
	}
	pthread_mutex_unlock(&t->lock);
}

bool inode_find(struct inode_table *t, const struct pfs_fh *fh, bool drop_cached,
		fuse_ino_t *nodeid, bool *is_dir, uint64_t push)
{
	pthread_mutex_lock(&t->lock);
	struct inode *ip = find(t, fh);
	if (ip) {
		*nodeid = ip->nodeid;
		inode_clear_nocaps(ip);
		pthread_mutex_lock(&ip->lock);
		ip->parent_ino = 0; /* it may have moved */
		if (is_dir)
			*is_dir = S_ISDIR(ip->attr.mode);
		pthread_mutex_unlock(&ip->lock);
		if (drop_cached) {
			inode_drop_cached(ip);
			inode_drop_inline(ip);
			pthread_mutex_lock(&ip->lock);
			ip->ver_unknown = true; /* attr may predate the change */
			if (push > ip->data_push)
				ip->data_push = push;
			pthread_mutex_unlock(&ip->lock);
		}
	}
	pthread_mutex_unlock(&t->lock);
	return ip != NULL;
}

bool inode_lazily_open(struct inode_table *t, const struct pfs_fh *fh)
{
	pthread_mutex_lock(&t->lock);
	struct inode *ip = find(t, fh);
	bool lazy = ip && atomic_load(&ip->lazy_opens) > 0;
	pthread_mutex_unlock(&t->lock);
	return lazy;
}

bool inode_name_of(struct inode_table *t, const struct pfs_fh *fh, uint64_t *parent_hash,
		   uint64_t *name_hash)
{
	bool known = false;

	pthread_mutex_lock(&t->lock);
	struct inode *ip = find(t, fh);
	if (ip) {
		pthread_mutex_lock(&ip->lock);
		*parent_hash = ip->parent_hash;
		*name_hash = ip->name_hash;
		known = ip->parent_hash != 0;
		pthread_mutex_unlock(&ip->lock);
	}
	pthread_mutex_unlock(&t->lock);
	return known;
}

bool inode_find_nodeid(struct inode_table *t, const struct pfs_fh *fh, fuse_ino_t *nodeid,
		       bool *is_dir)
{
	pthread_mutex_lock(&t->lock);
	struct inode *ip = find(t, fh);
	if (ip) {
		*nodeid = ip->nodeid;
		if (is_dir) {
			pthread_mutex_lock(&ip->lock);
			*is_dir = S_ISDIR(ip->attr.mode);
			pthread_mutex_unlock(&ip->lock);
		}
	}
	pthread_mutex_unlock(&t->lock);
	return ip != NULL;
}

/* ip->lock held. */
static void overlay_locked(const struct inode *ip, struct pfs_attr *a)
{
	if (!ip->dl_on)
		return;
	a->mode = ip->dl.mode;
	a->uid = ip->dl.uid;
	a->gid = ip->dl.gid;
	a->atime_s = ip->dl.atime_s;
	a->atime_ns = ip->dl.atime_ns;
	a->mtime_s = ip->dl.mtime_s;
	a->mtime_ns = ip->dl.mtime_ns;
	a->ctime_s = ip->dl.ctime_s;
	a->ctime_ns = ip->dl.ctime_ns;
}

void inode_overlay_set(struct inode *ip, const struct pfs_attr *a)
{
	pthread_mutex_lock(&ip->lock);
	ip->dl_on = a != NULL;
	if (a)
		ip->dl = *a;
	pthread_mutex_unlock(&ip->lock);
}

void inode_overlay(struct inode *ip, struct pfs_attr *a)
{
	pthread_mutex_lock(&ip->lock);
	overlay_locked(ip, a);
	pthread_mutex_unlock(&ip->lock);
}

static void set_attr_locked(struct inode *ip, const struct pfs_attr *a, uint64_t seq)
{
	struct pfs_attr na = *a;
	overlay_locked(ip, &na); /* as inode_own_change_locked records it */
	inode_pages_seen_locked(ip, &na);
	ip->attr = na;
	ip->ver_unknown = inode_pushed_after_locked(ip, seq);
	ip->tr.seq = 0; /* until the caller decides (inode_trust_attr) */
}

void inode_set_attr(struct inode *ip, const struct pfs_attr *a, uint64_t seq)
{
	pthread_mutex_lock(&ip->lock);
	set_attr_locked(ip, a, seq);
	pthread_mutex_unlock(&ip->lock);
}

bool inode_set_attr_since(struct inode *ip, const struct pfs_attr *a, uint64_t seq, uint64_t any)
{
	pthread_mutex_lock(&ip->lock);
	bool ok = !attr_trust_listed_stale(&ip->tr, any);
	if (ok)
		set_attr_locked(ip, a, seq);
	pthread_mutex_unlock(&ip->lock);
	return ok;
}

void inode_own_change_locked(struct inode *ip, const struct pfs_attr *a, uint64_t seq)
{
	struct pfs_attr na = *a;

	overlay_locked(ip, &na); /* what a delegation answered, not sent yet */
	struct dver before = dver_of(&ip->attr), after = dver_of(&na);

	inode_pages_own_locked(ip, &before, &after);
	if (ip->inline_data && dver_eq(&ip->inline_ver, &before))
		ip->inline_ver = after;
	ip->attr = na;
	ip->ver_unknown = inode_pushed_after_locked(ip, seq);
}

bool inode_nocaps(struct inode *ip)
{
	pthread_mutex_lock(&ip->lock);
	bool v = ip->nocaps_until && pfs_mono_ns() < ip->nocaps_until;
	pthread_mutex_unlock(&ip->lock);
	return v;
}

void inode_set_nocaps(struct inode *ip, double ttl)
{
	pthread_mutex_lock(&ip->lock);
	ip->nocaps_until = ttl > 0 ? pfs_mono_ns() + (int64_t)(ttl * 1e9) : 0;
	pthread_mutex_unlock(&ip->lock);
}

void inode_clear_nocaps(struct inode *ip)
{
	pthread_mutex_lock(&ip->lock);
	ip->nocaps_until = 0;
	ip->noxattr = 0;
	pthread_mutex_unlock(&ip->lock);
}

void inode_note_walk(struct inode *dir)
{
	pthread_mutex_lock(&dir->lock);
	dir->walked_at = pfs_mono_ns();
	pthread_mutex_unlock(&dir->lock);
}

bool inode_walked(struct inode *dir, int64_t within_ns)
{
	pthread_mutex_lock(&dir->lock);
	bool w = dir->walked_at && pfs_mono_ns() - dir->walked_at < within_ns;
	pthread_mutex_unlock(&dir->lock);
	return w;
}

bool inode_mark_posix_locks(struct inode *ip)
{
	pthread_mutex_lock(&ip->lock);
	bool old = ip->had_posix_locks;
	ip->had_posix_locks = true;
	pthread_mutex_unlock(&ip->lock);
	return old;
}

bool inode_had_posix_locks(struct inode *ip)
{
	pthread_mutex_lock(&ip->lock);
	bool v = ip->had_posix_locks;
	pthread_mutex_unlock(&ip->lock);
	return v;
}

void attr_to_stat(const struct pfs_attr *a, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = a->ino;
	st->st_size = (off_t)a->size;
	st->st_blocks = (blkcnt_t)a->blocks;
	st->st_atim.tv_sec = a->atime_s;
	st->st_atim.tv_nsec = a->atime_ns;
	st->st_mtim.tv_sec = a->mtime_s;
	st->st_mtim.tv_nsec = a->mtime_ns;
	st->st_ctim.tv_sec = a->ctime_s;
	st->st_ctim.tv_nsec = a->ctime_ns;
	st->st_mode = a->mode;
	st->st_nlink = a->nlink;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_rdev = a->rdev; /* the low 32 bits are the whole new-style encoding */
	st->st_blksize = a->blksize;
}

void inode_note_reader(struct inode *ip, uint32_t uid, uint32_t gid)
{
	pthread_mutex_lock(&ip->lock);
	ip->reader_uid = uid;
	ip->reader_gid = gid;
	ip->reader_ok = true;
	pthread_mutex_unlock(&ip->lock);
}

bool inode_is_reader(struct inode *ip, uint32_t uid, uint32_t gid)
{
	pthread_mutex_lock(&ip->lock);
	bool ok = ip->reader_ok && ip->reader_uid == uid && ip->reader_gid == gid;
	pthread_mutex_unlock(&ip->lock);
	return ok;
}
