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
