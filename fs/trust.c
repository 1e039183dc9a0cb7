/* trust.c: attributes answered locally, this client's own changes and
 * the parents of directories (see trust_i.h). */
#include "trust_i.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "listing_i.h"
#include "names_i.h"

uint64_t inode_own_snap(struct inode_table *t, uint64_t *ns)
{
	return own_clock_read(&t->clk, ns);
}

/* Announces an own change of ip: a new stamp (its trust goes) and its
 * item in the listing that holds it marked stale. Returns the stamp. */
static uint64_t own_mark(struct inode_table *t, struct inode *ip)
{
	/* The stamp first: a reply being recorded under ip->lock either
	 * was sent before it (and is not trusted once the touch is seen),
	 * or is recorded before the trust is cleared. */
	uint64_t at = own_clock_stamp(&t->clk);
	pthread_mutex_lock(&ip->lock);
	attr_trust_touch(&ip->tr, at);
	struct inode_listed where = inode_listed_at_locked(ip);
	pthread_mutex_unlock(&ip->lock);
	/* Its item marked stale; every listing dropped for a file with
	 * several links (any directory may list it under another name). */
	inode_unlist(t, &ip->fh, &where);
	return at;
}

uint64_t inode_own_touch(struct inode_table *t, struct inode *ip, bool ns)
{
	if (ns)
		own_clock_ns_move(&t->clk);
	return ip ? own_mark(t, ip) : 0;
}

/* inode_own_local, or with set: ip's attributes become *set. */
static uint64_t own_local(struct inode_table *t, struct inode *ip, const struct pfs_attr *set,
			  int64_t sec, uint32_t nsec)
{
	uint64_t ns, seq;
	(void)own_clock_read(&t->clk, &ns);
	uint64_t at = own_clock_stamp(&t->clk), end = 0;
	pthread_mutex_lock(&ip->lock);
	bool ok = attr_trust_ok(&ip->tr, ns, &seq);
	attr_trust_touch(&ip->tr, at);
	if (ok) {
		struct pfs_attr a = set ? *set : ip->attr;
		if (!set) {
			a.mtime_s = a.ctime_s = sec;
			a.mtime_ns = a.ctime_ns = nsec;
		}
		inode_own_change_locked(ip, &a, seq);
		end = own_clock_stamp(&t->clk);
		if (!attr_trust_end(&ip->tr, at, end, true, seq, ns))
			end = 0;
	}
	struct inode_listed where = inode_listed_at_locked(ip);
	pthread_mutex_unlock(&ip->lock);
	inode_unlist(t, &ip->fh, &where);
	return end;
}

uint64_t inode_own_local(struct inode_table *t, struct inode *ip, int64_t sec, uint32_t nsec)
{
	return own_local(t, ip, NULL, sec, nsec);
}

uint64_t inode_own_local_attr(struct inode_table *t, struct inode *ip, const struct pfs_attr *a)
{
	return own_local(t, ip, a, 0, 0);
}

uint64_t inode_own_also(struct inode_table *t, struct inode *ip)
{
	return own_mark(t, ip);
}

uint64_t inode_own_ns_end(struct inode_table *t)
{
	return own_clock_ns_move(&t->clk);
}

bool inode_own_end(struct inode_table *t, struct inode *ip, const struct pfs_attr *a,
		   uint64_t seq, uint64_t at, uint64_t ns)
{
	uint64_t stamp = own_clock_stamp(&t->clk);
	pthread_mutex_lock(&ip->lock);
	if (a)
		inode_own_change_locked(ip, a, seq);
	bool ok = attr_trust_end(&ip->tr, at, stamp, a != NULL, seq, ns);
	pthread_mutex_unlock(&ip->lock);
	return ok;
}

void inode_write_queued(struct inode *ip)
{
	pthread_mutex_lock(&ip->lock);
	attr_trust_write_queued(&ip->tr);
	pthread_mutex_unlock(&ip->lock);
}

uint64_t inode_write_sent(struct inode_table *t, struct inode *ip)
{
	uint64_t stamp = own_clock_stamp(&t->clk);
	pthread_mutex_lock(&ip->lock);
	attr_trust_write_sent(&ip->tr, stamp);
	pthread_mutex_unlock(&ip->lock);
	return stamp;
}

bool inode_write_done(struct inode_table *t, struct inode *ip, uint64_t at,
		      const struct pfs_attr *a, uint64_t seq, uint64_t ns)
{
	uint64_t stamp = own_clock_stamp(&t->clk);
	if (!a) /* failed, or its result is not known: the copy may differ */
		inode_drop_inline(ip);
	pthread_mutex_lock(&ip->lock);
	if (a)
		inode_own_change_locked(ip, a, seq);
	bool ok = attr_trust_write_done(&ip->tr, at, stamp, a != NULL, seq, ns);
	pthread_mutex_unlock(&ip->lock);
	return ok;
}

struct stale {
	uint64_t any;
	bool stale;
};

static void stale_cb(void *arg, struct inode *ip)
{
	struct stale *s = arg;

	pthread_mutex_lock(&ip->lock);
	s->stale = attr_trust_listed_stale(&ip->tr, s->any);
	pthread_mutex_unlock(&ip->lock);
}

bool inode_listed_stale(struct inode_table *t, const struct pfs_fh *fh, uint64_t any)
{
	struct stale s = { any, false };

	inode_with(t, fh, stale_cb, &s);
	return s.stale;
}

bool inode_listed_current(struct inode_table *t, const struct pfs_attr *a, uint64_t ns)
{
	uint64_t now;

	(void)own_clock_read(&t->clk, &now);
	return attr_trust_listed(S_ISDIR(a->mode), a->nlink, ns, now);
}

void inode_note_absent(struct inode_table *t, struct inode *ip, uint8_t nox, bool caps,
		       double ttl, uint64_t any)
{
	(void)t;
	/* Under ip->lock: an own change of ip either stamped it before
	 * this check (nothing is noted) or forgets the absences after its
	 * stamp (inode_own_touch and inode_own_end come before
	 * inode_clear_nocaps). */
	pthread_mutex_lock(&ip->lock);
	if (!attr_trust_changed_since(&ip->tr, any))
		inode_absent_locked(ip, nox, caps, ttl);
	pthread_mutex_unlock(&ip->lock);
}

bool inode_trust_attr(struct inode_table *t, struct inode *ip, uint64_t seq, uint64_t any,
		      uint64_t ns)
{
	(void)t;
	pthread_mutex_lock(&ip->lock);
	bool ok = attr_trust_reply(&ip->tr, seq, any, ns);
	pthread_mutex_unlock(&ip->lock);
	return ok;
}

bool inode_attr_trusted(struct inode_table *t, struct inode *ip, struct pfs_attr *a,
			uint64_t *seq)
{
	uint64_t ns;
	(void)own_clock_read(&t->clk, &ns);
	pthread_mutex_lock(&ip->lock);
	bool ok = attr_trust_ok(&ip->tr, ns, seq);
	if (ok)
		*a = ip->attr;
	pthread_mutex_unlock(&ip->lock);
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
	ip->parent_hash = dir->hn.hash;
	ip->name_hash = name ? name_hash(name, strlen(name)) : 0;
	if (!ip->name || !name || strcmp(ip->name, name) != 0) {
		free(ip->name);
		ip->name = name ? strdup(name) : NULL; /* ENOMEM: not found again by name */
	}
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

bool inode_may_lose_name_in(struct inode *ip, const struct inode *dir, bool dirs)
{
	pthread_mutex_lock(&ip->lock);
	bool here = ip->parent_hash == dir->hn.hash || ip->parent_hash == 0;
	bool may = (S_ISREG(ip->attr.mode) && (here || ip->attr.nlink != 1)) ||
		   (dirs && S_ISDIR(ip->attr.mode) && here);
	pthread_mutex_unlock(&ip->lock);
	return may;
}

void inode_note_rename(struct inode_table *t)
{
	atomic_fetch_add(&t->renames, 1);
}
