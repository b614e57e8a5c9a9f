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
	const char *tls_cert; /* tls+tcp:// URLs: the server's certificate (PEM), the only one accepted */
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

/* --- Files ------------------------------------------------------------------------------------
 *
 * Paths are sandbox paths: relative to /workspace, or absolute under one of the server's roots
 * (/workspace and /tmp unless configured otherwise). Every operation runs as the sandbox user:
 * files created are owned by uid 1001 and permission checks are 1001's. A file is written to an
 * unnamed temporary file and renamed into place only when all of it arrived and its SHA-256
 * matches: nobody ever sees half a file, and a failed upload leaves nothing behind. */

enum bk_file_type { BK_FILE_UNKNOWN = 0, BK_FILE_REGULAR = 1, BK_FILE_DIRECTORY = 2, BK_FILE_SYMLINK = 3, BK_FILE_OTHER = 4 };

typedef struct bk_file_info {
	char path[4096];         /* the path asked (stat, commit) or the entry's name (list) */
	int type;                /* enum bk_file_type */
	uint64_t size;
	uint32_t mode;           /* permission bits */
	uint32_t uid, gid;
	int64_t mtime_ns;
	char symlink_target[4096];
} bk_file_info;

BK_EXPORT int bk_file_stat(bk_client *client, const char *path, bk_file_info *out, bk_status *st);

/* One page of a directory, sorted by name. Pass page_token NULL or "" for the first page;
 * next_token (at least 4096 bytes) receives the token of the next page, "" after the last.
 * *entries is malloc'd (free it); page_size 0 = the server's default (at most 1000). */
BK_EXPORT int bk_file_list(bk_client *client, const char *path, uint32_t page_size, const char *page_token,
			   bk_file_info **entries, size_t *n, char *next_token, bk_status *st);

BK_EXPORT int bk_file_mkdir(bk_client *client, const char *path, bool parents, uint32_t mode, bk_status *st);
/* *removed (may be NULL) receives the number of entries removed. */
BK_EXPORT int bk_file_remove(bk_client *client, const char *path, bool recursive, uint64_t *removed,
			     bk_status *st);
BK_EXPORT int bk_file_move(bk_client *client, const char *from, const char *to, bool overwrite, bk_status *st);

/* Upload primitives: begin (or resume with the same upload id), chunks at the confirmed offset,
 * commit. An interrupted upload resumes from the last confirmed offset with its upload id. */
typedef struct bk_upload_begin {
	const char *path;
	uint64_t size;
	const uint8_t *sha256;   /* 32 bytes: of the whole content */
	uint32_t mode;           /* 0 = 0644 */
	bool overwrite;
	bool make_parents;
	const char *upload_id;   /* resume this upload; NULL or "" to start one */
} bk_upload_begin;

typedef struct bk_upload_state {
	char upload_id[64];
	uint64_t confirmed_offset;
	uint32_t max_chunk;      /* the largest chunk the server takes (uncompressed) */
} bk_upload_state;

BK_EXPORT int bk_upload_start(bk_client *client, const bk_upload_begin *rq, bk_upload_state *out, bk_status *st);
/* Send data at offset (= the confirmed offset); compress with zstd when asked (and worth it).
 * *confirmed receives the new confirmed offset. */
BK_EXPORT int bk_upload_chunk(bk_client *client, const char *upload_id, uint64_t offset, const void *data,
			      size_t len, bool compress, uint64_t *confirmed, bk_status *st);
BK_EXPORT int bk_upload_commit(bk_client *client, const char *upload_id, bk_file_info *out, bk_status *st);
BK_EXPORT int bk_upload_abort(bk_client *client, const char *upload_id, bk_status *st);

/* Progress of a transfer: bytes done of total; return false to stop it. */
typedef bool (*bk_progress_fn)(void *arg, uint64_t done, uint64_t total);

typedef struct bk_transfer_options {
	uint32_t mode;           /* upload: 0 = 0644 (or the source's mode with keep_mode) */
	bool overwrite;          /* upload: replace an existing file */
	bool make_parents;       /* upload: create missing directories */
	bool compress;           /* zstd on the wire, chunk by chunk */
	const char *upload_id;   /* upload: resume this one */
	bk_progress_fn progress;
	void *progress_arg;
} bk_transfer_options;

/* Upload the whole of fd (a regular file, read from offset 0 with pread) to path: hashes it,
 * sends it in chunks, commits. On failure after the upload started, *upload_id_out (64 bytes,
 * may be NULL) holds the id to resume with. */
BK_EXPORT int bk_upload_fd(bk_client *client, int fd, const char *path, const bk_transfer_options *opts,
			   bk_file_info *out, char *upload_id_out, bk_status *st);

/* Download path into fd (written from its current offset on), verifying size and SHA-256;
 * *info (may be NULL) receives the file's size, mode and mtime. */
BK_EXPORT int bk_download_fd(bk_client *client, const char *path, int fd, const bk_transfer_options *opts,
			     bk_file_info *info, bk_status *st);

#ifdef __cplusplus
}
#endif

#endif
