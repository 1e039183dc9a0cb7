/* fuzz_framer.c: podfsd's frame reader (daemon/framer.c), the code that
 * turns what a connection receives into frames, as conn.c drives it.
 *
 * Input: byte 0 picks the connection's state (bit 0: authenticated from
 * the start, bit 1: PFS_CAP_PUSH_ACK negotiated, bit 2: big payloads are
 * read directly into their buffer, as conn.c's alloc_cb does past
 * CONN_RBUF, here past 64 bytes); byte 1 seeds the sizes of the chunks
 * the rest arrives in. The rest is the byte stream. Before AUTH the
 * handshake is played as handshake.c would (HELLO, then AUTH, each
 * decoded; anything else ends the connection), without the MAC.
 *
 * Properties: no sanitizer report; each frame handed on is whole (its
 * wire_len payload bytes readable), within the limit of the state, a
 * request or an uncoded PUSH_ACK of an authenticated connection that
 * negotiated it; every byte is taken up to the frame that ends the
 * connection; a violation leaves no payload behind; what the receiver
 * then does with the frame (decompressing a coded payload into raw_len
 * bytes, decoding a PUSH_ACK from its wire_len bytes, decoding HELLO and
 * AUTH) stays within the buffers.
 */
#include <string.h>

#include "podfs/codec.h"
#include "podfs/frame.h"
#include "podfs/wire.h"
#include "podfs/xalloc.h"
#include "framer_i.h"
#include "fuzz.h"

#define DIRECT_MIN 64

enum state { HELLO, AUTH, READY, END };

struct sim {
	struct framer fr;
	struct pfs_frame_hdr h;
	enum state st;
	uint64_t caps;
	unsigned frames;
};

static uint8_t touch(const uint8_t *p, size_t n)
{
	uint8_t x = 0;

	for (size_t i = 0; i < n; i++)
		x ^= p[i];
	return x;
}

/* What the receiver does with a whole frame (server.c, handshake.c,
 * push.c, dispatch.c), up to its decoding. */
static void hand_on(struct sim *s, uint8_t *payload)
{
	const struct pfs_frame_hdr *h = &s->h;
	size_t max = s->st == READY ? PFS_MAX_PAYLOAD : PFS_MAX_HANDSHAKE;
	uint8_t *raw = payload;

	FUZZ_ASSERT(h->raw_len <= max);
	FUZZ_ASSERT((payload == NULL) == (h->wire_len == 0));
	touch(payload, h->wire_len);
	s->frames++;
	if (h->flags & PFS_FF_PUSH) {
		struct pfs_push_ack m;
		FUZZ_ASSERT(s->st == READY && (s->caps & PFS_CAP_PUSH_ACK));
		FUZZ_ASSERT(h->op == PFS_OP_PUSH_ACK && h->id == 0 && h->wire_len == h->raw_len);
		FUZZ_ASSERT(!(h->flags & (PFS_FF_CODED | PFS_FF_REPLY)));
		(void)pfs_dec_push_ack(payload, h->wire_len, &m); /* push.c */
		payload_free(payload);
		return;
	}
	FUZZ_ASSERT(h->id != 0 && h->status == 0 && !(h->flags & PFS_FF_REPLY));
	if (h->flags & PFS_FF_CODED) {
		raw = xmalloc(h->raw_len ? h->raw_len : 1);
		if (pfs_payload_decode(h->flags, payload, h->wire_len, raw, h->raw_len) < 0) {
			free(raw);
			payload_free(payload);
			s->st = END; /* a bad compressed payload: closed */
			return;
		}
		touch(raw, h->raw_len);
	}
	if (s->st == HELLO || s->st == AUTH) {
		struct pfs_hello_req hm;
		struct pfs_auth_req am;
		if (s->st == HELLO && h->op == PFS_OP_HELLO &&
		    pfs_dec_hello_req(raw, h->raw_len, &hm) == 0)
			s->st = AUTH;
		else if (s->st == AUTH && h->op == PFS_OP_AUTH &&
			 pfs_dec_auth_req(raw, h->raw_len, &am) == 0)
			s->st = READY;
		else
			s->st = END;
	}
	if (raw != payload)
		free(raw);
	payload_free(payload);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sim s;
	uint32_t rng;

	if (size < 2)
		return 0;
	memset(&s, 0, sizeof s);
	s.st = (data[0] & 1) ? READY : HELLO;
	s.caps = (data[0] & 2) ? PFS_CAP_PUSH_ACK : 0;
	bool direct = data[0] & 4;
	rng = 0x9e3779b9u ^ data[1];
	data += 2;
	size -= 2;

	while (size && s.st != END) {
		/* The next read: a chunk of 1..256 bytes (sometimes 4 KiB). */
		rng ^= rng << 13;
		rng ^= rng >> 17;
		rng ^= rng << 5;
		size_t chunk = (rng & 0x700) == 0x700 ? 4096 : 1 + (rng & 0xff);
		if (chunk > size)
			chunk = size;
		uint8_t *dst;
		size_t room;
		if (direct && framer_direct(&s.fr, &s.h, DIRECT_MIN, &dst, &room)) {
			/* alloc_cb gave the payload's own buffer. */
			if (chunk > room)
				chunk = room;
			memcpy(dst, data, chunk);
			data += chunk;
			size -= chunk;
			if (framer_direct_got(&s.fr, &s.h, chunk))
				hand_on(&s, framer_take(&s.fr));
			continue;
		}
		/* A copy, so that ASan sees reads past the chunk. */
		uint8_t *buf = xmalloc(chunk);
		const uint8_t *p = buf;
		size_t n = chunk;
		memcpy(buf, data, chunk);
		data += chunk;
		size -= chunk;
		while (n && s.st != END) {
			const char *why = NULL;
			int ret = framer_feed(&s.fr, &s.h, s.st == READY, s.caps, &p, &n, &why);
			FUZZ_ASSERT(ret >= -1 && ret <= 1);
			FUZZ_ASSERT(p + n == buf + chunk);
			if (ret < 0) {
				FUZZ_ASSERT(why && !s.fr.pbuf);
				s.st = END;
			} else if (ret > 0) {
				hand_on(&s, framer_take(&s.fr));
			} else {
				FUZZ_ASSERT(n == 0);
			}
		}
		free(buf);
	}
	framer_free(&s.fr);
	return 0;
}
