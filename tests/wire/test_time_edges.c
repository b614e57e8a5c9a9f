/* Timestamps at the edges of int64, with valid MACs: refused as STALE or FUTURE like any other
 * stamp outside the window, with nothing in the server overflowing on the way. A program of its
 * own because UBSan (make SAN=1) ends the whole program at the first overflow: the other wire
 * tests keep running, and keep their leak check at exit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fixture.h"

static int setup_keyed(void **state)
{
	return wire_start((wire **)state, true, NULL);
}

static void test_future_int64_max(void **state)
{
	wire_expect_time_refusal(*state, INT64_MAX, BK_DETAIL_FUTURE);
	wire_expect_time_refusal(*state, INT64_MAX - 1, BK_DETAIL_FUTURE);
}

/* server/rpc/dispatch.c formats this refusal's message with `now - timestamp_ms`, which overflows
 * for any stamp below now - INT64_MAX. */
static void test_stale_int64_min(void **state)
{
	wire_expect_time_refusal(*state, INT64_MIN + 1, BK_DETAIL_STALE);
	wire_expect_time_refusal(*state, INT64_MIN, BK_DETAIL_STALE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_future_int64_max, setup_keyed, wire_teardown),
		cmocka_unit_test_setup_teardown(test_stale_int64_min, setup_keyed, wire_teardown),
	};

	return cmocka_run_group_tests_name("wire: timestamps at the edges of int64", tests, NULL, NULL);
}
