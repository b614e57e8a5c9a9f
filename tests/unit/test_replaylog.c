/* Unit tests of server/auth/replaylog.c, the replay cache's memory across restarts: what one
 * process appends, the next one refuses, for as long as the timestamps are in the window. Time
 * is passed in; each "restart" is a new cache and a new open of the same directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "auth/replaylog.h"

#define T0 1700000000000LL
#define WINDOW 1000

struct fixture {
	char dir[64];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	snprintf(f->dir, sizeof(f->dir), "/tmp/bk-replaylog-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char path[128];

	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/replay.%d", f->dir, i);
		unlink(path);
	}
	rmdir(f->dir);
	free(f);
	return 0;
}

static void nonce_of(unsigned n, uint8_t nonce[BK_NONCE_LEN])
{
	memset(nonce, 0x5a, BK_NONCE_LEN);
	nonce[0] = (uint8_t)(n >> 8);
	nonce[1] = (uint8_t)n;
}

/* A fresh process: a new cache, filled from the log in dir at now. */
static bk_replay *restart(const struct fixture *f, int64_t now, bk_replay_log **log)
{
	bk_replay *r = bk_replay_new(1000, WINDOW, 1 << 20);
	bk_error *err = NULL;

	assert_non_null(r);
	assert_int_equal(bk_replay_log_open(f->dir, WINDOW, r, now, log, &err), 0);
	bk_error_free(err);
	return r;
}

/* What the dispatcher does with a request stamped ts arriving at now: check, then record. */
static bk_replay_verdict request(bk_replay *r, bk_replay_log *log, unsigned n, int64_t ts, int64_t now)
{
	uint8_t nonce[BK_NONCE_LEN], *answer = NULL;
	size_t len = 0;
	bk_replay_verdict v;

	nonce_of(n, nonce);
	v = bk_replay_check(r, "k1", nonce, now, &answer, &len);
	free(answer);
	if (v == BK_REPLAY_FRESH)
		assert_int_equal(bk_replay_log_append(log, "k1", nonce, ts, now), 0);
	return v;
}

static void stop(bk_replay *r, bk_replay_log *log)
{
	bk_replay_log_free(log);
	bk_replay_free(r);
}

static void a_request_is_refused_after_a_restart(void **state)
{
	bk_replay_log *log;
	bk_replay *r = restart(*state, T0, &log);

	assert_int_equal(request(r, log, 1, T0, T0), BK_REPLAY_FRESH);
	assert_int_equal(request(r, log, 2, T0 + 10, T0 + 10), BK_REPLAY_FRESH);
	stop(r, log);
	r = restart(*state, T0 + 500, &log);
	assert_int_equal(bk_replay_log_restored(log), 2);
	assert_int_equal(request(r, log, 1, T0, T0 + 500), BK_REPLAY_REPLAYED);
	assert_int_equal(request(r, log, 2, T0 + 10, T0 + 500), BK_REPLAY_REPLAYED);
	assert_int_equal(request(r, log, 3, T0 + 500, T0 + 500), BK_REPLAY_FRESH);
	stop(r, log);
}

static void the_key_is_part_of_the_record(void **state)
{
	uint8_t nonce[BK_NONCE_LEN], *answer = NULL;
	size_t len;
	bk_replay_log *log;
	bk_replay *r = restart(*state, T0, &log);

	nonce_of(7, nonce);
	assert_int_equal(bk_replay_log_append(log, "k1", nonce, T0, T0), 0);
	stop(r, log);
	r = restart(*state, T0 + 1, &log);
	assert_int_equal(bk_replay_check(r, "k2", nonce, T0 + 1, &answer, &len), BK_REPLAY_FRESH);
	assert_int_equal(bk_replay_check(r, "k1", nonce, T0 + 1, &answer, &len), BK_REPLAY_REPLAYED);
	stop(r, log);
}

/* Records are kept through restarts for as long as their timestamps can pass the window check,
 * whichever file they are in and however the files took turns meanwhile. */
static void records_live_as_long_as_the_window_needs(void **state)
{
	bk_replay_log *log;
	bk_replay *r = restart(*state, T0, &log);

	/* Stamped at the far edge of the window: it passes the time check until T0 + 2 * WINDOW. */
	assert_int_equal(request(r, log, 1, T0 + WINDOW, T0), BK_REPLAY_FRESH);
	/* Traffic makes the files take turns. */
	for (int64_t t = T0 + 100; t < T0 + 2 * WINDOW; t += 100)
		assert_int_equal(request(r, log, (unsigned)(100 + (t - T0) / 100), t, t), BK_REPLAY_FRESH);
	stop(r, log);
	r = restart(*state, T0 + 2 * WINDOW - 1, &log);
	assert_int_equal(request(r, log, 1, T0 + WINDOW, T0 + 2 * WINDOW - 1), BK_REPLAY_REPLAYED);
	stop(r, log);
}

static void records_out_of_the_window_are_not_restored(void **state)
{
	bk_replay_log *log;
	bk_replay *r = restart(*state, T0, &log);

	assert_int_equal(request(r, log, 1, T0, T0), BK_REPLAY_FRESH);
	stop(r, log);
	r = restart(*state, T0 + WINDOW + 1, &log);
	assert_int_equal(bk_replay_log_restored(log), 0);
	stop(r, log);
}

/* A torn last record (a crash in the middle of a write) and a foreign file are ignored, not
 * fatal: the rest of the log still counts. */
static void a_torn_or_foreign_file_is_tolerated(void **state)
{
	struct fixture *f = *state;
	bk_replay_log *log;
	bk_replay *r = restart(f, T0, &log);
	char path[128];
	FILE *fp;

	assert_int_equal(request(r, log, 1, T0, T0), BK_REPLAY_FRESH);
	stop(r, log);
	for (int i = 0; i < 3; i++) {
		struct stat st;
		snprintf(path, sizeof(path), "%s/replay.%d", f->dir, i);
		assert_int_equal(stat(path, &st), 0);
		fp = fopen(path, "a");
		assert_non_null(fp);
		fputs(st.st_size ? "torn" : "not a replay log", fp);
		fclose(fp);
	}
	r = restart(f, T0 + 1, &log);
	assert_int_equal(bk_replay_log_restored(log), 1);
	assert_int_equal(request(r, log, 1, T0, T0 + 1), BK_REPLAY_REPLAYED);
	assert_int_equal(request(r, log, 2, T0 + 1, T0 + 1), BK_REPLAY_FRESH);
	stop(r, log);
}

static void a_missing_directory_is_an_error(void **state)
{
	bk_replay *r = bk_replay_new(10, WINDOW, 1024);
	bk_replay_log *log = NULL;
	bk_error *err = NULL;

	(void)state;
	assert_true(bk_replay_log_open("/nonexistent/bk-replaylog", WINDOW, r, T0, &log, &err) < 0);
	assert_null(log);
	assert_non_null(strstr(bk_error_msg(err), "/nonexistent/bk-replaylog/replay.0"));
	bk_error_free(err);
	bk_replay_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(a_request_is_refused_after_a_restart, setup, teardown),
		cmocka_unit_test_setup_teardown(the_key_is_part_of_the_record, setup, teardown),
		cmocka_unit_test_setup_teardown(records_live_as_long_as_the_window_needs, setup, teardown),
		cmocka_unit_test_setup_teardown(records_out_of_the_window_are_not_restored, setup, teardown),
		cmocka_unit_test_setup_teardown(a_torn_or_foreign_file_is_tolerated, setup, teardown),
		cmocka_unit_test(a_missing_directory_is_an_error),
	};

	return cmocka_run_group_tests_name("replaylog", tests, NULL, NULL);
}
