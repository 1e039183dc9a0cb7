/* netaddr.h: numeric socket addresses on the command line.
 *
 * "ADDR:PORT", "[V6ADDR]:PORT", and with a default port "ADDR" or
 * "[V6ADDR]" alone. Names are not resolved (a listener's address is
 * meant exactly). Pure; any thread.
 */
#ifndef PODFS_NETADDR_H
#define PODFS_NETADDR_H

#include <stddef.h>
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

#endif /* PODFS_NETADDR_H */
