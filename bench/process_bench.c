/* The process benchmark (bench/process.sh runs it against a real boxkited):
 *
 *   stream URL KEY BYTES     streaming throughput: `head -c BYTES /dev/zero` started as a lossless
 *                            process and read through ProcessRead to its end, beside the raw pipe
 *                            throughput of the same command read here, in the same run;
 *   latency URL KEY N        from a command's write to the bytes reaching a reader that long-polls
 *                            as `bkctl exec` does (p50, p99 of N lines, each carrying the time it
 *                            was written on CLOCK_REALTIME, which namespaces do not change);
 *   polls URL KEY READERS N  Health's latency while READERS long-polls wait, beside the same
 *                            daemon's idle Health in the same run (p50, p99 of N calls each).
 *
 * It calls the rpcs through libboxkite's generic call (client/lib/request.h) with the generated
 * messages. Figures as `bench: NAME VALUE UNIT`, ratios as `bench: NAME.ratio VALUE x`. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "boxkite/boxkite.h"
#include "boxkite/v1/boxkite.pb-c.h"
#include "clock.h"
#include "request.h"
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

static void *call_or_die(bk_client *c, const char *method, const ProtobufCMessage *req,
			 const ProtobufCMessageDescriptor *desc)
{
	ProtobufCMessage *resp = NULL;
	bool verified;
	bk_status st;

	if (bk_client_call(c, method, req, desc, &resp, 0, &verified, &st) != BK_OK || !verified) {
		fprintf(stderr, "%s: %s\n", method, st.message);
		exit(1);
	}
	return resp;
}

static char *start(bk_client *c, const char *shell, uint64_t ring, bool stdin_open)
{
	Boxkite__V1__ProcessStartRequest rq = BOXKITE__V1__PROCESS_START_REQUEST__INIT;
	Boxkite__V1__ProcessStartResponse *r;
	char *id;

	rq.shell = (char *)shell;
	rq.ring_size = ring;
	rq.lossless = true;
	rq.stdin_open = stdin_open;
	r = call_or_die(c, "ProcessStart", &rq.base, &boxkite__v1__process_start_response__descriptor);
	id = strdup(r->process_id);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	return id;
}

/* A read and the bytes its answer's data field carried (stdout's, then stderr's): free both with
 * read_free(). */
struct read {
	Boxkite__V1__ProcessReadResponse *r;
	bk_answer_data data;
};

static void read_from(bk_client *c, const char *id, uint64_t out, uint64_t err, uint32_t max, uint32_t wait,
		      struct read *rd)
{
	Boxkite__V1__ProcessReadRequest rq = BOXKITE__V1__PROCESS_READ_REQUEST__INIT;
	ProtobufCMessage *resp = NULL;
	bk_request req;
	bool verified;
	bk_status st;

	rq.process_id = (char *)id;
	rq.stdout_offset = out;
	rq.stderr_offset = err;
	rq.max_bytes = max;
	rq.wait_ms = wait;
	memset(rd, 0, sizeof(*rd));
	if (bk_request_init(c, &req, "ProcessRead", &rq.base, 0, NULL, &st) != BK_OK ||
	    bk_request_call(c, &req, NULL, &boxkite__v1__process_read_response__descriptor, &resp, 0, &verified,
			    &rd->data, &st) != BK_OK ||
	    !verified) {
		fprintf(stderr, "ProcessRead: %s\n", st.message);
		exit(1);
	}
	rd->r = (Boxkite__V1__ProcessReadResponse *)resp;
	if (rd->data.len != (size_t)rd->r->stdout->length + rd->r->stderr->length) {
		fprintf(stderr, "ProcessRead: %zu bytes of data for %u + %u\n", rd->data.len, rd->r->stdout->length,
			rd->r->stderr->length);
		exit(1);
	}
}

static void read_free(struct read *rd)
{
	protobuf_c_message_free_unpacked(&rd->r->base, NULL);
	bk_answer_data_free(&rd->data);
}

static void stop(bk_client *c, const char *id)
{
	Boxkite__V1__ProcessSignalRequest rq = BOXKITE__V1__PROCESS_SIGNAL_REQUEST__INIT;
	ProtobufCMessage *resp = NULL;
	bool verified;
	bk_status st;

	rq.process_id = (char *)id;
	rq.signal = 9;
	if (bk_client_call(c, "ProcessSignal", &rq.base, &boxkite__v1__process_signal_response__descriptor, &resp, 0,
			   &verified, &st) == BK_OK)
		protobuf_c_message_free_unpacked(resp, NULL);
}

static double seconds_since(const struct timespec *t0)
{
	return (double)bk_elapsed_us(t0) / 1e6;
}

/* --- stream ---------------------------------------------------------------------------------- */

static double pipe_rate(uint64_t bytes)
{
	char cmd[64];
	static char buf[1 << 20];
	struct timespec t0;
	uint64_t got = 0;
	FILE *f;
	size_t n;

	snprintf(cmd, sizeof(cmd), "head -c %" PRIu64 " /dev/zero", bytes);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	f = popen(cmd, "r");
	if (!f)
		exit(1);
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		got += n;
	pclose(f);
	if (got != bytes) {
		fprintf(stderr, "pipe: %" PRIu64 " of %" PRIu64 " bytes\n", got, bytes);
		exit(1);
	}
	return (double)bytes / seconds_since(&t0) / (1 << 20);
}

/* The floor of any authenticated stream: each byte hashed once on each side (SHA-256, one core). */
static double sha256_rate(void)
{
	size_t len = 256u << 20;
	uint8_t *buf = calloc(1, len);
	struct timespec t0;
	bk_digest d;

	if (!buf)
		exit(1);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (bk_digest_of(buf, len, &d) < 0)
		exit(1);
	double rate = (double)len / seconds_since(&t0) / (1 << 20);
	free(buf);
	return rate;
}

static int run_stream(uint64_t bytes)
{
	bk_client *c = connect_or_die();
	char shell[64];
	struct timespec t0;
	uint64_t off = 0, lost = 0;
	double pipe, rate;
	char *id;

	double sha = sha256_rate();
	pipe = pipe_rate(bytes);
	snprintf(shell, sizeof(shell), "head -c %" PRIu64 " /dev/zero", bytes);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	id = start(c, shell, 8u << 20, false);
	for (;;) {
		struct read rd;
		read_from(c, id, off, 0, 4u << 20, 10000, &rd);
		bool done = rd.r->stdout->eof && rd.r->stderr->eof && !rd.r->status->running;
		off = rd.r->stdout->offset + rd.r->stdout->length;
		lost += rd.r->stdout->lost;
		read_free(&rd);
		if (done)
			break;
	}
	rate = (double)off / seconds_since(&t0) / (1 << 20);
	if (off != bytes || lost) {
		fprintf(stderr, "stream: %" PRIu64 " of %" PRIu64 " bytes, %" PRIu64 " lost\n", off, bytes, lost);
		return 1;
	}
	printf("streaming %" PRIu64 " MiB through ProcessRead: %.0f MiB/s; the same command into a pipe read here: "
	       "%.0f MiB/s; %.2fx (target >= 0.5x)\n",
	       bytes >> 20, rate, pipe, rate / pipe);
	printf("one-core SHA-256 in the same run (each byte is hashed once on each side): %.0f MiB/s; streaming %.2fx it\n",
	       sha, rate / sha);
	printf("bench: process_stream %.0f MiB/s\nbench: process_stream_pipe %.0f MiB/s\nbench: process_stream.ratio %.2f x\n",
	       rate, pipe, rate / pipe);
	printf("bench: process_stream_sha256 %.0f MiB/s\nbench: process_stream.vs_sha256 %.2f x\n", sha, rate / sha);
	free(id);
	bk_client_close(c);
	return 0;
}

/* --- latency --------------------------------------------------------------------------------- */

static int run_latency(int lines)
{
	bk_client *c = connect_or_die();
	double *us = calloc((size_t)lines, sizeof(*us));
	char shell[512];
	uint64_t off = 0;
	int got = 0, warm = 20;
	char line[64];
	size_t have = 0;
	char *id;

	/* A line every 5 ms, each its own write, stamped as it is written. */
	snprintf(shell, sizeof(shell),
		 "exec python3 -u -c 'import time,os\nfor i in range(%d): os.write(1, b\"%%d\\n\" %% "
		 "time.clock_gettime_ns(time.CLOCK_REALTIME)); time.sleep(0.005)'",
		 lines + warm);
	id = start(c, shell, 1u << 20, false);
	while (got < lines) {
		struct read rd;
		read_from(c, id, off, 0, 1u << 20, 10000, &rd);
		Boxkite__V1__ProcessReadResponse *r = rd.r;
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		int64_t now_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
		for (size_t i = 0; i < r->stdout->length; i++) {
			char ch = (char)rd.data.data[i];
			if (ch != '\n') {
				if (have < sizeof(line) - 1)
					line[have++] = ch;
				continue;
			}
			line[have] = '\0';
			have = 0;
			if (warm > 0) {
				warm--;
				continue;
			}
			if (got < lines)
				us[got++] = (double)(now_ns - strtoll(line, NULL, 10)) / 1000.0;
		}
		off = r->stdout->offset + r->stdout->length;
		bool done = r->stdout->eof && !r->status->running;
		read_free(&rd);
		if (done)
			break;
	}
	if (got < lines) {
		fprintf(stderr, "latency: %d of %d lines\n", got, lines);
		return 1;
	}
	bench_sort(us, (size_t)got);
	printf("write to stream latency (%d lines, a long-polling reader): p50 %.0f us, p99 %.0f us\n", got,
	       bench_percentile(us, (size_t)got, 50), bench_percentile(us, (size_t)got, 99));
	printf("bench: process_latency_p50 %.0f us\nbench: process_latency_p99 %.0f us\n",
	       bench_percentile(us, (size_t)got, 50), bench_percentile(us, (size_t)got, 99));
	stop(c, id);
	free(id);
	free(us);
	bk_client_close(c);
	return 0;
}

/* --- Health with long-polls waiting ---------------------------------------------------------- */

struct poller {
	pthread_t thread;
	const char *id;
	atomic_bool *running;
};

static void *poller_main(void *arg)
{
	struct poller *p = arg;
	bk_client *c = connect_or_die();

	while (atomic_load(p->running)) {
		struct read rd;
		read_from(c, p->id, 0, 0, 0, 60000, &rd);
		read_free(&rd);
	}
	bk_client_close(c);
	return NULL;
}

static void health_samples(int n, double *p50, double *p99)
{
	bk_client *c = connect_or_die();
	double *us = calloc((size_t)n, sizeof(*us));
	bk_health_info h;
	bk_status st;

	for (int i = 0; i < n; i++) {
		struct timespec t0;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		if (bk_health(c, &h, &st) != BK_OK) {
			fprintf(stderr, "health: %s\n", st.message);
			exit(1);
		}
		us[i] = (double)bk_elapsed_us(&t0);
		usleep(1000);
	}
	bench_sort(us, (size_t)n);
	*p50 = bench_percentile(us, (size_t)n, 50);
	*p99 = bench_percentile(us, (size_t)n, 99);
	free(us);
	bk_client_close(c);
}

static int run_polls(int readers, int n)
{
	bk_client *c = connect_or_die();
	struct poller *ps = calloc((size_t)readers, sizeof(*ps));
	atomic_bool running = true;
	double idle50, idle99, busy50, busy99;
	char *id;

	health_samples(n, &idle50, &idle99);
	id = start(c, "exec sleep 3600", 4096, false);
	for (int i = 0; i < readers; i++) {
		ps[i].id = id;
		ps[i].running = &running;
		pthread_create(&ps[i].thread, NULL, poller_main, &ps[i]);
	}
	sleep(2); /* every reader is waiting */
	health_samples(n, &busy50, &busy99);
	atomic_store(&running, false);
	stop(c, id); /* the end wakes every reader */
	for (int i = 0; i < readers; i++)
		pthread_join(ps[i].thread, NULL);
	printf("health with %d long-polls waiting: p50 %.0f us, p99 %.0f us; idle: p50 %.0f us, p99 %.0f us; "
	       "p99 %.2fx idle\n",
	       readers, busy50, busy99, idle50, idle99, busy99 / idle99);
	printf("bench: health_polls_p50 %.0f us\nbench: health_polls_p99 %.0f us\nbench: health_polls_p99.ratio %.2f x\n",
	       busy50, busy99, busy99 / idle99);
	free(id);
	free(ps);
	bk_client_close(c);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: %s stream URL KEY BYTES | latency URL KEY N | polls URL KEY READERS N\n", argv[0]);
		return 2;
	}
	url = argv[2];
	key_file = argv[3];
	if (strcmp(argv[1], "stream") == 0)
		return run_stream(strtoull(argv[4], NULL, 10));
	if (strcmp(argv[1], "latency") == 0)
		return run_latency(atoi(argv[4]));
	if (strcmp(argv[1], "polls") == 0 && argc >= 6)
		return run_polls(atoi(argv[4]), atoi(argv[5]));
	fprintf(stderr, "%s: unknown mode %s\n", argv[0], argv[1]);
	return 2;
}
