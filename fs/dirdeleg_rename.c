/* dirdeleg_rename.c: renames within a directory this client holds:
 * answered here and queued, or sent knowing what moves (see
 * dirdeleg_i.h). */
#include "dirdeleg_i.h"
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h> /* RENAME_NOREPLACE */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "client_i.h"
#include "deleg_i.h"
#include "dirdeleg_base_i.h"
#include "gate_i.h"
#include "inode_i.h"
#include "listing_i.h"
#include "trust_i.h"

bool dirdeleg_renaming(struct dirdeleg *d, struct inode *dir, const char *name,
		       const char *newname, struct dd_rename *rn)
{
	struct client *c = d->c;
	struct pfs_entry pe;
	struct listing_info li;
	struct pfs_attr a;
	uint8_t *data = NULL;
	uint32_t dlen, lflags;

	memset(rn, 0, sizeof(*rn));
	if (!dirdeleg_holds(d, dir))
		return false;
	/* What is queued there goes first (the RENAME then waits for
	 * nothing else: rpc_call_in): the attributes of a file made here
	 * are then known. */
	dirdeleg_wait_in(d, dir);
	if (!(rn->moved = dd_known_file(c, dir, name, KF_HELD | KF_ANY, &a)))
		return false;
	unsigned kind = S_ISDIR(a.mode) ? KF_DIR : 0;
	int r = listing_find(dir, name, &rn->e, &data, &dlen, &lflags, &li);
	free(data);
	data = NULL;
	if (r == LS_PRESENT && pfs_fh_equal(&rn->e.fh, &rn->moved->fh)) {
		r = listing_find(dir, newname, &pe, &data, &dlen, &lflags, &li);
		free(data);
		if (r == LS_ABSENT)
			return true;
		if (r == LS_PRESENT && (rn->victim = dd_known_file(c, dir, newname, KF_HELD | kind, &a))) {
			/* A directory replaced must be empty on the daemon when
			 * the RENAME gets there: what is queued in it goes first
			 * (a file made there under its own grant, still queued,
			 * left it empty there: the rename over it succeeded, and
			 * the file's create then failed). */
			if (kind == KF_DIR)
				dirdeleg_wait_in(d, rn->victim);
			return true;
		}
	}
	inode_forget(c->it, rn->moved, 1);
	rn->moved = NULL;
	return false;
}

/* The regular file name in held dir, held, whose rename (or, replaced,
 * its removal) may be answered here: one known to have one link
 * (dd_known_file), or one made here under the grant (dirdeleg_covers: no
 * other host has its handle, so only this client's LINK, which its
 * attributes show, gives it another name). One replaced first ends its
 * attribute delegation (what was answered under it is sent while it has
 * its name; a later change goes the usual way). NULL: neither. */
static struct inode *movable_file(struct dirdeleg *d, struct inode *dir, const char *name,
				  bool replaced)
{
	struct client *c = d->c;
	struct pfs_entry pe;
	struct listing_info li;
	struct pfs_attr a;
	uint8_t *data = NULL;
	uint32_t dlen, lflags;
	struct inode *ip = dd_known_file(c, dir, name, KF_HELD, &a);

	if (!ip) {
		if (listing_find(dir, name, &pe, &data, &dlen, &lflags, &li) != LS_PRESENT)
			return NULL;
		free(data);
		if (!S_ISREG(pe.attr.mode) || !(ip = inode_hold_fh(c->it, &pe.fh)))
			return NULL;
		pthread_mutex_lock(&ip->lock);
		bool one = S_ISREG(ip->attr.mode) && ip->attr.nlink == 1;
		pthread_mutex_unlock(&ip->lock);
		if (!one || !dirdeleg_covers(d, ip)) {
			inode_forget(c->it, ip, 1);
			return NULL;
		}
	}
	if (replaced && c->dl && deleg_has(c->dl, ip))
		deleg_end(c->dl, ip);
	return ip;
}

bool dirdeleg_rename(struct dirdeleg *d, struct inode *dir, const char *name, const char *newname,
		     uint32_t flags, const struct pfs_creds *cr, int *err)
{
	struct client *c = d->c;
	struct pfs_entry pe;
	struct listing_info li;
	uint8_t *data = NULL;
	uint32_t dlen, lflags;
	struct inode *moved = NULL, *victim = NULL;

	bool held;
	pthread_mutex_lock(&d->bg.lock);
	struct ddir *e = dd_enter_dir(d, dir, err, &held);
	pthread_mutex_unlock(&d->bg.lock);
	if (*err)
		return true;
	if (!held || (flags & ~(uint32_t)RENAME_NOREPLACE) || strlen(name) > PFS_NAME_MAX ||
	    strlen(newname) > PFS_NAME_MAX || !(moved = movable_file(d, dir, name, false)))
		return false;
	int r = listing_find(dir, newname, &pe, &data, &dlen, &lflags, &li);
	free(data);
	if (r == LS_PRESENT && (flags & RENAME_NOREPLACE)) {
		inode_forget(c->it, moved, 1);
		*err = EEXIST;
		return true;
	}
	if ((r != LS_ABSENT && r != LS_PRESENT) ||
	    (r == LS_PRESENT && !(victim = movable_file(d, dir, newname, true)))) {
		inode_forget(c->it, moved, 1);
		return false;
	}
	struct ditem *it = dd_item_new(cr, dir, name);
	if (!it)
		goto no;
	it->rename = true;
	it->rflags = flags;
	it->newname.len = (uint16_t)strlen(newname);
	memcpy(it->newname.s, newname, it->newname.len + 1);

	pthread_mutex_lock(&d->bg.lock);
	while (d->queued + d->inflight >= DD_QUEUE_MAX)
		pthread_cond_wait(&d->idle, &d->bg.lock);
	/* Recalled meanwhile: the usual way. */
	if (!(e = dd_find(d, &dir->fh)) || !e->held || e->err) {
		pthread_mutex_unlock(&d->bg.lock);
		free(it);
		goto no;
	}
	/* Answered: the name moves in the listing (the file's item under
	 * its new name, the replaced one's gone); the directory, the file
	 * and the one replaced changed by us (their attributes are asked
	 * for again once it is sent). Under the lock, as an unlink. */
	struct pfs_entry me;
	if (listing_find(dir, name, &me, &data, &dlen, &lflags, &li) == LS_PRESENT) {
		free(data);
		if ((victim && listing_remove(dir, newname) < 0) || listing_remove(dir, name) < 0 ||
		    listing_add(dir, newname, &me) < 0)
			listing_touch(dir);
	} else {
		listing_touch(dir);
	}
	inode_hold(c->it, dir);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	if ((it->victim = victim)) {
		dd_made_changed(victim, &now, true);
		atomic_fetch_add(&victim->dd_pending, 1);
		it->at_victim = inode_own_also(c->it, victim);
	}
	dd_answered(d, e, it, dir, moved);
	dd_made_changed(moved, &now, false);
	d->st.renames++;
	pthread_mutex_unlock(&d->bg.lock);
	*err = 0;
	return true;
no:
	inode_forget(c->it, moved, 1);
	if (victim)
		inode_forget(c->it, victim, 1);
	return false;
}
