/* test_bootverf.c: the write verifier from the machine's boot id
 * (daemon/bootverf.c): one id gives one verifier, with or without its
 * newline, another id another, never 0 and not the id's bytes; the file
 * is read whole, and an empty, overlong or missing one is refused; this
 * machine's own boot id file gives a verifier.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "bootverf_i.h"
#include "check.h"

static const char ID_A[] = "0c1b7f6e-2d4a-4c1e-9a57-4be5a3c2f001";
static const char ID_B[] = "0c1b7f6e-2d4a-4c1e-9a57-4be5a3c2f002";

static void test_of(void)
{
	uint64_t a = bootverf_of(ID_A, strlen(ID_A));

	CHECK(a != 0);
	CHECK(a == bootverf_of(ID_A, strlen(ID_A)));
	CHECK(a != bootverf_of(ID_B, strlen(ID_B)));
	char nl[64];
	snprintf(nl, sizeof(nl), "%s\n", ID_A);
	CHECK(a == bootverf_of(nl, strlen(nl)));
	CHECK(memcmp(&a, ID_A, sizeof(a)) != 0);
	CHECK(bootverf_of("", 0) != 0);
}

/* Writes text into a new temporary file; returns its path (static). */
static const char *file_with(const char *text)
{
	static char path[] = "/tmp/test_bootverf.XXXXXX";
	strcpy(path, "/tmp/test_bootverf.XXXXXX");
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

static void test_read(void)
{
	uint64_t v = 0;
	char text[256];

	snprintf(text, sizeof(text), "%s\n", ID_A);
	const char *p = file_with(text);
	CHECK_EQ(bootverf_read(p, &v), 0);
	CHECK(v == bootverf_of(ID_A, strlen(ID_A)));
	unlink(p);

	p = file_with("\n");
	CHECK_EQ(bootverf_read(p, &v), -EINVAL);
	unlink(p);
	memset(text, 'x', BOOTVERF_MAX + 1);
	text[BOOTVERF_MAX + 1] = 0;
	p = file_with(text);
	CHECK_EQ(bootverf_read(p, &v), -EINVAL);
	unlink(p);
	text[BOOTVERF_MAX] = 0; /* the longest accepted */
	p = file_with(text);
	CHECK_EQ(bootverf_read(p, &v), 0);
	unlink(p);
	CHECK_EQ(bootverf_read("/nonexistent/boot_id", &v), -ENOENT);

	/* This machine's: read twice, the same. */
	uint64_t a = 0, b = 0;
	CHECK_EQ(bootverf_read(BOOTVERF_PATH, &a), 0);
	CHECK_EQ(bootverf_read(BOOTVERF_PATH, &b), 0);
	CHECK(a != 0 && a == b);
}

int main(void)
{
	test_of();
	test_read();
	return check_done("test_bootverf");
}
