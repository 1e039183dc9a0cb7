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
#include "podfs/log.h"

/* Unescapes mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
	char *d = s;
	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 4;
		} else {
			*d++ = *s++;
		}
	}
	*d = 0;
}

/* Finds the bdi of our mount in /proc/self/mountinfo (without touching
 * the mount itself, which nobody serves yet). */
void readahead_find(struct client *c)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[8192], dev[64] = "";
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *save = NULL, *fields[10] = { 0 };
		int n = 0;
		for (char *t = strtok_r(line, " ", &save); t && n < 10; t = strtok_r(NULL, " ", &save))
			fields[n++] = t;
		if (n < 10)
			continue;
		unescape(fields[4]);
		/* fields[6..] = optional fields, "-", fstype */
		const char *fstype = NULL;
		for (int i = 6; i < n - 1; i++)
			if (strcmp(fields[i], "-") == 0) {
				fstype = fields[i + 1];
				break;
			}
		if (strcmp(fields[4], c->mountpoint) == 0 && fstype && strncmp(fstype, "fuse", 4) == 0)
			snprintf(dev, sizeof(dev), "%s", fields[2]);
	}
	fclose(f);
	if (dev[0] && asprintf(&c->bdi_ra_path, "/sys/class/bdi/%s/read_ahead_kb", dev) < 0)
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
