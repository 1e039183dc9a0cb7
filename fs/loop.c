/* loop.c: the FUSE request loop: a pool of threads reading /dev/fuse, and the
 * keeper that keeps a CPU awake while the mount is busy (see loop_i.h). */
#include "loop_i.h"
#include "bg_i.h"
#include "killable_i.h"
#include "wakecal_i.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/fuse.h>

#include "podfs/clock.h"
#include "podfs/log.h"
#include "podfs/tls.h"

/* A pool thread's place in the loop: its state tells the thread that
 * ends the loop which threads may be asleep in read() (see kick_readers). */
enum { W_FREE, W_BUSY, W_READING, W_KICKED };
#define KICK_AGAIN_S 1 /* exiting for longer: kick the readers again, every second */
#define EXIT_LOG_S 5	/* and log what the threads do, every so often */
struct worker {
	struct loop *l;
	pthread_t thr;	   /* set under the loop's lock */
	_Atomic int state; /* W_*; W_FREE: slot unused */
	_Atomic uint32_t op; /* FUSE opcode being processed, 0: none (for the log) */
};

struct loop {
	struct fuse_session *se;
	int fd;	 /* the session's /dev/fuse fd (blocking until the end) */
	int efd; /* eventfd (the caller's): wakes loop_run's thread */
	unsigned max_threads, max_idle;
	int64_t spin_ns;

	pthread_mutex_t lock; /* guards the fields up to error, and starts */
	pthread_cond_t wakeup; /* the keeper waits here for activity */
	pthread_cond_t ended;  /* loop_run waits here for nthreads == 0 */
	unsigned nthreads; /* threads alive, the keeper included */
	int error;	   /* first device error, -errno */
	struct worker *workers; /* max_threads slots */

	atomic_bool exiting;
	atomic_bool asleep;   /* the keeper waits for activity (set under lock) */
	atomic_uint nidle;    /* pool threads not processing a request */

	_Atomic int64_t active; /* CLOCK_MONOTONIC ns a request was last read */
	/* The CPU the keeper spins on (-1: none), and a count of its
	 * changes: pool threads stay off that CPU (see avoid_keeper). */
	_Atomic int keeper_cpu;
	atomic_uint keeper_gen;
	cpu_set_t allowed; /* the process's CPUs */
	long ncpu_online;  /* the machine's */
	int loadavg_fd;	   /* /proc/loadavg, or -1 */
	bool can_pin;	   /* two or more of them */

	/* At least as many as the INTERRUPTs libfuse holds (see below). */
	atomic_uint intr_held;
};

/* A FORGET needs no reply and takes no time: it never makes the loop
 * start a thread (a burst of them would start dozens). */
static bool is_forget(const struct fuse_buf *buf)
{
	if (buf->flags & FUSE_BUF_IS_FD)
		return false;
	const struct fuse_in_header *in = buf->mem;
	return in->opcode == FUSE_FORGET || in->opcode == FUSE_BATCH_FORGET;
}

static uint32_t opcode_of(const struct fuse_buf *buf)
{
	if (buf->flags & FUSE_BUF_IS_FD)
		return UINT32_MAX; /* not known until libfuse reads it */
	return ((const struct fuse_in_header *)buf->mem)->opcode;
}

/* The thread that made the request and waits for its answer (the
 * header's pid), or 0. Nobody waits for a RELEASE (which an exiting
 * process sends, with SIGKILL pending, and which commits held writes
 * that must not be given up) nor for the requests without a reply. */
static pid_t caller_of(const struct fuse_buf *buf)
{
	if (buf->flags & FUSE_BUF_IS_FD)
		return 0;
	const struct fuse_in_header *in = buf->mem;
	switch (in->opcode) {
	case FUSE_RELEASE: case FUSE_RELEASEDIR: case FUSE_FORGET: case FUSE_BATCH_FORGET:
	case FUSE_INTERRUPT: case FUSE_DESTROY: case FUSE_INIT:
		return 0;
	default:
		return (pid_t)in->pid;
	}
}

/* ---- INTERRUPTs libfuse holds ----
 *
 * An INTERRUPT whose request libfuse no longer knows (answered while the
 * INTERRUPT was on its way: a process killed during the FLUSH or unlock
 * of its exit) is kept in a list of the session, in case the request is
 * still to come (libfuse 3.14's do_interrupt). Every later request takes
 * one entry off that list (check_interrupt: the INTERRUPT for that
 * request, or else the oldest, answered EAGAIN, which the kernel ignores
 * for a request it no longer has). fuse_session_destroy() does not empty
 * it: an INTERRUPT after the last request would be leaked at exit, and
 * look to LeakSanitizer exactly like a request we never answered (both
 * are 128 bytes from libfuse's request allocator). So the loop keeps an
 * upper bound of the list's length, and at its end processes that many
 * empty BATCH_FORGETs (no inode, no reply), each of which takes one entry
 * off. The bound: +1 after an INTERRUPT was processed, -1 (not below 0)
 * before a request that certainly reaches check_interrupt (once INIT is
 * done, any request with a handler but INIT; podfs never sets allow_root,
 * whose refusals come before it). Counting INTERRUPTs late and requests
 * early can only overestimate. */

/* +1 for an INTERRUPT, -1 for a request that takes one off libfuse's
 * list, 0 for others (and for a request still in the pipe, whose header
 * is not in memory). */
static int intr_effect(const struct fuse_buf *buf)
{
	if (buf->flags & FUSE_BUF_IS_FD)
		return 0;
	const struct fuse_in_header *in = buf->mem;
	switch (in->opcode) {
	case FUSE_INTERRUPT:
		return 1;
	case FUSE_LOOKUP: case FUSE_FORGET: case FUSE_GETATTR: case FUSE_SETATTR:
	case FUSE_OPEN: case FUSE_READ: case FUSE_WRITE: case FUSE_FLUSH: case FUSE_RELEASE:
	case FUSE_OPENDIR: case FUSE_READDIR: case FUSE_READDIRPLUS: case FUSE_RELEASEDIR:
	case FUSE_GETLK: case FUSE_SETLK: case FUSE_SETLKW: case FUSE_ACCESS: case FUSE_CREATE:
	case FUSE_STATFS: case FUSE_FSYNC: case FUSE_BATCH_FORGET:
		return -1;
	default:
		return 0;
	}
}

static void intr_taken(struct loop *l)
{
	unsigned n = atomic_load(&l->intr_held);
	while (n > 0 && !atomic_compare_exchange_weak(&l->intr_held, &n, n - 1)) {
	}
}

/* Empties libfuse's list at the end (no thread processes requests any
 * more). */
static void drain_interrupts(struct loop *l)
{
	unsigned n = atomic_load(&l->intr_held);

	if (n)
		pfs_debug("up to %u INTERRUPTs of answered requests left: dropping them", n);
	for (unsigned i = 0; i < n; i++) {
		struct {
			struct fuse_in_header in;
			struct fuse_batch_forget_in arg;
		} msg = { .in = { .len = sizeof(msg), .opcode = FUSE_BATCH_FORGET } };
		struct fuse_buf b = { .size = sizeof(msg), .mem = &msg };
		fuse_session_process_buf(l->se, &b);
	}
	atomic_store(&l->intr_held, 0);
}

/* Called (lock held) when the device goes quiet or fails: loop_run's
 * thread wakes and ends the loop (end_readers). */
static void finish_exit(struct loop *l, int res)
{
	if (res < 0 && !l->error) {
		l->error = res;
		pfs_err("reading /dev/fuse: %s", strerror(-res));
	}
	atomic_store(&l->exiting, true);
	pthread_cond_broadcast(&l->wakeup);
	loop_wake(l->efd);
}

/* A request was read: the mount is active; a sleeping keeper starts
 * (lock not held). The keeper sets asleep under the lock and then looks
 * at active again, and here active is stored before asleep is read: one
 * of the two sees the other (both sequentially consistent), so that the
 * lock is only taken when the keeper sleeps. */
static void note_active(struct loop *l)
{
	atomic_store(&l->active, pfs_mono_ns());
	if (l->spin_ns > 0 && atomic_load(&l->asleep)) {
		pthread_mutex_lock(&l->lock);
		pthread_cond_broadcast(&l->wakeup);
		pthread_mutex_unlock(&l->lock);
	}
}

/* ---- the pool ----
 *
 * Every idle thread sleeps in a blocking read() of /dev/fuse, as in
 * libfuse's own loop: the kernel hands each request to one of them (its
 * readers wait exclusively), and a request costs one wake-up, with no
 * thread passing a role on to another. To end the loop, loop_run's
 * thread (woken through the eventfd) makes the fd non-blocking, so that
 * a read() not begun yet returns at once, and sends KICK_SIGNAL to each
 * thread that may be asleep in one: its handler does nothing, and the
 * read() returns EINTR (the handler is installed without SA_RESTART).
 * A thread marks itself W_READING before it looks at the exit flag and
 * reads, and W_BUSY after: the signal goes only to a W_READING thread,
 * which loop_run's thread marks W_KICKED first. A thread that finds
 * itself W_KICKED after its read() waits until the handler has run and
 * then blocks the signal, so that the signal never interrupts a call
 * made while processing a request. A thread still W_READING or W_KICKED
 * a second later is kicked again, and the log says every few seconds
 * what each thread does (once, under ThreadSanitizer, one thread did
 * not end after a SIGTERM, and the log could not say which). */

#define KICK_SIGNAL (SIGRTMIN + 2)

static __thread volatile sig_atomic_t kick_seen;
static sigset_t kick_set; /* KICK_SIGNAL alone (set by loop_run) */

static void kick_handler(int sig)
{
	(void)sig;
	kick_seen = 1;
}

/* The next request: > 0 its size, 0 if the session ended, -errno on a
 * device error. */
static int read_next(struct loop *l, struct worker *w, struct fuse_buf *buf)
{
	for (;;) {
		atomic_store(&w->state, W_READING);
		if (atomic_load(&l->exiting) || fuse_session_exited(l->se)) {
			atomic_store(&w->state, W_BUSY);
			return 0;
		}
		int res = fuse_session_receive_buf(l->se, buf);
		int st = W_READING;
		if (!atomic_compare_exchange_strong(&w->state, &st, W_BUSY)) {
			/* Kicked: the signal is sent, or about to be. (A sleep,
			 * not a yield: ThreadSanitizer runs a handler it holds
			 * back only in a call it intercepts.) */
			while (!kick_seen) {
				struct timespec ts = { 0, 10 * 1000 };
				nanosleep(&ts, NULL);
			}
			/* loop_run repeats the kick to a thread that stays
			 * W_KICKED: a repeat that comes from now on stays
			 * pending, and never interrupts a request's call. */
			pthread_sigmask(SIG_BLOCK, &kick_set, NULL);
			atomic_store(&w->state, W_BUSY);
		}
		if (res > 0)
			return res;
		if (res != -EAGAIN && res != -EINTR)
			return res;
	}
}

/* Sends KICK_SIGNAL to the threads that may sleep in read() (lock held,
 * exiting set, the fd non-blocking); with again, also once more to those
 * kicked before and still W_KICKED, in case a signal went astray (a
 * thread that saw its kick blocks the signal first: see read_next).
 * Returns how many were sent. */
static unsigned kick_readers(struct loop *l, bool again)
{
	unsigned sent = 0;

	for (unsigned i = 0; i < l->max_threads; i++) {
		struct worker *w = &l->workers[i];
		int st = W_READING;
		if (atomic_compare_exchange_strong(&w->state, &st, W_KICKED) ||
		    (again && st == W_KICKED)) {
			pthread_kill(w->thr, KICK_SIGNAL);
			sent++;
		}
	}
	return sent;
}

static void *pool_main(void *arg);

static bool start_thread(struct loop *l, const char *name, void *(*fn)(void *), void *arg,
			 pthread_t *thr)
{
	pthread_attr_t attr;
	int rc;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(thr, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		pfs_err("cannot start a FUSE thread: %s", strerror(rc));
		return false;
	}
	bg_name(*thr, name);
	l->nthreads++;
	return true;
}

/* Starts one more pool thread (lock held). */
static bool start_worker(struct loop *l)
{
	struct worker *w = NULL;

	for (unsigned i = 0; i < l->max_threads && !w; i++)
		if (atomic_load(&l->workers[i].state) == W_FREE)
			w = &l->workers[i];
	if (!w)
		return false;
	atomic_store(&w->state, W_BUSY);
	if (!start_thread(l, "fuse", pool_main, w, &w->thr)) {
		atomic_store(&w->state, W_FREE);
		return false;
	}
	atomic_fetch_add(&l->nidle, 1);
	return true;
}

static void thread_done(struct loop *l)
{
	l->nthreads--;
	if (l->nthreads == 0) {
		pthread_cond_broadcast(&l->ended);
		loop_wake(l->efd);
	}
}

/* Keeps the calling pool thread off the keeper's CPU. A request's thread
 * is best woken on the application's CPU: it runs there as soon as the
 * application blocks, and the application resumes there when it replies,
 * with no CPU to wake. The scheduler wakes a thread near where it last
 * ran; one that last ran on the keeper's CPU would run there, and its
 * reply would wake the application on a CPU left idle. */
static void avoid_keeper(struct loop *l, unsigned *seen)
{
	unsigned gen = atomic_load(&l->keeper_gen);
	if (!l->can_pin || gen == *seen)
		return;
	*seen = gen;
	cpu_set_t set = l->allowed;
	int cpu = atomic_load(&l->keeper_cpu);
	if (cpu >= 0 && cpu < CPU_SETSIZE)
		CPU_CLR(cpu, &set);
	(void)sched_setaffinity(0, sizeof(set), &set);
}

/* Exiting takes long: says what the threads still do (lock held), and
 * how many kicks were repeated. A slot not W_FREE is a pool thread alive
 * (both change under the lock): any other thread counted is the keeper. */
static void log_busy(struct loop *l, unsigned rekicked)
{
	char ops[256];
	size_t n = 0;
	unsigned busy = 0, reading = 0, kicked = 0, between = 0, pool = 0;

	ops[0] = 0;
	for (unsigned i = 0; i < l->max_threads; i++) {
		int st = atomic_load(&l->workers[i].state);
		uint32_t op = atomic_load(&l->workers[i].op);
		pool += st != W_FREE;
		if (st == W_READING) {
			reading++;
		} else if (st == W_KICKED) {
			kicked++;
		} else if (st == W_BUSY && op == 0) {
			between++;
		} else if (st == W_BUSY) {
			busy++;
			if (n < sizeof(ops) - 16)
				n += (size_t)snprintf(ops + n, sizeof(ops) - n, " %u", (unsigned)op);
		}
	}
	pfs_notice("exiting: still waiting for %u thread(s): %u processing a request "
		   "(FUSE opcodes:%s), %u reading, %u kicked, %u between requests, "
		   "keeper %s; %u kick(s) repeated",
		   l->nthreads, busy, busy ? ops : " none", reading, kicked, between,
		   l->nthreads > pool ? "running" : "ended", rekicked);
}

static void *pool_main(void *arg)
{
	struct worker *w = arg;
	struct loop *l = w->l;
	struct fuse_buf buf = { 0 };
	unsigned seen_gen = 0;

	pthread_sigmask(SIG_UNBLOCK, &kick_set, NULL);
	for (;;) {
		int res = read_next(l, w, &buf);
		if (res <= 0) {
			pthread_mutex_lock(&l->lock);
			finish_exit(l, res);
			break;
		}
		/* The last idle thread took a request: start one more, so that
		 * requests are read while this one is processed. */
		if (atomic_fetch_sub(&l->nidle, 1) == 1 && !is_forget(&buf)) {
			pthread_mutex_lock(&l->lock);
			if (atomic_load(&l->nidle) == 0 && !atomic_load(&l->exiting) &&
			    l->nthreads < l->max_threads)
				start_worker(l);
			pthread_mutex_unlock(&l->lock);
		}

		note_active(l);
		avoid_keeper(l, &seen_gen);
		int intr = intr_effect(&buf);
		if (intr < 0)
			intr_taken(l);
		killable_enter(caller_of(&buf));
		atomic_store(&w->op, opcode_of(&buf));
		fuse_session_process_buf(l->se, &buf);
		atomic_store(&w->op, 0);
		killable_leave();
		if (intr > 0)
			atomic_fetch_add(&l->intr_held, 1);

		if (atomic_fetch_add(&l->nidle, 1) + 1 > l->max_idle) {
			pthread_mutex_lock(&l->lock);
			if (atomic_load(&l->nidle) > l->max_idle)
				break;
			pthread_mutex_unlock(&l->lock);
		}
	}
	/* Lock held. loop_run may return as soon as thread_done says so. */
	pfs_tls_thread_end();
	atomic_fetch_sub(&l->nidle, 1);
	atomic_store(&w->state, W_FREE);
	thread_done(l);
	pthread_mutex_unlock(&l->lock);
	if (!(buf.flags & FUSE_BUF_IS_FD))
		free(buf.mem);
	return NULL;
}

/* ---- the keeper ----
 *
 * One thread at nice 19 that spins (sched_yield in a loop, a look at
 * its CPU share and /proc/loadavg every KEEPER_CHECK_NS) while a
 * request was read in the last spin_ns, then sleeps until the next one.
 * It never touches the device: its only job is that a CPU is not halted
 * when the application's request or our reply needs a thread woken,
 * which the scheduler then does on a running CPU in a few microseconds.
 * At nice 19 it gets about 1.5% of a CPU that anything else wants. (Two
 * of them, or one that polls the device itself at SCHED_IDLE, measured
 * slower: every CPU then looks busy or contended to the scheduler.) */

static int64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The keeper is of use on a CPU nobody else wants: on the application's
 * own CPU it keeps that one awake and leaves idle the one where our
 * threads are woken. Every KEEPER_CHECK_NS it looks at the share of the
 * time it ran. Only while it gets half or more does the pool stay off
 * its CPU. Under half, it leaves its CPU for the others; under half twice
 * in a row (no CPU idles: nothing to keep awake) it rests, KEEPER_REST_NS
 * and twice as long at each time again, up to KEEPER_REST_MAX_NS. */
#define KEEPER_CHECK_NS (500 * 1000)
#define KEEPER_REST_NS (10 * 1000 * 1000)
#define KEEPER_REST_MAX_NS (640 * 1000 * 1000)

static void keeper_move(struct loop *l)
{
	cpu_set_t set = l->allowed;
	int cpu = sched_getcpu();

	if (cpu < 0 || !l->can_pin)
		return;
	CPU_CLR(cpu, &set);
	(void)sched_setaffinity(0, sizeof(set), &set);
}

/* Publishes the keeper's CPU when it changed. */
static void keeper_where(struct loop *l)
{
	int cpu = sched_getcpu();
	if (cpu != atomic_load(&l->keeper_cpu)) {
		atomic_store(&l->keeper_cpu, cpu);
		atomic_fetch_add(&l->keeper_gen, 1);
	}
}

/* Publishes that the keeper does not spin: pool threads may use every
 * CPU again. */
static void keeper_gone(struct loop *l)
{
	if (atomic_load(&l->keeper_cpu) != -1) {
		atomic_store(&l->keeper_cpu, -1);
		atomic_fetch_add(&l->keeper_gen, 1);
	}
}

/* True if, besides the keeper, at least as many threads are runnable on
 * the machine as it has CPUs (the "running" count of /proc/loadavg): a
 * stream of requests (a checkpoint) rather than a ping-pong, where the
 * keeper's CPU is wanted for work, and a spinning CPU would make the
 * scheduler place that work elsewhere. */
static bool machine_crowded(struct loop *l)
{
	char buf[128];
	ssize_t n;

	if (l->loadavg_fd < 0)
		return false;
	n = pread(l->loadavg_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* "0.52 0.58 0.59 3/187 12345": the fourth field is running/total. */
	const char *p = buf;
	for (int f = 0; f < 3 && p; f++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	if (!p)
		return false;
	long running = strtol(p, NULL, 10);
	return running - 1 >= l->ncpu_online;
}

static void *keeper_main(void *arg)
{
	struct loop *l = arg;
	int64_t rest_ns = KEEPER_REST_NS;

	if (setpriority(PRIO_PROCESS, (id_t)gettid(), 19) < 0)
		pfs_info("FUSE keeper: cannot lower its priority: %s", strerror(errno));
	pthread_mutex_lock(&l->lock);
	while (!atomic_load(&l->exiting)) {
		if (pfs_mono_ns() - atomic_load(&l->active) >= l->spin_ns) {
			keeper_gone(l);
			/* A request read from now on wakes us (note_active);
			 * one read before is seen here. */
			atomic_store(&l->asleep, true);
			if (pfs_mono_ns() - atomic_load(&l->active) >= l->spin_ns)
				pthread_cond_wait(&l->wakeup, &l->lock);
			atomic_store(&l->asleep, false);
			continue;
		}
		pthread_mutex_unlock(&l->lock);
		int64_t t0 = pfs_mono_ns(), c0 = thread_cpu_ns(), t;
		int starved = 0, crowd = 0;
		while ((t = pfs_mono_ns()) - atomic_load(&l->active) < l->spin_ns &&
		       !fuse_session_exited(l->se)) {
			/* A yield, not only a pause: a thread woken on this CPU
			 * runs now, not when the scheduler would next preempt
			 * us (it may let us finish a slice first). */
			sched_yield();
			if (t - t0 < KEEPER_CHECK_NS)
				continue;
			/* One look at the run queues is noise; four in a row
			 * (2 ms) is a stream. */
			crowd = machine_crowded(l) ? crowd + 1 : 0;
			bool own_cpu = (thread_cpu_ns() - c0) * 2 >= t - t0;
			if (own_cpu && crowd == 0) {
				/* A CPU nobody else wants: the pool stays off it. */
				starved = 0;
				rest_ns = KEEPER_REST_NS;
				keeper_where(l);
			} else if (own_cpu && crowd < 4) {
				keeper_where(l);
			} else {
				keeper_gone(l);
				if (crowd < 4 && ++starved < 2) {
					keeper_move(l);
				} else {
					/* Starved on two CPUs in a row, or as many
					 * threads as CPUs want to run: the machine is
					 * busy, no CPU idles, there is nothing to keep
					 * awake, and a spinning CPU would only look
					 * busy to the scheduler when it places them.
					 * Step aside, longer each time while it stays
					 * so. */
					struct timespec rest = { rest_ns / 1000000000,
								 rest_ns % 1000000000 };
					nanosleep(&rest, NULL);
					if (rest_ns < KEEPER_REST_MAX_NS)
						rest_ns *= 2;
					starved = 0;
					crowd = 0;
				}
			}
			t0 = pfs_mono_ns();
			c0 = thread_cpu_ns();
		}
		pthread_mutex_lock(&l->lock);
	}
	keeper_gone(l);
	thread_done(l);
	pthread_mutex_unlock(&l->lock);
	return NULL;
}

/* ---- calibration: wakecal.c ---- */

int64_t loop_wake_latency_ns(void)
{
	return wakecal_ns(NULL, NULL);
}

void loop_wake(int wake_fd)
{
	uint64_t one = 1;
	if (write(wake_fd, &one, sizeof(one)) < 0) {
		/* The counter is full: the reader is awake anyway. */
	}
}

int loop_run(struct fuse_session *se, unsigned max_threads, unsigned max_idle,
	     unsigned spin_us, int wake_fd)
{
	struct loop l = { .se = se, .efd = wake_fd,
			  .max_threads = max_threads ? max_threads : 1,
			  .max_idle = max_idle ? max_idle : 1,
			  .spin_ns = (int64_t)spin_us * 1000 };
	int fl, ret = 0;
	pthread_t keeper;

	l.fd = fuse_session_fd(se);
	fl = fcntl(l.fd, F_GETFL);
	if (fl < 0 || fcntl(l.fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
		return -errno;
	l.workers = calloc(l.max_threads, sizeof(*l.workers));
	if (!l.workers)
		return -ENOMEM;
	for (unsigned i = 0; i < l.max_threads; i++) {
		l.workers[i].l = &l;
		atomic_init(&l.workers[i].state, W_FREE);
		atomic_init(&l.workers[i].op, 0);
	}
	/* The kick interrupts a read(): no SA_RESTART. Only pool threads
	 * take it (they unblock it). */
	struct sigaction sa = { .sa_handler = kick_handler }, old_sa;
	sigemptyset(&sa.sa_mask);
	sigaction(KICK_SIGNAL, &sa, &old_sa);
	sigset_t old_mask;
	sigemptyset(&kick_set);
	sigaddset(&kick_set, KICK_SIGNAL);
	pthread_sigmask(SIG_BLOCK, &kick_set, &old_mask);
	pthread_mutex_init(&l.lock, NULL);
	pthread_cond_init(&l.wakeup, NULL);
	pthread_cond_init(&l.ended, NULL);
	atomic_init(&l.exiting, false);
	atomic_init(&l.asleep, false);
	atomic_init(&l.nidle, 0);
	atomic_init(&l.active, 0);
	atomic_init(&l.keeper_cpu, -1);
	atomic_init(&l.keeper_gen, 0);
	atomic_init(&l.intr_held, 0);
	l.can_pin = sched_getaffinity(0, sizeof(l.allowed), &l.allowed) == 0 &&
		    CPU_COUNT(&l.allowed) >= 2;
	l.ncpu_online = sysconf(_SC_NPROCESSORS_ONLN);
	l.loadavg_fd = l.spin_ns > 0 ? open("/proc/loadavg", O_RDONLY | O_CLOEXEC) : -1;

	pthread_mutex_lock(&l.lock);
	if (!start_worker(&l))
		ret = -EAGAIN;
	else if (l.spin_ns > 0)
		start_thread(&l, "keeper", keeper_main, &l, &keeper);
	/* Wait for the end: the device goes quiet or fails (a pool thread
	 * calls finish_exit), or the session is exited and loop_wake()
	 * called. Then end the threads asleep in read() (see the pool). */
	bool ending = false;
	struct timespec slow = { 0 };
	unsigned rekicked = 0, waited_s = 0;
	while (l.nthreads > 0) {
		if (!ending && (atomic_load(&l.exiting) || fuse_session_exited(se))) {
			finish_exit(&l, 0);
			(void)fcntl(l.fd, F_SETFL, fl | O_NONBLOCK);
			/* Waits for the coordinator on a caller's behalf end
			 * (the kernel answers nobody any more); kick the
			 * threads asleep in read(). */
			killable_end();
			kick_readers(&l, false);
			ending = true;
			clock_gettime(CLOCK_REALTIME, &slow);
			slow.tv_sec += KICK_AGAIN_S;
		} else if (ending) {
			if (pthread_cond_timedwait(&l.ended, &l.lock, &slow) == ETIMEDOUT) {
				/* A thread still reading is kicked again; now
				 * and then, the log says what the others do. */
				unsigned again = kick_readers(&l, true);
				/* Said once: a read a kick did not end is
				 * what held an exit before (see the pool). */
				if (again && !rekicked)
					pfs_notice("exiting: %u thread(s) still reading %u s after "
						   "their kick: kicked again",
						   again, KICK_AGAIN_S);
				rekicked += again;
				waited_s += KICK_AGAIN_S;
				if (waited_s % EXIT_LOG_S == 0)
					log_busy(&l, rekicked);
				slow.tv_sec += KICK_AGAIN_S;
			}
		} else {
			pthread_mutex_unlock(&l.lock);
			struct pollfd p = { .fd = l.efd, .events = POLLIN };
			if (poll(&p, 1, -1) > 0) {
				uint64_t v;
				if (read(l.efd, &v, sizeof(v)) < 0) {
					/* Nothing to undo: the counter was read already. */
				}
			}
			pthread_mutex_lock(&l.lock);
		}
	}
	if (l.error)
		ret = l.error;
	pthread_mutex_unlock(&l.lock);
	drain_interrupts(&l);

	if (l.loadavg_fd >= 0)
		close(l.loadavg_fd);
	pthread_cond_destroy(&l.ended);
	pthread_cond_destroy(&l.wakeup);
	pthread_mutex_destroy(&l.lock);
	free(l.workers);
	pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
	sigaction(KICK_SIGNAL, &old_sa, NULL);
	(void)fcntl(l.fd, F_SETFL, fl);
	return ret;
}
