/* trace.c: the parser of podfs-replay's traces (format in trace.h). */
#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FIELDS 8

/* O_TMPFILE's own bit (O_TMPFILE also has O_DIRECTORY's, and glibc's
 * __O_TMPFILE too). */
#define TMPFILE_BIT 020000000

static const char *const kind_names[TR_KINDS] = {
	[TR_STAT] = "stat",       [TR_LSTAT] = "lstat",   [TR_ACCESS] = "access",
	[TR_READLINK] = "readlink", [TR_OPEN] = "open",   [TR_FSTAT] = "fstat",
	[TR_READ] = "read",       [TR_PREAD] = "pread",   [TR_LSEEK] = "lseek",
	[TR_IOCTL] = "ioctl",     [TR_GETDENTS] = "getdents", [TR_CLOSE] = "close",
	[TR_FAULT] = "fault",     [TR_EXEC] = "exec",
};

/* The errno values a filesystem trace can show, by name. */
static const struct {
	const char *name;
	int err;
} errnames[] = {
	{ "EPERM", EPERM },     { "ENOENT", ENOENT },   { "EINTR", EINTR },
	{ "EIO", EIO },         { "ENXIO", ENXIO },     { "EBADF", EBADF },
	{ "EAGAIN", EAGAIN },   { "ENOMEM", ENOMEM },   { "EACCES", EACCES },
	{ "EFAULT", EFAULT },   { "EBUSY", EBUSY },     { "EEXIST", EEXIST },
	{ "EXDEV", EXDEV },     { "ENODEV", ENODEV },   { "ENOTDIR", ENOTDIR },
	{ "EISDIR", EISDIR },   { "EINVAL", EINVAL },   { "ENFILE", ENFILE },
	{ "EMFILE", EMFILE },   { "ENOTTY", ENOTTY },   { "ETXTBSY", ETXTBSY },
	{ "EFBIG", EFBIG },     { "ENOSPC", ENOSPC },   { "ESPIPE", ESPIPE },
	{ "EROFS", EROFS },     { "ERANGE", ERANGE },   { "ENAMETOOLONG", ENAMETOOLONG },
	{ "ENOSYS", ENOSYS },   { "ENOTEMPTY", ENOTEMPTY }, { "ELOOP", ELOOP },
	{ "ENODATA", ENODATA }, { "EOVERFLOW", EOVERFLOW }, { "EOPNOTSUPP", EOPNOTSUPP },
	{ "ESTALE", ESTALE },   { "EDQUOT", EDQUOT },   { "ENOTCONN", ENOTCONN },
};

const char *trace_kind_name(enum trace_kind k)
{
	return (unsigned)k < TR_KINDS ? kind_names[k] : "?";
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

/* A whole word as a signed number in base 0 (0x hex, 0 octal, decimal). */
static bool parse_num(const char *s, int base, int64_t *v)
{
	char *end;

	if (!*s || *s == '+' || *s == ' ')
		return false;
	errno = 0;
	long long x = strtoll(s, &end, base);
	if (errno || *end)
		return false;
	*v = x;
	return true;
}

static bool parse_nonneg(const char *s, int64_t *v)
{
	return *s != '-' && parse_num(s, 0, v) && *v >= 0;
}

/* Decimal only: a size or an offset never has a leading zero's octal
 * meaning. */
static bool parse_dec(const char *s, int64_t *v)
{
	return *s != '-' && parse_num(s, 10, v) && *v >= 0;
}

bool trace_parse_res(const char *s, int64_t *res)
{
	if (s[0] == '-' && s[1] == 'E') {
		for (size_t i = 0; i < sizeof(errnames) / sizeof(errnames[0]); i++)
			if (strcmp(s + 1, errnames[i].name) == 0) {
				*res = -errnames[i].err;
				return true;
			}
		return false;
	}
	int64_t v;
	if (!parse_num(s, 10, &v) || v < -4095 || v > INT64_MAX / 2)
		return false;
	*res = v;
	return true;
}

const char *trace_res_str(int64_t res, char *buf, size_t len)
{
	if (res < 0)
		for (size_t i = 0; i < sizeof(errnames) / sizeof(errnames[0]); i++)
			if (-res == errnames[i].err) {
				snprintf(buf, len, "-%s", errnames[i].name);
				return buf;
			}
	snprintf(buf, len, "%lld", (long long)res);
	return buf;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Decodes a PATH word into a malloc'd string; NULL with err set when it
 * is malformed or escapes the root. */
static char *decode_path(const char *s, char *err, size_t errlen)
{
	size_t n = strlen(s);
	char *out = malloc(n + 1), *o = out;

	if (!out) {
		fail(err, errlen, "out of memory");
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		if (s[i] != '%') {
			*o++ = s[i];
			continue;
		}
		/* The string ends in a NUL, which is no hex digit. */
		int hi = hexval(s[i + 1]);
		int lo = hi >= 0 ? hexval(s[i + 2]) : -1;
		if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
			fail(err, errlen, "path %s: bad %%-escape at byte %zu", s, i);
			goto bad;
		}
		*o++ = (char)(hi << 4 | lo);
		i += 2;
	}
	*o = 0;
	if (out[0] == '/' || out[0] == 0) {
		fail(err, errlen, "path %s: must be relative to the tree's root (\".\" for the root)",
		     s);
		goto bad;
	}
	/* Lexically, ".." must never climb above the root. */
	int depth = 0;
	for (const char *p = out; *p;) {
		const char *q = strchr(p, '/');
		size_t len = q ? (size_t)(q - p) : strlen(p);
		if (len == 2 && p[0] == '.' && p[1] == '.') {
			if (--depth < 0) {
				fail(err, errlen, "path %s: climbs above the tree's root", s);
				goto bad;
			}
		} else if (len > 0 && !(len == 1 && p[0] == '.')) {
			depth++;
		}
		p += len;
		while (*p == '/')
			p++;
	}
	return out;
bad:
	free(out);
	return NULL;
}

static bool parse_hash(const char *s, struct trace_op *op)
{
	if (strcmp(s, "-") == 0) {
		op->has_hash = false;
		return true;
	}
	if (strlen(s) != 2 * TRACE_HASH_LEN)
		return false;
	for (int i = 0; i < TRACE_HASH_LEN; i++) {
		int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return false;
		op->hash[i] = (uint8_t)(hi << 4 | lo);
	}
	op->has_hash = true;
	return true;
}

/* PAGES: "-" or "a-b,c,...", ascending and not overlapping. */
static int parse_pages(const char *s, struct trace_op *op, char *err, size_t errlen)
{
	if (strcmp(s, "-") == 0)
		return 0;
	size_t cap = 1;
	for (const char *p = s; *p; p++)
		cap += *p == ',';
	op->pages = calloc(cap, sizeof(*op->pages));
	if (!op->pages)
		return fail(err, errlen, "out of memory");
	const char *p = s;
	while (*p) {
		char *end;
		if (*p < '0' || *p > '9')
			return fail(err, errlen, "pages %s: a page number expected at byte %zu", s,
				    (size_t)(p - s));
		errno = 0;
		unsigned long long a = strtoull(p, &end, 10), b = a;
		if (*end == '-') {
			p = end + 1;
			if (*p < '0' || *p > '9')
				return fail(err, errlen, "pages %s: range without an end", s);
			b = strtoull(p, &end, 10);
		}
		if (errno || b < a || a > (UINT64_MAX >> 13) || b > (UINT64_MAX >> 13))
			return fail(err, errlen, "pages %s: bad range %llu-%llu", s, a, b);
		if (op->npages && a <= op->pages[op->npages - 1].last)
			return fail(err, errlen, "pages %s: ranges out of order or overlapping", s);
		op->pages[op->npages++] = (struct trace_pages){ a, b };
		if (*end == ',' && end[1])
			p = end + 1;
		else if (*end == 0)
			p = end;
		else
			return fail(err, errlen, "pages %s: unexpected '%c'", s, *end ? *end : ',');
	}
	return 0;
}

static bool parse_slot(const char *s, int *slot)
{
	int64_t v;
	if (!parse_dec(s, &v) || v >= TRACE_MAX_SLOTS)
		return false;
	*slot = (int)v;
	return true;
}

/* MODE and SIZE of a stat line, if present (fields f[0], f[1]). */
static int parse_stat_tail(char **f, int nf, struct trace_op *op, char *err, size_t errlen)
{
	if (nf == 0)
		return 0;
	if (nf != 2)
		return fail(err, errlen, "%s: MODE and SIZE go together", kind_names[op->kind]);
	if (op->res != 0)
		return fail(err, errlen, "%s: MODE and SIZE given for a failed call",
			    kind_names[op->kind]);
	int64_t mode;
	if (!parse_num(f[0], 8, &mode) || mode < 0 || mode > 0177777)
		return fail(err, errlen, "%s: MODE %s is not an octal st_mode", kind_names[op->kind],
			    f[0]);
	op->mode = (uint32_t)mode;
	op->st_size = -1;
	if (strcmp(f[1], "-") != 0 && !parse_dec(f[1], &op->st_size))
		return fail(err, errlen, "%s: SIZE %s is not a size or \"-\"", kind_names[op->kind],
			    f[1]);
	op->has_stat = true;
	return 0;
}

/* The fields of each kind: how many, besides the optional tails. */
static const struct {
	int min, max;
	const char *usage;
} shapes[TR_KINDS] = {
	[TR_STAT] = { 2, 4, "stat PATH RES [MODE SIZE]" },
	[TR_LSTAT] = { 2, 4, "lstat PATH RES [MODE SIZE]" },
	[TR_ACCESS] = { 3, 3, "access PATH AMODE RES" },
	[TR_READLINK] = { 3, 3, "readlink PATH SIZE RES" },
	[TR_OPEN] = { 3, 3, "open PATH FLAGS RES" },
	[TR_FSTAT] = { 2, 4, "fstat SLOT RES [MODE SIZE]" },
	[TR_READ] = { 3, 4, "read SLOT SIZE RES [HASH]" },
	[TR_PREAD] = { 4, 5, "pread SLOT SIZE OFFSET RES [HASH]" },
	[TR_LSEEK] = { 4, 4, "lseek SLOT OFFSET WHENCE RES" },
	[TR_IOCTL] = { 3, 3, "ioctl SLOT REQ RES" },
	[TR_GETDENTS] = { 4, 4, "getdents SLOT BUFSIZE COUNT HASH" },
	[TR_CLOSE] = { 2, 2, "close SLOT RES" },
	[TR_FAULT] = { 2, 2, "fault PATH PAGES" },
	[TR_EXEC] = { 2, 2, "exec PATH RES" },
};

#define TCGETS_REQ 0x5401

static int parse_fields(char **f, int nf, struct trace_op *op, char *err, size_t errlen)
{
	const char *name = kind_names[op->kind];
	int rf; /* the index of RES */

	switch (op->kind) {
	case TR_STAT:
	case TR_LSTAT:
	case TR_ACCESS:
	case TR_READLINK:
	case TR_OPEN:
	case TR_FAULT:
	case TR_EXEC:
		if (!(op->path = decode_path(f[0], err, errlen)))
			return -1;
		break;
	case TR_FSTAT:
	case TR_READ:
	case TR_PREAD:
	case TR_LSEEK:
	case TR_IOCTL:
	case TR_GETDENTS:
	case TR_CLOSE:
		if (!parse_slot(f[0], &op->slot))
			return fail(err, errlen, "%s: SLOT %s is not an fd number below %d", name, f[0],
				    TRACE_MAX_SLOTS);
		break;
	case TR_KINDS:
		return fail(err, errlen, "no such kind");
	}
	switch (op->kind) {
	case TR_STAT:
	case TR_LSTAT:
	case TR_FSTAT:
		rf = 1;
		break;
	case TR_ACCESS:
		if (!parse_nonneg(f[1], &op->arg) || op->arg > 7)
			return fail(err, errlen, "access: AMODE %s is not 0..7", f[1]);
		rf = 2;
		break;
	case TR_READLINK:
	case TR_READ:
		if (!parse_dec(f[1], &op->size) || op->size > TRACE_MAX_IO)
			return fail(err, errlen, "%s: SIZE %s is not a size up to %u", name, f[1],
				    TRACE_MAX_IO);
		rf = 2;
		break;
	case TR_PREAD:
		if (!parse_dec(f[1], &op->size) || op->size > TRACE_MAX_IO)
			return fail(err, errlen, "pread: SIZE %s is not a size up to %u", f[1],
				    TRACE_MAX_IO);
		if (!parse_dec(f[2], &op->offset))
			return fail(err, errlen, "pread: OFFSET %s is not an offset", f[2]);
		rf = 3;
		break;
	case TR_OPEN:
		if (!parse_nonneg(f[1], &op->arg) || op->arg > INT32_MAX)
			return fail(err, errlen, "open: FLAGS %s is not a number", f[1]);
		if ((op->arg & O_ACCMODE) != O_RDONLY ||
		    (op->arg & (O_CREAT | O_TRUNC | O_APPEND | O_EXCL | TMPFILE_BIT)))
			return fail(err, errlen,
				    "open: FLAGS %s could write or create: the replay only reads",
				    f[1]);
		rf = 2;
		break;
	case TR_LSEEK:
		if (!parse_num(f[1], 10, &op->offset))
			return fail(err, errlen, "lseek: OFFSET %s is not a number", f[1]);
		if (!parse_nonneg(f[2], &op->arg) || op->arg > 4)
			return fail(err, errlen, "lseek: WHENCE %s is not 0..4", f[2]);
		rf = 3;
		break;
	case TR_IOCTL:
		if (!parse_nonneg(f[1], &op->arg) || op->arg != TCGETS_REQ)
			return fail(err, errlen, "ioctl: REQ %s: only TCGETS (0x5401) is replayed",
				    f[1]);
		rf = 2;
		break;
	case TR_GETDENTS:
		if (!parse_dec(f[1], &op->size) || op->size < 64 || op->size > TRACE_MAX_IO)
			return fail(err, errlen, "getdents: BUFSIZE %s is not 64..%u", f[1],
				    TRACE_MAX_IO);
		if (!parse_dec(f[2], &op->arg))
			return fail(err, errlen, "getdents: COUNT %s is not a count", f[2]);
		if (!parse_hash(f[3], op) || !op->has_hash)
			return fail(err, errlen, "getdents: HASH %s is not %d hex digits", f[3],
				    2 * TRACE_HASH_LEN);
		op->res = 0;
		return 0;
	case TR_CLOSE:
	case TR_EXEC:
		rf = 1;
		break;
	case TR_FAULT:
		return parse_pages(f[1], op, err, errlen);
	case TR_KINDS:
	default:
		return fail(err, errlen, "no such kind");
	}
	if (!trace_parse_res(f[rf], &op->res))
		return fail(err, errlen, "%s: RES %s is not a number or -ERRNO", name, f[rf]);
	if (op->kind == TR_OPEN && op->res >= 0) {
		if (op->res >= TRACE_MAX_SLOTS)
			return fail(err, errlen, "open: RES %s is not an fd number below %d", f[rf],
				    TRACE_MAX_SLOTS);
		op->slot = (int)op->res;
	}
	if ((op->kind == TR_READ || op->kind == TR_PREAD || op->kind == TR_READLINK) &&
	    op->res > op->size)
		return fail(err, errlen, "%s: RES %s is more than SIZE", name, f[rf]);
	switch (op->kind) {
	case TR_STAT:
	case TR_LSTAT:
	case TR_FSTAT:
		return parse_stat_tail(f + rf + 1, nf - rf - 1, op, err, errlen);
	case TR_READ:
	case TR_PREAD:
		if (nf > rf + 1) {
			if (!parse_hash(f[rf + 1], op))
				return fail(err, errlen, "%s: HASH %s is not %d hex digits or \"-\"",
					    name, f[rf + 1], 2 * TRACE_HASH_LEN);
			if (op->has_hash && op->res < 0)
				return fail(err, errlen, "%s: HASH given for a failed read", name);
		}
		return 0;
	default:
		return 0;
	}
}

int trace_parse_line(const char *line, unsigned lineno, struct trace_op *op, char *err,
		     size_t errlen)
{
	char buf[TRACE_MAX_LINE], *f[MAX_FIELDS + 1];
	size_t len = strlen(line);
	int nf = 0;

	if (len >= sizeof(buf))
		return fail(err, errlen, "line longer than %d bytes", TRACE_MAX_LINE - 1);
	memcpy(buf, line, len + 1);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)buf[i] < ' ' && buf[i] != '\t')
			return fail(err, errlen, "control character 0x%02x at byte %zu",
				    (unsigned char)buf[i], i);
	char *p = buf;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p == 0 || *p == '#')
		return 0;
	while (*p) {
		if (nf == MAX_FIELDS + 1)
			return fail(err, errlen, "too many fields");
		f[nf++] = p;
		while (*p && *p != ' ' && *p != '\t')
			p++;
		if (*p)
			*p++ = 0;
		while (*p == ' ' || *p == '\t')
			p++;
	}
	int k;
	for (k = 0; k < TR_KINDS; k++)
		if (strcmp(f[0], kind_names[k]) == 0)
			break;
	if (k == TR_KINDS)
		return fail(err, errlen, "unknown call \"%s\"", f[0]);
	if (nf - 1 < shapes[k].min || nf - 1 > shapes[k].max)
		return fail(err, errlen, "%s: %d fields, expected: %s", f[0], nf - 1,
			    shapes[k].usage);
	struct trace_op o = { .kind = (enum trace_kind)k, .line = lineno, .slot = -1,
			      .st_size = -1 };
	if (parse_fields(f + 1, nf - 1, &o, err, errlen) < 0) {
		trace_op_fini(&o);
		return -1;
	}
	*op = o;
	return 1;
}

void trace_op_fini(struct trace_op *op)
{
	free(op->path);
	free(op->pages);
	op->path = NULL;
	op->pages = NULL;
	op->npages = 0;
}

void trace_free(struct trace *t)
{
	for (size_t i = 0; i < t->n; i++)
		trace_op_fini(&t->ops[i]);
	free(t->ops);
	t->ops = NULL;
	t->n = t->cap = 0;
}

static int push(struct trace *t, const struct trace_op *op)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 1024;
		struct trace_op *ops = realloc(t->ops, cap * sizeof(*ops));
		if (!ops)
			return -1;
		t->ops = ops;
		t->cap = cap;
	}
	t->ops[t->n++] = *op;
	return 0;
}

static bool uses_slot(enum trace_kind k)
{
	return k == TR_FSTAT || k == TR_READ || k == TR_PREAD || k == TR_LSEEK ||
	       k == TR_IOCTL || k == TR_GETDENTS || k == TR_CLOSE;
}

/* Every fd line names an open slot; an open fills a free one. */
static int check_slots(const struct trace *t, char *err, size_t errlen)
{
	unsigned *open_at = calloc(TRACE_MAX_SLOTS, sizeof(*open_at)); /* 0: free */
	int rc = 0;

	if (!open_at)
		return fail(err, errlen, "out of memory");
	for (size_t i = 0; i < t->n; i++) {
		const struct trace_op *op = &t->ops[i];
		if (op->kind == TR_OPEN && op->res >= 0) {
			if (open_at[op->slot]) {
				rc = fail(err, errlen,
					  "line %u: open fills fd %d, still open since line %u",
					  op->line, op->slot, open_at[op->slot]);
				break;
			}
			open_at[op->slot] = op->line;
		} else if (uses_slot(op->kind)) {
			if (!open_at[op->slot]) {
				rc = fail(err, errlen, "line %u: %s on fd %d, which no open made",
					  op->line, kind_names[op->kind], op->slot);
				break;
			}
			if (op->kind == TR_CLOSE)
				open_at[op->slot] = 0;
		}
	}
	free(open_at);
	return rc;
}

int trace_load(FILE *f, struct trace *t, char *err, size_t errlen)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	unsigned lineno = 0;
	char msg[512];
	int rc = -1;

	t->ops = NULL;
	t->n = t->cap = 0;
	while ((len = getline(&line, &cap, f)) >= 0) {
		lineno++;
		if (len > 0 && line[len - 1] == '\n')
			line[--len] = 0;
		if ((size_t)len != strlen(line)) {
			fail(err, errlen, "line %u: a NUL byte in the line", lineno);
			goto out;
		}
		if (lineno == 1) {
			char magic[32];
			int ver, end = 0;
			if (sscanf(line, "%31s %d%n", magic, &ver, &end) != 2 || line[end] ||
			    strcmp(magic, TRACE_MAGIC) != 0) {
				fail(err, errlen, "line 1: not a trace (\"%s %d\" expected)",
				     TRACE_MAGIC, TRACE_VERSION);
				goto out;
			}
			if (ver != TRACE_VERSION) {
				fail(err, errlen, "line 1: trace version %d, this program reads %d",
				     ver, TRACE_VERSION);
				goto out;
			}
			continue;
		}
		struct trace_op op;
		int r = trace_parse_line(line, lineno, &op, msg, sizeof(msg));
		if (r < 0) {
			fail(err, errlen, "line %u: %s", lineno, msg);
			goto out;
		}
		if (r == 1 && push(t, &op) < 0) {
			trace_op_fini(&op);
			fail(err, errlen, "line %u: out of memory", lineno);
			goto out;
		}
	}
	if (ferror(f)) {
		fail(err, errlen, "reading the trace: %s", strerror(errno));
		goto out;
	}
	if (lineno == 0) {
		fail(err, errlen, "empty trace (no \"%s %d\" line)", TRACE_MAGIC, TRACE_VERSION);
		goto out;
	}
	rc = check_slots(t, err, errlen);
out:
	free(line);
	if (rc < 0)
		trace_free(t);
	return rc;
}
