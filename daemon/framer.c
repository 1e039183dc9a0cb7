/* framer.c: the frame reader of a connection (see framer_i.h). */
#include <stdlib.h>
#include <string.h>

#include "podfs/bigbuf.h"
#include "podfs/wire.h"
#include "podfs/xalloc.h"
#include "framer_i.h"

/* The word before a payload holds how far its allocation begins before
 * it. A payload this big or bigger ends on a PAYLOAD_ALIGN boundary. */
#define PAYLOAD_HDR 16u /* keeps a small payload aligned as malloc's */
#define PAYLOAD_ALIGN 4096u
#define PAYLOAD_ALIGN_MIN (64u * 1024)

uint8_t *payload_alloc(size_t len)
{
	uint8_t *base, *p;
	size_t off;

	if (len == 0)
		return NULL;
	if (len < PAYLOAD_ALIGN_MIN) {
		base = xmalloc(PAYLOAD_HDR + len);
		p = base + PAYLOAD_HDR;
	} else {
		base = pfs_big_xalloc(PAYLOAD_HDR + len + PAYLOAD_ALIGN - 1);
		uintptr_t end = ((uintptr_t)base + PAYLOAD_HDR + len + PAYLOAD_ALIGN - 1) &
				~(uintptr_t)(PAYLOAD_ALIGN - 1);
		p = base + (end - (uintptr_t)base - len);
	}
	off = (size_t)(p - base);
	memcpy(p - sizeof(off), &off, sizeof(off));
	return p;
}

void payload_free(uint8_t *p)
{
	size_t off;

	if (!p)
		return;
	memcpy(&off, p - sizeof(off), sizeof(off));
	pfs_big_free(p - off);
}

/* Checks the header now complete in fr->hbuf into *h. Returns 0 or -1
 * with *why. */
static int header(struct framer *fr, struct pfs_frame_hdr *h, bool ready, uint64_t caps,
		  const char **why)
{
	size_t max = ready ? PFS_MAX_PAYLOAD : PFS_MAX_HANDSHAKE;

	if (pfs_hdr_unpack(fr->hbuf, h, max) < 0) {
		*why = "malformed frame header";
		return -1;
	}
	/* Requests, and PUSH_ACK, the one frame a client sends unasked
	 * (flagged as a push, id 0). It is 8 bytes, which no coding makes
	 * shorter: a coded one (whose payload is shorter than its raw
	 * length) is a protocol violation. */
	bool ack = (h->flags & PFS_FF_PUSH) && ready && (caps & PFS_CAP_PUSH_ACK) &&
		   h->op == PFS_OP_PUSH_ACK && h->id == 0 &&
		   !(h->flags & (PFS_FF_CODED | PFS_FF_REPLY)) && h->raw_len <= 64;
	if ((!ack && ((h->flags & (PFS_FF_REPLY | PFS_FF_PUSH)) || h->id == 0)) || h->status != 0) {
		*why = "not a request frame";
		return -1;
	}
	fr->have_hdr = true;
	fr->pgot = 0;
	fr->pbuf = payload_alloc(h->wire_len);
	return 0;
}

int framer_feed(struct framer *fr, struct pfs_frame_hdr *h, bool ready, uint64_t caps,
		const uint8_t **p, size_t *n, const char **why)
{
	size_t k;

	if (!fr->have_hdr) {
		k = PFS_FRAME_HDR_SIZE - fr->hgot;
		if (k > *n)
			k = *n;
		memcpy(fr->hbuf + fr->hgot, *p, k);
		fr->hgot += k;
		*p += k;
		*n -= k;
		if (fr->hgot < PFS_FRAME_HDR_SIZE)
			return 0;
		if (header(fr, h, ready, caps, why) < 0)
			return -1;
	}
	k = h->wire_len - fr->pgot;
	if (k > *n)
		k = *n;
	if (k)
		memcpy(fr->pbuf + fr->pgot, *p, k);
	fr->pgot += k;
	*p += k;
	*n -= k;
	return fr->pgot == h->wire_len;
}

uint8_t *framer_take(struct framer *fr)
{
	uint8_t *payload = fr->pbuf;

	fr->pbuf = NULL;
	fr->have_hdr = false;
	fr->hgot = 0;
	fr->pgot = 0;
	return payload;
}

bool framer_direct(const struct framer *fr, const struct pfs_frame_hdr *h, size_t min,
		   uint8_t **buf, size_t *len)
{
	if (!fr->have_hdr || !fr->pbuf || h->wire_len - fr->pgot < min)
		return false;
	*buf = fr->pbuf + fr->pgot;
	*len = h->wire_len - fr->pgot;
	return true;
}

bool framer_direct_got(struct framer *fr, const struct pfs_frame_hdr *h, size_t n)
{
	fr->pgot += n;
	return fr->pgot == h->wire_len;
}

void framer_free(struct framer *fr)
{
	payload_free(fr->pbuf);
	fr->pbuf = NULL;
}
