/* bootverf_i.h: the write verifier (pfs_hello_rep.write_verf).
 *
 * A client keeps each write podfsd acknowledged until a COMMIT answered
 * under the same verifier covers it; under another, it sends the write
 * again (fs/wb_i.h, "Durability"). So the verifier must change exactly
 * when acknowledged writes may be gone: when the machine restarted (its
 * page cache held them), not when podfsd alone did (kill -9, an upgrade:
 * what pwrite() took is in the page cache, and the kernel writes it back
 * whatever becomes of the process). Sending writes again after a restart
 * of podfsd alone would land them over what other hosts wrote since.
 *
 * The verifier is derived from the kernel's boot id (BOOTVERF_PATH: a
 * random UUID per boot): the first 8 bytes of SHA-256(BOOTVERF_LABEL,
 * NUL, the id's text without its newline), never 0. Where it cannot be
 * read, podfsd takes a random one per start (every restart then counts
 * as a crash, as NFS servers do with their start time).
 */
#ifndef PODFSD_BOOTVERF_I_H
#define PODFSD_BOOTVERF_I_H

#include <stddef.h>
#include <stdint.h>

#define BOOTVERF_PATH "/proc/sys/kernel/random/boot_id"
#define BOOTVERF_LABEL "podfs write verifier"
#define BOOTVERF_MAX 64 /* bytes of boot id text read */

/* The verifier of boot id text id[n] (a trailing newline is not part of
 * it; bytes past BOOTVERF_MAX are not either). Never 0. */
uint64_t bootverf_of(const char *id, size_t n);

/* The verifier of the boot id in the file at path. Returns 0 with *out,
 * or -errno: the file's, or -EINVAL (empty, or longer than
 * BOOTVERF_MAX). */
int bootverf_read(const char *path, uint64_t *out);

#endif /* PODFSD_BOOTVERF_I_H */
