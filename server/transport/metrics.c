#include "transport/metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "clock.h"
#include "rpc/server.h"

/* Upper bounds of the exec duration histogram, in seconds: a `true` takes ~2 ms, the default
 * timeout is 30 s, the largest 600 s. */
static const double exec_bounds[BK_METRICS_EXEC_BUCKETS] = { 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
							     0.5,   1,     2.5,  5,     10,   30,  60, 600 };

/* The rejection details that are authentication failures, and their metric label. */
static const struct {
	int detail;
	const char *reason;
} auth_reasons[] = {
	{ BK_DETAIL_UNKNOWN_KEY, "unknown_key" },   { BK_DETAIL_BAD_MAC, "bad_mac" },
	{ BK_DETAIL_STALE, "stale" },               { BK_DETAIL_FUTURE, "future" },
	{ BK_DETAIL_REPLAYED, "replayed" },         { BK_DETAIL_AUTH_NOT_CONFIGURED, "no_key_configured" },
};

int bk_metrics_init(bk_metrics *m, size_t nmethods)
{
	m->nmethods = nmethods;
	m->requests = calloc((nmethods + 1) * BK_METRICS_STATUSES, sizeof(*m->requests));
	atomic_store(&m->executor_answered_ms, -1);
	return m->requests ? 0 : -ENOMEM;
}

void bk_metrics_fini(bk_metrics *m)
{
	const bk_egress_stats *e = atomic_exchange(&m->egress, NULL);

	free(m->requests);
	m->requests = NULL;
	if (e)
		munmap((void *)e, BK_EGRESS_STATS_SIZE);
}

int bk_metrics_egress_map(bk_metrics *m, int fd)
{
	struct stat st;
	void *page;

	/* A page that cannot shrink under the mapping: what the proxy writes is only ever numbers
	 * here, and it cannot make reading them fault. */
	if (atomic_load(&m->egress))
		return -EALREADY;
	if (fstat(fd, &st) < 0 || st.st_size != BK_EGRESS_STATS_SIZE ||
	    (fcntl(fd, F_GET_SEALS) & (F_SEAL_SHRINK | F_SEAL_SEAL)) != (F_SEAL_SHRINK | F_SEAL_SEAL))
		return -EINVAL;
	page = mmap(NULL, BK_EGRESS_STATS_SIZE, PROT_READ, MAP_SHARED, fd, 0);
	if (page == MAP_FAILED)
		return -errno;
	atomic_store(&m->egress, page);
	return 0;
}

void bk_metrics_call(bk_metrics *m, size_t method_row, bool has_method, int status, int detail, size_t in,
		     size_t out)
{
	size_t row = has_method && method_row < m->nmethods ? method_row : m->nmethods;

	if (!m->requests)
		return;
	if (status < 0 || status >= BK_METRICS_STATUSES)
		status = BK_UNKNOWN;
	atomic_fetch_add_explicit(&m->requests[row * BK_METRICS_STATUSES + (size_t)status], 1, memory_order_relaxed);
	if (detail > 0 && detail < BK_METRICS_DETAILS)
		atomic_fetch_add_explicit(&m->refused[detail], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&m->bytes_in, in, memory_order_relaxed);
	atomic_fetch_add_explicit(&m->bytes_out, out, memory_order_relaxed);
}

void bk_metrics_exec_started(bk_metrics *m)
{
	atomic_fetch_add_explicit(&m->execs_running, 1, memory_order_relaxed);
}

void bk_metrics_exec_finished(bk_metrics *m, uint64_t duration_us, bool timed_out, bool oom_killed, bool started)
{
	size_t b = 0;

	while (b < BK_METRICS_EXEC_BUCKETS && (double)duration_us > exec_bounds[b] * 1e6)
		b++;
	atomic_fetch_add_explicit(&m->exec_buckets[b], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&m->exec_count, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&m->exec_sum_us, duration_us, memory_order_relaxed);
	if (timed_out)
		atomic_fetch_add_explicit(&m->exec_timeouts, 1, memory_order_relaxed);
	if (oom_killed)
		atomic_fetch_add_explicit(&m->exec_oom_kills, 1, memory_order_relaxed);
	if (started)
		atomic_fetch_sub_explicit(&m->execs_running, 1, memory_order_relaxed);
}

static unsigned long get(const atomic_ulong *v)
{
	return atomic_load_explicit(v, memory_order_relaxed);
}

static void family(FILE *out, const char *name, const char *type, const char *help)
{
	fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The egress proxy's counters, as its page holds them now. */
static void egress_write(const bk_egress_stats *e, FILE *out)
{
#define EGRESS(field) ((unsigned long)__atomic_load_n(&e->field, __ATOMIC_RELAXED))
	if (!e)
		return;
	family(out, "boxkite_egress_connections_total", "counter",
	       "Egress proxy decisions: connections relayed (allowed), refused, or granted but not reachable (failed).");
	fprintf(out, "boxkite_egress_connections_total{verdict=\"allowed\"} %lu\n", EGRESS(allowed));
	fprintf(out, "boxkite_egress_connections_total{verdict=\"refused\"} %lu\n", EGRESS(refused));
	fprintf(out, "boxkite_egress_connections_total{verdict=\"failed\"} %lu\n", EGRESS(failed));
	family(out, "boxkite_egress_bytes_total", "counter", "Bytes relayed by the egress proxy, by direction.");
	fprintf(out, "boxkite_egress_bytes_total{direction=\"up\"} %lu\n", EGRESS(bytes_up));
	fprintf(out, "boxkite_egress_bytes_total{direction=\"down\"} %lu\n", EGRESS(bytes_down));
	family(out, "boxkite_egress_brokered_total", "counter", "Requests given the operator's credential headers.");
	fprintf(out, "boxkite_egress_brokered_total %lu\n", EGRESS(brokered));
	family(out, "boxkite_egress_connections_open", "gauge", "Egress connections open now.");
	fprintf(out, "boxkite_egress_connections_open %lu\n", EGRESS(open));
#undef EGRESS
}

void bk_metrics_write(const bk_server *srv, FILE *out)
{
	const bk_metrics *m = &srv->metrics;
	unsigned long cumulative = 0;

	family(out, "boxkite_requests_total", "counter",
	       "Requests answered (or dropped as duplicates), by rpc and status; method \"-\": none or unknown.");
	for (size_t r = 0; r <= m->nmethods; r++)
		for (int s = 0; s < BK_METRICS_STATUSES; s++) {
			unsigned long n = get(&m->requests[r * BK_METRICS_STATUSES + (size_t)s]);
			if (n)
				fprintf(out, "boxkite_requests_total{method=\"%s\",status=\"%s\"} %lu\n",
					r < m->nmethods ? srv->methods[r].name : "-", bk_status_name(s), n);
		}
	family(out, "boxkite_auth_failures_total", "counter", "Requests refused by authentication, by reason.");
	for (size_t i = 0; i < BK_ARRAY_SIZE(auth_reasons); i++)
		fprintf(out, "boxkite_auth_failures_total{reason=\"%s\"} %lu\n", auth_reasons[i].reason,
			get(&m->refused[auth_reasons[i].detail]));
	family(out, "boxkite_exec_duration_seconds", "histogram", "Wall time of each exec that ran, to its end.");
	for (size_t b = 0; b <= BK_METRICS_EXEC_BUCKETS; b++) {
		cumulative += get(&m->exec_buckets[b]);
		if (b < BK_METRICS_EXEC_BUCKETS)
			fprintf(out, "boxkite_exec_duration_seconds_bucket{le=\"%g\"} %lu\n", exec_bounds[b], cumulative);
		else
			fprintf(out, "boxkite_exec_duration_seconds_bucket{le=\"+Inf\"} %lu\n", cumulative);
	}
	fprintf(out, "boxkite_exec_duration_seconds_sum %.6f\nboxkite_exec_duration_seconds_count %lu\n",
		(double)get(&m->exec_sum_us) / 1e6, get(&m->exec_count));
	family(out, "boxkite_exec_timeouts_total", "counter", "Execs killed at their timeout.");
	fprintf(out, "boxkite_exec_timeouts_total %lu\n", get(&m->exec_timeouts));
	family(out, "boxkite_exec_oom_kills_total", "counter", "Execs the memory cgroup OOM-killed.");
	fprintf(out, "boxkite_exec_oom_kills_total %lu\n", get(&m->exec_oom_kills));
	family(out, "boxkite_execs_running", "gauge", "Sandboxed commands running now.");
	fprintf(out, "boxkite_execs_running %ld\n", atomic_load_explicit(&m->execs_running, memory_order_relaxed));
	family(out, "boxkite_calls_waiting", "gauge", "Calls waiting for their answer without a context (long-polls).");
	fprintf(out, "boxkite_calls_waiting %ld\n", atomic_load_explicit(&m->calls_waiting, memory_order_relaxed));
	family(out, "boxkite_received_bytes_total", "counter", "Bytes of requests received (envelopes).");
	fprintf(out, "boxkite_received_bytes_total %lu\n", get(&m->bytes_in));
	family(out, "boxkite_sent_bytes_total", "counter", "Bytes of answers sent (envelopes).");
	fprintf(out, "boxkite_sent_bytes_total %lu\n", get(&m->bytes_out));
	family(out, "boxkite_replay_cache_entries", "gauge", "Live nonces in the replay cache.");
	fprintf(out, "boxkite_replay_cache_entries %zu\n", bk_replay_count(srv->replay));
	family(out, "boxkite_sandbox_ready", "gauge", "1 when the sandbox is found and the executor answers.");
	fprintf(out, "boxkite_sandbox_ready %d\n", atomic_load(&srv->sandbox_ready) ? 1 : 0);
	egress_write(atomic_load(&m->egress), out);
}
