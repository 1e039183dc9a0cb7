/* peercli_i.h: a mount fetching chunks from its peers (wire_peer.h):
 * connections to other clients (peernet.c), kept for the next chunk,
 * and the peers that failed lately.
 *
 * A fetch asks for the whole chunk (PEER_GETs of PFS_MAX_IO bytes, sent
 * at once) and checks it against its digest (SHA-256) before it says it
 * has it: a peer can delay a read, never change it.
 *
 * Limits: PEERCLI_PER_PEER connections to one peer at once (a fetch
 * waits for one, within its deadline), PEERCLI_IDLE of them kept idle,
 * PEERCLI_PEERS peers remembered (the least recently used one that is
 * not in use goes).
 *
 * Thread-safe: any thread, many fetches at once.
 */
#ifndef PODFS_PEERCLI_I_H
#define PODFS_PEERCLI_I_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "podfs/wire.h"

#define PEERCLI_PER_PEER 4
#define PEERCLI_IDLE 2
#define PEERCLI_PEERS 64
#define PEERCLI_BAD_MS 30000 /* a peer that sent wrong bytes is not asked for this long */
#define PEERCLI_SLOW_MS 3000 /* nor one that was slow, gone or without the chunk */
/* A peer that could not be reached (no connection, no TLS or peer
 * handshake) is not asked for PEERCLI_SLOW_MS, then twice as long at
 * each failure in a row, up to this; a fetch from it resets that. */
#define PEERCLI_UNREACHABLE_MAX_MS 300000
/* When this many peers in a row could not be reached (and none could
 * since), the mount asks no peer for PEERCLI_OFF_MS, then twice as long
 * each time again, up to PEERCLI_OFF_MAX_MS: the peer port is most
 * likely closed between the hosts, and every attempt would cost a
 * connect timeout (PNET_CONNECT_MS) before the coordinator is asked. */
#define PEERCLI_UNREACHABLE_RUN 3
#define PEERCLI_OFF_MS 30000
#define PEERCLI_OFF_MAX_MS 600000

struct client;
struct peercli;

/* For c (key, TLS context). 0 or -ENOMEM. */
int peercli_new(struct client *c, struct peercli **out);
/* Cuts every fetch short (-ECANCELED) from now on. */
void peercli_stop(struct peercli *pc);
/* Frees it; no fetch may be running. Safe on NULL. */
void peercli_free(struct peercli *pc);

/* Fetches chunk d (len bytes) from the peer at sa into buf[len], within
 * deadline (CLOCK_MONOTONIC ms). Returns 0 (buf holds it, checked), or
 * -EAGAIN (the peer failed lately, or no peer could be reached lately:
 * not asked), -EBADMSG (its bytes do
 * not match the digest, or it broke the protocol), -ENOENT (it does not
 * hold the chunk), -ETIMEDOUT, -ECANCELED, -EACCES (it does not hold the
 * pod key) or the error of the connection. */
int peercli_fetch(struct peercli *pc, const struct sockaddr_storage *sa,
		  const uint8_t d[PFS_DIGEST_LEN], uint32_t len, uint8_t *buf, int64_t deadline);

/* Counters of the peer connections (podfs's stats). */
struct peercli_stats {
	uint64_t unreachable; /* dials that failed */
	uint64_t off;         /* times every peer was left aside (PEERCLI_OFF_MS) */
};
void peercli_stats(struct peercli *pc, struct peercli_stats *st);

/* The peer at sa failed: it is not asked for ms milliseconds
 * (PEERCLI_BAD_MS or PEERCLI_SLOW_MS; a longer mark stays), or, if the
 * fetch could not reach it, twice as long for each such failure in a row
 * before (up to PEERCLI_UNREACHABLE_MAX_MS). Returns the milliseconds
 * marked if it was not marked already (the caller logs it then), else 0. */
int peercli_mark_bad(struct peercli *pc, const struct sockaddr_storage *sa, int ms);
/* Whether every peer is left aside now (PEERCLI_UNREACHABLE_RUN). */
bool peercli_off(struct peercli *pc);
/* Whether the peer at sa is marked (not to be asked now). */
bool peercli_is_bad(struct peercli *pc, const struct sockaddr_storage *sa);

#endif /* PODFS_PEERCLI_I_H */
