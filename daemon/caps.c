/* caps.c: the capabilities podfsd keeps and those a worker thread gives
 * up while acting for a user (see caps_i.h). Raw capget/capset and prctl:
 * no libcap. */
#include <errno.h>
#include <linux/capability.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "caps_i.h"

#define BIT(c) CAPS_BIT(c)

static const uint64_t keep = CAPS_KEEP;
static const uint64_t root_only = CAPS_ROOT_ONLY;

static const struct {
	int cap;
	const char *name;
} names[] = {
	{ CAP_DAC_READ_SEARCH, "dac_read_search" }, { CAP_DAC_OVERRIDE, "dac_override" },
	{ CAP_FOWNER, "fowner" },		    { CAP_CHOWN, "chown" },
	{ CAP_FSETID, "fsetid" },		    { CAP_SETUID, "setuid" },
	{ CAP_SETGID, "setgid" },		    { CAP_MKNOD, "mknod" },
	{ CAP_SETFCAP, "setfcap" },		    { CAP_SYS_RESOURCE, "sys_resource" },
};

struct capset {
	uint64_t eff, perm, inh;
};

static int get(struct capset *s)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d) < 0)
		return -errno;
	s->eff = d[0].effective | (uint64_t)d[1].effective << 32;
	s->perm = d[0].permitted | (uint64_t)d[1].permitted << 32;
	s->inh = d[0].inheritable | (uint64_t)d[1].inheritable << 32;
	return 0;
}

/* Sets the calling thread's sets (the raw syscall: this thread only). */
static int set(const struct capset *s)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct d[2] = {
		{ (uint32_t)s->eff, (uint32_t)s->perm, (uint32_t)s->inh },
		{ (uint32_t)(s->eff >> 32), (uint32_t)(s->perm >> 32), (uint32_t)(s->inh >> 32) },
	};

	return syscall(SYS_capset, &h, d) < 0 ? -errno : 0;
}

static int last_cap(void)
{
	FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "re");
	int n = 63;

	if (f) {
		if (fscanf(f, "%d", &n) != 1 || n < 0 || n > 63)
			n = 63;
		fclose(f);
	}
	return n;
}

static void list(char *buf, size_t len, uint64_t set_)
{
	size_t at = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && at < len; i++)
		if (set_ & BIT(names[i].cap))
			at += (size_t)snprintf(buf + at, len - at, "%s%s", at ? "," : "",
					       names[i].name);
	if (!buf[0])
		snprintf(buf, len, "none");
}

static bool no_switch; /* written before any other thread runs */

bool caps_can_switch(void)
{
	return !no_switch;
}

int caps_drop(char *msg, size_t len)
{
	struct capset s = { 0 };
	char kept[160];
	bool bounded = true;
	int ret, last = last_cap();

	ret = get(&s);
	if (ret < 0) {
		snprintf(msg, len, "capget: %s", strerror(-ret));
		return ret;
	}
	/* The bounding set first: dropping from it needs CAP_SETPCAP, which
	 * goes with the rest below. */
	if (s.eff & BIT(CAP_SETPCAP)) {
		for (int c = 0; c <= last; c++)
			if (!(keep & BIT(c)) && prctl(PR_CAPBSET_READ, c, 0, 0, 0) == 1 &&
			    prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0) {
				ret = -errno;
				snprintf(msg, len, "cannot drop capability %d from the bounding set: %s",
					 c, strerror(errno));
				return ret;
			}
	} else {
		bounded = false;
	}
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	s.perm &= keep;
	s.eff = s.perm;
	s.inh = 0;
	ret = set(&s);
	if (ret < 0) {
		snprintf(msg, len, "capset: %s", strerror(-ret));
		return ret;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		ret = -errno;
		snprintf(msg, len, "prctl(PR_SET_NO_NEW_PRIVS): %s", strerror(errno));
		return ret;
	}
	no_switch = (s.perm & (BIT(CAP_SETUID) | BIT(CAP_SETGID))) !=
		    (BIT(CAP_SETUID) | BIT(CAP_SETGID));
	list(kept, sizeof(kept), s.perm);
	if (getuid() == 0 && geteuid() == 0)
		snprintf(msg, len, "running as root with capabilities %s only%s; no_new_privs", kept,
			 bounded ? "" : " (bounding set unchanged: no CAP_SETPCAP)");
	else
		snprintf(msg, len,
			 "running as uid %u, not root, with capabilities %s; no_new_privs; "
			 "%s",
			 (unsigned)geteuid(), kept,
			 no_switch ? "requests of other uids than this one fail (EPERM)"
				   : "acting for every client's uid");
	return 0;
}

static __thread bool cleared;
static __thread uint64_t saved_eff;

void caps_user_enter(void)
{
	struct capset s = { 0 };

	if (cleared || get(&s) < 0 || !(s.eff & root_only))
		return;
	saved_eff = s.eff;
	s.eff &= ~root_only;
	if (set(&s) == 0)
		cleared = true;
}

void caps_user_leave(void)
{
	struct capset s = { 0 };

	if (!cleared || get(&s) < 0)
		return;
	s.eff = saved_eff & s.perm;
	set(&s);
	cleared = false;
}
