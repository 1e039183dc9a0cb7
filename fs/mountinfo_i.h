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

/* Calls cb(arg, mountpoint, source, dev) for each mount of type fstype (as
 * "fuse.podfs"), in mount order. Returns how many, or -1 if mountinfo
 * cannot be read. */
int mountinfo_each(const char *fstype,
		   void (*cb)(void *arg, const char *mnt, const char *src, const char *dev),
		   void *arg);

#endif /* PODFS_MOUNTINFO_I_H */
