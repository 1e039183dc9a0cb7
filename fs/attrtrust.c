/* attrtrust.c: the rules of attributes trusted against this client's own
 * changes (see attrtrust_i.h). */
#include "attrtrust_i.h"

uint64_t own_clock_stamp(struct own_clock *k)
{
	return atomic_fetch_add(&k->any, 1) + 1;
}

uint64_t own_clock_read(struct own_clock *k, uint64_t *ns)
{
	*ns = atomic_load(&k->ns);
	return atomic_load(&k->any);
}

uint64_t own_clock_ns_move(struct own_clock *k)
{
	return atomic_fetch_add(&k->ns, 1) + 1;
}

void attr_trust_touch(struct attr_trust *o, uint64_t stamp)
{
	o->at = stamp;
	o->seq = 0;
}

bool attr_trust_reply(struct attr_trust *o, uint64_t seq, uint64_t any, uint64_t ns)
{
	bool ok = o->at <= any && o->wb == 0;

	o->seq = ok ? seq : 0;
	o->ns = ns;
	return ok;
}

bool attr_trust_end(struct attr_trust *o, uint64_t at, uint64_t stamp, bool have, uint64_t seq,
		    uint64_t ns)
{
	bool ok = have && at != 0 && o->at == at && o->wb == 0;

	o->at = stamp;
	o->seq = ok ? seq : 0;
	o->ns = ns;
	return ok;
}

void attr_trust_write_queued(struct attr_trust *o)
{
	o->wb++;
	o->seq = 0;
}

void attr_trust_write_sent(struct attr_trust *o, uint64_t stamp)
{
	o->at = stamp;
}

bool attr_trust_write_done(struct attr_trust *o, uint64_t at, uint64_t stamp, bool have,
			   uint64_t seq, uint64_t ns)
{
	/* Alone: no other write pending, and nothing since it was sent (a
	 * write in flight beside it that ended since moved the stamp). */
	bool ok = have && at != 0 && o->wb == 1 && o->at == at;

	if (o->wb)
		o->wb--;
	o->at = stamp;
	o->seq = ok ? seq : 0;
	o->ns = ns;
	return ok;
}

bool attr_trust_ok(const struct attr_trust *o, uint64_t ns_now, uint64_t *seq)
{
	if (o->seq == 0 || o->wb != 0 || o->ns != ns_now)
		return false;
	*seq = o->seq;
	return true;
}

bool attr_trust_changed_since(const struct attr_trust *o, uint64_t any)
{
	return o->at > any;
}

bool attr_trust_listed_stale(const struct attr_trust *o, uint64_t any)
{
	return o->at > any || o->wb != 0;
}

bool attr_trust_listed(bool dir, uint32_t nlink, uint64_t ns_listed, uint64_t ns_now)
{
	return ns_listed == ns_now || dir || nlink <= 1;
}
