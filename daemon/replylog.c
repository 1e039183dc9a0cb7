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

#define MAGIC 0x4c524650u /* "PFRL" */
#define REC_MIN (REPLYLOG_FIXED + PFS_FRAME_HDR_SIZE)

/* A record, little-endian: magic, crc32c of what follows it, its length,
 * op, 2 bytes zero, verf, seq, client_id, id, raw, len (REPLYLOG_FIXED
 * bytes), then the frame header and the wire bytes. */
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

struct replylog_rec *replylog_unpack(const uint8_t *slot, uint64_t verf, uint64_t *seq)
{
	if (pfs_load_le32(slot) != MAGIC)
		return NULL;
	size_t total = pfs_load_le32(slot + 8);
	if (total < REC_MIN || total > REPLYLOG_SLOT ||
	    pfs_load_le32(slot + 4) != pfs_crc32c(0, slot + 8, total - 8))
		return NULL;
	size_t len = pfs_load_le32(slot + 52), raw = pfs_load_le32(slot + 48);
	if (len != total - REC_MIN || raw > PFS_MAX_PAYLOAD || pfs_load_le16(slot + 14) != 0 ||
	    pfs_load_le64(slot + 16) != verf)
		return NULL;
	/* The reply's own header must say what the record says. */
	struct pfs_frame_hdr h;
	if (pfs_hdr_unpack(slot + REPLYLOG_FIXED, &h, PFS_MAX_PAYLOAD) < 0 ||
	    !(h.flags & PFS_FF_REPLY) || h.wire_len != len || h.raw_len != raw ||
	    h.id != pfs_load_le64(slot + 40) || h.op != pfs_load_le16(slot + 12))
		return NULL;
	struct replylog_rec *p = malloc(sizeof(*p) + len);
	if (!p)
		return NULL;
	p->seq = *seq = pfs_load_le64(slot + 24);
	p->op = h.op;
	p->status = h.status;
	p->client_id = pfs_load_le64(slot + 32);
	p->id = h.id;
	p->raw = raw;
	p->len = len;
	memcpy(p->hdr, slot + REPLYLOG_FIXED, PFS_FRAME_HDR_SIZE);
	memcpy(p->wire, slot + REC_MIN, len);
	return p;
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

/* Reads every slot: the records of boot verf go into rl->old (the newer
 * of two with one key), and the next seq follows the newest. */
static void load(struct replylog *rl)
{
	enum { BATCH = 64 };
	uint8_t *buf = malloc((size_t)BATCH * REPLYLOG_SLOT);
	uint64_t next = 0;

	if (!buf)
		return;
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
	load(rl);
	return 0;
}

void replylog_forget(struct replylog *rl)
{
	struct hnode *n;

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
}

void replylog_put(struct replylog *rl, uint64_t client_id, uint64_t id, uint16_t op,
		  const uint8_t hdr[PFS_FRAME_HDR_SIZE], const void *wire, size_t len, size_t raw)
{
	uint8_t slot[REPLYLOG_SLOT];

	if (rl->fd < 0)
		return;
	uint64_t seq = atomic_fetch_add(&rl->seq, 1);
	size_t n = replylog_pack(slot, rl->verf, seq, client_id, id, op, hdr, wire, len, raw);
	if (!n) {
		atomic_fetch_add(&rl->too_big, 1);
		return;
	}
	if (pwrite(rl->fd, slot, n, (off_t)(seq % REPLYLOG_SLOTS) * REPLYLOG_SLOT) != (ssize_t)n)
		atomic_fetch_add(&rl->failed, 1);
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
	return p && p->op == op ? p : NULL;
}
