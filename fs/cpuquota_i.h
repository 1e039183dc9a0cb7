/* cpuquota_i.h: whether this process runs under a CPU quota.
 *
 * In a cgroup with a CPU quota (a container's CPU limit) a spinning
 * keeper (loop.c) would spend the application's quota, nice or not: with
 * spin=auto, main.c starts none there.
 */
#ifndef PODFS_CPUQUOTA_I_H
#define PODFS_CPUQUOTA_I_H

#include <stdbool.h>

/* True if this process runs in a cgroup (or below one) with a CPU quota
 * (cgroup v2 cpu.max, v1 cpu.cfs_quota_us), from /proc/self/cgroup. */
bool cpuquota_applies(void);

#endif
