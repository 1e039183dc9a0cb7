/* watch.c: fanotify on the export's filesystem -> invalidation pushes
 * (see watch_i.h). Loop thread only. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/fanotify.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "podfs/log.h"
#include "podfs/hash.h"
#include "handles_i.h"
#include "chunks_i.h"
#include "idtab_i.h"
#include "pfsd_i.h"
#include "push_i.h"
#include "recall_i.h"
#include "watch_i.h"

#ifndef FAN_REPORT_TARGET_FID
#define FAN_REPORT_TARGET_FID 0x00001000
#endif

#define WATCH_BUF 65536
#define WATCH_DEDUP 64 /* pushes remembered per read to drop repeats */
/* After a wake-up that found events of other processes, the queue is
 * read again only this much later (milliseconds): the events of a busy
 * filesystem then come in batches. The mark covers the export's whole
 * filesystem, which on a coordinator is often also the root filesystem of
 * a host that works: read as they came, one wake-up per event, a local
 * `tar -x` and `rm -r` of 8,909 entries elsewhere on that filesystem cost
 * an idle podfsd 0.19-0.30 CPU-seconds and 15,000-25,000 context switches
 * (0.05-0.06 s and about 2,000 read in batches). The first
 * change after a quiet moment is still read at once. Not after a read
 * of podfsd's own events only (its requests' changes, which it skips):
 * holding those, the loop thread stopped and restarted polling and woke
 * for the timer at nearly every request, and 4 KiB creates ran 7% slower
 * (scripts/bench smallfiles). */
#define WATCH_HOLD_MS 1

/* inotify fallback: one watch per directory a client was handed. */
struct iwatch {
	struct hnode hn; /* hash = wd */
	int wd;
	struct pfs_fh fh;
};

struct watch {
	struct pfsd *d;
	uv_poll_t poll;
	uv_timer_t hold;     /* WATCH_HOLD_MS: polling again after a batch */
	int fd;
	bool inotify;
	bool full;           /* inotify: out of watches (logged once) */
	bool stopped;        /* poll and hold handles closed */
	pthread_mutex_t mu;  /* inotify: wds (workers add, the loop reads) */
	struct htab wds;
	pid_t self;
	uint8_t *buf;
	/* Pushes made for the current read() batch, to drop repeats. */
	struct {
		uint64_t key;
		uint16_t op;
		int64_t off;
		uint64_t name_hash;
	} seen[WATCH_DEDUP];
	unsigned nseen;
};

/* A kernel handle inside an event record. */
struct kh {
	int type;
	const uint8_t *bytes;
	size_t len;
};

static bool seen_before(struct watch *w, uint64_t key, uint16_t op, int64_t off,
			uint64_t name_hash)
{
	for (unsigned i = 0; i < w->nseen && i < WATCH_DEDUP; i++)
		if (w->seen[i].key == key && w->seen[i].op == op && w->seen[i].off == off &&
		    w->seen[i].name_hash == name_hash)
			return true;
	unsigned k = w->nseen++ % WATCH_DEDUP;
	w->seen[k].key = key;
	w->seen[k].op = op;
	w->seen[k].off = off;
	w->seen[k].name_hash = name_hash;
	return false;
}

/* Pushes an invalidation of the object kh (INVAL_INODE) or of name in
 * directory kh (INVAL_ENTRY) to the sessions interested in kh. */
static void push(struct watch *w, const struct kh *k, uint16_t op, int64_t off,
		 const char *name)
{
	struct pfsd *d = w->d;
	uint64_t bits[INTEREST_WORDS];
	uint64_t key = handles_key_kernel(d->hs, k->type, k->bytes, k->len);
	size_t nl = name ? strlen(name) : 0;
	struct inval iv;

	/* Chunk digests of a file whose data changed go whoever caches it. */
	if (op == PFS_OP_INVAL_INODE && off >= 0 && d->chunks)
		chunks_drop(d->chunks, key);
	/* The cheap test first: most events are about objects nobody caches.
	 * Nobody was handed one outside the export, which the filesystem's
	 * mark also reports: it goes no further (not even to sessions
	 * without a slot, interest_i.h). */
	if (!interest_get(d->it, key, bits))
		return;
	if (op == PFS_OP_INVAL_ENTRY && (nl == 0 || !pfs_name_valid(name, nl)))
		return;
	if (seen_before(w, key, op, off, name ? pfs_hash_bytes(name, nl, 0) : 0))
		return;
	memset(&iv, 0, sizeof(iv));
	iv.op = op;
	if (handles_from_kernel(d->hs, k->type, k->bytes, k->len, &iv.fh) < 0)
		return;
	iv.off = off;
	if (op == PFS_OP_INVAL_ENTRY) {
		memcpy(iv.name.s, name, nl + 1);
		iv.name.len = (uint16_t)nl;
	}
	/* Not with inotify, which reports podfsd's own changes too: every
	 * create a holder sent would recall it. */
	if (!w->inotify)
		recall_push_beside(d, key, &iv.fh);
	push_inval(d, NULL, true, &iv, key, NULL);
}

/* Parses one event's info records (m->event_len bytes at ev) and pushes
 * what it changed. Records are not aligned (a name makes their length any
 * number): every struct is copied out before use. */
static void on_event(struct watch *w, const uint8_t *ev, const struct fanotify_event_metadata *m)
{
	const uint8_t *p = ev + m->metadata_len;
	const uint8_t *end = ev + m->event_len;
	struct kh obj = { 0 }, dir = { 0 };
	const char *name = NULL;
	bool have_obj = false, have_dir = false;
	uint64_t mask = m->mask;
	const size_t fixed = sizeof(struct fanotify_event_info_fid) + sizeof(struct file_handle);

	while (end - p >= (ptrdiff_t)sizeof(struct fanotify_event_info_header)) {
		struct fanotify_event_info_header h;
		struct file_handle fh;

		memcpy(&h, p, sizeof(h));
		if (h.len < sizeof(h) || h.len > (size_t)(end - p))
			break;
		if ((h.info_type == FAN_EVENT_INFO_TYPE_FID ||
		     h.info_type == FAN_EVENT_INFO_TYPE_DFID ||
		     h.info_type == FAN_EVENT_INFO_TYPE_DFID_NAME) &&
		    h.len >= fixed) {
			const uint8_t *hp = p + sizeof(struct fanotify_event_info_fid);
			size_t room = h.len - fixed;
			memcpy(&fh, hp, sizeof(fh));
			if (fh.handle_bytes > room)
				goto next;
			struct kh k = { fh.handle_type, hp + sizeof(fh), fh.handle_bytes };
			if (h.info_type == FAN_EVENT_INFO_TYPE_FID) {
				obj = k;
				have_obj = true;
			} else {
				const char *nm = (const char *)k.bytes + k.len;
				dir = k;
				have_dir = true;
				if (h.info_type == FAN_EVENT_INFO_TYPE_DFID_NAME &&
				    memchr(nm, 0, room - fh.handle_bytes))
					name = nm;
			}
		}
next:
		p += h.len;
	}
	/* An event on a directory itself may come as its fid + name ".". */
	if (!have_obj && have_dir && (!name || strcmp(name, ".") == 0)) {
		obj = dir;
		have_obj = true;
	}
	if (have_obj && (mask & (FAN_MODIFY | FAN_CLOSE_WRITE)))
		push(w, &obj, PFS_OP_INVAL_INODE, 0, NULL);
	if (have_obj && (mask & (FAN_ATTRIB | FAN_DELETE_SELF)))
		push(w, &obj, PFS_OP_INVAL_INODE, -1, NULL);
	if (have_dir && name && strcmp(name, ".") != 0 &&
	    (mask & (FAN_CREATE | FAN_DELETE | FAN_MOVED_FROM | FAN_MOVED_TO))) {
		push(w, &dir, PFS_OP_INVAL_ENTRY, 0, name);
		push(w, &dir, PFS_OP_INVAL_INODE, 0, NULL);
		/* The child's nlink or ctime changed (with TARGET_FID). */
		if (have_obj && (mask & (FAN_DELETE | FAN_MOVED_FROM | FAN_MOVED_TO)))
			push(w, &obj, PFS_OP_INVAL_INODE, -1, NULL);
	}
}

static void inotify_read(struct watch *w);
static bool fanotify_read_all(struct watch *w);
static void hold_cb(uv_timer_t *t);

static void poll_cb(uv_poll_t *h, int status, int events)
{
	struct watch *w = h->data;

	if (status < 0) {
		pfs_warn("fanotify: %s; no longer watching changes made beside podfs",
			 uv_strerror(status));
		uv_poll_stop(h);
		return;
	}
	if (w->inotify) {
		/* Ours or another's, inotify cannot tell: read as they come. */
		inotify_read(w);
		return;
	}
	if (!fanotify_read_all(w))
		return;
	/* What comes next waits for the hold (WATCH_HOLD_MS). */
	uv_poll_stop(&w->poll);
	uv_timer_start(&w->hold, hold_cb, WATCH_HOLD_MS, 0);
}

static void hold_cb(uv_timer_t *t)
{
	struct watch *w = t->data;

	if (!w->stopped)
		uv_poll_start(&w->poll, UV_READABLE, poll_cb);
}

/* Reads and handles the fanotify queue: until it is empty, at most 64
 * buffers. Returns whether any event was another process's. */
static bool fanotify_read_all(struct watch *w)
{
	bool foreign = false;

	for (int rounds = 0; rounds < 64; rounds++) {
		ssize_t n = read(w->fd, w->buf, WATCH_BUF);

		/* Repeats are dropped within one read only: every event of a
		 * read happened before its first push went out, so a client
		 * that looks up again after that push sees them all. Across
		 * reads a repeat is a new change. */
		w->nseen = 0;
		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR)
				pfs_warn("fanotify read: %s", strerror(errno));
			return foreign;
		}
		if (n == 0)
			return foreign;
		/* Events are not 8-byte aligned: copy each header out. */
		for (size_t off = 0; (size_t)n - off >= FAN_EVENT_METADATA_LEN;) {
			struct fanotify_event_metadata m;
			memcpy(&m, w->buf + off, sizeof(m));
			if (m.event_len < FAN_EVENT_METADATA_LEN || m.event_len > (size_t)n - off ||
			    m.metadata_len > m.event_len)
				break;
			const uint8_t *ev = w->buf + off;
			off += m.event_len;
			if (m.vers != FANOTIFY_METADATA_VERSION)
				continue;
			if (m.fd >= 0)
				close(m.fd); /* not with FID reporting, but never leak */
			if (m.mask & FAN_Q_OVERFLOW) {
				push_revalidate_all(w->d, "change notifications lost");
				continue;
			}
			if (m.pid == w->self) {
				w->d->st_watch_own++;
				continue; /* our own change: pushed as it completes */
			}
			foreign = true;
			on_event(w, ev, &m);
		}
	}
	return foreign;
}

/* --- inotify fallback --- */

#define IN_MASK                                                                          \
	(IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_MOVED_FROM | \
	 IN_MOVED_TO | IN_DELETE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK)

/* Caller holds w->mu. */
static struct iwatch *iw_find(struct watch *w, int wd)
{
	return IDTAB_FIND(&w->wds, wd, struct iwatch, hn, wd);
}

bool watch_whole(const struct watch *w)
{
	return w && !w->inotify;
}

void watch_dir(struct watch *w, int pathfd, const struct pfs_fh *fh)
{
	char p[32];
	int wd;

	if (!w || !w->inotify)
		return;
	snprintf(p, sizeof(p), "/proc/self/fd/%d", pathfd);
	wd = inotify_add_watch(w->fd, p, IN_MASK);
	pthread_mutex_lock(&w->mu);
	if (wd < 0) {
		if (errno == ENOSPC && !w->full) {
			w->full = true;
			pfs_warn("inotify: out of watches (fs.inotify.max_user_watches); changes made "
				 "beside podfs in more directories go unnoticed");
		}
	} else if (!iw_find(w, wd)) {
		struct iwatch *iw = xcalloc(1, sizeof(*iw));
		iw->wd = wd;
		iw->fh = *fh;
		idtab_insert(&w->wds, &iw->hn, (uint64_t)wd);
	}
	pthread_mutex_unlock(&w->mu);
}

/* Pushes an invalidation about wire handle fh to the interested sessions.
 * inotify cannot tell our own changes from others': everyone interested
 * gets it, the originator included. */
static void push_fh(struct watch *w, const struct pfs_fh *fh, uint16_t op, int64_t off,
		    const char *name)
{
	struct inval iv;
	size_t nl = name ? strlen(name) : 0;

	memset(&iv, 0, sizeof(iv));
	iv.op = op;
	iv.fh = *fh;
	iv.off = off;
	if (op == PFS_OP_INVAL_ENTRY) {
		if (!pfs_name_valid(name, nl))
			return;
		memcpy(iv.name.s, name, nl + 1);
		iv.name.len = (uint16_t)nl;
	}
	uint64_t key = handles_key(w->d->hs, fh);
	if (op == PFS_OP_INVAL_INODE && off >= 0 && w->d->chunks)
		chunks_drop(w->d->chunks, key);
	push_inval(w->d, NULL, true, &iv, key, NULL);
}

static void inotify_event(struct watch *w, const struct inotify_event *ev)
{
	struct pfs_fh dir, child;
	struct iwatch *iw;
	struct hent *e;
	bool have_child = false;

	pthread_mutex_lock(&w->mu);
	iw = iw_find(w, ev->wd);
	if (iw)
		dir = iw->fh;
	if (iw && (ev->mask & IN_IGNORED)) {
		htab_remove(&w->wds, &iw->hn);
		free(iw);
	}
	pthread_mutex_unlock(&w->mu);
	if (!iw || (ev->mask & IN_IGNORED))
		return;
	if (!ev->len || !ev->name[0]) { /* the directory itself */
		if (ev->mask & (IN_ATTRIB | IN_DELETE_SELF))
			push_fh(w, &dir, PFS_OP_INVAL_INODE, -1, NULL);
		return;
	}
	if (ev->mask & (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO)) {
		push_fh(w, &dir, PFS_OP_INVAL_ENTRY, 0, ev->name);
		push_fh(w, &dir, PFS_OP_INVAL_INODE, 0, NULL);
	}
	if (!(ev->mask & (IN_MODIFY | IN_CLOSE_WRITE | IN_ATTRIB | IN_MOVED_TO)))
		return;
	/* A child's content or attributes: its handle, by name. */
	if (handles_get(w->d->hs, &dir, &e) == 0) {
		have_child = handles_encode_at(w->d->hs, e->fd, ev->name, &child) == 0;
		handles_put(w->d->hs, e);
	}
	if (have_child)
		push_fh(w, &child, PFS_OP_INVAL_INODE,
			(ev->mask & (IN_MODIFY | IN_CLOSE_WRITE)) ? 0 : -1, NULL);
}

static void inotify_read(struct watch *w)
{
	for (int rounds = 0; rounds < 64; rounds++) {
		ssize_t n = read(w->fd, w->buf, WATCH_BUF);
		if (n <= 0) {
			if (n < 0 && errno != EAGAIN && errno != EINTR)
				pfs_warn("inotify read: %s", strerror(errno));
			return;
		}
		for (size_t off = 0; off + sizeof(struct inotify_event) <= (size_t)n;) {
			const struct inotify_event *ev = (const void *)(w->buf + off);
			size_t len = sizeof(*ev) + ev->len;
			if (len > (size_t)n - off)
				break;
			if (ev->mask & IN_Q_OVERFLOW)
				push_revalidate_all(w->d, "change notifications lost");
			else
				inotify_event(w, ev);
			off += len;
		}
	}
}

static int init_fanotify(int export_fd, char *why, size_t len)
{
	static const unsigned flags[] = {
		FAN_REPORT_DFID_NAME | FAN_REPORT_FID | FAN_REPORT_TARGET_FID,
		FAN_REPORT_DFID_NAME | FAN_REPORT_FID,
	};
	uint64_t mask = FAN_MODIFY | FAN_ATTRIB | FAN_CREATE | FAN_DELETE | FAN_MOVED_FROM |
			FAN_MOVED_TO | FAN_DELETE_SELF | FAN_CLOSE_WRITE | FAN_ONDIR;
	int fd = -1, err = 0;

	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		fd = fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK |
					   FAN_UNLIMITED_QUEUE | flags[i],
				   O_RDONLY | O_CLOEXEC | O_LARGEFILE);
		if (fd >= 0)
			break;
		err = errno;
	}
	if (fd < 0) {
		snprintf(why, len, "fanotify_init: %s%s", strerror(err),
			 err == EPERM ? " (needs CAP_SYS_ADMIN)" : "");
		return -err;
	}
	if (fanotify_mark(fd, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, mask, export_fd, NULL) < 0) {
		err = errno;
		snprintf(why, len, "fanotify_mark(FAN_MARK_FILESYSTEM): %s", strerror(err));
		close(fd);
		return -err;
	}
	return fd;
}

void watch_start(struct pfsd *d)
{
	char why[160];
	struct watch *w;
	bool ino = false;
	int fd = -1;

	/* PODFSD_WATCH=inotify|none: the fallbacks, for tests. */
	const char *force = getenv("PODFSD_WATCH");
	if (force && strcmp(force, "none") == 0) {
		snprintf(why, sizeof(why), "PODFSD_WATCH=none");
	} else if (!force || strcmp(force, "inotify") != 0) {
		fd = init_fanotify(handles_export_fd(d->hs), why, sizeof(why));
	} else {
		snprintf(why, sizeof(why), "PODFSD_WATCH=inotify");
	}
	if (fd < 0 && !(force && strcmp(force, "none") == 0)) {
		fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
		ino = fd >= 0;
		if (fd >= 0)
			pfs_notice("no fanotify (%s): watching the directories clients cache with "
				   "inotify instead",
				   why);
		else
			snprintf(why + strlen(why), sizeof(why) - strlen(why), "; inotify_init1: %s",
				 strerror(errno));
	}
	if (fd < 0) {
		pfs_notice("not watching %s for changes made beside podfs (%s): clients see "
			   "such changes only when they revalidate",
			   d->o.export_dir, why);
		return;
	}
	w = xcalloc(1, sizeof(*w));
	w->d = d;
	w->fd = fd;
	w->inotify = ino;
	w->self = getpid();
	w->buf = xmalloc(WATCH_BUF);
	pthread_mutex_init(&w->mu, NULL);
	htab_init(&w->wds);
	if (uv_poll_init(&d->loop, &w->poll, fd) < 0) {
		pfs_notice("not watching %s for changes made beside podfs (uv_poll_init failed)",
			   d->o.export_dir);
		htab_fini(&w->wds);
		pthread_mutex_destroy(&w->mu);
		free(w->buf);
		free(w);
		close(fd);
		return;
	}
	uv_timer_init(&d->loop, &w->hold); /* (cannot fail) */
	w->poll.data = w;
	w->hold.data = w;
	uv_poll_start(&w->poll, UV_READABLE, poll_cb);
	d->watch = w;
	if (!ino)
		pfs_info("watching %s for changes made beside podfs (fanotify)", d->o.export_dir);
	else
		watch_dir(w, handles_export_fd(d->hs), handles_root(d->hs));
}

void watch_ignore(struct watch *w, int fd, const char *what)
{
	/* FAN_MARK_IGNORED_SURV_MODIFY: without it the kernel clears an
	 * ignore mask at the file's first modification. */
	if (!w || w->inotify || fd < 0)
		return;
	if (fanotify_mark(w->fd, FAN_MARK_ADD | FAN_MARK_IGNORED_MASK | FAN_MARK_IGNORED_SURV_MODIFY,
			  FAN_MODIFY | FAN_ATTRIB | FAN_CLOSE_WRITE, fd, NULL) < 0)
		pfs_debug("fanotify: cannot ignore the events of %s: %s", what, strerror(errno));
}

static void close_cb(uv_handle_t *h)
{
	/* Workers may still call watch_dir(): watch_free() frees it. */
}

void watch_free(struct pfsd *d)
{
	struct watch *w = d->watch;
	struct hnode *n;

	if (!w)
		return;
	d->watch = NULL;
	close(w->fd);
	while ((n = htab_pop(&w->wds)))
		free(container_of(n, struct iwatch, hn));
	htab_fini(&w->wds);
	pthread_mutex_destroy(&w->mu);
	free(w->buf);
	free(w);
}

void watch_stop(struct pfsd *d)
{
	struct watch *w = d->watch;

	if (!w || w->stopped)
		return;
	w->stopped = true;
	uv_close((uv_handle_t *)&w->poll, close_cb);
	uv_close((uv_handle_t *)&w->hold, close_cb);
}
