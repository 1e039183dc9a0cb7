/* codec.c: bounds-checked encoding and decoding of podfs payloads.
 *
 * The per-message encoders and decoders are generated from the field lists
 * in codec.h; this file supplies one put/get pair per field type. Every
 * read goes through need(), which compares a length against what is left
 * (never pos + len against the size, which could overflow).
 */
#include "podfs/codec.h"

#include <errno.h>
#include <string.h>

#include "podfs/le.h"

/* ---- output ---- */

static int put_raw(struct pfs_wr *w, const void *p, size_t n)
{
	if (n > w->cap - w->len)
		return -ENOBUFS;
	memcpy(w->buf + w->len, p, n);
	w->len += n;
	return 0;
}

/* The low n bytes (1, 2, 4 or 8) of v, little-endian. */
static int put_le(struct pfs_wr *w, uint64_t v, size_t n)
{
	uint8_t b[8];

	pfs_store_le64(b, v);
	return put_raw(w, b, n);
}

int pfs_put_U8(struct pfs_wr *w, const uint8_t *v) { return put_le(w, *v, 1); }
int pfs_put_U16(struct pfs_wr *w, const uint16_t *v) { return put_le(w, *v, 2); }
int pfs_put_U32(struct pfs_wr *w, const uint32_t *v) { return put_le(w, *v, 4); }
int pfs_put_U64(struct pfs_wr *w, const uint64_t *v) { return put_le(w, *v, 8); }
int pfs_put_I64(struct pfs_wr *w, const int64_t *v) { return put_le(w, (uint64_t)*v, 8); }

/* A length-prefixed string; the caller has checked len against its limit. */
static int put_str(struct pfs_wr *w, const char *s, size_t len, size_t lensize)
{
	size_t old = w->len;
	if (put_le(w, len, lensize) < 0 || put_raw(w, s, len) < 0) {
		w->len = old;
		return -ENOBUFS;
	}
	return 0;
}

int pfs_put_FH(struct pfs_wr *w, const struct pfs_fh *v)
{
	size_t old = w->len;
	if (v->len == 0 || v->len > PFS_FH_MAX)
		return -EINVAL;
	if (put_le(w, v->len, 1) < 0 || put_raw(w, v->data, v->len) < 0) {
		w->len = old;
		return -ENOBUFS;
	}
	return 0;
}

int pfs_put_NAME(struct pfs_wr *w, const struct pfs_name *v)
{
	if (!pfs_name_valid(v->s, v->len))
		return -EINVAL;
	return put_str(w, v->s, v->len, 2);
}

int pfs_put_PATH(struct pfs_wr *w, const struct pfs_path *v)
{
	if (v->len == 0 || v->len > PFS_PATH_MAX || memchr(v->s, 0, v->len))
		return -EINVAL;
	return put_str(w, v->s, v->len, 2);
}

int pfs_put_XNAME(struct pfs_wr *w, const struct pfs_xname *v)
{
	if (v->len == 0 || v->len > PFS_XATTR_NAME_MAX || memchr(v->s, 0, v->len))
		return -EINVAL;
	return put_str(w, v->s, v->len, 2);
}

int pfs_put_HOST(struct pfs_wr *w, const struct pfs_host *v)
{
	if (v->len > PFS_HOSTNAME_MAX || memchr(v->s, 0, v->len))
		return -EINVAL;
	return put_str(w, v->s, v->len, 2);
}

int pfs_put_BYTES(struct pfs_wr *w, const struct pfs_bytes *v)
{
	size_t old = w->len;
	if (v->len > PFS_MAX_IO)
		return -EINVAL;
	if (put_le(w, v->len, 4) < 0 || (v->len && put_raw(w, v->p, v->len) < 0)) {
		w->len = old;
		return -ENOBUFS;
	}
	return 0;
}

int pfs_put_CREDS(struct pfs_wr *w, const struct pfs_creds *v)
{
	size_t old = w->len;
	int r = 0;
	if (v->ngroups > PFS_GROUPS_MAX)
		return -EINVAL;
	r |= put_le(w, v->uid, 4);
	r |= put_le(w, v->gid, 4);
	r |= put_le(w, v->ngroups, 2);
	for (unsigned i = 0; i < v->ngroups; i++)
		r |= put_le(w, v->groups[i], 4);
	if (r) {
		w->len = old;
		return -ENOBUFS;
	}
	return 0;
}

int pfs_put_NONCE(struct pfs_wr *w, const struct pfs_nonce *v) { return put_raw(w, v->b, sizeof v->b); }
int pfs_put_MAC(struct pfs_wr *w, const struct pfs_mac *v) { return put_raw(w, v->b, sizeof v->b); }
int pfs_put_DIGEST(struct pfs_wr *w, const struct pfs_digest *v) { return put_raw(w, v->b, sizeof v->b); }

int pfs_put_ATTR(struct pfs_wr *w, const struct pfs_attr *a)
{
	uint8_t b[PFS_ATTR_WIRE_SIZE];
	struct pfs_wr t;
	pfs_wr_init(&t, b, sizeof b);
	put_le(&t, a->ino, 8);
	put_le(&t, a->size, 8);
	put_le(&t, a->blocks, 8);
	put_le(&t, (uint64_t)a->atime_s, 8);
	put_le(&t, (uint64_t)a->mtime_s, 8);
	put_le(&t, (uint64_t)a->ctime_s, 8);
	put_le(&t, a->atime_ns, 4);
	put_le(&t, a->mtime_ns, 4);
	put_le(&t, a->ctime_ns, 4);
	put_le(&t, a->mode, 4);
	put_le(&t, a->nlink, 4);
	put_le(&t, a->uid, 4);
	put_le(&t, a->gid, 4);
	put_le(&t, a->rdev, 4);
	put_le(&t, a->blksize, 4);
	return put_raw(w, b, sizeof b);
}

int pfs_put_ENTRY(struct pfs_wr *w, const struct pfs_entry *e)
{
	size_t old = w->len;
	int r = pfs_put_FH(w, &e->fh);
	if (r == 0 && (r = pfs_put_ATTR(w, &e->attr)) < 0)
		w->len = old;
	return r;
}

/* ---- fields written in place ---- */

int pfs_wr_skip(struct pfs_wr *w, size_t n, size_t *at)
{
	if (n > w->cap - w->len)
		return -ENOBUFS;
	memset(w->buf + w->len, 0, n);
	*at = w->len;
	w->len += n;
	return 0;
}

void pfs_patch_U8(struct pfs_wr *w, size_t at, uint8_t v)
{
	w->buf[at] = v;
}

void pfs_patch_U32(struct pfs_wr *w, size_t at, uint32_t v)
{
	pfs_store_le32(w->buf + at, v);
}

int pfs_bytes_open(struct pfs_wr *w, size_t *at)
{
	return pfs_wr_skip(w, 4, at);
}

int pfs_bytes_close(struct pfs_wr *w, size_t at)
{
	size_t len = w->len - at - 4;

	if (len > PFS_MAX_IO)
		return -EINVAL;
	pfs_patch_U32(w, at, (uint32_t)len);
	return 0;
}

int pfs_put_BYTES_head(struct pfs_wr *w, size_t len)
{
	if (len > PFS_MAX_IO)
		return -EINVAL;
	return put_le(w, len, 4);
}

int pfs_put_deleg_attrs(struct pfs_wr *w, const struct pfs_setattr_req *m)
{
	size_t len = w->len;

	if (pfs_put_U32(w, &m->valid) < 0 || pfs_put_U32(w, &m->mode) < 0 ||
	    pfs_put_U32(w, &m->uid) < 0 || pfs_put_U32(w, &m->gid) < 0 ||
	    pfs_put_I64(w, &m->atime_s) < 0 || pfs_put_U32(w, &m->atime_ns) < 0 ||
	    pfs_put_I64(w, &m->mtime_s) < 0 || pfs_put_U32(w, &m->mtime_ns) < 0) {
		w->len = len;
		return -ENOBUFS;
	}
	return 0;
}

/* ---- input ---- */

static const uint8_t *need(struct pfs_rd *r, size_t n)
{
	const uint8_t *p;
	if (r->bad || n > r->left) {
		r->bad = true;
		return NULL;
	}
	p = r->p;
	r->p += n;
	r->left -= n;
	return p;
}

/* An n-byte (1, 2, 4 or 8) little-endian integer. */
static bool get_le(struct pfs_rd *r, uint64_t *v, size_t n)
{
	const uint8_t *p = need(r, n);

	if (!p)
		return false;
	switch (n) {
	case 1: *v = p[0]; break;
	case 2: *v = pfs_load_le16(p); break;
	case 4: *v = pfs_load_le32(p); break;
	default: *v = pfs_load_le64(p); break;
	}
	return true;
}

static bool fail(struct pfs_rd *r)
{
	r->bad = true;
	return false;
}

#define GET_INT(T, ctype, n)                                 \
	bool pfs_get_##T(struct pfs_rd *r, ctype *v)         \
	{                                                    \
		uint64_t x;                                  \
		if (!get_le(r, &x, n))                       \
			return false;                        \
		*v = (ctype)x;                               \
		return true;                                 \
	}
GET_INT(U8, uint8_t, 1)
GET_INT(U16, uint16_t, 2)
GET_INT(U32, uint32_t, 4)
GET_INT(U64, uint64_t, 8)
GET_INT(I64, int64_t, 8)
#undef GET_INT

/* Reads a u16-prefixed string of min..max bytes into out[max + 1]. */
static bool get_str(struct pfs_rd *r, char *out, uint16_t *outlen, size_t min, size_t max)
{
	uint64_t len;
	const uint8_t *p;
	if (!get_le(r, &len, 2))
		return false;
	if (len < min || len > max)
		return fail(r);
	if (!(p = need(r, len)))
		return false;
	if (memchr(p, 0, len))
		return fail(r);
	memcpy(out, p, len);
	out[len] = 0;
	*outlen = (uint16_t)len;
	return true;
}

bool pfs_get_FH(struct pfs_rd *r, struct pfs_fh *v)
{
	uint64_t len;
	const uint8_t *p;
	if (!get_le(r, &len, 1))
		return false;
	if (len == 0 || len > PFS_FH_MAX)
		return fail(r);
	if (!(p = need(r, len)))
		return false;
	v->len = (uint8_t)len;
	memcpy(v->data, p, len);
	return true;
}

bool pfs_get_NAME(struct pfs_rd *r, struct pfs_name *v)
{
	if (!get_str(r, v->s, &v->len, 1, PFS_NAME_MAX))
		return false;
	return pfs_name_valid(v->s, v->len) ? true : fail(r);
}

bool pfs_get_PATH(struct pfs_rd *r, struct pfs_path *v)
{
	return get_str(r, v->s, &v->len, 1, PFS_PATH_MAX);
}

bool pfs_get_XNAME(struct pfs_rd *r, struct pfs_xname *v)
{
	return get_str(r, v->s, &v->len, 1, PFS_XATTR_NAME_MAX);
}

bool pfs_get_HOST(struct pfs_rd *r, struct pfs_host *v)
{
	uint16_t len;
	/* Host names are informational: accept anything printable-ish, but
	 * still no NUL and within the limit. */
	if (!get_str(r, v->s, &len, 0, PFS_HOSTNAME_MAX))
		return false;
	v->len = len;
	return true;
}

bool pfs_get_BYTES(struct pfs_rd *r, struct pfs_bytes *v)
{
	uint64_t len;
	const uint8_t *p;
	if (!get_le(r, &len, 4))
		return false;
	if (len > PFS_MAX_IO)
		return fail(r);
	if (!(p = need(r, len)))
		return false;
	v->p = p;
	v->len = (uint32_t)len;
	return true;
}

bool pfs_get_CREDS(struct pfs_rd *r, struct pfs_creds *v)
{
	if (!pfs_get_U32(r, &v->uid) || !pfs_get_U32(r, &v->gid) || !pfs_get_U16(r, &v->ngroups))
		return false;
	if (v->ngroups > PFS_GROUPS_MAX)
		return fail(r);
	for (unsigned i = 0; i < v->ngroups; i++)
		if (!pfs_get_U32(r, &v->groups[i]))
			return false;
	return true;
}

bool pfs_get_NONCE(struct pfs_rd *r, struct pfs_nonce *v)
{
	const uint8_t *p = need(r, sizeof v->b);
	if (p)
		memcpy(v->b, p, sizeof v->b);
	return p != NULL;
}

bool pfs_get_MAC(struct pfs_rd *r, struct pfs_mac *v)
{
	const uint8_t *p = need(r, sizeof v->b);
	if (p)
		memcpy(v->b, p, sizeof v->b);
	return p != NULL;
}

bool pfs_get_DIGEST(struct pfs_rd *r, struct pfs_digest *v)
{
	const uint8_t *p = need(r, sizeof v->b);
	if (p)
		memcpy(v->b, p, sizeof v->b);
	return p != NULL;
}

static bool get_attr_fields(struct pfs_rd *r, struct pfs_attr *a);

bool pfs_get_ATTR(struct pfs_rd *r, struct pfs_attr *a)
{
	if (!get_attr_fields(r, a))
		return false;
	if (a->atime_ns > 999999999 || a->mtime_ns > 999999999 || a->ctime_ns > 999999999)
		return fail(r);
	return true;
}

static bool get_attr_fields(struct pfs_rd *r, struct pfs_attr *a)
{
	return pfs_get_U64(r, &a->ino) && pfs_get_U64(r, &a->size) && pfs_get_U64(r, &a->blocks) &&
	       pfs_get_I64(r, &a->atime_s) && pfs_get_I64(r, &a->mtime_s) &&
	       pfs_get_I64(r, &a->ctime_s) && pfs_get_U32(r, &a->atime_ns) &&
	       pfs_get_U32(r, &a->mtime_ns) && pfs_get_U32(r, &a->ctime_ns) &&
	       pfs_get_U32(r, &a->mode) && pfs_get_U32(r, &a->nlink) && pfs_get_U32(r, &a->uid) &&
	       pfs_get_U32(r, &a->gid) && pfs_get_U32(r, &a->rdev) && pfs_get_U32(r, &a->blksize);
}

bool pfs_get_ENTRY(struct pfs_rd *r, struct pfs_entry *e)
{
	return pfs_get_FH(r, &e->fh) && pfs_get_ATTR(r, &e->attr);
}

/* ---- generated messages ---- */

#define ENC_FIELD(T, f)                                   \
	if ((rc = pfs_put_##T(w, &m->f)) < 0)             \
		goto out_rewind;
#define DEC_FIELD(T, f) pfs_get_##T(&r, &m->f);

#define DEFINE_MSG(name)                                                          \
	int pfs_enc_##name(struct pfs_wr *w, const struct pfs_##name *m)          \
	{                                                                         \
		size_t old = w->len;                                              \
		int rc;                                                           \
		PFS_MSG_##name(ENC_FIELD) return 0;                               \
	out_rewind:                                                               \
		w->len = old;                                                     \
		return rc;                                                        \
	}                                                                         \
	int pfs_dec_##name(const void *buf, size_t len, struct pfs_##name *m)     \
	{                                                                         \
		struct pfs_rd r;                                                  \
		pfs_rd_init(&r, buf, len);                                        \
		PFS_MSG_##name(DEC_FIELD) if (r.bad || r.left != 0) return -EBADMSG; \
		return 0;                                                         \
	}
PFS_MESSAGES(DEFINE_MSG)
#undef DEFINE_MSG
#undef ENC_FIELD
#undef DEC_FIELD

/* ---- READDIR entries ---- */

int pfs_enc_dirent(struct pfs_wr *w, const struct pfs_dirent *de)
{
	size_t old = w->len;
	int rc;
	uint32_t mode = de->mode;
	uint8_t flags = de->flags;
	/* Directory entries may be "." and "..", which request names may not. */
	if (de->flags & ~PFS_DE_HAS_ENTRY)
		return -EINVAL;
	if (de->name.len == 0 || de->name.len > PFS_NAME_MAX ||
	    memchr(de->name.s, '/', de->name.len) || memchr(de->name.s, 0, de->name.len))
		return -EINVAL;
	if ((rc = put_str(w, de->name.s, de->name.len, 2)) < 0 ||
	    (rc = pfs_put_U64(w, &de->next_off)) < 0 ||
	    (rc = pfs_put_U64(w, &de->ino)) < 0 || (rc = pfs_put_U32(w, &mode)) < 0 ||
	    (rc = pfs_put_U8(w, &flags)) < 0)
		goto out_rewind;
	if ((flags & PFS_DE_HAS_ENTRY) && (rc = pfs_put_ENTRY(w, &de->e)) < 0)
		goto out_rewind;
	return 0;
out_rewind:
	w->len = old;
	return rc;
}

int pfs_dec_dirent(struct pfs_rd *r, struct pfs_dirent *de)
{
	if (r->bad)
		return -EBADMSG;
	if (r->left == 0)
		return 0;
	/* "." and ".." are legal directory entries, unlike names in requests,
	 * so they are read without the request name rule. */
	if (!get_str(r, de->name.s, &de->name.len, 1, PFS_NAME_MAX) ||
	    memchr(de->name.s, '/', de->name.len) || !pfs_get_U64(r, &de->next_off) ||
	    !pfs_get_U64(r, &de->ino) || !pfs_get_U32(r, &de->mode) || !pfs_get_U8(r, &de->flags))
		goto bad;
	if (de->flags & ~PFS_DE_HAS_ENTRY)
		goto bad;
	if ((de->flags & PFS_DE_HAS_ENTRY) && !pfs_get_ENTRY(r, &de->e))
		goto bad;
	return 1;
bad:
	r->bad = true;
	return -EBADMSG;
}

/* ---- packed lists ---- */

int pfs_enc_fh_item(struct pfs_wr *w, const struct pfs_fh *fh)
{
	return pfs_put_FH(w, fh);
}

int pfs_dec_fh_item(struct pfs_rd *r, struct pfs_fh *fh)
{
	if (r->bad)
		return -EBADMSG;
	if (r->left == 0)
		return 0;
	return pfs_get_FH(r, fh) ? 1 : -EBADMSG;
}

int pfs_enc_reval_item(struct pfs_wr *w, const struct pfs_reval_item *it)
{
	size_t old = w->len;
	int rc;
	if ((rc = pfs_put_FH(w, &it->fh)) < 0 || (rc = pfs_put_U64(w, &it->size)) < 0 ||
	    (rc = pfs_put_I64(w, &it->mtime_s)) < 0 || (rc = pfs_put_U32(w, &it->mtime_ns)) < 0 ||
	    (rc = pfs_put_I64(w, &it->ctime_s)) < 0 || (rc = pfs_put_U32(w, &it->ctime_ns)) < 0) {
		w->len = old;
		return rc;
	}
	return 0;
}

int pfs_dec_reval_item(struct pfs_rd *r, struct pfs_reval_item *it)
{
	if (r->bad)
		return -EBADMSG;
	if (r->left == 0)
		return 0;
	if (pfs_get_FH(r, &it->fh) && pfs_get_U64(r, &it->size) && pfs_get_I64(r, &it->mtime_s) &&
	    pfs_get_U32(r, &it->mtime_ns) && pfs_get_I64(r, &it->ctime_s) &&
	    pfs_get_U32(r, &it->ctime_ns))
		return 1;
	r->bad = true;
	return -EBADMSG;
}

int pfs_enc_reval_result(struct pfs_wr *w, const struct pfs_reval_result *res)
{
	size_t old = w->len;
	int rc;
	if ((rc = pfs_put_U32(w, &res->index)) < 0 || (rc = pfs_put_U32(w, &res->status)) < 0 ||
	    (res->status == 0 && (rc = pfs_put_ATTR(w, &res->attr)) < 0)) {
		w->len = old;
		return rc;
	}
	return 0;
}

int pfs_dec_reval_result(struct pfs_rd *r, struct pfs_reval_result *res)
{
	if (r->bad)
		return -EBADMSG;
	if (r->left == 0)
		return 0;
	if (pfs_get_U32(r, &res->index) && pfs_get_U32(r, &res->status) &&
	    (res->status != 0 || pfs_get_ATTR(r, &res->attr)))
		return 1;
	r->bad = true;
	return -EBADMSG;
}

bool pfs_name_valid(const char *s, size_t len)
{
	if (len == 0 || len > PFS_NAME_MAX)
		return false;
	if (memchr(s, '/', len) || memchr(s, 0, len))
		return false;
	if (s[0] == '.' && (len == 1 || (len == 2 && s[1] == '.')))
		return false;
	return true;
}

/* ---- the opcode table (wire.h PFS_OPS) ---- */

#define OP_FLAGS(drc, once, modify, bulk, meta, ordered)                              \
	(PFS_OPF_KNOWN | (drc ? PFS_OPF_DRC : 0) | (once ? PFS_OPF_ONCE : 0) |         \
	 (modify ? PFS_OPF_MODIFY : 0) | (bulk ? PFS_OPF_BULK : 0) |                   \
	 (meta ? PFS_OPF_META : 0) | (ordered ? PFS_OPF_ORDERED : 0))
#define OP_ROW(n, v, req, rep, ...) \
	[v] = { #n, #req, #rep, OP_FLAGS(__VA_ARGS__) },
static const struct pfs_op_info op_table[PFS_OP_MAX] = { PFS_OPS(OP_ROW) };
#undef OP_ROW
#undef OP_FLAGS

static const struct pfs_op_info op_unknown = { "?", "-", "-", 0 };

const struct pfs_op_info *pfs_op_info(unsigned op)
{
	if (op >= PFS_OP_MAX || !op_table[op].name)
		return &op_unknown;
	return &op_table[op];
}

const char *pfs_op_name(unsigned op)
{
	return pfs_op_info(op)->name;
}

bool pfs_get_deleg_attrs(struct pfs_rd *r, struct pfs_setattr_req *m)
{
	return pfs_get_U32(r, &m->valid) && pfs_get_U32(r, &m->mode) && pfs_get_U32(r, &m->uid) &&
	       pfs_get_U32(r, &m->gid) && pfs_get_I64(r, &m->atime_s) &&
	       pfs_get_U32(r, &m->atime_ns) && pfs_get_I64(r, &m->mtime_s) &&
	       pfs_get_U32(r, &m->mtime_ns);
}
