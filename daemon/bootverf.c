/* bootverf.c: the write verifier, from the machine's boot id (see
 * bootverf_i.h). */
#include "bootverf_i.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "podfs/digest.h"

uint64_t bootverf_of(const char *id, size_t n)
{
	char msg[sizeof(BOOTVERF_LABEL) + BOOTVERF_MAX];
	uint8_t md[PFS_DIGEST_LEN];
	uint64_t v = 0;

	while (n > 0 && (id[n - 1] == '\n' || id[n - 1] == '\r'))
		n--;
	if (n > BOOTVERF_MAX)
		n = BOOTVERF_MAX;
	memcpy(msg, BOOTVERF_LABEL, sizeof(BOOTVERF_LABEL)); /* with its NUL */
	memcpy(msg + sizeof(BOOTVERF_LABEL), id, n);
	if (pfs_sha256(msg, sizeof(BOOTVERF_LABEL) + n, md) == 0) {
		memcpy(&v, md, sizeof(v));
	} else {
		/* No memory for a digest: one id still gives one verifier. */
		for (size_t i = 0; i < n; i++)
			v = (v ^ (unsigned char)id[i]) * 0x100000001b3ull;
	}
	return v ? v : 1;
}

int bootverf_read(const char *path, uint64_t *out)
{
	char buf[BOOTVERF_MAX + 2];
	size_t n = 0;

	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	while (n < sizeof(buf)) {
		ssize_t r = read(fd, buf + n, sizeof(buf) - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			close(fd);
			return -e;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	if (n == 0 || n > BOOTVERF_MAX)
		return -EINVAL;
	*out = bootverf_of(buf, n);
	return 0;
}
