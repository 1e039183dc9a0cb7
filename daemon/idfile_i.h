/* idfile_i.h: a list of client ids kept in a file of podfsd's state
 * directory (the lock holders, lockstate_i.h; the sessions,
 * revalhold_i.h): a magic line, then one id per line in hex. A write
 * replaces the file whole: a temporary file, renamed over it (with sync:
 * fsync'ed first, and the directory after). No locking: callers
 * serialize their writes.
 */
#ifndef PODFSD_IDFILE_I_H
#define PODFSD_IDFILE_I_H

#include <pthread.h>
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

/* Writing a list that threads change: its owner changes *ids and *n
 * under its own mutex mu, bumping *gen each time. A worker's write
 * (idfile_sync_write) makes a version durable before it returns and may
 * wait for the disk; the loop thread's (idfile_sync_try) never waits:
 * while a worker writes, that worker writes the loop's change after its
 * own. Writes replace the file whole, one at a time (wmu), each with
 * the list as it is then, so the file never goes back to an older
 * version. */
struct idfile_sync {
	struct idfile file;
	pthread_mutex_t *mu;
	uint64_t *const *ids;
	const size_t *n;
	const uint64_t *gen;
	pthread_mutex_t wmu;      /* held while writing; the loop only tries it */
	uint64_t written, synced; /* versions in the file, and durably (under mu) */
};

/* w for the file DIR/name (idfile_init), over the owner's list. */
void idfile_sync_init(struct idfile_sync *w, const char *dir, const char *name,
		      const char *magic, pthread_mutex_t *mu, uint64_t *const *ids,
		      const size_t *n, const uint64_t *gen);
void idfile_sync_fini(struct idfile_sync *w);
/* Worker: returns once the file holds version need or a later one,
 * durably (need: *gen read under mu after the caller's change). Caller
 * holds neither mu nor wmu. Returns 0 or -errno. */
int idfile_sync_write(struct idfile_sync *w, uint64_t need);
/* Any thread, never waiting for the disk of another: writes the latest
 * version (not durably) unless it is in the file already or a writer is
 * at work (who then writes it). Caller holds neither. 0 or -errno. */
int idfile_sync_try(struct idfile_sync *w);

#endif /* PODFSD_IDFILE_I_H */
