/* test_framer.c: podfsd's frame reader (daemon/framer.c).
 *
 * A frame split at every byte comes out whole, with the bytes after it
 * left; several frames in one read; a frame read directly into its
 * payload buffer; the size limit before and after AUTH; what is not a
 * request (a reply, a push, id 0, a status); PUSH_ACK only when
 * authenticated with PFS_CAP_PUSH_ACK, uncoded (the zero-word one of
 * 439ffd7), at most 64 bytes. Fuzzed further by tests/fuzz/fuzz_framer.c.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "framer_i.h"
#include "podfs/wire.h"

static const uint8_t zeros[PFS_MAX_HANDSHAKE + 1];

/* A frame: header h (wire_len = raw_len = len unless set) and payload. */
static size_t frame(uint8_t *out, struct pfs_frame_hdr h, const void *payload, size_t len)
{
	if (!h.wire_len)
		h.wire_len = (uint32_t)len;
	if (!h.raw_len)
		h.raw_len = (uint32_t)len;
	pfs_hdr_pack(out, &h);
	if (len)
		memcpy(out + PFS_FRAME_HDR_SIZE, payload, len);
	return PFS_FRAME_HDR_SIZE + len;
}

/* Feeds buf to a fresh reader in one go. Returns framer_feed's result,
 * with the header in *h and the payload freed. */
static int feed_all(const uint8_t *buf, size_t n, bool ready, uint64_t caps,
		    struct pfs_frame_hdr *h, const char **why)
{
	struct framer fr;
	const uint8_t *p = buf;
	int ret;

	memset(&fr, 0, sizeof(fr));
	*why = NULL;
	ret = framer_feed(&fr, h, ready, caps, &p, &n, why);
	if (ret > 0)
		payload_free(framer_take(&fr));
	framer_free(&fr);
	return ret;
}

static void test_split_everywhere(void)
{
	uint8_t buf[256], payload[40];
	struct pfs_frame_hdr h = { .id = 9, .op = PFS_OP_PING };
	size_t n;

	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)i;
	n = frame(buf, h, payload, sizeof(payload));
	buf[n] = 0xee; /* the next frame's first byte */
	for (size_t cut = 0; cut <= n; cut++) {
		struct framer fr;
		struct pfs_frame_hdr got;
		const char *why = NULL;
		const uint8_t *p = buf;
		size_t left = cut;
		uint8_t *pl;

		memset(&fr, 0, sizeof(fr));
		int ret = framer_feed(&fr, &got, true, 0, &p, &left, &why);
		if (cut == n) {
			CHECK_EQ(ret, 1);
		} else {
			CHECK_EQ(ret, 0);
			CHECK_EQ(left, 0);
			left = n + 1 - cut;
			ret = framer_feed(&fr, &got, true, 0, &p, &left, &why);
			CHECK_EQ(ret, 1);
		}
		CHECK_EQ(left, cut == n ? 0 : 1);
		CHECK_EQ(got.id, 9);
		CHECK_EQ(got.wire_len, sizeof(payload));
		pl = framer_take(&fr);
		CHECK(pl && memcmp(pl, payload, sizeof(payload)) == 0);
		payload_free(pl);
		CHECK(!fr.have_hdr && fr.hgot == 0 && !fr.pbuf);
	}
}

static void test_several_and_direct(void)
{
	static uint8_t buf[3 * PFS_FRAME_HDR_SIZE + 8 + 100000];
	static uint8_t big[100000];
	struct framer fr;
	struct pfs_frame_hdr got;
	const char *why;
	const uint8_t *p = buf;
	size_t n = 0, left, room;
	uint8_t *dst, *pl;

	memset(big, 0x5a, sizeof(big));
	n += frame(buf + n, (struct pfs_frame_hdr){ .id = 1, .op = PFS_OP_GOODBYE }, NULL, 0);
	n += frame(buf + n, (struct pfs_frame_hdr){ .id = 2, .op = PFS_OP_PING }, "12345678", 8);
	n += frame(buf + n, (struct pfs_frame_hdr){ .id = 3, .op = PFS_OP_WRITE }, big, sizeof(big));
	memset(&fr, 0, sizeof(fr));
	left = 2 * PFS_FRAME_HDR_SIZE + 8 + PFS_FRAME_HDR_SIZE + 10;
	CHECK_EQ(framer_feed(&fr, &got, true, 0, &p, &left, &why), 1);
	CHECK(got.id == 1 && got.wire_len == 0 && framer_take(&fr) == NULL);
	CHECK_EQ(framer_feed(&fr, &got, true, 0, &p, &left, &why), 1);
	CHECK_EQ(got.id, 2);
	payload_free(framer_take(&fr));
	CHECK(!framer_direct(&fr, &got, 64, &dst, &room)); /* no payload yet */
	CHECK_EQ(framer_feed(&fr, &got, true, 0, &p, &left, &why), 0);
	CHECK_EQ(got.id, 3);
	/* The rest goes straight into the payload's buffer... */
	CHECK(framer_direct(&fr, &got, 64, &dst, &room));
	CHECK_EQ(room, sizeof(big) - 10);
	CHECK(!framer_direct(&fr, &got, room + 1, &dst, &room));
	CHECK(framer_direct(&fr, &got, 64, &dst, &room));
	memcpy(dst, p, 50000);
	CHECK(!framer_direct_got(&fr, &got, 50000));
	CHECK(framer_direct(&fr, &got, 64, &dst, &room));
	CHECK_EQ(room, sizeof(big) - 50010);
	memcpy(dst, p + 50000, room);
	CHECK(framer_direct_got(&fr, &got, room));
	pl = framer_take(&fr);
	CHECK(pl && memcmp(pl, big, sizeof(big)) == 0);
	payload_free(pl);
}

static void test_limits_and_kinds(void)
{
	static uint8_t buf[PFS_FRAME_HDR_SIZE + PFS_MAX_HANDSHAKE + 1];
	struct pfs_frame_hdr got;
	const char *why;
	size_t n;

	/* Before AUTH a frame is small; after, up to PFS_MAX_PAYLOAD. */
	n = frame(buf, (struct pfs_frame_hdr){ .id = 1, .op = PFS_OP_HELLO }, zeros,
		  PFS_MAX_HANDSHAKE + 1);
	CHECK_EQ(feed_all(buf, n, false, 0, &got, &why), -1);
	CHECK_STR(why ? why : "(none)", "malformed frame header");
	CHECK_EQ(feed_all(buf, n, true, 0, &got, &why), 1);
	n = frame(buf, (struct pfs_frame_hdr){ .id = 1, .op = PFS_OP_HELLO }, zeros, PFS_MAX_HANDSHAKE);
	CHECK_EQ(feed_all(buf, n, false, 0, &got, &why), 1);

	/* Not requests. */
	struct pfs_frame_hdr bad[] = {
		{ .id = 1, .op = PFS_OP_PING, .flags = PFS_FF_REPLY },
		{ .id = 1, .op = PFS_OP_INVAL_INODE, .flags = PFS_FF_PUSH },
		{ .id = 0, .op = PFS_OP_PING },
		{ .id = 1, .op = PFS_OP_PING, .status = 5 },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		n = frame(buf, bad[i], "12345678", 8);
		CHECK_EQ(feed_all(buf, n, true, PFS_CAP_PUSH_ACK, &got, &why), -1);
		CHECK_STR(why ? why : "(none)", "not a request frame");
	}
}

static void test_push_ack(void)
{
	uint8_t buf[256];
	struct pfs_frame_hdr got, ack = { .op = PFS_OP_PUSH_ACK, .flags = PFS_FF_PUSH };
	const char *why;
	size_t n = frame(buf, ack, "\0\0\0\0\0\0\0\0", 8);

	CHECK_EQ(feed_all(buf, n, true, PFS_CAP_PUSH_ACK, &got, &why), 1);
	CHECK_EQ(feed_all(buf, n, true, 0, &got, &why), -1);     /* not negotiated */
	CHECK_EQ(feed_all(buf, n, false, PFS_CAP_PUSH_ACK, &got, &why), -1); /* before AUTH */
	ack.id = 4;
	n = frame(buf, ack, "\0\0\0\0\0\0\0\0", 8);
	CHECK_EQ(feed_all(buf, n, true, PFS_CAP_PUSH_ACK, &got, &why), -1);
	ack.id = 0;
	n = frame(buf, ack, zeros, 65);
	CHECK_EQ(feed_all(buf, n, true, PFS_CAP_PUSH_ACK, &got, &why), -1);
	/* Coded: one zero-word byte for 8 raw ones (commit 439ffd7). */
	ack.flags = PFS_FF_PUSH | PFS_FF_ZR;
	ack.raw_len = 8;
	n = frame(buf, ack, "\0", 1);
	CHECK_EQ(feed_all(buf, n, true, PFS_CAP_PUSH_ACK, &got, &why), -1);
	CHECK_STR(why ? why : "(none)", "not a request frame");
}

/* Payload buffers: a big one ends on a 4 KiB boundary, so a WRITE's data
 * (its tail) of a length O_DIRECT takes starts on one; every byte of each
 * is usable (AddressSanitizer would see a write outside it). */
static void test_payload_buffers(void)
{
	static const size_t sizes[] = { 1, 15, 16, 17, 4095, 4096, 65535, 65536, 65537,
					PFS_MAX_IO + 200, PFS_MAX_PAYLOAD };

	CHECK(payload_alloc(0) == NULL);
	payload_free(NULL);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		uint8_t *p = payload_alloc(n);
		CHECK(p != NULL);
		memset(p, 0xa5, n);
		if (n >= 65536)
			CHECK_EQ((uintptr_t)(p + n) % 4096, 0);
		else
			CHECK_EQ((uintptr_t)p % 16, 0);
		payload_free(p);
	}

	/* What the frame reader hands on is one of them. */
	static uint8_t buf[PFS_FRAME_HDR_SIZE + PFS_MAX_IO + 100];
	struct pfs_frame_hdr got;
	const char *why;
	size_t n = frame(buf, (struct pfs_frame_hdr){ .id = 9, .op = PFS_OP_WRITE, .wire_len = PFS_MAX_IO + 100,
					       .raw_len = PFS_MAX_IO + 100 },
		  NULL, 0);
	memset(buf + n, 7, PFS_MAX_IO + 100);
	struct framer fr = { 0 };
	const uint8_t *p = buf;
	size_t left = n + PFS_MAX_IO + 100;
	CHECK_EQ(framer_feed(&fr, &got, true, 0, &p, &left, &why), 1);
	uint8_t *pl = framer_take(&fr);
	CHECK(pl && (uintptr_t)(pl + PFS_MAX_IO + 100) % 4096 == 0 && pl[PFS_MAX_IO + 99] == 7);
	payload_free(pl);
}

int main(void)
{
	test_split_everywhere();
	test_several_and_direct();
	test_payload_buffers();
	test_limits_and_kinds();
	test_push_ack();
	return check_done("test_framer");
}
