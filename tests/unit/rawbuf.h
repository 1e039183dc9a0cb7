/* rawbuf.h: a payload writer for codec tests that obeys no limit of
 * wire.h, to build the bad input a peer could send. Header-only, for the
 * unit test programs (each one process).
 */
#ifndef PODFS_TEST_RAWBUF_H
#define PODFS_TEST_RAWBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A raw payload builder that writes whatever it is told, limits or not. */
struct raw {
	uint8_t *b;
	size_t len;
	size_t cap;
};
static inline void raw_le(struct raw *r, uint64_t v, size_t n)
{
	for (size_t i = 0; i < n && r->len < r->cap; i++)
		r->b[r->len++] = i < 8 ? (uint8_t)(v >> (8 * i)) : 0; /* wider fields are zero-extended */
}
static inline void raw_mem(struct raw *r, const void *p, size_t n)
{
	if (n > r->cap - r->len)
		n = r->cap - r->len;
	memcpy(r->b + r->len, p, n);
	r->len += n;
}
static inline void raw_fill(struct raw *r, int c, size_t n)
{
	if (n > r->cap - r->len)
		n = r->cap - r->len;
	memset(r->b + r->len, c, n);
	r->len += n;
}
/* creds with no groups, and a one-byte handle. */
static inline void raw_creds_fh(struct raw *r)
{
	raw_le(r, 1000, 4);
	raw_le(r, 1000, 4);
	raw_le(r, 0, 2);
	raw_le(r, 1, 1);
	raw_le(r, 0x42, 1);
}

/* A string case of a table: s, its length, and whether it is valid. */
struct str_case {
	const char *s;
	size_t len; /* 0 with a non-empty s means strlen(s) */
	bool ok;
};

static inline size_t case_len(const struct str_case *c)
{
	return c->len ? c->len : strlen(c->s);
}

/* Expands a case: "\x01" followed by a count means that many 'a's. */
static inline size_t case_expand(const struct str_case *c, char *out, size_t cap)
{
	if (c->s[0] == '\x01') {
		size_t n = c->len;
		memset(out, 'a', n < cap ? n : cap);
		return n;
	}
	size_t n = case_len(c);
	memcpy(out, c->s, n);
	return n;
}
#define LONG_A(n) "\x01", (n)

#endif /* PODFS_TEST_RAWBUF_H */
