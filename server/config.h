/* boxkited's configuration: defaults, an optional config file of `name = value` lines (the
 * long flag names), then command-line flags, which win. */
#ifndef BK_CONFIG_H
#define BK_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "egresspolicy.h"
#include "error.h"
#include "sbpath.h"

#define BK_LISTEN_MAX 8
#define BK_SYNC_STORES_MAX 8
#define BK_EGRESS_CREDENTIALS_MAX 64

/* --egress-credential HOST:PORT=FILE */
typedef struct bk_egress_credential {
	char *destination;
	char *path;
	bk_egress_host host;     /* the destination, parsed */
	uint16_t port;
} bk_egress_credential;

typedef struct bk_config {
	char *listen[BK_LISTEN_MAX];
	size_t nlisten;
	char *key_file;           /* NULL: no key, every rpc but Health refused */
	char *key_env;            /* or the keys from this environment variable (Kubernetes) */
	/* The keys are a warm pool's claim key (--claim-key-file/--claim-key-env, put in key_file or
	 * key_env once parsed): Health and a Reset that installs the tenant's key only, until such a
	 * Reset (server/session/reset.c). */
	bool claim;
	char *claim_key_file, *claim_key_env; /* as given; NULL once moved to key_file/key_env */
	char *http_listen;        /* the HTTP listener (probes, metrics); NULL: none */
	char *preview_listen;     /* the preview relay (server/transport/proxy.c); NULL: none */
	int64_t preview_ttl_max_ms; /* the longest a preview token may still be good for */
	char *tls_cert, *tls_key; /* PEM files for tls+tcp:// listeners */
	unsigned contexts;        /* nng contexts: requests served at once (the admission limit) */
	size_t max_message;       /* NNG_OPT_RECVMAXSZ; at most (and by default) BK_REQUEST_MAX */
	size_t decode_cap;        /* per-request decoder allocator cap; 0: 2 x max_message */
	unsigned max_connections; /* connections at once (each may hold a max_message unauthenticated) */
	int64_t window_ms;        /* accepted clock skew, each way */
	size_t replay_capacity;   /* live nonces remembered */
	size_t replay_answer_cap; /* bytes of answers kept for re-sent requests */

	char *state_dir;          /* boxkited's private state (0700): the replay log, local-mode dirs */

	/* The sandbox (sidecar/exec/sandbox.h) */
	bool pod;                 /* find the pod's sandbox container instead of making one */
	char *workspace;          /* local mode: host directory shown as /workspace */
	char *home;               /* local mode: host directory shown as BK_SANDBOX_HOME */
	char *init_path;          /* local mode: boxkite-init binary */
	char *executor_path;      /* the boxkite-executor binary */
	char *init_name;          /* pod mode: name of the sandbox's init process */
	unsigned sandbox_uid;     /* the sandbox user (and group) */
	unsigned front_uid;       /* the front's user (and group) once it listens */
	size_t tmp_size;          /* local mode: size of /tmp */
	size_t shm_size;          /* local mode: size of /dev/shm (an eighth of exec_memory) */

	/* Exec defaults and caps */
	int64_t exec_timeout_ms, exec_timeout_max_ms;
	size_t exec_output, exec_output_max; /* bytes kept per stream */
	size_t exec_output_budget; /* bytes of output buffered for all execs at once */
	size_t exec_memory;       /* memory cgroup limit per exec */
	unsigned exec_pids;       /* pids cgroup limit per exec */
	size_t sandbox_memory;    /* every exec together (their parent cgroup); 0: 4 x exec_memory */
	unsigned sandbox_pids;    /* every exec together; 0: 4 x exec_pids */
	unsigned exec_nofile, exec_nproc;
	size_t exec_fsize;

	/* Background processes */
	unsigned processes_max;   /* records kept, running or ended */
	size_t process_ring, process_ring_max; /* bytes kept per stream: default, most */
	size_t process_ring_budget; /* ring bytes of all processes together */
	int64_t process_runtime_max_ms; /* 0: none */

	/* Files */
	bk_roots roots;           /* where file operations and cwd may point */
	size_t file_max;          /* largest file an upload may write */
	unsigned uploads_max;     /* uploads open at once */
	int64_t upload_idle_ms;   /* an upload untouched this long is dropped */
	size_t workspace_quota;   /* bytes uploads may fill /workspace to; 0 = no quota */

	/* Sync (server/sync/sync.h) */
	char *sync_store[BK_SYNC_STORES_MAX]; /* stores a sync may use (and prefixes under them); the first is the default */
	size_t nsync_store;
	char *restore_from;       /* pull the latest snapshot under this URL before serving */
	char *sync_on_reset;      /* push a final snapshot here before a reset wipes the workspace */
	char *s3_endpoint;        /* s3:// stores: scheme://host[:port]; NULL: AWS's for the region */
	char *s3_region;
	bool s3_path_style;       /* endpoint/bucket/key rather than bucket.endpoint/key */
	char *s3_credentials;     /* a file "ACCESS_KEY_ID SECRET [TOKEN]"; NULL: the AWS_* environment */

	/* Egress (docs/PROTOCOL.md, "Egress"): none without a ceiling */
	char *egress_allow[BK_EGRESS_CEILING_MAX]; /* the ceiling, as given */
	size_t negress_allow;
	bk_egress_pattern *egress_ceiling;         /* the same, parsed (negress_allow of them) */
	bk_egress_credential egress_credential[BK_EGRESS_CREDENTIALS_MAX];
	size_t negress_credential;
	char *egress_path;        /* the boxkite-egress binary */
	unsigned egress_uid;      /* the proxy's user and group */
	unsigned egress_connections; /* per exec, at once */
	int64_t egress_idle_ms;
	int64_t egress_connect_ms;
	size_t egress_header_max;
} bk_config;

/* The descriptors the front may hold at once, each kind bounded by a setting: the fixed ones
 * (stdio, channels, epoll and event descriptors, the log and state files, nng's own, the sync's
 * store and the file pool's reads), a connection per --max-connections, each HTTP listener's
 * door, two per preview relay, an exec's pipes and timer per context (Exec holds its context),
 * a process's three streams, an upload's file. boxkited raises its soft RLIMIT_NOFILE to the
 * hard one and refuses to start below this sum: running out is never how a bound is found. */
#define BK_FRONT_FIXED_FDS 96
#define BK_EXEC_FDS 4
#define BK_PROCESS_FDS 3
size_t bk_config_descriptors(const bk_config *cfg);

/* Fill cfg from defaults, the file named by --config and the flags. Returns 0, 1 when --help or
 * --version printed and the program should exit 0, or a negative errno with *err set. */
int bk_config_parse(bk_config *cfg, int argc, char **argv, bk_error **err);
void bk_config_free(bk_config *cfg);

#endif
