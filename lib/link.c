/* link.c: when LZ4 pays on a connection (see link.h). */
#include <linux/sockios.h>
#include <string.h>
#include <sys/ioctl.h>

#include "podfs/link.h"

static const char *const mode_names[] = {
	[PFS_LZ4_AUTO] = "auto",
	[PFS_LZ4_ALWAYS] = "always",
	[PFS_LZ4_NEVER] = "never",
};

int pfs_lz4_mode_parse(const char *s, enum pfs_lz4_mode *out)
{
	for (unsigned m = 0; m < sizeof(mode_names) / sizeof(mode_names[0]); m++) {
		if (strcmp(s, mode_names[m]) == 0) {
			*out = (enum pfs_lz4_mode)m;
			return 0;
		}
	}
	return -1;
}

const char *pfs_lz4_mode_name(enum pfs_lz4_mode mode)
{
	return (unsigned)mode < sizeof(mode_names) / sizeof(mode_names[0]) ? mode_names[mode] : "?";
}

size_t pfs_sock_unsent(int fd)
{
	int n = 0;

	if (fd < 0 || ioctl(fd, SIOCOUTQNSD, &n) < 0 || n < 0)
		return 0;
	return (size_t)n;
}
