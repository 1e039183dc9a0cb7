/* test_exports.c: the export rules (daemon/exports.c): the file syntax
 * and its errors (FILE:LINE), --allow lists, matching by longest prefix
 * (IPv4, IPv6, IPv4-mapped IPv6 peers, "*"), credential squashing, and
 * loading a file (its mode checked).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "exports_i.h"

static struct sockaddr_storage peer(const char *a)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (strchr(a, ':')) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		s6->sin6_family = AF_INET6;
		if (inet_pton(AF_INET6, a, &s6->sin6_addr) != 1)
			abort();
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		s4->sin_family = AF_INET;
		if (inet_pton(AF_INET, a, &s4->sin_addr) != 1)
			abort();
	}
	return ss;
}

static int parse(const char *text, struct exports *e, char *err)
{
	return exports_parse(text, strlen(text), "exports", e, err, 256);
}

/* The line of the rule that admits a (0: none). */
static unsigned match_line(const struct exports *e, const char *a)
{
	struct sockaddr_storage ss = peer(a);
	const struct export_rule *r = exports_match(e, (const struct sockaddr *)&ss);

	return r ? r->line : 0;
}

static void test_syntax(void)
{
	struct exports e;
	char err[256];
	const char *text = "# the pod\n"
			   "\n"
			   "10.0.0.0/8   rw,root_squash   # workers\n"
			   "10.1.2.3     ro\n"
			   "fd00::/8\tall_squash,anonuid=1000,anongid=100 rw\r\n"
			   "*            no_root_squash\n"
			   "::1";

	CHECK_EQ(parse(text, &e, err), 0);
	CHECK_EQ(e.n, 5);
	if (e.n != 5)
		return;
	CHECK_EQ(e.v[0].family, AF_INET);
	CHECK_EQ(e.v[0].prefix, 8);
	CHECK_EQ(e.v[0].line, 3);
	CHECK(!e.v[0].o.ro);
	CHECK_EQ(e.v[0].o.squash, EXPORT_SQUASH_ROOT);
	CHECK_EQ(e.v[0].o.anonuid, 65534);
	CHECK_EQ(e.v[1].prefix, 32); /* a bare address is a host */
	CHECK(e.v[1].o.ro);
	CHECK_EQ(e.v[2].family, AF_INET6);
	CHECK_EQ(e.v[2].o.squash, EXPORT_SQUASH_ALL);
	CHECK_EQ(e.v[2].o.anonuid, 1000);
	CHECK_EQ(e.v[2].o.anongid, 100);
	CHECK(!e.v[2].o.ro);
	CHECK_EQ(e.v[3].family, 0);
	CHECK(e.v[3].o.ro); /* read-only unless the rule says rw */
	CHECK_EQ(e.v[3].o.squash, EXPORT_SQUASH_NONE);
	CHECK_EQ(e.v[4].prefix, 128);
	CHECK_EQ(e.v[4].line, 7);
	exports_free(&e);

	/* Nothing but comments: no rule, which admits nobody. */
	CHECK_EQ(parse("# nobody\n   \n", &e, err), 0);
	CHECK_EQ(e.n, 0);
	CHECK_EQ(match_line(&e, "127.0.0.1"), 0);
	exports_free(&e);

	/* ::ffff:a.b.c.d/N is an IPv4 rule. */
	CHECK_EQ(parse("::ffff:192.168.0.0/112 rw\n", &e, err), 0);
	CHECK_EQ(e.v[0].family, AF_INET);
	CHECK_EQ(e.v[0].prefix, 16);
	CHECK_EQ(match_line(&e, "192.168.4.5"), 1);
	exports_free(&e);
}

static void test_errors(void)
{
	static const struct {
		const char *text;
		const char *err; /* what the message starts with */
	} bad[] = {
		{ "10.0.0.0/33 rw\n", "exports:1: prefix length over 32" },
		{ "\n\nfd00::/129\n", "exports:3: prefix length over 128" },
		{ "10.0.0.1/8\n", "exports:1: '10.0.0.1/8' has bits set" },
		{ "10.0.0.0/\n", "exports:1: bad prefix length" },
		{ "10.0.0.0/8x\n", "exports:1: bad prefix length" },
		{ "10.0.0.0/-1\n", "exports:1: bad prefix length" },
		{ "host.example\n", "exports:1: bad address 'host.example'" },
		{ "/8\n", "exports:1: bad address" },
		{ "10.0.0.0/8 rw,bogus\n", "exports:1: unknown option 'bogus'" },
		{ "10.0.0.0/8 ro,rw\n", "exports:1: option 'rw' repeats" },
		{ "10.0.0.0/8 root_squash,all_squash\n", "exports:1: option 'all_squash' repeats" },
		{ "10.0.0.0/8 anonuid=x\n", "exports:1: bad anonuid 'x'" },
		{ "10.0.0.0/8 anonuid=4294967295\n", "exports:1: bad anonuid" },
		{ "10.0.0.0/8 anongid=\n", "exports:1: bad anongid" },
		{ "10.0.0.0/8(rw)\n", "exports:1: options go after" },
		{ "10.0.0.0/8 rw\n# x\n10.0.0.0/8 ro\n", "exports:3: 10.0.0.0/8 has a rule already (line 1)" },
		{ "*\n* rw\n", "exports:2: * has a rule already" },
	};
	struct exports e;
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		if (!CHECK_EQ(parse(bad[i].text, &e, err), -EINVAL))
			fprintf(stderr, "  for %s", bad[i].text);
		if (!CHECK(strncmp(err, bad[i].err, strlen(bad[i].err)) == 0))
			fprintf(stderr, "  got '%s', want '%s...'\n", err, bad[i].err);
		CHECK(e.v == NULL && e.n == 0);
	}
	/* A NUL byte is an error, not the end of the text. */
	CHECK_EQ(exports_parse("* rw\n\0x\n", 8, "f", &e, err, sizeof(err)), -EINVAL);
	CHECK_STR(err, "f:2: NUL byte in the line");
}

static void test_match(void)
{
	struct exports e;
	char err[256];

	CHECK_EQ(parse("*            ro\n"
		       "10.0.0.0/8   rw\n"
		       "10.1.0.0/16  rw,all_squash\n"
		       "10.1.2.3     rw,no_root_squash\n"
		       "0.0.0.0/0    ro,all_squash\n"
		       "fd00::/8     rw\n"
		       "fd00:1::/32  ro\n",
		       &e, err),
		 0);
	/* Longest prefix, wherever it is in the file. */
	CHECK_EQ(match_line(&e, "10.1.2.3"), 4);
	CHECK_EQ(match_line(&e, "10.1.2.4"), 3);
	CHECK_EQ(match_line(&e, "10.2.0.1"), 2);
	CHECK_EQ(match_line(&e, "192.168.1.1"), 5); /* 0.0.0.0/0 beats "*" */
	CHECK_EQ(match_line(&e, "fd00:1::5"), 7);
	CHECK_EQ(match_line(&e, "fd00:2::5"), 6);
	CHECK_EQ(match_line(&e, "2001:db8::1"), 1);
	/* An IPv4 peer on a dual-stack listener is an IPv4 peer. */
	CHECK_EQ(match_line(&e, "::ffff:10.1.2.3"), 4);
	CHECK_EQ(match_line(&e, "::ffff:10.9.9.9"), 2);
	exports_free(&e);

	/* IPv4 rules do not admit IPv6 peers nor the reverse; "*" admits
	 * both. */
	CHECK_EQ(parse("0.0.0.0/0 rw\n", &e, err), 0);
	CHECK_EQ(match_line(&e, "::1"), 0);
	CHECK_EQ(match_line(&e, "1.2.3.4"), 1);
	exports_free(&e);
	CHECK_EQ(parse("::/0 rw\n", &e, err), 0);
	CHECK_EQ(match_line(&e, "1.2.3.4"), 0);
	CHECK_EQ(match_line(&e, "::ffff:1.2.3.4"), 0);
	CHECK_EQ(match_line(&e, "::1"), 1);
	exports_free(&e);
	CHECK_EQ(parse("10.201.0.0/17\n", &e, err), 0);
	CHECK_EQ(match_line(&e, "10.201.127.255"), 1);
	CHECK_EQ(match_line(&e, "10.201.128.0"), 0);
	exports_free(&e);

	/* A peer of another family matches nothing. */
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof(ss));
	ss.ss_family = AF_UNIX;
	CHECK_EQ(parse("*\n", &e, err), 0);
	CHECK(exports_match(&e, (const struct sockaddr *)&ss) == NULL);
	exports_free(&e);

	/* Many rules: the array grows. */
	char text[64 * 300];
	size_t n = 0;
	for (int i = 0; i < 300; i++)
		n += (size_t)snprintf(text + n, sizeof(text) - n, "10.%d.%d.0/24 rw\n", i / 256,
				      i % 256);
	CHECK_EQ(exports_parse(text, n, "x", &e, err, sizeof(err)), 0);
	CHECK_EQ(e.n, 300);
	CHECK_EQ(match_line(&e, "10.1.43.7"), 300);
	exports_free(&e);
}

static void test_list(void)
{
	struct export_opts o;
	struct exports e;
	char err[256], name[64];

	export_opts_default(&o);
	CHECK(!o.ro);
	CHECK_EQ(o.squash, EXPORT_SQUASH_ROOT);
	o.squash = EXPORT_SQUASH_NONE;
	CHECK_EQ(exports_from_list("127.0.0.0/8,::1", &o, &e, err, sizeof(err)), 0);
	CHECK_EQ(e.n, 2);
	CHECK(exports_match(&e, (const struct sockaddr *)&(struct sockaddr_storage){ 0 }) == NULL);
	struct sockaddr_storage ss = peer("127.0.0.1");
	const struct export_rule *r = exports_match(&e, (const struct sockaddr *)&ss);
	CHECK(r && r->line == 0); /* line 0: from the command line */
	ss = peer("::1");
	r = exports_match(&e, (const struct sockaddr *)&ss);
	CHECK(r && r->o.squash == EXPORT_SQUASH_NONE && !r->o.ro);
	ss = peer("10.0.0.1");
	CHECK(exports_match(&e, (const struct sockaddr *)&ss) == NULL);
	export_rule_name(&e.v[0], name, sizeof(name));
	CHECK_STR(name, "127.0.0.0/8");
	export_rule_name(&e.v[1], name, sizeof(name));
	CHECK_STR(name, "::1/128");
	exports_free(&e);

	CHECK_EQ(exports_from_list("*", &o, &e, err, sizeof(err)), 0);
	export_rule_name(&e.v[0], name, sizeof(name));
	CHECK_STR(name, "*");
	exports_free(&e);
	CHECK_EQ(exports_from_list("10.0.0.0/8,nope", &o, &e, err, sizeof(err)), -EINVAL);
	CHECK(strncmp(err, "--allow: bad address 'nope'", 27) == 0);
	CHECK_EQ(exports_from_list(",", &o, &e, err, sizeof(err)), -EINVAL);
	CHECK_STR(err, "--allow: no network given");
	CHECK_EQ(exports_from_list("::1,::1", &o, &e, err, sizeof(err)), -EINVAL);

	export_opts_default(&o);
	export_opts_name(&o, name, sizeof(name));
	CHECK_STR(name, "rw,root_squash,anonuid=65534,anongid=65534");

	enum export_squash sq;
	CHECK_EQ(export_squash_parse("all", &sq), 0);
	CHECK_EQ(sq, EXPORT_SQUASH_ALL);
	CHECK_EQ(export_squash_parse("none", &sq), 0);
	CHECK_EQ(sq, EXPORT_SQUASH_NONE);
	CHECK_EQ(export_squash_parse("root", &sq), 0);
	CHECK_EQ(sq, EXPORT_SQUASH_ROOT);
	CHECK_EQ(export_squash_parse("Root", &sq), -EINVAL);
}

static void test_squash(void)
{
	struct export_opts o;
	struct pfs_creds in, out;

	memset(&in, 0, sizeof(in));
	in.uid = 0;
	in.gid = 0;
	in.ngroups = 3;
	in.groups[0] = 0;
	in.groups[1] = 10;
	in.groups[2] = 0;
	export_opts_default(&o);
	o.anonuid = 7;
	o.anongid = 8;

	/* root squash: every 0 goes, nothing else. */
	CHECK(export_squash_creds(&o, &in, &out));
	CHECK_EQ(out.uid, 7);
	CHECK_EQ(out.gid, 8);
	CHECK_EQ(out.ngroups, 3);
	CHECK_EQ(out.groups[0], 8);
	CHECK_EQ(out.groups[1], 10);
	CHECK_EQ(out.groups[2], 8);
	in.uid = 1000;
	CHECK(!export_squash_creds(&o, &in, &out));
	CHECK_EQ(out.uid, 1000);
	CHECK_EQ(out.gid, 8); /* gid 0 is squashed for any uid */
	in.gid = 100;
	CHECK(!export_squash_creds(&o, &in, &out));
	CHECK_EQ(out.gid, 100);

	/* all squash: the anonymous ids, no groups. */
	o.squash = EXPORT_SQUASH_ALL;
	CHECK(export_squash_creds(&o, &in, &out));
	CHECK_EQ(out.uid, 7);
	CHECK_EQ(out.gid, 8);
	CHECK_EQ(out.ngroups, 0);

	/* none: as claimed. */
	o.squash = EXPORT_SQUASH_NONE;
	in.uid = 0;
	in.gid = 0;
	CHECK(!export_squash_creds(&o, &in, &out));
	CHECK_EQ(out.uid, 0);
	CHECK_EQ(out.gid, 0);
	CHECK_EQ(out.groups[0], 0);

	/* A zero-initialised rule squashes root. */
	struct export_opts z;
	memset(&z, 0, sizeof(z));
	CHECK(export_squash_creds(&z, &in, &out));
}

static void test_load(void)
{
	char dir[] = "/tmp/test_exports.XXXXXX", path[64], err[512];
	struct exports e;
	int fd;

	if (!CHECK(mkdtemp(dir) != NULL))
		return;
	snprintf(path, sizeof(path), "%s/exports", dir);
	CHECK_EQ(exports_load(path, &e, err, sizeof(err)), -ENOENT);
	CHECK(strstr(err, path) != NULL);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, "127.0.0.1 rw\nbad\n", 17), 17);
	close(fd);
	CHECK_EQ(exports_load(path, &e, err, sizeof(err)), -EINVAL);
	char want[128];
	snprintf(want, sizeof(want), "%s:2: bad address 'bad'", path);
	CHECK(strncmp(err, want, strlen(want)) == 0);
	CHECK_EQ(truncate(path, 13), 0);
	CHECK_EQ(exports_load(path, &e, err, sizeof(err)), 0);
	CHECK_EQ(e.n, 1);
	exports_free(&e);
	/* Writable by others: refused, whatever it says. */
	CHECK_EQ(chmod(path, 0664), 0);
	CHECK_EQ(exports_load(path, &e, err, sizeof(err)), -EPERM);
	CHECK(strstr(err, "writable by group or others") != NULL);
	CHECK_EQ(chmod(path, 0646), 0);
	CHECK_EQ(exports_load(path, &e, err, sizeof(err)), -EPERM);
	CHECK_EQ(chmod(path, 0600), 0);
	CHECK_EQ(exports_load(path, &e, err, sizeof(err)), 0);
	exports_free(&e);
	/* A directory is not a rules file. */
	CHECK_EQ(exports_load(dir, &e, err, sizeof(err)), -EPERM);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	test_syntax();
	test_errors();
	test_match();
	test_list();
	test_squash();
	test_load();
	return check_done("test_exports");
}
