/* test_sanroots: with lib/sanroots.c (LeakSanitizer without the runtimes'
 * globals), a leak is still found and what a global or a library holds is
 * still no leak. Built only with AddressSanitizer (tests/unit/meson.build).
 * Each case is a child whose exit runs the leak check: a leak makes it die
 * (SIGABRT under abort_on_error, else exit status 1, or 23 from a
 * standalone LeakSanitizer). */
#include <openssl/ssl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void *volatile held; /* reachable from a global */
static void *volatile lost; /* cleared: what it pointed to leaks */
static int failures;

#define CHECK(cond)                                                              \
	do {                                                                     \
		if (!(cond)) {                                                   \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
			failures++;                                              \
		}                                                                \
	} while (0)

/* Runs body in a child that then exits 0; returns whether its leak check
 * failed it. */
static int leak_found(void (*body)(void))
{
	int st;
	pid_t pid = fork();

	if (pid < 0) {
		perror("fork");
		exit(1);
	}
	if (pid == 0) {
		body();
		exit(0);
	}
	if (waitpid(pid, &st, 0) != pid) {
		perror("waitpid");
		exit(1);
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	/* ASan's exit status for an error is 1, LeakSanitizer's own 23. */
	if ((WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT) ||
	    (WIFEXITED(st) && (WEXITSTATUS(st) == 1 || WEXITSTATUS(st) == 23)))
		return 1;
	fprintf(stderr, "child ended oddly (status %#x)\n", st);
	exit(1);
}

/* What the programs hold at exit: a global's block, libc's stdio buffer,
 * OpenSSL's state. */
static void holds(void)
{
	FILE *f = fopen("/proc/self/stat", "r");
	char line[64];

	held = malloc(100);
	memset((void *)held, 1, 100);
	if (f && fgets(line, sizeof(line), f))
		(void)line;
	OPENSSL_init_ssl(0, NULL);
	SSL_CTX_free(SSL_CTX_new(TLS_method()));
}

static void leaks(void)
{
	holds();
	lost = malloc(77);
	memset((void *)lost, 2, 77);
	lost = NULL;
}

static void leaks_from_global(void)
{
	holds();
	held = NULL; /* the block a global held, no longer reachable */
}

int main(void)
{
	/* The leaking children's reports land in the test's log: expected. */
	CHECK(!leak_found(holds));
	CHECK(leak_found(leaks));
	CHECK(leak_found(leaks_from_global));
	if (failures)
		fprintf(stderr, "%d check(s) failed\n", failures);
	return failures ? 1 : 0;
}
