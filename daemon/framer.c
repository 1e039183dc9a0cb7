/* framer.c: the frame reader of a connection (see framer_i.h). */
#include <stdlib.h>
#include <string.h>

#include "podfs/wire.h"
#include "podfs/xalloc.h"
#include "framer_i.h"

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
	fr->pbuf = h->wire_len ? xmalloc(h->wire_len) : NULL;
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
	free(fr->pbuf);
	fr->pbuf = NULL;
}
