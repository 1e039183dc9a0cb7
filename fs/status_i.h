/* status_i.h: `podfs status [MOUNTPOINT...]` (status.c), a command of its
 * own: it reads the "user.podfs.stats" xattr of each podfs mount twice,
 * a second apart, and shows the connection, request rates and latency by
 * operation, bytes on the wire, pushes, write-behind and the persistent
 * cache.
 */
#ifndef PODFS_STATUS_I_H
#define PODFS_STATUS_I_H

/* Runs the command: argv[0] is the program, argv[1] "status", then
 * options and mount points (none: every podfs mount). Returns the exit
 * code: 0, 1 if a mount could not be read, 2 for a usage error. */
int status_main(int argc, char **argv);

#endif /* PODFS_STATUS_I_H */
