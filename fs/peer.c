/* peer.c: peer-assisted reads on a mount (see peer_i.h). */
#include "peer_i.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "chunkstore_i.h"
#include "client_i.h"
#include "gate_i.h"
#include "inode_i.h"
#include "ofile_i.h"
#include "ops_i.h"
#include "peercli_i.h"
#include "peersrv_i.h"
#include "podfs/clock.h"
#include "podfs/digest.h"
#include "podfs/hash.h"
#include "podfs/log.h"
#include "podfs/netaddr.h"
#include "rpc_i.h"
#include "transport_i.h"

/* Files the coordinator said it does not serve in chunks (EOPNOTSUPP),
 * by handle and version, not asked again: a small direct-mapped memo. */
#define NOCHUNK_SLOTS 64

struct nochunk {
	uint64_t fkey;
	struct dver v;
	bool set;
};

struct peer {
	struct client *c;
	struct cstore *st;
	struct peersrv *srv;  /* NULL: serving nobody */
	struct peercli *cli;
	uint8_t addr[16];     /* where srv listens, as CHUNK tells it */
	uint32_t alen;
	uint16_t port;
	_Atomic unsigned shift; /* the coordinator's chunk size (its last answer) */
	pthread_mutex_t mu;   /* nochunk */
	struct nochunk nochunk[NOCHUNK_SLOTS];
	/* Counters (any thread). */
	_Atomic uint64_t peer_bytes, coord_bytes, local_bytes;
	_Atomic uint64_t peer_chunks, coord_chunks, bad, failed, changed, fallbacks;
	/* Bytes of reads peers could have served that went the usual way:
	 * no connection that takes CHUNK at that moment (a reconnect), or
	 * the file's data version not known current (a push came). */
	_Atomic uint64_t skipped;
};

/* One chunk a READ needs, while it is being answered. */
struct piece {
	struct chunk *ch;
	uint64_t index;
	uint8_t digest[PFS_DIGEST_LEN];
	bool owner;      /* this thread made the chunk: it completes it */
	bool report;     /* the coordinator listed this client, or named a peer */
	bool peer_bad;   /* the peer it named failed */
	bool peer_missing; /* the peer it named did not hold the chunk */
	uint32_t src, src_gen; /* that peer (CHUNKS_NO_PEER: none) */
	/* Chunks dropped to make room for this one: the coordinator is
	 * told, so that it sends nobody here for them. */
	struct cstore_gone gone[CSTORE_GONE_MAX];
	unsigned ngone;
};

/* What a READ of open file `of` sends on its caller's behalf (the
 * request may be answered before the work of its chunks ends). */
struct rctx {
	struct peer *p;
	struct client *c;
	/* The open file's flags, copied: once the kernel has its answer
	 * (finish, after it), the open file may be released and freed. */
	uint32_t flags;
	struct pfs_creds cr;
	struct pfs_fh fh;
	uint64_t fid, fkey;
	/* The data version the READ is for, hashed: a recent answer of
	 * another version (this host wrote the file since) is not used. */
	uint64_t vkey;
};

/* What a recent CHUNK answer about r's file holds for besides (file,
 * index): the data version, and the chunk size the index assumed (a
 * READ that began before the coordinator's size was known names
 * another chunk by the same index). */
static uint64_t answer_key(const struct rctx *r, unsigned shift)
{
	return pfs_hash_bytes(&shift, sizeof(shift), r->vkey);
}

#define NO_PEER 0xffffu

int peer_new(struct client *c)
{
	struct peer *p;

	if (!c->peers)
		return 0;
	if (!(p = calloc(1, sizeof(*p))))
		return -ENOMEM;
	if (cstore_new(c->peer_cache, &p->st) < 0 || peercli_new(c, &p->cli) < 0) {
		cstore_free(p->st);
		free(p);
		return -ENOMEM;
	}
	p->c = c;
	atomic_init(&p->shift, 22);
	pthread_mutex_init(&p->mu, NULL);
	c->peer = p;
	return 0;
}

int peer_start(struct client *c)
{
	struct peer *p = c->peer;
	struct sockaddr_storage sa;
	char err[256];
	int rc;

	if (!p)
		return 0;
	if (!transport_local_addr(c->tr, &sa)) {
		pfs_warn("peers: the address this host reaches %s from is unknown: serving no "
			 "peers", c->hostport);
		return -EADDRNOTAVAIL;
	}
	rc = peersrv_start(c, p->st, &sa, c->peer_port, &p->srv, err, sizeof(err));
	if (rc < 0) {
		pfs_warn("peers: %s: serving no peers", err);
		return rc;
	}
	peersrv_addr(p->srv, &sa);
	if (sa.ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)&sa;
		memcpy(p->addr, &s6->sin6_addr, 16);
		p->alen = 16;
		p->port = ntohs(s6->sin6_port);
	} else {
		const struct sockaddr_in *s4 = (const void *)&sa;
		memcpy(p->addr, &s4->sin_addr, 4);
		p->alen = 4;
		p->port = ntohs(s4->sin_port);
	}
	return 0;
}

void peer_stop(struct client *c)
{
	struct peer *p = c->peer;

	if (!p)
		return;
	peercli_stop(p->cli);
	peersrv_stop(p->srv);
	p->srv = NULL;
}

void peer_free(struct client *c)
{
	struct peer *p = c->peer;

	if (!p)
		return;
	peersrv_stop(p->srv);
	peercli_free(p->cli);
	cstore_free(p->st);
	pthread_mutex_destroy(&p->mu);
	free(p);
	c->peer = NULL;
}

/* --- the memo of files not read in chunks --- */

static bool nochunk_seen(struct peer *p, uint64_t fkey, const struct dver *v)
{
	struct nochunk *n = &p->nochunk[fkey % NOCHUNK_SLOTS];

	pthread_mutex_lock(&p->mu);
	bool seen = n->set && n->fkey == fkey && dver_eq(&n->v, v);
	pthread_mutex_unlock(&p->mu);
	return seen;
}

static void nochunk_note(struct peer *p, uint64_t fkey, const struct dver *v)
{
	struct nochunk *n = &p->nochunk[fkey % NOCHUNK_SLOTS];

	pthread_mutex_lock(&p->mu);
	*n = (struct nochunk){ .fkey = fkey, .v = *v, .set = true };
	pthread_mutex_unlock(&p->mu);
}

/* --- requests to the coordinator --- */

static void report_to(struct client *c, const struct pfs_fh *fh, uint64_t index,
		      const uint8_t digest[PFS_DIGEST_LEN], uint32_t status, uint32_t src,
		      uint32_t src_gen)
{
	struct pfs_chunk_report_req m = { .fh = *fh, .index = index, .status = status,
					  .peer = src, .peer_gen = src_gen };
	struct rpc_reply rep = { 0 };

	memcpy(m.hash.b, digest, PFS_DIGEST_LEN);
	int rc = rpc_msg(c->rpc, PFS_OP_CHUNK_REPORT, chunk_report_req, &m, &rep);
	rpc_reply_free(&rep);
	if (rc < 0)
		pfs_debug("CHUNK_REPORT: %s", strerror(-rc));
}

static void report(struct rctx *r, const struct piece *pc, uint32_t status)
{
	report_to(r->c, &r->fh, pc->index, pc->digest, status, pc->src, pc->src_gen);
}

/* READs slot of pc's chunk from the coordinator into its bytes. */
static int read_slot(struct rctx *r, struct piece *pc, unsigned slot, unsigned shift)
{
	struct chunk *ch = pc->ch;
	uint32_t at = slot * CSTORE_SLOT;
	uint32_t want = ch->len - at < CSTORE_SLOT ? ch->len - at : CSTORE_SLOT;
	struct pfs_read_req m = { .cr = r->cr, .fh = r->fh, .fid = r->fid, .flags = r->flags,
				  .offset = (pc->index << shift) + at, .size = want };
	struct rpc_reply rep = { 0 };
	struct pfs_read_rep rr;

	int rc = rpc_msg(r->c->rpc, PFS_OP_READ, read_req, &m, &rep);
	if (rc == 0 && pfs_dec_read_rep(rep.buf, rep.len, &rr) < 0)
		rc = -EIO;
	if (rc == 0 && rr.data.len != want)
		rc = -ESTALE; /* the file shrank: not this chunk's bytes */
	if (rc == 0) {
		memcpy(ch->data + at, rr.data.p, want);
		atomic_fetch_add_explicit(&r->c->st_file_read, want, memory_order_relaxed);
		atomic_fetch_add_explicit(&r->p->coord_bytes, want, memory_order_relaxed);
	}
	rpc_reply_free(&rep);
	return rc;
}

/* Fills the slots of mine (claimed by this thread). Returns 0 or the
 * first error; every slot is filled or given back. */
static int fill_mine(struct rctx *r, struct piece *pc, uint64_t mine, unsigned shift)
{
	int ret = 0;

	for (unsigned i = 0; i < CSTORE_SLOTS; i++) {
		if (!(mine & (1ull << i)))
			continue;
		int rc = ret ? ret : read_slot(r, pc, i, shift);
		cstore_filled(r->p->st, pc->ch, i, rc == 0);
		if (rc < 0)
			ret = rc;
	}
	return ret;
}

static void sa_of(const uint8_t *a, size_t alen, uint16_t port, struct sockaddr_storage *sa)
{
	memset(sa, 0, sizeof(*sa));
	if (alen == 16) {
		struct sockaddr_in6 *s6 = (void *)sa;
		s6->sin6_family = AF_INET6;
		memcpy(&s6->sin6_addr, a, 16);
		s6->sin6_port = htons(port);
	} else {
		struct sockaddr_in *s4 = (void *)sa;
		s4->sin_family = AF_INET;
		memcpy(&s4->sin_addr, a, 4);
		s4->sin_port = htons(port);
	}
}

/* The owner fetches pc's chunk from the peer at sa: CK_READY, or
 * CK_COORD after a failure (logged once per peer while it is bad). */
static void fetch_from_peer(struct rctx *r, struct piece *pc, const struct sockaddr_storage *sa)
{
	struct peer *p = r->p;
	struct chunk *ch = pc->ch;
	int64_t deadline = pfs_mono_ms() + (int64_t)(r->c->peer_timeout * 1000);
	int rc = peercli_fetch(p->cli, sa, ch->digest, ch->len, ch->data, deadline);
	char name[64], hex[17];

	if (rc == 0) {
		atomic_fetch_add_explicit(&p->peer_bytes, ch->len, memory_order_relaxed);
		atomic_fetch_add_explicit(&p->peer_chunks, 1, memory_order_relaxed);
		cstore_set_mode(p->st, ch, CK_READY);
		return;
	}
	pc->peer_bad = rc != -ENOENT;
	pc->peer_missing = rc == -ENOENT;
	atomic_fetch_add_explicit(rc == -EBADMSG ? &p->bad : &p->failed, 1, memory_order_relaxed);
	/* A peer that sent other bytes than the digest's is shunned for long;
	 * one that was slow or gone only briefly. One without the chunk is
	 * not avoided: it dropped it a moment ago, or its thread had not got
	 * the coordinator's answer yet on a loaded host (then the peers sent
	 * there all miss it at once): the coordinator forgets it for that
	 * chunk, without counting it against it (PFS_CKR_PEER_MISSING). */
	int ms = rc == -EBADMSG ? PEERCLI_BAD_MS : PEERCLI_SLOW_MS;
	if (rc == -ENOENT) {
		pfs_addr_name(sa, name, sizeof(name));
		pfs_debug("peer %s does not hold chunk %llu: read from the coordinator", name,
			  (unsigned long long)pc->index);
	} else if (rc != -EAGAIN && (ms = peercli_mark_bad(p->cli, sa, ms)) > 0) {
		pfs_addr_name(sa, name, sizeof(name));
		pfs_digest_hex(ch->digest, hex, 16);
		if (rc == -EBADMSG)
			pfs_warn("peer %s sent chunk %llu (sha256 %s...) that does not match its "
				 "digest: read from the coordinator instead; that peer is not "
				 "asked for %d s", name, (unsigned long long)pc->index, hex, ms / 1000);
		else
			pfs_notice("peer %s did not deliver chunk %llu (sha256 %s...): %s; read "
				   "from the coordinator instead; that peer is not asked for %d s",
				   name, (unsigned long long)pc->index, hex, strerror(-rc), ms / 1000);
	}
	cstore_set_mode(p->st, ch, CK_COORD);
}

/* Gets pc->ch for chunk index of r's file: from a recent answer, or
 * CHUNK (and, as its owner, from the peer it names). Returns 0, -ERANGE
 * (past the end), -ESTALE (the coordinator's chunk size is not the one
 * assumed: *shift is updated), or another error (read without chunks). */
static int acquire_ask(struct rctx *r, struct piece *pc, uint64_t index, unsigned *shift,
		       const struct dver *v, bool *told);

static int acquire(struct rctx *r, struct piece *pc, uint64_t index, unsigned *shift,
		   const struct dver *v)
{
	struct peer *p = r->p;
	struct client *c = r->c;
	uint32_t len;
	uint64_t seq;

	memset(pc, 0, sizeof(*pc));
	pc->index = index;
	pc->src = NO_PEER;
	/* A recent answer, or wait for the one another thread is getting. */
	int64_t until = pfs_mono_ms() + (int64_t)(c->peer_timeout * 1000) + 2000;
	for (int k = 0;; k++) {
		if (cstore_recent_get(p->st, r->fkey, index, answer_key(r, *shift), pc->digest,
				      &len, &seq) &&
		    !gate_pushed_since(c->gate, seq, &r->fh)) {
			pc->ch = cstore_find(p->st, pc->digest, &r->fh, index);
			if (pc->ch && pc->ch->mode != CK_FAILED)
				return 0;
			if (pc->ch)
				cstore_put(p->st, pc->ch);
			pc->ch = NULL;
		}
		if (k > 0 || cstore_ask_begin(p->st, r->fkey, index, until))
			break;
	}
	bool told = false;
	int rc = acquire_ask(r, pc, index, shift, v, &told);
	if (!told)
		cstore_ask_done(p->st, r->fkey, index);
	return rc;
}

/* acquire's question to the coordinator, and the chunk it makes; *told:
 * it ended the question (cstore_ask_done) itself. */
static int acquire_ask(struct rctx *r, struct piece *pc, uint64_t index, unsigned *shift,
		       const struct dver *v, bool *told)
{
	struct peer *p = r->p;
	struct client *c = r->c;
	struct sockaddr_storage sa;
	bool lost = false, avoided = false;
	uint64_t seq;
again:;
	struct pfs_chunk_req m = { .cr = r->cr, .fh = r->fh, .fid = r->fid, .flags = r->flags,
				   .index = index, .want = lost ? PFS_CK_LOST : 0 };
	struct rpc_reply rep = { 0 };
	struct pfs_chunk_rep cr;
	if (p->srv) {
		m.addr.p = p->addr;
		m.addr.len = p->alen;
		m.port = p->port;
	}
	seq = gate_seq(c->gate);
	int rc = rpc_msg(c->rpc, PFS_OP_CHUNK, chunk_req, &m, &rep);
	if (rc == 0 && (pfs_dec_chunk_rep(rep.buf, rep.len, &cr) < 0 ||
			cr.shift < PFS_CHUNK_SHIFT_MIN || cr.shift > PFS_CHUNK_SHIFT_MAX ||
			cr.len == 0 || cr.len > (1u << cr.shift) || cr.source > PFS_CK_HELD ||
			(cr.source == PFS_CK_PEER &&
			 ((cr.addr.len != 4 && cr.addr.len != 16) || cr.port == 0 || cr.port > 65535))))
		rc = -EPROTO;
	if (rc == -EOPNOTSUPP)
		nochunk_note(p, r->fkey, v);
	if (rc == -EPROTO)
		pfs_warn("bad CHUNK reply from %s: reading without peers", c->hostport);
	if (rc < 0)
		goto out;
	if (cr.shift != *shift) {
		/* Another chunk size than assumed: the index named another
		 * chunk. The coordinator listed us for it: we fetch nothing. */
		if (cr.source != PFS_CK_HELD) {
			memcpy(pc->digest, cr.hash.b, PFS_DIGEST_LEN);
			if (cr.source == PFS_CK_PEER) {
				pc->src = cr.peer;
				pc->src_gen = cr.peer_gen;
			}
			report(r, pc, 0);
			pc->src = NO_PEER;
		}
		atomic_store(&p->shift, cr.shift);
		*shift = cr.shift;
		rc = -ESTALE;
		goto out;
	}
	memcpy(pc->digest, cr.hash.b, PFS_DIGEST_LEN);
	cstore_recent_put(p->st, r->fkey, index, answer_key(r, *shift), pc->digest, cr.len, seq);
	if (cr.source == PFS_CK_HELD) {
		pc->ch = cstore_find(p->st, pc->digest, &r->fh, index);
		if (pc->ch && pc->ch->mode != CK_FAILED)
			goto out;
		if (pc->ch)
			cstore_put(p->st, pc->ch);
		pc->ch = NULL;
		rpc_reply_free(&rep);
		if (lost) {
			rc = -EAGAIN;
			goto out;
		}
		lost = true; /* listed as holding a copy we no longer have */
		goto again;
	}
	pc->report = true;
	enum ck_mode mode = CK_COORD;
	if (cr.source == PFS_CK_PEER) {
		pc->src = cr.peer;
		pc->src_gen = cr.peer_gen;
		sa_of(cr.addr.p, cr.addr.len, (uint16_t)cr.port, &sa);
		mode = CK_PEER;
		if (peercli_off(p->cli)) {
			/* No peer could be reached lately (peercli_i.h): from
			 * the coordinator, without a word against the peer. */
			pc->src = NO_PEER;
			mode = CK_COORD;
		} else if (peercli_is_bad(p->cli, &sa)) {
			/* A peer this mount gave up on a moment ago: the
			 * coordinator forgets it for this chunk, and names
			 * another source (once). */
			report(r, pc, PFS_CKR_PEER_BAD);
			pc->src = NO_PEER;
			mode = CK_COORD;
			if (!avoided) {
				avoided = true;
				lost = true;
				rpc_reply_free(&rep);
				goto again;
			}
		}
	}
	bool created;
	pc->ch = cstore_make(p->st, pc->digest, cr.len, mode, &r->fh, index, &created, pc->gone,
			     &pc->ngone);
	if (!pc->ch) {
		rc = -ENOMEM; /* no room: the kernel READs it the usual way */
		report(r, pc, 0);
		pc->report = false;
		goto out;
	}
	pc->owner = created;
	/* The chunk is in the store: another thread's READ of it waits
	 * there, not for another question. */
	cstore_ask_done(p->st, r->fkey, index);
	*told = true;
	if (created && mode == CK_PEER)
		fetch_from_peer(r, pc, &sa);
out:
	rpc_reply_free(&rep);
	return rc;
}

/* Makes the bytes [from, to) of pc's chunk available (to the caller).
 * Returns 0, or an error (read without chunks). */
static int fill(struct rctx *r, struct piece *pc, uint32_t from, uint32_t to, unsigned shift)
{
	struct peer *p = r->p;
	int64_t peer_wait = pfs_mono_ms() + (int64_t)(r->c->peer_timeout * 1000) + 1000;

	uint64_t mine = 0;
	/* Waits while a peer fetch runs (at most as long as it may take),
	 * then for the slots other threads READ: as long as a READ takes
	 * (READing them again would cost the coordinator's link twice). */
	int rc = cstore_wait(p->st, pc->ch, peer_wait);
	if (rc == CK_COORD)
		rc = cstore_claim(p->st, pc->ch, from / CSTORE_SLOT, (to - 1) / CSTORE_SLOT, &mine,
				  -1);
	if (rc == CK_READY)
		return 0;
	if (rc < 0 || rc == CK_FAILED)
		return rc < 0 ? rc : -EIO;
	/* rc == 0: each slot is filled or ours to READ. */
	return fill_mine(r, pc, mine, shift);
}

/* After the kernel was answered: the owner completes its chunk (the
 * slots nobody READ), checks it and says how it ended; a listed reader
 * that joined another's chunk says whether it holds it. Drops pc->ch. */
static void finish(struct rctx *r, struct piece *pc, unsigned shift)
{
	struct peer *p = r->p;
	struct chunk *ch = pc->ch;
	uint32_t status = 0;

	for (unsigned i = 0; i < pc->ngone; i++)
		report_to(r->c, &pc->gone[i].fh, pc->gone[i].index, pc->gone[i].digest, 0, NO_PEER,
			  0);
	pc->ngone = 0;
	if (!ch)
		return;
	if (pc->owner && ch->mode == CK_COORD) {
		uint64_t mine = 0;
		int rc = cstore_claim(p->st, ch, 0, ch->nslots - 1, &mine, -1);
		if (rc == 0)
			rc = fill_mine(r, pc, mine, shift);
		if (rc == 0 && cstore_complete(p->st, ch)) {
			uint8_t got[PFS_DIGEST_LEN];
			if (pfs_sha256(ch->data, ch->len, got) == 0 &&
			    pfs_digest_equal(got, ch->digest)) {
				cstore_set_mode(p->st, ch, CK_READY);
				atomic_fetch_add_explicit(&p->coord_chunks, 1, memory_order_relaxed);
			} else {
				/* The file changed since CHUNK: what was read is
				 * good for its readers, not for peers. */
				atomic_fetch_add_explicit(&p->changed, 1, memory_order_relaxed);
				cstore_set_mode(p->st, ch, CK_FAILED);
			}
		} else if (rc != CK_READY) {
			cstore_set_mode(p->st, ch, CK_FAILED);
		}
	}
	if (pc->report) {
		if (ch->mode == CK_READY)
			status |= PFS_CKR_HAVE;
		if (pc->peer_bad)
			status |= PFS_CKR_PEER_BAD;
		else if (pc->peer_missing)
			status |= PFS_CKR_PEER_MISSING;
		report(r, pc, status);
	}
	cstore_put(p->st, ch);
	pc->ch = NULL;
}

bool peer_read(fuse_req_t req, struct ofile *of, size_t size, off_t off)
{
	struct client *c = CL(req);
	struct peer *p = c->peer;
	struct piece pcs[2];
	struct iovec iov[2];
	unsigned npc = 0, niov = 0;
	struct dver v;
	struct rctx r;
	bool answered = false;
	int rc = 0;

	/* Read-only opens only: through a file open for writing, its
	 * bytes are changing (a database, a file rewritten in place), and
	 * each READ after a write would cost a CHUNK, the digest of a whole
	 * chunk on the coordinator and the whole chunk read from it. */
	if (!p || size == 0 || size > PFS_MAX_IO || off < 0 || (of->flags & O_ACCMODE) != O_RDONLY)
		return false;
	bool known = inode_data_version(of->ip, &v);
	if (known && (v.size < c->peer_min || (uint64_t)off >= v.size))
		return false;
	if (!known || !transport_peer_ok(c->tr)) {
		if (!known) { /* its size when last seen */
			pthread_mutex_lock(&of->ip->lock);
			v.size = of->ip->attr.size;
			pthread_mutex_unlock(&of->ip->lock);
		}
		if (v.size >= c->peer_min)
			atomic_fetch_add_explicit(&p->skipped, size, memory_order_relaxed);
		return false;
	}
	r = (struct rctx){ .p = p, .c = c, .flags = of->flags };
	ops_file_req(req, of, &r.cr, &r.fh, &r.fid);
	r.fkey = pfs_hash_bytes(r.fh.data, r.fh.len, 0);
	r.vkey = pfs_hash_bytes(&v, sizeof(v), 0);
	if (nochunk_seen(p, r.fkey, &v))
		return false;

	unsigned shift = atomic_load(&p->shift);
	uint64_t end = (uint64_t)off + size;
	/* A READ (at most 1 MiB) lies in one chunk or two. A second one is
	 * asked for only if the first is whole: a shorter one is the last. */
	for (int attempt = 0; attempt < 2; attempt++) {
		uint64_t first = (uint64_t)off >> shift;
		npc = 0;
		rc = acquire(&r, &pcs[0], first, &shift, &v);
		if (rc == 0) {
			npc = 1;
			if (end > (first + 1) << shift && pcs[0].ch->len == 1u << shift) {
				rc = acquire(&r, &pcs[1], first + 1, &shift, &v);
				if (rc == 0)
					npc = 2;
				else if (rc == -ERANGE)
					rc = 0; /* the file ends with the first */
			}
		}
		if (rc != -ESTALE)
			break;
		for (unsigned k = 0; k < npc; k++)
			finish(&r, &pcs[k], shift);
		npc = 0;
	}
	/* The bytes of the request in each chunk, waiting for or READing
	 * the slots they lie in. */
	for (unsigned k = 0; rc == 0 && k < npc; k++) {
		uint64_t base = pcs[k].index << shift;
		uint64_t from = (uint64_t)off > base ? (uint64_t)off - base : 0;
		uint64_t to = end - base < pcs[k].ch->len ? end - base : pcs[k].ch->len;
		if (from >= to)
			break; /* the file ends before the request does */
		rc = fill(&r, &pcs[k], (uint32_t)from, (uint32_t)to, shift);
		if (rc == 0) {
			iov[niov].iov_base = pcs[k].ch->data + from;
			iov[niov].iov_len = (size_t)(to - from);
			niov++;
			if (to < pcs[k].ch->len)
				break;
		}
	}
	size_t n = niov ? iov[0].iov_len + (niov > 1 ? iov[1].iov_len : 0) : 0;
	/* A short answer tells the kernel the file ends there (it may cut
	 * its size): only where the version read says so. Chunks that end
	 * before it go the usual way. */
	if (rc == 0 && npc > 0 && n == (v.size - (uint64_t)off < size ? v.size - (uint64_t)off : size)) {
		/* Counted before the kernel has it: once the reader has its
		 * bytes, the stats include them. */
		atomic_fetch_add_explicit(&p->local_bytes, n, memory_order_relaxed);
		fuse_reply_iov(req, iov, (int)niov);
		answered = true;
		/* The kernel has its answer: what follows is this mount's
		 * own work, which must not stop if the caller dies. */
		killable_leave();
	} else {
		atomic_fetch_add_explicit(&p->fallbacks, 1, memory_order_relaxed);
	}
	for (unsigned k = 0; k < npc; k++)
		finish(&r, &pcs[k], shift);
	return answered;
}

size_t peer_format_stats(struct client *c, char *buf, size_t cap)
{
	struct peer *p = c->peer;
	struct cstore_stats cs;
	struct peersrv_stats ss = { 0 };
	struct peercli_stats cl;

	if (!p)
		return 0;
	cstore_stats(p->st, &cs);
	peercli_stats(p->cli, &cl);
	if (p->srv)
		peersrv_stats(p->srv, &ss);
	int n = snprintf(buf, cap,
			 "peer_port %u\npeer_read_peers %llu\npeer_read_coord %llu\npeer_answered %llu\n"
			 "peer_chunks_peers %llu\npeer_chunks_coord %llu\npeer_bad %llu\n"
			 "peer_failed %llu\npeer_changed %llu\npeer_fallbacks %llu\n"
			 "peer_store_bytes %llu\npeer_store_chunks %llu\npeer_store_evicted %llu\n"
			 "peer_served_bytes %llu\npeer_served_gets %llu\npeer_served_misses %llu\n"
			 "peer_served_conns %llu\npeer_refused_conns %llu\npeer_open_conns %llu\n"
			 "peer_served_miss_gone %llu\npeer_served_miss_absent %llu\n"
			 "peer_served_miss_late %llu\npeer_skipped %llu\npeer_unreachable %llu\n"
			 "peer_off %llu\n",
			 (unsigned)p->port,
			 (unsigned long long)atomic_load(&p->peer_bytes),
			 (unsigned long long)atomic_load(&p->coord_bytes),
			 (unsigned long long)atomic_load(&p->local_bytes),
			 (unsigned long long)atomic_load(&p->peer_chunks),
			 (unsigned long long)atomic_load(&p->coord_chunks),
			 (unsigned long long)atomic_load(&p->bad),
			 (unsigned long long)atomic_load(&p->failed),
			 (unsigned long long)atomic_load(&p->changed),
			 (unsigned long long)atomic_load(&p->fallbacks),
			 (unsigned long long)cs.bytes, (unsigned long long)cs.chunks,
			 (unsigned long long)cs.evicted, (unsigned long long)ss.bytes,
			 (unsigned long long)ss.gets, (unsigned long long)ss.misses,
			 (unsigned long long)ss.conns, (unsigned long long)ss.refused,
			 (unsigned long long)ss.open, (unsigned long long)cs.miss_gone,
			 (unsigned long long)cs.miss_absent, (unsigned long long)cs.miss_late,
			 (unsigned long long)atomic_load(&p->skipped),
			 (unsigned long long)cl.unreachable, (unsigned long long)cl.off);
	return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}
