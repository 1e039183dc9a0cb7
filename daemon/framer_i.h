/* framer_i.h: the frame reader of a connection: stream bytes in, whole
 * frames (or a protocol violation) out.
 *
 * Pure: no socket, no loop, no logging; conn.c feeds it what a connection
 * reads and the fuzz target tests/fuzz/fuzz_framer.c feeds it arbitrary
 * chunkings of arbitrary bytes. What it admits depends on the handshake's
 * progress: before AUTH a frame's payload is at most PFS_MAX_HANDSHAKE
 * bytes, after it PFS_MAX_PAYLOAD; a client sends requests (id > 0, not
 * flagged as reply or push, status 0) and, once authenticated with
 * PFS_CAP_PUSH_ACK, uncoded PUSH_ACKs (a push flag, id 0, at most 64
 * bytes).
 */
#ifndef PODFSD_FRAMER_I_H
#define PODFSD_FRAMER_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "podfs/frame.h"

struct framer {
	uint8_t hbuf[PFS_FRAME_HDR_SIZE]; /* header bytes so far */
	size_t hgot;
	bool have_hdr;                    /* header complete: reading the payload */
	uint8_t *pbuf;                    /* the payload (payload_alloc; NULL if empty) */
	size_t pgot;
};

/* Reads the bytes at *p (*n of them) into fr, advancing *p and *n past
 * what it took. ready: the connection is authenticated; caps: what it
 * negotiated. Returns 0 once every byte is taken without completing a
 * frame; 1 when a whole frame is in (header in *h, payload in fr->pbuf,
 * h->wire_len bytes as received, to take with framer_take), the bytes
 * after it still at *p; or -1 for a protocol violation, *why naming it
 * (the connection must close; fr then holds no payload). */
int framer_feed(struct framer *fr, struct pfs_frame_hdr *h, bool ready, uint64_t caps,
		const uint8_t **p, size_t *n, const char **why);

/* The payload of the whole frame framer_feed (or framer_direct_got)
 * reported, now the caller's (payload_free it; NULL if empty); fr starts over
 * with the next frame's header. */
uint8_t *framer_take(struct framer *fr);

/* While a payload is being read and at least min of its bytes are still
 * missing, gives its rest as a buffer the next read may fill directly
 * (*buf, *len) and returns true; otherwise false. */
bool framer_direct(const struct framer *fr, const struct pfs_frame_hdr *h, size_t min,
		   uint8_t **buf, size_t *len);
/* n bytes were read into the buffer of framer_direct. Returns true when
 * the frame is complete (framer_take). */
bool framer_direct_got(struct framer *fr, const struct pfs_frame_hdr *h, size_t n);

/* A payload's buffer of len bytes (NULL for 0; aborts when out of
 * memory, as xmalloc), as framer_take hands them on, and its free (NULL
 * is fine); never free() one. A WRITE's data is the tail of its payload,
 * and podfsd writes big ones with O_DIRECT, which wants the buffer 4 KiB
 * aligned (export_files.c): so a payload of 64 KiB or more ends on a
 * 4 KiB boundary, and data whose length O_DIRECT takes (a multiple of
 * 4 KiB) starts on one, written from where it was received instead of
 * copied first. The payload itself may then be at any address. */
uint8_t *payload_alloc(size_t len);
void payload_free(uint8_t *p);

/* Frees the payload being read, if any. */
void framer_free(struct framer *fr);

#endif /* PODFSD_FRAMER_I_H */
