/* handles.c: wire handles (MAC'd kernel file handles) and the fd cache. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "podfs/auth.h"
#include "podfs/clock.h"
#include "podfs/hash.h"
#include "podfs/le.h"
#include "podfs/xalloc.h"
#include "handles_i.h"

#define FH_MAC_LEN 16
#define FH_TYPE_LEN 4
/* Smallest wire handle: type + at least one handle byte + MAC. */
#define FH_MIN (FH_TYPE_LEN + 1 + FH_MAC_LEN)
#define KH_MAX 128 /* MAX_HANDLE_SZ */
#define ORPHANS_MAX 1024

struct orphan {
	struct hent *e; /* one reference held */
	int64_t until;  /* CLOCK_MONOTONIC ms */
};

_Static_assert(FH_TYPE_LEN + KH_MAX + FH_MAC_LEN <= PFS_FH_MAX, "wire handle fits");

struct handles {
	int export_fd;
	int mount_id;
	uint8_t mkey[PFS_MAC_LEN]; /* per-export MAC key */
	struct pfs_hmac_key *mk;  /* mkey made ready (NULL: pfs_hmac) */
	struct pfs_fh root;
	uint64_t seed;
	pthread_mutex_t mu;
	struct htab tab;
	struct hent lru; /* sentinel */
	size_t n;
	size_t max;
	struct orphan orphans[ORPHANS_MAX]; /* oldest first */
	size_t norphans;
};

struct khandle {
	struct file_handle fh;
	unsigned char buf[KH_MAX];
};

/* --- the handle key file --- */

static int mkdir_p(const char *dir, char *err, size_t errlen)
{
	char *p = xstrdup(dir);
	int ret = 0;

	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s != '\0')
			continue;
		char c = *s;
		*s = '\0';
		if (mkdir(p, 0700) < 0 && errno != EEXIST) {
			ret = -errno;
			snprintf(err, errlen, "cannot create state directory %s: %s", p,
				 strerror(errno));
			break;
		}
		*s = c;
		if (c == '\0')
			break;
	}
	free(p);
	return ret;
}

int handles_load_key(const char *state_dir, uint8_t key[PFSD_HKEY_LEN], bool *created, char *err,
		     size_t errlen)
{
	char path[4096];
	struct stat st;
	int fd, ret;

	if (created)
		*created = false;
	ret = mkdir_p(state_dir, err, errlen);
	if (ret < 0)
		return ret;
	if (snprintf(path, sizeof(path), "%s/handle.key", state_dir) >= (int)sizeof(path)) {
		snprintf(err, errlen, "state directory path too long");
		return -ENAMETOOLONG;
	}
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0) {
			if (pfs_random(key, PFSD_HKEY_LEN) < 0 ||
			    write(fd, key, PFSD_HKEY_LEN) != PFSD_HKEY_LEN || fsync(fd) < 0) {
				ret = errno ? -errno : -EIO;
				snprintf(err, errlen, "cannot write %s: %s", path, strerror(-ret));
				close(fd);
				unlink(path);
				return ret;
			}
			close(fd);
			if (created)
				*created = true;
			return 0;
		}
		if (errno == EEXIST) /* another podfsd created it just now */
			fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return ret;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (st.st_mode & 077)) {
		snprintf(err, errlen, "%s must be a regular file with mode 0600", path);
		close(fd);
		return -EPERM;
	}
	ssize_t n = read(fd, key, PFSD_HKEY_LEN);
	close(fd);
	if (n != PFSD_HKEY_LEN || st.st_size != PFSD_HKEY_LEN) {
		snprintf(err, errlen, "%s is not a %d-byte key", path, PFSD_HKEY_LEN);
		return -EINVAL;
	}
	return 0;
}

/* --- wire format --- */

static void fh_mac(const struct handles *h, const uint8_t *body, size_t n, uint8_t out[FH_MAC_LEN])
{
	uint8_t mac[PFS_MAC_LEN];

	/* Every handle a listing hands out is MAC'd: the key's pads are
	 * hashed once (pfs_hmac_keyed), not at every call. */
	if (h->mk)
		pfs_hmac_keyed(h->mk, body, n, mac);
	else
		pfs_hmac(h->mkey, sizeof(h->mkey), body, n, mac);
	memcpy(out, mac, FH_MAC_LEN);
}

static void fh_build(const struct handles *h, const struct khandle *k, struct pfs_fh *out)
{
	size_t body = FH_TYPE_LEN + k->fh.handle_bytes;

	pfs_store_le32(out->data, (uint32_t)k->fh.handle_type);
	memcpy(out->data + FH_TYPE_LEN, k->fh.f_handle, k->fh.handle_bytes);
	fh_mac(h, out->data, body, out->data + body);
	out->len = body + FH_MAC_LEN;
}

/* Checks the MAC and unpacks fh into k. */
static int fh_parse(const struct handles *h, const struct pfs_fh *fh, struct khandle *k)
{
	uint8_t mac[FH_MAC_LEN];

	if (fh->len < FH_MIN || fh->len > FH_TYPE_LEN + KH_MAX + FH_MAC_LEN)
		return -ESTALE;
	size_t body = fh->len - FH_MAC_LEN;
	fh_mac(h, fh->data, body, mac);
	if (!pfs_mac_equal(mac, fh->data + body, FH_MAC_LEN))
		return -ESTALE;
	k->fh.handle_type = (int)pfs_load_le32(fh->data);
	k->fh.handle_bytes = body - FH_TYPE_LEN;
	memcpy(k->fh.f_handle, fh->data + FH_TYPE_LEN, k->fh.handle_bytes);
	return 0;
}

bool handles_foreign(const struct handles *h, const struct pfs_fh *fh)
{
	struct khandle k;

	return fh->len >= FH_MIN && fh->len <= FH_TYPE_LEN + KH_MAX + FH_MAC_LEN &&
	       fh_parse(h, fh, &k) < 0;
}

int handles_encode_at(struct handles *h, int dirfd, const char *name, struct pfs_fh *out)
{
	struct khandle k;
	int mnt;

	k.fh.handle_bytes = KH_MAX;
	if (name_to_handle_at(dirfd, name, &k.fh, &mnt, name[0] ? 0 : AT_EMPTY_PATH) < 0)
		return errno == EOVERFLOW ? -EOPNOTSUPP : -errno;
	if (mnt != h->mount_id)
		return -EXDEV;
	fh_build(h, &k, out);
	return 0;
}

int handles_encode(struct handles *h, int fd, struct pfs_fh *out)
{
	return handles_encode_at(h, fd, "", out);
}

/* --- cache --- */

static uint64_t fh_hash(const struct handles *h, const struct pfs_fh *fh)
{
	return pfs_hash_bytes(fh->data, fh->len, h->seed);
}

static void lru_unlink(struct hent *e)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
	e->prev = e->next = e;
}

static void lru_push_front(struct handles *h, struct hent *e)
{
	e->next = h->lru.next;
	e->prev = &h->lru;
	h->lru.next->prev = e;
	h->lru.next = e;
}

/* Caller holds h->mu. */
static struct hent *find(struct handles *h, const struct pfs_fh *fh, uint64_t hash)
{
	for (struct hnode *n = htab_first(&h->tab, hash); n; n = htab_next(n, hash)) {
		struct hent *e = container_of(n, struct hent, hn);
		if (e->fh.len == fh->len && memcmp(e->fh.data, fh->data, fh->len) == 0)
			return e;
	}
	return NULL;
}

/* Takes e out of the table; closes it now if unused. Caller holds h->mu. */
static void drop(struct handles *h, struct hent *e)
{
	htab_remove(&h->tab, &e->hn);
	lru_unlink(e);
	h->n--;
	e->dead = true;
	if (e->refs == 0) {
		close(e->fd);
		free(e);
	}
}

/* Closes the least recently used fds while the cache holds more than
 * its bound. An entry in use (a request's, or a deleted file's kept for
 * the push about it: handles_orphan) stays, moved to the front as if
 * used now: those were 1,024 at the tail once a client removed a tree
 * other hosts had cached, and a search that gave up after a few of them
 * let the cache grow by every fd added for the next 5 s, a cold walk's
 * tens of thousands (found by fuzz_handlers: its orphans never expire).
 * Each entry is looked at once at most. Caller holds h->mu. */
static void evict(struct handles *h)
{
	for (size_t seen = 0, n = h->n; h->n > h->max && seen < n; seen++) {
		struct hent *e = h->lru.prev;
		if (e == &h->lru)
			break;
		if (e->refs == 0) {
			drop(h, e);
		} else {
			lru_unlink(e);
			lru_push_front(h, e);
		}
	}
}

void handles_set_max(struct handles *h, size_t max)
{
	pthread_mutex_lock(&h->mu);
	if (max < 1)
		max = 1;
	if (max < h->max) {
		/* Fewer fds for the cache: close the unused beyond max now. */
		for (struct hent *e = h->lru.prev, *prev; h->n > max && e != &h->lru; e = prev) {
			prev = e->prev;
			if (e->refs == 0)
				drop(h, e);
		}
	}
	h->max = max;
	pthread_mutex_unlock(&h->mu);
}

/* The entry of fh (hash: its fh_hash), made with fd if there is none;
 * fd is closed if there is. Under h->mu. */
static struct hent *find_or_add(struct handles *h, const struct pfs_fh *fh, uint64_t hash, int fd)
{
	struct hent *e = find(h, fh, hash);
	if (e) {
		close(fd);
		return e;
	}
	e = xmalloc(sizeof(*e));
	e->fd = fd;
	e->refs = 0;
	e->dead = false;
	e->fh = *fh;
	htab_insert(&h->tab, &e->hn, hash);
	lru_push_front(h, e);
	h->n++;
	return e;
}

/* Inserts fd for fh unless present. Returns the entry with a reference if
 * want_ref, else NULL. Takes ownership of fd. */
static struct hent *insert(struct handles *h, const struct pfs_fh *fh, int fd, bool want_ref)
{
	uint64_t hash = fh_hash(h, fh);
	struct hent *e;

	pthread_mutex_lock(&h->mu);
	e = find_or_add(h, fh, hash, fd);
	if (want_ref)
		e->refs++;
	else
		e = NULL;
	evict(h);
	pthread_mutex_unlock(&h->mu);
	return e;
}

/* The cache's entry for fh, referenced and moved to the front, or NULL. */
static struct hent *get_cached(struct handles *h, const struct pfs_fh *fh)
{
	struct hent *e;

	pthread_mutex_lock(&h->mu);
	e = find(h, fh, fh_hash(h, fh));
	if (e) {
		/* The key is the whole wire handle, MAC included, and only
		 * verified handles get in: a hit needs no MAC check. */
		e->refs++;
		lru_unlink(e);
		lru_push_front(h, e);
	}
	pthread_mutex_unlock(&h->mu);
	return e;
}

int handles_get_cached(struct handles *h, const struct pfs_fh *fh, struct hent **out)
{
	struct hent *e = get_cached(h, fh);

	if (!e)
		return -EAGAIN;
	*out = e;
	return 0;
}

int handles_get(struct handles *h, const struct pfs_fh *fh, struct hent **out)
{
	struct khandle k;
	struct hent *e;
	int fd, ret;

	if ((e = get_cached(h, fh))) {
		*out = e;
		return 0;
	}

	ret = fh_parse(h, fh, &k);
	if (ret < 0)
		return ret;
	fd = open_by_handle_at(h->export_fd, &k.fh, O_PATH | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		/* A well-formed handle whose object is gone. */
		if (ret == -ENOENT || ret == -EINVAL)
			ret = -ESTALE;
		return ret;
	}
	/* A deleted file still open somewhere (a fid of ours, a process on
	 * this host): served, but not cached, so that its blocks go with
	 * its last open file rather than with a cache sweep. */
	struct stat st;
	if (fstat(fd, &st) == 0 && st.st_nlink == 0) {
		e = xmalloc(sizeof(*e));
		e->fd = fd;
		e->refs = 1;
		e->dead = true;
		e->fh = *fh;
		e->prev = e->next = e;
		*out = e;
		return 0;
	}
	*out = insert(h, fh, fd, true);
	return 0;
}

void handles_put(struct handles *h, struct hent *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&h->mu);
	if (--e->refs == 0 && e->dead) {
		close(e->fd);
		free(e);
	}
	pthread_mutex_unlock(&h->mu);
}

void handles_adopt(struct handles *h, const struct pfs_fh *fh, int fd)
{
	insert(h, fh, fd, false);
}

void handles_forget(struct handles *h, const struct pfs_fh *fh)
{
	uint64_t hash = fh_hash(h, fh);
	struct hent *e;

	pthread_mutex_lock(&h->mu);
	e = find(h, fh, hash);
	if (e)
		drop(h, e);
	pthread_mutex_unlock(&h->mu);
}

bool handles_orphan(struct handles *h, const struct pfs_fh *fh, int fd, unsigned ms)
{
	uint64_t hash = fh_hash(h, fh);
	struct hent *e;

	pthread_mutex_lock(&h->mu);
	if (h->norphans == ORPHANS_MAX) {
		pthread_mutex_unlock(&h->mu);
		close(fd);
		return false;
	}
	e = find_or_add(h, fh, hash, fd);
	e->refs++;
	h->orphans[h->norphans].e = e;
	h->orphans[h->norphans].until = pfs_mono_ms() + ms;
	h->norphans++;
	pthread_mutex_unlock(&h->mu);
	return true;
}

size_t handles_orphans_expire(struct handles *h)
{
	int64_t now = pfs_mono_ms();
	size_t i = 0, left;

	pthread_mutex_lock(&h->mu);
	while (i < h->norphans && h->orphans[i].until <= now) {
		struct hent *e = h->orphans[i++].e;
		e->refs--;
		if (!e->dead) {
			drop(h, e); /* deleted: its blocks go with its last use */
		} else if (e->refs == 0) {
			close(e->fd);
			free(e);
		}
	}
	memmove(h->orphans, h->orphans + i, (h->norphans - i) * sizeof(h->orphans[0]));
	h->norphans -= i;
	left = h->norphans;
	pthread_mutex_unlock(&h->mu);
	return left;
}

size_t handles_sweep(struct handles *h)
{
	struct stat st;
	size_t dropped = 0;

	pthread_mutex_lock(&h->mu);
	for (struct hent *e = h->lru.next, *next; e != &h->lru; e = next) {
		next = e->next;
		if (e->refs == 0 && fstat(e->fd, &st) == 0 && st.st_nlink == 0) {
			drop(h, e);
			dropped++;
		}
	}
	pthread_mutex_unlock(&h->mu);
	return dropped;
}

/* --- interest keys --- */

uint64_t handles_key(const struct handles *h, const struct pfs_fh *fh)
{
	/* Handles we made always carry a MAC; anything shorter is hashed
	 * whole (it never verified, so no object has that key anyway). */
	size_t n = fh->len >= FH_MIN ? fh->len - FH_MAC_LEN : fh->len;

	return pfs_hash_bytes(fh->data, n, h->seed ^ 0x696e74657265ull);
}

uint64_t handles_key_kernel(const struct handles *h, int type, const void *f_handle, size_t n)
{
	uint8_t body[FH_TYPE_LEN + KH_MAX];

	if (n > KH_MAX)
		n = KH_MAX;
	pfs_store_le32(body, (uint32_t)type);
	memcpy(body + FH_TYPE_LEN, f_handle, n);
	return pfs_hash_bytes(body, FH_TYPE_LEN + n, h->seed ^ 0x696e74657265ull);
}

int handles_from_kernel(const struct handles *h, int type, const void *f_handle, size_t n,
			struct pfs_fh *out)
{
	struct khandle k;

	if (n == 0 || n > KH_MAX)
		return -EINVAL;
	k.fh.handle_type = type;
	k.fh.handle_bytes = (unsigned)n;
	memcpy(k.fh.f_handle, f_handle, n);
	fh_build(h, &k, out);
	return 0;
}

/* --- setup --- */

int handles_new(struct handles **out, int export_fd, const uint8_t key[PFSD_HKEY_LEN],
		size_t cache_max, char *err, size_t errlen)
{
	static const char label[] = "podfs export handle key";
	struct handles *h = xcalloc(1, sizeof(*h));
	struct khandle k;
	uint8_t seed[8];
	int fd;

	h->export_fd = export_fd;
	h->max = cache_max ? cache_max : 1;
	h->lru.next = h->lru.prev = &h->lru;
	pthread_mutex_init(&h->mu, NULL);
	htab_init(&h->tab);
	if (pfs_random(seed, sizeof(seed)) < 0) {
		snprintf(err, errlen, "cannot get random bytes");
		goto out_free;
	}
	memcpy(&h->seed, seed, sizeof(seed));

	k.fh.handle_bytes = KH_MAX;
	if (name_to_handle_at(export_fd, "", &k.fh, &h->mount_id, AT_EMPTY_PATH) < 0) {
		snprintf(err, errlen,
			 "export filesystem does not support file handles (need ext4/xfs/btrfs/tmpfs): %s",
			 strerror(errno));
		goto out_free;
	}
	/* Bind the MAC key to this export: a handle made for another export
	 * of the same state directory does not verify here. */
	{
		uint8_t buf[sizeof(label) + sizeof(int) + KH_MAX];
		size_t n = 0;
		memcpy(buf, label, sizeof(label));
		n += sizeof(label);
		memcpy(buf + n, &k.fh.handle_type, sizeof(int));
		n += sizeof(int);
		memcpy(buf + n, k.fh.f_handle, k.fh.handle_bytes);
		n += k.fh.handle_bytes;
		pfs_hmac(key, PFSD_HKEY_LEN, buf, n, h->mkey);
		h->mk = pfs_hmac_key_new(h->mkey, sizeof(h->mkey));
	}
	fh_build(h, &k, &h->root);

	fd = open_by_handle_at(export_fd, &k.fh, O_PATH | O_CLOEXEC);
	if (fd < 0) {
		if (errno == EPERM)
			snprintf(err, errlen,
				 "cannot open files by handle: podfsd needs CAP_DAC_READ_SEARCH (run it as root)");
		else
			snprintf(err, errlen,
				 "export filesystem does not support opening file handles (need ext4/xfs/btrfs/tmpfs): %s",
				 strerror(errno));
		goto out_free;
	}
	close(fd);
	*out = h;
	return 0;

out_free:
	handles_free(h);
	return -EINVAL;
}

void handles_free(struct handles *h)
{
	struct hnode *n;

	if (!h)
		return;
	/* Held files that left the table meanwhile are in no other list. */
	for (size_t i = 0; i < h->norphans; i++) {
		struct hent *e = h->orphans[i].e;
		if (e->dead && --e->refs == 0) {
			close(e->fd);
			free(e);
		}
	}
	while ((n = htab_pop(&h->tab))) {
		struct hent *e = container_of(n, struct hent, hn);
		close(e->fd);
		free(e);
	}
	htab_fini(&h->tab);
	pthread_mutex_destroy(&h->mu);
	pfs_hmac_key_free(h->mk);
	if (h->export_fd >= 0)
		close(h->export_fd);
	free(h);
}

int handles_export_fd(const struct handles *h)
{
	return h->export_fd;
}

const struct pfs_fh *handles_root(const struct handles *h)
{
	return &h->root;
}
