/* replay.c: runs a fuzz target over files without libFuzzer.
 *
 * Usage: fuzz_X_replay FILE|DIR...  Each file (directories are read one
 * level deep) is passed to LLVMFuzzerTestOneInput in its own exact-size
 * heap buffer, so AddressSanitizer sees reads past the input. Exits 0
 * when every input ran (a failing property aborts), 1 on I/O errors or
 * when no input was found.
 */
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;
	int rc = -1;

	if (!f) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	if (fseek(f, 0, SEEK_END) < 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) < 0)
		goto out_close;
	/* malloc(0) may return NULL; give empty inputs a real pointer. */
	buf = malloc(n ? (size_t)n : 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n)
		goto out_free;
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	rc = 0;
out_free:
	free(buf);
out_close:
	if (rc < 0)
		fprintf(stderr, "%s: read error\n", path);
	fclose(f);
	return rc;
}

static int run_path(const char *path, unsigned *count)
{
	struct stat st;
	if (stat(path, &st) < 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		++*count;
		return run_file(path);
	}
	DIR *d = opendir(path);
	struct dirent *de;
	int rc = 0;
	if (!d) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		char p[4096];
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof p, "%s/%s", path, de->d_name);
		if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
			++*count;
			if (run_file(p) < 0)
				rc = -1;
		}
	}
	closedir(d);
	return rc;
}

int main(int argc, char **argv)
{
	unsigned count = 0;
	int rc = 0;
	for (int i = 1; i < argc; i++)
		if (run_path(argv[i], &count) < 0)
			rc = 1;
	fprintf(stderr, "%s: ran %u inputs\n", argc ? argv[0] : "replay", count);
	return rc || count == 0 ? 1 : 0;
}
