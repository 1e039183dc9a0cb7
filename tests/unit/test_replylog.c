/* test_replylog.c: the reply cache's copy in the state directory
 * (daemon/replylog.c): a record packs and unpacks to the same reply; a
 * torn or altered one, one of another machine boot, and one too big for
 * a slot are refused; a new instance finds what the one before wrote
 * (the newer of two records of one request), on the same boot only, and
 * writes after the newest record, overwriting the oldest once the ring
 * is full; the file must be a regular file of podfsd's own, mode 0600.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "replylog_i.h"

static const uint8_t HDR[PFS_FRAME_HDR_SIZE] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
						 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24 };

static void test_pack(void)
{
	uint8_t slot[REPLYLOG_SLOT], wire[300];
	uint64_t seq = 0;

	for (size_t i = 0; i < sizeof wire; i++)
		wire[i] = (uint8_t)(i * 7);
	size_t n = replylog_pack(slot, 42, 9, 0xc11e, 77, PFS_OP_MKDIR, HDR, wire, sizeof wire, 500);
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
		CHECK(memcmp(p->hdr, HDR, sizeof HDR) == 0);
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
	CHECK_EQ(replylog_pack(slot, 1, 0, 1, 1, 1, HDR, big, REPLYLOG_MAX_WIRE, 0), (size_t)REPLYLOG_SLOT);
	CHECK((p = replylog_unpack(slot, 1, &seq)) != NULL);
	free(p);
	CHECK_EQ(replylog_pack(slot, 1, 0, 1, 1, 1, HDR, big, sizeof big, 0), 0);
	CHECK_EQ(replylog_pack(slot, 1, 0, 1, 1, 1, HDR, big, 10, PFS_MAX_PAYLOAD + 1), 0);
}

static char dir[] = "/tmp/test_replylog.XXXXXX";

static void put(struct replylog *rl, uint64_t cid, uint64_t id, uint8_t fill)
{
	uint8_t wire[100];

	memset(wire, fill, sizeof wire);
	replylog_put(rl, cid, id, PFS_OP_UNLINK, HDR, wire, sizeof wire, sizeof wire);
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
	replylog_put(&rl, 3, 1, PFS_OP_MKDIR, HDR, big, sizeof big, sizeof big);
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
	test_refused();
	return check_done("test_replylog");
}
