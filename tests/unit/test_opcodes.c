/* test_opcodes.c: the opcode table of wire.h (PFS_OPS) as codec.h serves
 * it: every row's name, flags and message names, the properties both
 * programs rely on, and what an opcode outside the table gets.
 */
#include <stdlib.h>

#include "check.h"
#include "podfs/codec.h"

static void test_op_names(void)
{
	unsigned known = 0;
#define OP_CHECK(n, v, ...)                                      \
	CHECK_STR(pfs_op_name(PFS_OP_##n), #n);                  \
	CHECK(PFS_OP_##n < PFS_OP_MAX);                          \
	CHECK(pfs_op_flags(PFS_OP_##n) & PFS_OPF_KNOWN);         \
	known++;
	PFS_OPS(OP_CHECK)
#undef OP_CHECK
	for (unsigned op = 0; op < 70000; op++) {
		bool is_op = false;
#define OP_IS(n, v, ...) is_op |= op == v;
		PFS_OPS(OP_IS)
#undef OP_IS
		if (!is_op && !CHECK_STR(pfs_op_name(op), "?"))
			fprintf(stderr, "  op %u\n", op);
		if (!is_op && !CHECK(pfs_op_flags(op) == 0))
			fprintf(stderr, "  op %u\n", op);
	}
	CHECK_STR(pfs_op_name(UINT32_MAX), "?");
	CHECK_STR(pfs_op_name(PFS_OP_MAX), "?");
	CHECK(known > 30);
}

/* Whether name is a message of codec.h's PFS_MESSAGES. */
static bool is_message(const char *name)
{
#define MSG_IS(m)                      \
	if (strcmp(name, #m) == 0)     \
		return true;
	PFS_MESSAGES(MSG_IS)
#undef MSG_IS
	return false;
}

/* The opcode table names real messages, and its properties are the ones
 * both programs rely on. */
static void test_op_table(void)
{
	static const char *const rep_lists[] = { "none", "-", "dirents", "listing", "listings",
						 "listing_page" };
	const unsigned drc_ops[] = { PFS_OP_SETATTR, PFS_OP_MKNOD, PFS_OP_MKDIR,
				     PFS_OP_SYMLINK, PFS_OP_UNLINK, PFS_OP_RMDIR,
				     PFS_OP_RENAME, PFS_OP_LINK, PFS_OP_CREATE,
				     PFS_OP_SETXATTR, PFS_OP_REMOVEXATTR, PFS_OP_UNLINKS,
				     PFS_OP_CREATES };
	unsigned ndrc = 0, nmodify = 0;

	for (unsigned op = 0; op < PFS_OP_MAX; op++) {
		const struct pfs_op_info *oi = pfs_op_info(op);
		if (!(oi->flags & PFS_OPF_KNOWN))
			continue;
		if (!CHECK(strcmp(oi->req, "none") == 0 || is_message(oi->req)))
			fprintf(stderr, "  %s request %s\n", oi->name, oi->req);
		bool list = false;
		for (size_t i = 0; i < sizeof rep_lists / sizeof rep_lists[0]; i++)
			list |= strcmp(oi->rep, rep_lists[i]) == 0;
		if (!CHECK(list || is_message(oi->rep)))
			fprintf(stderr, "  %s reply %s\n", oi->name, oi->rep);
		/* A kept reply implies that a running retry is not run. */
		if (oi->flags & PFS_OPF_DRC)
			CHECK(oi->flags & PFS_OPF_ONCE);
		/* Everything kept changes the export. */
		if (oi->flags & PFS_OPF_DRC)
			CHECK(oi->flags & PFS_OPF_MODIFY);
		/* Pushes are never requests a server runs. */
		if (op >= PFS_OP_INVAL_INODE)
			CHECK((oi->flags & ~PFS_OPF_KNOWN) == 0);
		ndrc += (oi->flags & PFS_OPF_DRC) != 0;
		nmodify += (oi->flags & PFS_OPF_MODIFY) != 0;
	}
	for (size_t i = 0; i < sizeof drc_ops / sizeof drc_ops[0]; i++)
		if (!CHECK(pfs_op_flags(drc_ops[i]) & PFS_OPF_DRC))
			fprintf(stderr, "  %s\n", pfs_op_name(drc_ops[i]));
	CHECK_EQ(ndrc, sizeof drc_ops / sizeof drc_ops[0]);
	/* + WRITE, FALLOCATE, COPY_RANGE, SLOTS (files not named yet) */
	CHECK_EQ(nmodify, ndrc + 4);
	CHECK(pfs_op_flags(PFS_OP_WRITE) & PFS_OPF_ONCE);
	CHECK(!(pfs_op_flags(PFS_OP_WRITE) & PFS_OPF_DRC));
	/* As a WRITE: run again, a late copy could land over a later write. */
	CHECK(pfs_op_flags(PFS_OP_COPY_RANGE) & PFS_OPF_ONCE);
	CHECK(pfs_op_flags(PFS_OP_COPY_RANGE) & PFS_OPF_MODIFY);
	CHECK(!(pfs_op_flags(PFS_OP_COPY_RANGE) & PFS_OPF_DRC));
	/* A late copy of a lock request must not overtake the owner's next. */
	CHECK(pfs_op_flags(PFS_OP_SETLK) & PFS_OPF_ONCE);
	CHECK(pfs_op_flags(PFS_OP_UNLOCK_OWNER) & PFS_OPF_ONCE);
	CHECK(pfs_op_flags(PFS_OP_RECLAIM) & PFS_OPF_ONCE);
	/* A truncating OPEN's reply is kept (op_open): it must be seen. */
	CHECK(pfs_op_flags(PFS_OP_OPEN) & PFS_OPF_ONCE);
	CHECK(pfs_op_flags(PFS_OP_READ) & PFS_OPF_BULK);
	CHECK(pfs_op_flags(PFS_OP_WRITE) & PFS_OPF_BULK);
	CHECK(!(pfs_op_flags(PFS_OP_LOOKUP) & PFS_OPF_BULK));
	CHECK(pfs_op_flags(PFS_OP_LOOKUP) & PFS_OPF_META);
	CHECK(pfs_op_flags(PFS_OP_LOOKUP) & PFS_OPF_ORDERED);
	CHECK(!(pfs_op_flags(PFS_OP_SETLK) & PFS_OPF_ORDERED));
	CHECK(!(pfs_op_flags(PFS_OP_FSYNC) & PFS_OPF_ORDERED));
}

int main(void)
{
	test_op_names();
	test_op_table();
	return check_done("test_opcodes");
}
