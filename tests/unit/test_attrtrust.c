/* test_attrtrust.c: unit tests of the rules that decide whether
 * attributes a client holds are current as far as its own changes go
 * (fs/attrtrust.c): replies to requests sent before or during an own
 * change, the post-operation attributes of the change itself, writes
 * behind (alone, overlapping, one after the other, failed or dropped),
 * namespace changes whose objects the client cannot name, and the items
 * of listings taken before such a change.
 */
#include "attrtrust_i.h"
#include "check.h"

/* A request sent now: the clock's reading. */
struct sent {
	uint64_t any, ns;
};

static struct sent send_now(struct own_clock *k)
{
	struct sent s;
	s.any = own_clock_read(k, &s.ns);
	return s;
}

static bool ok_now(struct own_clock *k, const struct attr_trust *o, uint64_t *seq)
{
	uint64_t ns;
	(void)own_clock_read(k, &ns);
	return attr_trust_ok(o, ns, seq);
}

static void test_replies(void)
{
	struct own_clock k = { 0 };
	struct attr_trust o = { 0 }, other = { 0 };
	uint64_t seq = 0;

	/* Never changed here: any reply is as current as the gate says. */
	CHECK(!ok_now(&k, &o, &seq));
	struct sent s = send_now(&k);
	CHECK(attr_trust_reply(&o, 7, s.any, s.ns));
	CHECK(ok_now(&k, &o, &seq));
	CHECK_EQ(seq, 7);

	/* An own change announced after the request was sent: the reply
	 * may predate it, and the announcement took the trust. */
	s = send_now(&k);
	uint64_t at = own_clock_stamp(&k);
	attr_trust_touch(&o, at);
	CHECK(!ok_now(&k, &o, &seq));
	CHECK(!attr_trust_reply(&o, 8, s.any, s.ns));
	CHECK(!ok_now(&k, &o, &seq));

	/* A request sent while that change runs: trusted (the change's
	 * call has not returned), until the change ends. */
	s = send_now(&k);
	CHECK(attr_trust_reply(&o, 9, s.any, s.ns));
	CHECK(attr_trust_end(&o, at, own_clock_stamp(&k), false, 9, s.ns) == false);
	CHECK(!ok_now(&k, &o, &seq));
	/* ... and its reply, handled after the change ended, is not. */
	CHECK(!attr_trust_reply(&o, 9, s.any, s.ns));
	CHECK(attr_trust_changed_since(&o, s.any));

	/* Another object's changes do not matter. */
	s = send_now(&k);
	attr_trust_touch(&other, own_clock_stamp(&k));
	CHECK(attr_trust_end(&other, other.at, own_clock_stamp(&k), true, 10, s.ns));
	CHECK(attr_trust_reply(&o, 10, s.any, s.ns));
	CHECK(!attr_trust_changed_since(&o, s.any));
}

static void test_own_change_end(void)
{
	struct own_clock k = { 0 };
	struct attr_trust o = { 0 };
	uint64_t seq = 0;

	/* Alone: its post-operation attributes are current. */
	struct sent s = send_now(&k);
	uint64_t at = own_clock_stamp(&k);
	attr_trust_touch(&o, at);
	CHECK(attr_trust_end(&o, at, own_clock_stamp(&k), true, 3, s.ns));
	CHECK(ok_now(&k, &o, &seq) && seq == 3);
	/* Without attributes in the reply (or failed): not trusted. */
	at = own_clock_stamp(&k);
	attr_trust_touch(&o, at);
	CHECK(!attr_trust_end(&o, at, own_clock_stamp(&k), false, 4, s.ns));
	CHECK(!ok_now(&k, &o, &seq));

	/* Two changes of the object overlapping: neither's attributes. */
	uint64_t a1 = own_clock_stamp(&k);
	attr_trust_touch(&o, a1);
	uint64_t a2 = own_clock_stamp(&k);
	attr_trust_touch(&o, a2);
	CHECK(!attr_trust_end(&o, a1, own_clock_stamp(&k), true, 5, s.ns));
	CHECK(!attr_trust_end(&o, a2, own_clock_stamp(&k), true, 5, s.ns));
	CHECK(!ok_now(&k, &o, &seq));

	/* A change that did not announce the object (at 0): never. */
	CHECK(!attr_trust_end(&o, 0, own_clock_stamp(&k), true, 6, s.ns));
}

static void test_writes_behind(void)
{
	struct own_clock k = { 0 };
	struct attr_trust o = { 0 };
	uint64_t seq = 0;
	struct sent s = send_now(&k);

	/* Queued: nothing is current, whatever the source. */
	attr_trust_touch(&o, own_clock_stamp(&k));
	attr_trust_write_queued(&o);
	CHECK(!attr_trust_reply(&o, 2, own_clock_read(&k, &s.ns), s.ns));
	uint64_t w1 = own_clock_stamp(&k);
	attr_trust_write_sent(&o, w1);
	CHECK(!ok_now(&k, &o, &seq));
	/* Done, alone: its reply's attributes are the file's. */
	CHECK(attr_trust_write_done(&o, w1, own_clock_stamp(&k), true, 2, s.ns));
	CHECK(ok_now(&k, &o, &seq) && seq == 2);

	/* Two in flight at once: the daemon may have run them in either
	 * order, so neither reply is the last word. */
	attr_trust_touch(&o, own_clock_stamp(&k));
	attr_trust_write_queued(&o);
	attr_trust_touch(&o, own_clock_stamp(&k));
	attr_trust_write_queued(&o);
	w1 = own_clock_stamp(&k);
	attr_trust_write_sent(&o, w1);
	uint64_t w2 = own_clock_stamp(&k);
	attr_trust_write_sent(&o, w2);
	CHECK(!attr_trust_write_done(&o, w2, own_clock_stamp(&k), true, 3, s.ns));
	CHECK(!attr_trust_write_done(&o, w1, own_clock_stamp(&k), true, 3, s.ns));
	CHECK(!ok_now(&k, &o, &seq));
	CHECK_EQ(o.wb, 0);

	/* One after the other: the second was sent after the first ended
	 * and is the only one pending: its reply is current. */
	attr_trust_touch(&o, own_clock_stamp(&k));
	attr_trust_write_queued(&o);
	attr_trust_touch(&o, own_clock_stamp(&k));
	attr_trust_write_queued(&o);
	w1 = own_clock_stamp(&k);
	attr_trust_write_sent(&o, w1);
	CHECK(!attr_trust_write_done(&o, w1, own_clock_stamp(&k), true, 4, s.ns));
	w2 = own_clock_stamp(&k);
	attr_trust_write_sent(&o, w2);
	CHECK(attr_trust_write_done(&o, w2, own_clock_stamp(&k), true, 4, s.ns));
	CHECK(ok_now(&k, &o, &seq));

	/* A setattr that ends while a write is pending: not current. */
	uint64_t at = own_clock_stamp(&k);
	attr_trust_touch(&o, at);
	attr_trust_write_queued(&o);
	CHECK(!attr_trust_end(&o, at, own_clock_stamp(&k), true, 5, s.ns));
	/* The write failed (no attributes), or was dropped unsent (at 0). */
	w1 = own_clock_stamp(&k);
	attr_trust_write_sent(&o, w1);
	CHECK(!attr_trust_write_done(&o, w1, own_clock_stamp(&k), false, 5, s.ns));
	attr_trust_write_queued(&o);
	CHECK(!attr_trust_write_done(&o, 0, own_clock_stamp(&k), true, 5, s.ns));
	CHECK_EQ(o.wb, 0);
	CHECK(!ok_now(&k, &o, &seq));
	/* With nothing pending, replies are trusted again. */
	s = send_now(&k);
	CHECK(attr_trust_reply(&o, 6, s.any, s.ns));
	CHECK(!attr_trust_listed_stale(&o, s.any));

	/* A listing asked for after a write was sent, read on the daemon
	 * before that write ran: no event of the object came after it, yet
	 * its item is stale until the write ended. */
	attr_trust_touch(&o, own_clock_stamp(&k));
	attr_trust_write_queued(&o);
	w1 = own_clock_stamp(&k);
	attr_trust_write_sent(&o, w1);
	s = send_now(&k);
	CHECK(!attr_trust_changed_since(&o, s.any));
	CHECK(attr_trust_listed_stale(&o, s.any));
	CHECK(attr_trust_write_done(&o, w1, own_clock_stamp(&k), true, 7, s.ns));
	/* Ended: the listing's item predates the write's end. */
	CHECK(attr_trust_listed_stale(&o, s.any));
	s = send_now(&k);
	CHECK(!attr_trust_listed_stale(&o, s.any));
}

static void test_namespace_count(void)
{
	struct own_clock k = { 0 };
	struct attr_trust o = { 0 };
	uint64_t seq = 0;

	struct sent s = send_now(&k);
	CHECK(attr_trust_reply(&o, 2, s.any, s.ns));
	CHECK(ok_now(&k, &o, &seq));
	/* An unlink starts: its victim is not named; nothing taken at the
	 * count before is used. */
	CHECK_EQ(own_clock_ns_move(&k), s.ns + 1);
	CHECK(!ok_now(&k, &o, &seq));
	/* A reply to a request sent while it ran: used until it ends. */
	struct sent during = send_now(&k);
	CHECK(attr_trust_reply(&o, 3, during.any, during.ns));
	CHECK(ok_now(&k, &o, &seq));
	CHECK_EQ(own_clock_ns_move(&k), s.ns + 2);
	CHECK(!ok_now(&k, &o, &seq));
	/* Taken at the count after it: used. */
	s = send_now(&k);
	CHECK(attr_trust_reply(&o, 4, s.any, s.ns));
	CHECK(ok_now(&k, &o, &seq) && seq == 4);
}

/* Items of a listing taken before an unlink or rename of this client:
 * a file with several links may be listed in a directory that change
 * did not touch, with the link count or ctime from before it. */
static void test_listed_items(void)
{
	struct own_clock k = { 0 };
	struct sent s = send_now(&k);
	uint64_t now;

	/* At the count the listing was taken at: every item. */
	CHECK(attr_trust_listed(false, 2, s.ns, s.ns));
	CHECK(attr_trust_listed(false, 1, s.ns, s.ns));
	CHECK(attr_trust_listed(true, 5, s.ns, s.ns));
	/* An unlink started, or ended: not a file with several links. */
	(void)own_clock_ns_move(&k);
	(void)own_clock_read(&k, &now);
	CHECK(!attr_trust_listed(false, 2, s.ns, now));
	(void)own_clock_ns_move(&k);
	(void)own_clock_read(&k, &now);
	CHECK(!attr_trust_listed(false, 2, s.ns, now));
	CHECK(!attr_trust_listed(false, 1000, s.ns, now));
	/* A file with one name is listed only in the directory the change
	 * named (its listing dropped), a directory's item only in its
	 * parent's: still current. */
	CHECK(attr_trust_listed(false, 1, s.ns, now));
	CHECK(attr_trust_listed(false, 0, s.ns, now));
	CHECK(attr_trust_listed(true, 3, s.ns, now));
	/* A listing taken after it: every item again. */
	s = send_now(&k);
	CHECK(attr_trust_listed(false, 2, s.ns, now));
}

int main(void)
{
	test_replies();
	test_own_change_end();
	test_writes_behind();
	test_namespace_count();
	test_listed_items();
	return check_done("test_attrtrust");
}
