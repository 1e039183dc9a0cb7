/* acklat.c: a client's acknowledgement deadline and the verdict on a late
 * client (see acklat_i.h). */
#include "acklat_i.h"

void acklat_sample(struct acklat *l, uint64_t now, uint64_t ms)
{
	uint32_t v = ms > ACKLAT_SAMPLE_MAX ? ACKLAT_SAMPLE_MAX : (uint32_t)ms;
	uint32_t cur = acklat_recent(l, now);

	/* The first sample sets the smoothed delay; the others move it by
	 * an eighth of the difference. */
	if (l->samples++ == 0)
		l->srtt8 = v * 8;
	else
		l->srtt8 = l->srtt8 - l->srtt8 / 8 + v;
	l->max = v > cur ? v : cur;
	l->max_at = now;
}

uint32_t acklat_recent(const struct acklat *l, uint64_t now)
{
	uint64_t age = now > l->max_at ? now - l->max_at : 0;
	uint64_t halvings = age / ACKLAT_HALF_MS, part = age % ACKLAT_HALF_MS;
	uint32_t v = halvings >= 32 ? 0 : l->max >> halvings;

	/* Within a half-life, linearly from v down to v/2. */
	v -= (uint32_t)((uint64_t)(v - v / 2) * part / ACKLAT_HALF_MS);
	return v > acklat_srtt(l) ? v : acklat_srtt(l);
}

uint32_t acklat_deadline(const struct acklat *l, uint64_t now, uint32_t floor_ms, uint32_t cap_ms)
{
	uint64_t d = (uint64_t)acklat_recent(l, now) * ACKLAT_MULT;

	if (d < floor_ms)
		d = floor_ms;
	return d > cap_ms ? cap_ms : (uint32_t)d;
}

enum ackstart acklat_wait_began(bool held, uint64_t target, uint64_t sent, bool working,
				uint64_t flushed, uint64_t noted, uint64_t now, uint32_t wait,
				uint32_t cap_ms, uint64_t *since, uint64_t *next)
{
	*since = noted;
	if (!held)
		return ACKSTART_BEGAN;
	if (sent < target) {
		if (!working || now >= noted + cap_ms)
			return ACKSTART_BEGAN;
		*next = now + wait < noted + cap_ms ? now + wait : noted + cap_ms;
		return ACKSTART_NOT_YET;
	}
	if (flushed > *since)
		*since = flushed;
	if (now < *since + wait) {
		*next = *since + wait;
		return ACKSTART_NOT_YET;
	}
	return ACKSTART_BEGAN;
}

enum ackexp acklat_expired(uint64_t now, uint64_t since, uint64_t rx, uint32_t window,
			   uint32_t cap_ms)
{
	if (rx == 0 || rx + window <= now)
		return ACKEXP_BEHIND;
	return now >= since + cap_ms ? ACKEXP_CUTOFF : ACKEXP_EXTEND;
}

enum ackexp acklat_recall_expired(uint64_t now, uint64_t since, uint64_t last, uint32_t silent_ms,
				  uint32_t cap_ms, uint64_t *next)
{
	uint64_t quiet_end, cap_end = since + cap_ms;

	if (last < since)
		last = since;
	quiet_end = last + silent_ms;
	if (now >= quiet_end)
		return ACKEXP_BEHIND;
	if (now >= cap_end)
		return ACKEXP_CUTOFF;
	*next = quiet_end < cap_end ? quiet_end : cap_end;
	return ACKEXP_EXTEND;
}
