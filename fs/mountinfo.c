/* mountinfo.c: what /proc/self/mountinfo says is mounted at a path (see
 * mountinfo_i.h). */
#include "mountinfo_i.h"

#include <stdio.h>
#include <string.h>

/* Unescapes mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
	char *d = s;
	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 4;
		} else {
			*d++ = *s++;
		}
	}
	*d = 0;
}

/* One line of mountinfo, split: its device, mount point, type and
 * source (unescaped, pointing into line). */
struct mline {
	const char *dev, *mnt, *fstype, *src;
};

/* Calls cb(arg, &m) for every line; false if the file cannot be read. */
static bool each_line(void (*cb)(void *arg, const struct mline *m), void *arg)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[8192];

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		char *save = NULL, *fields[16] = { 0 };
		int n = 0;
		line[strcspn(line, "\n")] = 0;
		for (char *t = strtok_r(line, " ", &save); t && n < 16; t = strtok_r(NULL, " ", &save))
			fields[n++] = t;
		/* ID PARENT DEV ROOT MNT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS */
		for (int i = 6; i + 2 < n; i++) {
			if (strcmp(fields[i], "-") == 0) {
				unescape(fields[4]);
				unescape(fields[i + 2]);
				struct mline m = { fields[2], fields[4], fields[i + 1], fields[i + 2] };
				cb(arg, &m);
				break;
			}
		}
	}
	fclose(f);
	return true;
}

struct top {
	const char *mountpoint;
	char *dev, *fstype;
	size_t devlen, fstypelen;
	bool found;
};

static void top_cb(void *arg, const struct mline *m)
{
	struct top *t = arg;

	/* Later lines are mounted on top of earlier ones. */
	if (strcmp(m->mnt, t->mountpoint) == 0) {
		snprintf(t->dev, t->devlen, "%s", m->dev);
		snprintf(t->fstype, t->fstypelen, "%s", m->fstype);
		t->found = true;
	}
}

bool mountinfo_top(const char *mountpoint, char *dev, size_t devlen, char *fstype,
		   size_t fstypelen)
{
	struct top t = { mountpoint, dev, fstype, devlen, fstypelen, false };

	return each_line(top_cb, &t) && t.found;
}

struct each {
	const char *fstype;
	void (*cb)(void *arg, const char *mnt, const char *src, const char *dev);
	void *arg;
	int n;
};

static void each_cb(void *arg, const struct mline *m)
{
	struct each *e = arg;

	if (strcmp(m->fstype, e->fstype) == 0) {
		e->cb(e->arg, m->mnt, m->src, m->dev);
		e->n++;
	}
}

int mountinfo_each(const char *fstype,
		   void (*cb)(void *arg, const char *mnt, const char *src, const char *dev),
		   void *arg)
{
	struct each e = { fstype, cb, arg, 0 };

	return each_line(each_cb, &e) ? e.n : -1;
}
