/* boxkited's counters, for the Prometheus text that the HTTP listener serves (server/transport/http.c).
 * Every counter is a relaxed atomic bumped where the thing happens (dispatch.c when a call
 * ends, exec.c when a command starts and finishes); reading them never takes a lock. */
#ifndef BK_METRICS_H
#define BK_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "boxkite/status.h"
#include "egressstats.h"

#define BK_METRICS_STATUSES 17 /* gRPC's canonical codes, 0..16 */
#define BK_METRICS_DETAILS 13  /* enum StatusDetail, 0..12 */
#define BK_METRICS_EXEC_BUCKETS 15

typedef struct bk_server bk_server;

typedef struct bk_metrics {
	size_t nmethods;
	/* [method row][status]; row nmethods counts requests that named no rpc or did not decode */
	atomic_ulong *requests;
	atomic_ulong refused[BK_METRICS_DETAILS]; /* by envelope rejection detail */
	atomic_ulong exec_buckets[BK_METRICS_EXEC_BUCKETS + 1], exec_count, exec_sum_us;
	atomic_ulong exec_timeouts, exec_oom_kills;
	atomic_long execs_running;
	atomic_long calls_waiting; /* parked (rpc/call.h): how near BK_PARKED_MAX */
	atomic_ulong bytes_in, bytes_out;
	atomic_llong executor_answered_ms; /* CLOCK_MONOTONIC of the executor's last answer to a ping */
	/* The egress proxy's counters: its shared page, mapped read-only (NULL: no egress). */
	_Atomic(const bk_egress_stats *) egress;
} bk_metrics;

int bk_metrics_init(bk_metrics *m, size_t nmethods);
/* The egress proxy's counters' memfd (the executor's EgressReady): mapped read-only, once;
 * fd stays the caller's. 0 or -errno. */
int bk_metrics_egress_map(bk_metrics *m, int fd);
void bk_metrics_fini(bk_metrics *m);

/* A call ended: its method row (has_method false: it named no rpc), status, detail, bytes
 * received and sent. */
void bk_metrics_call(bk_metrics *m, size_t method_row, bool has_method, int status, int detail, size_t in,
		     size_t out);
void bk_metrics_exec_started(bk_metrics *m);
/* An exec was answered. started: bk_metrics_exec_started was called for it (an execve that
 * failed is answered as a shell would, 127/126, with no command ever running). */
void bk_metrics_exec_finished(bk_metrics *m, uint64_t duration_us, bool timed_out, bool oom_killed, bool started);

/* The Prometheus text exposition (version 0.0.4) of srv's metrics, into out. */
void bk_metrics_write(const bk_server *srv, FILE *out);

#endif
