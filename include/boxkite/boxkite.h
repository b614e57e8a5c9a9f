/* libboxkite — the typed C client for boxkited.
 *
 *   bk_client *c;
 *   bk_status st;
 *   bk_client_options o = { .key_file = "/etc/boxkite/key" };
 *   if (bk_client_open(&c, "tcp://10.0.0.5:7700", &o, &st) != BK_OK)
 *           errx(1, "%s", st.message);
 *
 * Every call returns a gRPC canonical status code (BK_OK = 0, <boxkite/status.h>) and, when
 * `st` is not NULL, fills it with the code, the envelope rejection detail and a message.
 * A command that runs and fails is not an error: its exit code is data in the result.
 *
 * Thread safety: a bk_client may be used by any number of threads at once; each call runs on
 * its own nng context. bk_client_close() must not race with calls in progress.
 *
 * Link with `pkg-config --libs boxkite`. The wire protocol is docs/PROTOCOL.md. */
#ifndef BOXKITE_H
#define BOXKITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <boxkite/status.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BK_DEFAULT_URL "ipc:///run/boxkite/boxkited.sock"

typedef struct bk_client bk_client;

typedef struct bk_status {
	int code;          /* enum bk_code */
	int detail;        /* enum bk_detail: why the server refused the envelope, if it did */
	bool verified;     /* the answer carried a valid MAC from the server */
	char message[512];
} bk_status;

/* Where the client's key comes from: a key file (the first key, or the one named key_id), or
 * raw key bytes with their id. With neither, only Health can be called. */
typedef struct bk_client_options {
	const char *key_file;
	const char *key_id;
	const uint8_t *key;  /* raw secret, 32..64 bytes, used when key_file is NULL */
	size_t key_len;
	int timeout_ms;      /* default timeout of a call; 0 = 30000 */
} bk_client_options;

BK_EXPORT int bk_client_open(bk_client **out, const char *url, const bk_client_options *opts, bk_status *st);
BK_EXPORT void bk_client_close(bk_client *client);

/* --- Health ---------------------------------------------------------------------------------- */

typedef struct bk_health_info {
	char version[32];
	char mode[16];        /* "local", "pod", or "none" */
	bool sandbox_ready;
	bool auth_configured; /* the server has at least one key */
	bool authenticated;   /* this call was keyed and the answer's MAC verified */
	uint64_t uptime_ms;
} bk_health_info;

BK_EXPORT int bk_health(bk_client *client, bk_health_info *out, bk_status *st);

/* --- Exec ------------------------------------------------------------------------------------ */

typedef struct bk_env_var {
	const char *name;
	const char *value;
} bk_env_var;

typedef struct bk_exec_request {
	const char *const *argv; /* NULL-terminated; argv[0] is looked up in the sandbox's PATH */
	const char *shell;       /* or: a string for /bin/sh -c (exactly one of argv and shell) */
	const char *cwd;         /* relative to /workspace, or absolute under /workspace or /tmp */
	const bk_env_var *env;   /* added to the server's safe base; a denied name is an error */
	size_t n_env;
	const void *stdin_data;  /* written to the command's stdin, which is then closed */
	size_t stdin_len;
	uint32_t timeout_ms;     /* 0: the server's default */
	uint64_t stdout_limit;   /* bytes kept per stream; 0: the server's default */
	uint64_t stderr_limit;
} bk_exec_request;

typedef struct bk_exec_result {
	int exit_code;           /* when signal == 0 and !timed_out */
	int signal;              /* the signal that ended it, or 0 */
	bool timed_out;          /* killed (with its whole process tree) at the timeout */
	bool oom_killed;         /* the kernel's OOM killer struck in its memory cgroup */
	uint8_t *stdout_data;    /* malloc'd; bk_exec_result_free() frees */
	size_t stdout_len;
	bool stdout_truncated;
	uint64_t stdout_dropped; /* bytes past the limit, read and discarded */
	uint8_t *stderr_data;
	size_t stderr_len;
	bool stderr_truncated;
	uint64_t stderr_dropped;
	uint64_t duration_us;
	char isolation_profile[160];
} bk_exec_result;

/* Run a command in the sandbox. BK_OK means it ran (whatever its exit code); an isolation step
 * that failed, a bad request or an unreachable server is an error status. The call waits for
 * the command's timeout plus the client's timeout. */
BK_EXPORT int bk_exec(bk_client *client, const bk_exec_request *rq, bk_exec_result *out, bk_status *st);
BK_EXPORT void bk_exec_result_free(bk_exec_result *res);

#ifdef __cplusplus
}
#endif

#endif
