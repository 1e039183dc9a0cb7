/* server_i.h: connections, framing, requests in flight, replies.
 *
 * Loop thread only, except struct req's worker fields, which the worker
 * running the request fills (see dispatch_i.h) and after_work reads.
 */
#ifndef PODFSD_SERVER_I_H
#define PODFSD_SERVER_I_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "podfs/codec.h"
#include "podfs/frame.h"
#include "pfsd_i.h"
#include "req_i.h"

struct session;

enum conn_state {
	CS_HELLO, /* waiting for HELLO */
	CS_AUTH,  /* HELLO answered, waiting for AUTH */
	CS_READY, /* authenticated */
};

#define CONN_RBUF 32768

struct conn {
	uv_tcp_t tcp;
	uv_timer_t hs_timer;   /* handshake deadline */
	struct pfsd *d;
	struct conn *prev, *next;
	uint64_t id;
	char peer[64];         /* "addr:port" */
	char host[PFS_HOSTNAME_MAX + 1];
	enum conn_state st;
	bool closing;          /* uv_close issued */
	bool reading;
	bool close_after_write;
	unsigned open_handles; /* tcp + timer, until their close_cb */
	unsigned inflight;     /* requests queued, running or being written */
	uint64_t push_sent;    /* pushes written on this connection */
	uint64_t push_acked;   /* of which the client acknowledged (PUSH_ACK) */
	size_t mem;            /* request + reply bytes held for this conn */
	/* Reply bytes written but not sent yet (loop writes, workers read):
	 * LZ4 only while the link is backed up (link.h). */
	_Atomic size_t backlog;

	/* Handshake. */
	uint64_t client_id;
	uint64_t caps;
	uint8_t cnonce[PFS_NONCE_LEN];
	uint8_t snonce[PFS_NONCE_LEN];
	struct session *sess;
	bool bulk;             /* a bulk connection of sess (PFS_CAP_BULK) */

	/* Frame reader: header bytes, then the payload into pbuf. */
	uint8_t hbuf[PFS_FRAME_HDR_SIZE];
	size_t hgot;
	bool have_hdr;
	struct pfs_frame_hdr h;
	uint8_t *pbuf;
	size_t pgot;
	uint8_t *rbuf;         /* CONN_RBUF */
};

/* Pushes one invalidation to every session interested in iv->fh (the
 * parent for INVAL_ENTRY) whose key is key, except `from` unless self.
 * Loop thread. */
void server_push(struct pfsd *d, struct session *from, bool self, const struct inval *iv,
		 uint64_t key);
/* A lock on fh was released: pushes LOCK_WAKE to the sessions waiting
 * for a lock on it (lockstate_wait_take). Loop thread. */
void server_lock_wake(struct pfsd *d, const struct pfs_fh *fh);
/* Change notifications were lost: drops every client connection, so that
 * each client reconnects and revalidates what it caches. Loop thread. */
void server_revalidate_all(struct pfsd *d, const char *why);

/* Parses "ADDR:PORT" ("[v6]:PORT" for IPv6). Returns 0 or -EINVAL. */
int server_parse_addr(const char *s, struct sockaddr_storage *out);
/* Binds and listens on d->listen_addr; logs "listening on ADDR:PORT". */
int server_listen(struct pfsd *d, char *err, size_t errlen, int *port_out);
void server_stop(struct pfsd *d);
void conn_close(struct conn *c, const char *why);
/* Queues a frame. Takes ownership of own1/own2 (freed after the write). */
void conn_send(struct conn *c, const uint8_t *hdr, const void *wire, size_t len, void *own1,
	       void *own2);

#endif /* PODFSD_SERVER_I_H */
