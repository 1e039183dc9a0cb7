/* test_replylog.c: the reply cache's copy in the state directory
 * (daemon/replylog.c): a record packs and unpacks to the same reply; a
 * torn or altered one, one of another machine boot, one whose frame
 * header does not say its request and payload, and one too big for a
 * slot are refused; a new instance finds what the one before wrote
 * (the newer of two records of one request), on the same boot only, and
 * writes after the newest record, overwriting the oldest once the ring
 * is full; the file must be a regular file of podfsd's own, mode 0600.
 * An append's record, written before its data, packs and unpacks, and a
 * new instance settles each one that has no reply: written (answered
 * later), cut short (the file cut back), not written or not checkable
 * (forgotten). A change begun is found until its reply comes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "podfs/crc32c.h"
#include "podfs/frame.h"
#include "podfs/le.h"
#include "replylog_i.h"

/* The header of a reply to id (op) of len wire bytes, raw before coding
 * (LZ4 when they differ), status status: in a static buffer. */
static const uint8_t *hdr(uint64_t id, uint16_t op, size_t len, size_t raw, int32_t status)
{
	static uint8_t out[PFS_FRAME_HDR_SIZE];
	struct pfs_frame_hdr h = { .wire_len = (uint32_t)len, .raw_len = (uint32_t)raw, .id = id,
				   .op = op, .status = status,
				   .flags = PFS_FF_REPLY | (len != raw ? PFS_FF_LZ4 : 0) };

	pfs_hdr_pack(out, &h);
	return out;
}

static void test_pack(void)
{
	uint8_t slot[REPLYLOG_SLOT], wire[300];
	uint64_t seq = 0;

	for (size_t i = 0; i < sizeof wire; i++)
		wire[i] = (uint8_t)(i * 7);
	const uint8_t *h = hdr(77, PFS_OP_MKDIR, sizeof wire, 500, 17);
	size_t n = replylog_pack(slot, 42, 9, 0xc11e, 77, PFS_OP_MKDIR, h, wire, sizeof wire, 500);
	CHECK_EQ(n, (size_t)(REPLYLOG_FIXED + PFS_FRAME_HDR_SIZE + sizeof wire));
	struct replylog_rec *p = replylog_unpack(slot, 42, &seq);
	CHECK(p != NULL);
	if (p) {
		CHECK_EQ(seq, 9);
		CHECK_EQ(p->seq, 9);
		CHECK_EQ(p->client_id, 0xc11e);
		CHECK_EQ(p->id, 77);
		CHECK_EQ(p->op, PFS_OP_MKDIR);
		CHECK_EQ(p->len, sizeof wire);
		CHECK_EQ(p->raw, 500);
		CHECK_EQ(p->status, 17);
		CHECK(memcmp(p->hdr, h, PFS_FRAME_HDR_SIZE) == 0);
		CHECK(memcmp(p->wire, wire, sizeof wire) == 0);
		free(p);
	}
	/* Another boot's, or any byte changed: not a record. */
	CHECK(replylog_unpack(slot, 43, &seq) == NULL);
	for (size_t i = 0; i < n; i += 13) {
		slot[i] ^= 0x20;
		CHECK(replylog_unpack(slot, 42, &seq) == NULL);
		slot[i] ^= 0x20;
	}
	CHECK((p = replylog_unpack(slot, 42, &seq)) != NULL);
	free(p);
	/* Empty; and the largest reply a slot holds, and one byte more. */
	memset(slot, 0, sizeof slot);
	CHECK(replylog_unpack(slot, 0, &seq) == NULL);
	static uint8_t big[REPLYLOG_MAX_WIRE + 1];
	h = hdr(1, PFS_OP_UNLINK, REPLYLOG_MAX_WIRE, REPLYLOG_MAX_WIRE, 0);
	CHECK_EQ(replylog_pack(slot, 1, 0, 1, 1, PFS_OP_UNLINK, h, big, REPLYLOG_MAX_WIRE,
			       REPLYLOG_MAX_WIRE), (size_t)REPLYLOG_SLOT);
	CHECK((p = replylog_unpack(slot, 1, &seq)) != NULL);
	free(p);
	CHECK_EQ(replylog_pack(slot, 1, 0, 1, 1, 1, h, big, sizeof big, sizeof big), 0);
	CHECK_EQ(replylog_pack(slot, 1, 0, 1, 1, 1, h, big, 10, PFS_MAX_PAYLOAD + 1), 0);
	/* A header that does not say the record's request, opcode, sizes,
	 * or that it is a reply: not a record. */
	static const struct { uint64_t id; uint16_t op; size_t len, raw; } bad[] = {
		{ 2, PFS_OP_UNLINK, 10, 10 }, { 1, PFS_OP_RMDIR, 10, 10 },
		{ 1, PFS_OP_UNLINK, 11, 11 }, { 1, PFS_OP_UNLINK, 10, 12 },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		h = hdr(bad[i].id, bad[i].op, bad[i].len, bad[i].raw, 0);
		CHECK(replylog_pack(slot, 1, 0, 1, 1, PFS_OP_UNLINK, h, big, 10, 10) > 0);
		CHECK(replylog_unpack(slot, 1, &seq) == NULL);
	}
	struct pfs_frame_hdr fh = { .wire_len = 10, .raw_len = 10, .id = 1, .op = PFS_OP_UNLINK };
	uint8_t req_hdr[PFS_FRAME_HDR_SIZE];
	pfs_hdr_pack(req_hdr, &fh);
	CHECK(replylog_pack(slot, 1, 0, 1, 1, PFS_OP_UNLINK, req_hdr, big, 10, 10) > 0);
	CHECK(replylog_unpack(slot, 1, &seq) == NULL);
}

static char dir[] = "/tmp/test_replylog.XXXXXX";

/* Host h's (NULL: of none) reply of cid's request id. */
static void host_put(struct replylog *rl, struct rlslots_host *h, uint64_t cid, uint64_t id,
		     uint8_t fill)
{
	uint8_t wire[100];

	memset(wire, fill, sizeof wire);
	replylog_put(rl, h, cid, id, PFS_OP_UNLINK,
		     hdr(id, PFS_OP_UNLINK, sizeof wire, sizeof wire, 0), wire, sizeof wire, sizeof wire);
}

static void put(struct replylog *rl, uint64_t cid, uint64_t id, uint8_t fill)
{
	host_put(rl, NULL, cid, id, fill);
}

static void test_instances(void)
{
	struct replylog rl;
	char err[256];

	CHECK(mkdtemp(dir) != NULL);
	CHECK_EQ(replylog_open(&rl, dir, 5, err, sizeof err), 0);
	CHECK_EQ(rl.n_old, 0);
	put(&rl, 1, 10, 'a');
	put(&rl, 1, 11, 'b');
	put(&rl, 2, 10, 'c');
	put(&rl, 1, 10, 'd'); /* the same request again: the later stands */
	static uint8_t big[REPLYLOG_MAX_WIRE + 1];
	replylog_put(&rl, NULL, 3, 1, PFS_OP_MKDIR,
		     hdr(1, PFS_OP_MKDIR, sizeof big, sizeof big, 0), big, sizeof big, sizeof big);
	CHECK_EQ(atomic_load(&rl.too_big), 1);
	CHECK_EQ(atomic_load(&rl.failed), 0);
	CHECK(replylog_find(&rl, 1, 10, PFS_OP_UNLINK) == NULL); /* this instance's own */
	replylog_close(&rl);

	CHECK_EQ(replylog_open(&rl, dir, 5, err, sizeof err), 0);
	CHECK_EQ(rl.n_old, 3);
	const struct replylog_rec *p = replylog_find(&rl, 1, 10, PFS_OP_UNLINK);
	CHECK(p && p->wire[0] == 'd');
	CHECK((p = replylog_find(&rl, 2, 10, PFS_OP_UNLINK)) && p->wire[0] == 'c');
	CHECK(replylog_find(&rl, 1, 10, PFS_OP_RMDIR) == NULL); /* another opcode */
	CHECK(replylog_find(&rl, 1, 12, PFS_OP_UNLINK) == NULL);
	CHECK(replylog_find(&rl, 3, 1, PFS_OP_MKDIR) == NULL);
	CHECK_EQ(atomic_load(&rl.seq), 4); /* after the newest */
	replylog_forget(&rl);
	CHECK(replylog_find(&rl, 1, 10, PFS_OP_UNLINK) == NULL);
	/* A full turn of the ring: the oldest go first. */
	for (unsigned i = 0; i < REPLYLOG_SLOTS; i++)
		put(&rl, 7, 1000 + i, (uint8_t)i);
	replylog_close(&rl);
	CHECK_EQ(replylog_open(&rl, dir, 5, err, sizeof err), 0);
	CHECK_EQ(rl.n_old, REPLYLOG_SLOTS);
	CHECK(replylog_find(&rl, 1, 11, PFS_OP_UNLINK) == NULL);
	CHECK(replylog_find(&rl, 7, 1000, PFS_OP_UNLINK) != NULL);
	CHECK(replylog_find(&rl, 7, 1000 + REPLYLOG_SLOTS - 1, PFS_OP_UNLINK) != NULL);
	replylog_close(&rl);
	/* Another machine boot: nothing is taken. */
	CHECK_EQ(replylog_open(&rl, dir, 6, err, sizeof err), 0);
	CHECK_EQ(rl.n_old, 0);
	CHECK_EQ(atomic_load(&rl.seq), 0);
	replylog_close(&rl);
}

/* test_appends' files: fh.data[0] names dir/f<n>. */
static int open_named(void *ctx, const struct pfs_fh *fh, int flags)
{
	char path[256];

	(void)ctx;
	snprintf(path, sizeof path, "%s/f%u", dir, fh->data[0]);
	int fd = open(path, flags | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static void file(unsigned n, const char *data)
{
	char path[256];

	snprintf(path, sizeof path, "%s/f%u", dir, n);
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, data, strlen(data)), (ssize_t)strlen(data));
	close(fd);
}

static long size_of(unsigned n)
{
	char path[256];
	struct stat st;

	snprintf(path, sizeof path, "%s/f%u", dir, n);
	return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static void intend(struct replylog *rl, uint64_t id, unsigned n, uint64_t at, const char *bytes)
{
	struct pfs_fh fh = { .len = 20 };

	memset(fh.data, 0x5a, fh.len);
	fh.data[0] = (uint8_t)n;
	replylog_intend(rl, NULL, 9, id, &fh, at, (uint32_t)strlen(bytes),
			pfs_crc32c(0, bytes, strlen(bytes)));
}

/* The record in slot[n] (of boot verf) with each slot[at[i]] set to to[i]
 * in turn, its checksum made right: refused. */
static void refused_changed(uint8_t *slot, size_t n, uint64_t verf, const size_t *at,
			    const uint8_t *to, size_t count)
{
	uint64_t seq;

	for (size_t i = 0; i < count; i++) {
		uint8_t was = slot[at[i]];
		slot[at[i]] = to[i];
		pfs_store_le32(slot + 4, pfs_crc32c(0, slot + 8, n - 8));
		CHECK(replylog_unpack(slot, verf, &seq) == NULL);
		slot[at[i]] = was;
	}
	pfs_store_le32(slot + 4, pfs_crc32c(0, slot + 8, n - 8));
}

static void test_append_records(void)
{
	uint8_t slot[REPLYLOG_SLOT];
	struct pfs_fh fh = { .len = PFS_FH_MAX };
	uint64_t seq = 0;

	for (unsigned i = 0; i < PFS_FH_MAX; i++)
		fh.data[i] = (uint8_t)(i + 3);
	size_t n = replylog_pack_append(slot, REPLYLOG_DROPPED, 8, 4, 0xc1, 66, &fh, 12345, 4096,
					0xdeadbeef);
	struct replylog_rec *p = replylog_unpack(slot, 8, &seq);
	CHECK(p && p->kind == REPLYLOG_DROPPED && p->at == 12345);
	free(p);
	n = replylog_pack_append(slot, REPLYLOG_APPEND, 8, 4, 0xc1, 66, &fh, 12345, 4096, 0xdeadbeef);
	CHECK_EQ(n, (size_t)(REPLYLOG_FIXED + PFS_FRAME_HDR_SIZE + REPLYLOG_APPEND_FIXED + PFS_FH_MAX));
	p = replylog_unpack(slot, 8, &seq);
	CHECK(p != NULL);
	if (p) {
		CHECK_EQ(p->kind, REPLYLOG_APPEND);
		CHECK_EQ(p->op, PFS_OP_WRITE);
		CHECK_EQ(p->client_id, 0xc1);
		CHECK_EQ(p->id, 66);
		CHECK_EQ(seq, 4);
		CHECK_EQ(p->at, 12345);
		CHECK_EQ(p->dlen, 4096);
		CHECK_EQ(p->dcrc, 0xdeadbeef);
		CHECK(!p->landed);
		CHECK(pfs_fh_equal(&p->fh, &fh));
		free(p);
	}
	for (size_t i = 0; i < n; i += 11) {
		slot[i] ^= 0x01;
		CHECK(replylog_unpack(slot, 8, &seq) == NULL);
		slot[i] ^= 0x01;
	}
	/* With the checksum made right: another opcode, another kind, a
	 * frame header that is not zero, a handle length that is not the
	 * record's, an offset past INT64_MAX. */
	static const size_t at[] = { 12, 14, REPLYLOG_FIXED + 3,
				     REPLYLOG_FIXED + PFS_FRAME_HDR_SIZE + 16,
				     REPLYLOG_FIXED + PFS_FRAME_HDR_SIZE + 7 };
	static const uint8_t to[] = { PFS_OP_MKDIR, 4, 1, 7, 0x80 };
	refused_changed(slot, n, 8, at, to, sizeof at / sizeof at[0]);
	CHECK((p = replylog_unpack(slot, 8, &seq)) != NULL);
	free(p);
	CHECK_EQ(replylog_pack_append(slot, REPLYLOG_REPLY, 8, 4, 1, 1, &fh, 0, 1, 0), 0);
	fh.len = 0;
	CHECK_EQ(replylog_pack_append(slot, REPLYLOG_APPEND, 8, 4, 1, 1, &fh, 0, 1, 0), 0);
}

/* A change begun: packed, read back, found by the next instance until
 * its reply's record comes after it; only the opcodes that take one. */
static void test_begun(void)
{
	uint8_t slot[REPLYLOG_SLOT];
	uint64_t seq = 0;
	struct replylog rl;
	char err[256];

	size_t n = replylog_pack_begun(slot, 3, 12, 0xab, 99, PFS_OP_RENAME, NULL);
	CHECK_EQ(n, (size_t)(REPLYLOG_FIXED + PFS_FRAME_HDR_SIZE));
	struct replylog_rec *p = replylog_unpack(slot, 3, &seq);
	CHECK(p && p->kind == REPLYLOG_BEGUN && p->op == PFS_OP_RENAME && p->id == 99 &&
	      p->client_id == 0xab && p->len == 0 && seq == 12);
	free(p);
	/* Not an opcode that takes one, a payload, a frame header. */
	static const size_t at[] = { 12, 52, REPLYLOG_FIXED + 2 };
	static const uint8_t to[] = { PFS_OP_WRITE, 1, 1 };
	refused_changed(slot, n, 3, at, to, sizeof at / sizeof at[0]);
	CHECK((p = replylog_unpack(slot, 3, &seq)) != NULL);
	free(p);
	CHECK(replylog_begins(PFS_OP_MKDIR) && replylog_begins(PFS_OP_CREATE) &&
	      replylog_begins(PFS_OP_UNLINK) && replylog_begins(PFS_OP_RMDIR) &&
	      replylog_begins(PFS_OP_RENAME));
	CHECK(replylog_begins(PFS_OP_MKNOD) && replylog_begins(PFS_OP_SYMLINK) &&
	      replylog_begins(PFS_OP_LINK) && replylog_begins(PFS_OP_SETXATTR) &&
	      replylog_begins(PFS_OP_REMOVEXATTR));
	CHECK(!replylog_begins(PFS_OP_WRITE) && !replylog_begins(PFS_OP_SETATTR) &&
	      !replylog_begins(PFS_OP_LOOKUP) && !replylog_begins(PFS_OP_OPEN));

	/* A rename's names what was at its old name (an exchange's): only a
	 * rename's, and only a handle of a valid length. */
	struct pfs_fh was = { .len = PFS_FH_MAX };
	for (unsigned i = 0; i < PFS_FH_MAX; i++)
		was.data[i] = (uint8_t)(i * 7 + 1);
	n = replylog_pack_begun(slot, 3, 13, 0xab, 100, PFS_OP_RENAME, &was);
	CHECK_EQ(n, (size_t)(REPLYLOG_FIXED + PFS_FRAME_HDR_SIZE + 1 + PFS_FH_MAX));
	CHECK((p = replylog_unpack(slot, 3, &seq)) != NULL);
	CHECK(p && p->kind == REPLYLOG_BEGUN && p->op == PFS_OP_RENAME && seq == 13 &&
	      pfs_fh_equal(&p->fh, &was));
	free(p);
	/* Another opcode, no handle, a handle longer than its record. */
	static const size_t at2[] = { 12, REPLYLOG_FIXED + PFS_FRAME_HDR_SIZE,
				      REPLYLOG_FIXED + PFS_FRAME_HDR_SIZE };
	static const uint8_t to2[] = { PFS_OP_MKDIR, 0, PFS_FH_MAX - 1 };
	refused_changed(slot, n, 3, at2, to2, sizeof at2 / sizeof at2[0]);
	CHECK((p = replylog_unpack(slot, 3, &seq)) != NULL);
	free(p);
	CHECK_EQ(replylog_pack_begun(slot, 3, 14, 0xab, 101, PFS_OP_MKDIR, &was), (size_t)0);
	struct pfs_fh none = { .len = 0 };
	CHECK_EQ(replylog_pack_begun(slot, 3, 14, 0xab, 101, PFS_OP_MKDIR, &none),
		 (size_t)(REPLYLOG_FIXED + PFS_FRAME_HDR_SIZE));

	CHECK_EQ(replylog_open(&rl, dir, 5, err, sizeof err), 0);
	replylog_begin(&rl, NULL, 4, 1, PFS_OP_MKDIR, NULL);
	replylog_begin(&rl, NULL, 4, 2, PFS_OP_UNLINK, NULL);
	put(&rl, 4, 2, 'u'); /* answered */
	replylog_begin(&rl, NULL, 4, 3, PFS_OP_RENAME, &was);
	replylog_close(&rl);
	CHECK_EQ(replylog_open(&rl, dir, 5, err, sizeof err), 0);
	const struct replylog_rec *q = replylog_find(&rl, 4, 1, PFS_OP_MKDIR);
	CHECK(q && q->kind == REPLYLOG_BEGUN && q->fh.len == 0);
	CHECK(replylog_find(&rl, 4, 1, PFS_OP_RMDIR) == NULL);
	CHECK((q = replylog_find(&rl, 4, 2, PFS_OP_UNLINK)) && q->kind == REPLYLOG_REPLY &&
	      q->wire[0] == 'u');
	CHECK((q = replylog_find(&rl, 4, 3, PFS_OP_RENAME)) && q->kind == REPLYLOG_BEGUN &&
	      pfs_fh_equal(&q->fh, &was));
	replylog_close(&rl);
}

/* The slots shared between hosts (rlslots_i.h): a host that makes
 * changes without end leaves another's records, begun and replies; the
 * records read at the start are a host's of their own, and free once
 * forgotten; a host's are free once it goes. */
static void test_hosts(void)
{
	struct replylog rl;
	struct rlslots_host quiet, flood;
	char err[256];

	CHECK_EQ(replylog_open(&rl, dir, 7, err, sizeof err), 0);
	replylog_host_add(&rl, &quiet);
	replylog_host_add(&rl, &flood);
	for (uint64_t i = 0; i < 10; i++)
		host_put(&rl, &quiet, 1, i, 'q');
	/* A change begun, then the flood, then another begun and answered. */
	replylog_begin(&rl, &quiet, 1, 10, PFS_OP_MKDIR, NULL);
	for (uint64_t i = 0; i < 3 * REPLYLOG_SLOTS; i++)
		host_put(&rl, &flood, 2, i, 'f');
	replylog_begin(&rl, &quiet, 1, 11, PFS_OP_UNLINK, NULL);
	host_put(&rl, &quiet, 1, 11, 'r');
	CHECK_EQ(quiet.n, 13);
	CHECK_EQ(flood.n, REPLYLOG_SLOTS - 13);
	replylog_close(&rl);

	CHECK_EQ(replylog_open(&rl, dir, 7, err, sizeof err), 0);
	const struct replylog_rec *p;
	CHECK_EQ(rl.n_old, REPLYLOG_SLOTS - 1); /* 1, 11's two records are one */
	for (uint64_t i = 0; i < 10; i++)
		CHECK((p = replylog_find(&rl, 1, i, PFS_OP_UNLINK)) && p->wire[0] == 'q');
	CHECK((p = replylog_find(&rl, 1, 10, PFS_OP_MKDIR)) && p->kind == REPLYLOG_BEGUN);
	CHECK((p = replylog_find(&rl, 1, 11, PFS_OP_UNLINK)) && p->kind == REPLYLOG_REPLY &&
	      p->wire[0] == 'r');
	/* The flood's newest are there, its oldest gone. */
	CHECK(replylog_find(&rl, 2, 3 * REPLYLOG_SLOTS - 1, PFS_OP_UNLINK) != NULL);
	CHECK(replylog_find(&rl, 2, 0, PFS_OP_UNLINK) == NULL);
	CHECK_EQ(rl.old_host.n, REPLYLOG_SLOTS - 1);
	/* The records read at the start are one host's: a new host takes
	 * the free slot, then from them, oldest first (the quiet host's). */
	struct rlslots_host late;
	replylog_host_add(&rl, &late);
	for (uint64_t i = 0; i < 11; i++)
		host_put(&rl, &late, 3, i, 'l');
	CHECK_EQ(rl.old_host.n, REPLYLOG_SLOTS - 11);
	replylog_forget(&rl);
	CHECK_EQ(rl.old_host.n, 0);
	CHECK_EQ(rl.slots.nfree, REPLYLOG_SLOTS - 11);
	replylog_host_remove(&rl, &late);
	CHECK_EQ(rl.slots.nfree, REPLYLOG_SLOTS);
	replylog_close(&rl);
	CHECK_EQ(replylog_open(&rl, dir, 7, err, sizeof err), 0);
	CHECK(replylog_find(&rl, 1, 0, PFS_OP_UNLINK) == NULL); /* the late host's took them */
	CHECK(replylog_find(&rl, 3, 10, PFS_OP_UNLINK) != NULL);
	replylog_close(&rl);

	/* A host gone: its slots are written again oldest first, so an
	 * append's record goes before its reply's (found alone, the next
	 * instance would settle the append again). */
	CHECK_EQ(replylog_open(&rl, dir, 8, err, sizeof err), 0);
	struct rlslots_host x, y;
	replylog_host_add(&rl, &x);
	replylog_host_add(&rl, &y);
	for (uint64_t i = 0; i < REPLYLOG_SLOTS - 2; i++)
		host_put(&rl, &y, 5, i, 'y');
	struct pfs_fh fh = { .len = 20 };
	replylog_intend(&rl, &x, 6, 1, &fh, 0, 4, 0);
	replylog_put(&rl, &x, 6, 1, PFS_OP_WRITE, hdr(1, PFS_OP_WRITE, 12, 12, 0),
		     (const uint8_t[12]){ 0 }, 12, 12);
	replylog_host_remove(&rl, &x);
	host_put(&rl, &y, 5, 1u << 20, 'z');
	replylog_close(&rl);
	CHECK_EQ(replylog_open(&rl, dir, 8, err, sizeof err), 0);
	CHECK((p = replylog_find(&rl, 6, 1, PFS_OP_WRITE)) && p->kind == REPLYLOG_REPLY);
	replylog_close(&rl);
}

/* The appends an instance began and did not answer, as the next one
 * finds them. */
static void test_appends(void)
{
	struct replylog rl;
	struct replylog_settled st;
	char err[256], path[256];

	snprintf(path, sizeof path, "%s/%s", dir, REPLYLOG_NAME);
	CHECK_EQ(unlink(path), 0); /* test_instances' records go */
	CHECK_EQ(replylog_open(&rl, dir, 5, err, sizeof err), 0);
	file(1, "xyyyy");  /* written */
	intend(&rl, 1, 1, 1, "yyyy");
	file(2, "x");      /* not written */
	intend(&rl, 2, 2, 1, "yyyy");
	file(3, "xyy");    /* cut short */
	intend(&rl, 3, 3, 1, "yyyy");
	file(4, "xzzzz");  /* something else there */
	intend(&rl, 4, 4, 1, "yyyy");
	intend(&rl, 5, 40, 1, "yyyy"); /* no such file */
	file(6, "xyyyy");  /* answered: its reply stands */
	intend(&rl, 6, 6, 1, "yyyy");
	put(&rl, 9, 6, 'r');
	file(7, "xaaaabb"); /* two appends: the first written, the second cut */
	intend(&rl, 7, 7, 1, "aaaa");
	intend(&rl, 8, 7, 5, "bbbb");
	replylog_close(&rl);

	CHECK_EQ(replylog_open(&rl, dir, 5, err, sizeof err), 0);
	CHECK_EQ(rl.n_old, 8);
	CHECK(replylog_find(&rl, 9, 1, PFS_OP_WRITE) == NULL); /* not settled yet */
	replylog_settle(&rl, open_named, NULL, &st);
	CHECK_EQ(st.landed, 2);
	CHECK_EQ(st.cut, 2);
	CHECK_EQ(st.missing, 2);
	CHECK_EQ(st.unknown, 1);
	CHECK_EQ(rl.n_old, 3);
	const struct replylog_rec *p = replylog_find(&rl, 9, 1, PFS_OP_WRITE);
	CHECK(p && p->kind == REPLYLOG_APPEND && p->landed && p->at == 1 && p->dlen == 4);
	CHECK(replylog_find(&rl, 9, 1, PFS_OP_UNLINK) == NULL);
	CHECK(replylog_find(&rl, 9, 2, PFS_OP_WRITE) == NULL);
	CHECK(replylog_find(&rl, 9, 3, PFS_OP_WRITE) == NULL);
	CHECK(replylog_find(&rl, 9, 4, PFS_OP_WRITE) == NULL);
	CHECK(replylog_find(&rl, 9, 5, PFS_OP_WRITE) == NULL);
	CHECK((p = replylog_find(&rl, 9, 6, PFS_OP_UNLINK)) && p->kind == REPLYLOG_REPLY);
	CHECK((p = replylog_find(&rl, 9, 7, PFS_OP_WRITE)) && p->landed);
	CHECK(replylog_find(&rl, 9, 8, PFS_OP_WRITE) == NULL);
	CHECK_EQ(size_of(1), 5);
	CHECK_EQ(size_of(2), 1);
	CHECK_EQ(size_of(3), 1); /* cut back to where the append began */
	CHECK_EQ(size_of(4), 5); /* not ours: left as it is */
	CHECK_EQ(size_of(7), 5);
	/* Settled once: nothing more to look at. */
	replylog_settle(&rl, open_named, NULL, &st);
	CHECK_EQ(st.landed + st.cut + st.missing + st.unknown, 0);
	CHECK_EQ(rl.n_old, 3);
	replylog_close(&rl);
	/* Another host appends those very bytes where append 2 began, and
	 * the instance after is killed before append 2 is sent again: the
	 * next one does not take them for append 2's (it was dropped), nor
	 * cuts file 3 again; appends 1 and 7 are still there. */
	file(2, "xyyyy");
	file(3, "xyy");
	CHECK_EQ(replylog_open(&rl, dir, 5, err, sizeof err), 0);
	replylog_settle(&rl, open_named, NULL, &st);
	CHECK_EQ(st.landed, 2);
	CHECK_EQ(st.cut + st.missing + st.unknown, 0);
	CHECK(replylog_find(&rl, 9, 2, PFS_OP_WRITE) == NULL);
	CHECK(replylog_find(&rl, 9, 1, PFS_OP_WRITE) != NULL);
	CHECK_EQ(size_of(3), 3);
	replylog_close(&rl);
	for (unsigned n = 1; n <= 7; n++) {
		snprintf(path, sizeof path, "%s/f%u", dir, n);
		unlink(path);
	}
}

static void test_refused(void)
{
	struct replylog rl;
	char err[256], path[256];

	snprintf(path, sizeof path, "%s/%s", dir, REPLYLOG_NAME);
	CHECK_EQ(chmod(path, 0620), 0);
	CHECK_EQ(replylog_open(&rl, dir, 5, err, sizeof err), -EPERM);
	CHECK(strstr(err, REPLYLOG_NAME) != NULL);
	replylog_close(&rl); /* safe after a refusal */
	CHECK_EQ(unlink(path), 0);
	CHECK_EQ(symlink("/etc/passwd", path), 0);
	CHECK(replylog_open(&rl, dir, 5, err, sizeof err) < 0);
	replylog_close(&rl);
	CHECK_EQ(unlink(path), 0);
	CHECK_EQ(mkdir(path, 0700), 0);
	CHECK(replylog_open(&rl, dir, 5, err, sizeof err) < 0);
	replylog_close(&rl);
	CHECK_EQ(rmdir(path), 0);
	CHECK_EQ(rmdir(dir), 0);
}

int main(void)
{
	test_pack();
	test_instances();
	test_append_records();
	test_begun();
	test_appends();
	test_hosts();
	test_refused();
	return check_done("test_replylog");
}
