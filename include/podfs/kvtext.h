/* kvtext.h: the "key value" lines that the status sockets answer (the
 * mount's for podfs status, podfsd's control socket for podfsd status),
 * read back by the status commands, and what both print.
 *
 * Pure except pfs_unix_ask (a socket). Any thread.
 */
#ifndef PODFS_KVTEXT_H
#define PODFS_KVTEXT_H

#include <stddef.h>
#include <sys/types.h>

#define PFS_KV_MAX 4096 /* lines of a reading */

/* A reading: text split into lines, each "key value..." (key up to the
 * first space). The text is owned; the views point into it. */
struct pfs_kv {
	char *text;
	char **key;
	char **val;
	int n;
};

/* Splits text (taken; malloc'd, NUL-terminated) into *kv. Lines without
 * a space are skipped; at most PFS_KV_MAX are kept. Returns 0 or
 * -ENOMEM (text freed). */
int pfs_kv_parse(struct pfs_kv *kv, char *text);
void pfs_kv_free(struct pfs_kv *kv);
/* The value of the first line with key, or NULL. */
const char *pfs_kv_get(const struct pfs_kv *kv, const char *key);
/* It as a number (0 if absent). */
unsigned long long pfs_kv_num(const struct pfs_kv *kv, const char *key);

/* Within a value of "k=v k=v" words: the value of word k into buf
 * (NUL-terminated, cut at len), or NULL if absent. */
const char *pfs_kv_word(const char *val, const char *k, char *buf, size_t len);

/* n bytes, human-readable ("1.5 MiB"). */
const char *pfs_fmt_bytes(unsigned long long n, char *buf, size_t len);
/* A time as "YYYY-MM-DD HH:MM:SS UTC" ("-" for 0). */
const char *pfs_fmt_time(long long t, char *buf, size_t len);
/* A duration in seconds as "3d 4h", "2h 5m", "4m 10s", "12s". */
const char *pfs_fmt_secs(long long s, char *buf, size_t len);

/* Connects to the AF_UNIX stream socket at path, sends request (may be
 * NULL: nothing), and reads the answer until the peer closes, into a
 * malloc'd NUL-terminated *out, at most cap bytes; each step waits at
 * most timeout_s seconds. Returns the length, or -errno (ENOENT,
 * ECONNREFUSED, EACCES, EAGAIN for a timeout...). */
ssize_t pfs_unix_ask(const char *path, const char *request, size_t cap, int timeout_s,
		     char **out);

#endif /* PODFS_KVTEXT_H */
