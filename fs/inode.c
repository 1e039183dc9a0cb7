/* inode.c: the client inode table (see inode_i.h). */
#include "inode_i.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "podfs/clock.h"
#include "podfs/hash.h"

struct inode_table {
	pthread_mutex_t lock;
	void (*forget_cb)(void *arg, const struct pfs_fh *fh);
	_Atomic int64_t inline_total;
	_Atomic uint64_t own_any; /* own changes of any kind (inode_own_touch) */
	_Atomic uint64_t own_ns;  /* own namespace changes */
	_Atomic int64_t listing_total; /* bytes of all directory listings */
	_Atomic uint64_t renames; /* own renames (inode_note_rename) */
	_Atomic uint64_t renames_busy; /* of them not answered yet */
	void *forget_arg;
	struct inode **buckets;
	size_t nbuckets; /* power of two */
	size_t count;
	struct inode *root;
};

struct listing {
	struct listing_info li;
	uint8_t *buf;             /* the LISTDIR reply payload */
	size_t len;
	uint32_t *slot;           /* open addressing: item offset + 1, 0 empty */
	size_t nslot;             /* power of two */
	size_t n;                 /* items */
	_Atomic int64_t *total;   /* the table's listing_total */
};

static struct dver version_of(const struct pfs_attr *a);
static bool dver_equal(const struct dver *a, const struct dver *b);

static uint64_t fh_hash(const struct pfs_fh *fh)
{
	return pfs_hash_bytes(fh->data, fh->len, 0);
}

static struct inode *inode_alloc(const struct pfs_entry *e)
{
	struct inode *ip = calloc(1, sizeof(*ip));
	if (!ip)
		return NULL;
	pthread_mutex_init(&ip->lock, NULL);
	ip->fh = e->fh;
	ip->attr = e->attr;
	ip->hash = fh_hash(&e->fh);
	ip->nodeid = (fuse_ino_t)(uintptr_t)ip;
	return ip;
}

struct name_ent {
	struct name_ent *next;
	uint64_t hash;
	size_t len;
	char s[];
};

struct nameset {
	struct name_ent **b;
	size_t nb; /* power of two */
	size_t count;
};

static void nameset_free(struct nameset *ns)
{
	if (!ns)
		return;
	for (size_t i = 0; i < ns->nb; i++) {
		struct name_ent *e = ns->b[i];
		while (e) {
			struct name_ent *n = e->next;
			free(e);
			e = n;
		}
	}
	free(ns->b);
	free(ns);
}

static uint64_t str_hash(const char *s, size_t len)
{
	return pfs_hash_bytes(s, len, 0);
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

static void listing_free(struct listing *ls);

static void inode_destroy(struct inode *ip)
{
	listing_free(ip->listing);
	nameset_free(ip->names);
	inline_free(ip);
	pthread_mutex_destroy(&ip->lock);
	free(ip);
}

static void insert(struct inode_table *t, struct inode *ip)
{
	size_t b = ip->hash & (t->nbuckets - 1);
	ip->hnext = t->buckets[b];
	t->buckets[b] = ip;
	t->count++;
}

static void unlink_inode(struct inode_table *t, struct inode *ip)
{
	for (struct inode **pp = &t->buckets[ip->hash & (t->nbuckets - 1)]; *pp;
	     pp = &(*pp)->hnext) {
		if (*pp == ip) {
			*pp = ip->hnext;
			t->count--;
			return;
		}
	}
}

/* Doubles the bucket array when the load passes 1; on ENOMEM the table
 * just stays denser. */
static void maybe_grow(struct inode_table *t)
{
	if (t->count < t->nbuckets)
		return;
	size_t n = t->nbuckets * 2;
	struct inode **nb = calloc(n, sizeof(*nb));
	if (!nb)
		return;
	for (size_t i = 0; i < t->nbuckets; i++) {
		struct inode *ip = t->buckets[i];
		while (ip) {
			struct inode *next = ip->hnext;
			ip->hnext = nb[ip->hash & (n - 1)];
			nb[ip->hash & (n - 1)] = ip;
			ip = next;
		}
	}
	free(t->buckets);
	t->buckets = nb;
	t->nbuckets = n;
}

static struct inode *find(struct inode_table *t, const struct pfs_fh *fh, uint64_t hash)
{
	for (struct inode *ip = t->buckets[hash & (t->nbuckets - 1)]; ip; ip = ip->hnext)
		if (ip->hash == hash && pfs_fh_equal(&ip->fh, fh))
			return ip;
	return NULL;
}

int inode_table_new(const struct pfs_entry *root, struct inode_table **out)
{
	struct inode_table *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->nbuckets = 1024;
	t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
	t->root = inode_alloc(root);
	if (!t->buckets || !t->root) {
		free(t->buckets);
		free(t->root);
		free(t);
		return -ENOMEM;
	}
	t->root->nodeid = FUSE_ROOT_ID;
	t->root->inline_total = &t->inline_total;
	t->root->nlookup = 1;
	pthread_mutex_init(&t->lock, NULL);
	insert(t, t->root);
	*out = t;
	return 0;
}

void inode_table_free(struct inode_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nbuckets; i++) {
		struct inode *ip = t->buckets[i];
		while (ip) {
			struct inode *next = ip->hnext;
			inode_destroy(ip);
			ip = next;
		}
	}
	free(t->buckets);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

struct inode *inode_get(struct inode_table *t, fuse_ino_t ino)
{
	if (ino == FUSE_ROOT_ID)
		return t->root;
	return (struct inode *)(uintptr_t)ino;
}

struct inode *inode_ref(struct inode_table *t, const struct pfs_entry *e)
{
	uint64_t hash = fh_hash(&e->fh);
	struct inode *ip;

	pthread_mutex_lock(&t->lock);
	ip = find(t, &e->fh, hash);
	if (!ip) {
		ip = inode_alloc(e);
		if (!ip) {
			pthread_mutex_unlock(&t->lock);
			return NULL;
		}
		ip->inline_total = &t->inline_total;
		maybe_grow(t);
		insert(t, ip);
	}
	ip->nlookup++;
	pthread_mutex_unlock(&t->lock);
	inode_set_attr(ip, &e->attr);
	return ip;
}

void inode_forget(struct inode_table *t, struct inode *ip, uint64_t n)
{
	pthread_mutex_lock(&t->lock);
	ip->nlookup = n > ip->nlookup ? 0 : ip->nlookup - n;
	if (ip->nlookup == 0 && ip != t->root) {
		unlink_inode(t, ip);
		pthread_mutex_unlock(&t->lock);
		if (t->forget_cb)
			t->forget_cb(t->forget_arg, &ip->fh);
		inode_destroy(ip);
		return;
	}
	pthread_mutex_unlock(&t->lock);
}

void inode_table_on_forget(struct inode_table *t, void (*cb)(void *arg, const struct pfs_fh *fh),
			   void *arg)
{
	t->forget_cb = cb;
	t->forget_arg = arg;
}

int inode_snapshot(struct inode_table *t, struct inode_snap **out, size_t *n)
{
	pthread_mutex_lock(&t->lock);
	size_t cap = t->count, k = 0;
	struct inode_snap *v = malloc((cap ? cap : 1) * sizeof(*v));
	if (!v) {
		pthread_mutex_unlock(&t->lock);
		return -ENOMEM;
	}
	for (size_t i = 0; i < t->nbuckets; i++) {
		for (struct inode *ip = t->buckets[i]; ip && k < cap; ip = ip->hnext) {
			v[k].nodeid = ip->nodeid;
			v[k].fh = ip->fh;
			pthread_mutex_lock(&ip->lock);
			v[k].attr = ip->attr;
			pthread_mutex_unlock(&ip->lock);
			k++;
		}
	}
	pthread_mutex_unlock(&t->lock);
	*out = v;
	*n = k;
	return 0;
}

bool inode_mark_changed(struct inode_table *t, const struct pfs_fh *fh, const struct pfs_attr *a,
			fuse_ino_t *nodeid, struct nameset **names)
{
	*names = NULL;
	pthread_mutex_lock(&t->lock);
	struct inode *ip = find(t, fh, fh_hash(fh));
	if (ip) {
		*nodeid = ip->nodeid;
		pthread_mutex_lock(&ip->lock);
		if (a)
			ip->attr = *a;
		ip->ver_unknown = !a;
		ip->cached_valid = false;
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

void nameset_each_free(struct nameset *ns, void (*cb)(void *arg, const char *name, size_t len),
		       void *arg)
{
	if (!ns)
		return;
	for (size_t i = 0; i < ns->nb; i++)
		for (struct name_ent *e = ns->b[i]; e; e = e->next)
			cb(arg, e->s, e->len);
	nameset_free(ns);
}

void inode_note_name(struct inode *dir, const char *name)
{
	size_t len = strlen(name);
	uint64_t h = str_hash(name, len);

	pthread_mutex_lock(&dir->lock);
	struct nameset *ns = dir->names;
	if (!ns) {
		ns = calloc(1, sizeof(*ns));
		if (!ns || !(ns->b = calloc(16, sizeof(*ns->b)))) {
			free(ns);
			goto out;
		}
		ns->nb = 16;
		dir->names = ns;
	}
	for (struct name_ent *e = ns->b[h & (ns->nb - 1)]; e; e = e->next)
		if (e->hash == h && e->len == len && memcmp(e->s, name, len) == 0)
			goto out;
	if (ns->count >= ns->nb) {
		size_t nb = ns->nb * 2;
		struct name_ent **b = calloc(nb, sizeof(*b));
		if (b) {
			for (size_t i = 0; i < ns->nb; i++) {
				struct name_ent *e = ns->b[i];
				while (e) {
					struct name_ent *next = e->next;
					e->next = b[e->hash & (nb - 1)];
					b[e->hash & (nb - 1)] = e;
					e = next;
				}
			}
			free(ns->b);
			ns->b = b;
			ns->nb = nb;
		}
	}
	struct name_ent *e = malloc(sizeof(*e) + len + 1);
	if (!e)
		goto out;
	e->hash = h;
	e->len = len;
	memcpy(e->s, name, len + 1);
	e->next = ns->b[h & (ns->nb - 1)];
	ns->b[h & (ns->nb - 1)] = e;
	ns->count++;
out:
	pthread_mutex_unlock(&dir->lock);
}

void inode_drop_name(struct inode *dir, const char *name)
{
	size_t len = strlen(name);
	uint64_t h = str_hash(name, len);

	pthread_mutex_lock(&dir->lock);
	struct nameset *ns = dir->names;
	if (ns) {
		for (struct name_ent **pp = &ns->b[h & (ns->nb - 1)]; *pp; pp = &(*pp)->next) {
			struct name_ent *e = *pp;
			if (e->hash == h && e->len == len && memcmp(e->s, name, len) == 0) {
				*pp = e->next;
				free(e);
				ns->count--;
				break;
			}
		}
	}
	pthread_mutex_unlock(&dir->lock);
}

void inode_take_names(struct inode *dir, void (*cb)(void *arg, const char *name, size_t len),
		      void *arg)
{
	pthread_mutex_lock(&dir->lock);
	struct nameset *ns = dir->names;
	dir->names = NULL;
	pthread_mutex_unlock(&dir->lock);
	if (!ns)
		return;
	for (size_t i = 0; i < ns->nb; i++)
		for (struct name_ent *e = ns->b[i]; e; e = e->next)
			cb(arg, e->s, e->len);
	nameset_free(ns);
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
	pthread_mutex_unlock(&ip->lock);
}

/* Whether the inline content belongs to the attributes last seen. Under
 * ip->lock. */
static bool inline_current(const struct inode *ip)
{
	struct dver cur = dver_of(&ip->attr);
	return dver_eq(&cur, &ip->inline_ver) && ip->inline_len == ip->attr.size;
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
	if (ip->inline_data && inline_current(ip) &&
	    (copy = malloc(ip->inline_len ? ip->inline_len : 1))) {
		memcpy(copy, ip->inline_data, ip->inline_len);
		*len = ip->inline_len;
	}
	pthread_mutex_unlock(&ip->lock);
	return copy;
}

void inode_drop_inline(struct inode *ip)
{
	pthread_mutex_lock(&ip->lock);
	inline_free(ip);
	pthread_mutex_unlock(&ip->lock);
}

bool inode_noxattr(struct inode *ip, uint8_t bit)
{
	pthread_mutex_lock(&ip->lock);
	bool v = (ip->noxattr & bit) && pfs_mono_ns() < ip->noxattr_until;
	pthread_mutex_unlock(&ip->lock);
	return v;
}

void inode_set_noxattr(struct inode *ip, uint8_t bit, double ttl)
{
	pthread_mutex_lock(&ip->lock);
	int64_t now = pfs_mono_ns();
	if (ip->noxattr_until <= now)
		ip->noxattr = 0;
	/* All bits share one expiry: the earliest keeps every bit honest. */
	int64_t until = now + (int64_t)(ttl * 1e9);
	if (!ip->noxattr || until < ip->noxattr_until)
		ip->noxattr_until = until;
	ip->noxattr |= bit;
	pthread_mutex_unlock(&ip->lock);
}

bool inode_known(struct inode_table *t, const struct pfs_fh *fh)
{
	pthread_mutex_lock(&t->lock);
	bool known = find(t, fh, fh_hash(fh)) != NULL;
	pthread_mutex_unlock(&t->lock);
	return known;
}

bool inode_find(struct inode_table *t, const struct pfs_fh *fh, bool drop_cached,
		fuse_ino_t *nodeid, bool *is_dir)
{
	pthread_mutex_lock(&t->lock);
	struct inode *ip = find(t, fh, fh_hash(fh));
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
			pthread_mutex_unlock(&ip->lock);
		}
	}
	pthread_mutex_unlock(&t->lock);
	return ip != NULL;
}

struct dver dver_of(const struct pfs_attr *a)
{
	return version_of(a);
}

bool dver_eq(const struct dver *a, const struct dver *b)
{
	return dver_equal(a, b);
}

static struct dver version_of(const struct pfs_attr *a)
{
	struct dver v = {
		.mtime_s = a->mtime_s,
		.ctime_s = a->ctime_s,
		.size = a->size,
		.mtime_ns = a->mtime_ns,
		.ctime_ns = a->ctime_ns,
	};
	return v;
}

static bool dver_equal(const struct dver *a, const struct dver *b)
{
	return a->mtime_s == b->mtime_s && a->ctime_s == b->ctime_s && a->size == b->size &&
	       a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns;
}

void inode_set_attr(struct inode *ip, const struct pfs_attr *a)
{
	pthread_mutex_lock(&ip->lock);
	ip->attr = *a;
	ip->ver_unknown = false;
	pthread_mutex_unlock(&ip->lock);
}

bool inode_data_version(struct inode *ip, struct dver *v)
{
	pthread_mutex_lock(&ip->lock);
	bool known = !ip->ver_unknown && S_ISREG(ip->attr.mode);
	*v = version_of(&ip->attr);
	pthread_mutex_unlock(&ip->lock);
	return known;
}

bool inode_open_version(struct inode *ip, const struct pfs_attr *a, bool *attrs_stale)
{
	struct dver v = version_of(a);
	pthread_mutex_lock(&ip->lock);
	struct dver seen = version_of(&ip->attr);
	bool keep = (ip->cached_valid && dver_equal(&ip->cached, &v)) || !ip->kopened;
	ip->kopened = true;
	*attrs_stale = !dver_equal(&seen, &v) || ip->attr.mode != a->mode ||
		       ip->attr.uid != a->uid || ip->attr.gid != a->gid ||
		       ip->attr.nlink != a->nlink;
	ip->cached = v;
	ip->cached_valid = true;
	ip->attr = *a;
	ip->ver_unknown = false;
	pthread_mutex_unlock(&ip->lock);
	return keep;
}

void inode_own_change(struct inode *ip, const struct pfs_attr *a)
{
	struct dver before, after = version_of(a);
	pthread_mutex_lock(&ip->lock);
	before = version_of(&ip->attr);
	if (ip->cached_valid && dver_equal(&ip->cached, &before))
		ip->cached = after;
	ip->attr = *a;
	ip->ver_unknown = false;
	pthread_mutex_unlock(&ip->lock);
}

void inode_drop_cached(struct inode *ip)
{
	pthread_mutex_lock(&ip->lock);
	ip->cached_valid = false;
	pthread_mutex_unlock(&ip->lock);
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

/* ---- locally answered attributes (see inode_i.h) ---- */

uint64_t inode_own_snap(struct inode_table *t, uint64_t *ns)
{
	*ns = atomic_load(&t->own_ns);
	return atomic_load(&t->own_any);
}

/* Drops every listing (a file with several links changed: any directory
 * may list it under another name). */
static void drop_all_listings(struct inode_table *t)
{
	pthread_mutex_lock(&t->lock);
	for (size_t b = 0; b < t->nbuckets; b++)
		for (struct inode *d = t->buckets[b]; d; d = d->hnext)
			if (S_ISDIR(d->attr.mode))
				inode_listing_touch(d);
	pthread_mutex_unlock(&t->lock);
}

static int listing_item(struct pfs_rd *rd, struct pfs_name *name, struct pfs_entry *e,
			uint32_t *flags, struct pfs_bytes *data);

/* Marks the item of name hash nh and handle fh in dir's listing stale, and
 * holds off a new listing (see inode_own_touch). Called with dir->lock. */
static void listing_mark(struct inode *dir, uint64_t nh, const struct pfs_fh *fh)
{
	struct listing *ls = dir->listing;

	dir->ls_gen++; /* a listing asked for before the change is not kept */
	int64_t after = pfs_mono_ns() + INODE_LIST_QUIET_NS;
	if (dir->list_after < after)
		dir->list_after = after;
	if (!ls)
		return;
	for (size_t i = nh & (ls->nslot - 1); ls->slot[i]; i = (i + 1) & (ls->nslot - 1)) {
		struct pfs_rd rd;
		struct pfs_name n;
		struct pfs_entry e;
		uint32_t fl;
		size_t off = ls->slot[i] - 1;
		pfs_rd_init(&rd, ls->buf + off, ls->len - off);
		if (!pfs_get_NAME(&rd, &n) || !pfs_get_ENTRY(&rd, &e) ||
		    str_hash(n.s, n.len) != nh || !pfs_fh_equal(&e.fh, fh))
			continue;
		size_t foff = (size_t)(rd.p - ls->buf);
		struct pfs_wr w;
		if (!pfs_get_U32(&rd, &fl))
			continue;
		fl |= INODE_LS_STALE;
		pfs_wr_init(&w, ls->buf + foff, 4);
		(void)pfs_put_U32(&w, &fl);
	}
}

static void own_mark(struct inode_table *t, struct inode *ip, uint64_t at)
{
	pthread_mutex_lock(&ip->lock);
	ip->trust_seq = 0;
	ip->own_at = at;
	uint64_t ph = ip->parent_hash, nh = ip->name_hash;
	bool all = !S_ISDIR(ip->attr.mode) && ip->attr.nlink > 1;
	pthread_mutex_unlock(&ip->lock);
	if (all) {
		drop_all_listings(t);
	} else if (ph) {
		pthread_mutex_lock(&t->lock);
		for (struct inode *d = t->buckets[ph & (t->nbuckets - 1)]; d; d = d->hnext) {
			if (d->hash != ph || !S_ISDIR(d->attr.mode))
				continue;
			pthread_mutex_lock(&d->lock);
			listing_mark(d, nh, &ip->fh);
			pthread_mutex_unlock(&d->lock);
		}
		pthread_mutex_unlock(&t->lock);
	}
}

void inode_own_touch(struct inode_table *t, struct inode *ip, bool ns)
{
	/* Counters first: a reply being recorded under ip->lock either
	 * sees them moved, or is recorded before the trust is cleared. */
	if (ns)
		atomic_fetch_add(&t->own_ns, 1);
	uint64_t at = atomic_fetch_add(&t->own_any, 1) + 1;
	if (ip)
		own_mark(t, ip, at);
}

void inode_own_also(struct inode_table *t, struct inode *ip)
{
	own_mark(t, ip, atomic_load(&t->own_any));
}

bool inode_listed_stale(struct inode_table *t, const struct pfs_fh *fh, uint64_t any)
{
	bool stale = false;

	pthread_mutex_lock(&t->lock);
	struct inode *ip = find(t, fh, fh_hash(fh));
	if (ip) {
		pthread_mutex_lock(&ip->lock);
		stale = ip->own_at > any;
		pthread_mutex_unlock(&ip->lock);
	}
	pthread_mutex_unlock(&t->lock);
	return stale;
}

void inode_trust_attr(struct inode_table *t, struct inode *ip, uint64_t seq, uint64_t any,
		      uint64_t ns)
{
	pthread_mutex_lock(&ip->lock);
	if (atomic_load(&t->own_any) == any) {
		ip->trust_seq = seq;
		ip->trust_ns = ns;
	} else {
		ip->trust_seq = 0;
	}
	pthread_mutex_unlock(&ip->lock);
}

bool inode_attr_trusted(struct inode_table *t, struct inode *ip, struct pfs_attr *a,
			uint64_t *seq)
{
	pthread_mutex_lock(&ip->lock);
	bool ok = ip->trust_seq != 0 && ip->trust_ns == atomic_load(&t->own_ns);
	if (ok) {
		*a = ip->attr;
		*seq = ip->trust_seq;
	}
	pthread_mutex_unlock(&ip->lock);
	return ok;
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

/* ---- directory listings (see inode_i.h) ---- */


static void listing_free(struct listing *ls)
{
	if (!ls)
		return;
	atomic_fetch_sub(ls->total, (int64_t)(ls->len + ls->nslot * sizeof(uint32_t)));
	free(ls->buf);
	free(ls->slot);
	free(ls);
}

/* Reads the item at rd: 1 = got one, 0 = end, -EBADMSG. */
static int listing_item(struct pfs_rd *rd, struct pfs_name *name, struct pfs_entry *e,
			uint32_t *flags, struct pfs_bytes *data)
{
	if (rd->left == 0)
		return 0;
	if (!pfs_get_NAME(rd, name) || !pfs_get_ENTRY(rd, e) || !pfs_get_U32(rd, flags) ||
	    !pfs_get_BYTES(rd, data))
		return -EBADMSG;
	return 1;
}

/* Puts item offset off of ls into its slot table. */
static void listing_slot(struct listing *ls, const char *name, size_t nl, uint32_t off)
{
	size_t i = str_hash(name, nl) & (ls->nslot - 1);
	while (ls->slot[i])
		i = (i + 1) & (ls->nslot - 1);
	ls->slot[i] = off + 1;
}

/* Puts the items of ls->buf from offset 4 up to end into the slot table. */
static void listing_fill_slots(struct listing *ls, size_t end)
{
	struct pfs_rd rd;

	pfs_rd_init(&rd, ls->buf + 4, end - 4);
	for (;;) {
		struct pfs_name n;
		struct pfs_entry e;
		struct pfs_bytes d;
		uint32_t fl, off = (uint32_t)(rd.p - ls->buf);
		if (listing_item(&rd, &n, &e, &fl, &d) != 1)
			break;
		listing_slot(ls, n.s, n.len, off);
	}
}

/* The item named name in ls: 1 (fills the out-parameters), or 0. */
static int listing_lookup(const struct listing *ls, const char *name, size_t nl,
			  struct pfs_entry *e, uint32_t *flags, struct pfs_bytes *data)
{
	for (size_t i = str_hash(name, nl) & (ls->nslot - 1); ls->slot[i];
	     i = (i + 1) & (ls->nslot - 1)) {
		struct pfs_rd rd;
		struct pfs_name n;
		pfs_rd_init(&rd, ls->buf + ls->slot[i] - 1, ls->len - (ls->slot[i] - 1));
		if (listing_item(&rd, &n, e, flags, data) == 1 && n.len == nl &&
		    memcmp(n.s, name, nl) == 0)
			return 1;
	}
	return 0;
}

int inode_set_listing(struct inode_table *t, struct inode *dir, uint8_t *buf, size_t len,
		      const struct listing_info *li)
{
	struct pfs_name name;
	struct pfs_entry e;
	struct pfs_bytes data;
	uint32_t fl;
	struct pfs_rd rd;
	size_t n = 0;
	int r;

	if (len < 4 || len > UINT32_MAX - 1)
		goto bad;
	pfs_rd_init(&rd, buf + 4, len - 4);
	while ((r = listing_item(&rd, &name, &e, &fl, &data)) == 1)
		n++;
	if (r < 0)
		goto bad;
	struct listing *ls = calloc(1, sizeof(*ls));
	size_t nslot = 16;
	while (nslot < 2 * n)
		nslot *= 2;
	if (!ls || !(ls->slot = calloc(nslot, sizeof(uint32_t)))) {
		free(ls);
		free(buf);
		return -ENOMEM;
	}
	ls->li = *li;
	ls->buf = buf;
	ls->len = len;
	ls->nslot = nslot;
	ls->n = n;
	ls->total = &t->listing_total;
	int64_t bytes = (int64_t)(len + nslot * sizeof(uint32_t));
	if (atomic_fetch_add(&t->listing_total, bytes) + bytes > INODE_LISTING_TOTAL_MAX) {
		listing_free(ls);
		return -ENOSPC;
	}
	listing_fill_slots(ls, len);
	pthread_mutex_lock(&dir->lock);
	if (dir->ls_gen != li->ns) {
		pthread_mutex_unlock(&dir->lock);
		listing_free(ls);
		return -ESTALE;
	}
	struct listing *old = dir->listing;
	dir->listing = ls;
	pthread_mutex_unlock(&dir->lock);
	listing_free(old);
	return 0;
bad:
	free(buf);
	return -EBADMSG;
}

int inode_listing_find(struct inode *dir, const char *name, struct pfs_entry *e, uint8_t **data,
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

int inode_listing_add(struct inode *dir, const char *name, const struct pfs_entry *e)
{
	size_t nl = strlen(name), cap = 64 + nl + sizeof(struct pfs_entry);
	struct pfs_name pn;
	struct pfs_bytes none = { 0 };
	uint32_t flags = 0;
	struct pfs_wr w;
	int ret = -ENOENT;

	if (nl > PFS_NAME_MAX)
		return -ENAMETOOLONG;
	pn.len = (uint16_t)nl;
	memcpy(pn.s, name, nl + 1);
	pfs_wr_init(&w, malloc(cap), cap);
	if (!w.buf)
		return -ENOMEM;
	if (pfs_put_NAME(&w, &pn) < 0 || pfs_put_ENTRY(&w, e) < 0 || pfs_put_U32(&w, &flags) < 0 ||
	    pfs_put_BYTES(&w, &none) < 0) {
		free(w.buf);
		return -EINVAL;
	}
	pthread_mutex_lock(&dir->lock);
	struct listing *ls = dir->listing;
	if (!ls)
		goto out;
	struct pfs_entry pe;
	struct pfs_bytes d;
	uint32_t fl;
	ret = -EEXIST;
	if (listing_lookup(ls, name, nl, &pe, &fl, &d))
		goto out;
	ret = -ENOMEM;
	size_t nslot = ls->nslot;
	while (nslot < 2 * (ls->n + 1))
		nslot *= 2;
	int64_t more = (int64_t)(w.len + (nslot - ls->nslot) * sizeof(uint32_t));
	if (ls->len + w.len > UINT32_MAX - 1 ||
	    atomic_fetch_add(ls->total, more) + more > INODE_LISTING_TOTAL_MAX) {
		atomic_fetch_sub(ls->total, more);
		goto out;
	}
	uint8_t *buf = realloc(ls->buf, ls->len + w.len);
	uint32_t *slot = nslot != ls->nslot ? calloc(nslot, sizeof(uint32_t)) : ls->slot;
	if (buf)
		ls->buf = buf;
	if (!buf || !slot) {
		if (slot != ls->slot)
			free(slot);
		atomic_fetch_sub(ls->total, more);
		goto out;
	}
	memcpy(ls->buf + ls->len, w.buf, w.len);
	uint32_t off = (uint32_t)ls->len;
	ls->len += w.len;
	if (slot != ls->slot) {
		/* Rehash every item into the bigger table. */
		free(ls->slot);
		ls->slot = slot;
		ls->nslot = nslot;
		listing_fill_slots(ls, off);
	}
	listing_slot(ls, name, nl, off);
	ls->n++;
	dir->ls_gen++; /* a listing asked for before this change is not kept */
	ret = 0;
out:
	pthread_mutex_unlock(&dir->lock);
	free(w.buf);
	return ret;
}

void inode_drop_listing(struct inode *dir)
{
	pthread_mutex_lock(&dir->lock);
	struct listing *ls = dir->listing;
	dir->listing = NULL;
	dir->no_list = true;
	pthread_mutex_unlock(&dir->lock);
	listing_free(ls);
}

void inode_listing_stale(struct inode *dir)
{
	pthread_mutex_lock(&dir->lock);
	struct listing *ls = dir->listing;
	dir->listing = NULL;
	dir->list_after = pfs_mono_ns() + INODE_LIST_QUIET_NS;
	pthread_mutex_unlock(&dir->lock);
	listing_free(ls);
}

void inode_listing_touch(struct inode *dir)
{
	pthread_mutex_lock(&dir->lock);
	struct listing *ls = dir->listing;
	dir->listing = NULL;
	dir->list_after = pfs_mono_ns() + INODE_LIST_QUIET_NS;
	dir->ls_gen++;
	pthread_mutex_unlock(&dir->lock);
	listing_free(ls);
}

uint64_t inode_listing_gen(struct inode *dir)
{
	pthread_mutex_lock(&dir->lock);
	uint64_t g = dir->ls_gen;
	pthread_mutex_unlock(&dir->lock);
	return g;
}

bool inode_may_list(struct inode *dir, uint64_t max_size)
{
	pthread_mutex_lock(&dir->lock);
	bool ok = !dir->no_list && !dir->listing && S_ISDIR(dir->attr.mode) &&
		  dir->attr.size <= max_size && pfs_mono_ns() >= dir->list_after;
	pthread_mutex_unlock(&dir->lock);
	return ok;
}

void inode_set_parent(struct inode_table *t, struct inode *ip, struct inode *dir, uint64_t seq,
		      const char *name)
{
	pthread_mutex_lock(&dir->lock);
	uint64_t pino = dir->attr.ino;
	pthread_mutex_unlock(&dir->lock);
	pthread_mutex_lock(&ip->lock);
	if (S_ISDIR(ip->attr.mode)) {
		ip->parent_ino = pino;
		ip->parent_renames = atomic_load(&t->renames);
		ip->parent_seq = seq;
	}
	ip->parent_hash = dir->hash;
	ip->name_hash = name ? str_hash(name, strlen(name)) : 0;
	if (ip->named_seq == 0 || seq + 1 < ip->named_seq)
		ip->named_seq = seq + 1;
	pthread_mutex_unlock(&ip->lock);
}

uint64_t inode_named_seq(struct inode *ip)
{
	pthread_mutex_lock(&ip->lock);
	uint64_t s = ip->named_seq;
	pthread_mutex_unlock(&ip->lock);
	return s ? s - 1 : 0;
}

bool inode_may_lose_name_in(struct inode *ip, const struct inode *dir)
{
	pthread_mutex_lock(&ip->lock);
	bool may = S_ISREG(ip->attr.mode) &&
		   (ip->parent_hash == dir->hash || ip->parent_hash == 0 || ip->attr.nlink != 1);
	pthread_mutex_unlock(&ip->lock);
	return may;
}

void inode_note_rename(struct inode_table *t)
{
	atomic_fetch_add(&t->renames, 1);
	atomic_fetch_add(&t->renames_busy, 1);
}

void inode_rename_done(struct inode_table *t)
{
	atomic_fetch_sub(&t->renames_busy, 1);
}

bool inode_renames_busy(struct inode_table *t)
{
	return atomic_load(&t->renames_busy) != 0;
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

int inode_listing_readdir(struct inode_table *t, struct inode *dir, uint8_t **buf, size_t *len,
			  struct listing_info *li, uint64_t *parent_seq)
{
	struct pfs_name name;
	struct pfs_entry e;
	struct pfs_bytes data;
	struct pfs_wr w;
	struct pfs_rd rd;
	uint64_t cookie = 0;
	uint32_t fl;
	uint8_t eof = 1;
	int r, ret = -ENOENT;

	pthread_mutex_lock(&dir->lock);
	struct listing *ls = dir->listing;
	if (!ls || !dir->parent_ino || dir->parent_renames != atomic_load(&t->renames))
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
	ret = -EBADMSG;
	if (pfs_put_U8(&w, &eof) < 0 ||
	    put_dirent(&w, ".", 1, ++cookie, NULL, dir->attr.ino, S_IFDIR) < 0 ||
	    put_dirent(&w, "..", 2, ++cookie, NULL, dir->parent_ino, S_IFDIR) < 0)
		goto out_free;
	pfs_rd_init(&rd, ls->buf + 4, ls->len - 4);
	while ((r = listing_item(&rd, &name, &e, &fl, &data)) == 1)
		if (put_dirent(&w, name.s, name.len, ++cookie, (fl & INODE_LS_STALE) ? NULL : &e,
			       e.attr.ino, e.attr.mode) < 0)
			goto out_free;
	if (r < 0)
		goto out_free;
	*buf = w.buf;
	*len = w.len;
	ret = 0;
	goto out;
out_free:
	free(w.buf);
out:
	pthread_mutex_unlock(&dir->lock);
	return ret;
}
