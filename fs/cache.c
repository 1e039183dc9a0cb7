/* cache.c: FORGET batching and revalidation after a reconnect (see
 * cache_i.h). */
#include "cache_i.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bg_i.h"
#include "client_i.h"
#include "fhmap_i.h"
#include "gate_i.h"
#include "inode_i.h"
#include "names_i.h"
#include "podfs/clock.h"
#include "podfs/log.h"
#include "recover_i.h"
#include "rpc_i.h"

#define FORGET_DELAY_MS 100 /* a FORGET batch waits this long for company */
#define FORGET_MAX 100000   /* queued handles beyond this are dropped */
#define CALL_TIMEOUT_MS 30000

struct fh_node {
	struct fh_node *next;
	struct pfs_fh fh;
	struct inode_listed where; /* FORGETs: where it may be listed */
};

struct cache {
	struct client *c;

	_Atomic uint32_t nosys; /* bit (op - 40): the server lacks it */

	/* Background thread; bg.lock guards the fields below. */
	struct bg bg;
	struct fh_node *forget_head;
	size_t nforget;
	int64_t forget_since_ms;
	bool reval_pending;
	bool recover_pending; /* the server's handles changed: recover.c first */

	/* Drops of the main connection, and how many of them a revalidation
	 * had seen when it ended (cache_current). */
	_Atomic uint64_t down_gen, reval_gen;
};

int cache_new(struct client *c, struct cache **out)
{
	struct cache *k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	k->c = c;
	if (bg_init(&k->bg) < 0) {
		free(k);
		return -ENOMEM;
	}
	*out = k;
	return 0;
}

static void free_list(struct fh_node *n)
{
	while (n) {
		struct fh_node *next = n->next;
		free(n);
		n = next;
	}
}

void cache_stop(struct cache *k)
{
	bg_stop(&k->bg);
}

void cache_free(struct cache *k)
{
	if (!k)
		return;
	cache_stop(k);
	free_list(k->forget_head);
	bg_fini(&k->bg);
	free(k);
}

void cache_set_nosys(struct cache *k, uint16_t op)
{
	if (op >= 40 && op < 72)
		atomic_fetch_or(&k->nosys, 1u << (op - 40));
}

bool cache_nosys(struct cache *k, uint16_t op)
{
	return op >= 40 && op < 72 && (atomic_load(&k->nosys) & (1u << (op - 40)));
}


static void inval_object(struct cache *k, const struct pfs_fh *fh, const struct pfs_attr *a);

/* ---- FORGET ---- */

void cache_forget_cb(void *arg, const struct pfs_fh *fh, const struct inode_listed *where)
{
	struct cache *k = arg;
	if (cache_nosys(k, PFS_OP_FORGET))
		return;
	struct fh_node *n = malloc(sizeof(*n));
	if (!n)
		return; /* the server just keeps pushing for it: harmless */
	n->fh = *fh;
	n->where = *where;
	pthread_mutex_lock(&k->bg.lock);
	if (k->nforget >= FORGET_MAX || k->bg.stop) {
		pthread_mutex_unlock(&k->bg.lock);
		free(n);
		return;
	}
	n->next = k->forget_head;
	k->forget_head = n;
	if (k->nforget++ == 0) {
		k->forget_since_ms = pfs_mono_ms();
		bg_wake(&k->bg);
	}
	pthread_mutex_unlock(&k->bg.lock);
}

/* Sends one FORGET with up to PFS_BATCH_MAX handles from *list (those
 * sent are freed; the rest stay). */
static void send_forget(struct cache *k, struct fh_node **list)
{
	struct client *c = k->c;
	size_t cap = (size_t)PFS_BATCH_MAX * (PFS_FH_MAX + 1) + 64;
	uint8_t *items = malloc(cap), *req = malloc(cap + 16);
	struct fh_node *sent = NULL;
	struct pfs_wr w;
	size_t n = 0;

	if (!items || !req)
		goto out;
	pfs_wr_init(&w, items, cap);
	while (*list && n < PFS_BATCH_MAX) {
		struct fh_node *f = *list;
		/* A listing may still name it, with what the daemon said
		 * while this session's interest covered it: once the FORGET
		 * ends that interest, a lookup answered from the listing
		 * would hand the kernel an object nothing is pushed about
		 * (another host's changes of it never seen). So its item
		 * goes stale first, and a lookup from then on asks the
		 * daemon; one answered from the listing before made a new
		 * inode, which the check below finds. */
		if (!inode_known(c->it, &f->fh))
			inode_unlist(c->it, &f->fh, &f->where);
		if (inode_known(c->it, &f->fh)) {
			/* The kernel looked it up again since it forgot it:
			 * still cached, still to be pushed about. */
			*list = f->next;
			free(f);
			continue;
		}
		if (pfs_enc_fh_item(&w, &f->fh) < 0)
			break;
		*list = f->next;
		f->next = sent;
		sent = f;
		n++;
	}
	struct pfs_forget_req m = { .fhs = { .p = items, .len = (uint32_t)w.len } };
	struct pfs_wr rw;
	pfs_wr_init(&rw, req, cap + 16);
	if (n == 0 || pfs_enc_forget_req(&rw, &m) < 0)
		goto out;
	struct rpc_reply rep = { 0 };
	int rc = rpc_call_timeout(c->rpc, PFS_OP_FORGET, req, rw.len, &rep, CALL_TIMEOUT_MS);
	rpc_reply_free(&rep);
	if (rc == -ENOSYS) {
		pfs_info("server has no FORGET: it keeps pushing for forgotten objects");
		cache_set_nosys(k, PFS_OP_FORGET);
	} else if (rc < 0) {
		pfs_debug("FORGET of %zu handles: %s", n, strerror(-rc));
	}
	/* An object looked up again after the check above, by a request
	 * the server handled before this FORGET, is cached with no interest
	 * left on the server: nothing about it is pushed any more. Treat it
	 * as changed: the push number makes every attribute, listing entry
	 * and reply about it obtained before now stale to this client (it
	 * asks the server again, which registers the interest again), and
	 * the kernel drops what it caches of it. */
	for (struct fh_node *f = sent; f; f = f->next) {
		/* Again: a listing asked for before the mark above was read
		 * with the interest, and may have been answered before the
		 * FORGET ended it; marked now, one still in flight is not
		 * kept (listing_mark) and one stored names it stale. */
		inode_unlist(c->it, &f->fh, &f->where);
		if (inode_known(c->it, &f->fh) && c->se) {
			gate_note_push(c->gate, &f->fh);
			inval_object(k, &f->fh, NULL);
		}
	}
out:
	free_list(sent);
	free(items);
	free(req);
}

/* ---- revalidation ---- */

struct inval_names {
	struct client *c;
	fuse_ino_t parent;
};

static void inval_name_cb(void *arg, const char *name, size_t len)
{
	struct inval_names *a = arg;
	fuse_lowlevel_notify_inval_entry(a->c->se, a->parent, name, len);
}

/* Invalidates everything the kernel may cache about fh. */
static void inval_object(struct cache *k, const struct pfs_fh *fh, const struct pfs_attr *a)
{
	struct client *c = k->c;
	struct nameset *names;
	fuse_ino_t nodeid;

	if (!inode_mark_changed(c->it, fh, a, &nodeid, &names))
		return;
	fuse_lowlevel_notify_inval_inode(c->se, nodeid, 0, 0);
	struct inval_names arg = { c, nodeid };
	nameset_each_free(names, inval_name_cb, &arg);
}

static void send_revalidated(struct cache *k, uint32_t items, uint32_t changed)
{
	struct pfs_revalidated_req m = { .items = items, .changed = changed };
	struct rpc_reply rep = { 0 };
	int rc;

	if (cache_nosys(k, PFS_OP_REVALIDATED))
		return;
	rc = rpc_msg(k->c->rpc, PFS_OP_REVALIDATED, revalidated_req, &m, &rep);
	rpc_reply_free(&rep);
	if (rc == -ENOSYS)
		cache_set_nosys(k, PFS_OP_REVALIDATED);
	else if (rc < 0)
		pfs_warn("REVALIDATED: %s", strerror(-rc));
}

static void revalidate_all(struct cache *k)
{
	struct client *c = k->c;
	struct inode_snap *v = NULL;
	size_t n = 0;
	size_t cap = (size_t)PFS_BATCH_MAX * (PFS_FH_MAX + 1 + 32) + 64;
	uint8_t *items = NULL, *req = NULL;
	uint32_t changed = 0;
	/* The drops this revalidation covers: those before it began. */
	uint64_t gen = atomic_load(&k->down_gen);

	/* Replies in flight may predate lost pushes. */
	gate_note_all(c->gate);
	if (inode_snapshot(c->it, &v, &n) < 0) {
		/* Nothing counts as revalidated: listings are not kept
		 * (cache_current), nor does a restarted server hear we are
		 * done (it waits its bound). */
		pfs_warn("out of memory for a revalidation: nothing cached is revalidated");
		return;
	}
	if (cache_nosys(k, PFS_OP_REVALIDATE))
		goto everything;
	items = malloc(cap);
	req = malloc(cap + 512);
	if (!items || !req)
		goto everything;
	for (size_t i = 0; i < n;) {
		size_t first = i, cnt = 0;
		struct pfs_wr w;
		pfs_wr_init(&w, items, cap);
		for (; i < n && cnt < PFS_BATCH_MAX; i++, cnt++) {
			struct pfs_reval_item it = {
				.fh = v[i].fh, /* or its new handle, below */
				.size = v[i].attr.size,
				.mtime_s = v[i].attr.mtime_s,
				.ctime_s = v[i].attr.ctime_s,
				.mtime_ns = v[i].attr.mtime_ns,
				.ctime_ns = v[i].attr.ctime_ns,
			};
			fhmap_get(c->fm, &v[i].fh, &it.fh);
			if (pfs_enc_reval_item(&w, &it) < 0)
				break;
		}
		struct pfs_revalidate_req m;
		memset(&m.cr, 0, sizeof(m.cr));
		m.items.p = items;
		m.items.len = (uint32_t)w.len;
		struct pfs_wr rw;
		pfs_wr_init(&rw, req, cap + 512);
		if (cnt == 0 || pfs_enc_revalidate_req(&rw, &m) < 0)
			goto everything;
		struct rpc_reply rep = { 0 };
		int rc = rpc_call(c->rpc, PFS_OP_REVALIDATE, req, rw.len, &rep);
		if (rc == -ENOSYS) {
			pfs_info("server has no REVALIDATE: invalidating every cache");
			cache_set_nosys(k, PFS_OP_REVALIDATE);
			goto everything;
		}
		struct pfs_revalidate_rep r;
		if (rc == 0 && pfs_dec_revalidate_rep(rep.buf, rep.len, &r) < 0)
			rc = -EBADMSG;
		if (rc < 0) {
			rpc_reply_free(&rep);
			pfs_warn("REVALIDATE failed (%s): invalidating every cache", strerror(-rc));
			goto everything;
		}
		struct pfs_rd rd;
		struct pfs_reval_result res;
		pfs_rd_init(&rd, r.results.p, r.results.len);
		int got;
		while ((got = pfs_dec_reval_result(&rd, &res)) == 1) {
			if (res.index >= cnt)
				continue;
			inval_object(k, &v[first + res.index].fh, res.status == 0 ? &res.attr : NULL);
			changed++;
		}
		rpc_reply_free(&rep);
		if (got < 0) {
			pfs_warn("malformed REVALIDATE reply: invalidating every cache");
			goto everything;
		}
	}
	pfs_info("revalidated %zu cached objects", n);
	goto out;

everything:
	for (size_t i = 0; i < n; i++)
		inval_object(k, &v[i].fh, NULL);
	changed = (uint32_t)n;
out:
	free(v);
	free(items);
	free(req);
	atomic_store(&k->reval_gen, gen);
	/* No drop since it began: the kernel caches nothing the server's
	 * state contradicts, which a restarted server waits to hear before
	 * it lets changes return (wire.h: REVALIDATED). After a drop, the
	 * round that follows tells it. */
	if (gen == atomic_load(&k->down_gen))
		send_revalidated(k, (uint32_t)n, changed);
}

void cache_handles_changed(struct cache *k)
{
	pthread_mutex_lock(&k->bg.lock);
	k->recover_pending = true;
	k->reval_pending = true;
	bg_wake(&k->bg);
	pthread_mutex_unlock(&k->bg.lock);
}

void cache_disconnected(struct cache *k)
{
	atomic_fetch_add(&k->down_gen, 1);
}

bool cache_current(struct cache *k)
{
	return atomic_load(&k->reval_gen) == atomic_load(&k->down_gen);
}

void cache_reconnected(struct cache *k)
{
	pthread_mutex_lock(&k->bg.lock);
	k->reval_pending = true;
	bg_wake(&k->bg);
	pthread_mutex_unlock(&k->bg.lock);
}

static void *cache_main(void *arg)
{
	struct cache *k = arg;

	pthread_mutex_lock(&k->bg.lock);
	while (!k->bg.stop) {
		if (k->recover_pending) {
			k->recover_pending = false;
			pthread_mutex_unlock(&k->bg.lock);
			recover_handles(k->c);
			pthread_mutex_lock(&k->bg.lock);
			continue;
		}
		if (k->reval_pending) {
			k->reval_pending = false;
			pthread_mutex_unlock(&k->bg.lock);
			revalidate_all(k);
			pthread_mutex_lock(&k->bg.lock);
			continue;
		}
		if (k->forget_head) {
			int64_t due = k->forget_since_ms + FORGET_DELAY_MS;
			if (k->nforget >= PFS_BATCH_MAX || pfs_mono_ms() >= due) {
				struct fh_node *list = k->forget_head;
				k->forget_head = NULL;
				k->nforget = 0;
				pthread_mutex_unlock(&k->bg.lock);
				while (list)
					send_forget(k, &list);
				pthread_mutex_lock(&k->bg.lock);
				continue;
			}
			bg_wait_ns(&k->bg, FORGET_DELAY_MS * 1000000LL);
			continue;
		}
		bg_wait(&k->bg);
	}
	pthread_mutex_unlock(&k->bg.lock);
	return NULL;
}

int cache_start(struct cache *k)
{
	return bg_start(&k->bg, "revalidate", cache_main, k);
}
