/* bigbuf.h: buffers of a request's size, kept for the next request, in
 * the builds with a sanitizer.
 *
 * A READ's reply, a WRITE's payload and their encoded or sealed copies
 * are up to a megabyte each, made and freed once per request. glibc keeps
 * such buffers on its heap for the next (pfs_payload_alloc_tune, frame.h).
 * The allocators of AddressSanitizer and ThreadSanitizer cannot be told
 * to: above 128 KiB they map every buffer afresh and unmap it at free, so
 * each of its pages is faulted in again. On a VM whose page fault costs
 * about 11 us (this project's test machine, a Firecracker guest), that is
 * 2.5 ms of CPU per megabyte, where the request itself takes a fraction
 * of that: in the sanitized builds the tests run, these were more than a
 * quarter of all page faults (test_exerciser: 996,000 faults, 718,000
 * with this).
 *
 * So there, buffers of PFS_BIG_MIN bytes or more are taken from a few
 * kept after use, each of PFS_BIG_CAP bytes (the largest any request or
 * reply needs, its codings and TLS records included), and go back there
 * when freed; at most PFS_BIG_KEEP are kept (about 9 MB). A kept buffer
 * is as checked as a fresh one: under AddressSanitizer the bytes past the
 * n asked for, and the whole buffer while it is kept, are poisoned, so
 * that an overrun or a use after free still stops the program. Without a
 * sanitizer these are malloc and free.
 *
 * Any thread: a buffer may be freed by another thread than its maker's.
 */
#ifndef PODFS_BIGBUF_H
#define PODFS_BIGBUF_H

#include <stddef.h>

#include "podfs/wire.h"

/* PFS_BIG_ASAN: built with AddressSanitizer (kept buffers are poisoned);
 * PFS_BIG_KEEPS: with AddressSanitizer or ThreadSanitizer (buffers are
 * kept at all). gcc says so with __SANITIZE_*__, clang with
 * __has_feature. */
#if defined(__SANITIZE_ADDRESS__)
#define PFS_BIG_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PFS_BIG_ASAN 1
#endif
#endif
#if defined(PFS_BIG_ASAN) || defined(__SANITIZE_THREAD__)
#define PFS_BIG_KEEPS 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PFS_BIG_KEEPS 1
#endif
#endif

#define PFS_BIG_MIN (128u * 1024)
#define PFS_BIG_CAP (PFS_MAX_WIRE + 64u * 1024)
#define PFS_BIG_KEEP 8

/* As malloc(n) (NULL if out of memory; n == 0 allocates one byte). The
 * buffer may be given to free() or realloc() as any other; given to
 * pfs_big_free, one of PFS_BIG_CAP bytes is kept for the next. */
void *pfs_big_alloc(size_t n);
/* As pfs_big_alloc, but aborts the program when out of memory
 * (xalloc.h). */
void *pfs_big_xalloc(size_t n);
/* As free(p), for any p from malloc (NULL too): a buffer of
 * PFS_BIG_CAP bytes is kept while fewer than PFS_BIG_KEEP are. */
void pfs_big_free(void *p);
/* How many buffers are kept now (always 0 without a sanitizer). */
unsigned pfs_big_kept(void);

#endif /* PODFS_BIGBUF_H */
