/* test_killable.c: unit tests of the reading of a caller's pending
 * signals (fs/killable.c): SIGKILL pending privately or shared counts,
 * other signals do not, and the real /proc of this process. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "check.h"
#include "killable_i.h"

static void test_status_text(void)
{
	CHECK(!killable_status_dying(""));
	CHECK(!killable_status_dying("Name:\tx\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000000\n"));
	/* SIGKILL is signal 9: bit 8, 0x100. */
	CHECK(killable_status_dying("Name:\tx\nSigPnd:\t0000000000000100\nShdPnd:\t0000000000000000\n"));
	CHECK(killable_status_dying("Name:\tx\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000100\n"));
	/* SIGTERM (15: 0x4000), SIGINT (2: 0x2), SIGCHLD, SIGUSR1: no. */
	CHECK(!killable_status_dying("SigPnd:\t0000000000004002\nShdPnd:\t0000000000020200\n"));
	/* Other lines that mention the mask do not count. */
	CHECK(!killable_status_dying("SigBlk:\t0000000000000100\nSigIgn:\t0000000000000100\n"
				     "SigCgt:\t0000000000000100\n"));
	/* Many supplementary groups before: the line is found anyway. */
	char big[70000];
	size_t n = (size_t)snprintf(big, sizeof(big), "Groups:\t");
	while (n < 60000)
		n += (size_t)snprintf(big + n, sizeof(big) - n, "%d ", 1000 + (int)n);
	snprintf(big + n, sizeof(big) - n, "\nSigPnd:\t0000000000000100\n");
	CHECK(killable_status_dying(big));
}

static void test_real_proc(void)
{
	/* No caller: never dying. */
	killable_leave();
	CHECK(!killable_dying());
	/* This process has no SIGKILL pending (it would not run). */
	killable_enter(getpid());
	CHECK(!killable_dying());
	/* A pid that does not exist: its process is gone, nobody waits. */
	killable_enter(0x3ffffff0);
	CHECK(!killable_dying());
	killable_leave();
}

int main(void)
{
	test_status_text();
	test_real_proc();
	return check_done("test_killable");
}
