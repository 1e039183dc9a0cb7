/* link.h: when LZ4 pays on a connection.
 *
 * LZ4 compresses at roughly 0.5 GB/s per core and about halves listings,
 * .pyc files and text; on a link that moves more than about 2 Gbit/s it
 * makes a reply later, not sooner (measured: a cold import of a large
 * Python tree over loopback took 15% longer with LZ4, the daemon spending
 * 40% of its CPU in LZ4_compress). Pods have 10-200 Gbit/s links. So by
 * default (PFS_LZ4_AUTO) a sender compresses with LZ4 only while the link
 * is the bottleneck: while at least PFS_LZ4_BACKLOG bytes it wrote are
 * still waiting to go out (the kernel's send queue, plus the daemon's own
 * write queue). Serial small requests never build a backlog and go out
 * raw; a bulk transfer on a slow link does, and shrinks.
 *
 * Zero-word coding (frame.h) is not affected: it costs a fraction of a
 * copy and is always tried.
 */
#ifndef PODFS_LINK_H
#define PODFS_LINK_H

#include <stddef.h>

#include "podfs/wire.h"

enum pfs_lz4_mode {
	PFS_LZ4_AUTO = 0, /* only while the link is backed up (the default) */
	PFS_LZ4_ALWAYS,   /* wherever it saves 1/8 (slow or metered links) */
	PFS_LZ4_NEVER,
};

/* Unsent bytes from which the link counts as the bottleneck: more than a
 * full-size reply waiting. */
#define PFS_LZ4_BACKLOG ((size_t)PFS_MAX_IO)

/* Parses "auto", "always" or "never". Returns 0, or -1 for anything else. */
int pfs_lz4_mode_parse(const char *s, enum pfs_lz4_mode *out);

const char *pfs_lz4_mode_name(enum pfs_lz4_mode mode);

/* codecs (PFS_CAP_LZ4 / PFS_CAP_ZR the peer accepts) minus LZ4 where mode
 * says it does not pay with backlog bytes waiting to be sent. */
static inline unsigned pfs_link_codecs(unsigned codecs, enum pfs_lz4_mode mode, size_t backlog)
{
	if (mode == PFS_LZ4_NEVER || (mode == PFS_LZ4_AUTO && backlog < PFS_LZ4_BACKLOG))
		codecs &= ~(unsigned)PFS_CAP_LZ4;
	return codecs;
}

/* Bytes written to the TCP socket fd that the kernel has not sent yet
 * (SIOCOUTQNSD); 0 if fd is not a TCP socket or the kernel cannot tell. */
size_t pfs_sock_unsent(int fd);

#endif /* PODFS_LINK_H */
