/* The egress proxy's counters (docs/PROTOCOL.md, "Metrics"): a page of shared memory the executor
 * makes (a memfd sealed against shrinking and growing), the proxy writes and the front maps read
 * only for /metrics. Each field is a relaxed atomic; the proxy is less trusted than the front, so
 * what the front reads here is only ever printed as a number. */
#ifndef BK_EGRESSSTATS_H
#define BK_EGRESSSTATS_H

#include <stdint.h>

typedef struct bk_egress_stats {
	uint64_t allowed;       /* connections relayed */
	uint64_t refused;       /* requests refused (not granted, never dialled, malformed, bounds) */
	uint64_t failed;        /* granted, but the destination could not be resolved or reached */
	uint64_t bytes_up;      /* from commands to destinations */
	uint64_t bytes_down;    /* from destinations to commands */
	uint64_t open;          /* connections open now */
	uint64_t brokered;      /* requests that got the operator's credential headers */
} bk_egress_stats;

/* The shared page's size: one page, whatever the struct grows to. */
#define BK_EGRESS_STATS_SIZE 4096
_Static_assert(sizeof(bk_egress_stats) <= BK_EGRESS_STATS_SIZE, "egress counters fit their page");

#endif
