/* trace.h: the file-access traces that podfs-replay replays (trace.c).
 *
 * A trace is what one program did to a directory tree, captured once with
 * strace (tests/tools/fstrace.py writes them) and replayed on a podfs
 * mount by many hosts at once, each checking that every call gives the
 * result the capture saw. It is text, one call per line:
 *
 *   podfs-trace 1                     first line: the format and its version
 *   # anything                        a comment (also blank lines)
 *   stat PATH RES [MODE SIZE]         fstatat(root, PATH, 0)
 *   lstat PATH RES [MODE SIZE]        fstatat(root, PATH, AT_SYMLINK_NOFOLLOW)
 *   access PATH AMODE RES             faccessat(root, PATH, AMODE, 0)
 *   readlink PATH SIZE RES            readlinkat(root, PATH, buf, SIZE)
 *   open PATH FLAGS RES               openat(root, PATH, FLAGS); RES is the fd the
 *                                     capture got, which names the file in later
 *                                     lines (its slot), or -ERRNO
 *   fstat SLOT RES [MODE SIZE]        fstat of the slot's fd
 *   read SLOT SIZE RES [HASH]         read(fd, buf, SIZE)
 *   pread SLOT SIZE OFFSET RES [HASH] pread(fd, buf, SIZE, OFFSET)
 *   lseek SLOT OFFSET WHENCE RES      lseek(fd, OFFSET, WHENCE)
 *   ioctl SLOT REQ RES                ioctl(fd, REQ, &termios): TCGETS (0x5401) only
 *   getdents SLOT BUFSIZE COUNT HASH  getdents64 with BUFSIZE until the end of the
 *                                     directory: COUNT names (. and .. left out)
 *   close SLOT RES                    close(fd)
 *   fault PATH PAGES                  the pages of PATH a mapping of it touched
 *                                     (4096-byte page numbers, "a-b,c,..." or "-")
 *   exec PATH RES                     execve's own reads: open, the first 256 bytes
 *
 * RES is a number (bytes, an offset, 0) or -ERRNO by name (-ENOENT) or
 * number (-2). MODE is st_mode in octal, SIZE st_size or "-" (not
 * checked: a directory's size is the filesystem's own). HASH is the
 * first 8 bytes of the SHA-256 of the data read, in hex, or "-"; a
 * listing's HASH is that of its sorted names, each followed by "\n".
 * PATH is relative to the tree's root ("." is the root), bytes below
 * '!', above '~' and '%' percent-encoded; it never starts with '/' and
 * never climbs above the root with "..". FLAGS, AMODE and REQ are
 * numbers (0x.. hex, 0.. octal or decimal). The replay only reads: an
 * open FLAGS that could write or create is refused.
 *
 * Pure: no file or syscall of the tree is touched here. Not thread-safe
 * per struct trace.
 */
#ifndef PODFS_TOOLS_TRACE_H
#define PODFS_TOOLS_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TRACE_MAGIC "podfs-trace"
#define TRACE_VERSION 1
#define TRACE_MAX_SLOTS 4096  /* fd numbers a trace may use */
#define TRACE_MAX_LINE 65536  /* bytes of one line, newline included */
#define TRACE_MAX_IO (64u << 20) /* SIZE of one read, BUFSIZE of getdents */
#define TRACE_HASH_LEN 8

enum trace_kind {
	TR_STAT, TR_LSTAT, TR_ACCESS, TR_READLINK, TR_OPEN, TR_FSTAT, TR_READ, TR_PREAD,
	TR_LSEEK, TR_IOCTL, TR_GETDENTS, TR_CLOSE, TR_FAULT, TR_EXEC,
	TR_KINDS
};

/* A range of pages, first..last inclusive. */
struct trace_pages {
	uint64_t first, last;
};

struct trace_op {
	enum trace_kind kind;
	unsigned line;        /* its line in the trace, from 1 */
	int slot;             /* fd lines: the slot; open: the slot it fills, or -1 */
	char *path;           /* path lines: decoded, NUL-terminated, malloc'd */
	int64_t size;         /* read, pread, readlink: SIZE; getdents: BUFSIZE */
	int64_t offset;       /* pread, lseek: OFFSET */
	int64_t arg;          /* open: FLAGS; access: AMODE; lseek: WHENCE; ioctl: REQ;
			       * getdents: COUNT */
	int64_t res;          /* the capture's result: >= 0, or -errno */
	bool has_stat;        /* stat lines: MODE (and maybe SIZE) given */
	uint32_t mode;
	int64_t st_size;      /* -1: not checked */
	bool has_hash;
	uint8_t hash[TRACE_HASH_LEN];
	struct trace_pages *pages; /* fault: malloc'd, npages ranges */
	size_t npages;
};

struct trace {
	struct trace_op *ops;
	size_t n, cap;
};

/* The name of a kind as the trace writes it ("stat"...). */
const char *trace_kind_name(enum trace_kind k);

/* Parses one line (without its newline; a trailing '\r' is an error)
 * into *op, line number lineno. Returns 1 for an op (its path and pages
 * are malloc'd: trace_op_fini frees them), 0 for a blank or comment line
 * (*op untouched), -1 for a malformed line, with a message in
 * err[errlen] that says which field is wrong and why (never partial
 * state in *op). Does not check the slots' life (trace_load does). */
int trace_parse_line(const char *line, unsigned lineno, struct trace_op *op, char *err,
		     size_t errlen);

/* Frees what trace_parse_line allocated in *op. */
void trace_op_fini(struct trace_op *op);

/* Reads a whole trace from f into *t (empty on entry): the header line,
 * then every line, then checks that every fd line names a slot that an
 * open filled and no close emptied, and that an open does not fill a
 * slot in use. Returns 0, or -1 with err[errlen] naming the line ("line
 * 12: ..."); then *t is empty. -ENOMEM is reported as -1 too. */
int trace_load(FILE *f, struct trace *t, char *err, size_t errlen);

void trace_free(struct trace *t);

/* Parses a result word ("12", "-ENOENT", "-2") into *res; false if it is
 * none. */
bool trace_parse_res(const char *s, int64_t *res);

/* "-ENOENT" for -ENOENT (a known name) or "-N", into buf[len]. */
const char *trace_res_str(int64_t res, char *buf, size_t len);

#endif /* PODFS_TOOLS_TRACE_H */
