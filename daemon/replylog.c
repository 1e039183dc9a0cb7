/* replylog.c: the reply cache's copy in the state directory (see
 * replylog_i.h). */
#include "replylog_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "podfs/crc32c.h"
#include "podfs/frame.h"
#include "podfs/hash.h"
#include "podfs/le.h"
#include "podfs/xalloc.h"

#define MAGIC 0x4c524650u /* "PFRL" */
#define REC_MIN (REPLYLOG_FIXED + PFS_FRAME_HDR_SIZE)

/* A record, little-endian: magic, crc32c of what follows it, its length,
 * op, kind, verf, seq, client_id, id, raw, len (REPLYLOG_FIXED bytes),
 * then the frame header and the wire bytes. An append's (REPLYLOG_APPEND,
 * REPLYLOG_DROPPED) has op WRITE, raw 0, a zero frame header, and for
 * wire bytes: at (u64), the bytes' length and CRC32C (u32 each), the
 * handle's length (u8) and bytes. A change begun's (REPLYLOG_BEGUN) has
 * a zero frame header and no wire bytes, or, a RENAME's, the handle's
 * length (u8) and bytes of what was at its old name. */
size_t replylog_pack(uint8_t *slot, uint64_t verf, uint64_t seq, uint64_t client_id, uint64_t id,
		     uint16_t op, const uint8_t hdr[PFS_FRAME_HDR_SIZE], const void *wire,
		     size_t len, size_t raw)
{
	if (len > REPLYLOG_MAX_WIRE || raw > PFS_MAX_PAYLOAD)
		return 0;
	size_t total = REC_MIN + len;
	memset(slot, 0, REPLYLOG_SLOT);
	pfs_store_le32(slot, MAGIC);
	pfs_store_le32(slot + 8, (uint32_t)total);
	pfs_store_le16(slot + 12, op);
	pfs_store_le64(slot + 16, verf);
	pfs_store_le64(slot + 24, seq);
	pfs_store_le64(slot + 32, client_id);
	pfs_store_le64(slot + 40, id);
	pfs_store_le32(slot + 48, (uint32_t)raw);
	pfs_store_le32(slot + 52, (uint32_t)len);
	memcpy(slot + REPLYLOG_FIXED, hdr, PFS_FRAME_HDR_SIZE);
	if (len)
		memcpy(slot + REC_MIN, wire, len);
	pfs_store_le32(slot + 4, pfs_crc32c(0, slot + 8, total - 8));
	return total;
}

static const uint8_t zero_hdr[PFS_FRAME_HDR_SIZE];

/* A handle as the records carry it: its length (u8), then its bytes, at
 * w. Returns the bytes written. */
static size_t put_fh(uint8_t *w, const struct pfs_fh *fh)
{
	w[0] = fh->len;
	memcpy(w + 1, fh->data, fh->len);
	return 1 + (size_t)fh->len;
}

/* The handle at w, whose record has room bytes from w on: into *fh if
 * its length is valid and it fills them exactly. */
static bool take_fh(const uint8_t *w, size_t room, struct pfs_fh *fh)
{
	if (room < 1 || w[0] < 1 || w[0] > PFS_FH_MAX || room != 1 + (size_t)w[0])
		return false;
	fh->len = w[0];
	memcpy(fh->data, w + 1, fh->len);
	return true;
}

/* Marks the record of n bytes in slot as of kind (not a reply), its
 * checksum made again. Returns n. */
static size_t set_kind(uint8_t *slot, size_t n, uint16_t kind)
{
	if (n) {
		pfs_store_le16(slot + 14, kind);
		pfs_store_le32(slot + 4, pfs_crc32c(0, slot + 8, n - 8));
	}
	return n;
}

size_t replylog_pack_append(uint8_t *slot, uint16_t kind, uint64_t verf, uint64_t seq,
			    uint64_t client_id, uint64_t id, const struct pfs_fh *fh, uint64_t at,
			    uint32_t len, uint32_t crc)
{
	uint8_t body[REPLYLOG_APPEND_FIXED + PFS_FH_MAX];

	if (fh->len < 1 || fh->len > PFS_FH_MAX ||
	    (kind != REPLYLOG_APPEND && kind != REPLYLOG_DROPPED))
		return 0;
	pfs_store_le64(body, at);
	pfs_store_le32(body + 8, len);
	pfs_store_le32(body + 12, crc);
	size_t blen = REPLYLOG_APPEND_FIXED - 1 + put_fh(body + REPLYLOG_APPEND_FIXED - 1, fh);
	return set_kind(slot,
			replylog_pack(slot, verf, seq, client_id, id, PFS_OP_WRITE, zero_hdr, body,
				      blen, 0),
			kind);
}

size_t replylog_pack_begun(uint8_t *slot, uint64_t verf, uint64_t seq, uint64_t client_id,
			   uint64_t id, uint16_t op, const struct pfs_fh *was)
{
	uint8_t body[1 + PFS_FH_MAX];
	size_t len = 0;

	if (was && was->len) {
		if (op != PFS_OP_RENAME || was->len > PFS_FH_MAX)
			return 0;
		len = put_fh(body, was);
	}
	return set_kind(slot,
			replylog_pack(slot, verf, seq, client_id, id, op, zero_hdr, body, len, 0),
			REPLYLOG_BEGUN);
}

bool replylog_begins(unsigned op)
{
	return op == PFS_OP_MKDIR || op == PFS_OP_CREATE || op == PFS_OP_UNLINK ||
	       op == PFS_OP_RMDIR || op == PFS_OP_RENAME || op == PFS_OP_MKNOD ||
	       op == PFS_OP_SYMLINK || op == PFS_OP_LINK || op == PFS_OP_SETXATTR ||
	       op == PFS_OP_REMOVEXATTR;
}

static bool zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* An append's record (after its common fields are checked) into p. */
static bool unpack_append(const uint8_t *slot, size_t len, size_t raw, struct replylog_rec *p)
{
	const uint8_t *w = slot + REC_MIN;

	if (!zero(slot + REPLYLOG_FIXED, PFS_FRAME_HDR_SIZE))
		return false;
	if (raw != 0 || pfs_load_le16(slot + 12) != PFS_OP_WRITE || len < REPLYLOG_APPEND_FIXED ||
	    !take_fh(w + REPLYLOG_APPEND_FIXED - 1, len - (REPLYLOG_APPEND_FIXED - 1), &p->fh))
		return false;
	p->at = pfs_load_le64(w);
	p->dlen = pfs_load_le32(w + 8);
	p->dcrc = pfs_load_le32(w + 12);
	return p->at <= (uint64_t)INT64_MAX && p->dlen <= PFS_MAX_PAYLOAD;
}

struct replylog_rec *replylog_unpack(const uint8_t *slot, uint64_t verf, uint64_t *seq)
{
	if (pfs_load_le32(slot) != MAGIC)
		return NULL;
	size_t total = pfs_load_le32(slot + 8);
	if (total < REC_MIN || total > REPLYLOG_SLOT ||
	    pfs_load_le32(slot + 4) != pfs_crc32c(0, slot + 8, total - 8))
		return NULL;
	size_t len = pfs_load_le32(slot + 52), raw = pfs_load_le32(slot + 48);
	uint16_t kind = pfs_load_le16(slot + 14);
	if (len != total - REC_MIN || raw > PFS_MAX_PAYLOAD ||
	    kind > REPLYLOG_BEGUN || pfs_load_le64(slot + 16) != verf)
		return NULL;
	struct replylog_rec *p = calloc(1, sizeof(*p) + len);
	if (!p)
		return NULL;
	p->kind = kind;
	p->status = 0;
	if (kind == REPLYLOG_BEGUN) {
		/* A rename's may name what was at its old name. */
		uint16_t op = pfs_load_le16(slot + 12);
		if (raw || !zero(slot + REPLYLOG_FIXED, PFS_FRAME_HDR_SIZE) ||
		    !replylog_begins(op) ||
		    (len && (op != PFS_OP_RENAME || !take_fh(slot + REC_MIN, len, &p->fh))))
			goto bad;
	} else if (kind != REPLYLOG_REPLY) {
		if (!unpack_append(slot, len, raw, p))
			goto bad;
	} else {
		/* The reply's own header must say what the record says. */
		struct pfs_frame_hdr h;
		if (pfs_hdr_unpack(slot + REPLYLOG_FIXED, &h, PFS_MAX_PAYLOAD) < 0 ||
		    !(h.flags & PFS_FF_REPLY) || h.wire_len != len || h.raw_len != raw ||
		    h.id != pfs_load_le64(slot + 40) || h.op != pfs_load_le16(slot + 12))
			goto bad;
		p->status = h.status;
	}
	p->seq = *seq = pfs_load_le64(slot + 24);
	p->op = pfs_load_le16(slot + 12);
	p->client_id = pfs_load_le64(slot + 32);
	p->id = pfs_load_le64(slot + 40);
	p->raw = raw;
	p->len = len;
	memcpy(p->hdr, slot + REPLYLOG_FIXED, PFS_FRAME_HDR_SIZE);
	memcpy(p->wire, slot + REC_MIN, len);
	return p;
bad:
	free(p);
	return NULL;
}

static uint64_t key_hash(uint64_t client_id, uint64_t id)
{
	return pfs_hash_u64(client_id ^ pfs_hash_u64(id));
}

static struct replylog_rec *lookup(const struct replylog *rl, uint64_t client_id, uint64_t id)
{
	uint64_t h = key_hash(client_id, id);

	for (struct hnode *n = htab_first(&rl->old, h); n; n = htab_next(n, h)) {
		struct replylog_rec *p = container_of(n, struct replylog_rec, hn);
		if (p->client_id == client_id && p->id == id)
			return p;
	}
	return NULL;
}

/* A record kept at the start: where it is and its place in the order. */
struct kept {
	uint64_t seq;
	uint32_t slot;
};

static int by_seq(const void *a, const void *b)
{
	const struct kept *p = a, *q = b;

	return p->seq < q->seq ? -1 : p->seq > q->seq;
}

/* The slots of the records kept in rl->old are old_host's, oldest first;
 * the others are free (empty, unreadable, or a record the newer of its
 * request's stands for). */
static void take_old(struct replylog *rl)
{
	struct kept *v = xmalloc((rl->n_old ? rl->n_old : 1) * sizeof(*v));
	size_t nv = 0, pos;

	for (struct hnode *n = htab_iter(&rl->old, &pos, NULL); n; n = htab_iter(&rl->old, &pos, n)) {
		const struct replylog_rec *p = container_of(n, struct replylog_rec, hn);
		v[nv++] = (struct kept){ p->seq, p->slot };
	}
	qsort(v, nv, sizeof(*v), by_seq);
	uint32_t *k = xmalloc((nv ? nv : 1) * sizeof(*k));
	for (size_t i = 0; i < nv; i++)
		k[i] = v[i].slot;
	/* (Each slot read holds one record: they are distinct.) */
	rlslots_take(&rl->slots, &rl->old_host, k, (uint32_t)nv);
	free(k);
	free(v);
}

/* Reads every slot: the records of boot verf go into rl->old (the newer
 * of two with one key), and the next seq follows the newest. */
static void load(struct replylog *rl)
{
	enum { BATCH = 64 };
	uint8_t *buf = xmalloc((size_t)BATCH * REPLYLOG_SLOT);
	uint64_t next = 0;

	for (unsigned first = 0; first < REPLYLOG_SLOTS; first += BATCH) {
		/* (The last slot is as long as its record: zeros after.) */
		memset(buf, 0, (size_t)BATCH * REPLYLOG_SLOT);
		ssize_t got = pread(rl->fd, buf, (size_t)BATCH * REPLYLOG_SLOT,
				    (off_t)first * REPLYLOG_SLOT);
		if (got <= 0)
			break;
		for (size_t i = 0; i * REPLYLOG_SLOT < (size_t)got; i++) {
			uint64_t seq;
			struct replylog_rec *p = replylog_unpack(buf + i * REPLYLOG_SLOT, rl->verf, &seq);
			if (!p)
				continue;
			p->slot = first + (unsigned)i;
			if (seq + 1 > next)
				next = seq + 1;
			struct replylog_rec *q = lookup(rl, p->client_id, p->id);
			if (q && q->seq > p->seq) {
				free(p); /* two of one request: the later stands */
				continue;
			}
			if (q) {
				htab_remove(&rl->old, &q->hn);
				free(q);
				rl->n_old--;
			}
			htab_insert(&rl->old, &p->hn, key_hash(p->client_id, p->id));
			rl->n_old++;
		}
		if ((size_t)got < (size_t)BATCH * REPLYLOG_SLOT)
			break;
	}
	free(buf);
	atomic_store(&rl->seq, next);
	take_old(rl);
}

int replylog_open(struct replylog *rl, const char *state_dir, uint64_t verf, char *err,
		  size_t errlen)
{
	char path[4096];
	struct stat st;

	memset(rl, 0, sizeof(*rl));
	rl->fd = -1;
	rl->verf = verf;
	htab_init(&rl->old);
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", state_dir, REPLYLOG_NAME) >= sizeof(path)) {
		snprintf(err, errlen, "%s: path too long", state_dir);
		return -ENAMETOOLONG;
	}
	int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		int e = errno;
		snprintf(err, errlen, "%s: %s", path, strerror(e));
		return -e;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077)) {
		snprintf(err, errlen, "%s: not a regular file of podfsd's own, mode 0600", path);
		close(fd);
		return -EPERM;
	}
	rl->fd = fd;
	pthread_mutex_init(&rl->mu, NULL);
	for (unsigned i = 0; i < REPLYLOG_STRIPES; i++)
		pthread_mutex_init(&rl->stripe[i], NULL);
	rlslots_init(&rl->slots, REPLYLOG_SLOTS);
	rlslots_host_add(&rl->slots, &rl->old_host);
	rlslots_host_add(&rl->slots, &rl->nohost);
	load(rl);
	return 0;
}

void replylog_host_add(struct replylog *rl, struct rlslots_host *h)
{
	if (!rl->slots.n)
		return;
	pthread_mutex_lock(&rl->mu);
	rlslots_host_add(&rl->slots, h);
	pthread_mutex_unlock(&rl->mu);
}

void replylog_host_remove(struct replylog *rl, struct rlslots_host *h)
{
	if (!rl->slots.n)
		return;
	pthread_mutex_lock(&rl->mu);
	rlslots_host_remove(&rl->slots, h);
	pthread_mutex_unlock(&rl->mu);
}

unsigned replylog_free_slots(struct replylog *rl)
{
	if (!rl->slots.n)
		return 0;
	pthread_mutex_lock(&rl->mu);
	unsigned n = rl->slots.nfree;
	pthread_mutex_unlock(&rl->mu);
	return n;
}

uint64_t replylog_not_written(const struct replylog *rl)
{
	return atomic_load(&rl->too_big) + atomic_load(&rl->failed);
}

void replylog_forget(struct replylog *rl)
{
	struct hnode *n;

	if (rl->slots.n) {
		pthread_mutex_lock(&rl->mu);
		rlslots_clear(&rl->slots, &rl->old_host);
		pthread_mutex_unlock(&rl->mu);
	}
	while ((n = htab_pop(&rl->old)))
		free(container_of(n, struct replylog_rec, hn));
	rl->n_old = 0;
}

void replylog_close(struct replylog *rl)
{
	replylog_forget(rl);
	htab_fini(&rl->old);
	if (rl->fd >= 0)
		close(rl->fd);
	rl->fd = -1;
	if (rl->slots.n) {
		rlslots_fini(&rl->slots);
		pthread_mutex_destroy(&rl->mu);
		for (unsigned i = 0; i < REPLYLOG_STRIPES; i++)
			pthread_mutex_destroy(&rl->stripe[i]);
	}
}

/* Writes the record of n bytes in slot (0: it did not fit, counted) to
 * the slot rlslots gives host h (NULL: nohost). */
static void write_rec(struct replylog *rl, struct rlslots_host *h, const uint8_t *slot, size_t n)
{
	if (!n) {
		atomic_fetch_add(&rl->too_big, 1);
		return;
	}
	pthread_mutex_lock(&rl->mu);
	uint32_t k = rlslots_alloc(&rl->slots, h ? h : &rl->nohost);
	pthread_mutex_t *mu = &rl->stripe[k % REPLYLOG_STRIPES];
	pthread_mutex_lock(mu);
	pthread_mutex_unlock(&rl->mu);
	if (pwrite(rl->fd, slot, n, (off_t)k * REPLYLOG_SLOT) != (ssize_t)n)
		atomic_fetch_add(&rl->failed, 1);
	pthread_mutex_unlock(mu);
}

void replylog_put(struct replylog *rl, struct rlslots_host *h, uint64_t client_id, uint64_t id,
		  uint16_t op, const uint8_t hdr[PFS_FRAME_HDR_SIZE], const void *wire, size_t len,
		  size_t raw)
{
	uint8_t slot[REPLYLOG_SLOT];

	if (rl->fd < 0)
		return;
	uint64_t seq = atomic_fetch_add(&rl->seq, 1);
	write_rec(rl, h, slot,
		  replylog_pack(slot, rl->verf, seq, client_id, id, op, hdr, wire, len, raw));
}

static void put_append(struct replylog *rl, struct rlslots_host *h, uint16_t kind,
		       uint64_t client_id, uint64_t id, const struct pfs_fh *fh, uint64_t at,
		       uint32_t len, uint32_t crc)
{
	uint8_t slot[REPLYLOG_SLOT];

	if (rl->fd < 0)
		return;
	uint64_t seq = atomic_fetch_add(&rl->seq, 1);
	write_rec(rl, h, slot,
		  replylog_pack_append(slot, kind, rl->verf, seq, client_id, id, fh, at, len, crc));
}

void replylog_begin(struct replylog *rl, struct rlslots_host *h, uint64_t client_id, uint64_t id,
		    uint16_t op, const struct pfs_fh *was)
{
	uint8_t slot[REPLYLOG_SLOT];

	if (rl->fd < 0)
		return;
	uint64_t seq = atomic_fetch_add(&rl->seq, 1);
	write_rec(rl, h, slot, replylog_pack_begun(slot, rl->verf, seq, client_id, id, op, was));
}

void replylog_intend(struct replylog *rl, struct rlslots_host *h, uint64_t client_id, uint64_t id,
		     const struct pfs_fh *fh, uint64_t at, uint32_t len, uint32_t crc)
{
	put_append(rl, h, REPLYLOG_APPEND, client_id, id, fh, at, len, crc);
}

/* The CRC32C of fd's len bytes at off, into *crc: 0, or -errno (-ENODATA:
 * the file ends before them). */
static int crc_range(int fd, uint64_t off, uint32_t len, uint32_t *crc)
{
	uint8_t buf[65536];
	uint32_t c = 0;

	while (len) {
		ssize_t n = pread(fd, buf, len < sizeof buf ? len : sizeof buf, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ENODATA;
		c = pfs_crc32c(c, buf, (size_t)n);
		off += (uint64_t)n;
		len -= (uint32_t)n;
	}
	*crc = c;
	return 0;
}

/* What became of the append p: landed (true), or not (the file cut back
 * if it ended inside it). */
static bool settle_one(struct replylog_rec *p, int (*open_fh)(void *, const struct pfs_fh *, int),
		       void *ctx, struct replylog_settled *out)
{
	struct stat st;
	uint32_t crc;
	int fd = open_fh(ctx, &p->fh, O_RDONLY);

	if (fd < 0) {
		out->unknown++;
		return false;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		out->unknown++;
		return false;
	}
	uint64_t size = (uint64_t)st.st_size;
	if (size >= p->at + p->dlen) {
		int ret = crc_range(fd, p->at, p->dlen, &crc);
		close(fd);
		if (ret == 0 && crc == p->dcrc) {
			out->landed++;
			return true;
		}
		if (ret < 0)
			out->unknown++;
		else
			out->missing++;
		return false;
	}
	close(fd);
	if (size <= p->at) {
		out->missing++;
		return false;
	}
	/* The kill cut the write: what it wrote goes, and the re-sent
	 * WRITE appends all of it. */
	fd = open_fh(ctx, &p->fh, O_WRONLY);
	if (fd < 0 || ftruncate(fd, (off_t)p->at) < 0)
		out->unknown++;
	else
		out->cut++;
	if (fd >= 0)
		close(fd);
	return false;
}

void replylog_settle(struct replylog *rl, int (*open_fh)(void *ctx, const struct pfs_fh *fh,
							 int flags),
		     void *ctx, struct replylog_settled *out)
{
	struct replylog_rec **v = malloc((rl->n_old ? rl->n_old : 1) * sizeof(*v));
	size_t nv = 0, pos;

	memset(out, 0, sizeof(*out));
	for (struct hnode *n = htab_iter(&rl->old, &pos, NULL); n; n = htab_iter(&rl->old, &pos, n)) {
		struct replylog_rec *p = container_of(n, struct replylog_rec, hn);
		if (p->kind == REPLYLOG_APPEND && !p->landed) {
			if (v)
				v[nv++] = p;
			else
				out->unknown++; /* never answered (replylog_find) */
		}
	}
	for (size_t i = 0; i < nv; i++) {
		struct replylog_rec *p = v[i];
		p->landed = settle_one(p, open_fh, ctx, out);
		if (!p->landed) {
			put_append(rl, &rl->old_host, REPLYLOG_DROPPED, p->client_id, p->id, &p->fh,
				   p->at, p->dlen, p->dcrc);
			htab_remove(&rl->old, &p->hn);
			free(p);
			rl->n_old--;
		}
	}
	free(v);
}

struct replylog_rec *replylog_copy(const struct replylog_rec *p)
{
	struct replylog_rec *q = malloc(sizeof(*q) + p->len);

	if (q)
		memcpy(q, p, sizeof(*q) + p->len);
	return q;
}

const struct replylog_rec *replylog_find(const struct replylog *rl, uint64_t client_id,
					 uint64_t id, uint16_t op)
{
	if (!rl->n_old)
		return NULL;
	const struct replylog_rec *p = lookup(rl, client_id, id);
	/* (An append not settled has no answer: it runs again.) */
	return p && p->op == op &&
			       (p->kind == REPLYLOG_REPLY || p->kind == REPLYLOG_BEGUN || p->landed)
		       ? p
		       : NULL;
}
