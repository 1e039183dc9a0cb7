/* inode.c: the client inode table (see inode_i.h). */
#include "inode_i.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

struct inode_table {
	pthread_mutex_t lock;
	struct inode **buckets;
	size_t nbuckets; /* power of two */
	size_t count;
	struct inode *root;
};

static uint64_t fh_hash(const struct pfs_fh *fh)
{
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
	for (unsigned i = 0; i < fh->len; i++) {
		h ^= fh->data[i];
		h *= 0x100000001b3ULL;
	}
	return h ^ (h >> 29);
}

static bool fh_equal(const struct pfs_fh *a, const struct pfs_fh *b)
{
	return a->len == b->len && memcmp(a->data, b->data, a->len) == 0;
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

static void inode_destroy(struct inode *ip)
{
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
		if (ip->hash == hash && fh_equal(&ip->fh, fh))
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
		inode_destroy(ip);
		return;
	}
	pthread_mutex_unlock(&t->lock);
}

bool inode_find(struct inode_table *t, const struct pfs_fh *fh, bool drop_cached,
		fuse_ino_t *nodeid)
{
	pthread_mutex_lock(&t->lock);
	struct inode *ip = find(t, fh, fh_hash(fh));
	if (ip) {
		*nodeid = ip->nodeid;
		inode_clear_nocaps(ip);
		if (drop_cached)
			inode_drop_cached(ip);
	}
	pthread_mutex_unlock(&t->lock);
	return ip != NULL;
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
	pthread_mutex_unlock(&ip->lock);
}

bool inode_open_version(struct inode *ip, const struct pfs_attr *a, bool *attrs_stale)
{
	struct dver v = version_of(a);
	pthread_mutex_lock(&ip->lock);
	struct dver seen = version_of(&ip->attr);
	bool keep = ip->cached_valid && dver_equal(&ip->cached, &v);
	*attrs_stale = !dver_equal(&seen, &v) || ip->attr.mode != a->mode ||
		       ip->attr.uid != a->uid || ip->attr.gid != a->gid ||
		       ip->attr.nlink != a->nlink;
	ip->cached = v;
	ip->cached_valid = true;
	ip->attr = *a;
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
	pthread_mutex_unlock(&ip->lock);
}

void inode_drop_cached(struct inode *ip)
{
	pthread_mutex_lock(&ip->lock);
	ip->cached_valid = false;
	pthread_mutex_unlock(&ip->lock);
}

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

bool inode_nocaps(struct inode *ip)
{
	pthread_mutex_lock(&ip->lock);
	bool v = ip->nocaps_until && mono_ns() < ip->nocaps_until;
	pthread_mutex_unlock(&ip->lock);
	return v;
}

void inode_set_nocaps(struct inode *ip, double ttl)
{
	pthread_mutex_lock(&ip->lock);
	ip->nocaps_until = ttl > 0 ? mono_ns() + (int64_t)(ttl * 1e9) : 0;
	pthread_mutex_unlock(&ip->lock);
}

void inode_clear_nocaps(struct inode *ip)
{
	pthread_mutex_lock(&ip->lock);
	ip->nocaps_until = 0;
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
