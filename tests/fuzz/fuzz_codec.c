/* fuzz_codec.c: every payload decoder, and the READDIR entry iterator,
 * on arbitrary bytes.
 *
 * Properties: no decoder reads outside the input or crashes; and the
 * encoding is canonical, so whatever a decoder accepts re-encodes to the
 * very same bytes (an encoder/decoder disagreement on any limit shows up
 * here as a failed assertion).
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "podfs/codec.h"

union any_msg {
#define MSG_MEMBER(name) struct pfs_##name name;
	PFS_MESSAGES(MSG_MEMBER)
#undef MSG_MEMBER
};

static void check_reencode(int (*enc)(struct pfs_wr *, const void *), const void *m,
			   const uint8_t *data, size_t size)
{
	/* Exactly the input's size: a longer re-encoding fails -ENOBUFS. */
	uint8_t *out = malloc(size ? size : 1);
	struct pfs_wr w;
	FUZZ_ASSERT(out != NULL);
	pfs_wr_init(&w, out, size);
	FUZZ_ASSERT(enc(&w, m) == 0);
	FUZZ_ASSERT(w.len == size);
	FUZZ_ASSERT(memcmp(out, data, size) == 0);
	free(out);
}

#define MSG_ENC(name)                                                   \
	static int enc_##name(struct pfs_wr *w, const void *m)          \
	{                                                               \
		return pfs_enc_##name(w, m);                            \
	}
PFS_MESSAGES(MSG_ENC)
#undef MSG_ENC

static void fuzz_dirents(const uint8_t *data, size_t size)
{
	static struct pfs_dirent de;
	static uint8_t out[2048];
	struct pfs_rd r;
	struct pfs_wr w;
	uint8_t eof;
	int rc;

	pfs_rd_init(&r, data, size);
	if (!pfs_get_U8(&r, &eof))
		return;
	for (;;) {
		const uint8_t *start = r.p;
		rc = pfs_dec_dirent(&r, &de);
		FUZZ_ASSERT(rc == 1 || rc == 0 || rc == -EBADMSG);
		if (rc == 0)
			FUZZ_ASSERT(r.left == 0);
		if (rc <= 0)
			break;
		/* An accepted entry re-encodes to the bytes it was read from. */
		size_t used = (size_t)(r.p - start);
		FUZZ_ASSERT(used > 0 && used <= size);
		pfs_wr_init(&w, out, sizeof out);
		FUZZ_ASSERT(pfs_enc_dirent(&w, &de) == 0);
		FUZZ_ASSERT(w.len == used && memcmp(out, start, used) == 0);
	}
	/* Once bad, the cursor stays bad. */
	if (rc < 0)
		FUZZ_ASSERT(pfs_dec_dirent(&r, &de) == -EBADMSG);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static union any_msg m;
	int rc;

#define MSG_FUZZ(name)                                                        \
	rc = pfs_dec_##name(data, size, &m.name);                             \
	FUZZ_ASSERT(rc == 0 || rc == -EBADMSG);                               \
	if (rc == 0)                                                          \
		check_reencode(enc_##name, &m.name, data, size);
	PFS_MESSAGES(MSG_FUZZ)
#undef MSG_FUZZ

	fuzz_dirents(data, size);
	return 0;
}
