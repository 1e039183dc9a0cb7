/* fuzz_trace.c: podfs-replay's trace parser (tests/tools/trace.c) on
 * arbitrary bytes, whole traces and single lines.
 *
 * Properties: loading never crashes; it returns 0 or -1, and -1 leaves
 * an empty trace and a message that names a line the input has ("line
 * N:", N at most its line count) or says it is empty or unreadable; an
 * accepted trace has at most one op per line after the first, each of a
 * known kind, on a line it has, in order, with a slot below
 * TRACE_MAX_SLOTS where it takes one, a relative path that never climbs
 * above the root, ascending page ranges and sizes within their bounds.
 */
#include <stdio.h>
#include <string.h>

#include "fuzz.h"
#include "trace.h"

static void check_op(const struct trace_op *op, unsigned lines)
{
	FUZZ_ASSERT((unsigned)op->kind < TR_KINDS);
	FUZZ_ASSERT(op->line >= 2 && op->line <= lines);
	FUZZ_ASSERT(op->slot >= -1 && op->slot < TRACE_MAX_SLOTS);
	FUZZ_ASSERT(op->size >= 0 && op->size <= TRACE_MAX_IO);
	if (op->path) {
		FUZZ_ASSERT(op->path[0] != '/' && op->path[0] != 0);
		FUZZ_ASSERT(strcmp(op->path, "..") != 0 && strncmp(op->path, "../", 3) != 0);
	}
	for (size_t i = 0; i < op->npages; i++) {
		FUZZ_ASSERT(op->pages[i].first <= op->pages[i].last);
		FUZZ_ASSERT(i == 0 || op->pages[i - 1].last < op->pages[i].first);
	}
	if (op->kind == TR_OPEN && op->res >= 0)
		FUZZ_ASSERT(op->slot == op->res);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct trace t;
	char err[512];
	unsigned lines = 1;

	for (size_t i = 0; i < size; i++)
		lines += data[i] == '\n';
	FILE *f = fmemopen((void *)data, size, "r");
	if (!f)
		return 0;
	int rc = trace_load(f, &t, err, sizeof(err));
	fclose(f);
	FUZZ_ASSERT(rc == 0 || rc == -1);
	if (rc < 0) {
		FUZZ_ASSERT(t.n == 0 && t.ops == NULL);
		unsigned n = 0;
		FUZZ_ASSERT(sscanf(err, "line %u:", &n) == 1 ? n >= 1 && n <= lines :
			    strncmp(err, "empty trace", 11) == 0 || strncmp(err, "reading", 7) == 0);
	} else {
		FUZZ_ASSERT(t.n < lines);
		for (size_t i = 0; i < t.n; i++) {
			check_op(&t.ops[i], lines);
			FUZZ_ASSERT(i == 0 || t.ops[i - 1].line < t.ops[i].line);
		}
		trace_free(&t);
	}
	/* The first line alone, as one op's line. */
	char line[256];
	size_t n = 0;
	while (n < size && n < sizeof(line) - 1 && data[n] != '\n' && data[n] != 0) {
		line[n] = (char)data[n];
		n++;
	}
	line[n] = 0;
	struct trace_op op;
	memset(&op, 0, sizeof(op));
	rc = trace_parse_line(line, 2, &op, err, sizeof(err));
	FUZZ_ASSERT(rc >= -1 && rc <= 1);
	if (rc == 1) {
		check_op(&op, 2);
		trace_op_fini(&op);
	} else {
		FUZZ_ASSERT(op.path == NULL && op.pages == NULL);
	}
	return 0;
}
