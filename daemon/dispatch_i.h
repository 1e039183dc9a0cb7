/* dispatch_i.h: the worker side of a request, and FORGET.
 *
 * Every request a worker runs climbs one ladder (dispatch.c): its payload
 * is decompressed and decoded (the message of its opcode's row in wire.h
 * PFS_OPS), the handles it names are resolved as root, the thread
 * switches to the caller's credentials, the handler of its opcode runs
 * (dispatch_*.c, through export*.c), the thread is root again, and the
 * reply is framed (coded where that pays, or zero-copy for a big READ).
 * A worker never touches the connection or loop-owned session state.
 */
#ifndef PODFSD_DISPATCH_I_H
#define PODFSD_DISPATCH_I_H

#include <stdint.h>
#include <uv.h>

struct pfsd;
struct session;
struct pfs_frame_hdr;

/* The uv_queue_work work callback of every authenticated request, and of
 * AUTH (whose reply needs the root's attributes); w->data is its struct
 * req (req_i.h). Worker thread. Leaves in the req: its reply frame
 * (reply, splice_len with the pipe), its status, the invalidations its
 * change makes for other clients and the interest keys it handed out, or
 * violation (a payload that does not decompress: the loop closes the
 * connection). Frees the request payload. Never fails otherwise: an
 * error is the reply's status. */
void dispatch_work_cb(uv_work_t *w);

/* FORGET, on the loop thread, in stream order: removes s's interest in
 * every listed handle and counts the FORGET (s->forget_epoch). h and
 * wire: the frame's header and payload as received. Returns 0, -EINVAL
 * (malformed list), -E2BIG (more than PFS_BATCH_MAX handles; nothing
 * removed) or -EBADMSG (bad LZ4 block: a protocol violation). */
int dispatch_forget(struct pfsd *d, struct session *s, const struct pfs_frame_hdr *h,
		    const uint8_t *wire);

#endif /* PODFSD_DISPATCH_I_H */
