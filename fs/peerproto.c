/* peerproto.c: the answers of a client serving its peers (see
 * peerproto_i.h). */
#include "peerproto_i.h"

#include <errno.h>
#include <string.h>

#include "podfs/auth.h"
#include "podfs/frame.h"

void pproto_init(struct pproto *pp, const uint8_t key[PFS_KEY_LEN])
{
	memset(pp, 0, sizeof(*pp));
	pp->key = key;
	pp->st = PP_HELLO;
}

int pproto_header(const uint8_t *in, struct pfs_frame_hdr *h, const char **why)
{
	if (pfs_hdr_unpack(in, h, PPROTO_MAX_REQ) < 0) {
		*why = "bad frame header";
		return -EBADMSG;
	}
	if (h->flags != 0 || h->status != 0 || h->id == 0) {
		*why = "not a request";
		return -EBADMSG;
	}
	return 0;
}

static enum pp_action close_with(struct pp_out *out, const char *why)
{
	out->why = why;
	return PP_CLOSE;
}

static enum pp_action reply(const struct pfs_frame_hdr *h, struct pp_out *out, int32_t status)
{
	out->id = h->id;
	out->op = h->op;
	out->status = status;
	if (status)
		out->len = 0;
	return PP_SEND;
}

enum pp_action pproto_frame(struct pproto *pp, const struct pfs_frame_hdr *h, const uint8_t *p,
			    struct pp_out *out)
{
	struct pfs_wr w;

	memset(out, 0, sizeof(*out));
	pfs_wr_init(&w, out->payload, sizeof(out->payload));
	switch (pp->st) {
	case PP_HELLO: {
		struct pfs_peer_hello_req m;
		struct pfs_peer_hello_rep rep;
		if (h->op != PFS_OP_PEER_HELLO || pfs_dec_peer_hello_req(p, h->raw_len, &m) < 0 ||
		    m.magic != PFS_PEER_MAGIC)
			return close_with(out, "no peer handshake");
		memcpy(pp->cnonce, m.nonce.b, PFS_NONCE_LEN);
		pp->client_id = m.client_id;
		if (pfs_random(pp->snonce, PFS_NONCE_LEN) < 0)
			return close_with(out, "no random bytes");
		memcpy(rep.nonce.b, pp->snonce, PFS_NONCE_LEN);
		pfs_auth_peer_server_mac(pp->key, pp->cnonce, pp->snonce, pp->client_id, rep.mac.b);
		if (pfs_enc_peer_hello_rep(&w, &rep) < 0)
			return close_with(out, "cannot encode");
		out->len = w.len;
		pp->st = PP_AUTH;
		return reply(h, out, 0);
	}
	case PP_AUTH: {
		struct pfs_peer_auth_req m;
		uint8_t mac[PFS_MAC_LEN];
		if (h->op != PFS_OP_PEER_AUTH || pfs_dec_peer_auth_req(p, h->raw_len, &m) < 0)
			return close_with(out, "no peer authentication");
		pfs_auth_peer_client_mac(pp->key, pp->cnonce, pp->snonce, pp->client_id, mac);
		if (!pfs_mac_equal(mac, m.mac.b, PFS_MAC_LEN)) {
			pp->st = PP_CLOSED;
			reply(h, out, EACCES);
			return PP_SEND_CLOSE;
		}
		pp->st = PP_READY;
		return reply(h, out, 0);
	}
	case PP_READY:
		if (h->op != PFS_OP_PEER_GET)
			return reply(h, out, ENOSYS);
		if (pfs_dec_peer_get_req(p, h->raw_len, &out->get) < 0)
			return close_with(out, "bad PEER_GET");
		if (out->get.size > PFS_MAX_IO ||
		    out->get.offset > (1u << PFS_CHUNK_SHIFT_MAX))
			return reply(h, out, EINVAL);
		out->id = h->id;
		out->op = h->op;
		return PP_GET;
	case PP_CLOSED:
		break;
	}
	return close_with(out, "closed");
}
