/* wakecal.c: a woken thread's time to run (see wakecal_i.h). */
#include "wakecal_i.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "podfs/clock.h"

struct cal {
	int efd;
	int cpu;
	_Atomic int64_t woke;
	atomic_bool done; /* the sampling is over: the thread ends at its next wake-up */
	void (*late)(void *);
	void *arg;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

static void pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	(void)sched_setaffinity(0, sizeof(set), &set);
}

static void *cal_main(void *arg)
{
	struct cal *c = arg;
	uint64_t v;

	pin(c->cpu);
	/* Not one read per sample: an eventfd adds up the writes it was not
	 * read between, so a thread that runs late (a loaded machine; a
	 * sample waits at most WAKECAL_MAX_NS) reads two samples' writes at
	 * once, and would then wait for a write that never comes. It reads
	 * until told that the sampling is over, which the last write always
	 * wakes it to see. */
	for (;;) {
		if (c->late)
			c->late(c->arg);
		if (read(c->efd, &v, sizeof(v)) != sizeof(v) || atomic_load(&c->done))
			break;
		atomic_store(&c->woke, pfs_mono_ns());
	}
	return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

int64_t wakecal_ns(void (*late)(void *), void *arg)
{
	cpu_set_t allowed;
	int cpus[2], n = 0;
	struct cal c = { .late = late, .arg = arg };
	pthread_t thr;
	int64_t lat[WAKECAL_SAMPLES];
	uint64_t one = 1;

	if (sched_getaffinity(0, sizeof(allowed), &allowed) < 0)
		return -1;
	for (int cpu = 0; cpu < CPU_SETSIZE && n < 2; cpu++)
		if (CPU_ISSET(cpu, &allowed))
			cpus[n++] = cpu;
	if (n < 2)
		return -1;
	c.efd = eventfd(0, EFD_CLOEXEC);
	if (c.efd < 0)
		return -1;
	c.cpu = cpus[1];
	atomic_init(&c.woke, 0);
	atomic_init(&c.done, false);
	if (pthread_create(&thr, NULL, cal_main, &c) != 0) {
		close(c.efd);
		return -1;
	}
	pin(cpus[0]);
	for (int i = 0; i < WAKECAL_SAMPLES; i++) {
		struct timespec idle = { 0, WAKECAL_IDLE_NS };
		nanosleep(&idle, NULL);
		atomic_store(&c.woke, 0);
		int64_t t0 = pfs_mono_ns();
		if (write(c.efd, &one, sizeof(one)) != sizeof(one)) {
			lat[i] = 0;
			continue;
		}
		int64_t t;
		while ((t = atomic_load(&c.woke)) == 0 && pfs_mono_ns() - t0 < WAKECAL_MAX_NS)
			cpu_relax();
		lat[i] = t ? t - t0 : WAKECAL_MAX_NS;
	}
	atomic_store(&c.done, true);
	/* An eventfd's write fails only if its count would overflow, which
	 * nine ones cannot; the thread is woken by it and ends. */
	(void)!write(c.efd, &one, sizeof(one));
	pthread_join(thr, NULL);
	close(c.efd);
	(void)sched_setaffinity(0, sizeof(allowed), &allowed);
	qsort(lat, WAKECAL_SAMPLES, sizeof(lat[0]), cmp_i64);
	return lat[WAKECAL_SAMPLES / 2];
}
