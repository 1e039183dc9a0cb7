/* readahead.c: the readahead of the mount's bdi (see readahead_i.h). */
#include "readahead_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_i.h"
#include "mountinfo_i.h"
#include "podfs/log.h"

/* Finds the bdi of our mount in /proc/self/mountinfo (without touching
 * the mount itself, which nobody serves yet). */
void readahead_find(struct client *c)
{
	char dev[64], fstype[64];

	if (mountinfo_top(c->mountpoint, dev, sizeof(dev), fstype, sizeof(fstype)) &&
	    strncmp(fstype, "fuse", 4) == 0 &&
	    asprintf(&c->bdi_ra_path, "/sys/class/bdi/%s/read_ahead_kb", dev) < 0)
		c->bdi_ra_path = NULL;
}

/* The first request after INIT: the kernel has applied INIT's
 * max_readahead by then, so this value sticks. A 4 MiB
 * window keeps about four 1 MiB READs (max_pages) in flight while a file
 * streams: the daemon reads and codes one while the client decodes
 * another (cold reads of the float32 checkpoint ~20% faster here than
 * with 1 MiB), and at 500 us of round trip 4 MiB in flight still allow
 * 8 GB/s. */
static void raise_bdi(struct client *c)
{
	if (!c->bdi_ra_path)
		return;
	int fd = open(c->bdi_ra_path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "4096\n", 5) != 5)
		pfs_debug("cannot raise readahead via %s: %s", c->bdi_ra_path, strerror(errno));
	if (fd >= 0)
		close(fd);
}

void readahead_raise(struct client *c)
{
	if (!atomic_load_explicit(&c->bdi_tuned, memory_order_relaxed) &&
	    !atomic_exchange(&c->bdi_tuned, true))
		raise_bdi(c);
}
