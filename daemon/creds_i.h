/* creds_i.h: a worker thread's filesystem identity.
 *
 * The daemon runs as root; an operation for a client runs with that
 * client's uid, gid and groups as the calling thread's filesystem
 * identity (setfsuid, setfsgid, setgroups through the raw syscalls, which
 * act on the calling thread only), so that the kernel's own permission
 * checks apply. Worker threads only: the loop thread never switches.
 */
#ifndef PODFSD_CREDS_I_H
#define PODFSD_CREDS_I_H

#include <stdbool.h>
#include <stdint.h>

#include "podfs/codec.h"

/* Makes cr the calling thread's filesystem identity (a podfsd that may
 * not switch, caps_can_switch, takes only requests of its own uid, as
 * itself, and refuses others with -EPERM). Returns 0; -EINVAL
 * if cr's uid or gid is (uint32_t)-1 (which setfsuid would take for "keep
 * root"); the -errno of setgroups; or -EPERM if the kernel did not take
 * the ids, after going back to root. On failure the thread is root, as
 * before. */
int creds_enter(const struct pfs_creds *cr);

/* Whether the calling thread's filesystem identity may change the mode,
 * ACL (or, for root, the owner) of an object owned by owner: it is root
 * or the owner (the kernel's owner-or-capable rule, without user
 * namespaces). A hint, not the check: the kernel makes that. */
bool creds_may_own(uint32_t owner);

/* Makes the calling thread root again (fsuid and fsgid 0, no groups),
 * which restores the capabilities the switch dropped (CAP_DAC_READ_SEARCH,
 * needed by open_by_handle_at, and those a client other than root does
 * without: caps_i.h). Never fails. */
void creds_leave(void);

#endif /* PODFSD_CREDS_I_H */
