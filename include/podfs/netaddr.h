/* netaddr.h: numeric socket addresses on the command line.
 *
 * "ADDR:PORT", "[V6ADDR]:PORT", and with a default port "ADDR" or
 * "[V6ADDR]" alone. Names are not resolved (a listener's address is
 * meant exactly). Pure; any thread.
 */
#ifndef PODFS_NETADDR_H
#define PODFS_NETADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Parses s into *out. default_port >= 0: the port may be left out and is
 * then that; < 0: the port is required. Returns 0 or -EINVAL. */
int pfs_addr_parse(const char *s, int default_port, struct sockaddr_storage *out);

/* Writes "addr:port" ("[v6]:port") of ss into buf ("?" if not IPv4 or
 * IPv6; an IPv4-mapped address as it is). */
void pfs_addr_name(const struct sockaddr_storage *ss, char *buf, size_t len);

/* Writes only the address of ss ("10.0.0.2", "fd00::2"; an IPv4-mapped
 * IPv6 address as IPv4) into buf. */
void pfs_addr_host(const struct sockaddr_storage *ss, char *buf, size_t len);

/* The source of a connection, for limits per source: an IPv4 address,
 * or an IPv6 /64 (one host has a whole /64 to choose from); an
 * IPv4-mapped IPv6 address counts as the IPv4 address. */
struct pfs_srckey {
	uint8_t b[16];
};

/* Makes the key of ss. */
void pfs_srckey_of(const struct sockaddr_storage *ss, struct pfs_srckey *k);
/* The same with all of an IPv6 address (podfsd's accounts per host: the
 * hosts of a pod often share one /64); an unknown family gives ::. */
void pfs_hostkey_of(const struct sockaddr_storage *ss, struct pfs_srckey *k);
bool pfs_srckey_eq(const struct pfs_srckey *a, const struct pfs_srckey *b);

#endif /* PODFS_NETADDR_H */
