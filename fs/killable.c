/* killable.c: a request's caller and its pending fatal signal (see
 * killable_i.h). */
#include "killable_i.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static atomic_bool ended;
static __thread pid_t caller;
static __thread void (*finish_fn)(void *);
static __thread void *finish_arg;

void killable_enter(pid_t tid)
{
	caller = tid > 0 ? tid : 0;
}

void killable_leave(void)
{
	caller = 0;
	finish_fn = NULL;
	finish_arg = NULL;
}

void killable_finish_after(void (*fn)(void *arg), void *arg)
{
	finish_fn = fn;
	finish_arg = arg;
}

void killable_finish_clear(void)
{
	finish_fn = NULL;
	finish_arg = NULL;
}

void killable_end(void)
{
	atomic_store(&ended, true);
}

enum killable_verdict killable_poll(void)
{
	if (!(caller && atomic_load(&ended)) && !killable_dying())
		return KILLABLE_WAIT;
	if (!finish_fn)
		return KILLABLE_GIVE_UP;
	void (*fn)(void *) = finish_fn;
	void *arg = finish_arg;
	/* The kernel is answered: this thread now works for nobody. */
	killable_leave();
	fn(arg);
	return KILLABLE_WAIT;
}

/* The hex mask after `key` on its own line of status, or 0. */
static uint64_t mask_of(const char *status, const char *key)
{
	size_t kl = strlen(key);

	for (const char *p = status; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, key, kl) == 0)
			return strtoull(p + kl, NULL, 16);
	}
	return 0;
}

bool killable_status_dying(const char *status)
{
	uint64_t bit = 1ull << (SIGKILL - 1);

	return (mask_of(status, "SigPnd:") & bit) || (mask_of(status, "ShdPnd:") & bit);
}

bool killable_dying(void)
{
	/* The Groups line comes first and can be long. */
	enum { CAP = 64 << 10 };
	char path[64];
	size_t len = 0;

	if (!caller)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)caller);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false; /* gone already: nobody waits for the answer */
	char *buf = malloc(CAP);
	if (!buf) {
		close(fd);
		return false;
	}
	for (;;) {
		ssize_t n = read(fd, buf + len, CAP - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = 0;
	bool dying = killable_status_dying(buf);
	free(buf);
	return dying;
}
