/* mountwait.c: which mount-time failures are retried, the backoff, and
 * the per-mount-point lock (see mountwait_i.h). */
#include "mountwait_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

bool mountwait_transient(int err)
{
	switch (-err) {
	case ECONNREFUSED: /* nobody listens (yet) */
	case ETIMEDOUT:
	case EHOSTUNREACH: /* also: the name did not resolve */
	case ENETUNREACH:
	case EHOSTDOWN:
	case ENETDOWN:
	case EADDRNOTAVAIL: /* no address of our own yet (early boot) */
	case EAGAIN:
	case EINTR:
		return true;
	default:
		return false;
	}
}

int64_t mountwait_backoff_ms(unsigned n, unsigned jitter)
{
	int64_t ms = 1000;

	for (unsigned i = 1; i < n && ms < MOUNTWAIT_BACKOFF_MAX_MS; i++)
		ms *= 2;
	if (ms > MOUNTWAIT_BACKOFF_MAX_MS)
		ms = MOUNTWAIT_BACKOFF_MAX_MS;
	if (jitter > 999)
		jitter = 999;
	return ms - ms / 5 * (int64_t)jitter / 1000;
}

void mountwait_lock_name(const char *mnt, char *buf, size_t len)
{
	static const char tail[] = ".lock";
	const unsigned char *p = (const unsigned char *)mnt;
	size_t at;

	at = (size_t)snprintf(buf, len, "mount-");
	while (*p == '/')
		p++;
	if (!*p) {
		snprintf(buf + at, len - at, "-%s", tail); /* "/": systemd's "-" */
		return;
	}
	for (bool first = true; *p; p++, first = false) {
		char piece[5];
		if (*p == '/') {
			while (p[1] == '/')
				p++;
			if (!p[1])
				break; /* a trailing slash */
			snprintf(piece, sizeof(piece), "-");
		} else if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			   (*p >= '0' && *p <= '9') || *p == '_' || *p == ':' ||
			   (*p == '.' && !first)) {
			snprintf(piece, sizeof(piece), "%c", *p);
		} else {
			snprintf(piece, sizeof(piece), "\\x%02x", *p);
		}
		if (at + strlen(piece) + sizeof(tail) > 255 || at + strlen(piece) + sizeof(tail) > len)
			goto hashed;
		memcpy(buf + at, piece, strlen(piece));
		at += strlen(piece);
	}
	memcpy(buf + at, tail, sizeof(tail));
	return;
hashed:;
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
	for (p = (const unsigned char *)mnt; *p; p++)
		h = (h ^ *p) * 0x100000001b3ull;
	snprintf(buf, len, "mount-h%016llx%s", (unsigned long long)h, tail);
}

void mountwait_lock_owner(struct mountwait_lock *lk, pid_t pid)
{
	char buf[24];
	int n;

	if (lk->fd < 0)
		return;
	n = snprintf(buf, sizeof(buf), "%d\n", (int)pid);
	if (ftruncate(lk->fd, 0) < 0 || pwrite(lk->fd, buf, (size_t)n, 0) != n)
		return; /* the pid is only for the message of another podfs */
}

static pid_t read_holder(int fd)
{
	char buf[24];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	long pid;

	if (n <= 0)
		return 0;
	buf[n] = '\0';
	pid = strtol(buf, NULL, 10);
	return pid > 0 && pid < (1L << 30) ? (pid_t)pid : 0;
}

int mountwait_lock(const char *dir, const char *mnt, struct mountwait_lock *lk, pid_t *holder)
{
	char name[256];
	size_t plen;

	lk->fd = -1;
	lk->path = NULL;
	*holder = 0;
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	mountwait_lock_name(mnt, name, sizeof(name));
	plen = strlen(dir) + strlen(name) + 2;
	lk->path = malloc(plen);
	if (!lk->path)
		return -ENOMEM;
	snprintf(lk->path, plen, "%s/%s", dir, name);
	/* The holder removes the file as it unlocks: a lock taken on a
	 * file that is no longer the one at the path is taken again. */
	for (int tries = 0; tries < 100; tries++) {
		struct stat a, b;
		int fd = open(lk->path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd < 0)
			break;
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			int err = errno;
			if (err == EWOULDBLOCK)
				*holder = read_holder(fd);
			close(fd);
			free(lk->path);
			lk->path = NULL;
			return err == EWOULDBLOCK ? -EBUSY : -err;
		}
		if (fstat(fd, &a) == 0 && stat(lk->path, &b) == 0 && a.st_dev == b.st_dev &&
		    a.st_ino == b.st_ino) {
			lk->fd = fd;
			mountwait_lock_owner(lk, getpid());
			return 0;
		}
		close(fd);
	}
	int err = errno ? errno : EAGAIN;
	free(lk->path);
	lk->path = NULL;
	return -err;
}

void mountwait_unlock(struct mountwait_lock *lk)
{
	if (lk->fd >= 0) {
		unlink(lk->path); /* while still locked: see mountwait_lock */
		close(lk->fd);
		lk->fd = -1;
	}
	mountwait_lock_forget(lk);
}

void mountwait_lock_forget(struct mountwait_lock *lk)
{
	if (lk->fd >= 0)
		close(lk->fd);
	lk->fd = -1;
	free(lk->path);
	lk->path = NULL;
}
