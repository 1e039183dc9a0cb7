/* test_codec_inplace.c: the codec's fields written in place (codec.h:
 * pfs_wr_skip, pfs_patch_*, pfs_bytes_open/close, pfs_put_BYTES_head),
 * with which podfsd builds READ and REVALIDATE replies and its listings.
 *
 * Each way of building a payload in place must give the very bytes the
 * generated encoder gives (READ copied and zero-copy, REVALIDATE), and
 * every function must refuse what does not fit or breaks a limit without
 * touching the cursor.
 */
#include <errno.h>
#include <stdlib.h>

#include "check.h"
#include "podfs/codec.h"

static void test_skip_patch(void)
{
	uint8_t buf[8];
	struct pfs_wr w;
	size_t at, at2;

	memset(buf, 0xee, sizeof(buf));
	pfs_wr_init(&w, buf, sizeof(buf));
	CHECK_EQ(pfs_wr_skip(&w, 1, &at), 0);
	CHECK_EQ(at, 0);
	CHECK_EQ(buf[0], 0); /* reserved bytes are zero until patched */
	CHECK_EQ(pfs_wr_skip(&w, 4, &at2), 0);
	CHECK_EQ(at2, 1);
	CHECK_EQ(w.len, 5);
	pfs_patch_U8(&w, at, 0x7f);
	pfs_patch_U32(&w, at2, 0x04030201);
	CHECK_EQ(buf[0], 0x7f);
	CHECK_EQ(buf[1], 1);
	CHECK_EQ(buf[4], 4);
	CHECK_EQ(w.len, 5);
	/* No room: refused, cursor unchanged. */
	CHECK_EQ(pfs_wr_skip(&w, 4, &at), -ENOBUFS);
	CHECK_EQ(w.len, 5);
	CHECK_EQ(pfs_wr_skip(&w, 3, &at), 0);
	CHECK_EQ(w.len, 8);
	CHECK_EQ(pfs_wr_skip(&w, 0, &at), 0);
	CHECK_EQ(pfs_wr_skip(&w, 1, &at), -ENOBUFS);
}

/* A READ reply read straight into the payload buffer. */
static void test_read_copied(void)
{
	static uint8_t a[64 + PFS_MAX_IO], b[64 + PFS_MAX_IO];
	struct pfs_read_rep rep, dec;
	struct pfs_wr w, ref;
	size_t sizes[] = { 0, 1, 4095, 65536, PFS_MAX_IO };
	uint64_t rnd = 3;
	size_t at;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		static uint8_t data[PFS_MAX_IO];

		test_fill_random(&rnd, data, n);
		pfs_wr_init(&w, a, 4 + n);
		CHECK_EQ(pfs_bytes_open(&w, &at), 0);
		memcpy(w.buf + w.len, data, n); /* as pread would */
		w.len += n;
		CHECK_EQ(pfs_bytes_close(&w, at), 0);

		rep.data.p = data;
		rep.data.len = (uint32_t)n;
		pfs_wr_init(&ref, b, sizeof(b));
		CHECK_EQ(pfs_enc_read_rep(&ref, &rep), 0);
		CHECK_EQ(w.len, ref.len);
		CHECK_MEM(a, b, ref.len);
		CHECK_EQ(pfs_dec_read_rep(a, w.len, &dec), 0);
		CHECK_EQ(dec.data.len, n);
	}
	/* Over the limit: -EINVAL, the length stays 0. */
	pfs_wr_init(&w, a, sizeof(a));
	CHECK_EQ(pfs_bytes_open(&w, &at), 0);
	w.len += PFS_MAX_IO + 1;
	CHECK_EQ(pfs_bytes_close(&w, at), -EINVAL);
	CHECK_EQ(a[0] | a[1] | a[2] | a[3], 0);
	/* No room for the length. */
	pfs_wr_init(&w, a, 3);
	CHECK_EQ(pfs_bytes_open(&w, &at), -ENOBUFS);
	CHECK_EQ(w.len, 0);
}

/* A zero-copy READ reply: the length in the payload, the data after it
 * on the wire. Together they are the bytes of pfs_enc_read_rep. */
static void test_read_zero_copy(void)
{
	static uint8_t data[PFS_MAX_IO], frame[4 + PFS_MAX_IO], ref[4 + PFS_MAX_IO];
	struct pfs_read_rep rep;
	struct pfs_wr w, r;
	uint8_t head[4];
	uint64_t rnd = 5;

	test_fill_random(&rnd, data, sizeof(data));
	for (size_t n = 0; n <= PFS_MAX_IO; n = n ? n * 4 : 1) {
		pfs_wr_init(&w, head, sizeof(head));
		CHECK_EQ(pfs_put_BYTES_head(&w, n), 0);
		CHECK_EQ(w.len, 4);
		memcpy(frame, head, 4);
		memcpy(frame + 4, data, n);
		rep.data.p = data;
		rep.data.len = (uint32_t)n;
		pfs_wr_init(&r, ref, sizeof(ref));
		CHECK_EQ(pfs_enc_read_rep(&r, &rep), 0);
		CHECK_EQ(r.len, 4 + n);
		CHECK_MEM(frame, ref, r.len);
	}
	pfs_wr_init(&w, head, sizeof(head));
	CHECK_EQ(pfs_put_BYTES_head(&w, PFS_MAX_IO + 1), -EINVAL);
	CHECK_EQ(w.len, 0);
	pfs_wr_init(&w, head, 3);
	CHECK_EQ(pfs_put_BYTES_head(&w, 1), -ENOBUFS);
	CHECK_EQ(w.len, 0);
}

/* A REVALIDATE reply: results packed in place into the BYTES field. */
static void test_revalidate(void)
{
	uint8_t a[4096], list[4096], b[8192];
	struct pfs_wr w, l, ref;
	struct pfs_revalidate_rep rep;
	struct pfs_reval_result res;
	struct pfs_rd rd;
	size_t at;
	int got = 0;

	pfs_wr_init(&w, a, sizeof(a));
	pfs_wr_init(&l, list, sizeof(list));
	CHECK_EQ(pfs_bytes_open(&w, &at), 0);
	for (uint32_t i = 0; i < 10; i++) {
		memset(&res, 0, sizeof(res));
		res.index = i * 3;
		res.status = i % 3 == 0 ? ESTALE : 0;
		res.attr.size = i * 1000;
		res.attr.mode = 0100644;
		CHECK_EQ(pfs_enc_reval_result(&w, &res), 0);
		CHECK_EQ(pfs_enc_reval_result(&l, &res), 0);
	}
	CHECK_EQ(pfs_bytes_close(&w, at), 0);

	rep.results.p = list;
	rep.results.len = (uint32_t)l.len;
	pfs_wr_init(&ref, b, sizeof(b));
	CHECK_EQ(pfs_enc_revalidate_rep(&ref, &rep), 0);
	CHECK_EQ(w.len, ref.len);
	CHECK_MEM(a, b, ref.len);

	CHECK_EQ(pfs_dec_revalidate_rep(a, w.len, &rep), 0);
	pfs_rd_init(&rd, rep.results.p, rep.results.len);
	while (pfs_dec_reval_result(&rd, &res) == 1)
		got++;
	CHECK_EQ(got, 10);

	/* An empty list. */
	pfs_wr_init(&w, a, sizeof(a));
	CHECK_EQ(pfs_bytes_open(&w, &at), 0);
	CHECK_EQ(pfs_bytes_close(&w, at), 0);
	CHECK_EQ(w.len, 4);
	CHECK_EQ(pfs_dec_revalidate_rep(a, w.len, &rep), 0);
	CHECK_EQ(rep.results.len, 0);
}

int main(void)
{
	test_skip_patch();
	test_read_copied();
	test_read_zero_copy();
	test_revalidate();
	return check_done("test_codec_inplace");
}
