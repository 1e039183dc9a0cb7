/* killable_i.h: which process a FUSE thread works for, and whether the
 * kernel is killing it.
 *
 * A hard mount waits for an absent coordinator as long as it takes, like
 * an NFS hard mount; and like one (since Linux 2.6.25), a process blocked
 * on it must still die of SIGKILL. The kernel's FUSE wait for a reply is
 * uninterruptible once the request was read by podfs, so the process
 * stays in state D until podfs answers. A fatal signal leaves SIGKILL
 * pending on every thread of the dying process (the kernel turns any
 * fatal signal into a group exit), which /proc/TID/status shows; other
 * signals do not, and the wait goes on: a program's SIGCHLD or SIGALRM
 * does not make a hard mount fail its calls with EINTR.
 *
 * The FUSE loop names the caller of the request a thread is about to
 * process (killable_enter, from the request header's pid, which is the
 * calling thread's id); the waits that depend on the coordinator ask
 * killable_dying() every KILLABLE_POLL_MS while they wait and give up
 * with EINTR when it says yes.
 */
#ifndef PODFS_KILLABLE_I_H
#define PODFS_KILLABLE_I_H

#include <stdbool.h>
#include <sys/types.h>

/* How often a wait for the coordinator looks at its caller. */
#define KILLABLE_POLL_MS 200

/* The calling thread now processes a request of thread tid (0: none, or
 * a request the kernel makes on its own). */
void killable_enter(pid_t tid);
/* The request is answered. */
void killable_leave(void);

/* True if the calling thread processes a request whose caller has a
 * fatal signal pending. Reads /proc; call it at most every
 * KILLABLE_POLL_MS while waiting, never on a fast path. */
bool killable_dying(void);

/* The request in progress on this thread must reach the server even if
 * its caller dies (dropping a dying process's locks): if the caller is
 * being killed while it waits, killable_poll calls fn(arg), which
 * answers the kernel at once, and the wait goes on for the server. */
void killable_finish_after(void (*fn)(void *arg), void *arg);
/* Done with the request that had to reach the server. */
void killable_finish_clear(void);

/* The mount is over (the kernel ended it, or podfs is exiting): no
 * caller waits for an answer any more, so every wait for the coordinator
 * on behalf of one ends as if its caller were being killed. Requests with
 * no caller (a RELEASE committing held writes) still wait. Any thread. */
void killable_end(void);

/* What a wait for the coordinator does after KILLABLE_POLL_MS. */
enum killable_verdict {
	KILLABLE_WAIT,    /* nobody is being killed, or the kernel was answered */
	KILLABLE_GIVE_UP, /* the caller is being killed: answer EINTR */
};
/* Looks at the caller (killable_dying, or killable_end) and runs the
 * finisher if there is one. Call without locks that fn would need. */
enum killable_verdict killable_poll(void);

/* Pure: whether a /proc/TID/status text shows SIGKILL pending (SigPnd or
 * ShdPnd). */
bool killable_status_dying(const char *status);

#endif /* PODFS_KILLABLE_I_H */
