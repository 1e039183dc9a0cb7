/* pcache_disk.c: the persistent content cache's entries on disk and
 * their index (see pcache_disk_i.h). */
#include "pcache_disk_i.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "podfs/hash.h"
#include "podfs/log.h"

#define EVICT_TO_PCT 90 /* eviction goes down to this % of the cap */

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

void pcd_key(struct pcf_key *k, const struct pfs_fh *fh, const struct dver *v)
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

uint64_t pcd_disk_bytes(uint64_t file_size)
{
	return (file_size + 4095) & ~(uint64_t)4095;
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

/* ---- the index (pc->bg.lock held) ---- */

struct pent *pcd_find(struct pcache *pc, uint64_t name)
{
	uint64_t h = pfs_hash_u64(name);

	for (struct hnode *n = htab_first(&pc->tab, h); n; n = htab_next(n, h))
		if (container_of(n, struct pent, hn)->name == name)
			return container_of(n, struct pent, hn);
	return NULL;
}

void pcd_set(struct pcache *pc, uint64_t name, uint64_t bytes, int64_t last_use)
{
	struct pent *e = pcd_find(pc, name);
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
	struct pent *e = pcd_find(pc, name);

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
	bool absent = pc->scanned && !pcd_find(pc, name);
	pthread_mutex_unlock(&pc->bg.lock);
	if (absent)
		goto out_miss;
	pcd_key(&want, fh, v);
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
	struct pent *e = pcd_find(pc, name);
	if (!e && pc->scanned)
		pcd_set(pc, name, pcd_disk_bytes((uint64_t)st.st_size), now);
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

/* True if e/ already holds a sound header for exactly key k. */
bool pcd_have(struct pcache *pc, uint64_t name, const struct pcf_key *k)
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
static int write_all(int fd, const void *buf, size_t len, off_t off)
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
	int rc = n < 0 ? n : write_all(fd, hdr, (size_t)n, 0);
	if (rc == 0)
		rc = write_all(fd, table, 4 * pcf_nblocks(k->size), n);
	if (rc < 0)
		return rc;
	name_str(name, s);
	if (renameat(pc->tmpfd, tmp, pc->efd, s) < 0)
		return -errno;
	pthread_mutex_lock(&pc->bg.lock);
	pcd_set(pc, name, pcd_disk_bytes(pcf_data_off((size_t)n, k->size) + k->size), now_ns());
	pthread_mutex_unlock(&pc->bg.lock);
	return 0;
}

int pcd_begin(struct pcache *pc, uint64_t name, const struct pcf_key *k, struct pcd_writer *w)
{
	w->pc = pc;
	w->name = name;
	w->k = k;
	w->data_off = pcf_data_off(PCF_FIXED + k->fh_len, k->size);
	w->table = malloc(4 * pcf_nblocks(k->size));
	if (!w->table)
		return -ENOMEM;
	w->fd = tmp_create(pc, name, w->tmp);
	if (w->fd < 0) {
		free(w->table);
		return w->fd;
	}
	return 0;
}

int pcd_write(struct pcd_writer *w, uint64_t off, const void *data, size_t len)
{
	pcf_block_crcs(data, len, w->table + 4 * (off >> PCF_BLOCK_LOG2));
	return write_all(w->fd, data, len, (off_t)(w->data_off + off));
}

int pcd_end(struct pcd_writer *w, int rc)
{
	if (rc == 0)
		rc = tmp_commit(w->pc, w->fd, w->tmp, w->name, w->k, w->table);
	close(w->fd);
	if (rc < 0)
		unlinkat(w->pc->tmpfd, w->tmp, 0);
	free(w->table);
	return rc;
}

static int cmp_lru(const void *a, const void *b)
{
	const struct pent *x = *(struct pent *const *)a, *y = *(struct pent *const *)b;
	return x->last_use < y->last_use ? -1 : x->last_use > y->last_use;
}

void pcd_evict(struct pcache *pc)
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

void *pcd_scan_main(void *arg)
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
		if (!pcd_find(pc, name))
			pcd_set(pc, name, pcd_disk_bytes((uint64_t)st.st_size), ts_ns(&st.st_mtim));
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
	pcd_evict(pc);
	return NULL;
}
