/* loop_i.h: the FUSE request loop (replaces fuse_session_loop_mt).
 *
 * Every idle thread sleeps in a blocking read() of /dev/fuse, as in
 * libfuse's own loop: the kernel hands each request to one of them, and a
 * request costs one thread wake-up. The thread that takes the last idle
 * one's place starts one more (up to max_threads), so that requests are
 * read while it processes its own; threads beyond max_idle idle ones end.
 * At the end the caller's thread (woken through wake_fd) makes the fd
 * non-blocking and interrupts the reads with a signal (see loop.c).
 *
 * The keeper. A request costs the application two thread wake-ups (ours,
 * then its own at the reply). On a virtual machine whose idle vCPUs halt
 * (this one: cpuidle haltpoll with guest_halt_poll_ns=0), running a
 * thread woken on a halted vCPU takes 20-60 us, against a few us for the
 * work of a request answered from the caches: a warm Python import (about
 * 5,000 requests: open, ioctl, flush and release of every module) spent
 * most of its time over local disk there, and a cold one lost a third.
 * So while the mount is busy (a request was read in the last spin_us) one
 * thread at nice 19 spins on a CPU (yielding, touching nothing); the scheduler
 * then wakes our threads and the application's on CPUs that are running,
 * in a few us. It looks for a CPU the application does not use (it moves
 * when it gets less than half of its own), and our request threads stay
 * off the keeper's CPU, so that they wake where the application runs:
 * request and reply then pass on one CPU. On a busy machine (it gets
 * little time wherever it goes) it steps aside. Whether to keep one is decided
 * at mount by measuring a wake-up (loop_wake_latency_ns), or by the user
 * (-o spin=US, 0: never).
 *
 * Runs on the main thread until the session ends (unmount, or
 * loop_wake() after fuse_session_exit()).
 */
#ifndef PODFS_LOOP_I_H
#define PODFS_LOOP_I_H

#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stdint.h>

/* The keeper's window (microseconds) with spin=auto where a wake-up
 * takes LOOP_SLOW_WAKE_US or more; podfs -o spin=US sets it. */
#define LOOP_SPIN_US_DEFAULT 20000
#define LOOP_SLOW_WAKE_US 10
#define LOOP_SPIN_US_MAX 1000000
/* Threads processing requests at once (a blocked F_SETLKW holds one), and
 * idle ones kept. */
#define LOOP_MAX_THREADS 64
#define LOOP_MAX_IDLE 16

/* Runs the session's request loop with at most max_threads threads
 * processing requests, at most max_idle of them idle, and spin_us of
 * polling (0: never poll). wake_fd is an eventfd the caller owns (open
 * until this returns): after fuse_session_exit(), writing to it makes
 * the loop notice. Returns 0 when the session ended normally (unmounted
 * or exited), -errno if the device failed or no thread could start. */
int loop_run(struct fuse_session *se, unsigned max_threads, unsigned max_idle,
	     unsigned spin_us, int wake_fd);

/* Measures how long a thread blocked on an idle CPU takes to run once
 * woken (median of a few samples, about 20 ms in all; pins the calling
 * thread to one CPU meanwhile and restores its affinity): ns, or -1 if
 * the process may run on one CPU only or a call failed. */
int64_t loop_wake_latency_ns(void);

/* Writes to an eventfd (wake_fd above); any thread. */
void loop_wake(int wake_fd);

#endif /* PODFS_LOOP_I_H */
