/* test_estale.c: unit tests of the ESTALE retry recognition (fs/estale.c):
 * the retry's own lookup, a lookup by another thread that the retry
 * shares, an open that is not the retry, one slot per thread, expiry,
 * and a name operation's ESTALE met again at its retry.
 */
#include <string.h>
#include <time.h>

#include "check.h"
#include "estale_i.h"

static void fresh(struct estale *es)
{
	*es = (struct estale)ESTALE_INIT;
}

/* The retry looks the name up itself, then opens what it found. */
static void test_own_lookup(void)
{
	struct estale es;

	fresh(&es);
	estale_arm(&es, 100);
	estale_looked(&es, 100, 7);
	CHECK(estale_retry(&es, 100, 7));
	/* Disarmed: the thread's next open is an ordinary one. */
	estale_looked(&es, 100, 7);
	CHECK(!estale_retry(&es, 100, 7));
	CHECK_EQ(es.armed, 0);
}

/* The retry's lookup found another thread's lookup of the same name in
 * flight and took its answer: that lookup (after the ESTALE) counts. */
static void test_shared_lookup(void)
{
	struct estale es;

	fresh(&es);
	estale_looked(&es, 200, 9); /* before the ESTALE: not noted */
	estale_arm(&es, 100);
	CHECK(!estale_retry(&es, 100, 9));

	estale_arm(&es, 100);
	estale_looked(&es, 200, 9);
	CHECK(estale_retry(&es, 100, 9));
	/* Only the armed thread's open is a retry. */
	estale_arm(&es, 100);
	estale_looked(&es, 200, 9);
	CHECK(!estale_retry(&es, 200, 9));
	CHECK(estale_retry(&es, 100, 9));
}

/* The first open after the ESTALE disarms the slot even if it is not of
 * the inode the lookup returned (the retry opened something else, or
 * never got to its open): a later open of a gone file is not a retry. */
static void test_not_the_retry(void)
{
	struct estale es;

	fresh(&es);
	estale_arm(&es, 100);
	estale_looked(&es, 100, 7);
	CHECK(!estale_retry(&es, 100, 8));
	CHECK(!estale_retry(&es, 100, 7));
	/* Unarmed: lookups are not recorded at all. */
	estale_looked(&es, 300, 11);
	estale_arm(&es, 100);
	CHECK(!estale_retry(&es, 100, 11));
}

/* Threads have their own slots; a lookup remembered in the ring while a
 * slot was armed is forgotten once no slot is. */
static void test_threads(void)
{
	struct estale es;

	fresh(&es);
	estale_arm(&es, 100);
	estale_arm(&es, 101);
	CHECK_EQ(es.armed, 2);
	estale_looked(&es, 101, 5);
	estale_looked(&es, 100, 4);
	CHECK(estale_retry(&es, 101, 5));
	CHECK(estale_retry(&es, 100, 4));
	CHECK_EQ(es.armed, 0);
	/* A slot shared by two threads (tid modulo ESTALE_SLOTS): the
	 * later arm wins, the count stays right. */
	estale_arm(&es, 100);
	estale_arm(&es, 100 + ESTALE_SLOTS);
	CHECK_EQ(es.armed, 1);
	estale_looked(&es, 100 + ESTALE_SLOTS, 3);
	CHECK(!estale_retry(&es, 100, 3));
	CHECK(estale_retry(&es, 100 + ESTALE_SLOTS, 3));
	CHECK_EQ(es.armed, 0);
}

/* The ring keeps the latest ESTALE_SEEN lookups only. */
static void test_ring(void)
{
	struct estale es;

	fresh(&es);
	estale_arm(&es, 100);
	estale_looked(&es, 200, 1000);
	for (unsigned i = 0; i < ESTALE_SEEN; i++)
		estale_looked(&es, 200, 2000 + i);
	CHECK(!estale_retry(&es, 100, 1000));
	estale_arm(&es, 100);
	for (unsigned i = 0; i < ESTALE_SEEN; i++)
		estale_looked(&es, 200, 2000 + i);
	CHECK(estale_retry(&es, 100, 2000));
}

/* An armed slot counts for ESTALE_RETRY_NS only. */
static void test_expiry(void)
{
	struct estale es;

	fresh(&es);
	estale_arm(&es, 100);
	estale_looked(&es, 100, 7);
	es.slot[100 % ESTALE_SLOTS].when -= ESTALE_RETRY_NS;
	CHECK(!estale_retry(&es, 100, 7));
	CHECK_EQ(es.armed, 0);
}

/* A name operation's ESTALE arms the slot; the same thread's next
 * ESTALE, in time, is the retry's (ENOENT) and disarms it; after that,
 * or once the slot expired, an ESTALE arms it again. */
static void test_again(void)
{
	struct estale es;

	fresh(&es);
	CHECK(!estale_again(&es, 100));
	CHECK_EQ(es.armed, 1);
	CHECK(!estale_again(&es, 101)); /* another thread: its own slot */
	CHECK(estale_again(&es, 100));
	CHECK(estale_again(&es, 101));
	CHECK_EQ(es.armed, 0);
	CHECK(!estale_again(&es, 100));
	es.slot[100 % ESTALE_SLOTS].when -= ESTALE_RETRY_NS;
	CHECK(!estale_again(&es, 100)); /* expired: a first ESTALE again */
	CHECK(estale_again(&es, 100));
	/* A slot shared by two threads: the other's ESTALE takes it. */
	CHECK(!estale_again(&es, 100));
	CHECK(!estale_again(&es, 100 + ESTALE_SLOTS));
	CHECK(!estale_again(&es, 100));
	CHECK_EQ(es.armed, 1);
	/* An open's ESTALE arms it too: the retry's lookup meeting a
	 * removed directory answers ENOENT; and a name operation's ESTALE
	 * makes the retry's open of what its lookup found the retry. */
	fresh(&es);
	estale_arm(&es, 100);
	CHECK(estale_again(&es, 100));
	CHECK(!estale_again(&es, 100));
	estale_looked(&es, 100, 7);
	CHECK(estale_retry(&es, 100, 7));
	CHECK_EQ(es.armed, 0);
}

int main(void)
{
	test_own_lookup();
	test_shared_lookup();
	test_not_the_retry();
	test_threads();
	test_ring();
	test_expiry();
	test_again();
	return check_done("test_estale");
}
