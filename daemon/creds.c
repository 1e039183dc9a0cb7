/* creds.c: switching a worker thread's filesystem identity to a client's
 * and back (see creds_i.h). */
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "caps_i.h"
#include "creds_i.h"

int creds_enter(const struct pfs_creds *cr)
{
	gid_t groups[PFS_GROUPS_MAX];

	/* (uid_t)-1 means "unchanged" to setfsuid: never let it keep root. */
	if (cr->uid == (uint32_t)-1 || cr->gid == (uint32_t)-1)
		return -EINVAL;
	/* Not run as root (caps_i.h): its own uid's requests only, as
	 * itself. */
	if (!caps_can_switch())
		return cr->uid == geteuid() ? 0 : -EPERM;
	for (unsigned i = 0; i < cr->ngroups; i++)
		groups[i] = cr->groups[i];
	/* Not root: without the capabilities only root's requests use
	 * (caps_i.h), taken before the switch, which clears some more. */
	if (cr->uid != 0)
		caps_user_enter();
	/* glibc's setgroups() would change every thread of the process. */
	if (syscall(SYS_setgroups, (size_t)cr->ngroups, groups) < 0) {
		int err = errno;
		caps_user_leave();
		return -err;
	}
	syscall(SYS_setfsgid, cr->gid);
	syscall(SYS_setfsuid, cr->uid);
	/* An invalid id asks for the current one without changing it. */
	if ((uint32_t)syscall(SYS_setfsuid, (uid_t)-1) != cr->uid ||
	    (uint32_t)syscall(SYS_setfsgid, (gid_t)-1) != cr->gid) {
		creds_leave();
		return -EPERM;
	}
	return 0;
}

bool creds_may_own(uint32_t owner)
{
	/* An invalid id asks for the current one without changing it. */
	uint32_t fsuid = (uint32_t)syscall(SYS_setfsuid, (uid_t)-1);

	return fsuid == 0 || fsuid == owner;
}

void creds_leave(void)
{
	/* fsuid 0 first: it restores the capabilities dropped for the
	 * caller. */
	syscall(SYS_setfsuid, 0);
	syscall(SYS_setfsgid, 0);
	syscall(SYS_setgroups, (size_t)0, NULL);
	caps_user_leave();
}
