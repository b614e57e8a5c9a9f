/* The front: the unprivileged, multi-threaded half of boxkited. It listens, authenticates,
 * decodes, dispatches to handlers and answers. It holds no capabilities once started; anything
 * privileged is an order to the executor (sidecar/). */
#ifndef BK_SERVER_H
#define BK_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <nng/nng.h>

#include "auth/keystore.h"
#include "auth/replay.h"
#include "boxkite/executor/order.pb-c.h"
#include "clock.h"
#include "config.h"
#include "envelope.h"
#include "tls.h"
#include "transport/metrics.h"

typedef struct bk_server bk_server;
typedef struct bk_call bk_call;

/* A handler gets a decoded, authenticated request and must end the call exactly once, with
 * bk_call_reply() or bk_call_fail(), now or later and from any thread. */
typedef void (*bk_handler_fn)(bk_call *call, const ProtobufCMessage *request);

/* One row per rpc (server/rpc/methods.c): what it needs and who serves it. The request and response
 * types come from the generated service descriptor, not from this table. */
/* What a method may do that others may not, one flag each (as OpenSSH's mon_table permits):
 * the pipeline reads the row, it never compares handlers. */
enum {
	BK_METHOD_UNKEYED = 1 << 0,      /* may be called without a key (Health, for probes) */
	BK_METHOD_DURING_RESET = 1 << 1, /* served while the gate is shut (a Reset runs or failed) */
	BK_METHOD_CLAIM = 1 << 2,        /* served to a warm pool's claim key (Health; Reset, which
					  * must then install the tenant's key) */
};

typedef struct bk_method {
	const char *name;
	unsigned flags;     /* BK_METHOD_* */
	bk_handler_fn handler; /* NULL: answers UNIMPLEMENTED */
	size_t max_body;    /* largest request body accepted */
	size_t max_data;    /* largest request data field accepted; 0: the method takes none */
	const ProtobufCMethodDescriptor *desc;
	atomic_ulong calls; /* times the handler ran */
} bk_method;

struct bk_call {
	bk_server *srv;
	const bk_method *method;
	bk_arena *arena;          /* owns the decoded envelope and request */
	const bk_envelope *env;   /* the request envelope; NULL if it did not decode canonically */
	nng_msg *msg;             /* the message received, kept while data points into it */
	const uint8_t *data;      /* the request's data field, in msg (data_len 0: none) */
	size_t data_len;
	bk_digest data_digest;    /* its SHA-256, computed once for the MAC: the chunk's hash */
	bool open;                /* counted in bk_server.calls_open (it reached its handler's gate) */
	bk_keyring_ref *keys;     /* held while the call lives when keyed */
	const bk_key *key;        /* set once the MAC verified: the key that signed the request */
	/* The key the answer is MAC'd with when not key's: one a Reset installed (server/session/reset.c),
	 * and the keyring holding it. */
	bk_keyring_ref *answer_keys;
	const bk_key *answer_key;
	bool private_channel;     /* it came over ipc:// or tls+tcp://: its body crossed no network in clear */
	struct timespec started;
	size_t bytes_in;
	void (*done)(bk_call *call, nng_msg *answer); /* the transport's completion; NULL answer = drop */
	bool (*park)(bk_call *call); /* the transport's bk_call_park(); NULL: it cannot */
	/* Told when a fresh request whose MAC verified reaches its handler: its connection is a
	 * client's with a key (the transport keeps such connections at its cap). NULL: not told. */
	void (*keyed)(bk_call *call);
	/* Told once the transport is done with the call's answer (bk_call_on_sent): it took it for the
	 * connection, or dropped it. NULL: nobody asked. */
	void (*sent)(void *arg);
	void *sent_arg;
	void *transport;
};

struct bk_server {
	bk_config cfg;
	bk_keystore *keystore;
	bk_replay *replay;
	struct bk_replay_log *replay_log; /* NULL without a state directory (in-process tests) */
	bk_method *methods;  /* indexed like the service descriptor's methods */
	size_t nmethods;
	/* CLOCK_MONOTONIC: when boxkited started, or the last Reset ended (Health's uptime: how long
	 * this tenant has had the sandbox, not how long the pod served others before it). */
	_Atomic int64_t served_since_ms;
	const char *mode;    /* "local", "pod", or "none" when no sandbox is configured */
	char mode_buf[16];
	atomic_bool sandbox_ready;
	char profile[160];   /* the executor's isolation profile id */
	nng_tls_config *tls; /* tls+tcp:// listeners' certificate and key; NULL: none */
	struct bk_link *executor; /* NULL in wire-only tests: rpcs that need it answer UNAVAILABLE */
	struct bk_link *files_link; /* to the file worker (its channel from the executor's FilesReady) */
	struct bk_runs *runs;    /* the run engine (server/runs/runs.h) */
	struct bk_execs *execs;
	struct bk_processes *processes;
	struct bk_files *files;
	struct bk_watches *watches; /* server/files/watch.h */
	struct bk_sync *sync;    /* server/sync/sync.h */
	atomic_bool stopping;    /* shutting down: new calls are refused */
	atomic_bool executor_lost; /* the executor died while serving: boxkited stops, failing */
	void *front;         /* struct front * (nng side) */
	struct bk_http *http; /* the HTTP listener (server/transport/http.c); NULL: none */
	struct bk_proxy *proxy; /* the preview listener (server/transport/proxy.c); NULL: none */
	bk_metrics metrics;
	/* The gate (enum bk_gate): every call of a method without BK_METHOD_DURING_RESET passes it
	 * before its handler. A Reset (server/session/reset.c) shuts it while it runs and for good
	 * when it fails; calls_open counts the calls past it not yet ended (what a reset waits for). */
	atomic_int gate;
	char failure[1024];  /* why the gate is shut for good; written before gate is set FAILED */
	atomic_long calls_open;
	struct bk_reset *reset;
};

enum bk_gate {
	BK_GATE_OPEN,     /* serving */
	BK_GATE_RESET,    /* a reset runs: calls are refused UNAVAILABLE */
	BK_GATE_FAILED,   /* a reset failed: refused FAILED_PRECONDITION until boxkited restarts */
};

/* Shut the gate for good: the sandbox may hold what it must not serve to anyone (why says what). */
void bk_server_fail(bk_server *srv, const char *why);
/* Why the gate is shut for good; NULL while it is not. */
const char *bk_server_failure(const bk_server *srv);

/* The executor's events (sandbox state, exec exits, a file worker's channel), routed to their
 * modules; the file worker's channel closing. */
void bk_server_executor_event(void *srv, Boxkite__Executor__Reply *event, int *fds, size_t nfds);
void bk_server_files_event(void *srv, Boxkite__Executor__Reply *event, int *fds, size_t nfds);

void bk_server_set_sandbox_state(bk_server *srv, const Boxkite__Executor__Pong *pong);

/* Set up the state every room shares: keys, replay cache (and its log in cfg->state_dir, when
 * set), TLS configuration, metrics. The composition root (main.c) then fills the method table
 * (rpc/methods.h) and starts each room. bk_server_fini() undoes a partial init too. */
int bk_server_init(bk_server *srv, const bk_config *cfg, bk_error **err);
void bk_server_fini(bk_server *srv);

/* Run one received message through the pipeline: envelope, auth, replay, decode, handler.
 * The call ends through call->done exactly once, possibly on another thread. */
void bk_server_dispatch(bk_server *srv, bk_call *call, nng_msg *msg);

const bk_method *bk_server_method(const bk_server *srv, const char *name);

/* Make the missing directories of ipc:// listeners, mode 0755 (first thing: a directory that
 * cannot be made fails the start before the sandbox is made). */
int bk_front_make_dirs(const bk_config *cfg, bk_error **err);
/* Make the socket and its listeners (boxkited does this before giving up root: an ipc://
 * socket's directory may be root's), then start serving; stop closes everything and waits for
 * calls in flight. */
int bk_front_listen(bk_server *srv, bk_error **err);
void bk_front_serve(bk_server *srv);
/* Close the socket (within BK_FRONT_CLOSE_MS: common/nngclose.h says why it may not return) and
 * free the contexts once no call holds one. false when the close did not return: nothing was
 * freed, and nng must not be finished (nng_fini would hang too) — the process should just exit. */
#define BK_FRONT_CLOSE_MS 2000
/* At the cap on connections (nng.c, pipe_event): connections closed to make room for new ones,
 * until nng has freed them (their messages count, so they are few); and how long a connection
 * must have been idle to make room for a new one from its own source. */
#define BK_FRONT_CLOSING_MAX 4
#define BK_FRONT_SAME_SOURCE_IDLE_MS 1000
/* The longest boxkited takes to stop once it decided to (main.c): then it exits regardless. */
#define BK_STOP_MAX_S 10
bool bk_front_stop(bk_server *srv);

#endif
