/* test_link.c: unit tests of when LZ4 pays on a connection (link.h): the
 * mode names and the per-frame choice of codings from the backlog.
 */
#include <unistd.h>

#include "check.h"
#include "podfs/link.h"

static void test_modes(void)
{
	enum pfs_lz4_mode m = PFS_LZ4_NEVER;

	CHECK_EQ(pfs_lz4_mode_parse("auto", &m), 0);
	CHECK_EQ(m, PFS_LZ4_AUTO);
	CHECK_EQ(pfs_lz4_mode_parse("always", &m), 0);
	CHECK_EQ(m, PFS_LZ4_ALWAYS);
	CHECK_EQ(pfs_lz4_mode_parse("never", &m), 0);
	CHECK_EQ(m, PFS_LZ4_NEVER);
	/* Anything else is refused and leaves the mode alone. */
	CHECK_EQ(pfs_lz4_mode_parse("Auto", &m), -1);
	CHECK_EQ(pfs_lz4_mode_parse("", &m), -1);
	CHECK_EQ(pfs_lz4_mode_parse("always ", &m), -1);
	CHECK_EQ(m, PFS_LZ4_NEVER);
	for (int i = PFS_LZ4_AUTO; i <= PFS_LZ4_NEVER; i++) {
		CHECK_EQ(pfs_lz4_mode_parse(pfs_lz4_mode_name((enum pfs_lz4_mode)i), &m), 0);
		CHECK_EQ((int)m, i);
	}
	CHECK_STR(pfs_lz4_mode_name((enum pfs_lz4_mode)7), "?");
}

static void test_choice(void)
{
	const unsigned both = PFS_CAP_LZ4 | PFS_CAP_ZR;

	/* auto: LZ4 only from a backlog of one full reply on. */
	CHECK_EQ(pfs_link_codecs(both, PFS_LZ4_AUTO, 0), PFS_CAP_ZR);
	CHECK_EQ(pfs_link_codecs(both, PFS_LZ4_AUTO, PFS_LZ4_BACKLOG - 1), PFS_CAP_ZR);
	CHECK_EQ(pfs_link_codecs(both, PFS_LZ4_AUTO, PFS_LZ4_BACKLOG), both);
	CHECK_EQ(pfs_link_codecs(both, PFS_LZ4_AUTO, 64u << 20), both);
	/* always / never ignore the backlog. */
	CHECK_EQ(pfs_link_codecs(both, PFS_LZ4_ALWAYS, 0), both);
	CHECK_EQ(pfs_link_codecs(both, PFS_LZ4_NEVER, 64u << 20), PFS_CAP_ZR);
	/* Never adds a coding the peer did not offer. */
	CHECK_EQ(pfs_link_codecs(0, PFS_LZ4_ALWAYS, 64u << 20), 0);
	CHECK_EQ(pfs_link_codecs(PFS_CAP_ZR, PFS_LZ4_ALWAYS, 64u << 20), PFS_CAP_ZR);
	CHECK_EQ(pfs_link_codecs(PFS_CAP_LZ4, PFS_LZ4_AUTO, 0), 0);
}

static void test_unsent(void)
{
	int p[2];

	/* Not a TCP socket, or no socket: "cannot tell" is 0. */
	CHECK_EQ(pfs_sock_unsent(-1), 0);
	CHECK(pipe(p) == 0);
	CHECK_EQ(pfs_sock_unsent(p[1]), 0);
	close(p[0]);
	close(p[1]);
}

int main(void)
{
	test_modes();
	test_choice();
	test_unsent();
	return check_done("test_link");
}
