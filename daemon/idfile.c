/* idfile.c: a list of client ids in a file of the state directory (see
 * idfile_i.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "podfs/xalloc.h"
#include "idfile_i.h"

static char *path_join(const char *dir, const char *name, const char *suffix)
{
	size_t n = strlen(dir) + strlen(name) + strlen(suffix) + 2;
	char *p = xmalloc(n);

	snprintf(p, n, "%s/%s%s", dir, name, suffix);
	return p;
}

void idfile_init(struct idfile *f, const char *dir, const char *name, const char *magic)
{
	f->dir = xstrdup(dir);
	f->path = path_join(dir, name, "");
	f->tmp = path_join(dir, name, ".tmp");
	f->magic = magic;
}

void idfile_fini(struct idfile *f)
{
	free(f->dir);
	free(f->path);
	free(f->tmp);
}

int idfile_write(const struct idfile *f, const uint64_t *ids, size_t n, bool sync)
{
	FILE *out;
	int fd, ret = 0;

	fd = open(f->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	out = fdopen(fd, "w");
	if (!out) {
		ret = -errno;
		close(fd);
		goto out_unlink;
	}
	fprintf(out, "%s\n", f->magic);
	for (size_t i = 0; i < n; i++)
		fprintf(out, "%016" PRIx64 "\n", ids[i]);
	if (fflush(out) != 0 || (sync && fsync(fileno(out)) < 0))
		ret = -errno;
	if (fclose(out) != 0 && ret == 0)
		ret = -errno;
	if (ret < 0)
		goto out_unlink;
	if (rename(f->tmp, f->path) < 0) {
		ret = -errno;
		goto out_unlink;
	}
	if (sync) {
		int dfd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0 || fsync(dfd) < 0)
			ret = -errno;
		if (dfd >= 0)
			close(dfd);
	}
	return ret;

out_unlink:
	unlink(f->tmp);
	return ret;
}

long idfile_read(const struct idfile *f, uint64_t **ids)
{
	char line[128];
	long n = 0;
	FILE *in = fopen(f->path, "re");

	*ids = NULL;
	if (!in)
		return errno == ENOENT ? 0 : -1;
	if (!fgets(line, sizeof(line), in) || strncmp(line, f->magic, strlen(f->magic)) != 0 ||
	    strcmp(line + strlen(f->magic), "\n") != 0)
		goto bad;
	while (fgets(line, sizeof(line), in)) {
		char *end;
		uint64_t id;

		errno = 0;
		id = strtoull(line, &end, 16);
		if (errno || end == line || *end != '\n' || n >= IDFILE_MAX)
			goto bad;
		*ids = realloc(*ids, (size_t)(n + 1) * sizeof(**ids));
		if (!*ids)
			abort(); /* policy: see podfs/xalloc.h */
		(*ids)[n++] = id;
	}
	fclose(in);
	return n;

bad:
	fclose(in);
	free(*ids);
	*ids = NULL;
	return -1;
}

/* --- a list that threads change --- */

void idfile_sync_init(struct idfile_sync *w, const char *dir, const char *name,
		      const char *magic, pthread_mutex_t *mu, uint64_t *const *ids,
		      const size_t *n, const uint64_t *gen)
{
	idfile_init(&w->file, dir, name, magic);
	w->mu = mu;
	w->ids = ids;
	w->n = n;
	w->gen = gen;
	pthread_mutex_init(&w->wmu, NULL);
	w->written = w->synced = 0;
}

void idfile_sync_fini(struct idfile_sync *w)
{
	pthread_mutex_destroy(&w->wmu);
	idfile_fini(&w->file);
}

/* Writes until the file holds the latest version and, with sync, a
 * durable one at least as new as need (a writer before may have done
 * it). Caller holds wmu, not mu. */
static int flush(struct idfile_sync *w, bool sync, uint64_t need)
{
	int ret = 0;

	pthread_mutex_lock(w->mu);
	while (sync ? w->synced < need : w->written < *w->gen) {
		uint64_t gen = *w->gen;
		size_t n = *w->n;
		uint64_t *snap = xmalloc((n ? n : 1) * sizeof(*snap));
		if (n)
			memcpy(snap, *w->ids, n * sizeof(*snap));
		pthread_mutex_unlock(w->mu);
		ret = idfile_write(&w->file, snap, n, sync);
		free(snap);
		pthread_mutex_lock(w->mu);
		if (ret < 0)
			break;
		if (gen > w->written)
			w->written = gen;
		if (sync && gen > w->synced)
			w->synced = gen;
		/* Changes made meanwhile by a thread that left them to us:
		 * one more write. */
		sync = false;
	}
	pthread_mutex_unlock(w->mu);
	return ret;
}

int idfile_sync_try(struct idfile_sync *w)
{
	int ret = 0;

	/* A writer that let go of wmu looks again: a change whose thread
	 * found wmu taken after the writer's last look is written here. */
	for (;;) {
		pthread_mutex_lock(w->mu);
		bool behind = w->written < *w->gen;
		pthread_mutex_unlock(w->mu);
		if (!behind || pthread_mutex_trylock(&w->wmu) != 0)
			return ret;
		ret = flush(w, false, 0);
		pthread_mutex_unlock(&w->wmu);
		if (ret < 0)
			return ret;
	}
}

int idfile_sync_write(struct idfile_sync *w, uint64_t need)
{
	pthread_mutex_lock(w->mu);
	bool done = w->synced >= need;
	pthread_mutex_unlock(w->mu);
	if (done)
		return 0;
	pthread_mutex_lock(&w->wmu);
	int ret = flush(w, true, need);
	pthread_mutex_unlock(&w->wmu);
	if (ret == 0)
		ret = idfile_sync_try(w);
	return ret;
}
