/* test_idfile.c: a list of client ids in a file of podfsd's state
 * directory (daemon/idfile.c), written by several threads
 * (idfile_sync): a worker's write is durable and covers the changes
 * before it; the loop thread's write never waits for a writer at work,
 * whose write then covers the loop's change; the file never goes back
 * to an older version, with threads changing and writing at once.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "idfile_i.h"
#include "statedir.h"

#define MAGIC "podfs test ids 1"

/* The owner's side: a list under mu, its version gen. */
struct owner {
	pthread_mutex_t mu;
	uint64_t *ids;
	size_t n, cap;
	uint64_t gen;
	struct idfile_sync w;
};

static void owner_init(struct owner *o)
{
	memset(o, 0, sizeof(*o));
	pthread_mutex_init(&o->mu, NULL);
	o->cap = 4096;
	o->ids = calloc(o->cap, sizeof(uint64_t));
	idfile_sync_init(&o->w, dir, "ids", MAGIC, &o->mu, &o->ids, &o->n, &o->gen);
}

static void owner_fini(struct owner *o)
{
	idfile_sync_fini(&o->w);
	free(o->ids);
	pthread_mutex_destroy(&o->mu);
}

/* Adds id; returns the version to wait for. */
static uint64_t add(struct owner *o, uint64_t id)
{
	pthread_mutex_lock(&o->mu);
	o->ids[o->n++] = id;
	uint64_t need = ++o->gen;
	pthread_mutex_unlock(&o->mu);
	return need;
}

/* The ids in the file: count, and whether id is among them. */
static long in_file(struct owner *o, uint64_t id, bool *has)
{
	uint64_t *ids = NULL;
	long n = idfile_read(&o->w.file, &ids);

	*has = false;
	for (long i = 0; i < n; i++)
		if (ids[i] == id)
			*has = true;
	free(ids);
	return n;
}

static void test_worker_and_loop(void)
{
	struct owner o;
	bool has;

	statedir_fresh("idfile", "ids");
	owner_init(&o);
	CHECK_EQ(idfile_sync_write(&o.w, add(&o, 0xa)), 0);
	CHECK_EQ(in_file(&o, 0xa, &has), 1);
	CHECK(has);
	CHECK_EQ(o.w.synced, 1);
	/* Nothing new: no write. */
	CHECK_EQ(idfile_sync_write(&o.w, 1), 0);
	CHECK_EQ(idfile_sync_try(&o.w), 0);
	CHECK_EQ(o.w.written, 1);

	/* A writer at work (wmu held): the loop's write leaves its change
	 * to it, without waiting. */
	pthread_mutex_lock(&o.w.wmu);
	add(&o, 0xb);
	CHECK_EQ(idfile_sync_try(&o.w), 0);
	CHECK_EQ(in_file(&o, 0xb, &has), 1);
	CHECK(!has);
	pthread_mutex_unlock(&o.w.wmu);
	/* The writer, letting go, writes what was left to it. */
	CHECK_EQ(idfile_sync_try(&o.w), 0);
	CHECK_EQ(in_file(&o, 0xb, &has), 2);
	CHECK(has);
	CHECK_EQ(o.w.written, 2);
	CHECK_EQ(o.w.synced, 1);

	/* A worker's write after the loop's makes the latest durable. */
	CHECK_EQ(idfile_sync_write(&o.w, add(&o, 0xc)), 0);
	CHECK_EQ(o.w.synced, 3);
	CHECK_EQ(in_file(&o, 0xc, &has), 3);
	owner_fini(&o);
}

struct adder {
	struct owner *o;
	uint64_t base;
	bool loop; /* the loop thread's writes, else a worker's */
};

static void *add_many(void *arg)
{
	struct adder *a = arg;

	for (uint64_t i = 0; i < 200; i++) {
		uint64_t need = add(a->o, a->base + i);
		if (a->loop)
			CHECK_EQ(idfile_sync_try(&a->o->w), 0);
		else
			CHECK_EQ(idfile_sync_write(&a->o->w, need), 0);
	}
	return NULL;
}

/* Three workers and a loop thread add at once: in the end the file has
 * every id, and each worker's ids were durable when its write returned
 * (synced reached every need; checked through the final state). */
static void test_threads(void)
{
	struct owner o;
	pthread_t th[4];
	struct adder a[4];
	bool has;

	statedir_fresh("idfile", "ids");
	owner_init(&o);
	for (int t = 0; t < 4; t++) {
		a[t] = (struct adder){ .o = &o, .base = (uint64_t)(t + 1) << 32, .loop = t == 3 };
		CHECK_EQ(pthread_create(&th[t], NULL, add_many, &a[t]), 0);
	}
	for (int t = 0; t < 4; t++)
		pthread_join(th[t], NULL);
	/* The last writer may have been the loop, whose change a worker
	 * wrote: every change is in the file. */
	CHECK_EQ(o.w.written, o.gen);
	CHECK_EQ(in_file(&o, ((uint64_t)3 << 32) + 199, &has), 800);
	CHECK(has);
	CHECK_EQ(in_file(&o, ((uint64_t)4 << 32) + 199, &has), 800);
	CHECK(has);
	owner_fini(&o);
	statedir_remove();
}

int main(void)
{
	test_worker_and_loop();
	test_threads();
	return check_done("test_idfile");
}
