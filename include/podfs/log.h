/* log.h: one logging sink for both programs (syslog levels).
 *
 * The default sink writes "ident: LEVEL: message" lines to stderr; a
 * daemonized program switches to syslog with pfs_log_use_syslog().
 * Thread-safe: each line is written with one write(2).
 * lib/ codec code never logs; it returns errors.
 */
#ifndef PODFS_LOG_H
#define PODFS_LOG_H

#include <stdarg.h>

enum pfs_log_level {
	PFS_LOG_ERR = 3,
	PFS_LOG_WARNING = 4,
	PFS_LOG_NOTICE = 5,
	PFS_LOG_INFO = 6,
	PFS_LOG_DEBUG = 7,
};

void pfs_log_init(const char *ident, int max_level);
/* Parses a level as both programs' options take it: err (or error),
 * warning (or warn), notice, info, debug, or its syslog number 3..7.
 * Returns the level, or -1 for anything else. */
int pfs_log_level_parse(const char *s);
void pfs_log_use_syslog(void);
/* For a process that has just left its terminal (a daemon's child): stdin,
 * stdout and stderr become /dev/null and the log goes to syslog. */
void pfs_log_detach(void);
int pfs_log_level(void);
void pfs_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void pfs_vlog(int level, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

#define pfs_err(...) pfs_log(PFS_LOG_ERR, __VA_ARGS__)
#define pfs_warn(...) pfs_log(PFS_LOG_WARNING, __VA_ARGS__)
#define pfs_notice(...) pfs_log(PFS_LOG_NOTICE, __VA_ARGS__)
#define pfs_info(...) pfs_log(PFS_LOG_INFO, __VA_ARGS__)
#define pfs_debug(...)                                       \
	do {                                                 \
		if (pfs_log_level() >= PFS_LOG_DEBUG)        \
			pfs_log(PFS_LOG_DEBUG, __VA_ARGS__); \
	} while (0)

#endif /* PODFS_LOG_H */
