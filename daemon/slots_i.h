/* slots_i.h: a session's slots: files it asked the daemon to make in a
 * directory delegated to it (SLOTS), not named yet, which its client
 * names later with CREATES (wire_deleg.h, docs/delegation.md).
 *
 * Each slot keeps its O_TMPFILE fd open, counted as one of the session's
 * open files (session_fid_reserve), until CREATES names it, the session
 * returns the directory (DELEG_RETURN), or the session ends; at most
 * PFS_SLOTS_PER_SESSION per session. A slot nobody names is freed with
 * its fd: the filesystem reclaims a file without a name.
 *
 * Any thread: s->mu guards the list.
 */
#ifndef PODFSD_SLOTS_I_H
#define PODFSD_SLOTS_I_H

#include <stdbool.h>
#include <stdint.h>

#include "podfs/codec.h"

struct session;
struct deleg;

struct slot {
	struct slot *next;
	struct pfs_fh fh;
	uint64_t dir;  /* handles_key of its directory */
	uint32_t uid;  /* who made it */
	int fd;
};

/* How many more slots s may hold (at most want), after dropping those
 * of directories it no longer holds delegated (t: deleg_holds). */
unsigned slots_room(struct session *s, struct deleg *t, unsigned want);
/* Adds slot fd (owned from now on; with the caller's session_fid_reserve,
 * which the slot takes) of directory dir made by uid, named fh. Returns
 * false (nothing taken) on ENOMEM. */
bool slots_add(struct session *s, int fd, const struct pfs_fh *fh, uint64_t dir, uint32_t uid);
/* Takes s's slot fh of directory dir for a CREATES by uid: its fd (the
 * caller closes it, then session_fid_unreserve), or -ESTALE (no such
 * slot: never made, or gone with a restart or a return), -EPERM (made
 * for another uid; it stays). */
int slots_take(struct session *s, const struct pfs_fh *fh, uint64_t dir, uint32_t uid);
/* Frees s's slots of directory dir (every one: dir 0), closing their fds. */
void slots_drop(struct session *s, uint64_t dir);

#endif /* PODFSD_SLOTS_I_H */
