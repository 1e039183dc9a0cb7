/* test_log.c: unit tests of the default stderr sink (log.h): line format,
 * level filtering, truncation of long messages to one whole line, and
 * that pfs_debug does not evaluate its arguments when DEBUG is off.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "podfs/log.h"

/* Runs fn with stderr redirected into a pipe; returns what it wrote. */
static size_t capture(void (*fn)(void), char *out, size_t cap)
{
	int p[2], saved;
	ssize_t n;
	size_t len = 0;

	fflush(stderr);
	if (pipe(p) < 0 || (saved = dup(STDERR_FILENO)) < 0)
		return 0;
	dup2(p[1], STDERR_FILENO);
	close(p[1]);
	fn();
	dup2(saved, STDERR_FILENO);
	close(saved);
	while (len + 1 < cap && (n = read(p[0], out + len, cap - 1 - len)) > 0)
		len += (size_t)n;
	close(p[0]);
	out[len] = 0;
	return len;
}

static int evaluated;
static int side_effect(void)
{
	return ++evaluated;
}

static void log_levels(void)
{
	pfs_log_init("podfs-test", PFS_LOG_INFO);
	pfs_err("disk %s", "gone");
	pfs_warn("w%d", 1);
	pfs_notice("n");
	pfs_info("i");
	pfs_log(PFS_LOG_DEBUG, "hidden debug");
	pfs_debug("hidden %d", side_effect());
}

static void log_long(void)
{
	static char big[5000];
	memset(big, 'x', sizeof big - 1);
	pfs_log_init("t", PFS_LOG_DEBUG);
	pfs_log(PFS_LOG_ERR, "%s", big);
	pfs_debug("shown %d", side_effect());
}

/* Both programs' options take the same level words and numbers. */
static void level_parse(void)
{
	CHECK_EQ(pfs_log_level_parse("err"), PFS_LOG_ERR);
	CHECK_EQ(pfs_log_level_parse("error"), PFS_LOG_ERR);
	CHECK_EQ(pfs_log_level_parse("warning"), PFS_LOG_WARNING);
	CHECK_EQ(pfs_log_level_parse("warn"), PFS_LOG_WARNING);
	CHECK_EQ(pfs_log_level_parse("notice"), PFS_LOG_NOTICE);
	CHECK_EQ(pfs_log_level_parse("info"), PFS_LOG_INFO);
	CHECK_EQ(pfs_log_level_parse("debug"), PFS_LOG_DEBUG);
	CHECK_EQ(pfs_log_level_parse("3"), PFS_LOG_ERR);
	CHECK_EQ(pfs_log_level_parse("7"), PFS_LOG_DEBUG);
	CHECK_EQ(pfs_log_level_parse("2"), -1);
	CHECK_EQ(pfs_log_level_parse("8"), -1);
	CHECK_EQ(pfs_log_level_parse("77"), -1);
	CHECK_EQ(pfs_log_level_parse(""), -1);
	CHECK_EQ(pfs_log_level_parse("DEBUG"), -1);
	CHECK_EQ(pfs_log_level_parse("debugx"), -1);
}

int main(void)
{
	static char out[16384];
	size_t n;

	level_parse();
	n = capture(log_levels, out, sizeof out);
	CHECK(strstr(out, "podfs-test: error: disk gone\n") != NULL);
	CHECK(strstr(out, "podfs-test: warning: w1\n") != NULL);
	CHECK(strstr(out, "podfs-test: notice: n\n") != NULL);
	CHECK(strstr(out, "podfs-test: info: i\n") != NULL);
	CHECK(strstr(out, "hidden") == NULL);
	CHECK_EQ(evaluated, 0);
	CHECK_EQ(pfs_log_level(), PFS_LOG_INFO);
	/* Four lines, each "YYYY-MM-DDTHH:MM:SS.mmmZ ident: level: msg". */
	int lines = 0;
	for (size_t i = 0; i < n; i++)
		lines += out[i] == '\n';
	CHECK_EQ(lines, 4);
	CHECK(n > 25 && out[0] == '2' && out[4] == '-' && out[7] == '-' && out[10] == 'T' &&
	      out[13] == ':' && out[16] == ':' && out[19] == '.' && out[23] == 'Z' && out[24] == ' ');

	/* A message longer than the line buffer: one line, cut, newline-ended. */
	evaluated = 0;
	n = capture(log_long, out, sizeof out);
	char *nl = strchr(out, '\n');
	CHECK(nl != NULL && (size_t)(nl - out) < 1024);
	CHECK(nl && strstr(nl + 1, "shown 1\n") != NULL);
	CHECK_EQ(evaluated, 1);
	CHECK(n > 0 && out[n - 1] == '\n');
	return check_done("test_log");
}
