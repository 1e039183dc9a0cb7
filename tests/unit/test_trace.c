/* test_trace.c: unit tests of podfs-replay's trace parser
 * (tests/tools/trace.c): every call's line parses into its fields;
 * malformed lines (unknown calls, missing or extra fields, bad numbers,
 * results, hashes, page lists, paths that are absolute or climb out,
 * writing opens) are refused with a message naming the field; whole
 * traces: the header, the slots' life, and the line number in errors. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "trace.h"

static struct trace_op op;
static char err[1024];

static int parse(const char *line)
{
	memset(&op, 0, sizeof(op));
	err[0] = 0;
	return trace_parse_line(line, 7, &op, err, sizeof(err));
}

static void test_good_lines(void)
{
	CHECK_EQ(parse(""), 0);
	CHECK_EQ(parse("   "), 0);
	CHECK_EQ(parse("# a comment"), 0);
	CHECK_EQ(parse("  # indented"), 0);

	CHECK_EQ(parse("stat lib/python3.11/os.py 0 0100644 39504"), 1);
	CHECK_EQ(op.kind, TR_STAT);
	CHECK_EQ(op.line, 7);
	CHECK_STR(op.path, "lib/python3.11/os.py");
	CHECK_EQ(op.res, 0);
	CHECK(op.has_stat);
	CHECK_EQ(op.mode, 0100644);
	CHECK_EQ(op.st_size, 39504);
	trace_op_fini(&op);

	CHECK_EQ(parse("lstat lib/missing.py -ENOENT"), 1);
	CHECK_EQ(op.kind, TR_LSTAT);
	CHECK_EQ(op.res, -ENOENT);
	CHECK(!op.has_stat);
	trace_op_fini(&op);

	CHECK_EQ(parse("stat lib 0 040755 -"), 1);
	CHECK_EQ(op.st_size, -1);
	CHECK_EQ(op.mode, 040755);
	trace_op_fini(&op);

	CHECK_EQ(parse("stat . -2"), 1);
	CHECK_STR(op.path, ".");
	CHECK_EQ(op.res, -2);
	trace_op_fini(&op);

	/* Percent-escapes; ".." that stays inside. */
	CHECK_EQ(parse("stat a%20b/%25x/../c 0"), 1);
	CHECK_STR(op.path, "a b/%x/../c");
	trace_op_fini(&op);

	CHECK_EQ(parse("open lib/os.py 0x80000 4"), 1);
	CHECK_EQ(op.kind, TR_OPEN);
	CHECK_EQ(op.arg, O_CLOEXEC);
	CHECK_EQ(op.res, 4);
	CHECK_EQ(op.slot, 4);
	trace_op_fini(&op);

	CHECK_EQ(parse("open lib/nope 0x90800 -ENOTDIR"), 1);
	CHECK_EQ(op.slot, -1);
	CHECK_EQ(op.res, -ENOTDIR);
	trace_op_fini(&op);

	CHECK_EQ(parse("fstat 4 0 0100644 12"), 1);
	CHECK_EQ(op.kind, TR_FSTAT);
	CHECK_EQ(op.slot, 4);
	CHECK_EQ(op.st_size, 12);

	CHECK_EQ(parse("read 4 13 12 0123456789abcdef"), 1);
	CHECK_EQ(op.kind, TR_READ);
	CHECK_EQ(op.size, 13);
	CHECK_EQ(op.res, 12);
	CHECK(op.has_hash);
	CHECK_EQ(op.hash[0], 0x01);
	CHECK_EQ(op.hash[7], 0xef);

	CHECK_EQ(parse("read 4 4096 0"), 1);
	CHECK(!op.has_hash);
	CHECK_EQ(parse("read 4 4096 0 -"), 1);
	CHECK(!op.has_hash);

	CHECK_EQ(parse("pread 5 784 64 784 FFFFFFFFFFFFFFFF"), 1);
	CHECK_EQ(op.kind, TR_PREAD);
	CHECK_EQ(op.offset, 64);
	CHECK_EQ(op.hash[3], 0xff);

	CHECK_EQ(parse("lseek 4 -10 1 90"), 1);
	CHECK_EQ(op.offset, -10);
	CHECK_EQ(op.arg, 1);
	CHECK_EQ(op.res, 90);

	CHECK_EQ(parse("ioctl 4 0x5401 -ENOTTY"), 1);
	CHECK_EQ(op.res, -ENOTTY);

	CHECK_EQ(parse("getdents 3 32768 208 00112233445566aa"), 1);
	CHECK_EQ(op.kind, TR_GETDENTS);
	CHECK_EQ(op.size, 32768);
	CHECK_EQ(op.arg, 208);
	CHECK_EQ(op.hash[7], 0xaa);

	CHECK_EQ(parse("close 4 0"), 1);
	CHECK_EQ(op.kind, TR_CLOSE);

	CHECK_EQ(parse("access bin/python3 1 0"), 1);
	CHECK_EQ(op.arg, 1);
	trace_op_fini(&op);

	CHECK_EQ(parse("readlink bin/python3 4096 10"), 1);
	CHECK_EQ(op.size, 4096);
	CHECK_EQ(op.res, 10);
	trace_op_fini(&op);

	CHECK_EQ(parse("exec bin/python3 0"), 1);
	CHECK_EQ(op.kind, TR_EXEC);
	trace_op_fini(&op);

	CHECK_EQ(parse("fault lib/libpython3.11.so.1.0 0-3,7,9-12"), 1);
	CHECK_EQ(op.kind, TR_FAULT);
	CHECK_EQ(op.npages, 3);
	CHECK_EQ(op.pages[0].first, 0);
	CHECK_EQ(op.pages[0].last, 3);
	CHECK_EQ(op.pages[1].first, 7);
	CHECK_EQ(op.pages[1].last, 7);
	CHECK_EQ(op.pages[2].last, 12);
	trace_op_fini(&op);

	CHECK_EQ(parse("fault lib/x.so -"), 1);
	CHECK_EQ(op.npages, 0);
	trace_op_fini(&op);

	/* Tabs and runs of blanks separate fields too. */
	CHECK_EQ(parse("close\t4  0 "), 1);
	CHECK_EQ(op.slot, 4);
}

/* Each bad line, and a word its message must contain. */
static const struct {
	const char *line, *says;
} bad[] = {
	{ "frobnicate x 0", "unknown call" },
	{ "stat", "expected: stat PATH RES" },
	{ "stat a", "expected: stat PATH RES" },
	{ "stat a 0 0100644", "MODE and SIZE go together" },
	{ "stat a 0 0100644 1 2", "expected" },
	{ "stat a -ENOENT 0100644 1", "failed call" },
	{ "stat a 0 0100648 1", "MODE" },
	{ "stat a 0 0100644 -5", "SIZE" },
	{ "stat a zero", "RES zero" },
	{ "stat a -EWHATEVER", "RES -EWHATEVER" },
	{ "stat a -99999", "RES" },
	{ "stat /etc/passwd 0", "relative" },
	{ "stat ../x 0", "climbs above" },
	{ "stat a/../../x 0", "climbs above" },
	{ "stat a%2 0", "%-escape" },
	{ "stat a%zz 0", "%-escape" },
	{ "stat a%00b 0", "%-escape" },
	{ "open a 0x241 3", "could write" },        /* O_WRONLY|O_CREAT|O_TRUNC */
	{ "open a 02 3", "could write" },           /* O_RDWR */
	{ "open a 0x400 3", "could write" },        /* O_APPEND */
	{ "open a 0x80000 99999", "fd number" },
	{ "open a flags 3", "FLAGS" },
	{ "read x 10 10", "SLOT x" },
	{ "read -1 10 10", "SLOT" },
	{ "read 5000 10 10", "SLOT 5000" },
	{ "read 4 10 11", "more than SIZE" },
	{ "read 4 10 10 abc", "HASH abc" },
	{ "read 4 10 10 0123456789abcdeg", "HASH" },
	{ "read 4 10 -EIO 0123456789abcdef", "failed read" },
	{ "read 4 999999999999 10", "SIZE" },
	{ "pread 4 10 x 10", "OFFSET" },
	{ "lseek 4 0 9 0", "WHENCE" },
	{ "ioctl 4 0x5413 0", "only TCGETS" },
	{ "getdents 4 32768 10", "expected: getdents" },
	{ "getdents 4 8 1 0123456789abcdef", "BUFSIZE" },
	{ "getdents 4 32768 1 -", "HASH" },
	{ "access a 9 0", "AMODE" },
	{ "fault a 3-1", "bad range" },
	{ "fault a 1-3,2", "out of order" },
	{ "fault a 1,,2", "page number expected" },
	{ "fault a 1-", "without an end" },
	{ "fault a 1x", "unexpected" },
	{ "close 4 0 extra", "expected: close SLOT RES" },
	{ "close 4 0\r", "control character" },
};

static void test_bad_lines(void)
{
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int r = parse(bad[i].line);
		if (!CHECK_EQ(r, -1)) {
			fprintf(stderr, "  line accepted: %s\n", bad[i].line);
			trace_op_fini(&op);
			continue;
		}
		if (!CHECK(strstr(err, bad[i].says) != NULL))
			fprintf(stderr, "  line %s: message \"%s\" lacks \"%s\"\n", bad[i].line, err,
				bad[i].says);
		CHECK(op.path == NULL && op.pages == NULL); /* nothing left to free */
	}
	/* A line longer than the limit. */
	char *big = malloc(TRACE_MAX_LINE + 10);
	memset(big, 'a', TRACE_MAX_LINE + 9);
	memcpy(big, "stat ", 5);
	big[TRACE_MAX_LINE + 9] = 0;
	CHECK_EQ(parse(big), -1);
	CHECK(strstr(err, "longer") != NULL);
	free(big);
}

static void test_res(void)
{
	char b[32];
	int64_t v;

	CHECK(trace_parse_res("-ENOENT", &v) && v == -ENOENT);
	CHECK(trace_parse_res("0", &v) && v == 0);
	CHECK(trace_parse_res("-13", &v) && v == -EACCES);
	CHECK(!trace_parse_res("", &v));
	CHECK(!trace_parse_res("-E", &v));
	CHECK(!trace_parse_res("12abc", &v));
	CHECK_STR(trace_res_str(-ENOENT, b, sizeof(b)), "-ENOENT");
	CHECK_STR(trace_res_str(-ENOTTY, b, sizeof(b)), "-ENOTTY");
	CHECK_STR(trace_res_str(42, b, sizeof(b)), "42");
	CHECK_STR(trace_res_str(-4000, b, sizeof(b)), "-4000");
	CHECK_STR(trace_kind_name(TR_GETDENTS), "getdents");
}

static int load(const char *text, struct trace *t)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	err[0] = 0;
	int rc = trace_load(f, t, err, sizeof(err));
	fclose(f);
	return rc;
}

static void test_load(void)
{
	struct trace t;

	CHECK_EQ(load("podfs-trace 1\n"
		      "# captured from a test\n"
		      "stat lib -ENOENT\n"
		      "open lib/a.py 0x80000 3\n"
		      "fstat 3 0 0100644 5\n"
		      "read 3 4096 5 0011223344556677\n"
		      "read 3 4096 0\n"
		      "close 3 0\n"
		      "open lib/b.py 0x80000 3\n"
		      "close 3 0\n",
		      &t),
		 0);
	CHECK_EQ(t.n, 8);
	CHECK_EQ(t.ops[0].line, 3);
	CHECK_EQ(t.ops[7].line, 10);
	CHECK_EQ(t.ops[3].kind, TR_READ);
	trace_free(&t);
	CHECK_EQ(t.n, 0);

	/* No final newline is fine. */
	CHECK_EQ(load("podfs-trace 1\nstat a 0", &t), 0);
	CHECK_EQ(t.n, 1);
	trace_free(&t);

	static const struct {
		const char *text, *says;
	} bad_traces[] = {
		{ "", "empty trace" },
		{ "stat a 0\n", "line 1: not a trace" },
		{ "podfs-trace\n", "line 1: not a trace" },
		{ "podfs-trace 1 x\n", "line 1: not a trace" },
		{ "podfs-trace 2\nstat a 0\n", "trace version 2" },
		{ "podfs-trace 1\nstat a 0\nstat b\n", "line 3: stat: 1 fields" },
		{ "podfs-trace 1\nread 3 10 0\n", "line 2: read on fd 3, which no open made" },
		{ "podfs-trace 1\nopen a 0 3\nclose 3 0\nclose 3 0\n",
		  "line 4: close on fd 3, which no open made" },
		{ "podfs-trace 1\nopen a 0 3\nopen b 0 3\n",
		  "line 3: open fills fd 3, still open since line 2" },
		{ "podfs-trace 1\nopen a 0 -ENOENT\nread 3 10 0\n", "line 3: read on fd 3" },
	};
	for (size_t i = 0; i < sizeof(bad_traces) / sizeof(bad_traces[0]); i++) {
		if (!CHECK_EQ(load(bad_traces[i].text, &t), -1))
			trace_free(&t);
		if (!CHECK(strstr(err, bad_traces[i].says) != NULL))
			fprintf(stderr, "  trace %zu: message \"%s\" lacks \"%s\"\n", i, err,
				bad_traces[i].says);
		CHECK_EQ(t.n, 0);
		CHECK(t.ops == NULL);
	}

	/* A NUL byte inside a line. */
	static const char nul[] = "podfs-trace 1\nstat a\0b 0\n";
	FILE *f = fmemopen((void *)nul, sizeof(nul) - 1, "r");
	CHECK_EQ(trace_load(f, &t, err, sizeof(err)), -1);
	CHECK(strstr(err, "line 2: a NUL byte") != NULL);
	fclose(f);
}

int main(void)
{
	test_good_lines();
	test_bad_lines();
	test_res();
	test_load();
	return check_done("test_trace");
}
