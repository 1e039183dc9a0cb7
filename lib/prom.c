/* prom.c: the Prometheus text exposition format (see podfs/prom.h). */
#include "podfs/prom.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void pfs_prom_init(struct pfs_prom *p, char *buf, size_t cap)
{
	p->buf = buf;
	p->cap = cap;
	p->len = 0;
	p->overflow = false;
	if (cap)
		buf[0] = 0;
}

__attribute__((format(printf, 2, 3))) static void put(struct pfs_prom *p, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (p->overflow || p->cap == 0)
		return;
	va_start(ap, fmt);
	n = vsnprintf(p->buf + p->len, p->cap - p->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= p->cap - p->len) {
		p->overflow = true;
		p->buf[p->len] = 0;
		return;
	}
	p->len += (size_t)n;
}

void pfs_prom_family(struct pfs_prom *p, const char *name, const char *type, const char *help)
{
	/* HELP text would escape backslash and newline; ours has neither. */
	put(p, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* k="v" with v escaped (backslash, double quote, newline). */
static void label(struct pfs_prom *p, const char *k, const char *v)
{
	put(p, "%s=\"", k);
	for (const char *s = v ? v : ""; *s && !p->overflow; s++) {
		if (*s == '\\')
			put(p, "\\\\");
		else if (*s == '"')
			put(p, "\\\"");
		else if (*s == '\n')
			put(p, "\\n");
		else
			put(p, "%c", *s);
	}
	put(p, "\"");
}

/* name{labels} from the NULL-ended pairs in ap. */
static void name_labels(struct pfs_prom *p, const char *name, va_list ap)
{
	const char *k;
	unsigned n = 0;

	put(p, "%s", name);
	while (n < PFS_PROM_LABELS && (k = va_arg(ap, const char *))) {
		const char *v = va_arg(ap, const char *);
		put(p, n ? "," : "{");
		label(p, k, v);
		n++;
	}
	if (n)
		put(p, "}");
}

/* A sample is written whole or not at all. */
static void end_sample(struct pfs_prom *p, size_t start)
{
	if (p->overflow && start < p->cap)
		p->buf[p->len = start] = 0;
}

void pfs_prom_u64(struct pfs_prom *p, const char *name, uint64_t v, ...)
{
	size_t start = p->len;
	va_list ap;

	va_start(ap, v);
	name_labels(p, name, ap);
	va_end(ap);
	put(p, " %" PRIu64 "\n", v);
	end_sample(p, start);
}

void pfs_prom_f64(struct pfs_prom *p, const char *name, double v, ...)
{
	size_t start = p->len;
	va_list ap;

	va_start(ap, v);
	name_labels(p, name, ap);
	va_end(ap);
	if (isnan(v))
		put(p, " NaN\n");
	else if (isinf(v))
		put(p, " %s\n", v > 0 ? "+Inf" : "-Inf");
	else
		put(p, " %.9g\n", v);
	end_sample(p, start);
}

void pfs_prom_lathist(struct pfs_prom *p, const char *name, const char *k, const char *v,
		      const uint64_t counts[LATHIST_BUCKETS], uint64_t sum_us)
{
	char bucket[128], sub[128], le[32];
	uint64_t cum = 0;
	unsigned b = 0;

	snprintf(bucket, sizeof(bucket), "%s_bucket", name);
	/* Octave o of lathist holds [2^o, 2^(o+1)) us: the latencies below
	 * 4^j us are the whole buckets of the octaves below 2j. */
	for (unsigned oct = 4; oct <= 26; oct += 2) {
		for (; b < oct * LATHIST_SUB && b < LATHIST_BUCKETS; b++)
			cum += counts[b];
		snprintf(le, sizeof(le), "%.9g", (double)(UINT64_C(1) << oct) / 1e6);
		if (k)
			pfs_prom_u64(p, bucket, cum, k, v, "le", le, NULL);
		else
			pfs_prom_u64(p, bucket, cum, "le", le, NULL);
	}
	for (; b < LATHIST_BUCKETS; b++)
		cum += counts[b];
	if (k)
		pfs_prom_u64(p, bucket, cum, k, v, "le", "+Inf", NULL);
	else
		pfs_prom_u64(p, bucket, cum, "le", "+Inf", NULL);
	snprintf(sub, sizeof(sub), "%s_sum", name);
	pfs_prom_f64(p, sub, (double)sum_us / 1e6, k, v, NULL);
	snprintf(sub, sizeof(sub), "%s_count", name);
	pfs_prom_u64(p, sub, cum, k, v, NULL);
}
