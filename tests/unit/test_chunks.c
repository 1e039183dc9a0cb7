/* test_chunks.c: podfsd's table of chunk digests and holders for
 * peer-assisted reads (daemon/chunks.c).
 *
 * Digests: taken once per chunk and version (tickets), kept, dropped by
 * a change, by another version, by a change seen while taking them;
 * files below the threshold; the chunk past the end; the memory bound.
 * Holders: sixteen clients starting at one chunk at once make a tree
 * under one coordinator copy (fan-out, depth); reports (have, bad peer,
 * strikes); fetches that are never reported expire; a client that lost
 * its copy; a session that goes loses every record; away peers; the
 * record limits.
 */
#include <errno.h>
#include <stdlib.h>

#include "check.h"
#include "chunks_i.h"

#define SHIFT 22
#define CS (1ull << SHIFT)

static struct chunks_conf conf(void)
{
	return (struct chunks_conf){
		.shift = SHIFT,
		.min_size = 64ull << 20,
		.max_bytes = 1u << 20,
		.fanout = 4,
		.fetch_ms = 10000,
		.per_peer = 1000,
	};
}

static struct chunk_ver ver(uint64_t size, int64_t mtime)
{
	return (struct chunk_ver){ .ino = 7, .size = size, .mtime_s = mtime, .ctime_s = mtime };
}

static void digest_of(uint64_t key, uint64_t idx, uint8_t d[PFS_DIGEST_LEN])
{
	for (unsigned i = 0; i < PFS_DIGEST_LEN; i++)
		d[i] = (uint8_t)(key * 31 + idx * 7 + i);
}

/* Gets the digest of (key, idx) at v, taking it if needed. */
static int get_digest(struct chunks *t, uint64_t key, const struct chunk_ver *v, uint64_t idx,
		      uint8_t d[PFS_DIGEST_LEN])
{
	struct chunk_ticket tk;
	int rc = chunks_digest(t, key, v, idx, d, &tk);

	if (rc != 1)
		return rc;
	digest_of(key, idx, d);
	return chunks_digest_done(t, &tk, d, v);
}

static void test_digests(void)
{
	struct chunks_conf c = conf();
	struct chunks *t = chunks_new(&c);
	struct chunk_ver v = ver(20 * CS + 5, 1);
	struct chunk_ticket tk;
	uint8_t d[PFS_DIGEST_LEN], want[PFS_DIGEST_LEN];
	struct chunks_stats st;

	/* First ask: the caller takes it; its bytes are the chunk's. */
	CHECK_EQ(chunks_digest(t, 1, &v, 20, d, &tk), 1);
	CHECK_EQ(tk.off, 20 * CS);
	CHECK_EQ(tk.len, 5);
	digest_of(1, 20, want);
	CHECK_EQ(chunks_digest_done(t, &tk, want, &v), 0);
	/* Then it is known. */
	CHECK_EQ(chunks_digest(t, 1, &v, 20, d, &tk), 0);
	CHECK_MEM(d, want, PFS_DIGEST_LEN);
	CHECK_EQ(chunks_digest(t, 1, &v, 3, d, &tk), 1);
	CHECK_EQ(tk.len, CS);
	/* A failed take leaves it unknown: the next asker takes it. */
	CHECK_EQ(chunks_digest_done(t, &tk, NULL, &v), -EAGAIN);
	CHECK_EQ(chunks_digest(t, 1, &v, 3, d, &tk), 1);
	chunks_digest_done(t, &tk, want, &v);
	/* Past the end, below the threshold, not a file's size. */
	CHECK_EQ(chunks_digest(t, 1, &v, 21, d, &tk), -ERANGE);
	struct chunk_ver small = ver(c.min_size - 1, 1);
	CHECK_EQ(chunks_digest(t, 2, &small, 0, d, &tk), -EOPNOTSUPP);
	struct chunk_ver huge = ver(1ull << 62, 1);
	CHECK_EQ(chunks_digest(t, 3, &huge, 0, d, &tk), -EOPNOTSUPP);

	/* A change drops the digests. */
	chunks_drop(t, 1);
	CHECK_EQ(chunks_digest(t, 1, &v, 20, d, &tk), 1);
	chunks_digest_done(t, &tk, want, &v);
	/* So does another version. */
	struct chunk_ver v2 = ver(20 * CS + 5, 2);
	CHECK_EQ(chunks_digest(t, 1, &v2, 20, d, &tk), 1);
	chunks_digest_done(t, &tk, want, &v2);
	CHECK_EQ(chunks_digest(t, 1, &v, 20, d, &tk), 1); /* v is gone: v2 replaced it */
	chunks_digest_done(t, &tk, want, &v);

	/* A drop while a digest is taken: it is not kept. */
	CHECK_EQ(chunks_digest(t, 1, &v, 4, d, &tk), 1);
	chunks_drop(t, 1);
	CHECK_EQ(chunks_digest_done(t, &tk, want, &v), -EAGAIN);
	CHECK_EQ(chunks_digest(t, 1, &v, 4, d, &tk), 1);
	/* The file seen at another version after the read: not kept. */
	CHECK_EQ(chunks_digest_done(t, &tk, want, &v2), -EAGAIN);
	CHECK_EQ(chunks_digest(t, 1, &v, 4, d, &tk), 1);
	chunks_digest_done(t, &tk, want, &v);

	chunks_stats(t, &st);
	CHECK(st.digests >= 5);
	CHECK(st.drops >= 3);
	CHECK_EQ(st.files, 1);
	chunks_free(t);
	chunks_free(NULL);
}

/* The memory bound: old files go, least recently used first. */
static void test_memory_bound(void)
{
	struct chunks_conf c = conf();
	struct chunks *t;
	struct chunks_stats st;
	uint8_t d[PFS_DIGEST_LEN];

	c.max_bytes = 64u << 10;
	t = chunks_new(&c);
	struct chunk_ver v = ver(200 * CS, 1); /* 200 chunks: ~8 KB each file */
	for (uint64_t k = 1; k <= 50; k++) {
		CHECK_EQ(get_digest(t, k, &v, 0, d), 0);
		CHECK_EQ(get_digest(t, 1, &v, 1, d), 0); /* file 1 stays the most recent */
		chunks_stats(t, &st);
		CHECK(st.bytes <= c.max_bytes);
	}
	chunks_stats(t, &st);
	CHECK(st.evictions > 0);
	CHECK(st.files < 50);
	struct chunk_ticket tk;
	CHECK_EQ(chunks_digest(t, 1, &v, 1, d, &tk), 0); /* still known */
	CHECK_EQ(chunks_digest(t, 2, &v, 0, d, &tk), 1);  /* forgotten */
	chunks_digest_done(t, &tk, NULL, &v);
	/* A file whose digests alone would take over half the table. */
	struct chunk_ver big = ver(100000 * CS, 1);
	CHECK_EQ(chunks_digest(t, 99, &big, 0, d, &tk), -EOPNOTSUPP);
	chunks_free(t);
}

static const uint8_t addr4[4] = { 10, 0, 0, 1 };

static int add_peer(struct chunks *t, uint64_t id)
{
	return chunks_peer_set(t, id, addr4, sizeof(addr4), (uint16_t)(5000 + id));
}

/* Sixteen serving clients ask for one chunk at once: one goes to the
 * coordinator, the others form a tree of fan-out 4 under it. */
static void test_tree(void)
{
	struct chunks_conf c = conf();
	struct chunks *t = chunks_new(&c);
	struct chunk_ver v = ver(100 * CS, 1);
	struct chunk_source src;
	uint8_t d[PFS_DIGEST_LEN];
	int peer[16], from[16];
	unsigned children[16] = { 0 }, to_server = 0;

	for (int i = 0; i < 16; i++)
		peer[i] = add_peer(t, 100 + (uint64_t)i);
	CHECK_EQ(get_digest(t, 9, &v, 0, d), 0);
	for (int i = 0; i < 16; i++) {
		CHECK_EQ(chunks_choose(t, 9, &v, 0, d, peer[i], false, 1000, &src), 0);
		from[i] = -1;
		if (src.kind == PFS_CK_SERVER) {
			to_server++;
			continue;
		}
		CHECK_EQ(src.kind, PFS_CK_PEER);
		CHECK_EQ(src.alen, 4);
		CHECK_MEM(src.addr, addr4, 4);
		for (int j = 0; j < 16; j++)
			if (peer[j] == (int)src.peer)
				from[i] = j;
		CHECK(from[i] >= 0 && from[i] != i);
		CHECK_EQ(src.port, 5000 + 100 + from[i]);
		children[from[i]]++;
	}
	CHECK_EQ(to_server, 1);
	CHECK_EQ(from[0], -1);
	for (int i = 0; i < 16; i++)
		CHECK(children[i] <= c.fanout);
	CHECK_EQ(children[0], c.fanout); /* the coordinator's copy serves the most */
	/* Depth: nobody is more than two hops below the coordinator's copy. */
	for (int i = 1; i < 16; i++)
		CHECK(from[i] == 0 || from[from[i]] == 0);

	/* Asking again while listed: held. */
	CHECK_EQ(chunks_choose(t, 9, &v, 0, d, peer[3], false, 1000, &src), 0);
	CHECK_EQ(src.kind, PFS_CK_HELD);
	/* Everyone reports: a seventeenth client goes to a holder, not the
	 * coordinator. */
	for (int i = 0; i < 16; i++)
		chunks_report(t, 9, 0, d, peer[i], PFS_CKR_HAVE, from[i] < 0 ? CHUNKS_NO_PEER :
			      (uint32_t)peer[from[i]], from[i] < 0 ? 0 : src.gen, 1100);
	int late = add_peer(t, 200);
	CHECK_EQ(chunks_choose(t, 9, &v, 0, d, late, false, 1200, &src), 0);
	CHECK_EQ(src.kind, PFS_CK_PEER);
	/* A client that serves nobody is sent to a holder, and not listed. */
	CHECK_EQ(chunks_choose(t, 9, &v, 0, d, -1, false, 1200, &src), 0);
	CHECK_EQ(src.kind, PFS_CK_PEER);
	/* Another digest (the file changed under the client): -EAGAIN. */
	uint8_t other[PFS_DIGEST_LEN];
	digest_of(1, 1, other);
	CHECK_EQ(chunks_choose(t, 9, &v, 0, other, peer[0], false, 1200, &src), -EAGAIN);
	struct chunks_stats st;
	chunks_stats(t, &st);
	CHECK_EQ(st.to_server, 1);
	CHECK_EQ(st.records, CHUNKS_HOLDERS); /* the late one is not listed: full */
	CHECK_EQ(st.reports_have, 16);
	chunks_free(t);
}

/* A peer reported bad: its record goes; three strikes and it is not
 * offered for a while. A fetch never reported expires. A client that
 * lost its copy is sent elsewhere. */
static void test_reports(void)
{
	struct chunks_conf c = conf();
	struct chunks *t = chunks_new(&c);
	struct chunk_ver v = ver(100 * CS, 1);
	struct chunk_source src;
	uint8_t d[PFS_DIGEST_LEN];
	int a = add_peer(t, 1), b = add_peer(t, 2), x = add_peer(t, 3);

	for (uint64_t i = 0; i < 4; i++)
		CHECK_EQ(get_digest(t, 5, &v, i, d), 0);
	/* a holds chunks 0..3. */
	for (uint64_t i = 0; i < 4; i++) {
		get_digest(t, 5, &v, i, d);
		CHECK_EQ(chunks_choose(t, 5, &v, i, d, a, false, 0, &src), 0);
		CHECK_EQ(src.kind, PFS_CK_SERVER);
		chunks_report(t, 5, i, d, a, PFS_CKR_HAVE, CHUNKS_NO_PEER, 0, 10);
	}
	/* b is sent to a for chunk 0, a fails: a's record goes, b falls back
	 * and now holds it. */
	get_digest(t, 5, &v, 0, d);
	CHECK_EQ(chunks_choose(t, 5, &v, 0, d, b, false, 20, &src), 0);
	CHECK_EQ(src.kind, PFS_CK_PEER);
	CHECK_EQ(src.peer, a);
	chunks_report(t, 5, 0, d, b, PFS_CKR_HAVE | PFS_CKR_PEER_BAD, src.peer, src.gen, 30);
	CHECK_EQ(chunks_choose(t, 5, &v, 0, d, x, false, 40, &src), 0);
	CHECK_EQ(src.peer, b);
	chunks_report(t, 5, 0, d, x, 0, src.peer, src.gen, 41); /* x gave up: not listed */
	/* Two more strikes against a: it is not offered any more. */
	for (uint64_t i = 1; i < 3; i++) {
		get_digest(t, 5, &v, i, d);
		CHECK_EQ(chunks_choose(t, 5, &v, i, d, b, false, 50, &src), 0);
		CHECK_EQ(src.peer, a);
		chunks_report(t, 5, i, d, b, PFS_CKR_PEER_BAD, src.peer, src.gen, 60);
	}
	get_digest(t, 5, &v, 3, d);
	CHECK_EQ(chunks_choose(t, 5, &v, 3, d, b, false, 70, &src), 0);
	CHECK_EQ(src.kind, PFS_CK_SERVER);
	/* ... until CHUNKS_BAD_MS passed. */
	chunks_report(t, 5, 3, d, b, 0, CHUNKS_NO_PEER, 0, 80);
	CHECK_EQ(chunks_choose(t, 5, &v, 3, d, x, false, 70 + CHUNKS_BAD_MS + 1, &src), 0);
	CHECK_EQ(src.peer, a);

	/* A fetch that is never reported: after fetch_ms the fetcher is no
	 * longer offered. */
	get_digest(t, 5, &v, 7, d);
	CHECK_EQ(chunks_choose(t, 5, &v, 7, d, a, false, 100000, &src), 0);
	CHECK_EQ(src.kind, PFS_CK_SERVER);
	CHECK_EQ(chunks_choose(t, 5, &v, 7, d, b, false, 100000 + c.fetch_ms, &src), 0);
	CHECK_EQ(src.peer, a);
	chunks_report(t, 5, 7, d, b, 0, src.peer, src.gen, 100001);
	CHECK_EQ(chunks_choose(t, 5, &v, 7, d, x, false, 100000 + c.fetch_ms + 1, &src), 0);
	CHECK_EQ(src.kind, PFS_CK_SERVER);

	/* A listed client that lost its copy: sent to another holder. */
	get_digest(t, 5, &v, 9, d);
	chunks_choose(t, 5, &v, 9, d, a, false, 200000, &src);
	chunks_report(t, 5, 9, d, a, PFS_CKR_HAVE, CHUNKS_NO_PEER, 0, 200001);
	chunks_choose(t, 5, &v, 9, d, b, false, 200002, &src);
	chunks_report(t, 5, 9, d, b, PFS_CKR_HAVE, src.peer, src.gen, 200003);
	CHECK_EQ(chunks_choose(t, 5, &v, 9, d, a, false, 200004, &src), 0);
	CHECK_EQ(src.kind, PFS_CK_HELD);
	CHECK_EQ(chunks_choose(t, 5, &v, 9, d, a, true, 200004, &src), 0);
	CHECK_EQ(src.kind, PFS_CK_PEER);
	CHECK_EQ(src.peer, b);
	/* A report about another digest is ignored. */
	uint8_t other[PFS_DIGEST_LEN];
	digest_of(77, 1, other);
	chunks_report(t, 5, 9, other, a, 0, CHUNKS_NO_PEER, 0, 200005);
	CHECK_EQ(chunks_choose(t, 5, &v, 9, d, a, false, 200006, &src), 0);
	CHECK_EQ(src.kind, PFS_CK_HELD);
	chunks_free(t);
}

/* Strikes: clients sent to one peer for one chunk that all fail count
 * once; a peer without the chunk (PFS_CKR_PEER_MISSING) is forgotten for
 * it without a strike; three chunks failed and the peer is offered to
 * nobody. */
static void test_strikes(void)
{
	struct chunks_conf c = conf();
	struct chunks *t = chunks_new(&c);
	struct chunk_ver v = ver(100 * CS, 1);
	struct chunk_source src;
	uint8_t d[PFS_DIGEST_LEN];
	int a = add_peer(t, 1), b = add_peer(t, 2), x = add_peer(t, 3), y = add_peer(t, 4);

	for (uint64_t i = 0; i < 8; i++) {
		CHECK_EQ(get_digest(t, 5, &v, i, d), 0);
		CHECK_EQ(chunks_choose(t, 5, &v, i, d, a, false, 0, &src), 0);
		chunks_report(t, 5, i, d, a, PFS_CKR_HAVE, CHUNKS_NO_PEER, 0, 10);
	}
	/* b, x and y sent to a for chunk 0, and a failed them all: one
	 * strike. */
	get_digest(t, 5, &v, 0, d);
	int who[3] = { b, x, y };
	struct chunk_source got[3];
	for (unsigned k = 0; k < 3; k++) {
		CHECK_EQ(chunks_choose(t, 5, &v, 0, d, who[k], false, 20, &got[k]), 0);
		CHECK_EQ(got[k].peer, a);
	}
	for (unsigned k = 0; k < 3; k++)
		chunks_report(t, 5, 0, d, who[k], PFS_CKR_PEER_BAD, got[k].peer, got[k].gen, 30);
	/* A peer that answers it does not hold chunks 1-3: forgotten there,
	 * no strike. */
	for (uint64_t i = 1; i < 4; i++) {
		get_digest(t, 5, &v, i, d);
		CHECK_EQ(chunks_choose(t, 5, &v, i, d, b, false, 40, &src), 0);
		CHECK_EQ(src.peer, a);
		chunks_report(t, 5, i, d, b, PFS_CKR_PEER_MISSING, src.peer, src.gen, 41);
		CHECK_EQ(chunks_choose(t, 5, &v, i, d, x, false, 42, &src), 0);
		CHECK_EQ(src.kind, PFS_CK_SERVER);
		chunks_report(t, 5, i, d, x, 0, CHUNKS_NO_PEER, 0, 43);
	}
	/* Still offered: a strike for chunk 4 (the second) and 5 (the third). */
	for (uint64_t i = 4; i < 6; i++) {
		get_digest(t, 5, &v, i, d);
		CHECK_EQ(chunks_choose(t, 5, &v, i, d, x, false, 50, &src), 0);
		CHECK_EQ(src.kind, PFS_CK_PEER);
		CHECK_EQ(src.peer, a);
		chunks_report(t, 5, i, d, x, PFS_CKR_PEER_BAD, src.peer, src.gen, 51);
	}
	get_digest(t, 5, &v, 6, d);
	CHECK_EQ(chunks_choose(t, 5, &v, 6, d, y, false, 60, &src), 0);
	CHECK_EQ(src.kind, PFS_CK_SERVER);
	chunks_free(t);
}

/* Among holders as busy as each other, the one that got the chunk last
 * (it drops it last); a busier one only when the others are busier. */
/* Only a client sent to a peer for a chunk may report that the peer
 * failed it: the reports of any other (a key holder naming every peer in
 * turn) neither strike the peer nor forget it as a holder. */
static void test_strikes_only_from_those_sent(void)
{
	struct chunks_conf c = conf();
	struct chunks *t = chunks_new(&c);
	struct chunk_ver v = ver(100 * CS, 1);
	struct chunk_source src;
	uint8_t d[PFS_DIGEST_LEN];
	int a = add_peer(t, 1), b = add_peer(t, 2), z = add_peer(t, 3);

	for (uint64_t i = 0; i < 8; i++) {
		CHECK_EQ(get_digest(t, 5, &v, i, d), 0);
		CHECK_EQ(chunks_choose(t, 5, &v, i, d, a, false, 0, &src), 0);
		chunks_report(t, 5, i, d, a, PFS_CKR_HAVE, CHUNKS_NO_PEER, 0, 10);
	}
	get_digest(t, 5, &v, 7, d);
	CHECK_EQ(chunks_choose(t, 5, &v, 7, d, b, false, 20, &src), 0);
	CHECK_EQ(src.peer, a);
	uint32_t gen = src.gen;
	chunks_report(t, 5, 7, d, b, PFS_CKR_HAVE, src.peer, src.gen, 21);
	for (uint64_t i = 0; i < 6; i++) {
		get_digest(t, 5, &v, i, d);
		chunks_report(t, 5, i, d, z, PFS_CKR_PEER_BAD, (uint32_t)a, gen, 30);
		chunks_report(t, 5, i, d, z, PFS_CKR_PEER_MISSING, (uint32_t)a, gen, 30);
	}
	for (uint64_t i = 0; i < 6; i++) {
		get_digest(t, 5, &v, i, d);
		CHECK_EQ(chunks_choose(t, 5, &v, i, d, b, false, 40, &src), 0);
		CHECK_EQ(src.kind, PFS_CK_PEER);
		CHECK_EQ(src.peer, a);
		chunks_report(t, 5, i, d, b, PFS_CKR_HAVE, src.peer, src.gen, 41);
	}
	chunks_free(t);
}

static void test_latest_holder(void)
{
	struct chunks_conf c = conf();
	struct chunks *t = chunks_new(&c);
	struct chunk_ver v = ver(100 * CS, 1);
	struct chunk_source src;
	uint8_t d[PFS_DIGEST_LEN];
	int a = add_peer(t, 1), b = add_peer(t, 2), x = add_peer(t, 3), y = add_peer(t, 4);

	CHECK_EQ(get_digest(t, 5, &v, 0, d), 0);
	CHECK_EQ(chunks_choose(t, 5, &v, 0, d, a, false, 10, &src), 0);
	chunks_report(t, 5, 0, d, a, PFS_CKR_HAVE, CHUNKS_NO_PEER, 0, 11);
	CHECK_EQ(chunks_choose(t, 5, &v, 0, d, b, false, 20, &src), 0);
	CHECK_EQ(src.peer, a);
	chunks_report(t, 5, 0, d, b, PFS_CKR_HAVE, src.peer, src.gen, 21);
	CHECK_EQ(chunks_choose(t, 5, &v, 0, d, x, false, 30, &src), 0);
	CHECK_EQ(src.peer, b);
	/* b serves x now: y goes to a. */
	CHECK_EQ(chunks_choose(t, 5, &v, 0, d, y, false, 31, &src), 0);
	CHECK_EQ(src.peer, a);
	chunks_free(t);
}

/* Sessions: away peers are skipped until they ask again; a gone one
 * loses every record and its number; limits on peers and records. */
static void test_peers(void)
{
	struct chunks_conf c = conf();
	struct chunks *t;
	struct chunk_ver v = ver(100 * CS, 1);
	struct chunk_source src;
	struct chunks_stats st;
	uint8_t d[PFS_DIGEST_LEN];
	static const uint8_t addr6[16] = { 0xfd, 0x77, [15] = 1 };

	c.per_peer = 3;
	t = chunks_new(&c);
	CHECK_EQ(chunks_peer_set(t, 1, addr4, 4, 0), -1);   /* port 0: serves nobody */
	CHECK_EQ(chunks_peer_set(t, 1, addr4, 3, 80), -1);  /* a bad address */
	int a = chunks_peer_set(t, 1, addr6, 16, 80);
	int b = add_peer(t, 2);
	CHECK(a >= 0 && b >= 0 && a != b);
	CHECK_EQ(chunks_peer_set(t, 1, addr6, 16, 81), a); /* the same number again */
	CHECK_EQ(chunks_peer_find(t, 1), a);
	CHECK_EQ(chunks_peer_find(t, 3), -1);
	for (uint64_t i = 0; i < 5; i++) {
		get_digest(t, 5, &v, i, d);
		chunks_choose(t, 5, &v, i, d, a, false, 0, &src);
		chunks_report(t, 5, i, d, a, PFS_CKR_HAVE, CHUNKS_NO_PEER, 0, 0);
	}
	chunks_stats(t, &st);
	CHECK_EQ(st.records, 3); /* per_peer */
	get_digest(t, 5, &v, 0, d);
	CHECK_EQ(chunks_choose(t, 5, &v, 0, d, b, false, 1, &src), 0);
	CHECK_EQ(src.kind, PFS_CK_PEER);
	CHECK_EQ(src.alen, 16);
	CHECK_EQ(src.port, 81);
	chunks_report(t, 5, 0, d, b, 0, src.peer, src.gen, 2);
	chunks_peer_away(t, 1);
	get_digest(t, 5, &v, 1, d);
	CHECK_EQ(chunks_choose(t, 5, &v, 1, d, b, false, 3, &src), 0);
	CHECK_EQ(src.kind, PFS_CK_SERVER);
	chunks_report(t, 5, 1, d, b, 0, CHUNKS_NO_PEER, 0, 4);
	chunks_peer_set(t, 1, addr6, 16, 81);
	get_digest(t, 5, &v, 2, d);
	CHECK_EQ(chunks_choose(t, 5, &v, 2, d, b, false, 5, &src), 0);
	CHECK_EQ(src.kind, PFS_CK_PEER);
	chunks_report(t, 5, 2, d, b, 0, src.peer, src.gen, 6);
	/* Gone: no records left, its number free again (another generation). */
	uint32_t gen = src.gen;
	chunks_peer_gone(t, 1);
	chunks_stats(t, &st);
	CHECK_EQ(st.records, 0);
	CHECK_EQ(chunks_peer_find(t, 1), -1);
	get_digest(t, 5, &v, 2, d);
	CHECK_EQ(chunks_choose(t, 5, &v, 2, d, b, false, 7, &src), 0);
	CHECK_EQ(src.kind, PFS_CK_SERVER); /* a's copy is forgotten */
	int a2 = chunks_peer_set(t, 9, addr4, 4, 80);
	CHECK_EQ(a2, a);
	chunks_choose(t, 5, &v, 3, d, -1, false, 8, &src);
	CHECK(src.gen != gen || src.kind != PFS_CK_PEER);
	chunks_peer_gone(t, 12345); /* unknown: a no-op */
	chunks_free(t);

	/* At most CHUNKS_PEERS serve at once. */
	t = chunks_new(&c);
	for (unsigned i = 0; i < CHUNKS_PEERS; i++)
		CHECK(add_peer(t, 1000 + i) >= 0);
	CHECK_EQ(add_peer(t, 99999), -1);
	chunks_peer_gone(t, 1000);
	CHECK(add_peer(t, 99999) >= 0);
	chunks_free(t);
}

/* A chunk lists at most CHUNKS_HOLDERS clients. */
static void test_holders_bound(void)
{
	struct chunks_conf c = conf();
	struct chunks *t;
	struct chunk_ver v = ver(100 * CS, 1);
	struct chunk_source src;
	struct chunks_stats st;
	uint8_t d[PFS_DIGEST_LEN];

	c.fanout = 1000;
	t = chunks_new(&c);
	get_digest(t, 5, &v, 0, d);
	for (unsigned i = 0; i < 3 * CHUNKS_HOLDERS; i++) {
		int p = add_peer(t, 50 + i);
		CHECK_EQ(chunks_choose(t, 5, &v, 0, d, p, false, 1, &src), 0);
		chunks_report(t, 5, 0, d, p, PFS_CKR_HAVE, src.peer, src.gen, 2);
	}
	chunks_stats(t, &st);
	CHECK_EQ(st.records, CHUNKS_HOLDERS);
	/* Dropping the file forgets them. */
	chunks_drop(t, 5);
	chunks_stats(t, &st);
	CHECK_EQ(st.records, 0);
	CHECK_EQ(st.files, 0);
	CHECK_EQ(st.bytes, 0);
	chunks_free(t);
}

int main(void)
{
	test_digests();
	test_memory_bound();
	test_tree();
	test_reports();
	test_strikes();
	test_strikes_only_from_those_sent();
	test_latest_holder();
	test_peers();
	test_holders_bound();
	return check_done("test_chunks");
}
