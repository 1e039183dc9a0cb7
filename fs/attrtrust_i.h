/* attrtrust_i.h: when the attributes this client holds of an object may
 * answer GETATTR without the daemon, as far as this client's own changes
 * go: the rules, as pure logic. trust.c applies them under the inode's
 * lock, with the inode table's clock.
 *
 * The daemon pushes every change of an object to the clients that cache
 * it, except the changes this client made itself. Attributes are current
 * while (a) no push about the object was numbered since the request that
 * brought them was sent (the race gate, gate_i.h: the caller checks it
 * against trust_seq), and (b) no change of this client may have moved
 * them since. This ledger decides (b), per object:
 *
 * - Every event of an own change of an object takes a stamp from a clock
 *   all objects share: its announcement (before it is sent: the trust
 *   goes at once), for a write behind also its sending, and its end (its
 *   reply handled, or its failure). at_stamp is the object's latest.
 * - A write behind was answered to the application before it reached the
 *   daemon: while one is queued or in flight (wb > 0) no attributes of
 *   the object are current, whatever their source.
 * - The reply to a request sent when the clock read `any` (a GETATTR, a
 *   LOOKUP, a listing, an OPEN) is trusted if no event of the object came
 *   after `any` and no write is pending. An own change that ended after
 *   the request was sent may have run on the daemon after the request
 *   read the attributes: its end stamp says so. A synchronous change
 *   still in flight when the reply is trusted is a call that has not
 *   returned yet, whose end clears the trust: until then, answering from
 *   before it is answering before it.
 * - The reply of an own change that stamped the object with `at` (its
 *   announcement, or for a write its sending) carries the attributes
 *   after it (the daemon's post-operation attributes: size, times of the
 *   daemon's clock, blocks, link count). They are trusted if nothing else
 *   of this client happened to the object since `at` and no write is
 *   pending besides, for a write, this one.
 * - Changes whose objects this client cannot name (what an unlink, rmdir
 *   or rename removes, replaces or moves: FUSE names only the directory
 *   and the name) move the clock's namespace count when they start and
 *   when they end. Trust taken at another count is not used.
 *
 * No locks, no I/O, no other module: the clock is atomic, and the caller
 * serializes the calls on one object (trust.c: the inode's lock).
 */
#ifndef PODFS_ATTRTRUST_I_H
#define PODFS_ATTRTRUST_I_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* The clock shared by all objects of a mount. Zero-initialized: stamps
 * start at 1. */
struct own_clock {
	_Atomic uint64_t any; /* the last stamp given */
	_Atomic uint64_t ns;  /* namespace changes with unnamed objects: starts and ends */
};

/* One object's state. Zero-initialized: never changed, not trusted. */
struct attr_trust {
	uint64_t at;        /* stamp of its latest own-change event (0: none) */
	uint64_t seq;       /* push number its attributes are trusted from; 0: not trusted */
	uint64_t ns;        /* the clock's namespace count they were taken at */
	uint32_t wb;        /* writes behind queued or in flight */
};

/* A new stamp (after every stamp given so far). */
uint64_t own_clock_stamp(struct own_clock *k);
/* The last stamp given, and the namespace count in *ns: take both before
 * sending a request whose reply may be trusted. */
uint64_t own_clock_read(struct own_clock *k, uint64_t *ns);
/* A namespace change with unnamed objects starts or ends: moves the
 * count; returns the new count. */
uint64_t own_clock_ns_move(struct own_clock *k);

/* An own change of the object is announced with stamp: its trust goes. */
void attr_trust_touch(struct attr_trust *o, uint64_t stamp);

/* A reply to a request sent at push number seq, when the clock read
 * (any, ns), carried the object's attributes: trusts them if no event of
 * the object came after any and no write is pending, else clears the
 * trust. Returns whether they are trusted. */
bool attr_trust_reply(struct attr_trust *o, uint64_t seq, uint64_t any, uint64_t ns);

/* The own change that stamped the object with at (0: none, the object
 * was not announced) ended; stamp: a new stamp for the end; have: its
 * reply carried the object's attributes after it, to be trusted from
 * push number seq at namespace count ns if nothing else happened to the
 * object since at and no write is pending. Otherwise the trust goes.
 * Returns whether they are trusted. */
bool attr_trust_end(struct attr_trust *o, uint64_t at, uint64_t stamp, bool have, uint64_t seq,
		    uint64_t ns);

/* Writes behind: one is queued (after its announcement,
 * attr_trust_touch); one queued is sent, with a new stamp (returned by
 * the caller's own_clock_stamp) that attr_trust_write_done gets back;
 * one sent ended, with a new stamp for the end (have, seq, ns as for
 * attr_trust_end). A write that was queued but is dropped unsent ends
 * with at 0. Returns whether the reply's attributes are trusted. */
void attr_trust_write_queued(struct attr_trust *o);
void attr_trust_write_sent(struct attr_trust *o, uint64_t stamp);
bool attr_trust_write_done(struct attr_trust *o, uint64_t at, uint64_t stamp, bool have,
			   uint64_t seq, uint64_t ns);

/* True if the attributes are trusted at namespace count ns_now (then
 * *seq: the push number they are trusted from, for the gate). */
bool attr_trust_ok(const struct attr_trust *o, uint64_t ns_now, uint64_t *seq);

/* True if an event of the object came after stamp any (a listing taken
 * when the clock read any holds older attributes of it). */
bool attr_trust_changed_since(const struct attr_trust *o, uint64_t any);

/* True if a listing (or any reply) taken when the clock read any may
 * hold older attributes of the object than this client has: an event of
 * it came after any, or a write behind is still pending. That write was
 * answered to the application already, and may have been sent before
 * any (so no event followed) but not have run on the daemon when the
 * listing was read there: its size and times would go back. */
bool attr_trust_listed_stale(const struct attr_trust *o, uint64_t any);

/* May an item of a listing (or of a READDIRPLUS chunk) taken at namespace
 * count ns_listed still give its object's attributes at count ns_now? An
 * unlink, rmdir or rename of this client since moved the link count or
 * ctime of an object it did not name, and dropped the listings of the
 * directories it changed, which list every name of a directory and of a
 * file with one link. A file with several links may be listed in another
 * directory too: its item is current only at the count it was taken at
 * (otherwise the lookup goes to the daemon). dir: a directory's item. */
bool attr_trust_listed(bool dir, uint32_t nlink, uint64_t ns_listed, uint64_t ns_now);

#endif /* PODFS_ATTRTRUST_I_H */
