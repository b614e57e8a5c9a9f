/* The exec benchmark (make bench):
 *
 *   floor   the isolation steps alone: a local sandbox made in this process with the executor's
 *           own code (sidecar/), then per iteration exactly what the executor does for an exec —
 *           take the staged cgroup and a pooled network namespace, bk_spawn() of `true`, stage the
 *           next cgroup, output pipes to EOF, wait, OOM check, cgroup removal — with no RPC, no
 *           front, no channel;
 *   rpc     the same `true` through libboxkite against a running boxkited: the round trip;
 *   load    first one thread calling Health for HEALTH_IDLE_SECONDS with no exec running (the
 *           baseline), then C clients (threads, one bk_client each) running execs of `true` back
 *           to back for S seconds with the same thread calling Health meanwhile, on the same
 *           daemon: execs/s, against one client's rate (1e6 / exec_rtt_p50, when given), and the
 *           health latency, against the baseline;
 *   mixed   the same with L more clients listing a directory (every page of it) back to back
 *           beside the C exec clients: the health latency with both, against the baseline;
 *   list    full listings of a directory (page by page, 1000 a page), one after another: the
 *           first (which reads the directory), and the median of the rest;
 *   spawn   a peer's command (bench/peers.sh: the bubblewrap spawn) run N times after WARMUP,
 *           one at a time, each timed from before posix_spawn to its wait: NAME_p50, NAME_p99.
 *
 * Prints medians and p99 (nearest rank, bench/stats.h) and the `bench:` lines of bench/bench.mk.
 * Run by bench/exec.sh. */
#include <errno.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "boxkite/boxkite.h"
#include "clock.h"
#include "exec/cgroup.h"
#include "exec/filter.h"
#include "exec/netns.h"
#include "exec/sandbox.h"
#include "exec/spawn.h"
#include "sbpath.h"
#include "stats.h"

/* Seconds of Health calls with no exec running, before the load: its baseline. */
#define HEALTH_IDLE_SECONDS 2

/* Sort n > 0 samples, print their p50 and p99 and the bench lines NAME_p50, NAME_p99. */
static void summarize(const char *name, double *us, size_t n, double *p50_out, double *p99_out)
{
	double p50, p99;

	bench_sort(us, n);
	p50 = bench_percentile(us, n, 50);
	p99 = bench_percentile(us, n, 99);
	printf("%-28s p50 %8.1f us   p99 %8.1f us   (n=%zu)\n", name, p50, p99, n);
	printf("bench: %s_p50 %.1f us\nbench: %s_p99 %.1f us\n", name, p50, name, p99);
	if (p50_out)
		*p50_out = p50;
	if (p99_out)
		*p99_out = p99;
}

static void drain(int fd)
{
	char buf[4096];

	while (read(fd, buf, sizeof(buf)) > 0)
		;
	close(fd);
}

/* --- floor ----------------------------------------------------------------------------------- */

static int run_floor(const char *workspace, const char *init, int iterations, int warmup, double *p50)
{
	static char *const argv[] = { "true", NULL };
	static char *const envp[] = { "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" BK_SANDBOX_HOME, NULL };
	char home[4096];
	bk_sandbox_config scfg = { .workspace = workspace, .home = home, .init_path = init, .tmp_size = 64u << 20,
				   .shm_size = 16u << 20, .uid = 1001, .gid = 1001 };
	bk_seccomp seccomp;
	bk_spawner sp;
	bk_cgroups cg;
	bk_netns_pool pool;
	bk_sandbox sb;
	bk_error *err = NULL;
	double *us = calloc((size_t)iterations, sizeof(*us));
	/* The executor's defaults (--exec-memory, --exec-pids, and four times those for the sandbox). */
	const bk_cgroup_limits limits = { .exec_memory = 512u << 20, .exec_pids = 256,
					  .sandbox_memory = 4 * (512ull << 20), .sandbox_pids = 4 * 256 };

	snprintf(home, sizeof(home), "%s-home", workspace);
	if (!us || bk_seccomp_compile(&seccomp, &err) < 0 || bk_spawner_init(&sp, &seccomp, init, 1001, 1001, &err) < 0 ||
	    bk_cgroups_init(&cg, "/sys/fs/cgroup", "/proc/self/cgroup", &limits, &err) < 0 ||
	    bk_netns_pool_start(&pool, 8, &err) < 0) {
		fprintf(stderr, "floor: set-up: %s\n", bk_error_msg(err));
		return 1;
	}
	bk_sandbox_init(&sb, &scfg);
	if (bk_sandbox_acquire(&sb, &sp, &err) < 0 || bk_cgroups_stage(&cg, &err) < 0) {
		fprintf(stderr, "floor: sandbox: %s\n", bk_error_msg(err));
		return 1;
	}
	for (int i = -warmup; i < iterations; i++) {
		bk_exec_cgroup ecg;
		bk_spawned out;
		struct bk_step_report report;
		struct timespec t0;
		siginfo_t info;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		if (bk_cgroups_take(&cg, &ecg, &err) < 0) {
			fprintf(stderr, "floor: cgroup: %s\n", bk_error_msg(err));
			return 1;
		}
		bk_spawn_request rq = {
			.argv = argv,
			.envp = envp,
			.cwd_root = BK_WORKSPACE,
			.cwd_rel = ".",
			.limits = { .fsize = 1u << 30, .nofile = 1024, .nproc = 4096 },
			.ns = &sb.ns,
			.netns = bk_netns_pool_take(&pool),
		};
		int r = bk_spawn(&sp, &rq, &out, &report, &err);
		if (rq.netns >= 0)
			close(rq.netns);
		/* As the executor: wait in the next exec's cgroup (it does so after answering). */
		if (bk_cgroups_stage(&cg, &err) < 0) {
			fprintf(stderr, "floor: cgroup: %s\n", bk_error_msg(err));
			return 1;
		}
		if (r < 0) {
			/* The failed step, when a step of the child's failed, names itself in err. */
			fprintf(stderr, "floor: spawn failed: %s\n", bk_error_msg(err));
			return 1;
		}
		close(out.stdin_w);
		close(out.status_r);
		drain(out.stdout_r);
		drain(out.stderr_r);
		waitid(P_PIDFD, (id_t)out.pidfd, &info, WEXITED);
		close(out.pidfd);
		bk_exec_cgroup_oom_killed(&cg, &ecg);
		bk_exec_cgroup_release(&cg, &ecg);
		if (i >= 0)
			us[i] = (double)bk_elapsed_us(&t0);
	}
	summarize("exec_floor", us, (size_t)iterations, p50, NULL);
	bk_sandbox_stop(&sb);
	bk_cgroups_fini(&cg);
	bk_netns_pool_stop(&pool);
	bk_spawner_fini(&sp);
	bk_seccomp_free(&seccomp);
	free(us);
	return 0;
}

/* --- rpc and load ---------------------------------------------------------------------------- */

static const char *url, *key_file;
static const char *const true_argv[] = { "true", NULL };

static bk_client *connect_or_die(void)
{
	bk_client_options o = { .key_file = key_file };
	bk_client *c;
	bk_status st;

	if (bk_client_open(&c, url, &o, &st) != BK_OK) {
		fprintf(stderr, "connect: %s\n", st.message);
		exit(1);
	}
	return c;
}

static int exec_true(bk_client *c)
{
	bk_exec_request rq = { .argv = true_argv };
	bk_exec_result res;
	bk_status st;

	if (bk_exec(c, &rq, &res, &st) != BK_OK || res.exit_code != 0) {
		fprintf(stderr, "exec: %s (exit %d)\n", st.message, res.exit_code);
		return -1;
	}
	bk_exec_result_free(&res);
	return 0;
}

static int run_rpc(int iterations, int warmup, double floor_p50)
{
	bk_client *c = connect_or_die();
	double *us = calloc((size_t)iterations, sizeof(*us));
	double p50;

	for (int i = -warmup; i < iterations; i++) {
		struct timespec t0;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		if (exec_true(c) < 0)
			return 1;
		if (i >= 0)
			us[i] = (double)bk_elapsed_us(&t0);
	}
	summarize("exec_rtt", us, (size_t)iterations, &p50, NULL);
	if (floor_p50 > 0) {
		printf("exec round trip / isolated-spawn floor: %.2fx (target <= 1.3x)\n", p50 / floor_p50);
		printf("bench: exec_rtt_p50.ratio %.2f x\n", p50 / floor_p50);
	}
	bk_client_close(c);
	free(us);
	return 0;
}

static atomic_bool load_running;
static atomic_long load_execs, load_errors, load_listings;
static const char *list_path;

/* Every page of path; the number of entries, or -1. */
static long list_full(bk_client *c, const char *path)
{
	char token[4096] = "", next[4096];
	long total = 0;

	do {
		bk_file_info *entries = NULL;
		size_t n = 0;
		bk_status st;

		if (bk_file_list(c, path, 1000, token, &entries, &n, next, &st) != BK_OK) {
			fprintf(stderr, "list %s: %s\n", path, st.message);
			return -1;
		}
		bk_file_list_free(entries, n);
		total += (long)n;
		memcpy(token, next, sizeof(token));
	} while (token[0]);
	return total;
}

static void *load_list_thread(void *arg)
{
	bk_client *c = connect_or_die();

	(void)arg;
	while (atomic_load(&load_running)) {
		if (list_full(c, list_path) < 0)
			atomic_fetch_add(&load_errors, 1);
		else
			atomic_fetch_add(&load_listings, 1);
	}
	bk_client_close(c);
	return NULL;
}

static void *load_exec_thread(void *arg)
{
	bk_client *c = connect_or_die();

	(void)arg;
	while (atomic_load(&load_running)) {
		if (exec_true(c) < 0)
			atomic_fetch_add(&load_errors, 1);
		else
			atomic_fetch_add(&load_execs, 1);
	}
	bk_client_close(c);
	return NULL;
}

/* Health called one request at a time, 2 ms apart, while running is set: one sample per call. */
struct health_sampler {
	atomic_bool running;
	double *us;
	size_t n, cap;
	pthread_t thread;
};

static void *health_sampler_thread(void *arg)
{
	struct health_sampler *hs = arg;
	bk_client *c = connect_or_die();
	bk_health_info h;
	bk_status st;

	while (atomic_load(&hs->running) && hs->n < hs->cap) {
		struct timespec t0;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		if (bk_health(c, &h, &st) != BK_OK) {
			atomic_fetch_add(&load_errors, 1);
			continue;
		}
		hs->us[hs->n++] = (double)bk_elapsed_us(&t0);
		usleep(2000);
	}
	bk_client_close(c);
	return NULL;
}

static void health_sampler_start(struct health_sampler *hs)
{
	hs->cap = 1000000;
	hs->n = 0;
	hs->us = calloc(hs->cap, sizeof(*hs->us));
	if (!hs->us) {
		fprintf(stderr, "load: out of memory\n");
		exit(1);
	}
	atomic_store(&hs->running, true);
	pthread_create(&hs->thread, NULL, health_sampler_thread, hs);
}

static void health_sampler_stop(struct health_sampler *hs)
{
	atomic_store(&hs->running, false);
	pthread_join(hs->thread, NULL);
}

/* exec_rtt_p50: the one-client round trip of this run (run_rpc), 0 if not known. listers: that
 * many more clients listing list_path meanwhile. */
static int run_load(int clients, int listers, int seconds, double exec_rtt_p50)
{
	const char *busy_name = listers ? "health_rtt_under_exec_and_list_load" : "health_rtt_under_exec_load";
	pthread_t threads[64], list_threads[64];
	struct health_sampler idle = { 0 }, busy = { 0 };
	struct timespec t0;
	double elapsed, rate, idle_p50, idle_p99, busy_p50, busy_p99;
	int ret;

	if (clients < 1 || clients > 64 || listers < 0 || listers > 64 || seconds < 1) {
		fprintf(stderr, "load: 1 to 64 clients, 0 to 64 listers, at least 1 second\n");
		return 2;
	}
	/* The baseline: the same sampler against the same daemon, no exec running. */
	health_sampler_start(&idle);
	sleep(HEALTH_IDLE_SECONDS);
	health_sampler_stop(&idle);

	atomic_store(&load_running, true);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < clients; i++)
		pthread_create(&threads[i], NULL, load_exec_thread, NULL);
	for (int i = 0; i < listers; i++)
		pthread_create(&list_threads[i], NULL, load_list_thread, NULL);
	health_sampler_start(&busy);
	sleep((unsigned)seconds);
	atomic_store(&load_running, false);
	for (int i = 0; i < clients; i++)
		pthread_join(threads[i], NULL);
	for (int i = 0; i < listers; i++)
		pthread_join(list_threads[i], NULL);
	health_sampler_stop(&busy);
	elapsed = (double)bk_elapsed_us(&t0) / 1e6;
	rate = (double)atomic_load(&load_execs) / elapsed;
	printf("%d clients, %.1f s: %ld execs, %.0f execs/s%s, %ld errors\n", clients, elapsed,
	       atomic_load(&load_execs), rate, listers ? "" : " (target >= 900)", atomic_load(&load_errors));
	if (listers)
		printf("%d listing clients meanwhile: %ld full listings of %s\n", listers, atomic_load(&load_listings),
		       list_path);
	else
		printf("bench: exec_throughput_%dc %.0f execs/s\n", clients, rate);
	if (exec_rtt_p50 > 0 && !listers) {
		double one = 1e6 / exec_rtt_p50;
		printf("%d clients / one client back to back (1e6 / exec_rtt_p50 = %.0f execs/s): %.2fx\n", clients, one,
		       rate / one);
		printf("bench: exec_throughput_%dc.ratio %.2f x\n", clients, rate / one);
	}
	ret = atomic_load(&load_errors) ? 1 : 0;
	if (idle.n == 0 || busy.n == 0) {
		fprintf(stderr, "load: no Health answer %s\n", idle.n ? "under load" : "with no exec running");
		ret = 1;
	} else {
		printf("health latency, %d s with no exec running, then during the %d s of load:\n", HEALTH_IDLE_SECONDS,
		       seconds);
		summarize("health_rtt_idle", idle.us, idle.n, &idle_p50, &idle_p99);
		summarize(busy_name, busy.us, busy.n, &busy_p50, &busy_p99);
		printf("health under load / with none: p50 %.2fx, p99 %.2fx%s\n", busy_p50 / idle_p50, busy_p99 / idle_p99,
		       listers ? " (target: p99 <= 3x and <= 2 ms)" : "");
		printf("bench: %s_p50.ratio %.2f x\n", busy_name, busy_p50 / idle_p50);
		printf("bench: %s_p99.ratio %.2f x\n", busy_name, busy_p99 / idle_p99);
	}
	free(idle.us);
	free(busy.us);
	return ret;
}

/* rounds full listings of path: the first, and the median of the others. */
static int run_list(const char *path, int rounds)
{
	bk_client *c = connect_or_die();
	double *us = calloc((size_t)rounds, sizeof(*us)), first;
	long n = 0;

	if (!us || rounds < 2)
		return 2;
	for (int i = 0; i < rounds; i++) {
		struct timespec t0;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		if ((n = list_full(c, path)) < 0)
			return 1;
		us[i] = (double)bk_elapsed_us(&t0);
	}
	first = us[0];
	bench_sort(us + 1, (size_t)rounds - 1);
	printf("full listing of %ld entries: first %.3f s, then p50 %.3f s over %d (target <= 0.5 s)\n", n, first / 1e6,
	       bench_percentile(us + 1, (size_t)rounds - 1, 50) / 1e6, rounds - 1);
	printf("bench: list_full_first %.1f us\nbench: list_full_p50 %.1f us\n", first,
	       bench_percentile(us + 1, (size_t)rounds - 1, 50));
	bk_client_close(c);
	free(us);
	return 0;
}

/* --- a peer's spawn ------------------------------------------------------------------------- */

extern char **environ;

static int run_spawn(const char *name, int iterations, int warmup, char **argv)
{
	double *us = calloc((size_t)iterations, sizeof(*us));

	if (!us)
		return 1;
	for (int i = -warmup; i < iterations; i++) {
		struct timespec t0;
		pid_t pid;
		int status, r;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		r = posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ);
		if (r != 0) {
			fprintf(stderr, "spawn %s: %s\n", argv[0], strerror(r));
			free(us);
			return 1;
		}
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "spawn %s: it failed (status 0x%x)\n", argv[0], status);
			free(us);
			return 1;
		}
		if (i >= 0)
			us[i] = (double)bk_elapsed_us(&t0);
	}
	summarize(name, us, (size_t)iterations, NULL, NULL);
	free(us);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 7 && strcmp(argv[1], "spawn") == 0 && strcmp(argv[5], "--") == 0)
		return run_spawn(argv[2], atoi(argv[3]), atoi(argv[4]), argv + 6);
	if (argc == 6 && strcmp(argv[1], "floor") == 0) {
		double p50;
		return run_floor(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]), &p50);
	}
	if (argc == 7 && strcmp(argv[1], "rpc") == 0) {
		url = argv[2];
		key_file = argv[3];
		return run_rpc(atoi(argv[4]), atoi(argv[5]), atof(argv[6]));
	}
	if ((argc == 6 || argc == 7) && strcmp(argv[1], "load") == 0) {
		url = argv[2];
		key_file = argv[3];
		return run_load(atoi(argv[4]), 0, atoi(argv[5]), argc == 7 ? atof(argv[6]) : 0);
	}
	if (argc == 8 && strcmp(argv[1], "mixed") == 0) {
		url = argv[2];
		key_file = argv[3];
		list_path = argv[7];
		return run_load(atoi(argv[4]), atoi(argv[5]), atoi(argv[6]), 0);
	}
	if (argc == 6 && strcmp(argv[1], "list") == 0) {
		url = argv[2];
		key_file = argv[3];
		return run_list(argv[4], atoi(argv[5]));
	}
	fprintf(stderr, "usage: exec_bench floor WORKSPACE INIT N WARMUP\n"
			"       exec_bench rpc URL KEYFILE N WARMUP FLOOR_P50_US\n"
			"       exec_bench load URL KEYFILE CLIENTS SECONDS [EXEC_RTT_P50_US]\n"
			"       exec_bench mixed URL KEYFILE EXEC_CLIENTS LIST_CLIENTS SECONDS PATH\n"
			"       exec_bench list URL KEYFILE PATH ROUNDS\n"
			"       exec_bench spawn NAME N WARMUP -- COMMAND [ARG...]\n");
	return 2;
}
