/* caps_i.h: the capabilities podfsd keeps, and those a worker thread
 * gives up while it acts for a client other than root.
 *
 * podfsd runs as root for what the kernel lets only root do, and nothing
 * else. Once it listens and has opened what it needs (the export, the
 * state directory, the change watch) and before any other thread exists,
 * caps_drop() keeps these capabilities and drops every other one from the
 * effective, permitted, inheritable, ambient and bounding sets, and sets
 * no_new_privs:
 *
 *   CAP_DAC_READ_SEARCH  open_by_handle_at (every request names handles)
 *   CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_CHOWN, CAP_FSETID
 *                        acting for a root client, as local root would
 *                        (setfsuid to another uid clears them per thread)
 *   CAP_SETUID, CAP_SETGID  setfsuid, setfsgid, setgroups (creds.c)
 *   CAP_MKNOD            device nodes made by a root client
 *   CAP_SETFCAP          security.capability set by a root client
 *   CAP_SYS_RESOURCE     a root client writes past quotas and into the
 *                        blocks reserved for root, as local root would;
 *                        big splice pipes (pipes.c)
 *
 * Everything else goes: CAP_SYS_ADMIN (fanotify is set up before),
 * CAP_NET_BIND_SERVICE (the listener is bound before), CAP_SETPCAP, ...
 *
 * A thread acting for a client other than root also clears CAP_MKNOD,
 * CAP_SETFCAP and CAP_SYS_RESOURCE from its effective set meanwhile
 * (caps_user_enter, caps_user_leave: capset acts on the calling thread
 * only), so that such a client neither makes device nodes nor exceeds
 * quotas or reserved blocks; the kernel clears the filesystem ones itself
 * on setfsuid.
 *
 * Not run as root (a user serving their own files, with
 * CAP_DAC_READ_SEARCH as a file capability), podfsd keeps what it has of
 * the set above; it cannot act for other users (creds_enter fails).
 */
#ifndef PODFSD_CAPS_I_H
#define PODFSD_CAPS_I_H

#include <linux/capability.h>
#include <stdbool.h>
#include <stddef.h>

#define CAPS_BIT(c) (1ull << (c))
/* What podfsd keeps (the table above). */
#define CAPS_KEEP                                                                        \
	(CAPS_BIT(CAP_DAC_READ_SEARCH) | CAPS_BIT(CAP_DAC_OVERRIDE) | CAPS_BIT(CAP_FOWNER) | \
	 CAPS_BIT(CAP_CHOWN) | CAPS_BIT(CAP_FSETID) | CAPS_BIT(CAP_SETUID) |               \
	 CAPS_BIT(CAP_SETGID) | CAPS_BIT(CAP_MKNOD) | CAPS_BIT(CAP_SETFCAP) |              \
	 CAPS_BIT(CAP_SYS_RESOURCE))
/* What a thread acting for a user other than root does without. */
#define CAPS_ROOT_ONLY (CAPS_BIT(CAP_MKNOD) | CAPS_BIT(CAP_SETFCAP) | CAPS_BIT(CAP_SYS_RESOURCE))

/* Drops every capability but those above from the calling thread, which
 * must be the only one, and sets no_new_privs. Writes a line for the log
 * into msg: the identity podfsd runs as and the capabilities it kept.
 * Returns 0, or -errno if the kernel refused (msg says what). Caps that
 * were never held are not an error. */
int caps_drop(char *msg, size_t len);

/* Whether podfsd may act as other users (CAP_SETUID and CAP_SETGID
 * kept; true until caps_drop says otherwise). Without, it acts for its
 * own uid only, as itself. */
bool caps_can_switch(void);

/* The calling (worker) thread starts acting for a client other than root:
 * clears CAP_MKNOD, CAP_SETFCAP and CAP_SYS_RESOURCE from its effective
 * set, remembering what it had. A no-op for a thread without them. */
void caps_user_enter(void);
/* Gives the calling thread back the effective set caps_user_enter took
 * from it (after it is root again, so that nothing else is lost). A
 * no-op without a caps_user_enter before. */
void caps_user_leave(void);

#endif /* PODFSD_CAPS_I_H */
