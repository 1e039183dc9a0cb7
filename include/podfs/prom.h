/* prom.h: writing metrics in the Prometheus text exposition format,
 * version 0.0.4 (what podfsd --metrics and podfs -o metrics= serve).
 *
 * A metric family is a "# HELP" and a "# TYPE" line followed by its
 * samples: "name{label="value",...} number". Label values are escaped
 * (backslash, double quote, newline); names are the caller's constants
 * and are checked only by the unit test. Writes into the caller's buffer
 * and never past it: once it is full, later writes are dropped and
 * p->overflow is set (the caller then answers 500 or retries bigger).
 * Pure; any thread.
 */
#ifndef PODFS_PROM_H
#define PODFS_PROM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "podfs/lathist.h"

#define PFS_PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct pfs_prom {
	char *buf;
	size_t cap, len;
	bool overflow;
};

void pfs_prom_init(struct pfs_prom *p, char *buf, size_t cap);

/* The HELP and TYPE lines of the family name (type: "counter", "gauge",
 * "histogram"). */
void pfs_prom_family(struct pfs_prom *p, const char *name, const char *type, const char *help);

/* One sample of name, its labels given as key, value pairs of strings
 * after v and ended by a NULL key (at most PFS_PROM_LABELS pairs):
 *   pfs_prom_u64(p, "podfsd_requests_total", 7, "op", "READ", NULL); */
#define PFS_PROM_LABELS 4
void pfs_prom_u64(struct pfs_prom *p, const char *name, uint64_t v, ...);
void pfs_prom_f64(struct pfs_prom *p, const char *name, double v, ...);

/* The samples of a histogram of latencies (lathist.h counts, sum_us
 * their sum in us) in seconds: name_bucket{le=...} for bounds of 4^k us
 * (16 us .. 67 s) and +Inf, name_sum, name_count; with one label k=v
 * (k NULL: none). A bound counts the latencies below it, measured in
 * whole microseconds (so the true ones at or below it). */
void pfs_prom_lathist(struct pfs_prom *p, const char *name, const char *k, const char *v,
		      const uint64_t counts[LATHIST_BUCKETS], uint64_t sum_us);

#endif /* PODFS_PROM_H */
