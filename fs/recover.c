/* recover.c: finding cached objects again by name (see recover_i.h). */
#include "recover_i.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "client_i.h"
#include "fhmap_i.h"
#include "inode_i.h"
#include "podfs/log.h"
#include "rpc_i.h"

struct by_hash {
	uint64_t hash;
	size_t idx;
};

static int cmp_hash(const void *a, const void *b)
{
	const struct by_hash *x = a, *y = b;
	return x->hash < y->hash ? -1 : x->hash > y->hash;
}

/* The index of the inode whose fh hash is hash, or n. */
static size_t find_hash(const struct by_hash *ix, size_t n, uint64_t hash)
{
	struct by_hash key = { .hash = hash };
	const struct by_hash *f = bsearch(&key, ix, n, sizeof(*ix), cmp_hash);
	return f ? f->idx : n;
}

/* LOOKUP of name in dir (the handle the client knows it by: rpc.c sends
 * its new one), with the ids of uid/gid. */
static int lookup(struct client *c, const struct pfs_fh *dir, const char *name, uint32_t uid,
		  uint32_t gid, struct pfs_entry *out)
{
	struct pfs_lookup_req m;
	struct pfs_entry_rep er;
	struct rpc_reply rep = { 0 };
	uint8_t buf[PFS_FH_MAX + PFS_NAME_MAX + 512];
	struct pfs_wr w;
	size_t nl = strlen(name);
	int rc;

	if (nl == 0 || nl > PFS_NAME_MAX)
		return -EINVAL;
	memset(&m, 0, sizeof(m));
	m.cr.uid = uid;
	m.cr.gid = gid;
	m.parent = *dir;
	m.name.len = (uint16_t)nl;
	memcpy(m.name.s, name, nl);
	pfs_wr_init(&w, buf, sizeof(buf));
	if (pfs_enc_lookup_req(&w, &m) < 0)
		return -EINVAL;
	rc = rpc_call(c->rpc, PFS_OP_LOOKUP, buf, w.len, &rep);
	if (rc == 0 && pfs_dec_entry_rep(rep.buf, rep.len, &er) < 0)
		rc = -EBADMSG;
	rpc_reply_free(&rep);
	if (rc == 0)
		*out = er.e;
	return rc;
}

void recover_handles(struct client *c)
{
	struct inode_named *v = NULL;
	struct by_hash *ix = NULL;
	uint8_t *state = NULL; /* 0: to do, 1: found again, 2: not */
	size_t n = 0, found = 1, gone = 0;

	rpc_hold_exempt(true);
	if (inode_snapshot_named(c->it, &v, &n) < 0 || !(ix = malloc((n ? n : 1) * sizeof(*ix))) ||
	    !(state = calloc(n ? n : 1, 1))) {
		pfs_warn("the server's file handles changed, and there is no memory to find the "
			 "cached objects again: paths held answer ESTALE until looked up afresh");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		ix[i] = (struct by_hash){ v[i].hash, i };
		if (v[i].root)
			state[i] = 1;
	}
	qsort(ix, n, sizeof(*ix), cmp_hash);

	/* Directories before what is in them: each pass looks up what has
	 * its directory found again; at most one pass per level. */
	for (bool progress = true; progress;) {
		progress = false;
		for (size_t i = 0; i < n; i++) {
			if (state[i])
				continue;
			size_t p = v[i].parent_hash ? find_hash(ix, n, v[i].parent_hash) : n;
			if (p < n && state[p] == 0)
				continue; /* a later pass */
			progress = true;
			state[i] = 2;
			if (p == n || state[p] != 1 || !v[i].name)
				continue;
			struct pfs_entry e;
			/* The directory's owner may search it; root may be
			 * squashed by the export rule. */
			int rc = lookup(c, &v[p].fh, v[i].name, v[p].attr.uid, v[p].attr.gid, &e);
			if (rc == -EACCES || rc == -EPERM)
				rc = lookup(c, &v[p].fh, v[i].name, 0, 0, &e);
			if (rc < 0 || e.attr.ino != v[i].attr.ino ||
			    (e.attr.mode & S_IFMT) != (v[i].attr.mode & S_IFMT))
				continue;
			if (!pfs_fh_equal(&e.fh, &v[i].fh) && fhmap_put(c->fm, &v[i].fh, &e.fh) < 0)
				continue;
			/* Forgotten meanwhile: its entry would stay. */
			if (!inode_known(c->it, &v[i].fh))
				fhmap_del(c->fm, &v[i].fh);
			state[i] = 1;
			found++;
		}
	}
	gone = n - found;
	pfs_warn("the server's file handles changed (podfsd runs with another handle secret: "
		   "was its --state-dir replaced?): found %zu of %zu cached objects again by name%s",
		   found, n, gone ? "; the others answer ESTALE" : "");
out:
	rpc_hold_exempt(false);
	rpc_release(c->rpc);
	inode_named_free(v, n);
	free(ix);
	free(state);
}
