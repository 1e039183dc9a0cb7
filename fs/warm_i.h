/* warm_i.h: `podfs warm PATH...` (warm.c), a command of its own: it
 * walks trees on a podfs mount with parallel reader threads (its own
 * process, not the mount's), so that the caches (entries, attributes,
 * data, the persistent cache) hold them.
 */
#ifndef PODFS_WARM_I_H
#define PODFS_WARM_I_H

/* Runs the command: argv[0] is the program, argv[1] "warm", then the
 * paths. Returns the exit code: 0, 1 if a path could not be walked or
 * read, 2 for a usage error. Progress goes to stderr. */
int warm_main(int argc, char **argv);

#endif /* PODFS_WARM_I_H */
