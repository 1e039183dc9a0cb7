/* testfh.h: a made-up file handle per tag, for the unit tests of the
 * client's modules that key state by handle (gate.c, pushq.c). Distinct
 * tags give distinct handles; the same tag the same one. */
#ifndef PODFS_TEST_TESTFH_H
#define PODFS_TEST_TESTFH_H

#include <stdint.h>
#include <string.h>

#include "podfs/codec.h"

static inline struct pfs_fh fh_of(uint8_t tag)
{
	struct pfs_fh fh;
	memset(&fh, 0, sizeof(fh));
	fh.len = 12;
	for (int i = 0; i < 12; i++)
		fh.data[i] = (uint8_t)(tag * 31 + i);
	return fh;
}

#endif /* PODFS_TEST_TESTFH_H */
