/* The watch benchmark (bench/watch.sh runs it against a real boxkited):
 *
 *   latency URL KEY N   from a change made through the file rpcs (FileMkdir, answered once the
 *                       directory exists) to its CREATED event reaching a reader that long-polls
 *                       (bk_watch_read, parked on the server), p50 and p99 of N changes, beside
 *                       the FileMkdir round trip itself in the same run: the ratio is what seeing
 *                       a change costs against making one;
 *   burst URL KEY N     N files made by one command in the sandbox while nobody reads, then
 *                       read: the events kept and those counted in OVERFLOW events, and the
 *                       events per second the reader drained them at, beside the command's own
 *                       files per second.
 *
 * Figures as `bench: NAME VALUE UNIT`, ratios as `bench: NAME.ratio VALUE x`. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boxkite/boxkite.h"
#include "clock.h"
#include "stats.h"

static const char *url, *key_file;

static bk_client *connect_or_die(void)
{
	bk_client_options o = { .key_file = key_file, .timeout_ms = 70000 };
	bk_client *c;
	bk_status st;

	if (bk_client_open(&c, url, &o, &st) != BK_OK) {
		fprintf(stderr, "connect: %s\n", st.message);
		exit(1);
	}
	return c;
}

static void die(const char *what, const bk_status *st)
{
	fprintf(stderr, "%s: %s\n", what, st->message);
	exit(1);
}

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* --- latency ------------------------------------------------------------------------------- */

struct reader {
	bk_client *c;
	char cursor[BK_WATCH_CURSOR_MAX];
	size_t n;
	double *seen_us;        /* when the CREATED of d<i> arrived */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	size_t arrived;         /* how many have */
};

static void *read_events(void *arg)
{
	struct reader *r = arg;
	bk_status st;

	for (;;) {
		bk_watch_batch b;

		pthread_mutex_lock(&r->lock);
		if (r->arrived == r->n) {
			pthread_mutex_unlock(&r->lock);
			return NULL;
		}
		pthread_mutex_unlock(&r->lock);
		if (bk_watch_read(r->c, r->cursor, 10000, 0, &b, &st) != BK_OK)
			die("FileWatch", &st);
		for (size_t i = 0; i < b.n; i++) {
			unsigned k;
			if (b.events[i].kind == BK_WATCH_CREATED && sscanf(b.events[i].path, "d%u", &k) == 1 && k < r->n) {
				double t = now_us();
				pthread_mutex_lock(&r->lock);
				r->seen_us[k] = t;
				r->arrived++;
				pthread_cond_signal(&r->cond);
				pthread_mutex_unlock(&r->lock);
			}
		}
		memcpy(r->cursor, b.cursor, sizeof(r->cursor));
		bk_watch_batch_free(&b);
		if (b.end)
			die("FileWatch ended", &(bk_status){ .message = "the watch ended" });
	}
}

static void latency(size_t n)
{
	bk_client *c = connect_or_die();
	struct reader r = { .c = connect_or_die(), .n = n, .lock = PTHREAD_MUTEX_INITIALIZER,
			    .cond = PTHREAD_COND_INITIALIZER };
	double *made_us = calloc(n, sizeof(double)), *lat = calloc(n, sizeof(double)), *rtt = calloc(n, sizeof(double));
	pthread_t t;
	bk_status st;

	r.seen_us = calloc(n, sizeof(double));
	if (!made_us || !lat || !rtt || !r.seen_us)
		exit(1);
	(void)bk_file_remove(c, "watch-bench", true, NULL, NULL);
	if (bk_file_mkdir(c, "watch-bench", false, 0, &st) != BK_OK)
		die("FileMkdir", &st);
	if (bk_watch_start(c, "watch-bench", r.cursor, NULL, &st) != BK_OK)
		die("FileWatch", &st);
	pthread_create(&t, NULL, read_events, &r);
	for (size_t i = 0; i < n; i++) {
		char path[64];
		double t0 = now_us();

		snprintf(path, sizeof(path), "watch-bench/d%zu", i);
		if (bk_file_mkdir(c, path, false, 0, &st) != BK_OK)
			die("FileMkdir", &st);
		made_us[i] = t0;
		rtt[i] = now_us() - t0;
		/* One at a time: the next change once this one was seen. */
		pthread_mutex_lock(&r.lock);
		while (r.arrived <= i)
			pthread_cond_wait(&r.cond, &r.lock);
		pthread_mutex_unlock(&r.lock);
	}
	pthread_join(t, NULL);
	for (size_t i = 0; i < n; i++)
		lat[i] = r.seen_us[i] - made_us[i];
	bench_sort(lat, n);
	bench_sort(rtt, n);
	printf("change to event (FileMkdir, then its CREATED at a parked reader), %zu changes: p50 %.0f us, p99 %.0f us\n",
	       n, bench_percentile(lat, n, 50), bench_percentile(lat, n, 99));
	printf("FileMkdir round trip alone, same run:                           p50 %.0f us, p99 %.0f us\n",
	       bench_percentile(rtt, n, 50), bench_percentile(rtt, n, 99));
	printf("bench: watch.latency.p50 %.0f us\nbench: watch.latency.p99 %.0f us\n", bench_percentile(lat, n, 50),
	       bench_percentile(lat, n, 99));
	printf("bench: watch.mkdir_rtt.p50 %.0f us\nbench: watch.latency.ratio %.2f x\n", bench_percentile(rtt, n, 50),
	       bench_percentile(lat, n, 50) / bench_percentile(rtt, n, 50));
	(void)bk_watch_stop(c, r.cursor, NULL);
	(void)bk_file_remove(c, "watch-bench", true, NULL, NULL);
	bk_client_close(r.c);
	bk_client_close(c);
	free(made_us);
	free(lat);
	free(rtt);
	free(r.seen_us);
}

/* --- burst --------------------------------------------------------------------------------- */

static void burst(size_t n)
{
	bk_client *c = connect_or_die();
	char cursor[BK_WATCH_CURSOR_MAX], script[256];
	const char *const argv[] = { "python3", "-c", script, NULL };
	bk_exec_request rq = { .argv = argv };
	bk_exec_result res;
	uint64_t kept = 0, lost = 0, overflows = 0, unknown = 0;
	double t0, made_s, read_s;
	int idle = 0;
	bk_status st;

	(void)bk_file_remove(c, "watch-burst", true, NULL, NULL);
	if (bk_file_mkdir(c, "watch-burst", false, 0, &st) != BK_OK)
		die("FileMkdir", &st);
	if (bk_watch_start(c, "watch-burst", cursor, NULL, &st) != BK_OK)
		die("FileWatch", &st);
	snprintf(script, sizeof(script), "for i in range(%zu): open('watch-burst/f%%d' %% i, 'w').close()", n);
	t0 = now_us();
	if (bk_exec(c, &rq, &res, &st) != BK_OK || res.exit_code)
		die("Exec", &st);
	made_s = (now_us() - t0) / 1e6;
	bk_exec_result_free(&res);
	t0 = now_us();
	/* Until a second passes with nothing: everything sent is read by then. */
	while (idle < 1) {
		bk_watch_batch b;

		if (bk_watch_read(c, cursor, 1000, 0, &b, &st) != BK_OK)
			die("FileWatch", &st);
		idle = b.n ? 0 : idle + 1;
		for (size_t i = 0; i < b.n; i++) {
			if (b.events[i].kind == BK_WATCH_OVERFLOW) {
				overflows++;
				lost += b.events[i].lost;
				unknown += !b.events[i].lost;
			} else {
				kept++;
			}
		}
		memcpy(cursor, b.cursor, sizeof(cursor));
		bk_watch_batch_free(&b);
	}
	read_s = (now_us() - t0) / 1e6 - 1.0;
	printf("%zu files made (%zu events) in %.2f s by one command (%.0f files/s); read: %" PRIu64 " kept, %" PRIu64
	       " counted lost in %" PRIu64 " OVERFLOW event(s)%s, drained at %.0f events/s\n",
	       n, 2 * n, made_s, n / made_s, kept, lost, overflows, unknown ? " (some by the kernel's queue: uncounted)" : "",
	       kept / (read_s > 0 ? read_s : 1e-6));
	printf("bench: watch.burst.kept %" PRIu64 " events\nbench: watch.burst.lost %" PRIu64 " events\n", kept, lost);
	(void)bk_watch_stop(c, cursor, NULL);
	(void)bk_file_remove(c, "watch-burst", true, NULL, NULL);
	bk_client_close(c);
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: watch_bench latency|burst URL KEY N\n");
		return 2;
	}
	url = argv[2];
	key_file = argv[3];
	if (strcmp(argv[1], "latency") == 0)
		latency(strtoul(argv[4], NULL, 10));
	else if (strcmp(argv[1], "burst") == 0)
		burst(strtoul(argv[4], NULL, 10));
	else
		return 2;
	return 0;
}
