/* fuzz_peerproto.c: what a client serving its peers makes of the frames
 * another client sends it (fs/peerproto.c: pproto_header and
 * pproto_frame, the only code that sees a peer's bytes before the
 * chunk store does).
 *
 * An input: u8 mode, then frames (24-byte header + its payload, as on
 * the wire) until the input ends. Mode bit 0: the target first runs a
 * correct handshake itself (PEER_HELLO, then PEER_AUTH with the MAC the
 * serving side expects, computed here from the key and its nonce), so
 * that the frames reach the authenticated state; otherwise they start
 * in front of the handshake.
 *
 * Properties: no crash or read outside the input; a bad header is
 * refused before its payload is looked at; a reply's payload fits its
 * buffer and its id and op are the request's; PEER_GET is served only
 * after a successful PEER_AUTH and only for sizes up to PFS_MAX_IO; after
 * a close (or a refused AUTH) nothing more is answered.
 */
#include <string.h>

#include "fuzz.h"
#include "peerproto_i.h"
#include "podfs/auth.h"
#include "podfs/frame.h"

static const uint8_t key[PFS_KEY_LEN] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };

/* Feeds one frame (header hb, payload p) to pp; false once the
 * connection is over. */
static bool feed(struct pproto *pp, const uint8_t *hb, const uint8_t *p, size_t avail,
		 size_t *used, struct pp_out *out, enum pp_action *act)
{
	struct pfs_frame_hdr h;
	const char *why = NULL;

	*used = 0;
	if (pproto_header(hb, &h, &why) < 0) {
		FUZZ_ASSERT(why != NULL);
		return false;
	}
	FUZZ_ASSERT(h.raw_len <= PPROTO_MAX_REQ && h.wire_len == h.raw_len);
	FUZZ_ASSERT(!(h.flags & (PFS_FF_REPLY | PFS_FF_PUSH | PFS_FF_CODED)));
	if (h.raw_len > avail)
		return false; /* the connection would wait for more */
	enum pp_state before = pp->st;
	*act = pproto_frame(pp, &h, p, out);
	*used = h.raw_len;
	switch (*act) {
	case PP_SEND:
	case PP_SEND_CLOSE:
		FUZZ_ASSERT(out->id == h.id && out->op == h.op);
		FUZZ_ASSERT(out->len <= sizeof(out->payload));
		FUZZ_ASSERT(out->status == 0 || out->len == 0);
		if (*act == PP_SEND_CLOSE)
			FUZZ_ASSERT(before == PP_AUTH && out->status != 0);
		return *act == PP_SEND;
	case PP_GET:
		FUZZ_ASSERT(before == PP_READY && h.op == PFS_OP_PEER_GET);
		FUZZ_ASSERT(out->get.size <= PFS_MAX_IO);
		FUZZ_ASSERT(out->id == h.id && out->op == h.op);
		return true;
	case PP_CLOSE:
		FUZZ_ASSERT(out->why != NULL);
		return false;
	}
	FUZZ_ASSERT(0);
	return false;
}

/* A correct handshake on pp. */
static void handshake(struct pproto *pp)
{
	struct pfs_peer_hello_req hq = { .magic = PFS_PEER_MAGIC, .client_id = 42 };
	struct pfs_peer_auth_req aq;
	struct pfs_frame_hdr h = { .id = 1, .op = PFS_OP_PEER_HELLO };
	struct pp_out out;
	uint8_t buf[PPROTO_MAX_REQ];
	struct pfs_wr w;

	memset(hq.nonce.b, 0x33, sizeof(hq.nonce.b));
	pfs_wr_init(&w, buf, sizeof(buf));
	FUZZ_ASSERT(pfs_enc_peer_hello_req(&w, &hq) == 0);
	h.raw_len = h.wire_len = (uint32_t)w.len;
	FUZZ_ASSERT(pproto_frame(pp, &h, buf, &out) == PP_SEND && out.status == 0);
	pfs_auth_peer_client_mac(key, hq.nonce.b, pp->snonce, 42, aq.mac.b);
	pfs_wr_init(&w, buf, sizeof(buf));
	FUZZ_ASSERT(pfs_enc_peer_auth_req(&w, &aq) == 0);
	h = (struct pfs_frame_hdr){ .id = 2, .op = PFS_OP_PEER_AUTH, .raw_len = (uint32_t)w.len,
				    .wire_len = (uint32_t)w.len };
	FUZZ_ASSERT(pproto_frame(pp, &h, buf, &out) == PP_SEND && out.status == 0);
	FUZZ_ASSERT(pp->st == PP_READY);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct pp_out out;
	struct pproto pp;
	enum pp_action act;
	size_t used;

	if (size < 1)
		return 0;
	pproto_init(&pp, key);
	if (data[0] & 1)
		handshake(&pp);
	data++;
	size--;
	for (unsigned n = 0; size >= PFS_FRAME_HDR_SIZE && n < 64; n++) {
		bool go = feed(&pp, data, data + PFS_FRAME_HDR_SIZE, size - PFS_FRAME_HDR_SIZE,
			       &used, &out, &act);
		data += PFS_FRAME_HDR_SIZE + used;
		size -= PFS_FRAME_HDR_SIZE + used;
		if (!go)
			break;
	}
	return 0;
}
