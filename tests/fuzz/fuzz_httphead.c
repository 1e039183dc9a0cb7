/* fuzz_httphead.c: the HTTP request-head parser of the metrics endpoints
 * (lib/httphead.c) on arbitrary bytes.
 *
 * Properties: it never reads past len nor crashes; it returns > 0, 0,
 * -EBADMSG or -E2BIG; a whole head (> 0) is at most len and max bytes,
 * ends with an empty line, and its method and target are views inside it
 * of token and visible characters; parsing just that head gives the same
 * answer, and every shorter prefix of it is "need more" or an error
 * that the whole head would not give (it never accepts a prefix); 0
 * happens only below max; routing a parsed head gives 200, 404 or 405.
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "podfs/httphead.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pfs_http_req r, r2;
	size_t max = PFS_HTTP_HEAD_MAX;
	int ret = pfs_http_parse(data, size, max, &r);

	FUZZ_ASSERT(ret > 0 || ret == 0 || ret == -EBADMSG || ret == -E2BIG);
	if (ret == 0)
		FUZZ_ASSERT(size < max);
	if (ret == -E2BIG)
		FUZZ_ASSERT(size >= max);
	if (ret <= 0)
		return 0;
	FUZZ_ASSERT((size_t)ret <= size && (size_t)ret <= max && r.head_len == (size_t)ret);
	FUZZ_ASSERT(data[ret - 1] == '\n');
	FUZZ_ASSERT(ret >= 2 && (data[ret - 2] == '\n' ||
				 (data[ret - 2] == '\r' && ret >= 3 && data[ret - 3] == '\n')));
	FUZZ_ASSERT((const uint8_t *)r.method == data && r.method_len >= 1 &&
		    r.method_len <= PFS_HTTP_METHOD_MAX);
	FUZZ_ASSERT((const uint8_t *)r.target > data &&
		    (const uint8_t *)r.target + r.target_len < data + ret && r.target_len >= 1);
	for (size_t i = 0; i < r.target_len; i++)
		FUZZ_ASSERT(r.target[i] > 0x20 && r.target[i] < 0x7f);
	FUZZ_ASSERT(r.minor <= 9 && r.fields <= PFS_HTTP_FIELDS_MAX);
	FUZZ_ASSERT(pfs_http_parse(data, (size_t)ret, max, &r2) == ret);
	FUZZ_ASSERT(r2.method_len == r.method_len && r2.target_len == r.target_len);
	/* A few prefixes: none is taken for a whole head. */
	for (size_t cut = 0; cut < (size_t)ret; cut += 1 + (size_t)ret / 16)
		FUZZ_ASSERT(pfs_http_parse(data, cut, max, &r2) == 0);
	int st = pfs_http_route(&r, "/metrics");
	FUZZ_ASSERT(st == 200 || st == 404 || st == 405);
	return 0;
}
