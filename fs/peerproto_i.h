/* peerproto_i.h: what a client serving its peers answers to each frame
 * another client sends it (wire_peer.h: PEER_HELLO,
 * PEER_AUTH, then PEER_GET), as a state machine with no I/O, so that
 * every byte a peer can send goes through one function the fuzzer drives
 * (tests/fuzz/fuzz_peerproto.c). peersrv.c does the I/O: it reads a
 * header (pproto_header), the payload, and does what pproto_frame says.
 *
 * Thread-safe per struct pproto (one per connection).
 */
#ifndef PODFS_PEERPROTO_I_H
#define PODFS_PEERPROTO_I_H

#include <stddef.h>
#include <stdint.h>

#include "podfs/codec.h"

/* The largest request payload a peer may send (PEER_HELLO is the
 * largest). */
#define PPROTO_MAX_REQ 128

enum pp_state { PP_HELLO, PP_AUTH, PP_READY, PP_CLOSED };

struct pproto {
	const uint8_t *key; /* the pod key (borrowed) */
	enum pp_state st;
	uint8_t cnonce[PFS_NONCE_LEN], snonce[PFS_NONCE_LEN];
	uint64_t client_id;
};

enum pp_action {
	PP_SEND,       /* send out's reply frame */
	PP_SEND_CLOSE, /* send it, then close (refused) */
	PP_GET,        /* serve out->get (the caller replies) */
	PP_CLOSE,      /* close at once: out->why */
};

struct pp_out {
	/* PP_SEND, PP_SEND_CLOSE: the reply (id and op are the request's). */
	uint64_t id;
	uint16_t op;
	int32_t status;
	uint8_t payload[PPROTO_MAX_REQ];
	size_t len;
	/* PP_GET: what is asked (size <= PFS_MAX_IO). */
	struct pfs_peer_get_req get;
	const char *why; /* PP_CLOSE */
};

/* A new connection's state; key is borrowed. */
void pproto_init(struct pproto *pp, const uint8_t key[PFS_KEY_LEN]);

/* The header in[PFS_FRAME_HDR_SIZE] of a peer's next frame: 0 with *h
 * set (its raw_len payload bytes follow), or -EBADMSG with *why: not a
 * request we take (a reply, a push, a coded payload, over
 * PPROTO_MAX_REQ). */
int pproto_header(const uint8_t *in, struct pfs_frame_hdr *h, const char **why);

/* What to do with request h and its payload p[h->raw_len]. Never fails;
 * a violation is PP_CLOSE. */
enum pp_action pproto_frame(struct pproto *pp, const struct pfs_frame_hdr *h, const uint8_t *p,
			    struct pp_out *out);

#endif /* PODFS_PEERPROTO_I_H */
