/* cpuquota.c: whether this process runs under a CPU quota (see
 * cpuquota_i.h). */
#include "cpuquota_i.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* True if the file at dir/name says a quota: cgroup v2 cpu.max ("max
 * PERIOD" is none) or v1 cpu.cfs_quota_us (-1 is none). */
static bool quota_file(const char *dir, const char *name)
{
	char p[PATH_MAX], v[64];
	int fd;
	ssize_t n;

	if (snprintf(p, sizeof(p), "%s/%s", dir, name) >= (int)sizeof(p))
		return false;
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, v, sizeof(v) - 1);
	close(fd);
	if (n <= 0)
		return false;
	v[n] = '\0';
	if (strcmp(name, "cpu.max") == 0)
		return strncmp(v, "max", 3) != 0;
	return atol(v) > 0;
}

/* Looks for a quota on the cgroup at root/path and its ancestors. */
static bool quota_up(const char *root, const char *path, const char *name)
{
	char dir[PATH_MAX];

	if (snprintf(dir, sizeof(dir), "%s%s", root, path) >= (int)sizeof(dir))
		return false;
	for (;;) {
		if (quota_file(dir, name))
			return true;
		char *slash = strrchr(dir, '/');
		if (!slash || (size_t)(slash - dir) < strlen(root))
			return false;
		*slash = '\0';
	}
}

bool cpuquota_applies(void)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[PATH_MAX + 64];
	bool limited = false;

	if (!f)
		return false;
	while (!limited && fgets(line, sizeof(line), f)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		line[strcspn(line, "\n")] = '\0';
		*c2 = '\0';
		const char *ctrl = c1 + 1, *path = c2 + 1;
		if (*ctrl == '\0') /* v2 */
			limited = quota_up("/sys/fs/cgroup", path, "cpu.max") ||
				  quota_up("/sys/fs/cgroup/unified", path, "cpu.max");
		else if (strstr(ctrl, "cpu") && !strstr(ctrl, "cpuset")) /* v1 cpu[,cpuacct] */
			limited = quota_up("/sys/fs/cgroup/cpu", path, "cpu.cfs_quota_us") ||
				  quota_up("/sys/fs/cgroup/cpu,cpuacct", path, "cpu.cfs_quota_us");
	}
	fclose(f);
	return limited;
}
