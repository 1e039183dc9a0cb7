/* httphead.c: the head of an HTTP/1.x request (see podfs/httphead.h). */
#include "podfs/httphead.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* RFC 9110 tchar: the characters of a method or a field name. */
static bool tchar(uint8_t ch)
{
	if ((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'))
		return true;
	return ch && strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}

/* Visible ASCII: a request target's characters. */
static bool vchar(uint8_t ch)
{
	return ch > 0x20 && ch < 0x7f;
}

/* A field value's characters: visible, space, tab and obs-text. */
static bool fchar(uint8_t ch)
{
	return ch == ' ' || ch == '\t' || (ch > 0x20 && ch != 0x7f);
}

/* The end of the line starting at p (within buf[0..len)): *next is the
 * start of the next line and the line's content ends at the returned
 * index (before CR LF or LF). Returns -1 if no LF yet, -2 for a CR not
 * followed by LF. */
static long line_end(const uint8_t *buf, size_t len, size_t p, size_t *next)
{
	for (size_t i = p; i < len; i++) {
		if (buf[i] == '\n') {
			*next = i + 1;
			return (long)i;
		}
		if (buf[i] == '\r') {
			if (i + 1 == len)
				return -1;
			if (buf[i + 1] != '\n')
				return -2;
			*next = i + 2;
			return (long)i;
		}
	}
	return -1;
}

/* Parses the request line buf[0..end): METHOD SP TARGET SP HTTP/1.D. */
static int request_line(const uint8_t *buf, size_t end, struct pfs_http_req *r)
{
	size_t i = 0;

	while (i < end && tchar(buf[i]))
		i++;
	if (i == 0 || i > PFS_HTTP_METHOD_MAX || i == end || buf[i] != ' ')
		return -EBADMSG;
	r->method = (const char *)buf;
	r->method_len = i;
	size_t t = ++i;
	while (i < end && vchar(buf[i]))
		i++;
	if (i == t || i == end || buf[i] != ' ')
		return -EBADMSG;
	r->target = (const char *)buf + t;
	r->target_len = i - t;
	i++;
	if (end - i != 8 || memcmp(buf + i, "HTTP/1.", 7) != 0 || buf[i + 7] < '0' ||
	    buf[i + 7] > '9')
		return -EBADMSG;
	r->minor = (unsigned)(buf[i + 7] - '0');
	return 0;
}

/* A header field line buf[p..end): NAME ":" VALUE. */
static bool field_line(const uint8_t *buf, size_t p, size_t end)
{
	size_t i = p;

	while (i < end && tchar(buf[i]))
		i++;
	if (i == p || i == end || buf[i] != ':')
		return false;
	for (i++; i < end; i++)
		if (!fchar(buf[i]))
			return false;
	return true;
}

int pfs_http_parse(const uint8_t *buf, size_t len, size_t max, struct pfs_http_req *out)
{
	struct pfs_http_req r = { 0 };
	size_t p = 0, next = 0;
	long end;

	if (len > max)
		len = max;
	/* The request line: refuse a bad one as soon as it is whole, and
	 * a bad start before that (a client that sends a TLS hello or
	 * garbage gets its 400 at once). */
	end = line_end(buf, len, 0, &next);
	if (end == -2)
		return -EBADMSG;
	if (end == -1) {
		for (size_t i = 0; i < len; i++) {
			if (buf[i] == ' ')
				break;
			if (!tchar(buf[i]) || i >= PFS_HTTP_METHOD_MAX)
				return -EBADMSG;
		}
		return len >= max ? -E2BIG : 0;
	}
	if (request_line(buf, (size_t)end, &r) < 0)
		return -EBADMSG;
	for (p = next;;) {
		end = line_end(buf, len, p, &next);
		if (end == -2)
			return -EBADMSG;
		if (end == -1)
			break;
		if ((size_t)end == p) { /* the empty line: the head is whole */
			r.head_len = next;
			*out = r;
			return (int)next;
		}
		/* obs-fold (a line starting with a space) is refused, as
		 * RFC 9112 allows; so is a line that is not a field. */
		if (!field_line(buf, p, (size_t)end) || ++r.fields > PFS_HTTP_FIELDS_MAX)
			return -EBADMSG;
		p = next;
	}
	/* The line being read so far must be able to become a field. */
	for (size_t i = p; i < len; i++) {
		if (buf[i] == '\r')
			continue;
		if (!fchar(buf[i]))
			return -EBADMSG;
	}
	return len >= max ? -E2BIG : 0;
}

static bool method_is(const struct pfs_http_req *r, const char *m)
{
	return r->method_len == strlen(m) && memcmp(r->method, m, r->method_len) == 0;
}

int pfs_http_is_head(const struct pfs_http_req *r)
{
	return method_is(r, "HEAD");
}

int pfs_http_route(const struct pfs_http_req *r, const char *path)
{
	size_t n = strlen(path), tl = r->target_len;
	const char *q = memchr(r->target, '?', tl);

	if (q)
		tl = (size_t)(q - r->target);
	if (tl != n || memcmp(r->target, path, n) != 0)
		return 404;
	if (!method_is(r, "GET") && !method_is(r, "HEAD"))
		return 405;
	return 200;
}

const char *pfs_http_reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 503: return "Service Unavailable";
	default: return "Error";
	}
}

int pfs_http_reply_head(char *buf, size_t cap, int status, const char *content_type,
			size_t body_len)
{
	int n = snprintf(buf, cap,
			 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			 "%sConnection: close\r\n\r\n",
			 status, pfs_http_reason(status),
			 content_type ? content_type : "text/plain; charset=utf-8", body_len,
			 status == 405 ? "Allow: GET, HEAD\r\n" : "");
	return n < 0 || (size_t)n >= cap ? -1 : n;
}
