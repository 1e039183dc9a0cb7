/* log.c: the logging sink shared by podfsd and podfs (see log.h).
 *
 * The level and the sink are process-wide settings made once at start-up,
 * before any thread starts, and only read afterwards.
 */
#include "podfs/log.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

static const char *log_ident = "podfs";
static int log_max = PFS_LOG_NOTICE;
static int log_syslog;

void pfs_log_init(const char *ident, int max_level)
{
	log_ident = ident;
	log_max = max_level;
}

int pfs_log_level_parse(const char *s)
{
	static const struct {
		const char *name;
		int level;
	} names[] = {
		{ "err", PFS_LOG_ERR },         { "error", PFS_LOG_ERR },
		{ "warning", PFS_LOG_WARNING }, { "warn", PFS_LOG_WARNING },
		{ "notice", PFS_LOG_NOTICE },   { "info", PFS_LOG_INFO },
		{ "debug", PFS_LOG_DEBUG },
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(s, names[i].name) == 0)
			return names[i].level;
	if (s[0] >= '0' + PFS_LOG_ERR && s[0] <= '0' + PFS_LOG_DEBUG && !s[1])
		return s[0] - '0';
	return -1;
}

void pfs_log_use_syslog(void)
{
	openlog(log_ident, LOG_PID, LOG_DAEMON);
	log_syslog = 1;
}

void pfs_log_detach(void)
{
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	pfs_log_use_syslog();
}

int pfs_log_level(void)
{
	return log_max;
}

static const char *level_name(int level)
{
	switch (level) {
	case PFS_LOG_ERR: return "error";
	case PFS_LOG_WARNING: return "warning";
	case PFS_LOG_NOTICE: return "notice";
	case PFS_LOG_INFO: return "info";
	default: return "debug";
	}
}

void pfs_vlog(int level, const char *fmt, va_list ap)
{
	char line[1024];
	struct timespec ts;
	struct tm tm;
	int n, m;

	if (level > log_max)
		return;
	if (log_syslog) {
		vsyslog(level, fmt, ap);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	/* ISO 8601, UTC: a log kept for days still says when. */
	n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s: %s: ",
		     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
		     tm.tm_sec, ts.tv_nsec / 1000000, log_ident, level_name(level));
	if (n < 0)
		return;
	if ((size_t)n >= sizeof line / 2)
		n = sizeof line / 2; /* an absurd ident must not push the message out */
	m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
	if (m < 0)
		return;
	n += m;
	if ((size_t)n >= sizeof line - 1)
		n = sizeof line - 2;
	line[n++] = '\n';
	/* One write per line keeps lines from different threads whole. */
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}

void pfs_log(int level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	pfs_vlog(level, fmt, ap);
	va_end(ap);
}
