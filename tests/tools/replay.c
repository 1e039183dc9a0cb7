/* replay.c: podfs-replay, one host of a simulated pod (scripts/bench
 * --hosts, tests/system/test_pod_start.py).
 *
 *   podfs-replay [-g] [-m MAX] ROOT TRACE
 *       Does the calls of TRACE (format in trace.h) under the directory
 *       ROOT, in order, and checks each result against the capture's: a
 *       lookup that found a name the capture did not (or the reverse), a
 *       read of another size or other bytes, a listing with other names,
 *       a stat of another type, mode or size is a mismatch. A call on a
 *       file whose open already failed is not made, and counts as
 *       skipped. A program start on many hosts at once, without starting
 *       the program: what the coordinator sees is the same.
 *   podfs-replay [-g] --read FILE --ref REF [--bs SIZE]
 *       Reads FILE from start to end in SIZE reads (default 1 MiB) and
 *       compares every byte with REF (a local copy): a checkpoint read.
 *
 * -g: load first, then write "ready" on stdout and wait until stdin ends
 * (or gives a byte): the caller starts all hosts at once by closing one
 * pipe. At the end, up to MAX (20) "mismatch ..." lines, then one line
 * "result key=value ...": ops, mismatches, skipped, errors (their sum;
 * --read: bytes wrong or missing, and failed calls), bytes, elapsed_us
 * (from the go to the end), cpu_us. Exit status 0 without errors, 1 with
 * errors, 2 when it could not run (usage, unreadable or malformed trace:
 * the message names the line and the field).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <openssl/evp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "trace.h"

#define PAGE 4096
#define DEFAULT_BS (1u << 20)

struct replay {
	int root;
	int fds[TRACE_MAX_SLOTS]; /* the replay's fd of each slot, -1: none */
	uint8_t *buf;             /* read buffer */
	size_t bufcap;
	unsigned long mismatches, skipped, reported, max_report;
	unsigned long long bytes;
};

static void mismatch(struct replay *r, const struct trace_op *op, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void mismatch(struct replay *r, const struct trace_op *op, const char *fmt, ...)
{
	va_list ap;

	r->mismatches++;
	if (r->reported++ >= r->max_report)
		return;
	printf("mismatch line %u: %s ", op->line, trace_kind_name(op->kind));
	if (op->path)
		printf("%s", op->path);
	else
		printf("fd %d", op->slot);
	printf(": ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

/* The result of a call as the trace writes it: >= 0, or -errno. */
static int64_t res_of(long rc)
{
	return rc < 0 ? -(int64_t)errno : rc;
}

static void check_res(struct replay *r, const struct trace_op *op, int64_t got)
{
	char a[32], b[32];

	if (got != op->res)
		mismatch(r, op, "expected %s, got %s", trace_res_str(op->res, a, sizeof(a)),
			 trace_res_str(got, b, sizeof(b)));
}

static void check_stat(struct replay *r, const struct trace_op *op, int64_t got,
		       const struct stat *st)
{
	check_res(r, op, got);
	if (got != 0 || op->res != 0 || !op->has_stat)
		return;
	if (st->st_mode != op->mode)
		mismatch(r, op, "mode 0%o, expected 0%o", (unsigned)st->st_mode, (unsigned)op->mode);
	else if (op->st_size >= 0 && st->st_size != op->st_size)
		mismatch(r, op, "size %lld, expected %lld", (long long)st->st_size,
			 (long long)op->st_size);
}

static uint8_t *buffer(struct replay *r, size_t n)
{
	if (n > r->bufcap) {
		uint8_t *b = realloc(r->buf, n);
		if (!b) {
			fprintf(stderr, "podfs-replay: out of memory (%zu bytes)\n", n);
			exit(2);
		}
		r->buf = b;
		r->bufcap = n;
	}
	return r->buf;
}

static void hash8(const void *data, size_t n, uint8_t out[TRACE_HASH_LEN])
{
	uint8_t md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;

	if (!EVP_Digest(data, n, md, &mdlen, EVP_sha256(), NULL) || mdlen < TRACE_HASH_LEN) {
		fprintf(stderr, "podfs-replay: SHA-256 failed\n");
		exit(2);
	}
	memcpy(out, md, TRACE_HASH_LEN);
}

static void check_data(struct replay *r, const struct trace_op *op, int64_t got)
{
	check_res(r, op, got);
	if (got > 0)
		r->bytes += (unsigned long long)got;
	if (got != op->res || got < 0 || !op->has_hash)
		return;
	uint8_t h[TRACE_HASH_LEN];
	hash8(r->buf, (size_t)got, h);
	if (memcmp(h, op->hash, TRACE_HASH_LEN) != 0)
		mismatch(r, op, "the %lld bytes read differ from the capture's", (long long)got);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* getdents64 with the trace's buffer size until the end; the names
 * (without . and ..) counted and hashed in sorted order. */
static void do_getdents(struct replay *r, const struct trace_op *op, int fd)
{
	char **names = NULL;
	size_t n = 0, cap = 0;
	uint8_t *b = buffer(r, (size_t)op->size);
	long got;

	while ((got = syscall(SYS_getdents64, fd, b, (size_t)op->size)) > 0) {
		for (long off = 0; off < got;) {
			/* struct linux_dirent64: ino, off, reclen, type, name */
			unsigned short reclen;
			memcpy(&reclen, b + off + 16, sizeof(reclen));
			const char *name = (const char *)b + off + 19;
			if (reclen < 20 || off + reclen > got) {
				mismatch(r, op, "getdents64 returned a malformed entry");
				goto out;
			}
			off += reclen;
			if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
				continue;
			if (n == cap) {
				cap = cap ? 2 * cap : 256;
				char **nn = realloc(names, cap * sizeof(*nn));
				if (!nn)
					goto oom;
				names = nn;
			}
			if (!(names[n] = strdup(name)))
				goto oom;
			n++;
		}
	}
	if (got < 0) {
		char e[32];
		mismatch(r, op, "getdents64 failed: %s", trace_res_str(-errno, e, sizeof(e)));
		goto out;
	}
	qsort(names, n, sizeof(*names), cmp_names);
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	uint8_t md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
		fprintf(stderr, "podfs-replay: SHA-256 failed\n");
		exit(2);
	}
	for (size_t i = 0; i < n; i++) {
		EVP_DigestUpdate(ctx, names[i], strlen(names[i]));
		EVP_DigestUpdate(ctx, "\n", 1);
	}
	EVP_DigestFinal_ex(ctx, md, &mdlen);
	EVP_MD_CTX_free(ctx);
	if ((int64_t)n != op->arg)
		mismatch(r, op, "%zu names listed, expected %lld", n, (long long)op->arg);
	else if (memcmp(md, op->hash, TRACE_HASH_LEN) != 0)
		mismatch(r, op, "the %zu names listed differ from the capture's", n);
out:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return;
oom:
	fprintf(stderr, "podfs-replay: out of memory\n");
	exit(2);
}

static sigjmp_buf fault_jb;
static volatile sig_atomic_t in_fault;

static void fault_cb(int sig)
{
	if (in_fault)
		siglongjmp(fault_jb, sig);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Touches the listed pages of a private mapping of the file, as the
 * capture's program did through its mappings: page faults, not reads. */
static void do_fault(struct replay *r, const struct trace_op *op)
{
	int fd = openat(r->root, op->path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	char e[32];

	if (fd < 0) {
		mismatch(r, op, "open: %s", trace_res_str(-errno, e, sizeof(e)));
		return;
	}
	if (fstat(fd, &st) < 0) {
		mismatch(r, op, "fstat: %s", trace_res_str(-errno, e, sizeof(e)));
		close(fd);
		return;
	}
	if (op->npages == 0 || st.st_size == 0) {
		close(fd);
		return;
	}
	uint64_t npg = ((uint64_t)st.st_size + PAGE - 1) / PAGE;
	if (op->pages[op->npages - 1].last >= npg) {
		mismatch(r, op, "page %llu is past the end (%lld bytes)",
			 (unsigned long long)op->pages[op->npages - 1].last, (long long)st.st_size);
		close(fd);
		return;
	}
	volatile const uint8_t *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED) {
		mismatch(r, op, "mmap: %s", trace_res_str(-errno, e, sizeof(e)));
		close(fd);
		return;
	}
	volatile uint8_t sum = 0;
	volatile size_t i = 0;
	volatile uint64_t p = 0;
	int sig = sigsetjmp(fault_jb, 1);
	if (sig) {
		in_fault = 0;
		mismatch(r, op, "signal %d touching page %llu", sig, (unsigned long long)p);
	} else {
		in_fault = 1;
		for (i = 0; i < op->npages; i++)
			for (p = op->pages[i].first; p <= op->pages[i].last; p++) {
				sum += map[p * PAGE];
				r->bytes += PAGE;
			}
		in_fault = 0;
	}
	(void)sum;
	munmap((void *)map, (size_t)st.st_size);
	close(fd);
}

static void run_op(struct replay *r, const struct trace_op *op)
{
	struct stat st;
	int fd = -1;

	if (op->kind == TR_FSTAT || op->kind == TR_READ || op->kind == TR_PREAD ||
	    op->kind == TR_LSEEK || op->kind == TR_IOCTL || op->kind == TR_GETDENTS ||
	    op->kind == TR_CLOSE) {
		fd = r->fds[op->slot];
		if (fd < 0) {
			/* Its open failed here (a mismatch already): nothing to do it on. */
			r->skipped++;
			return;
		}
	}
	switch (op->kind) {
	case TR_STAT:
	case TR_LSTAT:
		check_stat(r, op,
			   res_of(fstatat(r->root, op->path, &st,
					  op->kind == TR_LSTAT ? AT_SYMLINK_NOFOLLOW : 0)),
			   &st);
		break;
	case TR_ACCESS:
		check_res(r, op, res_of(faccessat(r->root, op->path, (int)op->arg, 0)));
		break;
	case TR_READLINK: {
		char *b = (char *)buffer(r, (size_t)op->size + 1);
		check_res(r, op, res_of(readlinkat(r->root, op->path, b, (size_t)op->size)));
		break;
	}
	case TR_OPEN: {
		int got = openat(r->root, op->path, (int)op->arg);
		if (got < 0) {
			check_res(r, op, -(int64_t)errno);
			break;
		}
		if (op->res < 0) {
			check_res(r, op, 0);
			close(got);
			break;
		}
		r->fds[op->slot] = got;
		break;
	}
	case TR_FSTAT:
		check_stat(r, op, res_of(fstat(fd, &st)), &st);
		break;
	case TR_READ:
		check_data(r, op, res_of(read(fd, buffer(r, (size_t)op->size), (size_t)op->size)));
		break;
	case TR_PREAD:
		check_data(r, op, res_of(pread(fd, buffer(r, (size_t)op->size), (size_t)op->size,
					       (off_t)op->offset)));
		break;
	case TR_LSEEK:
		check_res(r, op, res_of((long)lseek(fd, (off_t)op->offset, (int)op->arg)));
		break;
	case TR_IOCTL: {
		struct termios t;
		check_res(r, op, res_of(ioctl(fd, TCGETS, &t)));
		break;
	}
	case TR_GETDENTS:
		do_getdents(r, op, fd);
		break;
	case TR_CLOSE:
		check_res(r, op, res_of(close(fd)));
		r->fds[op->slot] = -1;
		break;
	case TR_FAULT:
		do_fault(r, op);
		break;
	case TR_EXEC: {
		int got = openat(r->root, op->path, O_RDONLY | O_CLOEXEC);
		check_res(r, op, got < 0 ? -(int64_t)errno : 0);
		if (got >= 0) {
			ssize_t n = pread(got, buffer(r, 256), 256, 0);
			if (n > 0)
				r->bytes += (unsigned long long)n;
			close(got);
		}
		break;
	}
	case TR_KINDS:
		break;
	}
}

static int64_t now_us(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* -g: "ready", then wait for stdin's end (or a byte). */
static void wait_go(void)
{
	char c;

	printf("ready\n");
	fflush(stdout);
	while (read(0, &c, 1) < 0 && errno == EINTR)
		;
}

static int replay_trace(const char *root, const char *path, bool gate, unsigned long max_report)
{
	struct trace t;
	char err[1024];
	FILE *f = fopen(path, "r");

	if (!f) {
		fprintf(stderr, "podfs-replay: %s: %s\n", path, strerror(errno));
		return 2;
	}
	int rc = trace_load(f, &t, err, sizeof(err));
	fclose(f);
	if (rc < 0) {
		fprintf(stderr, "podfs-replay: %s: %s\n", path, err);
		return 2;
	}
	struct replay *r = calloc(1, sizeof(*r));
	if (!r) {
		fprintf(stderr, "podfs-replay: out of memory\n");
		trace_free(&t);
		return 2;
	}
	for (int i = 0; i < TRACE_MAX_SLOTS; i++)
		r->fds[i] = -1;
	r->max_report = max_report;
	r->root = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (r->root < 0) {
		fprintf(stderr, "podfs-replay: %s: %s\n", root, strerror(errno));
		trace_free(&t);
		free(r);
		return 2;
	}
	if (gate)
		wait_go();
	int64_t t0 = now_us(CLOCK_MONOTONIC);
	for (size_t i = 0; i < t.n; i++)
		run_op(r, &t.ops[i]);
	int64_t el = now_us(CLOCK_MONOTONIC) - t0;
	for (int i = 0; i < TRACE_MAX_SLOTS; i++)
		if (r->fds[i] >= 0)
			close(r->fds[i]);
	close(r->root);
	unsigned long errors = r->mismatches + r->skipped;
	printf("result ops=%zu mismatches=%lu skipped=%lu errors=%lu bytes=%llu elapsed_us=%lld "
	       "cpu_us=%lld\n",
	       t.n, r->mismatches, r->skipped, errors, r->bytes, (long long)el,
	       (long long)now_us(CLOCK_PROCESS_CPUTIME_ID));
	free(r->buf);
	free(r);
	trace_free(&t);
	return errors ? 1 : 0;
}

static int read_compare(const char *file, const char *ref, size_t bs, bool gate)
{
	int fd = open(file, O_RDONLY | O_CLOEXEC), rfd = open(ref, O_RDONLY | O_CLOEXEC);
	struct stat st;
	unsigned long long wrong = 0, failed = 0, total = 0;
	long long first_bad = -1;

	if (fd < 0 || rfd < 0 || fstat(rfd, &st) < 0) {
		fprintf(stderr, "podfs-replay: %s: %s\n", fd < 0 ? file : ref, strerror(errno));
		return 2;
	}
	const uint8_t *want = st.st_size ? mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED,
						rfd, 0)
					 : NULL;
	uint8_t *buf = malloc(bs);
	if (want == MAP_FAILED || !buf) {
		fprintf(stderr, "podfs-replay: %s: %s\n", ref, want == MAP_FAILED ? strerror(errno) :
			"out of memory");
		return 2;
	}
	if (gate)
		wait_go();
	int64_t t0 = now_us(CLOCK_MONOTONIC);
	for (;;) {
		ssize_t n = read(fd, buf, bs);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			printf("mismatch read at %llu: %s\n", total, strerror(errno));
			failed++;
			break;
		}
		if (n == 0)
			break;
		size_t have = total < (unsigned long long)st.st_size ?
				      (size_t)((unsigned long long)st.st_size - total) : 0;
		size_t cmp = (size_t)n < have ? (size_t)n : have;
		if (cmp < (size_t)n || memcmp(buf, want + total, cmp) != 0) {
			for (size_t i = 0; i < (size_t)n; i++)
				if (i >= cmp || buf[i] != want[total + i]) {
					wrong++;
					if (first_bad < 0)
						first_bad = (long long)(total + i);
				}
		}
		total += (unsigned long long)n;
	}
	if (total < (unsigned long long)st.st_size && !failed) {
		wrong += (unsigned long long)st.st_size - total;
		if (first_bad < 0)
			first_bad = (long long)total;
	}
	int64_t el = now_us(CLOCK_MONOTONIC) - t0;
	if (first_bad >= 0)
		printf("mismatch %llu bytes wrong or missing, the first at offset %lld\n", wrong,
		       first_bad);
	unsigned long long errors = wrong + failed;
	printf("result ops=1 mismatches=%llu skipped=0 errors=%llu bytes=%llu elapsed_us=%lld "
	       "cpu_us=%lld first_bad=%lld\n",
	       wrong, errors, total, (long long)el, (long long)now_us(CLOCK_PROCESS_CPUTIME_ID),
	       first_bad);
	free(buf);
	close(fd);
	close(rfd);
	return errors ? 1 : 0;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: podfs-replay [-g] [-m MAX] ROOT TRACE\n"
		"       podfs-replay [-g] --read FILE --ref REF [--bs SIZE]\n"
		"Replays a file-access trace under ROOT and checks every result against the\n"
		"capture's; or reads FILE whole and compares it with REF.\n"
		"  -g, --gate      print \"ready\", then wait until stdin ends before starting\n"
		"  -m, --max N     print at most N mismatch lines (default 20)\n"
		"  --read FILE     read FILE in --bs reads (default 1048576) ...\n"
		"  --ref REF       ... and compare it with REF\n");
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "gate", no_argument, NULL, 'g' },   { "max", required_argument, NULL, 'm' },
		{ "read", required_argument, NULL, 'r' }, { "ref", required_argument, NULL, 'R' },
		{ "bs", required_argument, NULL, 'b' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *file = NULL, *ref = NULL;
	unsigned long max_report = 20, bs = DEFAULT_BS;
	bool gate = false;
	char *end;
	int c;

	while ((c = getopt_long(argc, argv, "gm:h", lopts, NULL)) != -1) {
		switch (c) {
		case 'g':
			gate = true;
			break;
		case 'm':
			max_report = strtoul(optarg, &end, 10);
			if (*end || !*optarg) {
				fprintf(stderr, "podfs-replay: -m %s: not a number\n", optarg);
				return 2;
			}
			break;
		case 'r':
			file = optarg;
			break;
		case 'R':
			ref = optarg;
			break;
		case 'b':
			bs = strtoul(optarg, &end, 10);
			if (*end || bs == 0 || bs > TRACE_MAX_IO) {
				fprintf(stderr, "podfs-replay: --bs %s: not a size of 1..%u\n", optarg,
					TRACE_MAX_IO);
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	struct sigaction sa = { .sa_handler = fault_cb };
	sigemptyset(&sa.sa_mask);
	/* A page that cannot be read faults with SIGBUS: a mismatch, not a crash. */
	sigaction(SIGBUS, &sa, NULL);
	if (file || ref) {
		if (!file || !ref || optind != argc) {
			usage(stderr);
			return 2;
		}
		return read_compare(file, ref, bs, gate);
	}
	if (argc - optind != 2) {
		usage(stderr);
		return 2;
	}
	return replay_trace(argv[optind], argv[optind + 1], gate, max_report);
}
