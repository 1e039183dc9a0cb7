/* hsecret_i.h: which handle secret an export was last served under.
 *
 * Wire handles carry a MAC under a key derived from the handle secret in
 * STATE_DIR/handle.key (handles_i.h). A daemon started with another
 * secret (a changed --state-dir, a lost /var/lib/podfs) makes every handle
 * a client holds fail its MAC: every path on every mount would answer
 * ESTALE. So the export remembers the secret's id, never the secret:
 * the first 8 bytes of HMAC-SHA256(secret, HSECRET_ID_LABEL), in the
 * extended attribute HSECRET_XATTR of the export's root. The trusted
 * namespace needs CAP_SYS_ADMIN to read or write: unprivileged users
 * on the server cannot see or set it, and podfsd hides it from clients
 * (export_xattrs.c) and drops CAP_SYS_ADMIN once listening. ext4, xfs,
 * btrfs and tmpfs all keep trusted xattrs. A file in the state directory
 * could not do this job: a new state directory is exactly the case to
 * detect. See docs/durability.md.
 *
 * At start (hsecret_check, before the capabilities are dropped):
 *   no record        first serve (or of a podfsd before this): record it
 *   the same id      serve
 *   another id       refuse to start, saying what to do, unless
 *                    --new-handle-secret: record the new id and serve
 *   unreadable       (a filesystem without trusted xattrs) warn, serve
 */
#ifndef PODFSD_HSECRET_I_H
#define PODFSD_HSECRET_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HSECRET_XATTR "trusted.podfs.handle-secret"
#define HSECRET_ID_LABEL "podfs handle secret id"
#define HSECRET_HEX 16 /* the record: the id as 16 lowercase hex digits */

/* The id of a 32-byte handle secret. */
uint64_t hsecret_id(const uint8_t secret[32]);

/* The record's text for id: HSECRET_HEX hex digits and a NUL. */
void hsecret_format(uint64_t id, char out[HSECRET_HEX + 1]);
/* Parses a record of n bytes. Returns 0 with *id, or -EINVAL. */
int hsecret_parse(const char *s, size_t n, uint64_t *id);

enum hsecret_record {
	HSR_NONE,       /* no record */
	HSR_SAME,       /* recorded under this secret */
	HSR_OTHER,      /* recorded under another secret (or not parseable) */
	HSR_UNREADABLE, /* no trusted xattrs here: cannot tell */
};
enum hsecret_action {
	HSA_SERVE,      /* nothing to do */
	HSA_RECORD,     /* write the id, then serve */
	HSA_REFUSE,     /* refuse to start */
	HSA_REPLACE,    /* --new-handle-secret: write the new id, serve, warn */
	HSA_UNCHECKED,  /* serve, warn that a changed secret cannot be seen */
};
/* What to do at start: the table above. Pure. */
enum hsecret_action hsecret_decide(enum hsecret_record rec, bool accept_new);

/* Reads the record of the export whose directory fd is export_fd,
 * decides (key_created: handle.key was made just now; accept_new:
 * --new-handle-secret) and writes the id if needed. Logs what it did
 * (notice or warning). Returns 0 (serve) or -1 with what to do in
 * msg (refuse). Start-up, with CAP_SYS_ADMIN. */
int hsecret_check(int export_fd, const uint8_t secret[32], const char *export_dir,
		  const char *state_dir, bool key_created, bool accept_new, char *msg,
		  size_t msglen);

#endif /* PODFSD_HSECRET_I_H */
