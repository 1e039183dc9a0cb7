/* gen_corpus.c: writes the seed corpus of the fuzz targets.
 *
 * Usage: gen_corpus DIR  (creates DIR/codec, DIR/frame, DIR/lz4, for
 * podfsd's targets DIR/framer and DIR/handlers, and for podfs's
 * peer server DIR/peerproto and its listings DIR/listing). The
 * committed tests/fuzz/corpus was made with it; rerun it after adding a
 * message to codec.h. Seeds are valid inputs (one per message, a READDIR
 * reply, real frames), which is where mutation finds the edges fastest.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

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
static void min_DIGEST(struct pfs_digest *v) { memset(v->b, 0x64, sizeof v->b); }
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

/* --- podfsd's targets --- */

/* fuzz_framer: a connection's byte stream (see fuzz_framer.c). */
struct stream {
	uint8_t b[65536];
	size_t n;
};

static void put_frame(struct stream *st, uint64_t id, uint16_t op, uint16_t flags,
		      const void *payload, size_t len, unsigned codecs)
{
	static uint8_t scratch[PFS_MAX_HANDSHAKE + 32768];
	const void *wire;
	size_t wl = pfs_frame_prepare(st->b + st->n, id, op, flags, 0, payload, len, codecs,
				      scratch, sizeof scratch, &wire);

	st->n += PFS_FRAME_HDR_SIZE;
	if (wl)
		memcpy(st->b + st->n, wire, wl);
	st->n += wl;
}

static int gen_framer(const char *dir)
{
	static struct stream st;
	static uint8_t pl[16384];
	struct pfs_hello_req hello;
	struct pfs_auth_req auth;
	struct pfs_ping_req ping = { .stamp = 42 };
	struct pfs_push_ack ack = { .count = 0 };
	struct pfs_wr w;

	/* Unauthenticated: HELLO, AUTH, then requests and a PUSH_ACK. */
	memset(&hello, 0, sizeof hello);
	hello.magic = PFS_MAGIC;
	hello.version_min = hello.version_max = PFS_VERSION;
	hello.caps = PFS_CAP_PUSH_ACK;
	hello.client_id = 7;
	memset(hello.nonce.b, 1, sizeof hello.nonce.b);
	hello.hostname.len = 4;
	memcpy(hello.hostname.s, "node", 5);
	memset(&auth, 0, sizeof auth);
	memset(auth.mac.b, 2, sizeof auth.mac.b);
	st.n = 0;
	st.b[st.n++] = 2; /* PUSH_ACK negotiated */
	st.b[st.n++] = 0;
	pfs_wr_init(&w, pl, sizeof pl);
	pfs_enc_hello_req(&w, &hello);
	put_frame(&st, 1, PFS_OP_HELLO, 0, pl, w.len, 0);
	pfs_wr_init(&w, pl, sizeof pl);
	pfs_enc_auth_req(&w, &auth);
	put_frame(&st, 2, PFS_OP_AUTH, 0, pl, w.len, 0);
	pfs_wr_init(&w, pl, sizeof pl);
	pfs_enc_ping_req(&w, &ping);
	put_frame(&st, 3, PFS_OP_PING, 0, pl, w.len, 0);
	pfs_wr_init(&w, pl, sizeof pl);
	pfs_enc_push_ack(&w, &ack);
	put_frame(&st, 0, PFS_OP_PUSH_ACK, PFS_FF_PUSH, pl, w.len, 0);
	put_frame(&st, 4, PFS_OP_GOODBYE, 0, NULL, 0, 0);
	if (write_seed(dir, "framer", "handshake_then_requests", st.b, st.n) < 0)
		return -1;

	/* Authenticated, big payloads read directly: an LZ4 WRITE, a
	 * zero-word one, and a raw one of 16 KiB. */
	st.n = 0;
	st.b[st.n++] = 1 | 2 | 4;
	st.b[st.n++] = 0x5a;
	sparse(pl, sizeof pl);
	put_frame(&st, 5, PFS_OP_WRITE, 0, pl, 8192, PFS_CAP_LZ4);
	put_frame(&st, 6, PFS_OP_WRITE, 0, pl, 8192, PFS_CAPS_CODECS);
	put_frame(&st, 7, PFS_OP_WRITE, 0, pl, sizeof pl, 0);
	pfs_wr_init(&w, pl, sizeof pl);
	pfs_enc_push_ack(&w, &ack);
	put_frame(&st, 0, PFS_OP_PUSH_ACK, PFS_FF_PUSH, pl, w.len, 0);
	if (write_seed(dir, "framer", "coded_and_big", st.b, st.n) < 0)
		return -1;

	/* The coded PUSH_ACK of commit 439ffd7 (one zero-word byte for 8
	 * raw ones): a violation. */
	struct pfs_frame_hdr h = { .op = PFS_OP_PUSH_ACK, .flags = PFS_FF_PUSH | PFS_FF_ZR,
				   .wire_len = 1, .raw_len = 8 };
	st.n = 0;
	st.b[st.n++] = 1 | 2;
	st.b[st.n++] = 0;
	pfs_hdr_pack(st.b + st.n, &h);
	st.n += PFS_FRAME_HDR_SIZE;
	st.b[st.n++] = 0;
	return write_seed(dir, "framer", "coded_push_ack", st.b, st.n);
}

/* fuzz_handlers: records of requests (see fuzz_handlers.c). */
#define FH(k) ((struct pfs_fh){ .len = 1, .data = { 0xf0 | (k) } })
#define NM(x) ((struct pfs_name){ .len = sizeof(x) - 1, .s = x })
#define XN(x) ((struct pfs_xname){ .len = sizeof(x) - 1, .s = x })
#define PA(x) ((struct pfs_path){ .len = sizeof(x) - 1, .s = x })
#define BY(x) ((struct pfs_bytes){ .p = (const uint8_t *)(x), .len = sizeof(x) - 1 })
#define ROOT ((struct pfs_creds){ .uid = 0, .gid = 0 })
#define USER ((struct pfs_creds){ .uid = 1000, .gid = 1000, .ngroups = 1, .groups = { 100 } })
/* The known handles of fuzz_handlers.c. */
enum { S_ROOT, S_A, S_D, S_DF, S_PRIV, S_UP, S_ABS, S_NEW };

static const uint16_t all_ops[] = {
#define OPS_ROW(n, v, ...) PFS_OP_##n,
	PFS_OPS(OPS_ROW)
#undef OPS_ROW
};

static uint8_t op_index(uint16_t op)
{
	for (size_t i = 0; i < sizeof all_ops / sizeof all_ops[0]; i++)
		if (all_ops[i] == op)
			return (uint8_t)i;
	return 0xff;
}

static void put_rec(struct stream *st, uint16_t op, uint8_t flags, const void *p, size_t len)
{
	st->b[st->n++] = op_index(op);
	st->b[st->n++] = flags;
	st->b[st->n++] = (uint8_t)len;
	st->b[st->n++] = (uint8_t)(len >> 8);
	if (len)
		memcpy(st->b + st->n, p, len);
	st->n += len;
}

/* A record with the record flags fl (see fuzz_handlers.c). */
#define RECF(st, fl, OP, name, ...)                                                \
	do {                                                                       \
		static uint8_t pl_[4096];                                          \
		struct pfs_##name m_ = { __VA_ARGS__ };                            \
		struct pfs_wr w_;                                                  \
		pfs_wr_init(&w_, pl_, sizeof pl_);                                 \
		if (pfs_enc_##name(&w_, &m_) < 0)                                  \
			return -1;                                                 \
		put_rec(st, PFS_OP_##OP, fl, pl_, w_.len);                         \
	} while (0)
#define REC(st, OP, name, ...) RECF(st, 0, OP, name, __VA_ARGS__)
#define SEED(name)                                                                  \
	do {                                                                        \
		if (write_seed(dir, "handlers", name, st.b, st.n) < 0)             \
			return -1;                                                  \
		st.n = 0;                                                           \
	} while (0)

static int gen_handlers(const char *dir)
{
	static struct stream st;
	static uint8_t fhs[64], coded[PFS_FRAME_HDR_SIZE], scratch[4096];
	struct pfs_wr w;
	struct pfs_reval_item it;

	st.n = 0;
	REC(&st, PING, ping_req, .stamp = 1);
	SEED("ping");
	put_rec(&st, PFS_OP_AUTH, 0, NULL, 0);
	SEED("auth");
	put_rec(&st, PFS_OP_HELLO, 0, NULL, 0);
	put_rec(&st, PFS_OP_GOODBYE, 0, NULL, 0);
	put_rec(&st, PFS_OP_PUSH_ACK, 0, NULL, 0);
	SEED("loop_only");
	REC(&st, LOOKUP, lookup_req, .cr = USER, .parent = FH(S_ROOT), .name = NM("a"));
	REC(&st, GETATTR, getattr_req, .cr = USER, .fh = FH(S_NEW));
	SEED("lookup_getattr");
	REC(&st, SETATTR, setattr_req, .cr = USER, .fh = FH(S_A), .valid = PFS_SET_MODE | PFS_SET_SIZE,
	    .mode = 0600, .size = 3);
	SEED("setattr");
	REC(&st, READLINK, readlink_req, .cr = USER, .fh = FH(S_UP));
	SEED("readlink");
	REC(&st, MKNOD, mknod_req, .cr = USER, .parent = FH(S_D), .name = NM("fifo"),
	    .mode = S_IFIFO | 0644, .umask = 022);
	SEED("mknod_fifo");
	REC(&st, MKNOD, mknod_req, .cr = USER, .parent = FH(S_D), .name = NM("null"),
	    .mode = S_IFCHR | 0666, .rdev = (uint32_t)makedev(1, 3));
	SEED("mknod_chardev_user");
	REC(&st, MKDIR, mkdir_req, .cr = USER, .parent = FH(S_D), .name = NM("sub"), .mode = 0755);
	REC(&st, RMDIR, unlink_req, .cr = USER, .parent = FH(S_D), .name = NM("sub"));
	SEED("mkdir_rmdir");
	REC(&st, SYMLINK, symlink_req, .cr = USER, .parent = FH(S_D), .name = NM("ln"),
	    .target = PA("../../sentinel"));
	REC(&st, UNLINK, unlink_req, .cr = USER, .parent = FH(S_D), .name = NM("f"));
	SEED("symlink_unlink");
	REC(&st, RENAME, rename_req, .cr = ROOT, .parent = FH(S_ROOT), .name = NM("a"),
	    .newparent = FH(S_D), .newname = NM("b"));
	REC(&st, LINK, link_req, .cr = ROOT, .fh = FH(S_A), .newparent = FH(S_PRIV),
	    .newname = NM("hard"));
	SEED("rename_link");
	REC(&st, OPEN, open_req, .cr = USER, .fh = FH(S_A), .fid = 1, .flags = O_RDWR);
	REC(&st, READ, read_req, .cr = USER, .fh = FH(S_A), .fid = 1, .offset = 4, .size = 100);
	REC(&st, WRITE, write_req, .cr = USER, .fh = FH(S_A), .fid = 1, .offset = 10,
	    .data = BY("written"));
	REC(&st, LSEEK, lseek_req, .cr = USER, .fh = FH(S_A), .fid = 1, .offset = 0, .whence = 3);
	REC(&st, FALLOCATE, fallocate_req, .cr = USER, .fh = FH(S_A), .fid = 1, .offset = 0,
	    .length = 8192);
	REC(&st, FSYNC, fsync_req, .cr = USER, .fh = FH(S_A), .fid = 1, .datasync = 1);
	REC(&st, RELEASE, release_req, .cr = USER, .fh = FH(S_A), .fid = 1);
	SEED("open_read_write");
	/* FALLOCATE for a session with PFS_CAP_POST_ATTR (record flag 16):
	 * the attributes after it come back. */
	REC(&st, OPEN, open_req, .cr = USER, .fh = FH(S_A), .fid = 1, .flags = O_RDWR);
	RECF(&st, 16, FALLOCATE, fallocate_req, .cr = USER, .fh = FH(S_A), .fid = 1, .offset = 0,
	     .length = 8192);
	REC(&st, RELEASE, release_req, .cr = USER, .fh = FH(S_A), .fid = 1);
	SEED("fallocate_post_attr");
	REC(&st, CREATE, create_req, .cr = USER, .parent = FH(S_D), .name = NM("new"), .fid = 2,
	    .flags = O_RDWR | O_CREAT | O_EXCL, .mode = 0644, .umask = 022);
	REC(&st, WRITE, write_req, .cr = USER, .fh = FH(S_NEW), .fid = 2, .offset = 0,
	    .data = BY("new data"));
	REC(&st, READ, read_req, .cr = USER, .fh = FH(S_NEW), .fid = 2, .offset = 0, .size = 4096);
	REC(&st, RELEASE, release_req, .cr = USER, .fh = FH(S_NEW), .fid = 2);
	SEED("create_write_read");
	/* A copy on the server: from fid 1 (opened) to the new file's fid 2
	 * (not opened: by handle, as for WRITE), then within one file. */
	REC(&st, OPEN, open_req, .cr = USER, .fh = FH(S_A), .fid = 1, .flags = O_RDONLY);
	REC(&st, CREATE, create_req, .cr = USER, .parent = FH(S_D), .name = NM("copy"), .fid = 2,
	    .flags = O_RDWR | O_CREAT | O_EXCL, .mode = 0644, .umask = 022);
	REC(&st, COPY_RANGE, copy_range_req, .cr = USER, .src = FH(S_A), .src_fid = 1,
	    .src_flags = O_RDONLY, .src_off = 2, .dst = FH(S_NEW), .dst_fid = 3,
	    .dst_flags = O_WRONLY, .dst_off = 4096, .length = 1u << 30);
	REC(&st, COPY_RANGE, copy_range_req, .cr = USER, .src = FH(S_A), .src_fid = 1,
	    .src_flags = O_RDONLY, .src_off = 0, .dst = FH(S_A), .dst_fid = 1,
	    .dst_flags = O_RDONLY, .dst_off = 1, .length = 10);
	REC(&st, RELEASE, release_req, .cr = USER, .fh = FH(S_A), .fid = 1);
	SEED("copy_range");
	/* A delegation (flags 64: PFS_CAP_DELEG, 4: PFS_CAP_DIR_ATTR):
	 * granted by CREATE, a change under it, the other session (flag
	 * 128) looking the file up and listing the directory (held back for
	 * a recall), the same session's release. */
	RECF(&st, 64 | 4, CREATE, create_req, .cr = ROOT, .parent = FH(S_D), .name = NM("dl"),
	     .fid = 2, .flags = O_RDWR | O_CREAT | O_EXCL, .mode = 0600, .umask = 022);
	RECF(&st, 64 | 4, SETATTR, setattr_req, .cr = ROOT, .fh = FH(S_NEW),
	     .valid = PFS_SET_MODE | PFS_SET_UID | PFS_SET_MTIME | PFS_SET_DELEG, .mode = 0640,
	     .uid = 1000, .mtime_s = 1);
	RECF(&st, 128, LOOKUP, lookup_req, .cr = USER, .parent = FH(S_D), .name = NM("dl"));
	RECF(&st, 128, LISTDIR, listdir_req, .cr = USER, .fh = FH(S_D), .max_bytes = 65536);
	RECF(&st, 128 | 64 | 4, SETATTR, setattr_req, .cr = ROOT, .fh = FH(S_NEW),
	     .valid = PFS_SET_MODE | PFS_SET_DELEG, .mode = 0600);
	RECF(&st, 64 | 4, RELEASE, release_req, .cr = ROOT, .fh = FH(S_NEW), .fid = 2);
	SEED("delegation");
	/* Changes that may take rights away from the other session (flag
	 * 128), which caches the file: held back while it is forewarned. */
	RECF(&st, 128, GETATTR, getattr_req, .cr = USER, .fh = FH(S_A));
	REC(&st, SETATTR, setattr_req, .cr = ROOT, .fh = FH(S_A), .valid = PFS_SET_MODE, .mode = 0600);
	REC(&st, SETATTR, setattr_req, .cr = ROOT, .fh = FH(S_A), .valid = PFS_SET_UID | PFS_SET_GID,
	    .uid = 1000, .gid = 100);
	REC(&st, SETXATTR, setxattr_req, .cr = ROOT, .fh = FH(S_A),
	    .name = XN("system.posix_acl_access"), .value = BY("not an acl"));
	REC(&st, REMOVEXATTR, removexattr_req, .cr = ROOT, .fh = FH(S_A),
	    .name = XN("system.posix_acl_access"));
	SEED("rights_forewarn");
	REC(&st, OPENDIR, open_req, .cr = USER, .fh = FH(S_ROOT), .fid = 3, .flags = O_RDONLY);
	REC(&st, READDIR, readdir_req, .cr = USER, .fh = FH(S_ROOT), .fid = 3, .max_bytes = 4096,
	    .plus = 1);
	REC(&st, RELEASEDIR, release_req, .cr = USER, .fh = FH(S_ROOT), .fid = 3);
	SEED("opendir_readdir");
	REC(&st, STATFS, statfs_req, .cr = USER, .fh = FH(S_ROOT));
	SEED("statfs");
	REC(&st, SETXATTR, setxattr_req, .cr = USER, .fh = FH(S_A), .name = XN("user.x"),
	    .value = BY("v"));
	REC(&st, GETXATTR, getxattr_req, .cr = USER, .fh = FH(S_A), .name = XN("user.x"), .size = 64);
	REC(&st, LISTXATTR, listxattr_req, .cr = USER, .fh = FH(S_A), .size = 64);
	REC(&st, REMOVEXATTR, removexattr_req, .cr = USER, .fh = FH(S_A), .name = XN("user.x"));
	SEED("xattrs");
	REC(&st, SETXATTR, setxattr_req, .cr = USER, .fh = FH(S_A), .name = XN("trusted.t"),
	    .value = BY("v"));
	SEED("xattr_trusted_user");
	REC(&st, OPEN, open_req, .cr = USER, .fh = FH(S_A), .fid = 4, .flags = O_RDWR);
	REC(&st, SETLK, lock_req, .cr = USER, .fh = FH(S_A), .fid = 4, .owner = 9, .type = F_WRLCK,
	    .start = 0, .end = 99, .pid = 5);
	REC(&st, GETLK, lock_req, .cr = USER, .fh = FH(S_A), .fid = 4, .owner = 8, .type = F_RDLCK,
	    .start = 0, .end = UINT64_MAX, .pid = 6);
	REC(&st, UNLOCK_OWNER, unlock_owner_req, .cr = USER, .fh = FH(S_A), .owner = 9);
	REC(&st, RECLAIM, lock_req, .cr = USER, .fh = FH(S_A), .fid = 4, .owner = 9, .type = F_RDLCK,
	    .end = 10);
	REC(&st, RECLAIM_DONE, reclaim_done_req, .reclaimed = 1);
	SEED("locks");
	pfs_wr_init(&w, fhs, sizeof fhs);
	struct pfs_fh f1 = FH(S_A);
	pfs_put_FH(&w, &f1);
	REC(&st, FORGET, forget_req, .fhs = { .p = fhs, .len = w.len });
	SEED("forget");
	memset(&it, 0, sizeof it);
	it.fh = FH(S_A);
	pfs_wr_init(&w, fhs, sizeof fhs);
	pfs_enc_reval_item(&w, &it);
	REC(&st, REVALIDATE, revalidate_req, .cr = USER, .items = { .p = fhs, .len = w.len });
	REC(&st, REVALIDATED, revalidated_req, .items = 1, .changed = 1);
	SEED("revalidate");
	pfs_wr_init(&w, fhs, sizeof fhs);
	struct pfs_name n1 = NM("a"), n2 = NM("missing");
	pfs_put_NAME(&w, &n1);
	pfs_put_NAME(&w, &n2);
	REC(&st, DELEG_DIR, getattr_req, .cr = USER, .fh = FH(S_D));
	REC(&st, UNLINKS, unlinks_req, .cr = USER, .parent = FH(S_ROOT),
	    .names = { .p = fhs, .len = w.len });
	REC(&st, DELEG_RETURN, getattr_req, .cr = USER, .fh = FH(S_D));
	SEED("deleg_dir_unlinks");
	{
		/* A slot handle the daemon never made: ESTALE for that item. */
		struct pfs_fh sf = FH(S_A);
		struct pfs_name cn = NM("made");
		uint64_t fid = 7;
		uint32_t fl = O_WRONLY, mode = 0644, how = PFS_CI_CLOSE | PFS_CI_SYNC | PFS_CI_ATTRS;
		struct pfs_setattr_req sa = { .valid = PFS_SET_MODE | PFS_SET_MTIME, .mode = 0640,
					      .mtime_s = 1234567890 };
		pfs_t_BYTES data = { .p = (const uint8_t *)"first bytes", .len = 11 };
		pfs_wr_init(&w, fhs, sizeof fhs);
		pfs_put_FH(&w, &sf);
		pfs_put_U64(&w, &fid);
		pfs_put_U32(&w, &fl);
		pfs_put_U32(&w, &mode);
		pfs_put_NAME(&w, &cn);
		pfs_put_U32(&w, &how);
		pfs_put_BYTES(&w, &data);
		pfs_put_deleg_attrs(&w, &sa);
	}
	REC(&st, DELEG_DIR, getattr_req, .cr = USER, .fh = FH(S_D));
	REC(&st, SLOTS, slots_req, .cr = USER, .dir = FH(S_D), .count = 2);
	REC(&st, CREATES, creates_req, .cr = USER, .parent = FH(S_D),
	    .items = { .p = fhs, .len = w.len });
	REC(&st, DELEG_RETURN, getattr_req, .cr = USER, .fh = FH(S_D));
	/* A MKDIR that asks for the new directory's delegation and slots;
	 * a rename answered under a delegation. */
	REC(&st, MKDIR, mkdir_req, .cr = USER, .parent = FH(S_D), .name = NM("held"), .mode = 0755,
	    .slots = 3);
	REC(&st, RENAME, rename_req, .cr = USER, .parent = FH(S_D), .name = NM("made"),
	    .newparent = FH(S_D), .newname = NM("moved"), .flags = PFS_RN_DELEG);
	SEED("deleg_dir_creates");
	REC(&st, LOOKUP_DATA, lookup_data_req, .cr = USER, .parent = FH(S_ROOT), .name = NM("a"),
	    .max_inline = 4096);
	SEED("lookup_data");
	REC(&st, LISTDIR, listdir_req, .cr = USER, .fh = FH(S_ROOT), .max_inline = 1024,
	    .max_bytes = 65536);
	SEED("listdir");
	/* LISTDIRS: a directory, one the caller may not read, a file, a
	 * symlink out; depth first below them; with the xattr bits. */
	{
		static uint8_t pl[4096];
		struct pfs_fh l[] = { FH(S_ROOT), FH(S_PRIV), FH(S_A), FH(S_UP), FH(S_D) };
		pfs_wr_init(&w, fhs, sizeof fhs);
		for (size_t i = 0; i < sizeof l / sizeof l[0]; i++)
			pfs_put_FH(&w, &l[i]);
		struct pfs_listdirs_req m = { .cr = USER, .max_bytes = 65536, .max_dirs = 16,
					      .fhs = { .p = fhs, .len = w.len } };
		struct pfs_wr pw;
		pfs_wr_init(&pw, pl, sizeof pl);
		if (pfs_enc_listdirs_req(&pw, &m) < 0)
			return -1;
		put_rec(&st, PFS_OP_LISTDIRS, 32, pl, pw.len);
	}
	SEED("listdirs");
	/* Peer-assisted reads: a chunk's digest and source through an open
	 * file (twice: the second finds it known and the client listed), a
	 * report, a chunk past the end, a change that drops the digests. */
	static const uint8_t peer_addr[4] = { 10, 0, 0, 9 };
	REC(&st, OPEN, open_req, .cr = USER, .fh = FH(S_A), .fid = 7, .flags = O_RDWR);
	REC(&st, CHUNK, chunk_req, .cr = USER, .fh = FH(S_A), .fid = 7, .flags = O_RDWR,
	    .index = 0, .addr = { .p = peer_addr, .len = 4 }, .port = 7000);
	REC(&st, CHUNK, chunk_req, .cr = USER, .fh = FH(S_A), .fid = 7, .flags = O_RDWR,
	    .index = 0, .want = PFS_CK_LOST, .port = 7000);
	REC(&st, CHUNK_REPORT, chunk_report_req, .fh = FH(S_A), .index = 0, .status = PFS_CKR_HAVE,
	    .peer = 0xffff);
	REC(&st, CHUNK, chunk_req, .cr = USER, .fh = FH(S_A), .fid = 7, .index = 9);
	REC(&st, WRITE, write_req, .cr = USER, .fh = FH(S_A), .fid = 7, .offset = 1,
	    .data = BY("xyz"));
	REC(&st, CHUNK, chunk_req, .cr = USER, .fh = FH(S_A), .fid = 7, .index = 0);
	SEED("chunks");
	/* Pages: from the start, and from a cookie (a position in the
	 * directory stream, whatever it names here). */
	REC(&st, LISTDIR_PAGE, listdir_page_req, .cr = USER, .fh = FH(S_ROOT), .max_inline = 0,
	    .max_bytes = 4096, .cookie = 0);
	REC(&st, LISTDIR_PAGE, listdir_page_req, .cr = USER, .fh = FH(S_D), .max_inline = 512,
	    .max_bytes = 65536, .cookie = 2);
	SEED("listdir_page");
	/* Ways out of the export, each refused or harmless. */
	REC(&st, OPEN, open_req, .cr = ROOT, .fh = FH(S_UP), .fid = 5, .flags = O_RDWR | O_TRUNC);
	REC(&st, SETATTR, setattr_req, .cr = ROOT, .fh = FH(S_ABS), .valid = PFS_SET_SIZE, .size = 0);
	REC(&st, LINK, link_req, .cr = ROOT, .fh = FH(S_ABS), .newparent = FH(S_ROOT),
	    .newname = NM("s"));
	REC(&st, LOOKUP_DATA, lookup_data_req, .cr = ROOT, .parent = FH(S_ROOT), .name = NM("up"),
	    .max_inline = 4096);
	SEED("escapes");
	/* A coded request: an LZ4 PING. */
	{
		struct pfs_ping_req m = { .stamp = 3 };
		static uint8_t raw[2048];
		const void *wire;
		size_t wl;
		memset(raw, 0, sizeof raw);
		pfs_wr_init(&w, raw, sizeof raw);
		pfs_enc_ping_req(&w, &m);
		wl = pfs_frame_prepare(coded, 1, PFS_OP_PING, 0, 0, raw, sizeof raw, PFS_CAP_LZ4,
				       scratch, sizeof scratch, &wire);
		if (wire != scratch)
			return -1;
		st.b[st.n++] = op_index(PFS_OP_PING);
		st.b[st.n++] = 1;
		st.b[st.n++] = (uint8_t)wl;
		st.b[st.n++] = (uint8_t)(wl >> 8);
		st.b[st.n++] = (uint8_t)sizeof raw;
		st.b[st.n++] = (uint8_t)(sizeof raw >> 8);
		st.b[st.n++] = 0;
		st.b[st.n++] = 0;
		memcpy(st.b + st.n, wire, wl);
		st.n += wl;
	}
	SEED("lz4_ping");
	return 0;
}

/* fuzz_peerproto: a mode byte, then frames (see fuzz_peerproto.c). */
static size_t put_peer_frame(uint8_t *b, size_t at, uint64_t id, uint16_t op, const void *p,
			size_t len)
{
	const void *wire;

	pfs_frame_prepare(b + at, id, op, 0, 0, p, len, 0, NULL, 0, &wire);
	if (len)
		memcpy(b + at + PFS_FRAME_HDR_SIZE, p, len);
	return at + PFS_FRAME_HDR_SIZE + len;
}

static int gen_peerproto(const char *dir)
{
	static uint8_t b[1024], pl[128];
	struct pfs_peer_hello_req hq = { .magic = PFS_PEER_MAGIC, .client_id = 42 };
	struct pfs_peer_auth_req aq;
	struct pfs_peer_get_req gq = { .offset = 0, .size = 1u << 20 };
	struct pfs_wr w;
	size_t n;

	memset(hq.nonce.b, 0x33, sizeof hq.nonce.b);
	memset(aq.mac.b, 0x6d, sizeof aq.mac.b);
	memset(gq.hash.b, 0x64, sizeof gq.hash.b);
	/* Before the handshake: a HELLO, then a (wrong) AUTH. */
	b[0] = 0;
	pfs_wr_init(&w, pl, sizeof pl);
	pfs_enc_peer_hello_req(&w, &hq);
	n = put_peer_frame(b, 1, 1, PFS_OP_PEER_HELLO, pl, w.len);
	pfs_wr_init(&w, pl, sizeof pl);
	pfs_enc_peer_auth_req(&w, &aq);
	n = put_peer_frame(b, n, 2, PFS_OP_PEER_AUTH, pl, w.len);
	if (write_seed(dir, "peerproto", "handshake", b, n) < 0)
		return -1;
	/* A GET before any handshake. */
	pfs_wr_init(&w, pl, sizeof pl);
	pfs_enc_peer_get_req(&w, &gq);
	n = put_peer_frame(b, 1, 1, PFS_OP_PEER_GET, pl, w.len);
	if (write_seed(dir, "peerproto", "get_first", b, n) < 0)
		return -1;
	/* After the handshake: GETs, another opcode, a HELLO again. */
	b[0] = 1;
	n = put_peer_frame(b, 1, 3, PFS_OP_PEER_GET, pl, w.len);
	gq.offset = 4u << 20;
	gq.size = 12345;
	pfs_wr_init(&w, pl, sizeof pl);
	pfs_enc_peer_get_req(&w, &gq);
	n = put_peer_frame(b, n, 4, PFS_OP_PEER_GET, pl, w.len);
	n = put_peer_frame(b, n, 5, PFS_OP_PING, NULL, 0);
	pfs_wr_init(&w, pl, sizeof pl);
	pfs_enc_peer_hello_req(&w, &hq);
	n = put_peer_frame(b, n, 6, PFS_OP_PEER_HELLO, pl, w.len);
	return write_seed(dir, "peerproto", "gets", b, n);
}

/* A listing seed for fuzz_listing: mode byte, flags, (with cookies:
 * dots[4]), then n items "n0".. (every third a small directory, with
 * cookies 10 * (i + 1)); dots_at: the item after which "." and ".."
 * come (-1: first). */
static size_t put_listing(uint8_t *b, size_t cap, uint8_t mode, unsigned n, int dots_at)
{
	struct pfs_wr w;
	uint32_t flags = PFS_LS_COMPLETE;
	uint64_t at = dots_at < 0 ? 0 : 10 * (uint64_t)(dots_at + 1);
	uint64_t dots[4] = { at, 1, 1, 2 };

	b[0] = mode;
	pfs_wr_init(&w, b + 1, cap - 1);
	pfs_put_U32(&w, &flags);
	for (int i = 0; (mode & 1) && i < 4; i++)
		pfs_put_U64(&w, &dots[i]);
	for (unsigned i = 0; i < n; i++) {
		struct pfs_name nm;
		struct pfs_entry e;
		struct pfs_bytes d = { (const uint8_t *)"hi", i % 4 == 1 ? 2 : 0 };
		uint32_t fl = i % 4 == 1 ? PFS_LD_DATA | PFS_LD_READABLE : PFS_LD_NO_XATTRS;
		uint64_t cookie = 10 * (uint64_t)(i + 1);
		memset(&e, 0, sizeof e);
		min_ENTRY(&e);
		e.fh.data[0] = (uint8_t)i;
		e.attr.ino = 1000 + i;
		e.attr.size = i % 4 == 1 ? 2 : 4096;
		e.attr.mode = i % 3 == 0 ? 040755 : 0100644;
		nm.len = (uint16_t)snprintf(nm.s, sizeof nm.s, "n%u", i);
		pfs_put_NAME(&w, &nm);
		pfs_put_ENTRY(&w, &e);
		pfs_put_U32(&w, &fl);
		if (mode & 1)
			pfs_put_U64(&w, &cookie);
		pfs_put_BYTES(&w, &d);
	}
	return 1 + w.len;
}

static int gen_listing(const char *dir)
{
	static uint8_t b[8192];

	if (write_seed(dir, "listing", "plain", b, put_listing(b, sizeof b, 0, 6, -1)) < 0 ||
	    write_seed(dir, "listing", "cookies", b, put_listing(b, sizeof b, 1, 6, -1)) < 0 ||
	    write_seed(dir, "listing", "dots_inside", b, put_listing(b, sizeof b, 1, 6, 2)) < 0 ||
	    write_seed(dir, "listing", "own_changes", b, put_listing(b, sizeof b, 3, 6, 0)) < 0 ||
	    write_seed(dir, "listing", "plain_changes", b, put_listing(b, sizeof b, 2, 5, -1)) < 0)
		return -1;
	return write_seed(dir, "listing", "empty", b, put_listing(b, sizeof b, 1, 0, -1));
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	if ((mkdir(argv[1], 0755) < 0 && errno != EEXIST) || gen_codec(argv[1]) < 0 ||
	    gen_frames(argv[1]) < 0 || gen_lz4(argv[1]) < 0 ||
	    gen_framer(argv[1]) < 0 || gen_handlers(argv[1]) < 0 || gen_peerproto(argv[1]) < 0 ||
	    gen_listing(argv[1]) < 0) {
		fprintf(stderr, "%s: cannot write the corpus in %s\n", argv[0], argv[1]);
		return 1;
	}
	return 0;
}
