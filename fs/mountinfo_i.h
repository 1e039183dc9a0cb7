/* mountinfo_i.h: what /proc/self/mountinfo says is mounted at a path. */
#ifndef PODFS_MOUNTINFO_I_H
#define PODFS_MOUNTINFO_I_H

#include <stdbool.h>
#include <stddef.h>

/* The topmost mount at mountpoint (an absolute, resolved path): copies
 * its device ("major:minor") into dev and its type (as "fuse.podfs")
 * into fstype, each truncated to its size. Returns false if nothing is
 * mounted there or mountinfo cannot be read. Reads the file only: never
 * touches the mount itself, which may have nobody serving it yet. */
bool mountinfo_top(const char *mountpoint, char *dev, size_t devlen, char *fstype,
		   size_t fstypelen);

#endif /* PODFS_MOUNTINFO_I_H */
