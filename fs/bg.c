/* bg.c: the background-thread skeleton (see bg_i.h). */
#include "bg_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "podfs/clock.h"

int bg_init(struct bg *b)
{
	int rc = pthread_mutex_init(&b->lock, NULL);

	if (rc)
		return -rc;
	rc = pfs_cond_init_mono(&b->cond);
	if (rc) {
		pthread_mutex_destroy(&b->lock);
		return -rc;
	}
	b->stop = false;
	b->thr = NULL;
	b->nthr = 0;
	return 0;
}

void bg_fini(struct bg *b)
{
	free(b->thr);
	b->thr = NULL;
	pthread_cond_destroy(&b->cond);
	pthread_mutex_destroy(&b->lock);
}

void bg_name(pthread_t t, const char *name)
{
	char buf[16]; /* the kernel's TASK_COMM_LEN */

	snprintf(buf, sizeof(buf), "pfs:%s", name);
	(void)pthread_setname_np(t, buf);
}

int bg_start(struct bg *b, const char *name, void *(*fn)(void *), void *arg)
{
	pthread_t *thr = realloc(b->thr, (b->nthr + 1) * sizeof(*thr));

	if (!thr)
		return -ENOMEM;
	b->thr = thr;
	int rc = pthread_create(&b->thr[b->nthr], NULL, fn, arg);
	if (rc)
		return -rc;
	bg_name(b->thr[b->nthr], name);
	b->nthr++;
	return 0;
}

void bg_stop(struct bg *b)
{
	pthread_mutex_lock(&b->lock);
	b->stop = true;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
	while (b->nthr)
		pthread_join(b->thr[--b->nthr], NULL);
}

void bg_wake(struct bg *b)
{
	pthread_cond_signal(&b->cond);
}

void bg_wake_all(struct bg *b)
{
	pthread_cond_broadcast(&b->cond);
}

void bg_wait(struct bg *b)
{
	pthread_cond_wait(&b->cond, &b->lock);
}

void bg_wait_ns(struct bg *b, int64_t ns)
{
	struct timespec ts;

	if (ns <= 0)
		return;
	ts = pfs_deadline_ns(ns);
	pthread_cond_timedwait(&b->cond, &b->lock, &ts);
}
