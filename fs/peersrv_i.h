/* peersrv_i.h: a mount serving the chunks it holds to its peers
 * (wire_peer.h; -o peers).
 *
 * A TCP listener on the address this host reaches the coordinator from
 * (an ephemeral port unless peer_port= says), which podfsd tells other
 * clients about. Each connection gets a thread: TLS as server (the pod
 * key's PSK) unless the mount says tls=off, then PEER_HELLO/PEER_AUTH
 * and PEER_GETs answered from the chunk store (peerproto.c decides,
 * chunkstore.c holds the bytes), by digest only: a peer can only ask for
 * a chunk whose digest podfsd gave it. A chunk this mount is still
 * fetching is served once it has it, or ENOENT after peer_timeout.
 *
 * Limits: PEERSRV_CONNS connections at once, PEERSRV_PER_SOURCE of them
 * from one source (an IPv4 address or an IPv6 /64; more are closed at
 * once); one request at a time per
 * connection, so at most PFS_MAX_IO bytes of reply in flight on each; a
 * connection idle for PEERSRV_IDLE_MS, or slower than peer_timeout to
 * take a reply or finish its handshake, is closed.
 *
 * Threads: the accept thread and one per connection, all ended by
 * peersrv_stop.
 */
#ifndef PODFS_PEERSRV_I_H
#define PODFS_PEERSRV_I_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>

#define PEERSRV_CONNS 32
#define PEERSRV_PER_SOURCE 4
#define PEERSRV_IDLE_MS 60000

struct client;
struct cstore;
struct peersrv;

struct peersrv_stats {
	uint64_t conns, refused, gets, misses, bytes;
	uint64_t open; /* connections now */
};

/* Listens on addr (its port is replaced by port; 0: any) and serves
 * store's chunks with c's key, TLS (c->tls: a server context of its
 * own) and peer_timeout. Returns 0, or -errno with a one-line reason in
 * err. */
int peersrv_start(struct client *c, struct cstore *store, const struct sockaddr_storage *addr,
		  uint16_t port, struct peersrv **out, char *err, size_t errlen);
/* The address and port it listens on. */
void peersrv_addr(const struct peersrv *ps, struct sockaddr_storage *out);
/* Stops accepting, ends every connection (their waits are cut short)
 * and frees it. Safe on NULL. */
void peersrv_stop(struct peersrv *ps);
void peersrv_stats(struct peersrv *ps, struct peersrv_stats *st);

#endif /* PODFS_PEERSRV_I_H */
