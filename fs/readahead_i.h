/* readahead_i.h: the readahead of the mount's bdi (backing device info).
 *
 * FUSE read requests are 128 KiB unless the mount's readahead is raised:
 * readahead_find locates the mount's /sys/class/bdi/MAJ:MIN/read_ahead_kb
 * right after the mount (main.c), readahead_raise writes 4 MiB there from
 * the first requests after INIT (ops_*.c), once. The path and the "done"
 * flag live in struct client (bdi_ra_path, bdi_tuned).
 */
#ifndef PODFS_READAHEAD_I_H
#define PODFS_READAHEAD_I_H

struct client;

/* Finds the bdi of c's mount in /proc/self/mountinfo (without touching
 * the mount itself, which nobody serves yet) and keeps its read_ahead_kb
 * path in c->bdi_ra_path (malloc'd; NULL if not found). The mount thread,
 * after fuse_session_mount. */
void readahead_find(struct client *c);

/* Raises the readahead to 4 MiB the first time it is called (later calls
 * return at once); a failure is logged at debug level only. Any FUSE
 * thread, after INIT. */
void readahead_raise(struct client *c);

#endif /* PODFS_READAHEAD_I_H */
