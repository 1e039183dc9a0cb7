/* handshake.c: HELLO and AUTH on a new connection (see handshake_i.h).
 * Loop thread only. */
#include <errno.h>
#include <string.h>

#include "podfs/auth.h"
#include "podfs/frame.h"
#include "podfs/log.h"
#include "conn_i.h"
#include "handshake_i.h"
#include "pfsd_i.h"
#include "session_i.h"

static void timeout_cb(struct conn *c)
{
	if (pfsd_log_allowed(c->d))
		pfs_notice("conn %llu: %s did not authenticate within %d s; closing",
			   (unsigned long long)c->id, c->peer, PFSD_HANDSHAKE_MS / 1000);
	conn_close(c, "handshake timeout");
}

void handshake_start(struct conn *c)
{
	conn_deadline(c, PFSD_HANDSHAKE_MS, timeout_cb);
}

/* Returns the raw payload of a handshake frame in buf, or NULL. */
static const uint8_t *hs_payload(struct conn *c, const uint8_t *wire, uint8_t *buf)
{
	if (!(c->h.flags & PFS_FF_CODED))
		return wire;
	if (pfs_payload_decode(c->h.flags, wire, c->h.wire_len, buf, c->h.raw_len) < 0)
		return NULL;
	return buf;
}

/* Answers c's HELLO or AUTH with status (no payload) and refuses c: it
 * accepts nothing more and closes once the reply is written. */
static void refuse(struct conn *c, uint16_t op, int32_t status)
{
	conn_send_small(c, c->h.id, op, PFS_FF_REPLY, status, NULL, 0);
	conn_close_after_write(c, "refused");
	c->st = CS_HELLO; /* accept nothing more */
	conn_stop_reading(c);
}

static void on_hello(struct conn *c, const uint8_t *wire)
{
	uint8_t raw[PFS_MAX_HANDSHAKE], out[256];
	const uint8_t *p = hs_payload(c, wire, raw);
	struct pfs_hello_req m;
	struct pfs_hello_rep rep;
	struct pfs_wr w;

	if (c->h.op != PFS_OP_HELLO)
		return conn_violation(c, "first request is not HELLO");
	if (!p || pfs_dec_hello_req(p, c->h.raw_len, &m) < 0)
		return conn_violation(c, "malformed HELLO");
	if (m.magic != PFS_MAGIC)
		return conn_violation(c, "bad magic in HELLO");
	memcpy(c->host, m.hostname.s, m.hostname.len);
	c->host[m.hostname.len] = '\0';
	for (char *s = c->host; *s; s++) /* keep log lines printable */
		if (*s < 0x20 || *s > 0x7e)
			*s = '?';
	if (m.version_min > PFS_VERSION || m.version_max < PFS_VERSION) {
		pfs_warn("conn %llu: %s (%s) speaks protocol versions %u..%u, we speak %u",
			 (unsigned long long)c->id, c->peer, c->host, m.version_min, m.version_max,
			 PFS_VERSION);
		conn_send_small(c, c->h.id, PFS_OP_HELLO, PFS_FF_REPLY, EPROTONOSUPPORT, NULL, 0);
		conn_close_after_write(c, "refused");
		return;
	}
	/* 0 is no client's: deleg_drop_dir and recall_push_beside take it
	 * for "any" and "none". */
	if (m.client_id == 0)
		return conn_violation(c, "client id 0 in HELLO");
	c->client_id = m.client_id;
	c->caps = m.caps & (PFS_CAPS_ALL | PFS_CAP_BULK);
	if (!c->d->chunks)
		c->caps &= ~(uint64_t)PFS_CAP_PEER; /* peer-assisted reads are off */
	/* Delegations: only if this daemon grants them, and with the
	 * pushes and acknowledgements a recall needs (wire.h). */
	if (!c->d->deleg || (c->caps & (PFS_CAP_PUSH | PFS_CAP_PUSH_ACK | PFS_CAP_DIR_ATTR)) !=
				    (PFS_CAP_PUSH | PFS_CAP_PUSH_ACK | PFS_CAP_DIR_ATTR))
		c->caps &= ~(uint64_t)PFS_CAP_DELEG;
	c->bulk = (c->caps & PFS_CAP_BULK) != 0;
	memcpy(c->cnonce, m.nonce.b, PFS_NONCE_LEN);
	if (pfs_random(c->snonce, PFS_NONCE_LEN) < 0) {
		pfs_err("conn %llu: no random bytes", (unsigned long long)c->id);
		return conn_close(c, "internal error");
	}
	memset(&rep, 0, sizeof(rep));
	rep.version = PFS_VERSION;
	rep.caps = c->caps;
	rep.boot_id = c->d->boot_id;
	memcpy(rep.nonce.b, c->snonce, PFS_NONCE_LEN);
	pfs_auth_server_mac(c->d->key, c->cnonce, c->snonce, c->client_id, rep.mac.b);
	rep.max_payload = PFS_MAX_PAYLOAD;
	rep.write_verf = c->d->write_verf;
	pfs_wr_init(&w, out, sizeof(out));
	if (pfs_enc_hello_rep(&w, &rep) < 0)
		return conn_close(c, "internal error");
	c->st = CS_AUTH;
	conn_send_small(c, c->h.id, PFS_OP_HELLO, PFS_FF_REPLY, 0, out, w.len);
	c->hello_at = uv_now(&c->d->loop);
}

/* A bulk connection of the session s (NULL: none) that c's client has:
 * returns 1 if c joins it. */
static int join_bulk(struct conn *c, struct session *s)
{
	if (s && s->nbulk >= PFSD_MAX_BULK) {
		pfsd_warn_rl(c->d, "conn %llu: %s (%s): session %016llx has %u bulk "
			     "connections already; refused",
			     (unsigned long long)c->id, c->peer, c->host,
			     (unsigned long long)c->client_id, s->nbulk);
		refuse(c, PFS_OP_AUTH, EMFILE);
		return 0;
	}
	if (!s || !s->conn) {
		/* The client connects its main connection first (and again
		 * after our restart); this one retries. */
		pfs_info("conn %llu: %s (%s): bulk connection without a connected "
			 "session %016llx; refused",
			 (unsigned long long)c->id, c->peer, c->host,
			 (unsigned long long)c->client_id);
		refuse(c, PFS_OP_AUTH, ENOTCONN);
		return 0;
	}
	c->st = CS_READY;
	session_attach_bulk(s, c);
	pfs_notice("conn %llu: %s (%s) authenticated, bulk connection of session "
		   "%016llx (%u bulk)",
		   (unsigned long long)c->id, c->peer, c->host, (unsigned long long)c->client_id,
		   s->nbulk);
	return 1;
}

static int on_auth(struct conn *c, const uint8_t *wire, uint32_t *auth_flags)
{
	uint8_t raw[PFS_MAX_HANDSHAKE], mac[PFS_MAC_LEN];
	const uint8_t *p = hs_payload(c, wire, raw);
	struct pfs_auth_req m;
	struct session *s;
	uint32_t flags = 0;

	if (c->h.op != PFS_OP_AUTH) {
		conn_violation(c, "second request is not AUTH");
		return 0;
	}
	if (!p || pfs_dec_auth_req(p, c->h.raw_len, &m) < 0) {
		conn_violation(c, "malformed AUTH");
		return 0;
	}
	pfs_auth_client_mac(c->d->key, c->cnonce, c->snonce, c->client_id, mac);
	if (!pfs_mac_equal(mac, m.mac.b, PFS_MAC_LEN)) {
		pfsd_warn_rl(c->d, "auth failed from %s (wrong key)", c->peer);
		refuse(c, PFS_OP_AUTH, EACCES);
		return 0;
	}
	conn_deadline_stop(c);
	s = session_find(c->d, c->client_id);
	if (c->bulk) {
		*auth_flags = PFS_AUTH_RESUMED;
		return join_bulk(c, s);
	}
	c->st = CS_READY;
	/* HELLO's reply to AUTH is a round trip: the first hint of how long
	 * this client takes to acknowledge a push (acklat_i.h). */
	acklat_sample(&c->lat, uv_now(&c->d->loop), uv_now(&c->d->loop) - c->hello_at);
	if (s) {
		flags |= PFS_AUTH_RESUMED;
		if (s->locks_lost)
			flags |= PFS_AUTH_LOCKS_LOST;
		s->locks_lost = false;
	} else {
		s = session_new(c->d, c->client_id, &c->addr);
	}
	memcpy(s->host, c->host, sizeof(s->host));
	s->caps = c->caps;
	session_attach(s, c, "replaced by a new connection of the same client");
	pfs_notice("conn %llu: %s (%s) authenticated, session %016llx %s",
		   (unsigned long long)c->id, c->peer, c->host, (unsigned long long)c->client_id,
		   (flags & PFS_AUTH_RESUMED) ? "resumed" : "new");
	*auth_flags = flags;
	return 1;
}

int handshake_frame(struct conn *c, const uint8_t *payload, uint32_t *auth_flags)
{
	if (c->st == CS_HELLO) {
		on_hello(c, payload);
		return 0;
	}
	return on_auth(c, payload, auth_flags);
}
