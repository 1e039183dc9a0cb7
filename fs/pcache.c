/* pcache.c: the persistent content cache on local disk (see pcache_i.h). */
#include <dirent.h>
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

#include "bg_i.h"
#include "client_i.h"
#include "pcache_fmt.h"
#include "pcache_i.h"
#include "podfs/clock.h"
#include "podfs/hash.h"
#include "podfs/htab.h"
#include "podfs/log.h"
#include "rpc_i.h"

_Static_assert(PCF_FH_MAX >= PFS_FH_MAX, "entry header must hold any handle");

#define QUEUE_BYTES_MAX ((size_t)64 << 20) /* offered data waiting to be written */
#define QUEUE_FETCH_MAX 1024               /* fetches waiting */
#define EVICT_TO_PCT 90                    /* eviction goes down to this % of the cap */
#define CHUNK PFS_MAX_IO                   /* I/O unit of fetches */
/* At unmount, queued fetches still run for this long (the connection is
 * up until then): a short job's reads should warm its next mount too. */
#define DRAIN_S 10
/* A file whose mtime is this recent is not fetched in the background: it
 * is probably still being written (a log, a shard), and every version
 * would cost a whole-file fetch. */
#define FETCH_MIN_AGE_S 10

/* One entry of the index (one file in e/). */
struct pent {
	struct hnode hn;   /* pc->tab, by name */
	uint64_t name;     /* hash of the handle: the file name */
	uint64_t bytes;    /* disk bytes counted against the cap */
	int64_t last_use;  /* ns since the epoch (kept as the file's mtime) */
};

enum job_kind { JOB_STORE, JOB_FETCH };

struct job {
	struct job *next;
	enum job_kind kind;
	struct pcf_key k;
	struct pfs_fh fh;
	struct pfs_creds cr; /* JOB_FETCH */
	uint8_t *data;       /* JOB_STORE: the content, k.size bytes */
};

struct pcache {
	int dirfd, efd, tmpfd, lockfd;
	uint64_t max_bytes;
	struct client *c;

	/* The scan and worker threads; bg.lock guards everything below. */
	struct bg bg;
	struct htab tab;      /* struct pent */
	size_t nents;
	uint64_t total;       /* sum of pent.bytes */
	bool scanned;         /* the index holds every file of e/ */
	struct job *qhead, *qtail;
	size_t qbytes, qfetches;
	int64_t drain_until;  /* CLOCK_MONOTONIC s: fetches after it are dropped */
	bool busy;            /* the worker is on a job */
	bool started;
	uint64_t tmp_seq;

	atomic_uint_fast64_t hits, misses, bytes_served, stored, fetched, discarded, evicted;
};

static void name_str(uint64_t name, char out[17])
{
	snprintf(out, 17, "%016" PRIx64, name);
}

static bool parse_name(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;
	for (i = 0; s[i]; i++) {
		char ch = s[i];
		int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
		if (d < 0 || i >= 16)
			return false;
		v = v << 4 | (uint64_t)d;
	}
	if (i != 16)
		return false;
	*out = v;
	return true;
}

static void key_of(struct pcf_key *k, const struct pfs_fh *fh, const struct dver *v)
{
	memset(k, 0, sizeof(*k));
	k->fh_len = fh->len;
	memcpy(k->fh, fh->data, fh->len);
	k->size = v->size;
	k->mtime_s = v->mtime_s;
	k->ctime_s = v->ctime_s;
	k->mtime_ns = v->mtime_ns;
	k->ctime_ns = v->ctime_ns;
}

static uint64_t disk_bytes(uint64_t file_size)
{
	return (file_size + 4095) & ~(uint64_t)4095;
}

/* True if fetches are no longer wanted (stopping, drain time over).
 * Called with pc->bg.lock. */
static bool fetch_over(struct pcache *pc)
{
	return pc->bg.stop && (pfs_mono_ns() / 1000000000) >= pc->drain_until;
}

static int64_t ts_ns(const struct timespec *ts)
{
	return ts->tv_sec * 1000000000ll + ts->tv_nsec;
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts_ns(&ts);
}

static int64_t now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec;
}

/* ---- index (pc->bg.lock held) ---- */

static struct pent *ent_find(struct pcache *pc, uint64_t name)
{
	uint64_t h = pfs_hash_u64(name);

	for (struct hnode *n = htab_first(&pc->tab, h); n; n = htab_next(n, h))
		if (container_of(n, struct pent, hn)->name == name)
			return container_of(n, struct pent, hn);
	return NULL;
}

/* Records file name with bytes and last use (replacing what was known). */
static void ent_set(struct pcache *pc, uint64_t name, uint64_t bytes, int64_t last_use)
{
	struct pent *e = ent_find(pc, name);
	if (!e) {
		if (!(e = calloc(1, sizeof(*e))))
			return; /* not counted; the next scan at mount counts it */
		e->name = name;
		htab_insert(&pc->tab, &e->hn, pfs_hash_u64(name));
		pc->nents++;
	} else {
		pc->total -= e->bytes;
	}
	e->bytes = bytes;
	e->last_use = last_use;
	pc->total += bytes;
}

static void ent_del(struct pcache *pc, uint64_t name)
{
	struct pent *e = ent_find(pc, name);

	if (e) {
		htab_remove(&pc->tab, &e->hn);
		pc->total -= e->bytes;
		pc->nents--;
		free(e);
	}
}

/* Deletes entry file name (damaged or evicted). */
static void drop_file(struct pcache *pc, uint64_t name)
{
	char s[17];
	name_str(name, s);
	if (unlinkat(pc->efd, s, 0) < 0 && errno != ENOENT)
		pfs_warn("pcache: cannot remove entry %s: %s", s, strerror(errno));
	pthread_mutex_lock(&pc->bg.lock);
	ent_del(pc, name);
	pthread_mutex_unlock(&pc->bg.lock);
}

/* ---- open / close ---- */

static int open_subdir(int dirfd, const char *name)
{
	if (mkdirat(dirfd, name, 0700) < 0 && errno != EEXIST)
		return -errno;
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
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
	if ((pc->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		rc = -errno;
		snprintf(err, errlen, "cache_dir %s: %s", dir, strerror(-rc));
		goto out_free;
	}
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

static void *scan_main(void *arg);
static void *work_main(void *arg);

int pcache_start(struct pcache *pc, struct client *c)
{
	char pid[32];
	int n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	if (ftruncate(pc->lockfd, 0) < 0 || pwrite(pc->lockfd, pid, (size_t)n, 0) != n)
		pfs_warn("pcache: cannot write the lock file: %s", strerror(errno));
	pc->c = c;
	int rc = bg_start(&pc->bg, scan_main, pc);
	if (rc < 0)
		return rc;
	if ((rc = bg_start(&pc->bg, work_main, pc)) < 0) {
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

/* ---- reading ---- */

/* Reads all of buf[len] at off of fd: 0, or -1 if short or failing. */
static int pread_all(int fd, void *buf, size_t len, uint64_t off)
{
	size_t got = 0;
	while (got < len) {
		ssize_t r = pread(fd, (char *)buf + got, len - got, (off_t)(off + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

/* Opens entry name and checks its header against want: the fd (header
 * length in *hdr_len, file size in *st), -ENOENT if absent or of
 * another key, -EBADMSG if damaged. */
static int entry_open(struct pcache *pc, uint64_t name, const struct pcf_key *want,
		      size_t *hdr_len, struct stat *st)
{
	uint8_t hdr[PCF_HDR_MAX];
	struct pcf_key k;
	char s[17];

	name_str(name, s);
	int fd = openat(pc->efd, s, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -ENOENT;
	ssize_t n = pread(fd, hdr, sizeof(hdr), 0);
	if (n < 0 || fstat(fd, st) < 0) {
		close(fd);
		return -ENOENT;
	}
	/* A short file or a bad header: cut short or damaged (a crash, a
	 * bad disk), never served. */
	if (pcf_decode(hdr, (size_t)n, &k, hdr_len) < 0 ||
	    (uint64_t)st->st_size != pcf_data_off(*hdr_len, k.size) + k.size) {
		close(fd);
		return -EBADMSG;
	}
	if (!pcf_key_eq(&k, want)) {
		close(fd);
		return -ENOENT; /* another version (or handle): replaced when stored */
	}
	return fd;
}

static void discard(struct pcache *pc, uint64_t name, const char *why)
{
	char s[17];
	name_str(name, s);
	pfs_notice("pcache: entry %s %s; discarded", s, why);
	atomic_fetch_add(&pc->discarded, 1);
	drop_file(pc, name);
}

ssize_t pcache_read(struct pcache *pc, const struct pfs_fh *fh, const struct dver *v,
		    uint64_t off, size_t size, void *buf)
{
	uint64_t name = pcf_name_hash(fh->data, fh->len);
	struct pcf_key want;
	struct stat st;
	size_t hdr_len;
	ssize_t ret = 0;

	pthread_mutex_lock(&pc->bg.lock);
	bool absent = pc->scanned && !ent_find(pc, name);
	pthread_mutex_unlock(&pc->bg.lock);
	if (absent)
		goto out_miss;
	key_of(&want, fh, v);
	int fd = entry_open(pc, name, &want, &hdr_len, &st);
	if (fd == -EBADMSG)
		discard(pc, name, "is damaged");
	if (fd < 0)
		goto out_miss;

	if (off < v->size && size > 0) {
		/* The whole blocks the range covers, each checked against its
		 * checksum on every read. */
		uint64_t end = v->size - off < size ? v->size : off + size;
		uint64_t b0 = off >> PCF_BLOCK_LOG2, b1 = (end - 1) >> PCF_BLOCK_LOG2;
		uint64_t boff = b0 << PCF_BLOCK_LOG2;
		uint64_t bend = (b1 + 1) << PCF_BLOCK_LOG2;
		if (bend > v->size)
			bend = v->size;
		size_t nb = (size_t)(b1 - b0 + 1);
		uint8_t *blk = malloc((size_t)(bend - boff));
		uint8_t *tab = malloc(4 * nb);
		if (!blk || !tab) {
			free(blk);
			free(tab);
			close(fd);
			goto out_miss;
		}
		uint64_t data_off = pcf_data_off(hdr_len, v->size);
		bool ok = pread_all(fd, tab, 4 * nb, hdr_len + 4 * b0) == 0 &&
			  pread_all(fd, blk, (size_t)(bend - boff), data_off + boff) == 0;
		if (ok && pcf_check_blocks(blk, (size_t)(bend - boff), tab) == 0) {
			ret = (ssize_t)(end - off);
			memcpy(buf, blk + (off - boff), (size_t)ret);
		} else {
			ret = -1;
		}
		free(blk);
		free(tab);
		if (ret < 0) {
			close(fd);
			discard(pc, name, ok ? "fails its checksum" : "cannot be read");
			goto out_miss;
		}
	}
	/* Last use: the index at once, the file's mtime (what survives a
	 * remount) at most every PCACHE_TOUCH_S seconds. */
	int64_t now = now_ns();
	bool touch = now - ts_ns(&st.st_mtim) >= PCACHE_TOUCH_S * 1000000000ll;
	pthread_mutex_lock(&pc->bg.lock);
	struct pent *e = ent_find(pc, name);
	if (!e && pc->scanned)
		ent_set(pc, name, disk_bytes((uint64_t)st.st_size), now);
	else if (e)
		e->last_use = now;
	pthread_mutex_unlock(&pc->bg.lock);
	if (touch)
		(void)futimens(fd, NULL);
	close(fd);
	atomic_fetch_add_explicit(&pc->hits, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&pc->bytes_served, (uint64_t)ret, memory_order_relaxed);
	return ret;
out_miss:
	atomic_fetch_add_explicit(&pc->misses, 1, memory_order_relaxed);
	return -ENOENT;
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
	key_of(&j->k, fh, v);
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
	key_of(&j->k, fh, v);
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

/* ---- the worker: storing, fetching, evicting ---- */

/* True if e/ already holds a sound header for exactly key k. */
static bool have_entry(struct pcache *pc, uint64_t name, const struct pcf_key *k)
{
	struct stat st;
	size_t hdr_len;
	int fd = entry_open(pc, name, k, &hdr_len, &st);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* Writes all of buf[len] at off. 0 or -errno. */
static int pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	const char *p = buf;
	while (len) {
		ssize_t n = pwrite(fd, p, len, off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

/* A temporary file under tmp/ (its name in tmp[]). */
static int tmp_create(struct pcache *pc, uint64_t name, char tmp[64])
{
	pthread_mutex_lock(&pc->bg.lock);
	uint64_t seq = ++pc->tmp_seq;
	pthread_mutex_unlock(&pc->bg.lock);
	snprintf(tmp, 64, "%016" PRIx64 ".%ld.%" PRIu64, name, (long)getpid(), seq);
	int fd = openat(pc->tmpfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	return fd < 0 ? -errno : fd;
}

/* Header and checksums last, then the rename: a crash leaves a
 * temporary (removed at the next start) or a whole entry. */
static int tmp_commit(struct pcache *pc, int fd, const char *tmp, uint64_t name,
		      const struct pcf_key *k, const uint8_t *table)
{
	uint8_t hdr[PCF_HDR_MAX];
	char s[17];
	int n = pcf_encode(k, hdr, sizeof(hdr));
	int rc = n < 0 ? n : pwrite_all(fd, hdr, (size_t)n, 0);
	if (rc == 0)
		rc = pwrite_all(fd, table, 4 * pcf_nblocks(k->size), n);
	if (rc < 0)
		return rc;
	name_str(name, s);
	if (renameat(pc->tmpfd, tmp, pc->efd, s) < 0)
		return -errno;
	pthread_mutex_lock(&pc->bg.lock);
	ent_set(pc, name, disk_bytes(pcf_data_off((size_t)n, k->size) + k->size), now_ns());
	pthread_mutex_unlock(&pc->bg.lock);
	return 0;
}

static int store(struct pcache *pc, const struct job *j, uint64_t name)
{
	char tmp[64];
	uint64_t data_off = pcf_data_off(PCF_FIXED + j->k.fh_len, j->k.size);
	uint8_t *table = malloc(4 * pcf_nblocks(j->k.size));
	if (!table)
		return -ENOMEM;
	int fd = tmp_create(pc, name, tmp);
	if (fd < 0) {
		free(table);
		return fd;
	}
	pcf_block_crcs(j->data, j->k.size, table);
	int rc = pwrite_all(fd, j->data, j->k.size, (off_t)data_off);
	if (rc == 0)
		rc = tmp_commit(pc, fd, tmp, name, &j->k, table);
	close(fd);
	if (rc < 0)
		unlinkat(pc->tmpfd, tmp, 0);
	free(table);
	return rc;
}

/* Reads the whole file of j from the server (READ with a fid of its
 * own, released at the end) into a new entry. */
static int fetch(struct pcache *pc, const struct job *j, uint64_t name)
{
	struct client *c = pc->c;
	struct pfs_read_req m;
	char tmp[64];
	uint64_t data_off = pcf_data_off(PCF_FIXED + j->k.fh_len, j->k.size);
	uint64_t off = 0;
	int rc = 0;

	_Static_assert(CHUNK % PCF_BLOCK == 0, "fetched chunks are whole blocks");
	uint8_t *table = malloc(4 * pcf_nblocks(j->k.size));
	if (!table)
		return -ENOMEM;
	int fd = tmp_create(pc, name, tmp);
	if (fd < 0) {
		free(table);
		return fd;
	}
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
			pcf_block_crcs(r.data.p, r.data.len, table + 4 * (off >> PCF_BLOCK_LOG2));
			rc = pwrite_all(fd, r.data.p, r.data.len, (off_t)(data_off + off));
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
	if (rc == 0) {
		/* The data was read after the version was seen: it is that
		 * version's content, or newer if the file changed meanwhile,
		 * and then that version is never current again. */
		rc = tmp_commit(pc, fd, tmp, name, &j->k, table);
		if (rc == 0)
			atomic_fetch_add(&pc->fetched, 1);
	}
	close(fd);
	if (rc < 0)
		unlinkat(pc->tmpfd, tmp, 0);
	free(table);
	return rc;
}

static int cmp_lru(const void *a, const void *b)
{
	const struct pent *x = *(struct pent *const *)a, *y = *(struct pent *const *)b;
	return x->last_use < y->last_use ? -1 : x->last_use > y->last_use;
}

/* Deletes least recently used entries until the total is under
 * EVICT_TO_PCT % of the cap. Worker thread, only once scanned. */
static void evict(struct pcache *pc)
{
	pthread_mutex_lock(&pc->bg.lock);
	if (!pc->scanned || pc->total <= pc->max_bytes) {
		pthread_mutex_unlock(&pc->bg.lock);
		return;
	}
	size_t n = 0;
	struct pent **v = malloc(pc->nents * sizeof(*v) + 1);
	uint64_t *names = malloc(pc->nents * sizeof(*names) + 1);
	if (!v || !names) {
		pthread_mutex_unlock(&pc->bg.lock);
		free(v);
		free(names);
		return;
	}
	size_t pos;
	for (struct hnode *e = htab_iter(&pc->tab, &pos, NULL); e; e = htab_iter(&pc->tab, &pos, e))
		v[n++] = container_of(e, struct pent, hn);
	qsort(v, n, sizeof(*v), cmp_lru);
	uint64_t target = pc->max_bytes / 100 * EVICT_TO_PCT;
	uint64_t total = pc->total;
	size_t k = 0;
	for (size_t i = 0; i < n && total > target; i++) {
		total -= v[i]->bytes;
		names[k++] = v[i]->name;
	}
	pthread_mutex_unlock(&pc->bg.lock);
	for (size_t i = 0; i < k; i++) {
		drop_file(pc, names[i]);
		atomic_fetch_add(&pc->evicted, 1);
	}
	free(names);
	free(v);
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
		if (!skip && !have_entry(pc, name, &j->k)) {
			int rc = j->kind == JOB_STORE ? store(pc, j, name) : fetch(pc, j, name);
			if (rc == 0 && j->kind == JOB_STORE)
				atomic_fetch_add(&pc->stored, 1);
			else if (rc < 0 && rc != -ECANCELED)
				pfs_debug("pcache: %s of an entry failed: %s",
					  j->kind == JOB_STORE ? "store" : "fetch", strerror(-rc));
			evict(pc);
		}
		job_free(j);
		pthread_mutex_lock(&pc->bg.lock);
		pc->busy = false;
	}
	pthread_mutex_unlock(&pc->bg.lock);
	return NULL;
}

/* ---- the start-up scan ---- */

static void clean_tmp(struct pcache *pc)
{
	int fd = openat(pc->tmpfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	unsigned n = 0;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	/* This process holds the lock: everything in tmp/ is a leftover. */
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' && unlinkat(pc->tmpfd, de->d_name, 0) == 0)
			n++;
	closedir(d);
	if (n)
		pfs_notice("pcache: removed %u unfinished entries of an earlier run", n);
}

static void *scan_main(void *arg)
{
	struct pcache *pc = arg;
	int fd = openat(pc->efd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;

	clean_tmp(pc);
	if (!d) {
		pfs_warn("pcache: cannot list the cache: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL; /* never scanned: nothing is evicted, reads still work */
	}
	while ((de = readdir(d))) {
		struct stat st;
		uint64_t name;
		if (de->d_name[0] == '.')
			continue;
		if (!parse_name(de->d_name, &name)) {
			unlinkat(pc->efd, de->d_name, 0); /* not ours: e/ is private */
			continue;
		}
		if (fstatat(pc->efd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		pthread_mutex_lock(&pc->bg.lock);
		bool stop = pc->bg.stop;
		/* Entries written since the start are known already. */
		if (!ent_find(pc, name))
			ent_set(pc, name, disk_bytes((uint64_t)st.st_size), ts_ns(&st.st_mtim));
		pthread_mutex_unlock(&pc->bg.lock);
		if (stop)
			break;
	}
	closedir(d);
	pthread_mutex_lock(&pc->bg.lock);
	pc->scanned = true;
	pfs_info("pcache: %zu entries, %" PRIu64 " bytes", pc->nents, pc->total);
	pthread_mutex_unlock(&pc->bg.lock);
	/* The cap may have shrunk since the last run. */
	evict(pc);
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
