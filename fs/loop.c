/* loop.c: the FUSE request loop: a leader/follower thread pool, and the
 * keeper that keeps a CPU awake while the mount is busy (see loop_i.h). */
#include "loop_i.h"
#include "killable_i.h"
#include "wakecal_i.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
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

struct loop {
	struct fuse_session *se;
	int fd;	 /* the session's /dev/fuse fd, made non-blocking */
	int efd; /* eventfd (the caller's): wakes a thread asleep in poll() */
	unsigned max_threads, max_idle;
	int64_t spin_ns;

	pthread_mutex_t lock; /* guards the fields up to error */
	pthread_cond_t follow; /* followers wait here for the leader role */
	pthread_cond_t wakeup; /* the keeper waits here for activity */
	pthread_cond_t ended;  /* loop_run waits here for nthreads == 0 */
	bool leader;	       /* the role is taken */
	bool exiting;
	unsigned nthreads; /* threads alive, the keeper included */
	unsigned nidle;	   /* pool threads not processing a request */
	bool asleep;	   /* the keeper waits for activity */
	int error;	   /* first device error, -errno */

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

/* Called (lock held) when the device goes quiet or fails. */
static void finish_exit(struct loop *l, int res)
{
	if (res < 0 && !l->error) {
		l->error = res;
		pfs_err("reading /dev/fuse: %s", strerror(-res));
	}
	l->exiting = true;
	pthread_cond_broadcast(&l->follow);
	pthread_cond_broadcast(&l->wakeup);
	loop_wake(l->efd);
}

/* A request was read: the mount is active; a sleeping keeper starts
 * (lock not held). */
static void note_active(struct loop *l)
{
	atomic_store(&l->active, pfs_mono_ns());
	if (l->spin_ns > 0) {
		pthread_mutex_lock(&l->lock);
		if (l->asleep)
			pthread_cond_broadcast(&l->wakeup);
		pthread_mutex_unlock(&l->lock);
	}
}

/* ---- the pool ---- */

/* The leader's wait for a request: > 0 its size, 0 if the session ended,
 * -errno on a device error. */
static int lead_next(struct loop *l, struct fuse_buf *buf)
{
	for (;;) {
		if (fuse_session_exited(l->se))
			return 0;
		int res = fuse_session_receive_buf(l->se, buf);
		if (res >= 0)
			return res;
		if (res != -EAGAIN && res != -EINTR)
			return res;
		if (res == -EINTR)
			continue;
		struct pollfd p[2] = { { .fd = l->fd, .events = POLLIN },
				       { .fd = l->efd, .events = POLLIN } };
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			return -errno;
		if (p[1].revents) {
			uint64_t v;
			if (read(l->efd, &v, sizeof(v)) < 0) {
				/* Nothing to undo: the counter was read already. */
			}
		}
	}
}

static void *pool_main(void *arg);

static bool start_thread(struct loop *l, void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	pthread_t thr;
	int rc;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&thr, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		pfs_err("cannot start a FUSE thread: %s", strerror(rc));
		return false;
	}
	l->nthreads++;
	return true;
}

/* Starts one more pool thread (lock held). */
static bool start_worker(struct loop *l)
{
	if (!start_thread(l, pool_main, l))
		return false;
	l->nidle++;
	return true;
}

static void thread_done(struct loop *l)
{
	l->nthreads--;
	if (l->nthreads == 0)
		pthread_cond_broadcast(&l->ended);
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

static void *pool_main(void *arg)
{
	struct loop *l = arg;
	struct fuse_buf buf = { 0 };
	unsigned seen_gen = 0;

	pthread_mutex_lock(&l->lock);
	for (;;) {
		while (l->leader && !l->exiting)
			pthread_cond_wait(&l->follow, &l->lock);
		if (l->exiting)
			break;
		l->leader = true;
		pthread_mutex_unlock(&l->lock);

		int res = lead_next(l, &buf);

		pthread_mutex_lock(&l->lock);
		l->leader = false;
		if (res <= 0) {
			finish_exit(l, res);
			break;
		}
		/* Pass the role on, to an idle follower or a new thread, so
		 * that requests are read while this one is processed. */
		l->nidle--;
		if (l->nidle > 0)
			pthread_cond_signal(&l->follow);
		else if (!is_forget(&buf) && l->nthreads < l->max_threads)
			start_worker(l);
		pthread_mutex_unlock(&l->lock);

		note_active(l);
		avoid_keeper(l, &seen_gen);
		int intr = intr_effect(&buf);
		if (intr < 0)
			intr_taken(l);
		killable_enter(caller_of(&buf));
		fuse_session_process_buf(l->se, &buf);
		killable_leave();
		if (intr > 0)
			atomic_fetch_add(&l->intr_held, 1);

		pthread_mutex_lock(&l->lock);
		l->nidle++;
		if (l->nidle > l->max_idle && l->leader)
			break;
	}
	l->nidle--;
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
	while (!l->exiting) {
		if (pfs_mono_ns() - atomic_load(&l->active) >= l->spin_ns) {
			keeper_gone(l);
			l->asleep = true;
			pthread_cond_wait(&l->wakeup, &l->lock);
			l->asleep = false;
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

/* ---- CPU quota ----
 *
 * In a cgroup with a CPU quota (a container's CPU limit) a spinning
 * keeper would spend the application's quota, nice or not. */

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

bool loop_cpu_limited(void)
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

	l.fd = fuse_session_fd(se);
	fl = fcntl(l.fd, F_GETFL);
	if (fl < 0 || fcntl(l.fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	pthread_mutex_init(&l.lock, NULL);
	pthread_cond_init(&l.follow, NULL);
	pthread_cond_init(&l.wakeup, NULL);
	pthread_cond_init(&l.ended, NULL);
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
		start_thread(&l, keeper_main, &l);
	while (l.nthreads > 0)
		pthread_cond_wait(&l.ended, &l.lock);
	if (l.error)
		ret = l.error;
	pthread_mutex_unlock(&l.lock);
	drain_interrupts(&l);

	if (l.loadavg_fd >= 0)
		close(l.loadavg_fd);
	pthread_cond_destroy(&l.ended);
	pthread_cond_destroy(&l.wakeup);
	pthread_cond_destroy(&l.follow);
	pthread_mutex_destroy(&l.lock);
	(void)fcntl(l.fd, F_SETFL, fl);
	return ret;
}
