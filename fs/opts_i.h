/* opts_i.h: the podfs command line and its -o mount options.
 *
 *   podfs HOST[:PORT][:/] MOUNTPOINT [-f] [-d] [-o OPTION[,OPTION...]]
 *
 * Parsed with libfuse's fuse_opt_parse: a table of the options, and a
 * callback that checks the values of those that need checking. Every
 * error is one line on stderr ("podfs: ... (see podfs --help)") and exit
 * code OPTS_EXIT_USAGE. Mount flags (ro, rw, nosuid, ...) go on to the
 * kernel; fstab words (_netdev, nofail, x-*, comment=...) are ignored.
 * The start-up thread only.
 */
#ifndef PODFS_OPTS_I_H
#define PODFS_OPTS_I_H

#include <fuse_opt.h>

struct client;

#define OPTS_EXIT_USAGE 2

/* Sets the defaults of every option in c (before opts_parse). */
void opts_defaults(struct client *c);

/* Fills c from the command line argv[argc] (host, port, hostport,
 * mountpoint (absolute), keyfile and the options; the strings are
 * malloc'd, c owns them) and appends libfuse's arguments to *fa (argv[0],
 * -d, and -o with allow_other, default_permissions, fsname, subtype and
 * the mount flags). Returns 0; -1 after printing the help or the version
 * (exit 0); OPTS_EXIT_USAGE after one line on stderr; or 1 (a bad mount
 * point, out of memory), also after a line on stderr. Exits the process
 * (1) if a string cannot be copied. */
int opts_parse(struct client *c, int argc, char **argv, struct fuse_args *fa);

/* Prints "podfs: MESSAGE (see podfs --help)" on stderr, for usage errors
 * of the other commands. */
void opts_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* PODFS_OPTS_I_H */
