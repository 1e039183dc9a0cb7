/* test_wakecal.c: unit tests of the wake-up calibration (fs/wakecal.c):
 * it ends, and restores the caller's CPU affinity, whether the woken
 * thread runs at once or so late that several samples' writes add up in
 * its eventfd before it reads one (on a loaded machine, 64 mounts
 * starting at once on 2 CPUs, podfs used to wait for that thread
 * forever, mounted but never answering). Each run has a deadline; a run
 * past it fails the test at once. Needs two CPUs (else: skipped, 77). */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "wakecal_i.h"

struct run {
	void (*late)(void *);
	int calls;
	int64_t ns;
	bool done;
	pthread_mutex_t mu;
	pthread_cond_t cv;
};

static void *runner(void *arg)
{
	struct run *r = arg;
	int64_t ns = wakecal_ns(r->late, r);
	pthread_mutex_lock(&r->mu);
	r->ns = ns;
	r->done = true;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

/* The woken thread's second wait starts 3.5 samples' time late. */
static void late_once(void *arg)
{
	struct run *r = arg;
	if (r->calls++ == 1)
		usleep(350 * 1000);
}

/* wakecal_ns with late, within 10 s; its result. */
static int64_t run_with(void (*late)(void *))
{
	struct run r = { .late = late, .mu = PTHREAD_MUTEX_INITIALIZER,
			 .cv = PTHREAD_COND_INITIALIZER };
	pthread_t thr;
	struct timespec dl;

	if (!CHECK(pthread_create(&thr, NULL, runner, &r) == 0))
		return -1;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 10;
	pthread_mutex_lock(&r.mu);
	while (!r.done && pthread_cond_timedwait(&r.cv, &r.mu, &dl) == 0)
		;
	bool done = r.done;
	pthread_mutex_unlock(&r.mu);
	if (!CHECK(done)) {
		/* Its thread waits forever: nothing to join. */
		fprintf(stderr, "  wakecal_ns did not return within 10 s\n");
		check_done("test_wakecal");
		_exit(1);
	}
	pthread_join(thr, NULL);
	if (late)
		CHECK(r.calls >= 2);
	return r.ns;
}

int main(void)
{
	cpu_set_t before, after;

	CHECK(sched_getaffinity(0, sizeof(before), &before) == 0);
	if (CPU_COUNT(&before) < 2) {
		fprintf(stderr, "test_wakecal: one CPU only: skipped\n");
		return 77;
	}
	int64_t ns = run_with(NULL);
	CHECK(ns >= 0 && ns <= WAKECAL_MAX_NS);
	ns = run_with(late_once);
	CHECK(ns >= 0 && ns <= WAKECAL_MAX_NS);
	CHECK(sched_getaffinity(0, sizeof(after), &after) == 0);
	CHECK(CPU_EQUAL(&before, &after));
	return check_done("test_wakecal");
}
