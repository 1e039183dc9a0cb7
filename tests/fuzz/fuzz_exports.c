/* fuzz_exports.c: the exports file parser (daemon/exports.c) on arbitrary
 * text, and the matcher on the rules it accepts.
 *
 * Properties: parsing never crashes and returns 0 or -EINVAL; an error
 * names the file and a line that exists ("exports:N: ..."), and leaves
 * no rules; accepted rules are at most EXPORTS_MAX_RULES, each with a
 * prefix within its family's bits, no host bits set, no two for the same
 * network; the rule that matches a rule's own network address is that
 * rule or a longer one; printing the rules (network and options) and
 * parsing that again gives the same rules.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "exports_i.h"
#include "fuzz.h"

static void check_rules(const struct exports *e)
{
	FUZZ_ASSERT(e->n <= EXPORTS_MAX_RULES);
	for (size_t i = 0; i < e->n; i++) {
		const struct export_rule *r = &e->v[i];
		unsigned max = r->family == AF_INET ? 32 : r->family == AF_INET6 ? 128 : 0;
		FUZZ_ASSERT(r->family == 0 || r->family == AF_INET || r->family == AF_INET6);
		FUZZ_ASSERT(r->prefix <= max);
		FUZZ_ASSERT(r->o.anonuid != 0xffffffffu && r->o.anongid != 0xffffffffu);
		FUZZ_ASSERT(r->o.squash <= EXPORT_SQUASH_ALL);
		for (unsigned bit = r->prefix; bit < 128; bit++)
			FUZZ_ASSERT(!(r->addr[bit / 8] & (0x80u >> (bit % 8))));
		for (size_t j = 0; j < i; j++)
			FUZZ_ASSERT(!(e->v[j].family == r->family && e->v[j].prefix == r->prefix &&
				      memcmp(e->v[j].addr, r->addr, 16) == 0));
	}
}

static void check_match(const struct exports *e)
{
	for (size_t i = 0; i < e->n && i < 64; i++) {
		const struct export_rule *r = &e->v[i], *m;
		struct sockaddr_storage ss;
		memset(&ss, 0, sizeof(ss));
		if (r->family == AF_INET) {
			struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
			s4->sin_family = AF_INET;
			memcpy(&s4->sin_addr, r->addr, 4);
		} else {
			struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
			s6->sin6_family = AF_INET6;
			memcpy(&s6->sin6_addr, r->addr, 16);
		}
		m = exports_match(e, (const struct sockaddr *)&ss);
		FUZZ_ASSERT(m != NULL);
		if (r->family)
			FUZZ_ASSERT(m->family && m->prefix >= r->prefix);
	}
}

/* Prints e as an exports file and parses it again: the same rules. */
static void check_roundtrip(const struct exports *e)
{
	size_t cap = e->n * 160 + 1, len = 0;
	char *text = malloc(cap), err[512];
	struct exports back;

	FUZZ_ASSERT(text != NULL);
	for (size_t i = 0; i < e->n; i++) {
		char name[64], opts[96];
		export_rule_name(&e->v[i], name, sizeof(name));
		export_opts_name(&e->v[i].o, opts, sizeof(opts));
		len += (size_t)snprintf(text + len, cap - len, "%s %s\n", name, opts);
	}
	FUZZ_ASSERT(exports_parse(text, len, "back", &back, err, sizeof(err)) == 0);
	FUZZ_ASSERT(back.n == e->n);
	for (size_t i = 0; i < e->n; i++) {
		FUZZ_ASSERT(back.v[i].family == e->v[i].family);
		FUZZ_ASSERT(back.v[i].prefix == e->v[i].prefix);
		FUZZ_ASSERT(memcmp(back.v[i].addr, e->v[i].addr, 16) == 0);
		FUZZ_ASSERT(back.v[i].o.ro == e->v[i].o.ro);
		FUZZ_ASSERT(back.v[i].o.squash == e->v[i].o.squash);
		FUZZ_ASSERT(back.v[i].o.anonuid == e->v[i].o.anonuid);
		FUZZ_ASSERT(back.v[i].o.anongid == e->v[i].o.anongid);
	}
	exports_free(&back);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct exports e;
	char err[512];
	size_t lines = 1;
	int rc;

	if (size > EXPORTS_MAX_FILE)
		return 0;
	for (size_t i = 0; i < size; i++)
		lines += data[i] == '\n';
	err[0] = '\0';
	rc = exports_parse((const char *)data, size, "exports", &e, err, sizeof(err));
	FUZZ_ASSERT(rc == 0 || rc == -EINVAL);
	if (rc < 0) {
		char *end;
		FUZZ_ASSERT(strncmp(err, "exports:", 8) == 0);
		unsigned long line = strtoul(err + 8, &end, 10);
		FUZZ_ASSERT(line >= 1 && line <= lines && *end == ':');
		FUZZ_ASSERT(e.v == NULL && e.n == 0);
		return 0;
	}
	check_rules(&e);
	check_match(&e);
	check_roundtrip(&e);
	exports_free(&e);
	return 0;
}
