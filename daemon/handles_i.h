/* handles_i.h: persistent file handles and the O_PATH fd cache.
 *
 * A wire handle (struct pfs_fh) is
 *   i32 handle_type (LE) | f_handle bytes | 16-byte MAC
 * where MAC = HMAC-SHA256(export key, type | f_handle) truncated, and the
 * export key is derived from a server-only secret (STATE_DIR/handle.key)
 * and the export root's own handle. Clients hold the pod key but never the
 * handle key, so they cannot forge a handle for a file outside the export;
 * a handle whose MAC does not verify is answered with ESTALE.
 *
 * Resolved handles are kept in a bounded LRU cache: wire fh bytes (MAC
 * included) -> O_PATH fd. Entries are reference-counted; an entry evicted
 * or forgotten while in use is closed by its last handles_put().
 *
 * Threads: every function is safe to call from any thread (one mutex).
 * handles_get() needs CAP_DAC_READ_SEARCH in the effective set, so call it
 * with fsuid 0, before switching to a client's credentials.
 */
#ifndef PODFSD_HANDLES_I_H
#define PODFSD_HANDLES_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "podfs/codec.h"
#include "podfs/htab.h"

#define PFSD_HKEY_LEN 32

struct hent {
	struct hnode hn;
	struct hent *prev, *next; /* LRU list, most recent first */
	int fd;                   /* O_PATH, O_CLOEXEC; valid while a ref is held */
	unsigned refs;
	bool dead;                /* no longer in the table */
	struct pfs_fh fh;
};

struct handles;

/* Loads STATE_DIR/handle.key, creating the directory (0700) and the key
 * (0600, random) on first start; *created (if not NULL) says whether it
 * was created now. Returns 0 or -errno with a reason in err. */
int handles_load_key(const char *state_dir, uint8_t key[PFSD_HKEY_LEN], bool *created, char *err,
		     size_t errlen);

/* Sets up handles for the export whose O_PATH directory fd is export_fd
 * (handles_new takes ownership of it, also on failure). Checks that the
 * filesystem makes handles and that we can open them. cache_max bounds the
 * fd cache. Returns 0 or -errno with a one-line reason in err. */
int handles_new(struct handles **out, int export_fd, const uint8_t key[PFSD_HKEY_LEN],
		size_t cache_max, char *err, size_t errlen);
/* Sets the fd cache's bound (the daemon shrinks it while clients' files
 * need its fds: limits_i.h), closing the unused fds beyond it at once.
 * Any thread. */
void handles_set_max(struct handles *h, size_t max);
/* Closes every cached and held fd and the export fd, and frees h (after
 * the loop closed: no worker runs). Safe on NULL. */
void handles_free(struct handles *h);

/* The export's directory fd (not O_PATH: statfs, fanotify marks). Valid
 * until handles_free. */
int handles_export_fd(const struct handles *h);
/* The export root's wire handle (the AUTH reply's root). Valid until
 * handles_free. */
const struct pfs_fh *handles_root(const struct handles *h);

/* Resolves a wire handle to a cached O_PATH fd. On success *out holds a
 * reference: release it with handles_put(). Returns 0, -ESTALE (bad MAC,
 * malformed, or the object is gone), or another -errno. */
int handles_get(struct handles *h, const struct pfs_fh *fh, struct hent **out);
/* handles_get of a handle the cache holds only: -EAGAIN where it would
 * have to open the object (it may wait for the disk). */
int handles_get_cached(struct handles *h, const struct pfs_fh *fh, struct hent **out);
/* Whether fh, which handles_get answered ESTALE, has the shape of our
 * handles but a MAC that does not verify: made under another handle
 * secret (a changed state directory) or forged. Any thread. */
bool handles_foreign(const struct handles *h, const struct pfs_fh *fh);
/* Drops a reference of handles_get (e may be NULL); an entry no longer in
 * the cache is closed by its last one. */
void handles_put(struct handles *h, struct hent *e);

/* Makes the wire handle of the object open as fd (any fd, O_PATH is fine).
 * Returns 0, -EXDEV if the object is on another mount than the export, or
 * -errno from name_to_handle_at. Needs no privilege. */
int handles_encode(struct handles *h, int fd, struct pfs_fh *out);

/* Same for name inside directory dirfd, without following symlinks and
 * without opening it. */
int handles_encode_at(struct handles *h, int dirfd, const char *name, struct pfs_fh *out);

/* Offers fd (an O_PATH fd of the object named fh) to the cache. Always takes
 * ownership of fd: it is cached, or closed if fh is cached already. */
void handles_adopt(struct handles *h, const struct pfs_fh *fh, int fd);

/* Drops fh from the cache (its fd is closed once unused), so that deleting
 * a file frees its blocks instead of an O_PATH fd keeping it alive. */
void handles_forget(struct handles *h, const struct pfs_fh *fh);

/* Deleted files (and removed directories) other clients may hold open. A
 * client opens a file it knows it may read without telling the daemon
 * (fs/ops_common.c ops_open_locally), which opens it by handle at its
 * first READ (READDIR); once the file's last name is gone and nothing
 * holds it open, open_by_handle_at fails. handles_orphan keeps fd (an
 * O_PATH fd of the file named fh, taken before its last name went) as fh's entry for
 * ms milliseconds, so the file stays openable by handle while the push
 * about it reaches those clients, whose receipt makes them open it on the
 * daemon (see fs/ofile.c ofile_attach_lazy). Always takes fd. Returns false
 * (and keeps nothing) when ORPHANS_MAX files are held already. */
bool handles_orphan(struct handles *h, const struct pfs_fh *fh, int fd, unsigned ms);
/* Lets go of the files whose time is up (their blocks are freed once no
 * open file holds them). Worker thread: the last close of a big deleted
 * file frees its blocks. Returns how many are still held. */
size_t handles_orphans_expire(struct handles *h);

/* Interest key of a wire handle: a seeded 64-bit hash of the kernel handle
 * inside it (type + f_handle, MAC excluded), equal to handles_key_kernel()
 * of the same object. Any thread, no syscall. */
uint64_t handles_key(const struct handles *h, const struct pfs_fh *fh);
/* Same from a kernel handle (as fanotify reports it). */
uint64_t handles_key_kernel(const struct handles *h, int type, const void *f_handle, size_t n);
/* Builds the wire handle (MAC included) of a kernel handle. Returns 0 or
 * -EINVAL if it does not fit. */
int handles_from_kernel(const struct handles *h, int type, const void *f_handle, size_t n,
			struct pfs_fh *out);

/* Closes cached fds of objects deleted behind our back (link count 0 and
 * not in use), so that files removed directly in the export free their
 * blocks. Worker thread; takes the cache mutex for a pass over the cache.
 * Returns the number of entries dropped. */
size_t handles_sweep(struct handles *h);

#endif /* PODFSD_HANDLES_I_H */
