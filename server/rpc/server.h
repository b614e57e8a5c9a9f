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
typedef struct bk_method {
	const char *name;
	bool auth;          /* false: may be called without a key (Health, for probes) */
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
	const bk_key *key;        /* set once the MAC verified: the answer is MAC'd with it */
	struct timespec started;
	size_t bytes_in;
	void (*done)(bk_call *call, nng_msg *answer); /* the transport's completion; NULL answer = drop */
	bool (*park)(bk_call *call); /* the transport's bk_call_park(); NULL: it cannot */
	void *transport;
};

struct bk_server {
	bk_config cfg;
	bk_keystore *keystore;
	bk_replay *replay;
	struct bk_replay_log *replay_log; /* NULL without a state directory (in-process tests) */
	bk_method *methods;  /* indexed like the service descriptor's methods */
	size_t nmethods;
	int64_t started_ms; /* CLOCK_MONOTONIC, for Health's uptime */
	const char *mode;    /* "local", "pod", or "none" when no sandbox is configured */
	char mode_buf[16];
	atomic_bool sandbox_ready;
	char profile[160];   /* the executor's isolation profile id */
	nng_tls_config *tls; /* tls+tcp:// listeners' certificate and key; NULL: none */
	struct bk_link *executor; /* NULL in wire-only tests: rpcs that need it answer UNAVAILABLE */
	struct bk_link *files_link; /* to the file worker (its channel from the executor's FilesReady) */
	struct bk_execs *execs;
	struct bk_processes *processes;
	struct bk_files *files;
	struct bk_sync *sync;    /* server/sync/sync.h */
	atomic_bool stopping;    /* shutting down: new calls are refused */
	atomic_bool executor_lost; /* the executor died while serving: boxkited stops, failing */
	void *front;         /* struct front * (nng side) */
	struct bk_http *http; /* the HTTP listener (server/transport/http.c); NULL: none */
	struct bk_proxy *proxy; /* the preview listener (server/transport/proxy.c); NULL: none */
	bk_metrics metrics;
	/* Reset (server/session/reset.c): its state (enum bk_reset_state; not NONE: calls but Health are
	 * refused), the calls past that gate not yet ended (what a reset waits for), its own. */
	atomic_int reset_state;
	atomic_long calls_open;
	struct bk_reset *reset;
};

/* The executor's events (sandbox state, exec exits, a file worker's channel), routed to their
 * modules; the file worker's channel closing. */
void bk_server_executor_event(void *srv, Boxkite__Executor__Reply *event, int *fds, size_t nfds);
void bk_server_files_event(void *srv, Boxkite__Executor__Reply *event, int *fds, size_t nfds);

void bk_server_set_sandbox_state(bk_server *srv, const Boxkite__Executor__Pong *pong);

/* Set up everything but the transport: keys, replay cache (and its log in cfg->state_dir, when
 * set), method table. */
int bk_server_init(bk_server *srv, const bk_config *cfg, bk_error **err);
void bk_server_fini(bk_server *srv);

/* Run one received message through the pipeline: envelope, auth, replay, decode, handler.
 * The call ends through call->done exactly once, possibly on another thread. */
void bk_server_dispatch(bk_server *srv, bk_call *call, nng_msg *msg);

/* The handler will end the call later, after a wait of its own (a long-poll): the transport
 * serves other requests meanwhile, so that waiting calls never hold the admission limit
 * (--contexts). false when it cannot (BK_PARKED_MAX calls wait already): answer now instead. */
#define BK_PARKED_MAX 1024
bool bk_call_park(bk_call *call);

/* End a call with a response message (status OK). */
void bk_call_reply(bk_call *call, const ProtobufCMessage *response);

/* An answer that carries data (a file chunk), built in two steps so that the data is written
 * straight into the message: bk_call_answer() lays out response and room for data_len bytes
 * and returns where they go (NULL when out of memory: end the call otherwise); the handler
 * writes them there, then bk_call_reply_data() signs the answer with the data's digest (which
 * the handler computed, and may have used for itself) and ends the call, or
 * bk_call_answer_drop() frees it and the handler ends the call another way. Such answers are
 * not kept for re-sends (docs/PROTOCOL.md, "Replay and resend"). */
typedef struct bk_answer bk_answer;
bk_answer *bk_call_answer(bk_call *call, const ProtobufCMessage *response, size_t data_len, uint8_t **data);
void bk_call_reply_data(bk_call *call, bk_answer *answer, const bk_digest *data);
void bk_call_answer_drop(bk_answer *answer);
/* End a call with an error status and message; takes ownership of err. */
void bk_call_fail(bk_call *call, bk_error *err);
/* End a call with a status, a detail and a formatted message. */
void bk_call_failf(bk_call *call, int status, int detail, const char *fmt, ...) BK_PRINTF(4, 5);

const bk_method *bk_server_method(const bk_server *srv, const char *name);

/* Make the missing directories of ipc:// listeners, mode 0755 (first thing: a directory that
 * cannot be made fails the start before the sandbox is made). */
int bk_front_make_dirs(const bk_config *cfg, bk_error **err);
/* Make the socket and its listeners (boxkited does this before giving up root: an ipc://
 * socket's directory may be root's), then start serving; stop closes everything and waits for
 * calls in flight. */
int bk_front_listen(bk_server *srv, bk_error **err);
void bk_front_serve(bk_server *srv);
void bk_front_stop(bk_server *srv);

#endif
