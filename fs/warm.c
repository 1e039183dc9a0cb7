/* warm.c: `podfs warm PATH...`: pre-loads trees on a podfs mount into the
 * caches (entries, attributes, data) with parallel readers, showing
 * progress on stderr: a bar when it is a terminal, periodic lines if not.
 */

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bg_i.h"
#include "podfs/clock.h"
#include "warm_i.h"

#define WARM_THREADS 8
#define WARM_BUF (1u << 20)

struct wfile {
	char *path;
	uint64_t size;
};

struct warm {
	struct wfile *v;
	size_t n, cap;
	uint64_t total_bytes;
	atomic_size_t next;
	atomic_size_t done_files;
	atomic_uint_fast64_t done_bytes;
	atomic_size_t errors;
	atomic_bool finished;
	bool tty;          /* stderr is a terminal: a bar, else lines */
	double shown;      /* CLOCK_MONOTONIC s of the last progress shown */
};

/* How often progress is shown: on a terminal, and in lines (logs). */
#define WARM_TTY_S 0.1
#define WARM_LINE_S 2.0

static double now_s(void)
{
	return pfs_mono_ns() / 1e9;
}

static void human(double b, char *out, size_t len);

/* The scan's progress: files found so far and their bytes. */
static void scanning(struct warm *w, bool last)
{
	char ht[32];

	human((double)w->total_bytes, ht, sizeof(ht));
	if (w->tty)
		fprintf(stderr, "\rscanning: %zu files, %s %s", w->n, ht, last ? "\n" : "");
	else
		fprintf(stderr, "warm: scanning: %zu files, %s%s\n", w->n, ht,
			last ? ", done" : "");
}

/* nftw has no user pointer: the walk fills this one list. It is only
 * touched by the single walking thread before the readers start. */
static struct warm *walk_target;

static int walk_cb(const char *path, const struct stat *st, int type, struct FTW *f)
{
	(void)f;
	struct warm *w = walk_target;
	if (type != FTW_F || !S_ISREG(st->st_mode))
		return 0;
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 1024;
		struct wfile *nv = realloc(w->v, cap * sizeof(*nv));
		if (!nv)
			return -1;
		w->v = nv;
		w->cap = cap;
	}
	w->v[w->n].path = strdup(path);
	if (!w->v[w->n].path)
		return -1;
	w->v[w->n].size = (uint64_t)st->st_size;
	w->total_bytes += (uint64_t)st->st_size;
	w->n++;
	/* A big tree takes seconds to walk: say how far it got. */
	if ((w->n & 63) == 0 && now_s() - w->shown >= (w->tty ? WARM_TTY_S : WARM_LINE_S)) {
		scanning(w, false);
		w->shown = now_s();
	}
	return 0;
}

static void *reader(void *arg)
{
	struct warm *w = arg;
	char *buf = malloc(WARM_BUF);
	if (!buf)
		return NULL;
	for (;;) {
		size_t i = atomic_fetch_add(&w->next, 1);
		if (i >= w->n)
			break;
		int fd = open(w->v[i].path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0) {
			atomic_fetch_add(&w->errors, 1);
		} else {
			ssize_t k;
			while ((k = read(fd, buf, WARM_BUF)) > 0)
				atomic_fetch_add(&w->done_bytes, (uint64_t)k);
			if (k < 0)
				atomic_fetch_add(&w->errors, 1);
			close(fd);
		}
		atomic_fetch_add(&w->done_files, 1);
	}
	free(buf);
	return NULL;
}

static void human(double b, char *out, size_t len)
{
	const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int i = 0;
	while (b >= 1024 && i < 4) {
		b /= 1024;
		i++;
	}
	snprintf(out, len, "%.1f %s", b, u[i]);
}

static void progress(struct warm *w, double t0, bool last)
{
	size_t files = atomic_load(&w->done_files);
	uint64_t bytes = atomic_load(&w->done_bytes);
	double el = now_s() - t0;
	double rate = el > 0 ? bytes / el : 0;
	double frac = w->total_bytes ? (double)bytes / (double)w->total_bytes
				     : (w->n ? (double)files / (double)w->n : 1);
	if (frac > 1)
		frac = 1;
	double eta = rate > 0 && w->total_bytes > bytes ? (w->total_bytes - bytes) / rate : 0;
	char hb[32], ht[32], hr[32];
	human((double)bytes, hb, sizeof(hb));
	human((double)w->total_bytes, ht, sizeof(ht));
	human(rate, hr, sizeof(hr));
	if (w->tty) {
		char bar[31];
		int fill = (int)(frac * 30);
		for (int i = 0; i < 30; i++)
			bar[i] = i < fill ? '#' : '.';
		bar[30] = 0;
		fprintf(stderr, "\r[%s] %3.0f%% %zu/%zu files %s/%s %s/s ETA %.0fs ", bar, frac * 100,
			files, w->n, hb, ht, hr, eta);
		if (last)
			fputc('\n', stderr);
	} else {
		fprintf(stderr, "warm: %zu/%zu files, %s/%s, %s/s, ETA %.0fs\n", files, w->n, hb, ht,
			hr, eta);
	}
}

static void usage(FILE *f)
{
	fputs("usage: podfs warm [--] PATH...\n"
	      "\n"
	      "Reads every file under the PATHs (on a podfs mount) with 8 threads, so\n"
	      "that the kernel's caches, the mount's caches and its persistent cache\n"
	      "(-o cache_dir) hold them before a job starts. Shows the scan, then\n"
	      "files, bytes, rate and ETA on stderr. Exit status 1 if a file could\n"
	      "not be read.\n",
	      f);
}

int warm_main(int argc, char **argv)
{
	struct warm w = { 0 };
	pthread_t thr[WARM_THREADS];
	int nthr = 0, rc = 0, first = 2;

	if (argc > 2 && (strcmp(argv[2], "-h") == 0 || strcmp(argv[2], "--help") == 0)) {
		usage(stdout);
		return 0;
	}
	if (argc > 2 && strcmp(argv[2], "--") == 0) {
		first = 3;
	} else {
		for (int i = 2; i < argc; i++) {
			if (argv[i][0] == '-' && argv[i][1]) {
				fprintf(stderr, "podfs warm: unknown option '%s' (try podfs warm "
						"--help)\n", argv[i]);
				return 2;
			}
		}
	}
	if (first >= argc) {
		usage(stderr);
		return 2;
	}
	w.tty = isatty(2);
	w.shown = now_s();
	walk_target = &w;
	for (int i = first; i < argc; i++) {
		/* The walk itself warms entries and attributes (readdirplus). */
		if (nftw(argv[i], walk_cb, 64, FTW_PHYS) != 0) {
			fprintf(stderr, "podfs warm: cannot walk %s: %s\n", argv[i], strerror(errno));
			rc = 1;
		}
	}
	scanning(&w, true);
	atomic_init(&w.next, 0);
	double t0 = now_s();
	for (; nthr < WARM_THREADS; nthr++) {
		if (pthread_create(&thr[nthr], NULL, reader, &w) != 0)
			break;
		bg_name(thr[nthr], "warm");
	}
	if (nthr == 0)
		reader(&w);
	double last = now_s();
	while (atomic_load(&w.done_files) < w.n) {
		usleep(w.tty ? 100000 : 200000);
		/* Done meanwhile: the final line below says it, once. */
		if (atomic_load(&w.done_files) >= w.n)
			break;
		if (w.tty || now_s() - last >= WARM_LINE_S) {
			progress(&w, t0, false);
			last = now_s();
		}
	}
	for (int i = 0; i < nthr; i++)
		pthread_join(thr[i], NULL);
	progress(&w, t0, true);
	size_t errs = atomic_load(&w.errors);
	if (errs) {
		fprintf(stderr, "podfs warm: %zu files could not be read\n", errs);
		rc = 1;
	}
	for (size_t i = 0; i < w.n; i++)
		free(w.v[i].path);
	free(w.v);
	return rc;
}
