/* The egress proxy, boxkite-egress (docs/ARCHITECTURE.md, "Egress"): its state and the two kinds
 * of thread that share it.
 *
 * The main thread serves the executor's orders on the channel and accepts on every exec's
 * listener (one epoll set). Each accepted connection gets a thread of its own (conn.c), which
 * reads one request, decides, dials and relays, with blocking name resolution and non-blocking
 * sockets under poll(2) — so one slow resolver, handshake or peer holds only its own thread.
 * What they share is behind one lock: the execs, their connections' descriptors (which the main
 * thread shuts down when an exec ends, so that every thread of it wakes and ends), the counts the
 * bounds are checked on, and the sidecar's own addresses. */
#ifndef BK_EGRESS_EGRESS_H
#define BK_EGRESS_EGRESS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker.h"
#include "egresspolicy.h"
#include "egressstats.h"
#include "mitm.h"

/* Connections of all execs together, at once: what the proxy's descriptors and threads allow. */
#define BK_EGRESS_CONNS_TOTAL 1024
/* The sidecar's own addresses are looked at again this often. */
#define BK_EGRESS_OWN_REFRESH_MS 5000
#define BK_EGRESS_OWN_MAX 64

typedef struct bk_egress_limits {
	unsigned max_connections; /* per exec, at once */
	unsigned idle_ms;         /* no byte either way for this long: the connection ends */
	unsigned connect_ms;      /* to read the head, resolve and dial, shake hands */
	size_t header_max;        /* bytes of a request head */
} bk_egress_limits;

typedef struct bk_egress_conn bk_egress_conn;

/* One exec's grant, from Open to Close. */
typedef struct bk_egress_exec {
	struct bk_egress_exec *next;
	uint64_t id;
	char key_id[65];
	bk_egress_pattern *grant;
	size_t n_grant;
	int listener;
	bool closed;            /* Close came: no new connection, the open ones shut down */
	unsigned conns;         /* open now */
	unsigned refs;          /* conns, and 1 until Close */
	bk_egress_conn *conn_list;
} bk_egress_exec;

typedef struct bk_egress {
	bk_egress_pattern *ceiling;
	size_t n_ceiling;
	bk_egress_limits limits;
	bk_broker broker;
	bk_mitm *mitm;              /* NULL without credentials */
	bk_egress_stats *stats;     /* the shared page */
	pthread_attr_t thread_attr; /* detached, a small stack */
	pthread_mutex_t lock;       /* everything below */
	bk_egress_exec *execs;
	unsigned conns_total;
	uint8_t own[BK_EGRESS_OWN_MAX][16];
	size_t n_own;
} bk_egress;

/* One connection, from accept to its last byte; its thread owns the descriptors and closes
 * them, under the lock, which is the only way the main thread touches them (shutdown). */
struct bk_egress_conn {
	bk_egress_conn *next, *prev; /* the exec's list */
	bk_egress *eg;
	bk_egress_exec *ex;
	int client, upstream;
};

/* Counters: relaxed atomics on the shared page. */
#define BK_EGRESS_COUNT(eg, field, n) __atomic_fetch_add(&(eg)->stats->field, (uint64_t)(n), __ATOMIC_RELAXED)

/* The proxy's life on its channel to the executor (egress.c): set-up, then the main loop until
 * the executor goes away. The process's exit status. */
int bk_egress_main(int sock);

/* The connection thread (conn.c): serve conn, then bk_egress_conn_end() it. */
void *bk_egress_conn_main(void *conn);

/* --- state.c: what the main thread and the connection threads share ---------------------- */

/* Look at the sidecar's own addresses (again). */
void bk_egress_own_refresh(bk_egress *eg);

/* Free an exec that nothing holds any more, or that was never published. */
void bk_egress_exec_free(bk_egress_exec *ex);

/* Drop a reference to ex, under the lock: freed with the last. */
void bk_egress_exec_unref(bk_egress_exec *ex);

/* A connection for fd within the bounds (per exec, in all), counted and listed under ex; NULL
 * with *why when it is past one (fd stays the caller's). */
bk_egress_conn *bk_egress_conn_admit(bk_egress *eg, bk_egress_exec *ex, int fd, const char **why);

/* Give back an admitted connection that was never served (its fd stays the caller's). */
void bk_egress_conn_forget(bk_egress_conn *c);

/* The end of a connection's thread: its descriptors closed, its counts given back, its exec freed
 * when this was the last thing holding it. */
void bk_egress_conn_end(bk_egress_conn *c);

/* Close a descriptor of conn's (*fd, set to -1) under the lock. */
void bk_egress_conn_close_fd(bk_egress_conn *c, int *fd);

/* Publish a descriptor conn made (its upstream) under the lock, so that an exec's end shuts it
 * down too. false when the exec has ended meanwhile (fd is then the caller's to close). */
bool bk_egress_conn_set_upstream(bk_egress_conn *c, int fd);

/* Whether addr may be dialled on port: NULL, or the class that keeps it from being dialled
 * (the sidecar's own addresses as last looked at). */
const char *bk_egress_refusal(bk_egress *eg, const uint8_t addr[16], uint16_t port);

#endif
