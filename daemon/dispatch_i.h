/* dispatch_i.h: opcode table -> handlers, run in worker threads.
 *
 * dispatch_work_cb() is the uv_queue_work work callback of every
 * authenticated request (and of AUTH, whose reply needs the root's
 * attributes). It decompresses and decodes the request payload, resolves
 * handles as root, switches the thread to the caller's credentials, runs the
 * operation via export.c, restores root credentials and leaves a ready-to-send
 * frame in the req (hdr, wire, wirelen: see struct req). It never touches
 * the connection or loop-owned session state.
 */
#ifndef PODFSD_DISPATCH_I_H
#define PODFSD_DISPATCH_I_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

void dispatch_work_cb(uv_work_t *w);

struct pfsd;
struct session;
struct pfs_frame_hdr;
/* FORGET, on the loop thread, in stream order: removes s's interest in
 * every listed handle. wire is the frame's payload as received. Returns 0,
 * -EINVAL (malformed list), -E2BIG (more than PFS_BATCH_MAX handles;
 * nothing removed) or -EBADMSG (bad LZ4 block: a protocol violation). */
int dispatch_forget(struct pfsd *d, struct session *s, const struct pfs_frame_hdr *h,
		    const uint8_t *wire);

#endif /* PODFSD_DISPATCH_I_H */
