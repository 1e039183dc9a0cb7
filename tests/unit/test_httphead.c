/* test_httphead.c: unit tests of the HTTP request-head parser
 * (lib/httphead.c): heads as clients send them, every prefix of a whole
 * head asking for more, table-driven bad heads, the size bound, routing,
 * and the response head. Also the numeric addresses of --metrics
 * (lib/netaddr.c). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "check.h"
#include "podfs/httphead.h"
#include "podfs/netaddr.h"

static int parse(const char *s, struct pfs_http_req *r)
{
	return pfs_http_parse((const uint8_t *)s, strlen(s), PFS_HTTP_HEAD_MAX, r);
}

static void test_good(void)
{
	static const char *heads[] = {
		("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:7050\r\nUser-Agent: Prometheus/2.45\r\n"
		 "Accept: text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n\r\n"),
		"GET /metrics HTTP/1.0\n\n",
		"GET /metrics HTTP/1.0\r\n\r\n",
		"HEAD /metrics?x=1 HTTP/1.1\r\nX-Empty:\r\n\r\n",
	};
	struct pfs_http_req r;

	for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
		const char *h = heads[i];
		size_t n = strlen(h);
		CHECK_EQ(parse(h, &r), (long long)n);
		CHECK_EQ(r.head_len, n);
		/* Every prefix asks for more. */
		for (size_t k = 0; k < n; k++)
			CHECK_EQ(pfs_http_parse((const uint8_t *)h, k, PFS_HTTP_HEAD_MAX, &r), 0);
	}
	CHECK_EQ(parse(heads[0], &r), (long long)strlen(heads[0]));
	CHECK(r.method_len == 3 && memcmp(r.method, "GET", 3) == 0);
	CHECK(r.target_len == 8 && memcmp(r.target, "/metrics", 8) == 0);
	CHECK_EQ(r.minor, 1);
	CHECK_EQ(r.fields, 3);
	CHECK_EQ(pfs_http_route(&r, "/metrics"), 200);
	CHECK(!pfs_http_is_head(&r));
	/* A body after the head is not looked at. */
	const char *post = "POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc";
	CHECK_EQ(parse(post, &r), (long long)strlen(post) - 3);
	CHECK_EQ(pfs_http_route(&r, "/metrics"), 405);
	CHECK_EQ(parse("HEAD /metrics?x=1 HTTP/1.1\r\n\r\n", &r), 30);
	CHECK_EQ(pfs_http_route(&r, "/metrics"), 200);
	CHECK(pfs_http_is_head(&r));
	CHECK_EQ(parse("GET /metricsx HTTP/1.1\r\n\r\n", &r), 26);
	CHECK_EQ(pfs_http_route(&r, "/metrics"), 404);
	CHECK_EQ(parse("GET / HTTP/1.1\r\n\r\n", &r), 18);
	CHECK_EQ(pfs_http_route(&r, "/metrics"), 404);
}

static void test_bad(void)
{
	static const char *bad[] = {
		"\x16\x03\x01\x00",                      /* a TLS hello: refused at once */
		"GET\r\n\r\n",                           /* no target */
		"GET /metrics\r\n\r\n",                  /* HTTP/0.9 */
		"GET /metrics HTTP/2.0\r\n\r\n",
		"GET /metrics HTTP/1.1 \r\n\r\n",
		"GET  /metrics HTTP/1.1\r\n\r\n",
		"GET /met\x01rics HTTP/1.1\r\n\r\n",
		"GET /metrics HTTP/1.1\r\n folded: x\r\n\r\n",
		"GET /metrics HTTP/1.1\r\nNoColon\r\n\r\n",
		"GET /metrics HTTP/1.1\r\n: novalue\r\n\r\n",
		"GET /metrics HTTP/1.1\r\nA: b\x01\r\n\r\n",
		"GET /metrics HTTP/1.1\rX\r\n\r\n",       /* CR without LF */
		"G(T /metrics HTTP/1.1\r\n\r\n",
		"AVERYVERYLONGMETHODNAME /metrics HTTP/1.1\r\n\r\n",
		"AVERYVERYLONGMETHODNAME",               /* too long before its end */
	};
	struct pfs_http_req r;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_EQ(parse(bad[i], &r), -EBADMSG);
	/* Too many fields. */
	char many[PFS_HTTP_HEAD_MAX];
	size_t n = (size_t)snprintf(many, sizeof(many), "GET /metrics HTTP/1.1\r\n");
	for (int i = 0; i <= PFS_HTTP_FIELDS_MAX; i++)
		n += (size_t)snprintf(many + n, sizeof(many) - n, "X-%d: y\r\n", i);
	n += (size_t)snprintf(many + n, sizeof(many) - n, "\r\n");
	CHECK_EQ(pfs_http_parse((const uint8_t *)many, n, sizeof(many), &r), -EBADMSG);
	/* No end within max. */
	char big[PFS_HTTP_HEAD_MAX + 10];
	memset(big, 'a', sizeof(big));
	memcpy(big, "GET /metrics HTTP/1.1\r\nX: ", 26);
	CHECK_EQ(pfs_http_parse((const uint8_t *)big, sizeof(big), PFS_HTTP_HEAD_MAX, &r), -E2BIG);
	CHECK_EQ(pfs_http_parse((const uint8_t *)big, 100, PFS_HTTP_HEAD_MAX, &r), 0);
	CHECK_EQ(pfs_http_parse((const uint8_t *)big, 100, 100, &r), -E2BIG);
}

static void test_reply(void)
{
	char b[256];
	int n = pfs_http_reply_head(b, sizeof(b), 200, "text/plain; version=0.0.4", 12);

	CHECK(n > 0);
	CHECK(strncmp(b, "HTTP/1.1 200 OK\r\n", 17) == 0);
	CHECK(strstr(b, "Content-Type: text/plain; version=0.0.4\r\n") != NULL);
	CHECK(strstr(b, "Content-Length: 12\r\n") != NULL);
	CHECK(strstr(b, "\r\n\r\n") == b + n - 4);
	n = pfs_http_reply_head(b, sizeof(b), 405, NULL, 0);
	CHECK(strstr(b, "Allow: GET, HEAD\r\n") != NULL);
	CHECK_EQ(pfs_http_reply_head(b, 20, 200, NULL, 0), -1);
}

static void test_addr(void)
{
	struct sockaddr_storage ss;
	char name[64];

	CHECK_EQ(pfs_addr_parse("127.0.0.1:7050", -1, &ss), 0);
	pfs_addr_name(&ss, name, sizeof(name));
	CHECK(strcmp(name, "127.0.0.1:7050") == 0);
	CHECK_EQ(pfs_addr_parse("10.1.2.3", 7050, &ss), 0);
	pfs_addr_name(&ss, name, sizeof(name));
	CHECK(strcmp(name, "10.1.2.3:7050") == 0);
	CHECK_EQ(pfs_addr_parse("[::1]:9", -1, &ss), 0);
	pfs_addr_name(&ss, name, sizeof(name));
	CHECK(strcmp(name, "[::1]:9") == 0);
	CHECK_EQ(pfs_addr_parse("[fd00::2]", 5, &ss), 0);
	pfs_addr_host(&ss, name, sizeof(name));
	CHECK(strcmp(name, "fd00::2") == 0);
	CHECK_EQ(pfs_addr_parse("[::ffff:10.0.0.2]:1", -1, &ss), 0);
	pfs_addr_host(&ss, name, sizeof(name));
	CHECK(strcmp(name, "10.0.0.2") == 0);
	static const char *bad[] = { "", ":80", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536",
				     "127.0.0.1:-1", "127.0.0.1:+1", "localhost:80", "::1:80",
				     "[::1", "[::1]x", "[]:80", "1.2.3:80", "127.0.0.1:80x" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_EQ(pfs_addr_parse(bad[i], -1, &ss), -EINVAL);
	CHECK_EQ(pfs_addr_parse("nohost", 7050, &ss), -EINVAL);
	CHECK_EQ(pfs_addr_parse("1.2.3.4:", 7050, &ss), -EINVAL);
}

int main(void)
{
	test_good();
	test_bad();
	test_reply();
	test_addr();
	return check_done("test_httphead");
}
