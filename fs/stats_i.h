/* stats_i.h: the mount's figures as text, one "name value..." per line:
 * the "user.podfs.stats" xattr of the mount's root, the status socket
 * (ctl.c) and `podfs status` (status.c) read them.
 */
#ifndef PODFS_STATS_I_H
#define PODFS_STATS_I_H

#include <stdbool.h>
#include <stddef.h>

struct client;

/* Room for every line. */
#define STATS_MAX 32768

/* Writes the figures into buf[cap] (cap >= STATS_MAX holds them all):
 * the server and connection, with ping its round trip (a PING of at
 * most 2 s; -1 while the server is away; without ping no line, and no
 * request is sent: reading the xattr changes no counter), byte counters,
 * requests and their latency by opcode, write-behind and the persistent
 * cache. Returns the length, or -EOVERFLOW. Any thread but a connection
 * thread. */
int stats_format(struct client *c, char *buf, size_t cap, bool ping);

/* The same figures as Prometheus text (exposition format 0.0.4, names
 * podfs_*) into a malloc'd *out; returns its length, or -ENOMEM. Never
 * waits for the server (no PING). Any thread. */
long stats_metrics(struct client *c, char **out);

#endif /* PODFS_STATS_I_H */
