/* gen_corpus.c: writes the seed corpus of the fuzz targets.
 *
 * Usage: gen_corpus DIR  (creates DIR/codec, DIR/frame, DIR/lz4). The
 * committed tests/fuzz/corpus was made with it; rerun it after adding a
 * message to codec.h. Seeds are valid inputs (one per message, a READDIR
 * reply, real frames), which is where mutation finds the edges fastest.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "podfs/codec.h"
#include "podfs/frame.h"

static int write_seed(const char *dir, const char *sub, const char *name, const void *p,
		      size_t n)
{
	char path[512];
	FILE *f;
	snprintf(path, sizeof path, "%s/%s", dir, sub);
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return -1;
	snprintf(path, sizeof path, "%s/%s/%s", dir, sub, name);
	f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n) {
		if (f)
			fclose(f);
		return -1;
	}
	return fclose(f) == 0 ? 0 : -1;
}

/* The smallest valid value of each field type, with a little content. */
static void min_U16(uint16_t *v) { *v = 1; }
static void min_U32(uint32_t *v) { *v = 0x01020304; }
static void min_U64(uint64_t *v) { *v = 0x1122334455667788u; }
static void min_I64(int64_t *v) { *v = -2; }
static void min_FH(struct pfs_fh *v) { v->len = 8; memcpy(v->data, "handle01", 8); }
static void min_NAME(struct pfs_name *v) { v->len = 4; memcpy(v->s, "file", 5); }
static void min_PATH(struct pfs_path *v) { v->len = 6; memcpy(v->s, "../t/x", 7); }
static void min_XNAME(struct pfs_xname *v) { v->len = 6; memcpy(v->s, "user.a", 7); }
static void min_HOST(struct pfs_host *v) { v->len = 4; memcpy(v->s, "node", 5); }
static void min_BYTES(struct pfs_bytes *v) { v->p = (const uint8_t *)"payload!"; v->len = 8; }
static void min_CREDS(struct pfs_creds *v) { v->uid = 1000; v->gid = 100; v->ngroups = 2; v->groups[0] = 4; v->groups[1] = 27; }
static void min_NONCE(struct pfs_nonce *v) { memset(v->b, 0x6e, sizeof v->b); }
static void min_MAC(struct pfs_mac *v) { memset(v->b, 0x6d, sizeof v->b); }
static void min_ATTR(struct pfs_attr *a) { a->ino = 2; a->size = 4096; a->mode = 0100644; a->nlink = 1; a->blksize = 4096; }
static void min_ENTRY(struct pfs_entry *e) { min_FH(&e->fh); min_ATTR(&e->attr); }

#define MIN_FIELD(T, f) min_##T(&m.f);
#define SEED_MSG(name)                                                              \
	{                                                                           \
		static struct pfs_##name m;                                         \
		memset(&m, 0, sizeof m);                                            \
		PFS_MSG_##name(MIN_FIELD) pfs_wr_init(&w, buf, sizeof buf);          \
		if (pfs_enc_##name(&w, &m) < 0 ||                                   \
		    write_seed(dir, "codec", #name, buf, w.len) < 0)                \
			return -1;                                                  \
	}

static int gen_codec(const char *dir)
{
	static uint8_t buf[8192];
	struct pfs_wr w;
	PFS_MESSAGES(SEED_MSG)
	if (write_seed(dir, "codec", "empty", "", 0) < 0)
		return -1;

	/* A READDIR reply: eof, ".", "..", and a readdirplus entry. */
	static struct pfs_dirent de;
	uint8_t eof = 1;
	pfs_wr_init(&w, buf, sizeof buf);
	pfs_put_U8(&w, &eof);
	memset(&de, 0, sizeof de);
	de.name.len = 1;
	memcpy(de.name.s, ".", 2);
	de.next_off = 1;
	de.ino = 2;
	de.mode = 0040000;
	pfs_enc_dirent(&w, &de);
	de.name.len = 2;
	memcpy(de.name.s, "..", 3);
	de.next_off = 2;
	pfs_enc_dirent(&w, &de);
	min_NAME(&de.name);
	de.next_off = 3;
	de.flags = PFS_DE_HAS_ENTRY;
	min_ENTRY(&de.e);
	if (pfs_enc_dirent(&w, &de) < 0)
		return -1;
	return write_seed(dir, "codec", "readdir_rep", buf, w.len);
}

static void sparse(uint8_t *p, size_t n)
{
	memset(p, 0, n);
	for (size_t i = 0; i + 4 <= n; i += 28) {
		float f = (float)(i % 97) / 4.0f;
		memcpy(p + i, &f, sizeof f);
	}
}

static int gen_frames(const char *dir)
{
	enum { N = 8192 };
	static uint8_t payload[N], frame[PFS_FRAME_HDR_SIZE + N + N / 255 + 16];
	static uint8_t scratch[N + N / 255 + 16];
	const void *wire;
	size_t wl;

	sparse(payload, N);
	wl = pfs_frame_prepare(frame, 5, PFS_OP_READ, PFS_FF_REPLY, 0, payload, N, PFS_CAP_LZ4,
			       scratch, sizeof scratch, &wire);
	memcpy(frame + PFS_FRAME_HDR_SIZE, wire, wl);
	if (write_seed(dir, "frame", "lz4_read_reply", frame, PFS_FRAME_HDR_SIZE + wl) < 0)
		return -1;

	wl = pfs_frame_prepare(frame, 6, PFS_OP_WRITE, 0, 0, payload, 64, PFS_CAPS_CODECS, scratch,
			       sizeof scratch, &wire);
	memcpy(frame + PFS_FRAME_HDR_SIZE, wire, wl);
	if (write_seed(dir, "frame", "raw_write", frame, PFS_FRAME_HDR_SIZE + wl) < 0)
		return -1;

	wl = pfs_frame_prepare(frame, 8, PFS_OP_WRITE, 0, 0, payload, N, PFS_CAPS_CODECS, scratch,
			       sizeof scratch, &wire);
	memcpy(frame + PFS_FRAME_HDR_SIZE, wire, wl);
	if (write_seed(dir, "frame", "zr_write", frame, PFS_FRAME_HDR_SIZE + wl) < 0)
		return -1;

	wl = pfs_frame_prepare(frame, 0, PFS_OP_INVAL_INODE, PFS_FF_PUSH, 0, NULL, 0, 0,
			       NULL, 0, &wire);
	if (write_seed(dir, "frame", "push_empty", frame, PFS_FRAME_HDR_SIZE) < 0)
		return -1;

	wl = pfs_frame_prepare(frame, 7, PFS_OP_LOOKUP, PFS_FF_REPLY, 2, NULL, 0, 0, NULL, 0,
			       &wire);
	return write_seed(dir, "frame", "error_reply", frame, PFS_FRAME_HDR_SIZE + wl);
}

static int gen_lz4(const char *dir)
{
	static uint8_t buf[4096];
	buf[0] = 0;
	sparse(buf + 1, sizeof buf - 1);
	if (write_seed(dir, "lz4", "raw_sparse", buf, sizeof buf) < 0)
		return -1;
	buf[0] = 1;
	buf[1] = 7;
	if (write_seed(dir, "lz4", "repeat_bytes", buf, 600) < 0)
		return -1;
	buf[0] = 2;
	buf[1] = 63;
	memcpy(buf + 2, "tensor weights 0.125 0.25 0.5", 29);
	if (write_seed(dir, "lz4", "tiled_text", buf, 31) < 0)
		return -1;
	for (size_t i = 1; i < sizeof buf; i++)
		buf[i] = (uint8_t)(i * 2654435761u >> 13);
	buf[0] = 0;
	return write_seed(dir, "lz4", "noise", buf, sizeof buf);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	if ((mkdir(argv[1], 0755) < 0 && errno != EEXIST) || gen_codec(argv[1]) < 0 ||
	    gen_frames(argv[1]) < 0 || gen_lz4(argv[1]) < 0) {
		fprintf(stderr, "%s: cannot write the corpus in %s\n", argv[0], argv[1]);
		return 1;
	}
	return 0;
}
