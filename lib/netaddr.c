/* netaddr.c: numeric socket addresses (see podfs/netaddr.h). */
#include "podfs/netaddr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int pfs_addr_parse(const char *s, int default_port, struct sockaddr_storage *out)
{
	char host[INET6_ADDRSTRLEN + 2];
	const char *colon, *port_s = NULL;
	size_t hl;
	long port = default_port;
	char *end;

	if (s[0] == '[') {
		const char *rb = strchr(s, ']');
		if (!rb)
			return -EINVAL;
		if (rb[1] == ':')
			port_s = rb + 2;
		else if (rb[1] != '\0')
			return -EINVAL;
		hl = (size_t)(rb - s - 1);
		if (hl == 0 || hl >= sizeof(host))
			return -EINVAL;
		memcpy(host, s + 1, hl);
	} else {
		colon = strrchr(s, ':');
		if (colon && strchr(s, ':') != colon)
			return -EINVAL; /* a bare IPv6 address: brackets needed */
		hl = colon ? (size_t)(colon - s) : strlen(s);
		if (colon)
			port_s = colon + 1;
		if (hl == 0 || hl >= sizeof(host))
			return -EINVAL;
		memcpy(host, s, hl);
	}
	host[hl] = '\0';
	if (port_s) {
		errno = 0;
		port = strtol(port_s, &end, 10);
		if (errno || end == port_s || *end || port_s[0] == '-' || port_s[0] == '+' ||
		    port < 0 || port > 65535)
			return -EINVAL;
	} else if (default_port < 0) {
		return -EINVAL;
	}
	memset(out, 0, sizeof(*out));
	if (s[0] == '[') {
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)out;
		if (inet_pton(AF_INET6, host, &a6->sin6_addr) != 1)
			return -EINVAL;
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		return 0;
	}
	struct sockaddr_in *a4 = (struct sockaddr_in *)out;
	if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
		return -EINVAL;
	a4->sin_family = AF_INET;
	a4->sin_port = htons((uint16_t)port);
	return 0;
}

void pfs_addr_host(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	if (ss->ss_family == AF_INET) {
		if (!inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, buf,
			       (socklen_t)len))
			snprintf(buf, len, "?");
	} else if (ss->ss_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
		if (IN6_IS_ADDR_V4MAPPED(a)) {
			if (!inet_ntop(AF_INET, &a->s6_addr[12], buf, (socklen_t)len))
				snprintf(buf, len, "?");
		} else if (!inet_ntop(AF_INET6, a, buf, (socklen_t)len)) {
			snprintf(buf, len, "?");
		}
	} else {
		snprintf(buf, len, "?");
	}
}

void pfs_addr_name(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	char h[INET6_ADDRSTRLEN] = "?";

	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
		inet_ntop(AF_INET6, &a->sin6_addr, h, sizeof(h));
		snprintf(buf, len, "[%s]:%u", h, ntohs(a->sin6_port));
	} else if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
		inet_ntop(AF_INET, &a->sin_addr, h, sizeof(h));
		snprintf(buf, len, "%s:%u", h, ntohs(a->sin_port));
	} else {
		snprintf(buf, len, "?");
	}
}

void pfs_hostkey_of(const struct sockaddr_storage *ss, struct pfs_srckey *k)
{
	memset(k, 0, sizeof(*k));
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
		k->b[10] = k->b[11] = 0xff;
		memcpy(k->b + 12, &a->sin_addr, 4);
	} else if (ss->ss_family == AF_INET6) {
		memcpy(k->b, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
	}
}

void pfs_srckey_of(const struct sockaddr_storage *ss, struct pfs_srckey *k)
{
	pfs_hostkey_of(ss, k);
	if (ss->ss_family == AF_INET6 &&
	    !IN6_IS_ADDR_V4MAPPED(&((const struct sockaddr_in6 *)ss)->sin6_addr))
		memset(k->b + 8, 0, 8); /* the /64 */
}

bool pfs_srckey_eq(const struct pfs_srckey *a, const struct pfs_srckey *b)
{
	return memcmp(a->b, b->b, sizeof(a->b)) == 0;
}
