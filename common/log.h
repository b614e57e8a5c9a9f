/* boxkited's log: one JSON object per line on stderr, written with a single write(2) so lines
 * from different threads never interleave. */
#ifndef BK_LOG_H
#define BK_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

enum bk_log_level { BK_LOG_ERROR, BK_LOG_WARN, BK_LOG_INFO };

void bk_log(enum bk_log_level level, const char *fmt, ...) BK_PRINTF(2, 3);

typedef struct bk_log_request {
	const char *method;  /* may be untrusted text: escaped and cut */
	const char *key_id;  /* the key that signed the request ("" before its MAC verified) */
	const char *key_installed; /* a key the call installed (a Reset's), or NULL */
	int status, detail;
	uint64_t duration_us;
	size_t bytes_in, bytes_out;
	const char *message; /* status message for a failure, NULL on success */
} bk_log_request;

void bk_log_call(const bk_log_request *r);

/* The egress proxy's audit line: one per decision (docs/PROTOCOL.md, "Egress"). */
typedef struct bk_log_egress {
	const char *verdict;    /* "allowed", "refused" or "failed" (granted, not reachable) */
	uint64_t exec_id;
	const char *key_id;     /* the key that started the exec */
	const char *method;     /* may be untrusted text: escaped and cut; NULL when none was read */
	const char *asked;      /* the destination as the request named it: untrusted, likewise */
	const char *addr;       /* the address dialled, NULL when none */
	const char *reason;     /* why refused or failed; NULL when allowed */
	bool brokered;          /* the operator's credential headers were added */
	uint64_t bytes_up, bytes_down, duration_us;
} bk_log_egress;

void bk_log_egress_decision(const bk_log_egress *e);

#endif
