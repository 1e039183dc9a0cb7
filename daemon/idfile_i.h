/* idfile_i.h: a list of client ids kept in a file of podfsd's state
 * directory (the lock holders, lockstate_i.h; the sessions,
 * revalhold_i.h): a magic line, then one id per line in hex. A write
 * replaces the file whole: a temporary file, renamed over it (with sync:
 * fsync'ed first, and the directory after). No locking: callers
 * serialize their writes.
 */
#ifndef PODFSD_IDFILE_I_H
#define PODFSD_IDFILE_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct idfile {
	char *dir;         /* the state directory */
	char *path;        /* DIR/NAME */
	char *tmp;         /* DIR/NAME.tmp */
	const char *magic; /* its first line, without the newline */
};

/* The file DIR/name whose first line is magic (a static string). */
void idfile_init(struct idfile *f, const char *dir, const char *name, const char *magic);
void idfile_fini(struct idfile *f);
/* Replaces the file with ids[n]. Returns 0 or -errno. */
int idfile_write(const struct idfile *f, const uint64_t *ids, size_t n, bool sync);
/* The ids in the file, in a malloc'd *ids (NULL if none). Returns their
 * number (0 if the file is missing), or -1 when it exists but cannot be
 * trusted (unreadable, another magic, a line that is not one id, more
 * than IDFILE_MAX ids). */
long idfile_read(const struct idfile *f, uint64_t **ids);
#define IDFILE_MAX 65536 /* ids in a list: far above any pod */

#endif /* PODFSD_IDFILE_I_H */
