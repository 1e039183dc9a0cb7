/* kvtext.c: "key value" status lines (see podfs/kvtext.h). */
#include "podfs/kvtext.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

int pfs_kv_parse(struct pfs_kv *kv, char *text)
{
	int lines = 1;

	memset(kv, 0, sizeof(*kv));
	for (const char *p = text; *p; p++)
		lines += *p == '\n';
	if (lines > PFS_KV_MAX)
		lines = PFS_KV_MAX;
	kv->key = malloc((size_t)lines * sizeof(char *));
	kv->val = malloc((size_t)lines * sizeof(char *));
	if (!kv->key || !kv->val) {
		free(kv->key);
		free(kv->val);
		free(text);
		memset(kv, 0, sizeof(*kv));
		return -ENOMEM;
	}
	kv->text = text;
	for (char *save = NULL, *line = strtok_r(text, "\n", &save); line && kv->n < lines;
	     line = strtok_r(NULL, "\n", &save)) {
		char *sp = strchr(line, ' ');
		if (!sp)
			continue;
		*sp = 0;
		kv->key[kv->n] = line;
		kv->val[kv->n] = sp + 1;
		kv->n++;
	}
	return 0;
}

void pfs_kv_free(struct pfs_kv *kv)
{
	free(kv->text);
	free(kv->key);
	free(kv->val);
	memset(kv, 0, sizeof(*kv));
}

const char *pfs_kv_get(const struct pfs_kv *kv, const char *key)
{
	for (int i = 0; i < kv->n; i++)
		if (strcmp(kv->key[i], key) == 0)
			return kv->val[i];
	return NULL;
}

unsigned long long pfs_kv_num(const struct pfs_kv *kv, const char *key)
{
	const char *v = pfs_kv_get(kv, key);
	return v ? strtoull(v, NULL, 10) : 0;
}

const char *pfs_kv_word(const char *val, const char *k, char *buf, size_t len)
{
	size_t kl = strlen(k);

	for (const char *p = val; p && *p;) {
		while (*p == ' ')
			p++;
		if (strncmp(p, k, kl) == 0 && p[kl] == '=') {
			const char *v = p + kl + 1, *e = strchr(v, ' ');
			size_t n = e ? (size_t)(e - v) : strlen(v);
			if (len == 0)
				return NULL;
			if (n >= len)
				n = len - 1;
			memcpy(buf, v, n);
			buf[n] = 0;
			return buf;
		}
		p = strchr(p, ' ');
	}
	return NULL;
}

const char *pfs_fmt_bytes(unsigned long long n, char *buf, size_t len)
{
	static const char *unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)n;
	unsigned u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
	return buf;
}

const char *pfs_fmt_time(long long t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (!t || !gmtime_r(&tt, &tm) || !strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &tm))
		snprintf(buf, len, "-");
	return buf;
}

const char *pfs_fmt_secs(long long s, char *buf, size_t len)
{
	if (s < 0)
		s = 0;
	if (s >= 86400)
		snprintf(buf, len, "%lldd %lldh", s / 86400, s % 86400 / 3600);
	else if (s >= 3600)
		snprintf(buf, len, "%lldh %lldm", s / 3600, s % 3600 / 60);
	else if (s >= 60)
		snprintf(buf, len, "%lldm %llds", s / 60, s % 60);
	else
		snprintf(buf, len, "%llds", s);
	return buf;
}

ssize_t pfs_unix_ask(const char *path, const char *request, size_t cap, int timeout_s,
		     char **out)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = timeout_s };
	size_t len = 0;
	char *buf;
	int fd, e;

	*out = NULL;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (!(buf = malloc(cap + 1)))
		return -ENOMEM;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		goto fail;
	if (request && send(fd, request, strlen(request), MSG_NOSIGNAL) < 0)
		goto fail;
	while (len < cap) {
		ssize_t k = recv(fd, buf + len, cap - len, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			goto fail;
		if (k == 0)
			break;
		len += (size_t)k;
	}
	close(fd);
	buf[len] = 0;
	*out = buf;
	return (ssize_t)len;
fail:
	e = errno;
	if (fd >= 0)
		close(fd);
	free(buf);
	return -e;
}
