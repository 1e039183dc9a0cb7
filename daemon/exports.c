/* exports.c: the export rules: parsing the exports file and the command
 * line's networks, matching a peer, squashing credentials (see
 * exports_i.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "podfs/xalloc.h"
#include "exports_i.h"

void export_opts_default(struct export_opts *o)
{
	o->ro = false;
	o->squash = EXPORT_SQUASH_ROOT;
	o->anonuid = EXPORTS_ANON_ID;
	o->anongid = EXPORTS_ANON_ID;
}

int export_squash_parse(const char *s, enum export_squash *out)
{
	if (strcmp(s, "root") == 0)
		*out = EXPORT_SQUASH_ROOT;
	else if (strcmp(s, "none") == 0)
		*out = EXPORT_SQUASH_NONE;
	else if (strcmp(s, "all") == 0)
		*out = EXPORT_SQUASH_ALL;
	else
		return -EINVAL;
	return 0;
}

void exports_free(struct exports *e)
{
	free(e->v);
	e->v = NULL;
	e->n = 0;
}

/* --- parsing --- */

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* Parses a network: "*", an address (a host: /32 or /128) or
 * address/prefix with no host bits set, into r's address, prefix and
 * family. tok is NUL-terminated. Returns 0 or -EINVAL with the reason in
 * why. */
static int parse_net(const char *tok, struct export_rule *r, char *why, size_t whylen)
{
	char a[INET6_ADDRSTRLEN + 8];
	const char *slash = strchr(tok, '/');
	size_t alen = slash ? (size_t)(slash - tok) : strlen(tok);
	unsigned max, prefix;

	memset(r->addr, 0, sizeof(r->addr));
	if (strcmp(tok, "*") == 0) {
		r->family = 0;
		r->prefix = 0;
		return 0;
	}
	if (alen == 0 || alen >= sizeof(a)) {
		snprintf(why, whylen, "bad address '%s'", tok);
		return -EINVAL;
	}
	memcpy(a, tok, alen);
	a[alen] = '\0';
	if (inet_pton(AF_INET, a, r->addr) == 1) {
		r->family = AF_INET;
		max = 32;
	} else if (inet_pton(AF_INET6, a, r->addr) == 1) {
		r->family = AF_INET6;
		max = 128;
	} else {
		snprintf(why, whylen, "bad address '%s' (want IPv4 or IPv6, CIDR or '*')", a);
		return -EINVAL;
	}
	prefix = max;
	if (slash) {
		const char *p = slash + 1;
		if (!*p || strlen(p) > 3) {
			snprintf(why, whylen, "bad prefix length in '%s'", tok);
			return -EINVAL;
		}
		prefix = 0;
		for (; *p; p++) {
			if (*p < '0' || *p > '9') {
				snprintf(why, whylen, "bad prefix length in '%s'", tok);
				return -EINVAL;
			}
			prefix = prefix * 10 + (unsigned)(*p - '0');
		}
		if (prefix > max) {
			snprintf(why, whylen, "prefix length over %u in '%s'", max, tok);
			return -EINVAL;
		}
	}
	for (unsigned bit = prefix; bit < max; bit++) {
		if (r->addr[bit / 8] & (0x80u >> (bit % 8))) {
			snprintf(why, whylen, "'%s' has bits set past its /%u prefix", tok, prefix);
			return -EINVAL;
		}
	}
	r->prefix = (uint8_t)prefix;
	/* ::ffff:a.b.c.d/N (N >= 96) is the IPv4 network a.b.c.d/(N - 96). */
	if (r->family == AF_INET6 && prefix >= 96 &&
	    IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)r->addr)) {
		memmove(r->addr, r->addr + 12, 4);
		memset(r->addr + 4, 0, 12);
		r->family = AF_INET;
		r->prefix = (uint8_t)(prefix - 96);
	}
	return 0;
}

static int parse_id(const char *v, uint32_t *out)
{
	unsigned long long n = 0;

	if (!*v || strlen(v) > 10)
		return -EINVAL;
	for (; *v; v++) {
		if (*v < '0' || *v > '9')
			return -EINVAL;
		n = n * 10 + (unsigned)(*v - '0');
	}
	/* (uint32_t)-1 means "unchanged" to setfsuid. */
	if (n >= 0xffffffffull)
		return -EINVAL;
	*out = (uint32_t)n;
	return 0;
}

/* Applies the comma-separated options of tok to o. seen: the kinds set
 * so far (1: ro/rw, 2: squash, 4: anonuid, 8: anongid), so that two
 * options that contradict are an error. */
static int parse_opts(char *tok, struct export_opts *o, unsigned *seen, char *why,
		      size_t whylen)
{
	for (char *save = NULL, *opt = strtok_r(tok, ",", &save); opt;
	     opt = strtok_r(NULL, ",", &save)) {
		unsigned kind;
		if (strcmp(opt, "ro") == 0 || strcmp(opt, "rw") == 0) {
			kind = 1;
			o->ro = opt[1] == 'o';
		} else if (strcmp(opt, "root_squash") == 0) {
			kind = 2;
			o->squash = EXPORT_SQUASH_ROOT;
		} else if (strcmp(opt, "no_root_squash") == 0) {
			kind = 2;
			o->squash = EXPORT_SQUASH_NONE;
		} else if (strcmp(opt, "all_squash") == 0) {
			kind = 2;
			o->squash = EXPORT_SQUASH_ALL;
		} else if (strncmp(opt, "anonuid=", 8) == 0 || strncmp(opt, "anongid=", 8) == 0) {
			bool uid = opt[4] == 'u';
			kind = uid ? 4 : 8;
			if (parse_id(opt + 8, uid ? &o->anonuid : &o->anongid) < 0) {
				snprintf(why, whylen, "bad %.7s '%s' (want 0..4294967294)", opt,
					 opt + 8);
				return -EINVAL;
			}
		} else {
			snprintf(why, whylen,
				 "unknown option '%s' (ro, rw, root_squash, no_root_squash, "
				 "all_squash, anonuid=N, anongid=N)",
				 opt);
			return -EINVAL;
		}
		if (*seen & kind) {
			snprintf(why, whylen, "option '%s' repeats or contradicts an earlier one",
				 opt);
			return -EINVAL;
		}
		*seen |= kind;
	}
	return 0;
}

static bool same_net(const struct export_rule *a, const struct export_rule *b)
{
	return a->family == b->family && a->prefix == b->prefix &&
	       memcmp(a->addr, b->addr, sizeof(a->addr)) == 0;
}

/* Appends r to out unless the same network has a rule already. */
static int add_rule(struct exports *out, const struct export_rule *r, char *why, size_t whylen)
{
	for (size_t i = 0; i < out->n; i++) {
		if (same_net(&out->v[i], r)) {
			char name[64];
			export_rule_name(r, name, sizeof(name));
			if (out->v[i].line)
				snprintf(why, whylen, "%s has a rule already (line %u)", name,
					 out->v[i].line);
			else
				snprintf(why, whylen, "%s is listed twice", name);
			return -EINVAL;
		}
	}
	if (out->n >= EXPORTS_MAX_RULES) {
		snprintf(why, whylen, "more than %u rules", EXPORTS_MAX_RULES);
		return -EINVAL;
	}
	/* Room doubles at each power of two. */
	if ((out->n & (out->n - 1)) == 0) {
		struct export_rule *v = xcalloc(out->n ? out->n * 2 : 1, sizeof(*v));
		if (out->n)
			memcpy(v, out->v, out->n * sizeof(*v));
		free(out->v);
		out->v = v;
	}
	out->v[out->n++] = *r;
	return 0;
}

/* One line (NUL-terminated, comment and newline removed) into out. */
static int parse_line(char *line, unsigned lineno, struct exports *out, char *why,
		      size_t whylen)
{
	struct export_rule r;
	unsigned seen = 0;
	char *save = NULL, *tok;

	for (char *p = line; *p; p++)
		if (is_space(*p))
			*p = ' ';
	tok = strtok_r(line, " ", &save);
	if (!tok)
		return 0; /* blank */
	memset(&r, 0, sizeof(r));
	r.line = lineno;
	export_opts_default(&r.o);
	r.o.ro = true; /* as exports(5): read-only unless the rule says rw */
	if (strchr(tok, '(')) {
		snprintf(why, whylen, "options go after the network and a space, without "
				      "parentheses: 'CIDR rw,root_squash'");
		return -EINVAL;
	}
	if (parse_net(tok, &r, why, whylen) < 0)
		return -EINVAL;
	while ((tok = strtok_r(NULL, " ", &save)))
		if (parse_opts(tok, &r.o, &seen, why, whylen) < 0)
			return -EINVAL;
	return add_rule(out, &r, why, whylen);
}

int exports_parse(const char *text, size_t len, const char *src, struct exports *out,
		  char *err, size_t errlen)
{
	char why[256];
	unsigned lineno = 0;
	size_t pos = 0;

	out->v = NULL;
	out->n = 0;
	while (pos < len) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t end = nl ? (size_t)(nl - text) : len;
		size_t llen = end - pos;
		char *line;
		int ret;

		lineno++;
		if (memchr(text + pos, '\0', llen)) {
			snprintf(why, sizeof(why), "NUL byte in the line");
			goto fail;
		}
		line = xmalloc(llen + 1);
		memcpy(line, text + pos, llen);
		line[llen] = '\0';
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		ret = parse_line(line, lineno, out, why, sizeof(why));
		free(line);
		if (ret < 0)
			goto fail;
		pos = end + 1;
	}
	return 0;

fail:
	snprintf(err, errlen, "%s:%u: %s", src, lineno, why);
	exports_free(out);
	return -EINVAL;
}

int exports_load(const char *path, struct exports *out, char *err, size_t errlen)
{
	struct stat st;
	char *buf;
	size_t got = 0;
	int fd, ret;

	out->v = NULL;
	out->n = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "cannot read exports file %s: %s", path, strerror(errno));
		return ret;
	}
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		snprintf(err, errlen, "cannot stat exports file %s: %s", path, strerror(errno));
		close(fd);
		return ret;
	}
	if (!S_ISREG(st.st_mode) || (st.st_mode & (S_IWGRP | S_IWOTH))) {
		snprintf(err, errlen,
			 S_ISREG(st.st_mode)
				 ? "exports file %s is writable by group or others (mode %04o): "
				   "refusing it (chmod go-w)"
				 : "exports file %s is not a regular file (mode %04o)",
			 path, (unsigned)(st.st_mode & 07777));
		close(fd);
		return -EPERM;
	}
	if (st.st_size > (off_t)EXPORTS_MAX_FILE) {
		snprintf(err, errlen, "exports file %s is bigger than %u bytes", path,
			 EXPORTS_MAX_FILE);
		close(fd);
		return -EFBIG;
	}
	buf = xmalloc((size_t)st.st_size + 1);
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			snprintf(err, errlen, "cannot read exports file %s: %s", path,
				 strerror(errno));
			free(buf);
			close(fd);
			return ret;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	ret = exports_parse(buf, got, path, out, err, errlen);
	free(buf);
	return ret;
}

int exports_from_list(const char *list, const struct export_opts *o, struct exports *out,
		      char *err, size_t errlen)
{
	char *copy = xstrdup(list), *save = NULL, why[256];
	int ret = 0;

	out->v = NULL;
	out->n = 0;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		struct export_rule r;
		memset(&r, 0, sizeof(r));
		r.o = *o;
		if (parse_net(tok, &r, why, sizeof(why)) < 0 ||
		    add_rule(out, &r, why, sizeof(why)) < 0) {
			snprintf(err, errlen, "--allow: %s", why);
			ret = -EINVAL;
			break;
		}
	}
	if (!ret && !out->n) {
		snprintf(err, errlen, "--allow: no network given");
		ret = -EINVAL;
	}
	free(copy);
	if (ret)
		exports_free(out);
	return ret;
}

/* --- matching --- */

static bool in_net(const struct export_rule *r, const uint8_t *a)
{
	unsigned full = r->prefix / 8, rest = r->prefix % 8;

	if (memcmp(r->addr, a, full) != 0)
		return false;
	if (!rest)
		return true;
	uint8_t mask = (uint8_t)(0xffu << (8 - rest));
	return (r->addr[full] & mask) == (a[full] & mask);
}

const struct export_rule *exports_match(const struct exports *e, const struct sockaddr *sa)
{
	const struct export_rule *best = NULL;
	uint8_t a[16] = { 0 };
	int family;

	if (sa->sa_family == AF_INET) {
		memcpy(a, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		family = AF_INET;
	} else if (sa->sa_family == AF_INET6) {
		const struct in6_addr *in6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		if (IN6_IS_ADDR_V4MAPPED(in6)) {
			memcpy(a, in6->s6_addr + 12, 4);
			family = AF_INET;
		} else {
			memcpy(a, in6->s6_addr, 16);
			family = AF_INET6;
		}
	} else {
		return NULL;
	}
	for (size_t i = 0; i < e->n; i++) {
		const struct export_rule *r = &e->v[i];
		if (r->family && r->family != family)
			continue;
		if (!in_net(r, a))
			continue;
		/* Longest prefix wins; "*" loses to any network, even /0. */
		if (!best || (r->family && !best->family) ||
		    (!!r->family == !!best->family && r->prefix > best->prefix))
			best = r;
	}
	return best;
}

void export_rule_name(const struct export_rule *r, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN] = "?";

	if (!r->family) {
		snprintf(buf, len, "*");
		return;
	}
	inet_ntop(r->family, r->addr, a, sizeof(a));
	snprintf(buf, len, "%s/%u", a, r->prefix);
}

void export_opts_name(const struct export_opts *o, char *buf, size_t len)
{
	static const char *const squash[] = {
		[EXPORT_SQUASH_ROOT] = "root_squash",
		[EXPORT_SQUASH_NONE] = "no_root_squash",
		[EXPORT_SQUASH_ALL] = "all_squash",
	};

	snprintf(buf, len, "%s,%s,anonuid=%u,anongid=%u", o->ro ? "ro" : "rw", squash[o->squash],
		 o->anonuid, o->anongid);
}

/* --- credentials --- */

bool export_squash_creds(const struct export_opts *o, const struct pfs_creds *in,
			 struct pfs_creds *out)
{
	*out = *in;
	switch (o->squash) {
	case EXPORT_SQUASH_NONE:
		return false;
	case EXPORT_SQUASH_ALL:
		out->uid = o->anonuid;
		out->gid = o->anongid;
		out->ngroups = 0;
		return true;
	case EXPORT_SQUASH_ROOT:
	default:
		if (out->gid == 0)
			out->gid = o->anongid;
		for (unsigned i = 0; i < out->ngroups && i < PFS_GROUPS_MAX; i++)
			if (out->groups[i] == 0)
				out->groups[i] = o->anongid;
		if (out->uid != 0)
			return false;
		out->uid = o->anonuid;
		return true;
	}
}
