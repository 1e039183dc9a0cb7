/* codec.h: encode and decode podfs message payloads (see wire.h).
 *
 * Every message is declared once, in PFS_MESSAGES below, as a list of typed
 * fields; the struct, its encoder and its decoder are generated from that
 * list, so the three can never disagree.
 *
 *   int pfs_enc_NAME(struct pfs_wr *w, const struct pfs_NAME *m);
 *     Appends the payload to w. Returns 0, or -ENOBUFS if w's capacity is
 *     too small (w->len is then unchanged).
 *
 *   int pfs_dec_NAME(const void *buf, size_t len, struct pfs_NAME *m);
 *     Decodes exactly len bytes. Returns 0, or -EBADMSG if the payload is
 *     truncated, has trailing bytes, or breaks a limit of wire.h (lengths
 *     over their maximum, bad names). Names, paths and handles are copied
 *     into *m (names NUL-terminated); `bytes` fields are views into buf,
 *     valid while buf is. On failure *m is unspecified.
 *
 * The codec never allocates, never prints and never includes socket, uv,
 * FUSE or OpenSSL headers. It is safe to call from any thread.
 */
#ifndef PODFS_CODEC_H
#define PODFS_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "podfs/wire.h"

/* Field types. */
struct pfs_fh {
	uint8_t len; /* 1..PFS_FH_MAX */
	uint8_t data[PFS_FH_MAX];
};
static inline bool pfs_fh_equal(const struct pfs_fh *a, const struct pfs_fh *b)
{
	return a->len == b->len && memcmp(a->data, b->data, a->len) == 0;
}
struct pfs_name {
	uint16_t len; /* 1..PFS_NAME_MAX */
	char s[PFS_NAME_MAX + 1]; /* NUL-terminated copy */
};
struct pfs_path {
	uint16_t len; /* 1..PFS_PATH_MAX */
	char s[PFS_PATH_MAX + 1];
};
struct pfs_xname {
	uint16_t len; /* 1..PFS_XATTR_NAME_MAX */
	char s[PFS_XATTR_NAME_MAX + 1];
};
struct pfs_host {
	uint16_t len; /* 0..PFS_HOSTNAME_MAX */
	char s[PFS_HOSTNAME_MAX + 1];
};
struct pfs_bytes {
	const uint8_t *p; /* view into the decoded buffer */
	uint32_t len;     /* 0..PFS_MAX_IO */
};
/* Whether b holds the handle fh (a reply's BYTES field naming an object). */
static inline bool pfs_bytes_are_fh(const struct pfs_bytes *b, const struct pfs_fh *fh)
{
	return b->len == fh->len && memcmp(b->p, fh->data, fh->len) == 0;
}
struct pfs_creds {
	uint32_t uid;
	uint32_t gid;
	uint16_t ngroups; /* 0..PFS_GROUPS_MAX */
	uint32_t groups[PFS_GROUPS_MAX];
};
/* The same caller: uid, gid and groups, in the same order. */
static inline bool pfs_creds_equal(const struct pfs_creds *a, const struct pfs_creds *b)
{
	return a->uid == b->uid && a->gid == b->gid && a->ngroups == b->ngroups &&
	       a->ngroups <= PFS_GROUPS_MAX &&
	       memcmp(a->groups, b->groups, a->ngroups * sizeof(a->groups[0])) == 0;
}
struct pfs_nonce {
	uint8_t b[PFS_NONCE_LEN];
};
struct pfs_mac {
	uint8_t b[PFS_MAC_LEN];
};
struct pfs_digest {
	uint8_t b[PFS_DIGEST_LEN];
};
struct pfs_entry {
	struct pfs_fh fh;
	struct pfs_attr attr;
};

typedef uint8_t pfs_t_U8;
typedef uint16_t pfs_t_U16;
typedef uint32_t pfs_t_U32;
typedef uint64_t pfs_t_U64;
typedef int64_t pfs_t_I64;
typedef struct pfs_fh pfs_t_FH;
typedef struct pfs_name pfs_t_NAME;
typedef struct pfs_path pfs_t_PATH;
typedef struct pfs_xname pfs_t_XNAME;
typedef struct pfs_host pfs_t_HOST;
typedef struct pfs_bytes pfs_t_BYTES;
typedef struct pfs_creds pfs_t_CREDS;
typedef struct pfs_nonce pfs_t_NONCE;
typedef struct pfs_mac pfs_t_MAC;
typedef struct pfs_digest pfs_t_DIGEST;
typedef struct pfs_attr pfs_t_ATTR;
typedef struct pfs_entry pfs_t_ENTRY;

/* The messages. F(TYPE, field). A message with an empty payload has no
 * entry: its payload must be empty (0 bytes). "_req" is the request of the
 * opcode of the same name, "_rep" its successful reply. */
#define PFS_MSG_hello_req(F) F(U32, magic) F(U16, version_min) F(U16, version_max) \
	F(U64, caps) F(U64, client_id) F(NONCE, nonce) F(HOST, hostname)
#define PFS_MSG_hello_rep(F) F(U16, version) F(U64, caps) F(U64, boot_id) \
	F(NONCE, nonce) F(MAC, mac) F(U32, max_payload) F(U64, write_verf)
#define PFS_MSG_auth_req(F) F(MAC, mac)
#define PFS_MSG_auth_rep(F) F(ENTRY, root) F(U32, flags)
#define PFS_MSG_ping_req(F) F(U64, stamp)
#define PFS_MSG_ping_rep(F) F(U64, stamp)
#define PFS_MSG_lookup_req(F) F(CREDS, cr) F(FH, parent) F(NAME, name)
#define PFS_MSG_entry_rep(F) F(ENTRY, e) /* LOOKUP MKNOD MKDIR SYMLINK LINK CREATE */
#define PFS_MSG_entry_dir_rep(F) F(ENTRY, e) F(ATTR, dir) /* the same, PFS_CAP_DIR_ATTR */
#define PFS_MSG_mkdir_rep(F) F(ENTRY, e) F(ATTR, dir) F(U32, flags) F(BYTES, slots) /* MKDIR, PFS_CAP_NEW_DIR */
#define PFS_MSG_dir_rep(F) F(ATTR, dir) /* UNLINK RMDIR with PFS_CAP_DIR_ATTR */
#define PFS_MSG_rename_rep(F) F(U32, flags) F(ATTR, dir) F(ENTRY, moved) F(BYTES, victim) /* PFS_CAP_RENAME_ATTR */
#define PFS_MSG_unlink_rep(F) F(U32, flags) F(ATTR, dir) F(BYTES, victim) /* PFS_CAP_UNLINK_VICTIM */
#define PFS_MSG_getattr_req(F) F(CREDS, cr) F(FH, fh)
#define PFS_MSG_attr_rep(F) F(ATTR, attr) /* GETATTR SETATTR OPEN OPENDIR; FALLOCATE, PFS_CAP_POST_ATTR */
#define PFS_MSG_setattr_req(F) F(CREDS, cr) F(FH, fh) F(U64, fid) F(U32, valid) \
	F(U32, mode) F(U32, uid) F(U32, gid) F(U64, size) F(I64, atime_s) F(U32, atime_ns) \
	F(I64, mtime_s) F(U32, mtime_ns)
#define PFS_MSG_readlink_req(F) F(CREDS, cr) F(FH, fh)
#define PFS_MSG_readlink_rep(F) F(PATH, target)
#define PFS_MSG_mknod_req(F) F(CREDS, cr) F(FH, parent) F(NAME, name) F(U32, mode) \
	F(U32, rdev) F(U32, umask)
#define PFS_MSG_mkdir_req(F) F(CREDS, cr) F(FH, parent) F(NAME, name) F(U32, mode) F(U32, umask) F(U32, slots)
#define PFS_MSG_symlink_req(F) F(CREDS, cr) F(FH, parent) F(NAME, name) F(PATH, target)
#define PFS_MSG_unlink_req(F) F(CREDS, cr) F(FH, parent) F(NAME, name) /* UNLINK RMDIR */
#define PFS_MSG_rename_req(F) F(CREDS, cr) F(FH, parent) F(NAME, name) F(FH, newparent) \
	F(NAME, newname) F(U32, flags)
#define PFS_MSG_link_req(F) F(CREDS, cr) F(FH, fh) F(FH, newparent) F(NAME, newname)
#define PFS_MSG_open_req(F) F(CREDS, cr) F(FH, fh) F(U64, fid) F(U32, flags) /* OPEN OPENDIR */
#define PFS_MSG_create_req(F) F(CREDS, cr) F(FH, parent) F(NAME, name) F(U64, fid) \
	F(U32, flags) F(U32, mode) F(U32, umask)
#define PFS_MSG_read_req(F) F(CREDS, cr) F(FH, fh) F(U64, fid) F(U32, flags) F(U64, offset) \
	F(U32, size)
#define PFS_MSG_read_rep(F) F(BYTES, data)
#define PFS_MSG_write_req(F) F(CREDS, cr) F(FH, fh) F(U64, fid) F(U32, flags) F(U64, offset) \
	F(BYTES, data)
#define PFS_MSG_write_rep(F) F(U32, written) F(ATTR, attr)
#define PFS_MSG_write_at_rep(F) F(U32, written) F(ATTR, attr) F(U64, at)
#define PFS_MSG_release_req(F) F(CREDS, cr) F(FH, fh) F(U64, fid) /* RELEASE RELEASEDIR */
#define PFS_MSG_fsync_req(F) F(CREDS, cr) F(FH, fh) F(U64, fid) F(U32, datasync)
#define PFS_MSG_readdir_req(F) F(CREDS, cr) F(FH, fh) F(U64, fid) F(U64, offset) \
	F(U32, max_bytes) F(U32, plus)
#define PFS_MSG_statfs_req(F) F(CREDS, cr) F(FH, fh)
#define PFS_MSG_statfs_rep(F) F(U32, bsize) F(U32, frsize) F(U64, blocks) F(U64, bfree) \
	F(U64, bavail) F(U64, files) F(U64, ffree) F(U64, favail) F(U32, namemax)
#define PFS_MSG_setxattr_req(F) F(CREDS, cr) F(FH, fh) F(XNAME, name) F(BYTES, value) F(U32, flags)
#define PFS_MSG_getxattr_req(F) F(CREDS, cr) F(FH, fh) F(XNAME, name) F(U32, size)
#define PFS_MSG_xattr_rep(F) F(U32, size) F(BYTES, value) /* GETXATTR LISTXATTR */
#define PFS_MSG_listxattr_req(F) F(CREDS, cr) F(FH, fh) F(U32, size)
#define PFS_MSG_removexattr_req(F) F(CREDS, cr) F(FH, fh) F(XNAME, name)
#define PFS_MSG_fallocate_req(F) F(CREDS, cr) F(FH, fh) F(U64, fid) F(U32, mode) \
	F(U64, offset) F(U64, length)
#define PFS_MSG_copy_range_req(F) F(CREDS, cr) F(FH, src) F(U64, src_fid) F(U32, src_flags) \
	F(U64, src_off) F(FH, dst) F(U64, dst_fid) F(U32, dst_flags) F(U64, dst_off) F(U64, length)
#define PFS_MSG_lock_req(F) F(CREDS, cr) F(FH, fh) F(U64, fid) F(U64, owner) F(U32, type) \
	F(U64, start) F(U64, end) F(U32, pid) F(U32, flags) /* GETLK SETLK RECLAIM */
#define PFS_MSG_getlk_rep(F) F(U32, type) F(U64, start) F(U64, end) F(U32, pid)
#define PFS_MSG_unlock_owner_req(F) F(CREDS, cr) F(FH, fh) F(U64, owner)
#define PFS_MSG_lseek_req(F) F(CREDS, cr) F(FH, fh) F(U64, fid) F(U64, offset) F(U32, whence)
#define PFS_MSG_lseek_rep(F) F(U64, offset)
#define PFS_MSG_forget_req(F) F(BYTES, fhs) /* packed fh list, see pfs_dec_fh_list */
#define PFS_MSG_revalidate_req(F) F(CREDS, cr) F(BYTES, items) /* packed pfs_reval_item */
#define PFS_MSG_revalidate_rep(F) F(BYTES, results) /* packed pfs_reval_result */
#define PFS_MSG_lookup_data_req(F) F(CREDS, cr) F(FH, parent) F(NAME, name) F(U32, max_inline)
#define PFS_MSG_lookup_data_rep(F) F(ENTRY, e) F(U32, flags) F(BYTES, data)
#define PFS_MSG_reclaim_done_req(F) F(U32, reclaimed) F(U32, lost)
#define PFS_MSG_revalidated_req(F) F(U32, items) F(U32, changed)
#define PFS_MSG_lock_wake_push(F) F(FH, fh)
#define PFS_MSG_inval_inode_push(F) F(FH, fh) F(I64, offset) F(I64, length)
#define PFS_MSG_inval_entry_push(F) F(FH, parent) F(NAME, name)
#define PFS_MSG_push_ack(F) F(U64, count) /* PUSH_ACK (client -> server) */
#define PFS_MSG_recall_push(F) F(FH, fh) /* RECALL (push) */
#define PFS_MSG_listdir_req(F) F(CREDS, cr) F(FH, fh) F(U32, max_inline) F(U32, max_bytes)
#define PFS_MSG_chunk_req(F) F(CREDS, cr) F(FH, fh) F(U64, fid) F(U32, flags) F(U64, index) \
	F(U32, want) F(BYTES, addr) F(U32, port)
#define PFS_MSG_chunk_rep(F) F(ATTR, attr) F(U32, shift) F(U32, len) F(DIGEST, hash) \
	F(U32, source) F(U32, peer) F(U32, peer_gen) F(BYTES, addr) F(U32, port)
#define PFS_MSG_chunk_report_req(F) F(FH, fh) F(U64, index) F(DIGEST, hash) F(U32, status) \
	F(U32, peer) F(U32, peer_gen)
#define PFS_MSG_peer_hello_req(F) F(U32, magic) F(U64, client_id) F(NONCE, nonce)
#define PFS_MSG_peer_hello_rep(F) F(NONCE, nonce) F(MAC, mac)
#define PFS_MSG_peer_auth_req(F) F(MAC, mac)
#define PFS_MSG_peer_get_req(F) F(DIGEST, hash) F(U32, offset) F(U32, size)
#define PFS_MSG_peer_get_rep(F) F(BYTES, data)
#define PFS_MSG_listdir_page_req(F) F(CREDS, cr) F(FH, fh) F(U32, max_inline) F(U32, max_bytes) \
	F(U64, cookie)
#define PFS_MSG_listdirs_req(F) F(CREDS, cr) F(U32, max_bytes) F(U32, max_dirs) \
	F(BYTES, fhs) /* packed fh list (pfs_dec_fh_item), LISTDIRS */
#define PFS_MSG_unlinks_req(F) F(CREDS, cr) F(FH, parent) F(BYTES, names) /* packed NAMEs */
#define PFS_MSG_unlinks_rep(F) F(U32, flags) F(ATTR, dir) F(BYTES, status) /* u32 per name */
#define PFS_MSG_slots_req(F) F(CREDS, cr) F(FH, dir) F(U32, count)
#define PFS_MSG_slots_rep(F) F(BYTES, entries) /* packed ENTRYs */
#define PFS_MSG_creates_req(F) F(CREDS, cr) F(FH, parent) \
	F(BYTES, items) /* packed: FH slot, U64 fid, U32 flags, U32 mode, NAME, U32 how, BYTES data[, attrs] */
#define PFS_MSG_creates_rep(F) F(U32, flags) F(ATTR, dir) F(BYTES, status) /* u32 per item */ \
	F(BYTES, attrs) /* packed ATTR per item made */

#define PFS_MESSAGES(M) \
	M(hello_req) M(hello_rep) M(auth_req) M(auth_rep) M(ping_req) M(ping_rep) \
	M(lookup_req) M(entry_rep) M(entry_dir_rep) M(mkdir_rep) M(dir_rep) M(rename_rep) M(unlink_rep) M(getattr_req) M(attr_rep) M(setattr_req) \
	M(readlink_req) M(readlink_rep) M(mknod_req) M(mkdir_req) M(symlink_req) \
	M(unlink_req) M(rename_req) M(link_req) M(open_req) M(create_req) M(read_req) \
	M(read_rep) M(write_req) M(write_rep) M(write_at_rep) M(release_req) M(fsync_req) M(readdir_req) \
	M(statfs_req) M(statfs_rep) M(setxattr_req) M(getxattr_req) M(xattr_rep) \
	M(listxattr_req) M(removexattr_req) M(fallocate_req) M(copy_range_req) M(lock_req) M(getlk_rep) \
	M(unlock_owner_req) M(lseek_req) M(lseek_rep) M(inval_inode_push) M(inval_entry_push) \
	M(forget_req) M(revalidate_req) M(revalidate_rep) M(revalidated_req) M(lookup_data_req) M(lookup_data_rep) \
	M(reclaim_done_req) M(lock_wake_push) M(recall_push) M(push_ack) M(listdir_req) M(listdir_page_req) \
	M(listdirs_req) M(unlinks_req) M(unlinks_rep) M(slots_req) M(slots_rep) M(creates_req) \
	M(creates_rep) \
	M(chunk_req) M(chunk_rep) M(chunk_report_req) M(peer_hello_req) M(peer_hello_rep) \
	M(peer_auth_req) M(peer_get_req) M(peer_get_rep)

/* Growable-by-caller output cursor. The caller owns buf. */
struct pfs_wr {
	uint8_t *buf;
	size_t cap;
	size_t len;
};
static inline void pfs_wr_init(struct pfs_wr *w, void *buf, size_t cap)
{
	w->buf = buf;
	w->cap = cap;
	w->len = 0;
}

/* Bounds-checked input cursor. Once a read fails, `bad` stays set and every
 * later read fails too, so a decoder checks once at the end. */
struct pfs_rd {
	const uint8_t *p;
	size_t left;
	bool bad;
};
static inline void pfs_rd_init(struct pfs_rd *r, const void *buf, size_t len)
{
	r->p = buf;
	r->left = len;
	r->bad = false;
}

#define PFS_X_FIELD(T, f) pfs_t_##T f;
#define PFS_X_DECLARE(name)                                                   \
	struct pfs_##name {                                                   \
		PFS_MSG_##name(PFS_X_FIELD)                                   \
	};                                                                    \
	int pfs_enc_##name(struct pfs_wr *w, const struct pfs_##name *m);     \
	int pfs_dec_##name(const void *buf, size_t len, struct pfs_##name *m);
PFS_MESSAGES(PFS_X_DECLARE)
#undef PFS_X_DECLARE

/* Field-level primitives, for the few payloads that are not a fixed list
 * (READDIR replies) and for callers that build a payload in pieces.
 * pfs_put_* return 0 or -ENOBUFS (w unchanged); pfs_get_* set r->bad on
 * error and return false. */
#define PFS_X_PRIM(T)                                                         \
	int pfs_put_##T(struct pfs_wr *w, const pfs_t_##T *v);                \
	bool pfs_get_##T(struct pfs_rd *r, pfs_t_##T *v);
PFS_X_PRIM(U8) PFS_X_PRIM(U16) PFS_X_PRIM(U32) PFS_X_PRIM(U64) PFS_X_PRIM(I64)
PFS_X_PRIM(FH) PFS_X_PRIM(NAME) PFS_X_PRIM(PATH) PFS_X_PRIM(XNAME) PFS_X_PRIM(HOST)
PFS_X_PRIM(BYTES) PFS_X_PRIM(CREDS) PFS_X_PRIM(NONCE) PFS_X_PRIM(MAC) PFS_X_PRIM(DIGEST)
PFS_X_PRIM(ATTR)
PFS_X_PRIM(ENTRY)
#undef PFS_X_PRIM

/* Fields written in place, for payloads whose length or leading field
 * is known only once what follows is written (READ and REVALIDATE
 * replies, LISTDIR and READDIR lists).
 *
 * pfs_wr_skip reserves n bytes (zeroed) at the end of w for a field
 * written later by pfs_patch_U8 or pfs_patch_U32, and sets *at to their
 * offset. Returns 0, or -ENOBUFS (w unchanged).
 *
 * pfs_patch_U8 and pfs_patch_U32 write v at offset at of w, in bytes that
 * pfs_wr_skip reserved (the caller's guarantee: at + size <= w->len).
 *
 * pfs_bytes_open begins a BYTES field whose content the caller appends
 * to w (items of a packed list, or its own bytes at w->buf + w->len,
 * which it then counts into w->len): it reserves the u32 length and sets
 * *at. Returns 0 or -ENOBUFS (w unchanged). pfs_bytes_close ends it: the
 * length becomes the bytes appended since. Returns 0, or -EINVAL if that
 * is over PFS_MAX_IO (the length is then left 0).
 *
 * pfs_put_BYTES_head writes only the u32 length of a BYTES field whose
 * len bytes are not in w: they follow w's payload on the wire (a
 * zero-copy READ reply). Returns 0, -EINVAL if len is over PFS_MAX_IO,
 * or -ENOBUFS (w unchanged). */
int pfs_wr_skip(struct pfs_wr *w, size_t n, size_t *at);
void pfs_patch_U8(struct pfs_wr *w, size_t at, uint8_t v);
void pfs_patch_U32(struct pfs_wr *w, size_t at, uint32_t v);
int pfs_bytes_open(struct pfs_wr *w, size_t *at);
int pfs_bytes_close(struct pfs_wr *w, size_t at);
int pfs_put_BYTES_head(struct pfs_wr *w, size_t len);

/* The change of attributes a CREATES item carries with PFS_CI_ATTRS
 * (wire.h): m's valid, mode, uid, gid, atime and mtime, in
 * PFS_DELEG_ATTRS_SIZE bytes. pfs_put_deleg_attrs returns 0 or -ENOBUFS
 * (w unchanged); pfs_get_deleg_attrs sets those fields of m (the others
 * are left) and returns false on a short input (r->bad set). */
#define PFS_DELEG_ATTRS_SIZE 40
int pfs_put_deleg_attrs(struct pfs_wr *w, const struct pfs_setattr_req *m);
bool pfs_get_deleg_attrs(struct pfs_rd *r, struct pfs_setattr_req *m);

/* READDIR reply: u8 eof, then entries until the end of the payload:
 *   name, u64 next_off (cookie to continue after this entry), u64 ino,
 *   u32 mode (file type bits only unless PFS_DE_HAS_ENTRY), u8 flags,
 *   [entry if flags & PFS_DE_HAS_ENTRY]
 */
struct pfs_dirent {
	struct pfs_name name;
	uint64_t next_off;
	uint64_t ino;
	uint32_t mode;
	uint8_t flags;
	struct pfs_entry e; /* valid if flags & PFS_DE_HAS_ENTRY */
};
/* Appends one entry; -ENOBUFS (w unchanged) when it does not fit. */
int pfs_enc_dirent(struct pfs_wr *w, const struct pfs_dirent *de);
/* Reads the next entry: 1 = got one, 0 = end of payload, -EBADMSG. */
int pfs_dec_dirent(struct pfs_rd *r, struct pfs_dirent *de);

/* Packed lists inside a BYTES field (FORGET, REVALIDATE). Each encoder
 * appends one item (-ENOBUFS with w unchanged, -EINVAL for a bad item);
 * each decoder reads the next: 1 = got one, 0 = end, -EBADMSG. */
struct pfs_reval_item {
	struct pfs_fh fh;
	uint64_t size;
	int64_t mtime_s;
	int64_t ctime_s;
	uint32_t mtime_ns;
	uint32_t ctime_ns;
};
struct pfs_reval_result {
	uint32_t index;  /* position of the item in the request */
	uint32_t status; /* 0: changed, attr is the new one; else errno (ESTALE: gone) */
	struct pfs_attr attr;
};
int pfs_enc_fh_item(struct pfs_wr *w, const struct pfs_fh *fh);
int pfs_dec_fh_item(struct pfs_rd *r, struct pfs_fh *fh);
int pfs_enc_reval_item(struct pfs_wr *w, const struct pfs_reval_item *it);
int pfs_dec_reval_item(struct pfs_rd *r, struct pfs_reval_item *it);
int pfs_enc_reval_result(struct pfs_wr *w, const struct pfs_reval_result *res);
int pfs_dec_reval_result(struct pfs_rd *r, struct pfs_reval_result *res);

/* Name rules of wire.h: 1..PFS_NAME_MAX bytes, no '/', no NUL, not "." or "..". */
bool pfs_name_valid(const char *s, size_t len);

/* An opcode's row of wire.h PFS_OPS: its name ("LOOKUP"), the names of
 * its request and reply messages, and its properties as PFS_OPF_* flags.
 * For an opcode that is not in the table (any op >= PFS_OP_MAX included):
 * name "?" and flags 0. Never NULL; the rows are constant. */
struct pfs_op_info {
	const char *name;
	const char *req;
	const char *rep;
	unsigned flags;
};
const struct pfs_op_info *pfs_op_info(unsigned op);

/* pfs_op_info(op)->flags. */
static inline unsigned pfs_op_flags(unsigned op)
{
	return pfs_op_info(op)->flags;
}

/* Name of an opcode for logs ("LOOKUP"), or "?" for an unknown one. */
const char *pfs_op_name(unsigned op);

#endif /* PODFS_CODEC_H */
