/* Unit tests of server/runs/marks.c, the read order and times kept beside a process's rings: a
 * mark per read that says something new (the other stream read between, or BK_MARKS_GRAIN_MS
 * later), the marks of a range found by offset, the ones of dropped bytes trimmed, and the bound:
 * a full set halves, keeping the earlier of each pair, and never reorders. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "runs/marks.h"

static void check_mark(const bk_marks *m, size_t i, uint64_t offset, uint64_t seq, int64_t time_ms)
{
	const bk_mark *k = bk_marks_at(m, i);

	assert_int_equal(k->offset, offset);
	assert_int_equal(k->seq, seq);
	assert_int_equal(k->time_ms, time_ms);
}

static void a_mark_only_where_something_is_new(void **state)
{
	_cleanup_(bk_marks_freep) bk_marks *m = bk_marks_new(16);

	(void)state;
	assert_non_null(m);
	bk_marks_add(m, 0, 1, 1000);
	bk_marks_add(m, 10, 1, 1000 + BK_MARKS_GRAIN_MS - 1); /* the same read number, soon after: nothing new */
	assert_int_equal(bk_marks_count(m), 1);
	bk_marks_add(m, 20, 1, 1000 + BK_MARKS_GRAIN_MS);     /* later */
	bk_marks_add(m, 30, 3, 1000 + BK_MARKS_GRAIN_MS);     /* the other stream was read between */
	bk_marks_add(m, 30, 5, 2000);                         /* no byte past the last mark: nothing */
	assert_int_equal(bk_marks_count(m), 3);
	check_mark(m, 0, 0, 1, 1000);
	check_mark(m, 1, 20, 1, 1000 + BK_MARKS_GRAIN_MS);
	check_mark(m, 2, 30, 3, 1000 + BK_MARKS_GRAIN_MS);
}

static void find_gives_the_marks_of_a_range(void **state)
{
	_cleanup_(bk_marks_freep) bk_marks *m = bk_marks_new(16);
	size_t from = 99;

	(void)state;
	assert_int_equal(bk_marks_find(m, 0, 10, &from), 0); /* none yet */
	for (uint64_t k = 0; k < 5; k++)
		bk_marks_add(m, 100 * k + 50, 2 * k + 1, (int64_t)k);
	assert_int_equal(bk_marks_find(m, 0, 10, &from), 0);          /* before the first mark */
	assert_int_equal(bk_marks_find(m, 50, 1, &from), 1);          /* exactly at one */
	assert_int_equal(from, 0);
	assert_int_equal(bk_marks_find(m, 120, 30, &from), 1);        /* inside one read, up to the next */
	assert_int_equal(from, 0);
	assert_int_equal(bk_marks_find(m, 120, 31, &from), 2);        /* reaching the next */
	assert_int_equal(bk_marks_find(m, 149, 301, &from), 4);       /* 50, 150, 250, 350: [149, 450) */
	assert_int_equal(bk_marks_find(m, 149, 302, &from), 5);       /* and 450 */
	assert_int_equal(from, 0);
	assert_int_equal(bk_marks_find(m, 460, 1000, &from), 1);      /* the last read's */
	assert_int_equal(from, 4);
}

static void trim_drops_marks_of_bytes_gone(void **state)
{
	_cleanup_(bk_marks_freep) bk_marks *m = bk_marks_new(16);
	size_t from;

	(void)state;
	for (uint64_t k = 0; k < 4; k++)
		bk_marks_add(m, 100 * k, k + 1, 0);
	bk_marks_trim(m, 150); /* the mark at 100 still covers 150 */
	assert_int_equal(bk_marks_count(m), 3);
	check_mark(m, 0, 100, 2, 0);
	bk_marks_trim(m, 300);
	assert_int_equal(bk_marks_count(m), 1);
	check_mark(m, 0, 300, 4, 0);
	bk_marks_trim(m, 10000); /* the last one always stays: it covers what comes */
	assert_int_equal(bk_marks_count(m), 1);
	assert_int_equal(bk_marks_find(m, 10000, 5, &from), 1);
	/* Room trimmed at the front is used again. */
	for (uint64_t k = 0; k < 15; k++)
		bk_marks_add(m, 20000 + k, 10 + k, 0);
	assert_int_equal(bk_marks_count(m), 16);
	check_mark(m, 0, 300, 4, 0);
	check_mark(m, 15, 20014, 24, 0);
}

static void a_full_set_halves_and_keeps_the_order(void **state)
{
	_cleanup_(bk_marks_freep) bk_marks *m = bk_marks_new(8);
	uint64_t prev_off = 0, prev_seq = 0;

	(void)state;
	for (uint64_t k = 0; k < 1000; k++) {
		bk_marks_add(m, 10 * k, k + 1, (int64_t)(100 * k));
		assert_in_range(bk_marks_count(m), 1, 8);
	}
	/* The first mark is the first read's (a merged mark keeps the earlier one), the last is the
	 * newest or its neighbour's; all in order. */
	check_mark(m, 0, 0, 1, 0);
	for (size_t i = 0; i < bk_marks_count(m); i++) {
		const bk_mark *k = bk_marks_at(m, i);
		if (i) {
			assert_true(k->offset > prev_off);
			assert_true(k->seq > prev_seq);
		}
		assert_int_equal(k->time_ms, (int64_t)(k->offset * 10)); /* each is a real read's */
		prev_off = k->offset;
		prev_seq = k->seq;
	}
	assert_true(prev_off >= 9980);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_mark_only_where_something_is_new),
		cmocka_unit_test(find_gives_the_marks_of_a_range),
		cmocka_unit_test(trim_drops_marks_of_bytes_gone),
		cmocka_unit_test(a_full_set_halves_and_keeps_the_order),
	};

	return cmocka_run_group_tests_name("marks", tests, NULL, NULL);
}
