/* exports_i.h: the export rules: which networks may connect, and what
 * each may do (read-only, root squash, all squash, the anonymous ids),
 * as the exports file (podfs-exports(5)) or the command line says.
 *
 * A rule set is built once (parsed from a file's text, or from --allow
 * and the rule flags) and never changed after; the loop thread matches
 * every new connection's peer address against it, copies the matching
 * rule's options into the connection, and replaces the whole set on
 * SIGHUP (server.c). Workers only see the copy of the options carried by
 * each request (req_i.h), so no rule set is shared between threads.
 *
 * Precedence: the rule with the longest prefix that contains the address
 * wins; "*" (any address) is the shortest of all. Two rules for the same
 * network are an error. An IPv4 client seen as an IPv4-mapped IPv6
 * address (::ffff:a.b.c.d, a dual-stack listener) is an IPv4 client.
 *
 * Pure logic apart from exports_load (reads a file): no libuv, no
 * globals, any thread.
 */
#ifndef PODFSD_EXPORTS_I_H
#define PODFSD_EXPORTS_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "podfs/codec.h"

#define EXPORTS_DEFAULT_FILE "/etc/podfs/exports"
#define EXPORTS_MAX_RULES 4096
#define EXPORTS_MAX_FILE (1u << 20) /* bytes */
#define EXPORTS_ANON_ID 65534      /* nobody, nogroup: NFS's anonymous ids */

/* What the root of a request's credentials becomes. Zero is root squash:
 * a zero-initialised rule is the safe default. */
enum export_squash {
	EXPORT_SQUASH_ROOT = 0, /* uid 0 -> anonuid, gid 0 (and group 0) -> anongid */
	EXPORT_SQUASH_NONE,     /* the ids as the client claims them */
	EXPORT_SQUASH_ALL,      /* every uid -> anonuid, gid -> anongid, no groups */
};

/* The options of a rule, as a connection keeps them. */
struct export_opts {
	bool ro;
	enum export_squash squash;
	uint32_t anonuid, anongid;
};

struct export_rule {
	uint8_t addr[16];  /* network, host bits zero (IPv4: the first 4 bytes) */
	uint8_t prefix;    /* bits */
	uint8_t family;    /* AF_INET, AF_INET6, or 0: "*" (any address) */
	unsigned line;     /* in the file (0: from the command line) */
	struct export_opts o;
};

struct exports {
	struct export_rule *v;
	size_t n;
};

/* The defaults of a rule: read-write, root squash, anonymous ids 65534. */
void export_opts_default(struct export_opts *o);

/* Parses the text (len bytes, need not end in NUL) of an exports file
 * named src into *out (freed with exports_free; empty on failure).
 * Returns 0, or -EINVAL with "src:LINE: message" in err. */
int exports_parse(const char *text, size_t len, const char *src, struct exports *out,
		  char *err, size_t errlen);

/* Reads and parses the exports file path: refused (-EPERM) if it is
 * group- or other-writable or not a regular file, or bigger than
 * EXPORTS_MAX_FILE. Returns 0, or -errno with a one-line reason naming
 * the file in err. */
int exports_load(const char *path, struct exports *out, char *err, size_t errlen);

/* One rule per network of list (comma-separated CIDRs, as in the file;
 * "*": any), each with the options o. Returns 0, or -EINVAL with a
 * reason in err. */
int exports_from_list(const char *list, const struct export_opts *o, struct exports *out,
		      char *err, size_t errlen);

/* The rule that admits the peer sa (AF_INET or AF_INET6), or NULL. */
const struct export_rule *exports_match(const struct exports *e, const struct sockaddr *sa);

/* "10.0.0.0/8", "fd00::/8", "*" into buf. */
void export_rule_name(const struct export_rule *r, char *buf, size_t len);
/* "rw,root_squash,anonuid=65534,anongid=65534" into buf. */
void export_opts_name(const struct export_opts *o, char *buf, size_t len);

/* Parses "root", "none" or "all". Returns 0 or -EINVAL. */
int export_squash_parse(const char *s, enum export_squash *out);

/* The credentials the request in runs with under o, into out. Returns
 * true if the identity was squashed (root squash applied to uid 0, or
 * all squash): such a caller may not make devices or set-id files nor
 * change security.* or trusted.* attributes. */
bool export_squash_creds(const struct export_opts *o, const struct pfs_creds *in,
			 struct pfs_creds *out);

void exports_free(struct exports *e);

#endif /* PODFSD_EXPORTS_I_H */
