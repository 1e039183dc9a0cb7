/* fuzz.h: shared bits of the podfs libFuzzer targets.
 *
 * Each target defines LLVMFuzzerTestOneInput. Built with
 * -fsanitize=fuzzer it runs under libFuzzer; linked with replay.c instead
 * it runs over the seed corpus in the normal build (meson suite 'fuzz').
 * A target checks its properties with FUZZ_ASSERT, which aborts so that
 * both libFuzzer and the replay driver report the input.
 */
#ifndef PODFS_FUZZ_H
#define PODFS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_ASSERT(cond)                                                             \
	do {                                                                          \
		if (!(cond)) {                                                        \
			fprintf(stderr, "%s:%d: fuzz property failed: %s\n", __FILE__, \
				__LINE__, #cond);                                     \
			abort();                                                      \
		}                                                                     \
	} while (0)

#endif /* PODFS_FUZZ_H */
