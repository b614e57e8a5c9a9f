/* health_rtt — the authenticated Health round trip through libboxkite against a real boxkited,
 * beside plain nng REQ/REP round trips measured in the same run, on the same transport.
 *
 *   health_rtt echo-sync URL...    a plain rep0 echo server, one thread: nng_recvmsg → nng_sendmsg
 *   health_rtt echo-async URL...   the same as a pool of ctx+aio state machines (boxkited's front)
 *       Both listen on every URL, print "ready" on stdout once they do, and run until SIGTERM.
 *   health_rtt run [--iterations N] [--warmup N] --key-file PATH
 *                  NAME BOXKITED_URL SYNC_ECHO_URL ASYNC_ECHO_URL [NAME ...]...
 *       For each transport NAME, time the probes of measure() one request at a time, each N
 *       times after N warm-up calls, interleaved in blocks so that drift on a shared machine hits
 *       them alike; print p50/p99, the ratios to the raw floor, and `bench:` lines.
 *
 * bench/health-rtt.sh starts boxkited and both echo servers and runs this (`make bench`). */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "boxkite/boxkite.h"
#include "stats.h"

/* The raw probes' payload each way: more than a keyed Health request or its answer (each under
 * 100 B in boxkited's log, bytes_in and bytes_out), so the baseline moves no fewer bytes than the
 * real call. */
#define RAW_PAYLOAD 128
/* Calls of one probe before the next probe takes its turn. */
#define BLOCK 500

struct probe;
typedef int (*probe_call_fn)(struct probe *p);

struct probe {
	const char *name;  /* bench line name: NAME_rtt_TRANSPORT_p50 */
	const char *what;  /* table label */
	probe_call_fn call;
	bool keyed;
	const char *url;   /* where the probe calls */
	nng_socket sock;   /* raw probes */
	bk_client *client; /* Health probes */
	double *us;        /* one sample per timed call */
	size_t n;
};

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int fail_nng(const char *what, int rv)
{
	fprintf(stderr, "health_rtt: %s: %s\n", what, nng_strerror(rv));
	return -EIO;
}

/* --- the echo servers ------------------------------------------------------------------------- */

static int echo_listen(nng_socket *sock, char **urls, int nurls)
{
	int rv;

	if ((rv = nng_rep0_open(sock)))
		return fail_nng("nng_rep0_open", rv);
	for (int i = 0; i < nurls; i++)
		if ((rv = nng_listen(*sock, urls[i], NULL, 0)))
			return fail_nng(urls[i], rv);
	return 0;
}

/* Synchronous: one thread, nng_recvmsg then nng_sendmsg on the socket. */
static int echo_sync(char **urls, int nurls)
{
	nng_socket sock;
	int rv;

	if ((rv = echo_listen(&sock, urls, nurls)) < 0)
		return rv;
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		nng_msg *msg;

		if ((rv = nng_recvmsg(sock, &msg, 0)))
			return fail_nng("nng_recvmsg", rv);
		/* On a failed send the message is still ours to free. */
		if ((rv = nng_sendmsg(sock, msg, 0)))
			nng_msg_free(msg);
	}
}

/* Asynchronous: the structure of boxkited's front (server/transport/nng.c) and nng's demo/async/server.c,
 * a pool of contexts, each an aio state machine receive → send the message back → receive. */
#define ECHO_CONTEXTS 64

struct echo_slot {
	nng_ctx ctx;
	nng_aio *aio;
	bool sending;
};

static void echo_slot_cb(void *arg)
{
	struct echo_slot *s = arg;
	int rv = nng_aio_result(s->aio);

	if (s->sending && rv != 0)
		nng_msg_free(nng_aio_get_msg(s->aio));
	if (rv == NNG_ECLOSED || rv == NNG_ECANCELED)
		return;
	s->sending = !s->sending && rv == 0;
	if (s->sending)
		nng_ctx_send(s->ctx, s->aio);
	else
		nng_ctx_recv(s->ctx, s->aio);
}

static int echo_async(char **urls, int nurls)
{
	static struct echo_slot slots[ECHO_CONTEXTS];
	nng_socket sock;
	int rv;

	if ((rv = echo_listen(&sock, urls, nurls)) < 0)
		return rv;
	for (int i = 0; i < ECHO_CONTEXTS; i++) {
		if ((rv = nng_aio_alloc(&slots[i].aio, echo_slot_cb, &slots[i])) ||
		    (rv = nng_ctx_open(&slots[i].ctx, sock)))
			return fail_nng("echo context", rv);
		nng_ctx_recv(slots[i].ctx, slots[i].aio);
	}
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}

/* --- probes -------------------------------------------------------------------------------------- */

/* Plain REQ socket, synchronous send and receive: the transport's own round trip. */
static int call_raw(struct probe *p)
{
	nng_msg *msg;
	int rv;

	if ((rv = nng_msg_alloc(&msg, RAW_PAYLOAD)))
		return fail_nng("nng_msg_alloc", rv);
	memset(nng_msg_body(msg), 0x5a, RAW_PAYLOAD);
	if ((rv = nng_sendmsg(p->sock, msg, 0))) {
		nng_msg_free(msg);
		return fail_nng("nng_sendmsg", rv);
	}
	if ((rv = nng_recvmsg(p->sock, &msg, 0)))
		return fail_nng("nng_recvmsg", rv);
	rv = nng_msg_len(msg) == RAW_PAYLOAD ? 0 : -EPROTO;
	nng_msg_free(msg);
	return rv;
}

/* The same round trip the way libboxkite's roundtrip() makes it: a context and an aio opened and
 * closed for every call. The difference to call_raw is that structure's cost. */
static int call_raw_ctx(struct probe *p)
{
	nng_aio *aio = NULL;
	nng_msg *msg;
	nng_ctx ctx;
	int rv;

	if ((rv = nng_ctx_open(&ctx, p->sock)))
		return fail_nng("nng_ctx_open", rv);
	if ((rv = nng_aio_alloc(&aio, NULL, NULL)) || (rv = nng_msg_alloc(&msg, RAW_PAYLOAD))) {
		nng_aio_free(aio);
		nng_ctx_close(ctx);
		return fail_nng("context round trip set-up", rv);
	}
	memset(nng_msg_body(msg), 0x5a, RAW_PAYLOAD);
	nng_aio_set_msg(aio, msg);
	nng_ctx_send(ctx, aio);
	nng_aio_wait(aio);
	if ((rv = nng_aio_result(aio))) {
		nng_msg_free(nng_aio_get_msg(aio));
	} else {
		nng_ctx_recv(ctx, aio);
		nng_aio_wait(aio);
		if ((rv = nng_aio_result(aio)) == 0)
			nng_msg_free(nng_aio_get_msg(aio));
	}
	nng_aio_free(aio);
	nng_ctx_close(ctx);
	return rv ? fail_nng("context round trip", rv) : 0;
}

static int call_health(struct probe *p)
{
	bk_health_info info;
	bk_status st;

	if (bk_health(p->client, &info, &st) != BK_OK) {
		fprintf(stderr, "health_rtt: Health: %s\n", st.message);
		return -EIO;
	}
	if (info.authenticated != p->keyed) {
		fprintf(stderr, "health_rtt: Health: authenticated=%d, expected %d\n", info.authenticated, p->keyed);
		return -EPROTO;
	}
	return 0;
}

static int probe_open(struct probe *p, const char *key_file, size_t samples)
{
	bk_client_options opts = { .key_file = p->keyed ? key_file : NULL };
	bk_status st;
	int rv;

	p->us = calloc(samples, sizeof(*p->us));
	if (!p->us)
		return -ENOMEM;
	if (p->call != call_health) {
		if ((rv = nng_req0_open(&p->sock)))
			return fail_nng("nng_req0_open", rv);
		if ((rv = nng_dial(p->sock, p->url, NULL, 0)))
			return fail_nng(p->url, rv);
		return 0;
	}
	if (bk_client_open(&p->client, p->url, &opts, &st) != BK_OK) {
		fprintf(stderr, "health_rtt: %s: %s\n", p->url, st.message);
		return -EIO;
	}
	return 0;
}

static void probe_close(struct probe *p)
{
	if (p->call == call_health)
		bk_client_close(p->client);
	else if (nng_socket_id(p->sock) > 0)
		nng_close(p->sock);
	free(p->us);
}

/* --- one transport --------------------------------------------------------------------------- */

/* The first NRAW probes are plain nng round trips; the fastest of them by p50 is the floor the
 * Health calls are compared with, so the ratio is never flattered by a slow baseline. */
#define NRAW 3
#define NPROBES (NRAW + 2)

static void report(const char *transport, struct probe probes[NPROBES])
{
	const size_t nprobes = NPROBES;
	double p50[NPROBES], p99[NPROBES];
	size_t base = 0;

	for (size_t i = 0; i < nprobes; i++) {
		bench_sort(probes[i].us, probes[i].n);
		p50[i] = bench_percentile(probes[i].us, probes[i].n, 50);
		p99[i] = bench_percentile(probes[i].us, probes[i].n, 99);
		if (i < NRAW && p50[i] < p50[base])
			base = i;
	}
	printf("  %-40s %8s %8s %10s %10s\n", "probe", "p50 us", "p99 us", "p50/floor", "p99/floor");
	for (size_t i = 0; i < nprobes; i++)
		printf("  %-40s %8.1f %8.1f %9.2fx %9.2fx%s\n", probes[i].what, p50[i], p99[i], p50[i] / p50[base],
		       p99[i] / p99[base], i == base ? "  <- floor" : "");
	for (size_t i = 0; i < nprobes; i++) {
		printf("bench: %s_rtt_%s_p50 %.1f us\n", probes[i].name, transport, p50[i]);
		printf("bench: %s_rtt_%s_p99 %.1f us\n", probes[i].name, transport, p99[i]);
		if (i == NRAW - 1) {
			printf("bench: raw_rtt_%s_p50 %.1f us\n", transport, p50[base]);
			printf("bench: raw_rtt_%s_p99 %.1f us\n", transport, p99[base]);
		}
		if (i >= NRAW) {
			printf("bench: %s_rtt_%s_p50.ratio %.2f x\n", probes[i].name, transport, p50[i] / p50[base]);
			printf("bench: %s_rtt_%s_p99.ratio %.2f x\n", probes[i].name, transport, p99[i] / p99[base]);
		}
	}
}

static int measure(const char *transport, const char *boxkited_url, const char *sync_url, const char *async_url,
		   const char *key_file, size_t iterations, size_t warmup)
{
	struct probe probes[NPROBES] = {
		{ .name = "raw_sync", .what = "raw: REQ socket -> sync rep0 echo", .call = call_raw, .url = sync_url },
		{ .name = "raw_async", .what = "raw: REQ socket -> async ctx echo", .call = call_raw, .url = async_url },
		{ .name = "raw_ctx", .what = "raw: ctx+aio per call -> async ctx echo", .call = call_raw_ctx,
		  .url = async_url },
		{ .name = "health_unkeyed", .what = "Health via libboxkite, unkeyed", .call = call_health,
		  .url = boxkited_url },
		{ .name = "health", .what = "Health via libboxkite, authenticated", .call = call_health, .keyed = true,
		  .url = boxkited_url },
	};
	const size_t nprobes = NPROBES;
	int ret = 0;

	for (size_t i = 0; i < nprobes && ret == 0; i++)
		ret = probe_open(&probes[i], key_file, iterations);
	for (size_t i = 0; i < nprobes && ret == 0; i++)
		for (size_t k = 0; k < warmup && ret == 0; k++)
			ret = probes[i].call(&probes[i]);
	for (size_t done = 0; done < iterations && ret == 0; done += BLOCK) {
		for (size_t i = 0; i < nprobes && ret == 0; i++) {
			struct probe *p = &probes[i];
			for (size_t k = done; k < iterations && k < done + BLOCK && ret == 0; k++) {
				double t0 = now_us();
				ret = p->call(p);
				p->us[p->n++] = now_us() - t0;
			}
		}
	}
	if (ret == 0) {
		printf("\n%s: boxkited at %s; %zu calls per probe after %zu warm-up, interleaved in blocks of %d\n",
		       transport, boxkited_url, iterations, warmup, BLOCK);
		report(transport, probes);
	}
	for (size_t i = 0; i < nprobes; i++)
		probe_close(&probes[i]);
	return ret;
}

static int parse_count(const char *s, size_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v == 0 || v > 10000000)
		return -EINVAL;
	*out = (size_t)v;
	return 0;
}

static void usage(FILE *out)
{
	fprintf(out, "Usage: health_rtt echo-sync URL...\n"
		     "       health_rtt echo-async URL...\n"
		     "       health_rtt run [--iterations N] [--warmup N] --key-file PATH\n"
		     "                      NAME BOXKITED_URL SYNC_ECHO_URL ASYNC_ECHO_URL [NAME ...]...\n");
}

static int run(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "iterations", required_argument, NULL, 'n' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "key-file", required_argument, NULL, 'k' },
		{ 0 },
	};
	size_t iterations = 20000, warmup = 2000;
	const char *key_file = NULL;
	int c;

	while ((c = getopt_long(argc, argv, "n:w:k:", longopts, NULL)) != -1) {
		if ((c == 'n' && parse_count(optarg, &iterations) < 0) || (c == 'w' && parse_count(optarg, &warmup) < 0) ||
		    c == '?') {
			usage(stderr);
			return 2;
		}
		if (c == 'k')
			key_file = optarg;
	}
	if (!key_file || optind == argc || (argc - optind) % 4) {
		usage(stderr);
		return 2;
	}
	for (int i = optind; i < argc; i += 4)
		if (measure(argv[i], argv[i + 1], argv[i + 2], argv[i + 3], key_file, iterations, warmup) < 0)
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "echo-sync") == 0)
		return echo_sync(argv + 2, argc - 2) < 0 ? 1 : 0;
	if (argc >= 3 && strcmp(argv[1], "echo-async") == 0)
		return echo_async(argv + 2, argc - 2) < 0 ? 1 : 0;
	if (argc >= 2 && strcmp(argv[1], "run") == 0)
		return run(argc - 1, argv + 1);
	usage(stderr);
	return 2;
}
