/* pages.c: which version of a file the kernel's cached pages belong to
 * (see inode_i.h: inode_open_version, inode_own_change_locked and the
 * inode_pages_* helpers): the close-to-open check, and the versions
 * this client's own changes made.
 */
#include "inode_i.h"

#include <string.h>
#include <sys/stat.h>

#include "podfs/hash.h"

struct dver dver_of(const struct pfs_attr *a)
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

bool dver_eq(const struct dver *a, const struct dver *b)
{
	return a->mtime_s == b->mtime_s && a->ctime_s == b->ctime_s && a->size == b->size &&
	       a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns;
}

/* A nonzero key of version v, for ip->own_vers. */
static uint64_t own_key(const struct dver *v)
{
	uint64_t h = pfs_hash_u64((uint64_t)v->mtime_s ^ ((uint64_t)v->mtime_ns << 34));
	h = pfs_hash_u64(h ^ (uint64_t)v->ctime_s ^ ((uint64_t)v->ctime_ns << 34));
	h = pfs_hash_u64(h ^ v->size);
	return h ? h : 1;
}

/* ip->lock held. Is v one of the versions of ip->own_vers? */
static bool own_has_locked(const struct inode *ip, const struct dver *v)
{
	uint64_t k = own_key(v);
	for (unsigned i = 0; i < INODE_OWN_VERS; i++)
		if (ip->own_vers[i] == k)
			return true;
	return false;
}

/* ip->lock held. Remembers v as one of this client's own versions. */
static void own_add_locked(struct inode *ip, const struct dver *v)
{
	ip->own_vers[ip->own_next] = own_key(v);
	ip->own_next = (uint8_t)((ip->own_next + 1) % INODE_OWN_VERS);
}

/* ip->lock held. The pages' version is v, or one of ip->own_vers. */
static bool pages_hold_locked(const struct inode *ip, const struct dver *v)
{
	return ip->cached_valid && (dver_eq(&ip->cached, v) || own_has_locked(ip, v));
}

void inode_pages_gone_locked(struct inode *ip)
{
	ip->cached_valid = false;
	memset(ip->own_vers, 0, sizeof(ip->own_vers));
}

void inode_pages_seen_locked(struct inode *ip, const struct pfs_attr *a)
{
	/* While writes of ours are queued or in flight, attributes seen
	 * now may show what one of them made before its reply came (or
	 * what was there before it ran): a version the pages hold, as its
	 * reply will say. Were it another host's, its push comes; and the
	 * writes still pending move the file past it, to a version of
	 * ours, or fail (the pages go then: inode_drop_cached). */
	struct dver was = dver_of(&ip->attr), now = dver_of(a);
	if (ip->tr.wb && pages_hold_locked(ip, &was) && !pages_hold_locked(ip, &now))
		own_add_locked(ip, &now);
}

void inode_pages_own_locked(struct inode *ip, const struct dver *before, const struct dver *after)
{
	if (pages_hold_locked(ip, before)) {
		ip->cached = *after;
		own_add_locked(ip, after);
	}
}

bool inode_data_version(struct inode *ip, struct dver *v)
{
	pthread_mutex_lock(&ip->lock);
	bool known = !ip->ver_unknown && S_ISREG(ip->attr.mode);
	*v = dver_of(&ip->attr);
	pthread_mutex_unlock(&ip->lock);
	return known;
}

bool inode_open_version(struct inode *ip, const struct pfs_attr *a, bool *attrs_stale,
			uint64_t seq)
{
	struct dver v = dver_of(a);
	pthread_mutex_lock(&ip->lock);
	struct dver seen = dver_of(&ip->attr);
	bool keep = pages_hold_locked(ip, &v) || !ip->kopened;
	if (!keep)
		inode_pages_gone_locked(ip);
	ip->kopened = true;
	*attrs_stale = !dver_eq(&seen, &v) || ip->attr.mode != a->mode ||
		       ip->attr.uid != a->uid || ip->attr.gid != a->gid ||
		       ip->attr.nlink != a->nlink;
	if (*attrs_stale)
		ip->tr.seq = 0; /* until the caller decides (inode_trust_attr) */
	ip->cached = v;
	ip->cached_valid = true;
	ip->attr = *a;
	ip->ver_unknown = inode_pushed_after_locked(ip, seq);
	pthread_mutex_unlock(&ip->lock);
	return keep;
}

void inode_drop_cached(struct inode *ip)
{
	pthread_mutex_lock(&ip->lock);
	inode_pages_gone_locked(ip);
	pthread_mutex_unlock(&ip->lock);
}
