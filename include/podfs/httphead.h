/* httphead.h: the head of an HTTP/1.x request, as the metrics endpoints
 * (podfsd --metrics, podfs -o metrics=) read it.
 *
 * A decoder: pure, no allocation, no sockets. It returns views into the
 * caller's buffer, valid while that buffer is. It accepts what curl,
 * wget, Prometheus and browsers send (CRLF or bare LF line ends, any
 * header fields) and refuses what is not an HTTP/1.x request head:
 * control bytes, a bad request line, folded or nameless header lines,
 * more than PFS_HTTP_FIELDS_MAX fields. The endpoints answer only
 * GET (and HEAD) of one path; pfs_http_route says what to answer.
 */
#ifndef PODFS_HTTPHEAD_H
#define PODFS_HTTPHEAD_H

#include <stddef.h>
#include <stdint.h>

#define PFS_HTTP_HEAD_MAX 8192   /* bytes of a head the endpoints read */
#define PFS_HTTP_METHOD_MAX 16   /* bytes of a method */
#define PFS_HTTP_FIELDS_MAX 64   /* header fields of a head */

struct pfs_http_req {
	const char *method;  /* method_len bytes: a token ("GET") */
	size_t method_len;
	const char *target;  /* target_len bytes: the request target ("/metrics?x") */
	size_t target_len;
	unsigned minor;      /* HTTP/1.minor */
	unsigned fields;     /* header fields */
	size_t head_len;     /* bytes of the head, its empty last line included */
};

/* Parses the head of a request at the start of buf[0..len), a head being
 * at most max bytes (at most PFS_HTTP_HEAD_MAX makes sense).
 * Returns:
 *   > 0        the head is whole: its length (== out->head_len <= len),
 *              *out filled; bytes after it (a body) are not looked at;
 *   0          no error so far, but the head is not whole yet: read more
 *              (only while len < max);
 *   -EBADMSG   not an HTTP/1.x request head (answer 400);
 *   -E2BIG     no end of the head within max bytes (answer 400 or 431).
 * *out is written only when the result is > 0. Any thread. */
int pfs_http_parse(const uint8_t *buf, size_t len, size_t max, struct pfs_http_req *out);

/* The status an endpoint that serves only path (e.g. "/metrics") gives
 * the request r: 200 for GET or HEAD of path (a query string is
 * ignored), 405 for another method on path, 404 for another target. */
int pfs_http_route(const struct pfs_http_req *r, const char *path);

/* Whether r's method is HEAD (answer without a body). */
int pfs_http_is_head(const struct pfs_http_req *r);

/* The reason phrase of status ("OK", "Not Found"...). */
const char *pfs_http_reason(int status);

/* Writes the head of a response into buf[cap]: status line, Content-Type
 * (content_type, or text/plain when NULL), Content-Length, "Connection:
 * close", and for 405 "Allow: GET, HEAD". Returns its length, or -1 if cap
 * is too small. */
int pfs_http_reply_head(char *buf, size_t cap, int status, const char *content_type,
			size_t body_len);

#endif /* PODFS_HTTPHEAD_H */
