/* pcache.c: the persistent content cache on local disk: its lifetime,
 * the queue of entries to store and files to fetch, the worker thread
 * and the statistics (see pcache_i.h; the entries themselves are
 * pcache_disk.c's). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "client_i.h"
#include "pcache_disk_i.h"
#include "podfs/clock.h"
#include "podfs/log.h"
#include "rpc_i.h"

_Static_assert(PCF_FH_MAX >= PFS_FH_MAX, "entry header must hold any handle");

#define QUEUE_BYTES_MAX ((size_t)64 << 20) /* offered data waiting to be written */
#define QUEUE_FETCH_MAX 1024               /* fetches waiting */
#define CHUNK PFS_MAX_IO                   /* I/O unit of fetches */
/* At unmount, queued fetches still run for this long (the connection is
 * up until then): a short job's reads should warm its next mount too. */
#define DRAIN_S 10
/* A file whose mtime is this recent is not fetched in the background: it
 * is probably still being written (a log, a shard), and every version
 * would cost a whole-file fetch. */
#define FETCH_MIN_AGE_S 10

/* True if fetches are no longer wanted (stopping, drain time over).
 * Called with pc->bg.lock. */
static bool fetch_over(struct pcache *pc)
{
	return pc->bg.stop && (pfs_mono_ns() / 1000000000) >= pc->drain_until;
}

static int64_t now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec;
}

/* ---- open / close ---- */

static int open_subdir(int dirfd, const char *name)
{
	if (mkdirat(dirfd, name, 0700) < 0 && errno != EEXIST)
		return -errno;
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* The cache's entries are served as file contents without asking podfsd:
 * whoever can write to the directory can make this mount return data of
 * their choosing. So it must be this user's (or root's, for a mount run
 * as root) and writable by nobody else. */
static int check_owner(int dirfd, const char *dir, char *err, size_t errlen)
{
	struct stat st;

	if (fstat(dirfd, &st) < 0) {
		snprintf(err, errlen, "cache_dir %s: %s", dir, strerror(errno));
		return -errno;
	}
	if (st.st_uid != geteuid() && st.st_uid != 0) {
		snprintf(err, errlen, "cache_dir %s belongs to uid %u; it must be this "
			 "user's (uid %u)", dir, (unsigned)st.st_uid, (unsigned)geteuid());
		return -EPERM;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(err, errlen, "cache_dir %s is writable by others (mode %04o); "
			 "run chmod go-w on it", dir, (unsigned)(st.st_mode & 07777));
		return -EPERM;
	}
	return 0;
}

int pcache_open(const char *dir, uint64_t max_bytes, struct pcache **out, char *err,
		size_t errlen)
{
	struct pcache *pc = calloc(1, sizeof(*pc));
	int rc;

	if (!pc) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	pc->dirfd = pc->efd = pc->tmpfd = pc->lockfd = -1;
	pc->max_bytes = max_bytes;
	htab_init(&pc->tab);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		rc = -errno;
		snprintf(err, errlen, "cache_dir %s: cannot create it: %s", dir, strerror(-rc));
		goto out_free;
	}
	if ((pc->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		rc = -errno;
		if (rc == -ELOOP || rc == -ENOTDIR)
			snprintf(err, errlen, "cache_dir %s is not a directory (a symbolic link "
				 "is refused too)", dir);
		else
			snprintf(err, errlen, "cache_dir %s: %s", dir, strerror(-rc));
		goto out_free;
	}
	if ((rc = check_owner(pc->dirfd, dir, err, errlen)) < 0)
		goto out_free;
	pc->lockfd = openat(pc->dirfd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (pc->lockfd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cache_dir %s: cannot create its lock file: %s", dir,
			 strerror(-rc));
		goto out_free;
	}
	/* flock: held by the open file description, so it survives
	 * fuse_daemonize's fork and ends with the process. */
	if (flock(pc->lockfd, LOCK_EX | LOCK_NB) < 0) {
		rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
		char pid[32] = "";
		ssize_t n = pread(pc->lockfd, pid, sizeof(pid) - 1, 0);
		pid[n > 0 ? n : 0] = 0;
		pid[strcspn(pid, "\n")] = 0;
		if (rc == -EBUSY)
			snprintf(err, errlen,
				 "cache_dir %s is in use by another podfs mount (pid %s); "
				 "give each mount its own cache_dir",
				 dir, pid[0] ? pid : "?");
		else
			snprintf(err, errlen, "cache_dir %s: cannot lock it: %s", dir,
				 strerror(-rc));
		goto out_free;
	}
	if ((rc = open_subdir(pc->dirfd, "e")) < 0 ||
	    (pc->efd = rc, rc = open_subdir(pc->dirfd, "tmp")) < 0) {
		snprintf(err, errlen, "cache_dir %s: cannot create its subdirectories: %s", dir,
			 strerror(-rc));
		goto out_free;
	}
	pc->tmpfd = rc;
	if ((rc = bg_init(&pc->bg)) < 0) {
		snprintf(err, errlen, "out of memory");
		close(pc->tmpfd);
		goto out_free;
	}
	*out = pc;
	return 0;
out_free:
	if (pc->efd >= 0)
		close(pc->efd);
	if (pc->lockfd >= 0)
		close(pc->lockfd);
	if (pc->dirfd >= 0)
		close(pc->dirfd);
	free(pc);
	return rc;
}

static void *work_main(void *arg);

int pcache_start(struct pcache *pc, struct client *c)
{
	char pid[32];
	int n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	if (ftruncate(pc->lockfd, 0) < 0 || pwrite(pc->lockfd, pid, (size_t)n, 0) != n)
		pfs_warn("pcache: cannot write the lock file: %s", strerror(errno));
	pc->c = c;
	int rc = bg_start(&pc->bg, "pcache-scan", pcd_scan_main, pc);
	if (rc < 0)
		return rc;
	if ((rc = bg_start(&pc->bg, "pcache", work_main, pc)) < 0) {
		bg_stop(&pc->bg);
		return rc;
	}
	pc->started = true;
	return 0;
}

static void job_free(struct job *j)
{
	free(j->data);
	free(j);
}

void pcache_stop(struct pcache *pc)
{
	if (!pc || !pc->started)
		return;
	/* Before stop: fetches are not over until both are set. */
	pthread_mutex_lock(&pc->bg.lock);
	pc->drain_until = (pfs_mono_ns() / 1000000000) + DRAIN_S;
	pthread_mutex_unlock(&pc->bg.lock);
	bg_stop(&pc->bg);
	pc->started = false;
}

void pcache_free(struct pcache *pc)
{
	if (!pc)
		return;
	pcache_stop(pc);
	while (pc->qhead) {
		struct job *j = pc->qhead;
		pc->qhead = j->next;
		job_free(j);
	}
	for (struct hnode *n; (n = htab_pop(&pc->tab));)
		free(container_of(n, struct pent, hn));
	htab_fini(&pc->tab);
	bg_fini(&pc->bg);
	close(pc->tmpfd);
	close(pc->efd);
	close(pc->lockfd); /* releases the flock */
	close(pc->dirfd);
	free(pc);
}

/* ---- queueing ---- */

bool pcache_wants(struct pcache *pc, uint64_t size)
{
	return size > 0 && size <= pc->max_bytes / PCACHE_FILE_DIV;
}

static bool queued(struct pcache *pc, const struct pcf_key *k)
{
	for (struct job *j = pc->qhead; j; j = j->next)
		if (pcf_key_eq(&j->k, k))
			return true;
	return false;
}

static void enqueue(struct pcache *pc, struct job *j)
{
	j->next = NULL;
	if (pc->qtail)
		pc->qtail->next = j;
	else
		pc->qhead = j;
	pc->qtail = j;
	bg_wake(&pc->bg);
}

void pcache_offer(struct pcache *pc, const struct pfs_fh *fh, const struct dver *v,
		  const void *data, size_t len)
{
	struct job *j;

	if (len != v->size || !pcache_wants(pc, len) || !(j = calloc(1, sizeof(*j))))
		return;
	j->kind = JOB_STORE;
	pcd_key(&j->k, fh, v);
	j->fh = *fh;
	if (!(j->data = malloc(len))) {
		free(j);
		return;
	}
	memcpy(j->data, data, len);
	pthread_mutex_lock(&pc->bg.lock);
	if (pc->bg.stop || pc->qbytes + len > QUEUE_BYTES_MAX || queued(pc, &j->k)) {
		pthread_mutex_unlock(&pc->bg.lock);
		job_free(j);
		return;
	}
	pc->qbytes += len;
	enqueue(pc, j);
	pthread_mutex_unlock(&pc->bg.lock);
}

void pcache_fetch(struct pcache *pc, const struct pfs_creds *cr, const struct pfs_fh *fh,
		  const struct dver *v)
{
	struct job *j;

	if (!pcache_wants(pc, v->size) || now_s() - v->mtime_s < FETCH_MIN_AGE_S ||
	    !(j = calloc(1, sizeof(*j))))
		return;
	j->kind = JOB_FETCH;
	pcd_key(&j->k, fh, v);
	j->fh = *fh;
	j->cr = *cr;
	pthread_mutex_lock(&pc->bg.lock);
	if (pc->bg.stop || pc->qfetches >= QUEUE_FETCH_MAX || queued(pc, &j->k)) {
		pthread_mutex_unlock(&pc->bg.lock);
		job_free(j);
		return;
	}
	pc->qfetches++;
	enqueue(pc, j);
	pthread_mutex_unlock(&pc->bg.lock);
}

/* Reads the whole file of j from the server (READ with a fid of its
 * own, released at the end) into a new entry. */
static int fetch(struct pcache *pc, const struct job *j, uint64_t name)
{
	struct client *c = pc->c;
	struct pfs_read_req m;
	struct pcd_writer w;
	uint64_t off = 0;

	_Static_assert(CHUNK % PCF_BLOCK == 0, "fetched chunks are whole blocks");
	int rc = pcd_begin(pc, name, &j->k, &w);
	if (rc < 0)
		return rc;
	m.cr = j->cr;
	m.fh = j->fh;
	m.fid = atomic_fetch_add(&c->next_fid, 1);
	m.flags = O_RDONLY;
	while (rc == 0 && off < j->k.size) {
		struct rpc_reply rep = { 0 };
		struct pfs_read_rep r;
		m.offset = off;
		m.size = j->k.size - off > CHUNK ? CHUNK : (uint32_t)(j->k.size - off);
		rc = rpc_msg(c->rpc, PFS_OP_READ, read_req, &m, &rep);
		if (rc == 0 && pfs_dec_read_rep(rep.buf, rep.len, &r) < 0)
			rc = -EIO;
		else if (rc == 0 && r.data.len != m.size)
			rc = -ESTALE; /* not the size its version says: changed */
		if (rc == 0) {
			rc = pcd_write(&w, off, r.data.p, r.data.len);
			off += r.data.len;
		}
		rpc_reply_free(&rep);
		pthread_mutex_lock(&pc->bg.lock);
		if (fetch_over(pc))
			rc = rc ? rc : -ECANCELED;
		pthread_mutex_unlock(&pc->bg.lock);
	}
	struct pfs_release_req rm = { .cr = j->cr, .fh = j->fh, .fid = m.fid };
	struct rpc_reply rep = { 0 };
	(void)rpc_msg(c->rpc, PFS_OP_RELEASE, release_req, &rm, &rep);
	rpc_reply_free(&rep);
	/* The data was read after the version was seen: it is that
	 * version's content, or newer if the file changed meanwhile, and
	 * then that version is never current again. */
	rc = pcd_end(&w, rc);
	if (rc == 0)
		atomic_fetch_add(&pc->fetched, 1);
	return rc;
}

/* Stores the content a JOB_STORE carries as entry name. */
static int store(struct pcache *pc, const struct job *j, uint64_t name)
{
	struct pcd_writer w;
	int rc = pcd_begin(pc, name, &j->k, &w);

	if (rc < 0)
		return rc;
	return pcd_end(&w, pcd_write(&w, 0, j->data, j->k.size));
}

static void *work_main(void *arg)
{
	struct pcache *pc = arg;

	pthread_mutex_lock(&pc->bg.lock);
	for (;;) {
		while (!pc->qhead && !pc->bg.stop)
			bg_wait(&pc->bg);
		struct job *j = pc->qhead;
		if (!j)
			break; /* stopping, nothing left */
		pc->qhead = j->next;
		if (!pc->qhead)
			pc->qtail = NULL;
		if (j->kind == JOB_STORE)
			pc->qbytes -= j->k.size;
		else
			pc->qfetches--;
		/* At shutdown, entries already in memory are still written;
		 * fetches (which need the server) only for DRAIN_S seconds. */
		bool skip = j->kind == JOB_FETCH && fetch_over(pc);
		pc->busy = true;
		pthread_mutex_unlock(&pc->bg.lock);

		uint64_t name = pcf_name_hash(j->fh.data, j->fh.len);
		if (!skip && !pcd_have(pc, name, &j->k)) {
			int rc = j->kind == JOB_STORE ? store(pc, j, name) : fetch(pc, j, name);
			if (rc == 0 && j->kind == JOB_STORE)
				atomic_fetch_add(&pc->stored, 1);
			else if (rc < 0 && rc != -ECANCELED)
				pfs_debug("pcache: %s of an entry failed: %s",
					  j->kind == JOB_STORE ? "store" : "fetch", strerror(-rc));
			pcd_evict(pc);
		}
		job_free(j);
		pthread_mutex_lock(&pc->bg.lock);
		pc->busy = false;
	}
	pthread_mutex_unlock(&pc->bg.lock);
	return NULL;
}

size_t pcache_format_stats(struct pcache *pc, char *buf, size_t cap)
{
	pthread_mutex_lock(&pc->bg.lock);
	uint64_t total = pc->total, nents = pc->nents, qn = pc->qfetches + pc->busy;
	for (struct job *j = pc->qhead; j; j = j->next)
		qn += j->kind == JOB_STORE;
	pthread_mutex_unlock(&pc->bg.lock);
	int n = snprintf(buf, cap,
			 "pcache_hits %" PRIu64 "\npcache_misses %" PRIu64 "\npcache_bytes %" PRIu64
			 "\npcache_stored %" PRIu64 "\npcache_fetched %" PRIu64
			 "\npcache_discarded %" PRIu64 "\npcache_evicted %" PRIu64
			 "\npcache_entries %" PRIu64 "\npcache_disk %" PRIu64
			 "\npcache_queued %" PRIu64 "\n",
			 (uint64_t)atomic_load(&pc->hits), (uint64_t)atomic_load(&pc->misses),
			 (uint64_t)atomic_load(&pc->bytes_served), (uint64_t)atomic_load(&pc->stored),
			 (uint64_t)atomic_load(&pc->fetched), (uint64_t)atomic_load(&pc->discarded),
			 (uint64_t)atomic_load(&pc->evicted), nents, total, qn);
	return n < 0 || (size_t)n >= cap ? 0 : (size_t)n;
}
