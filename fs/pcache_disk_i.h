/* pcache_disk_i.h: the persistent content cache's state, and its disk
 * half (pcache_disk.c): the entry files of DIR/e/ (named by a hash of
 * the handle, format pcache_fmt.h), the in-memory index of them (disk
 * bytes and last use, for the size cap), reading a range of an entry
 * with its checksums (pcache_read of pcache_i.h), writing one through
 * DIR/tmp/ and a rename,
 * eviction down to the cap, and the start-up scan. pcache.c (above it)
 * owns the struct's lifetime, the job queue, the worker thread and the
 * fetches from the server. See pcache_i.h for the whole design.
 *
 * Locking: pc->bg.lock guards the fields marked so; the pcd_* functions
 * say whether the caller holds it. No function here sleeps on the
 * network.
 */
#ifndef PODFS_PCACHE_DISK_I_H
#define PODFS_PCACHE_DISK_I_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "bg_i.h"
#include "pcache_fmt.h"
#include "pcache_i.h"
#include "podfs/htab.h"

/* One entry of the index (one file in e/). */
struct pent {
	struct hnode hn;   /* pc->tab, by name */
	uint64_t name;     /* hash of the handle: the file name */
	uint64_t bytes;    /* disk bytes counted against the cap */
	int64_t last_use;  /* ns since the epoch (kept as the file's mtime) */
};

enum job_kind { JOB_STORE, JOB_FETCH };

/* A job of the worker thread (pcache.c). */
struct job {
	struct job *next;
	enum job_kind kind;
	struct pcf_key k;
	struct pfs_fh fh;
	struct pfs_creds cr; /* JOB_FETCH */
	uint8_t *data;       /* JOB_STORE: the content, k.size bytes */
};

struct pcache {
	int dirfd, efd, tmpfd, lockfd;
	uint64_t max_bytes;
	struct client *c;

	/* The scan and worker threads; bg.lock guards everything below. */
	struct bg bg;
	struct htab tab;      /* struct pent */
	size_t nents;
	uint64_t total;       /* sum of pent.bytes */
	bool scanned;         /* the index holds every file of e/ */
	struct job *qhead, *qtail;
	size_t qbytes, qfetches;
	int64_t drain_until;  /* CLOCK_MONOTONIC s: fetches after it are dropped */
	bool busy;            /* the worker is on a job */
	bool started;
	uint64_t tmp_seq;

	atomic_uint_fast64_t hits, misses, bytes_served, stored, fetched, discarded, evicted;
};

/* The entry key of fh at version v. */
void pcd_key(struct pcf_key *k, const struct pfs_fh *fh, const struct dver *v);

/* The disk bytes a file of file_size bytes counts for (4 KiB blocks). */
uint64_t pcd_disk_bytes(uint64_t file_size);

/* The index entry of file name, or NULL. Caller holds pc->bg.lock. */
struct pent *pcd_find(struct pcache *pc, uint64_t name);
/* Records file name with bytes and last use (ns since the epoch),
 * replacing what was known (on ENOMEM it is not counted; the next scan
 * at mount counts it). Caller holds pc->bg.lock. */
void pcd_set(struct pcache *pc, uint64_t name, uint64_t bytes, int64_t last_use);

/* True if e/ already holds a sound header for exactly key k (file
 * name). Without pc->bg.lock. */
bool pcd_have(struct pcache *pc, uint64_t name, const struct pcf_key *k);

/* An entry being written: a temporary file under tmp/ that becomes the
 * entry only once whole (pcd_end). */
struct pcd_writer {
	struct pcache *pc;
	uint64_t name;              /* the entry's file name */
	const struct pcf_key *k;    /* borrowed until pcd_end */
	int fd;
	char tmp[64];               /* its name under tmp/ */
	uint8_t *table;             /* CRC32C of each block of the data */
	uint64_t data_off;          /* where the data starts in the file */
};

/* Starts writing entry name of key k (k->size bytes of data to come).
 * Returns 0 (then call pcd_end), or -errno. Without pc->bg.lock. */
int pcd_begin(struct pcache *pc, uint64_t name, const struct pcf_key *k, struct pcd_writer *w);
/* Writes data[len] at offset off of the content (off a multiple of
 * PCF_BLOCK; the last block may be short). 0 or -errno. */
int pcd_write(struct pcd_writer *w, uint64_t off, const void *data, size_t len);
/* Ends w: if rc is 0 (every byte written), writes the header and the
 * checksums last, renames the file into e/ and indexes it (a crash
 * leaves a temporary, removed at the next start, or a whole entry);
 * else, or if that fails, removes it. Returns 0 or the -errno. */
int pcd_end(struct pcd_writer *w, int rc);

/* Deletes least recently used entries until the total is under
 * EVICT_TO_PCT % of the cap, once the scan is done and if over the cap.
 * Without the lock; worker or scan thread. */
void pcd_evict(struct pcache *pc);

/* The start-up scan thread (bg_start's fn, arg: pc): removes tmp/'s
 * leftovers, indexes e/, then evicts down to the cap. */
void *pcd_scan_main(void *arg);

#endif /* PODFS_PCACHE_DISK_I_H */
