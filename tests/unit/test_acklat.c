/* test_acklat.c: a client's acknowledgement deadline and the verdict on a
 * late client (daemon/acklat.c).
 *
 * The deadline: the floor for a quick or unknown client, a few times its
 * delays for a slow one, never over the cap; the maximum's decay (half
 * every ACKLAT_HALF_MS, monotone) down to the smoothed delay, so a slow
 * link keeps its time while idle; the first sample (a handshake's round
 * trip) counting at once. The verdict: silent means behind, running means
 * another deadline, until the cap cuts it off.
 */
#include "acklat_i.h"
#include "check.h"

static void test_unknown_client_gets_the_floor(void)
{
	struct acklat l = { 0 };

	CHECK_EQ(acklat_recent(&l, 0), 0);
	CHECK_EQ(acklat_deadline(&l, 0, 30, 2000), 30);
	CHECK_EQ(acklat_deadline(&l, 123456, 30, 2000), 30);
	/* A quick client stays at the floor. */
	acklat_sample(&l, 1000, 1);
	acklat_sample(&l, 1010, 2);
	acklat_sample(&l, 1020, 0);
	CHECK_EQ(acklat_recent(&l, 1020), 2);
	CHECK_EQ(acklat_deadline(&l, 1020, 30, 2000), 30);
	CHECK_EQ(acklat_deadline(&l, 1020, 1, 2000), 6);
}

static void test_slow_client_gets_more(void)
{
	struct acklat l = { 0 };

	acklat_sample(&l, 5000, 5);
	acklat_sample(&l, 5001, 40); /* a spike under load */
	CHECK_EQ(acklat_recent(&l, 5001), 40);
	CHECK_EQ(acklat_deadline(&l, 5001, 30, 2000), 40 * ACKLAT_MULT);
	/* Never over the cap. */
	acklat_sample(&l, 5002, 5000);
	CHECK_EQ(acklat_deadline(&l, 5002, 30, 2000), 2000);
	/* A sample beyond ACKLAT_SAMPLE_MAX counts as it. */
	acklat_sample(&l, 5003, 10ull * 1000 * 1000 * 1000);
	CHECK_EQ(acklat_recent(&l, 5003), ACKLAT_SAMPLE_MAX);
	/* The floor wins over a small cap only up to the cap. */
	CHECK_EQ(acklat_deadline(&l, 5003, 2000, 2000), 2000);
}

static void test_maximum_decays_to_the_smoothed_delay(void)
{
	struct acklat l = { 0 };
	uint32_t prev;

	acklat_sample(&l, 0, 1);     /* srtt 1 */
	acklat_sample(&l, 10, 800);  /* one spike: srtt moves by an eighth */
	CHECK_EQ(acklat_recent(&l, 10), 800);
	CHECK_EQ(acklat_recent(&l, 10 + ACKLAT_HALF_MS), 400);
	CHECK_EQ(acklat_recent(&l, 10 + 2 * ACKLAT_HALF_MS), 200);
	CHECK_EQ(acklat_recent(&l, 10 + ACKLAT_HALF_MS / 2), 600);
	/* Monotone, and never below the smoothed delay. */
	prev = acklat_recent(&l, 10);
	for (uint64_t t = 10; t < 10 + 40ull * ACKLAT_HALF_MS; t += 97) {
		uint32_t v = acklat_recent(&l, t);
		CHECK(v <= prev);
		CHECK(v >= acklat_srtt(&l));
		prev = v;
	}
	CHECK_EQ(acklat_recent(&l, 10 + 1000ull * ACKLAT_HALF_MS), acklat_srtt(&l));
	/* A clock that reads earlier than the sample does not underflow. */
	CHECK_EQ(acklat_recent(&l, 5), 800);
}

static void test_slow_link_keeps_its_time_while_idle(void)
{
	struct acklat l = { 0 };

	/* The handshake's round trip over a 150 ms link, then pushes. */
	acklat_sample(&l, 0, 150);
	CHECK_EQ(acklat_srtt(&l), 150);
	for (int i = 1; i <= 10; i++)
		acklat_sample(&l, (uint64_t)i * 100, 150 + (uint64_t)(i % 3));
	/* An hour idle: still its own delay times ACKLAT_MULT. */
	CHECK(acklat_recent(&l, 3600 * 1000) >= 150);
	CHECK(acklat_deadline(&l, 3600 * 1000, 30, 2000) >= 150 * ACKLAT_MULT);
	/* A quick client's handshake outlier fades as quick samples come. */
	struct acklat q = { 0 };
	acklat_sample(&q, 0, 60);
	CHECK_EQ(acklat_deadline(&q, 0, 30, 2000), 180);
	for (int i = 1; i <= 40; i++)
		acklat_sample(&q, (uint64_t)i * 500, 1);
	CHECK_EQ(acklat_deadline(&q, 20000 + 10 * ACKLAT_HALF_MS, 30, 2000), 30);
}

static void test_smoothed_delay_moves_by_an_eighth(void)
{
	struct acklat l = { 0 };

	acklat_sample(&l, 0, 80);
	CHECK_EQ(acklat_srtt(&l), 80);
	acklat_sample(&l, 1, 0);
	CHECK_EQ(acklat_srtt(&l), 70);
	acklat_sample(&l, 2, 150);
	CHECK_EQ(acklat_srtt(&l), 80);
	/* It reaches a steady value exactly, both ways. */
	for (int i = 0; i < 200; i++)
		acklat_sample(&l, 3 + (uint64_t)i, 5);
	CHECK(acklat_srtt(&l) >= 5 && acklat_srtt(&l) <= 12);
	for (int i = 0; i < 200; i++)
		acklat_sample(&l, 300 + (uint64_t)i, 100);
	CHECK_EQ(acklat_srtt(&l), 100);
}

static void test_verdict(void)
{
	/* Silent within its window: behind, whenever it is checked. */
	CHECK_EQ(acklat_expired(1030, 1000, 0, 30, 2000), ACKEXP_BEHIND);
	CHECK_EQ(acklat_expired(1030, 1000, 999, 30, 2000), ACKEXP_BEHIND);
	CHECK_EQ(acklat_expired(1030, 1000, 1000, 30, 2000), ACKEXP_BEHIND);
	/* A frame within the window: running, another deadline... */
	CHECK_EQ(acklat_expired(1030, 1000, 1001, 30, 2000), ACKEXP_EXTEND);
	CHECK_EQ(acklat_expired(2999, 1000, 2970, 30, 2000), ACKEXP_EXTEND);
	/* ...a slow client's longer window counts older frames... */
	CHECK_EQ(acklat_expired(1300, 1000, 1100, 300, 2000), ACKEXP_EXTEND);
	/* ...but silent since: behind after all. */
	CHECK_EQ(acklat_expired(1060, 1000, 1020, 30, 2000), ACKEXP_BEHIND);
	/* Running at or past the cap: cut off, even if the last check was a
	 * moment before. */
	CHECK_EQ(acklat_expired(3000, 1000, 2975, 30, 2000), ACKEXP_CUTOFF);
	CHECK_EQ(acklat_expired(3500, 1000, 3400, 300, 2000), ACKEXP_CUTOFF);
	/* Silent at the cap: behind, not cut off. */
	CHECK_EQ(acklat_expired(3000, 1000, 2970, 30, 2000), ACKEXP_BEHIND);
}

static void test_recall_verdict(void)
{
	uint64_t next = 0;

	/* A holder silent since the recall began: waited for silent_ms, far
	 * past an invalidation's deadline, then revoked. */
	CHECK_EQ(acklat_recall_expired(1030, 1000, 0, 5000, 120000, &next), ACKEXP_EXTEND);
	CHECK_EQ(next, 6000);
	CHECK_EQ(acklat_recall_expired(5999, 1000, 1000, 5000, 120000, &next), ACKEXP_EXTEND);
	CHECK_EQ(acklat_recall_expired(6000, 1000, 1000, 5000, 120000, &next), ACKEXP_BEHIND);
	/* A frame from before the recall counts as the recall's start. */
	CHECK_EQ(acklat_recall_expired(6000, 1000, 900, 5000, 120000, &next), ACKEXP_BEHIND);
	/* Each frame (or a request of it that runs) gives it silent_ms more... */
	CHECK_EQ(acklat_recall_expired(6000, 1000, 4000, 5000, 120000, &next), ACKEXP_EXTEND);
	CHECK_EQ(next, 9000);
	CHECK_EQ(acklat_recall_expired(9000, 1000, 4000, 5000, 120000, &next), ACKEXP_BEHIND);
	/* ...up to the cap, the next check no later than it... */
	CHECK_EQ(acklat_recall_expired(118000, 1000, 118000, 5000, 120000, &next), ACKEXP_EXTEND);
	CHECK_EQ(next, 121000);
	/* ...past which a holder that runs is cut off; a silent one is still
	 * only revoked. */
	CHECK_EQ(acklat_recall_expired(121000, 1000, 120500, 5000, 120000, &next), ACKEXP_CUTOFF);
	CHECK_EQ(acklat_recall_expired(121000, 1000, 110000, 5000, 120000, &next), ACKEXP_BEHIND);
}

/* A push held in the session's FIFO (behind the client's own requests in
 * flight) starts its client's wait only when it goes out. Each case: the
 * push (number 5) noted at 1000; the client's deadline 30 ms, the cap
 * 2000 ms; want: the verdict, and *since (BEGAN) or *next (NOT_YET). */
static void test_held_push_waits_from_its_sending(void)
{
	static const struct {
		bool held;
		uint64_t sent;
		bool working;
		uint64_t flushed, now;
		enum ackstart want;
		uint64_t at;
	} cases[] = {
		/* Sent at once: the wait began when it was noted. */
		{ false, 5, false, 0, 1030, ACKSTART_BEGAN, 1000 },
		/* Still held (4 of 5 written) while the daemon works on its
		 * requests: the client cannot be late; look again a deadline
		 * later... */
		{ true, 4, true, 900, 1030, ACKSTART_NOT_YET, 1060 },
		{ true, 4, true, 900, 1500, ACKSTART_NOT_YET, 1530 },
		/* ...never past the cap from when it was noted, where it is
		 * judged from then. */
		{ true, 4, true, 900, 2980, ACKSTART_NOT_YET, 3000 },
		{ true, 4, true, 900, 3000, ACKSTART_BEGAN, 1000 },
		/* Held by requests the daemon does not run (they wait for
		 * another client): not the daemon's delay; the wait began when
		 * noted, and the client is judged by what it sends. */
		{ true, 4, false, 900, 1030, ACKSTART_BEGAN, 1000 },
		/* Went out at 1490: a deadline from then. */
		{ true, 5, true, 1490, 1500, ACKSTART_NOT_YET, 1520 },
		{ true, 5, false, 1490, 1520, ACKSTART_BEGAN, 1490 },
		/* A flush from before the wait was noted does not move it
		 * earlier. */
		{ true, 7, false, 900, 1030, ACKSTART_BEGAN, 1000 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t since = 0, next = 0;
		CHECK_EQ(acklat_wait_began(cases[i].held, 5, cases[i].sent, cases[i].working,
					   cases[i].flushed, 1000, cases[i].now, 30, 2000, &since,
					   &next),
			 cases[i].want);
		CHECK_EQ(cases[i].want == ACKSTART_BEGAN ? since : next, cases[i].at);
	}
}

int main(void)
{
	test_unknown_client_gets_the_floor();
	test_slow_client_gets_more();
	test_maximum_decays_to_the_smoothed_delay();
	test_slow_link_keeps_its_time_while_idle();
	test_smoothed_delay_moves_by_an_eighth();
	test_verdict();
	test_recall_verdict();
	test_held_push_waits_from_its_sending();
	return check_done("acklat");
}
