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

bool mountinfo_top(const char *mountpoint, char *dev, size_t devlen, char *fstype,
		   size_t fstypelen)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[8192];
	bool found = false;

	if (!f)
		return false;
	/* Later lines are mounted on top of earlier ones. */
	while (fgets(line, sizeof(line), f)) {
		char *save = NULL, *fields[10] = { 0 };
		int n = 0;
		for (char *t = strtok_r(line, " ", &save); t && n < 10; t = strtok_r(NULL, " ", &save))
			fields[n++] = t;
		if (n < 10)
			continue;
		unescape(fields[4]);
		if (strcmp(fields[4], mountpoint) != 0)
			continue;
		/* fields[6..] = optional fields, "-", fstype */
		for (int i = 6; i < n - 1; i++) {
			if (strcmp(fields[i], "-") == 0) {
				snprintf(dev, devlen, "%s", fields[2]);
				snprintf(fstype, fstypelen, "%s", fields[i + 1]);
				found = true;
				break;
			}
		}
	}
	fclose(f);
	return found;
}
