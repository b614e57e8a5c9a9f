/* libboxkite — the typed C client for boxkited.
 *
 *   bk_client *c;
 *   bk_status st;
 *   bk_client_options o = { .key_file = "/etc/boxkite/key" };
 *   if (bk_client_open(&c, "tcp://10.0.0.5:7700", &o, &st) != BK_OK)
 *           errx(1, "%s", st.message);
 *
 * Rules that hold for every function below unless its comment says otherwise:
 *
 * - Status. Every call returns a gRPC canonical status code (BK_OK = 0, <boxkite/status.h>)
 *   and, when `st` is not NULL, fills *st with the code, the envelope rejection detail and a
 *   NUL-terminated message. `st` may always be NULL. A command that runs and fails is not an
 *   error: its exit code is data in the result.
 * - Results. A result a call fills (bk_health_info, bk_exec_result, bk_file_info, ...) need not
 *   be zeroed or initialised before the call: the call sets every field. On an error return the
 *   result holds nothing that needs freeing (its pointers are NULL), so freeing it anyway with its
 *   *_free() function is harmless, and every *_free() function accepts NULL.
 * - Pointers. Arguments are not NULL unless their comment says "may be NULL". Strings are
 *   NUL-terminated; the library keeps no pointer to an argument after the call returns.
 * - Memory. What a result points to belongs to the caller and is freed only with the function
 *   named next to it; the library allocates with malloc.
 *
 * - Timeouts. A call waits for its answer up to the client's timeout (bk_client_options,
 *   30 s by default). A call that asks the server to wait — a long-poll of bk_process_read() or
 *   bk_process_wait() (up to 60 s), bk_process_write() (60 s for a process that does not read),
 *   an Exec, a sync, a reset — waits that long *plus* the client's timeout: the timeout is for
 *   the answer to arrive once the server gives it, and never cuts a wait the call asked for.
 *
 * Threads, per handle:
 * - bk_client: any number of threads may call at once on one client; each call runs on an nng
 *   context of its own (a long-poll in one thread holds up no other). Not with them:
 *   bk_client_close() (no call may be in progress or start after it), and bk_reset() with a
 *   new key, which changes the key the other calls sign with.
 * - Results (bk_exec_result, bk_file_info, bk_process_output, lists...): plain memory the
 *   caller owns, no lock inside: one thread at a time, as any struct.
 * - Callbacks (bk_process_handlers, bk_progress_fn) run on the library's threads or the
 *   calling one as their comments say, one at a time per call.
 *
 * Signals: the library installs no handler and changes no disposition or mask of the process.
 * Its own sockets never raise SIGPIPE (nng sends with MSG_NOSIGNAL). A descriptor the caller
 * hands it — bk_download_fd()'s — is written with write(2): a pipe whose reader went away raises
 * SIGPIPE there as any write would; with SIGPIPE ignored the call fails instead, its message
 * ending in "Broken pipe". A signal does not cut a call short (its waits are nng's and retry
 * EINTR): a callback returning false stops a follow or a transfer.
 *
 * fork(): a client does not survive into a child — nng's threads are not there, and its
 * sockets are the parent's. A child of a process that opened a client may only exec or _exit,
 * as POSIX allows after fork in a threaded process; open clients after exec (or before any
 * fork). A client is never inherited by exec: its descriptors are O_CLOEXEC.
 *
 * Link with `pkg-config --cflags --libs boxkite` (`boxkite-static` for libboxkite.a in a
 * dynamic program). The wire protocol is docs/PROTOCOL.md; the ABI rules (what changes the
 * soname) are docs/ABI.md. */
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

/* The version of the library actually loaded ("0.1.0"), which may differ from the one a program
 * was built against. Never NULL; a static string. */
BK_EXPORT const char *bk_version(void);

/* --- The client ------------------------------------------------------------------------------ */

typedef struct bk_client bk_client;

typedef struct bk_status {
	int code;          /* enum bk_code */
	int detail;        /* enum bk_detail: why the server refused the envelope, if it did */
	bool verified;     /* the answer carried a valid MAC from the server */
	char message[512]; /* always NUL-terminated; "OK" on success */
} bk_status;

/* Fill st (when not NULL) as the library's calls do and return code: for a caller that reports
 * its own failures (a local file that cannot be read, say) in the same shape. verified is false
 * for anything but an answer whose MAC verified. */
BK_EXPORT int bk_status_set(bk_status *st, int code, int detail, bool verified, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* A local operation failed with errnum: bk_status_set() with the status that errno maps to
 * (ENOENT: BK_NOT_FOUND, EACCES: BK_PERMISSION_DENIED, ...) and the message ending in
 * ": strerror(errnum)". Returns the code. */
BK_EXPORT int bk_status_errno(bk_status *st, int errnum, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Where the client's key comes from: a key file (the first key, or the one named key_id), or
 * raw key bytes with their id. With neither, only Health can be called. Every field may be
 * NULL or 0. */
typedef struct bk_client_options {
	const char *key_file;
	const char *key_id;
	const uint8_t *key;  /* raw secret, 32..64 bytes, used when key_file is NULL */
	size_t key_len;
	int timeout_ms;      /* default timeout of a call; 0 = 30000 */
	const char *tls_cert; /* tls+tcp:// URLs: the server's certificate (PEM), the only one accepted */
} bk_client_options;

/* Connect to url (tcp://HOST:PORT or ipc:///PATH; NULL: BK_DEFAULT_URL) and load the key.
 * opts may be NULL (no key). On success *out is a client to free with bk_client_close(); on
 * error *out is NULL and nothing needs freeing. The first dial is synchronous, so an
 * unreachable server is BK_UNAVAILABLE here; afterwards nng reconnects by itself. */
BK_EXPORT int bk_client_open(bk_client **out, const char *url, const bk_client_options *opts, bk_status *st);

/* Close the connection and wipe the key from memory. client may be NULL. */
BK_EXPORT void bk_client_close(bk_client *client);

/* --- Health ---------------------------------------------------------------------------------- */

typedef struct bk_health_info {
	char version[32];
	char mode[16];        /* "local", "pod", or "none" */
	bool sandbox_ready;
	bool auth_configured; /* the server has at least one key */
	bool authenticated;   /* this call was keyed and the answer's MAC verified */
	uint64_t uptime_ms;   /* since boxkited started or the last Reset ended */
} bk_health_info;

/* Ask whether the server is up and its sandbox ready. Answered without a key too (then
 * out->authenticated is false and the answer is only an indication). *out holds no pointers:
 * nothing to free. */
BK_EXPORT int bk_health(bk_client *client, bk_health_info *out, bk_status *st);

/* The server's egress ceiling (boxkited --egress-allow): the HOST:PORT patterns a request's
 * allow_net may grant within, n 0 when it grants nothing. Health, keyed: a server tells it only
 * to a caller whose MAC verified (BK_UNAUTHENTICATED here when the client has no key). Free
 * with bk_egress_ceiling_free(). */
typedef struct bk_egress_ceiling {
	char **patterns;
	size_t n;
} bk_egress_ceiling;

BK_EXPORT int bk_egress_ceiling_get(bk_client *client, bk_egress_ceiling *out, bk_status *st);
BK_EXPORT void bk_egress_ceiling_free(bk_egress_ceiling *ceiling);

/* --- Exec ------------------------------------------------------------------------------------ */

typedef struct bk_env_var {
	const char *name;
	const char *value;
} bk_env_var;

typedef struct bk_exec_request {
	const char *const *argv; /* NULL-terminated; argv[0] is looked up in the sandbox's PATH */
	const char *shell;       /* or: a string for /bin/sh -c (exactly one of argv and shell;
				    the other NULL) */
	const char *cwd;         /* may be NULL (/workspace); relative to /workspace, or absolute
				    under /workspace or /tmp */
	const bk_env_var *env;   /* n_env variables added to the server's base environment; NULL
				    when n_env is 0 */
	size_t n_env;
	const void *stdin_data;  /* stdin_len bytes written to the command's stdin, which is then
				    closed; NULL when stdin_len is 0 (the command reads EOF) */
	size_t stdin_len;
	uint32_t timeout_ms;     /* 0: the server's default (boxkited --exec-timeout) */
	uint64_t stdout_limit;   /* bytes kept per stream; 0: the server's default (--exec-output);
				    at most the server's --exec-output-max */
	uint64_t stderr_limit;
	const char *const *allow_net; /* n_allow_net HOST:PORT patterns the command may reach through
				    the sidecar's egress proxy, within its ceiling (else
				    BK_PERMISSION_DENIED, nothing run); NULL when n_allow_net is 0:
				    no network */
	size_t n_allow_net;
} bk_exec_request;

typedef struct bk_exec_result {
	int exit_code;           /* when signal == 0 and !timed_out */
	int signal;              /* the signal that ended it, or 0 */
	bool timed_out;          /* killed (with its whole process tree) at the timeout */
	bool oom_killed;         /* the kernel's OOM killer struck in its memory cgroup */
	/* The command's output, stdout_len bytes, NOT NUL-terminated (output may hold NUL bytes);
	 * NULL when stdout_len is 0. Freed by bk_exec_result_free(). */
	uint8_t *stdout_data;
	size_t stdout_len;
	bool stdout_truncated;   /* more was written than the limit kept */
	uint64_t stdout_dropped; /* bytes past the limit, read and discarded */
	uint8_t *stderr_data;    /* as stdout_data */
	size_t stderr_len;
	bool stderr_truncated;
	uint64_t stderr_dropped;
	uint64_t duration_us;
	char isolation_profile[160]; /* NUL-terminated, e.g. "bk1:netns-fresh,..." */
} bk_exec_result;

/* Run a command in the sandbox and wait for it. BK_OK means it ran (whatever its exit code);
 * an isolation step that failed, a bad request or an unreachable server is an error status, and
 * then *out holds nothing to free. The call waits for the command's timeout plus the client's
 * timeout; with timeout_ms 0 it waits up to BK_EXEC_WAIT_DEFAULT_MS plus the client's timeout
 * for the server's default (give timeout_ms when that may be longer). */
#define BK_EXEC_WAIT_DEFAULT_MS (3600u * 1000u)
BK_EXPORT int bk_exec(bk_client *client, const bk_exec_request *rq, bk_exec_result *out, bk_status *st);

/* Free the output buffers and set them to NULL. res may be NULL; freeing twice is harmless. */
BK_EXPORT void bk_exec_result_free(bk_exec_result *res);

/* --- Files ------------------------------------------------------------------------------------
 *
 * Paths are sandbox paths: relative to /workspace, or absolute under one of the server's roots
 * (/workspace and /tmp unless configured otherwise). Every operation runs as the sandbox user:
 * files created are owned by uid 1001 and permission checks are 1001's. A file is written to an
 * unnamed temporary file and renamed into place only when all of it arrived and its content hash
 * matches: nobody ever sees half a file, and a failed upload leaves nothing behind.
 *
 * A file's content hash (docs/PROTOCOL.md, "Content hash") is the SHA-256 over the SHA-256 of
 * each BK_CONTENT_BLOCK bytes of it, in order: each side computes it from the hashes it takes of
 * the chunks anyway, so a transfer hashes every byte once per side. The plain SHA-256 of a whole
 * file costs one more pass on each side, and is computed only when asked for. */

#define BK_CONTENT_BLOCK (4u << 20)

enum bk_file_type { BK_FILE_UNKNOWN = 0, BK_FILE_REGULAR = 1, BK_FILE_DIRECTORY = 2, BK_FILE_SYMLINK = 3, BK_FILE_OTHER = 4 };

/* One file. path and symlink_target are malloc'd, NUL-terminated, never NULL after a
 * successful call ("" for no symlink target), and hold a name's exact bytes, which need not be
 * UTF-8 (file names are bytes): escape them before showing them on a terminal. Free with
 * bk_file_info_free() (bk_file_list_free() for a listing). */
typedef struct bk_file_info {
	char *path;              /* the path asked (stat, commit, download) or the entry's name (list) */
	char *symlink_target;    /* a symlink's target as stored, "" for any other type */
	int type;                /* enum bk_file_type */
	uint32_t mode;           /* permission bits */
	uint32_t uid, gid;
	uint64_t size;
	int64_t mtime_ns;
	/* Filled by uploads and downloads, not by stat and list: */
	bool has_content_hash;   /* content_hash is the content hash of what was moved */
	uint8_t content_hash[32];
	bool has_sha256;         /* sha256 is the plain SHA-256 of what was moved (asked for with
				    bk_transfer_options.sha256), checked by both sides */
	uint8_t sha256[32];
} bk_file_info;

/* Free info's strings and set them to NULL. info may be NULL; freeing twice is harmless. */
BK_EXPORT void bk_file_info_free(bk_file_info *info);

/* What path is (not following a final symlink). Free *out with bk_file_info_free(). */
BK_EXPORT int bk_file_stat(bk_client *client, const char *path, bk_file_info *out, bk_status *st);

/* One page of a directory, sorted by name. page_token may be NULL or "" for the first page;
 * next_token (at least BK_PAGE_TOKEN_MAX bytes) receives the token of the next page, "" after
 * the last. On success *entries is an array of *n entries (NULL when *n is 0) to free with
 * bk_file_list_free(*entries, *n); on error *entries is NULL and *n 0. page_size 0 = the
 * server's default (at most 1000). */
#define BK_PAGE_TOKEN_MAX 4096
BK_EXPORT int bk_file_list(bk_client *client, const char *path, uint32_t page_size, const char *page_token,
			   bk_file_info **entries, size_t *n, char *next_token, bk_status *st);

/* Free a page of bk_file_list(): each entry's strings, then the array. entries may be NULL. */
BK_EXPORT void bk_file_list_free(bk_file_info *entries, size_t n);

/* Make a directory (and its missing parents with `parents`, where an existing directory is no
 * error); mode 0 = 0755. */
BK_EXPORT int bk_file_mkdir(bk_client *client, const char *path, bool parents, uint32_t mode, bk_status *st);

/* Make a symlink at path whose target is `target`, as stored (not resolved). The server refuses a
 * target that leads out of the root holding path (an absolute one outside it, or one with ".."
 * climbing above it), and refuses to replace an existing path. */
BK_EXPORT int bk_file_symlink(bk_client *client, const char *path, const char *target, bk_status *st);

/* Remove path (a directory only when empty, or with `recursive`). *removed (may be NULL)
 * receives the number of entries removed. */
BK_EXPORT int bk_file_remove(bk_client *client, const char *path, bool recursive, uint64_t *removed,
			     bk_status *st);

/* Rename from to `to`; an existing `to` is replaced only with `overwrite`. */
BK_EXPORT int bk_file_move(bk_client *client, const char *from, const char *to, bool overwrite, bk_status *st);

/* The content hash of the first size bytes of fd (read with pread from offset 0), into out. */
BK_EXPORT int bk_content_hash_fd(int fd, uint64_t size, uint8_t out[32], bk_status *st);

/* Upload primitives: begin (or resume with the same upload id), chunks at the confirmed offset,
 * commit with the content hash. An interrupted upload resumes from the last confirmed offset
 * with its upload id. A chunk that is a whole block (BK_CONTENT_BLOCK bytes at a multiple of it,
 * or up to the end) costs the server one hash; other sizes are taken, at the cost of a second. */
typedef struct bk_upload_begin {
	const char *path;
	uint64_t size;
	const uint8_t *sha256;   /* may be NULL; else 32 bytes, the plain SHA-256 of the whole
				    content, which the server then checks at commit (one more pass
				    over the content there) */
	uint32_t mode;           /* 0 = 0644 */
	bool overwrite;
	bool make_parents;
	const char *upload_id;   /* may be NULL or "": start an upload; else resume this one */
} bk_upload_begin;

typedef struct bk_upload_state {
	char upload_id[64];      /* NUL-terminated */
	uint64_t confirmed_offset;
	uint32_t max_chunk;      /* the largest chunk the server takes (uncompressed): the block */
} bk_upload_state;

/* Begin or resume an upload; *out holds no pointers. */
BK_EXPORT int bk_upload_start(bk_client *client, const bk_upload_begin *rq, bk_upload_state *out, bk_status *st);
/* Send len bytes of data at offset (= the confirmed offset); compress with zstd when asked (and
 * worth it). *confirmed receives the new confirmed offset. data may be NULL when len is 0. */
BK_EXPORT int bk_upload_chunk(bk_client *client, const char *upload_id, uint64_t offset, const void *data,
			      size_t len, bool compress, uint64_t *confirmed, bk_status *st);
/* Check size and content hash (32 bytes, bk_content_hash_fd()) and put the file in place: a
 * content hash that is not the one of the bytes received is BK_DATA_LOSS, and nothing is written.
 * out (may be NULL) receives what landed: free it with bk_file_info_free(). */
BK_EXPORT int bk_upload_commit(bk_client *client, const char *upload_id, const uint8_t content_hash[32],
			       bk_file_info *out, bk_status *st);
/* Drop an upload now rather than at the server's idle expiry. */
BK_EXPORT int bk_upload_abort(bk_client *client, const char *upload_id, bk_status *st);

/* Progress of a transfer: bytes done of total; return false to stop it. Called from the
 * library's transfer threads, one call at a time per transfer. */
typedef bool (*bk_progress_fn)(void *arg, uint64_t done, uint64_t total);

typedef struct bk_transfer_options {
	uint32_t mode;           /* upload: 0 = 0644 */
	bool overwrite;          /* upload: replace an existing file */
	bool make_parents;       /* upload: create missing directories */
	bool compress;           /* zstd on the wire, chunk by chunk */
	bool sha256;             /* also the plain SHA-256 of the whole file, one more pass on each
				    side: computed here and checked by the server (upload) or
				    computed by both and compared (download); in the result's
				    sha256 */
	const char *upload_id;   /* upload: resume this one; may be NULL */
	bk_progress_fn progress; /* may be NULL */
	void *progress_arg;
} bk_transfer_options;

/* Upload the whole of fd (a regular file, read from offset 0 with pread) to path: sends it in
 * chunks, each read straight into its request and hashed once, and commits with the content hash
 * they add up to. opts and out may be NULL; *out, when given, is to be freed with
 * bk_file_info_free(). On failure after the upload started, upload_id_out (64 bytes, may be
 * NULL) holds the id to resume with, else "". Resuming reads and hashes again what the server
 * already has, for the content hash. */
BK_EXPORT int bk_upload_fd(bk_client *client, int fd, const char *path, const bk_transfer_options *opts,
			   bk_file_info *out, char *upload_id_out, bk_status *st);

/* Download path into fd (written from its current offset on). Every chunk is checked by its
 * answer's MAC; every answer must describe the same version of the file (size, mtime, ctime),
 * and the content hash of what arrived must be the server's when it knows the file's. opts and
 * info may be NULL; *info receives the file's size, mode, mtime and content hash, to be freed
 * with bk_file_info_free(). A file that changes while it is read is BK_ABORTED (while one chunk
 * was read) or BK_DATA_LOSS (between chunks). On error fd may hold part of the file: write to a
 * temporary file and rename it into place on success. */
BK_EXPORT int bk_download_fd(bk_client *client, const char *path, int fd, const bk_transfer_options *opts,
			     bk_file_info *info, bk_status *st);

/* --- Watching a directory ---------------------------------------------------------------------
 *
 * A watch reports what changes under a directory of the sandbox and every directory beneath it
 * (directories that appear are watched as they appear). Start it, list what is there, then read
 * from the cursor the start gave: nothing that changed after the start is missed. Each read
 * returns the events after its cursor and the cursor to read from next; reading again from the
 * same cursor (an answer that was lost) returns the same events again, and reading from the next
 * one tells the server they arrived. A watch ends (bk_watch_batch.end) when its directory goes,
 * when it is stopped, after a Reset, or when no read came for BK_WATCH_IDLE_MS; after an end,
 * start another (and list again). A sandbox has at most 16 watches at once. docs/PROTOCOL.md,
 * "FileWatch". */

#define BK_WATCH_CURSOR_MAX 64
#define BK_WATCH_WAIT_MAX_MS 60000u /* the longest wait the server grants a read */
#define BK_WATCH_IDLE_MS 60000u     /* a watch no read came for this long goes */

enum bk_watch_event_kind {
	BK_WATCH_CREATED = 1,    /* a name appeared: a file, directory, symlink, ... */
	BK_WATCH_MODIFIED = 2,   /* a file was written (writes in a row to one file: one event) */
	BK_WATCH_CLOSED = 3,     /* a file open for writing was closed: written, for now */
	BK_WATCH_REMOVED = 4,
	BK_WATCH_MOVED = 5,      /* renamed from path to `to`; either is "" when it lies outside the
				    watch (moved in, moved out) */
	BK_WATCH_OVERFLOW = 6,   /* events were lost here (a queue was full): list again; what follows
				    is reported as before */
};

enum bk_watch_end {
	BK_WATCH_GOES_ON = 0,
	BK_WATCH_END_EXPIRED = 1, /* no such watch any more: not read for BK_WATCH_IDLE_MS, stopped,
				     the server or its file worker restarted, or a cursor older than
				     what the watch keeps */
	BK_WATCH_END_RESET = 2,   /* a Reset ended it */
	BK_WATCH_END_REMOVED = 3, /* the watched directory was removed or moved away */
	BK_WATCH_END_LIMIT = 4,   /* its tree grew past the directories a sandbox's watches may hold */
	BK_WATCH_END_STOPPED = 5, /* bk_watch_stop() ended it */
};

typedef struct bk_watch_event {
	int kind;                /* enum bk_watch_event_kind; expect unknown values (skip them) */
	const char *path;        /* relative to the watched directory ("a/b.txt"), exact bytes, which
				    need not be UTF-8: escape them before showing them on a terminal.
				    MOVED: where it was. "" for OVERFLOW */
	const char *to;          /* MOVED: where it is now; "" otherwise */
	bool directory;          /* the entry is a directory */
	uint64_t lost;           /* OVERFLOW: the events lost, when known (0: unknown) */
} bk_watch_event;

typedef struct bk_watch_batch {
	bk_watch_event *events;  /* n events in order, NULL when n is 0; their strings are in the
				    same allocation: free the batch with bk_watch_batch_free() */
	size_t n;
	int end;                 /* enum bk_watch_end: not BK_WATCH_GOES_ON: the watch is over, after
				    these events */
	char cursor[BK_WATCH_CURSOR_MAX]; /* where the next read goes on from (NUL-terminated) */
} bk_watch_batch;

/* Start watching path (a directory: relative to /workspace, or absolute under a root; a final
 * symlink is followed as long as it stays inside its root). cursor (BK_WATCH_CURSOR_MAX bytes)
 * receives where the first read starts; *directories (may be NULL) the directories watched. A
 * tree larger than the sandbox's watches may hold, or a 17th watch, is BK_RESOURCE_EXHAUSTED. */
BK_EXPORT int bk_watch_start(bk_client *client, const char *path, char *cursor, uint32_t *directories,
			     bk_status *st);

/* The events after cursor: at most max_events (0: 1000, the most), waiting up to wait_ms (at most
 * BK_WATCH_WAIT_MAX_MS; 0: not at all) when there are none yet — the answer comes as soon as
 * there is one. The call waits for wait_ms plus the client's timeout. Free *out with
 * bk_watch_batch_free(). An end is not an error: the call is BK_OK with out->end set. */
BK_EXPORT int bk_watch_read(bk_client *client, const char *cursor, uint32_t wait_ms, uint32_t max_events,
			    bk_watch_batch *out, bk_status *st);

/* Free a batch's events and set them to NULL. batch may be NULL; freeing twice is harmless. */
BK_EXPORT void bk_watch_batch_free(bk_watch_batch *batch);

/* End the watch cursor names now, rather than at its idle expiry: its reads waiting are answered
 * BK_WATCH_END_STOPPED. A watch that is over already is no error. */
BK_EXPORT int bk_watch_stop(bk_client *client, const char *cursor, bk_status *st);

/* --- Processes --------------------------------------------------------------------------------
 *
 * A background process runs with exec's whole isolation (its own PID namespace: stopping it stops
 * everything it started) and outlives the call that started it. Its output goes to two rings,
 * stdout and stderr, addressed by absolute byte offsets from 0: a reader asking for bytes the ring
 * already dropped is told so (bk_stream_chunk.lost), never given other bytes. With a terminal
 * (tty) everything the process writes is on stdout and stderr stays empty. A process is named by
 * the id bk_process_start() gives ("p1", "p2", ...) in its epoch (bk_process_started.epoch): ids
 * start from p1 again after a Reset and in a restarted boxkited, each time in a new epoch. Every
 * call for a process takes the epoch too, and a process of another epoch is never acted on: it is
 * BK_NOT_FOUND, as an unknown id is. An epoch of 0 names whatever process has the id now (an id a
 * person typed); bk_process_read(), bk_process_wait() and bk_process_follow() then set it to the
 * answer's, so that what follows stays with the process the first call found. Its record stays
 * after it ends until bk_process_remove().
 *
 * A call that would wait (a read or wait that long-polls, a write the process does not take yet)
 * and that boxkited cannot keep waiting (it holds as many waiting calls as it may) is answered
 * early with when to ask again: the library waits that long and asks again within the caller's
 * wait, so that followers of a busy server do not spin.
 *
 * Every call below may run on another thread while a bk_process_read(), bk_process_wait() or
 * bk_process_follow() of the same process long-polls: write stdin, signal or resize from one
 * thread while another reads. One bk_process_write() per process at a time: the server refuses a
 * second concurrent one (BK_FAILED_PRECONDITION). docs/PROTOCOL.md, "Processes". */

#define BK_PROCESS_ID_MAX 64
#define BK_PROCESS_LONG_POLL_MAX_MS 60000u /* the longest wait the server grants a read or wait */

typedef struct bk_process_request {
	const char *const *argv; /* as bk_exec_request: exactly one of argv and shell */
	const char *shell;
	const char *cwd;         /* may be NULL */
	const bk_env_var *env;   /* may be NULL when n_env is 0 */
	size_t n_env;
	bool stdin_open;         /* stdin stays open for bk_process_write(); else it is at EOF */
	bool tty;                /* a terminal (PTY) for stdin, stdout and stderr */
	uint32_t rows, cols;     /* tty: the terminal's size; 0: 24x80 */
	const char *tag;         /* may be NULL: a label shown by bk_process_list() (<= 256 bytes) */
	uint32_t lease_ms;       /* 0: none; else the process is killed (whole tree) when no read,
				    wait, write, signal, resize, close-stdin or remove call for it
				    arrives for this long (a long-poll counts for its whole wait): a
				    client that went away leaves nothing running */
	uint32_t expose_port;    /* 1-65535: the process stays in the sandbox's network namespace so
				    that the sidecar reaches this port; 0: a fresh namespace */
	uint32_t max_runtime_ms; /* 0: none, or the server's --process-runtime-max; killed past it */
	uint64_t ring_size;      /* bytes kept per stream; 0: the server's default (1 MiB) */
	bool lossless;           /* output waits for its readers instead of being dropped: a stream
				    whose ring holds ring_size bytes nobody read blocks the process
				    writing it (for a client that streams everything; give a lease
				    too, so that a reader that went away does not stall it for ever) */
	const char *const *allow_net; /* as bk_exec_request's; not with expose_port */
	size_t n_allow_net;
} bk_process_request;

typedef struct bk_process_status {
	bool running;
	int exit_code;           /* when !running and signal == 0 */
	int signal;              /* the signal that ended it, or 0 */
	bool runtime_exceeded;   /* killed at max_runtime_ms */
	bool lease_expired;      /* killed because its lease ran out */
	bool oom_killed;         /* the OOM killer struck in its memory cgroup */
	uint64_t duration_us;    /* so far, or in all */
} bk_process_status;

typedef struct bk_process_started {
	char id[BK_PROCESS_ID_MAX];  /* NUL-terminated */
	uint64_t epoch;              /* the epoch id names it in: give both to every call for it */
	char isolation_profile[160];
} bk_process_started;

/* Start a process. *out holds no pointers. */
BK_EXPORT int bk_process_start(bk_client *client, const bk_process_request *rq, bk_process_started *out,
			       bk_status *st);

/* What a read found in one stream. data (len bytes, NOT NUL-terminated, NULL when len is 0)
 * points into the answer as it arrived (no copy), which bk_process_output_free() frees. */
typedef struct bk_stream_chunk {
	uint8_t *data;
	size_t len;
	uint64_t offset;         /* absolute offset of data's first byte */
	uint64_t lost;           /* bytes from the offset asked to `offset` that the ring dropped
				    before they were read (0: none) */
	uint64_t end;            /* bytes the stream has produced so far */
	bool eof;                /* the stream is closed and data reaches its end */
} bk_stream_chunk;

typedef struct bk_process_output {
	bk_stream_chunk out;     /* stdout (or the terminal) */
	bk_stream_chunk err;     /* stderr */
	bk_process_status status;
	void *answer;            /* the library's: the answer both chunks' data are in */
} bk_process_output;

/* Read both streams from absolute offsets, up to max_bytes each (0: 1 MiB; at most 4 MiB). When
 * neither has bytes past its offset and the process runs, wait up to wait_ms (at most
 * BK_PROCESS_LONG_POLL_MAX_MS) for bytes or the end: the answer comes as soon as there is
 * something. An offset past the stream's end is BK_OUT_OF_RANGE. The exit status is final once
 * both streams are at eof and status.running is false. *epoch: the process's epoch, or 0 (any:
 * set to the answer's). Free *out with bk_process_output_free(). */
BK_EXPORT int bk_process_read(bk_client *client, const char *id, uint64_t *epoch, uint64_t stdout_offset,
			      uint64_t stderr_offset, uint32_t max_bytes, uint32_t wait_ms, bk_process_output *out,
			      bk_status *st);

/* Free the answer both chunks' data are in and set them to NULL. out may be NULL; freeing twice
 * is harmless. */
BK_EXPORT void bk_process_output_free(bk_process_output *out);

/* Write len bytes to the process's stdin, then close it when `close`. The data goes in requests
 * of at most 1 MiB, each answered once it is all in the pipe (or terminal); what the server could
 * not put in within its wait (the process is not reading) is sent again, so the call returns when
 * all of it is in, or on an error. *written (may be NULL) receives the bytes that went in, also on
 * an error. A process started without stdin_open, or whose stdin was closed, is
 * BK_FAILED_PRECONDITION; so is one that closed its stdin itself. data may be NULL when len is 0. */
BK_EXPORT int bk_process_write(bk_client *client, const char *id, uint64_t epoch, const void *data, size_t len,
			       bool close, uint64_t *written, bk_status *st);

/* Close the process's stdin (the command reads EOF). Closing twice is no error. */
BK_EXPORT int bk_process_close_stdin(bk_client *client, const char *id, uint64_t epoch, bk_status *st);

/* Send signal (1-64) to every process of its tree; with kill_after_ms > 0, the server SIGKILLs the
 * tree if it still runs that much later (its own timer: it holds though this client goes away).
 * An ended process is BK_FAILED_PRECONDITION. */
BK_EXPORT int bk_process_signal(bk_client *client, const char *id, uint64_t epoch, int signal,
				uint32_t kill_after_ms, bk_status *st);

/* Wait up to wait_ms (at most BK_PROCESS_LONG_POLL_MAX_MS; 0: do not wait) for the process to
 * end; *out is its status then, running if it did not end in time (not an error). *epoch as for
 * bk_process_read(). */
BK_EXPORT int bk_process_wait(bk_client *client, const char *id, uint64_t *epoch, uint32_t wait_ms,
			      bk_process_status *out, bk_status *st);

/* Set the terminal's size (rows, cols 1-65535); a process without a terminal is
 * BK_FAILED_PRECONDITION. */
BK_EXPORT int bk_process_resize(bk_client *client, const char *id, uint64_t epoch, uint32_t rows, uint32_t cols,
				bk_status *st);

/* One process's record. argv (argc strings, then NULL) and tag are malloc'd, never NULL after a
 * successful call ("" for no tag); their bytes are the sandbox's: escape them before showing them
 * on a terminal. */
typedef struct bk_process_info {
	char id[BK_PROCESS_ID_MAX];
	uint64_t epoch;          /* the epoch id names it in */
	char **argv;             /* a shell string shows as /bin/sh -c STRING */
	size_t argc;
	char *tag;
	bk_process_status status;
	uint32_t expose_port;    /* 0, or the port it exposes in the sandbox's network namespace */
	int64_t started_ms;      /* wall clock, ms since the Unix epoch */
	bool tty;
	uint64_t stdout_end, stderr_end;
} bk_process_info;

/* Every record, running or ended, oldest first. On success *procs is an array of *n records
 * (NULL when *n is 0) to free with bk_process_list_free(); on error NULL and 0. */
BK_EXPORT int bk_process_list(bk_client *client, bk_process_info **procs, size_t *n, bk_status *st);

/* Free a list's strings and the array. procs may be NULL. */
BK_EXPORT void bk_process_list_free(bk_process_info *procs, size_t n);

/* Remove an ended process's record and rings; a running one is BK_FAILED_PRECONDITION. */
BK_EXPORT int bk_process_remove(bk_client *client, const char *id, uint64_t epoch, bk_status *st);

/* --- Streaming ---------------------------------------------------------------------------------
 *
 * Following a process is a loop of long-polling reads; bk_process_follow() runs it and hands the
 * bytes to callbacks as they arrive. Each read waits at most 10 s for output (BK_FOLLOW_POLL_MS)
 * and asks again; a read that waits keeps the process's lease for its whole wait, so a follower
 * that dies leaves its process running at most BK_FOLLOW_POLL_MS plus its lease. Callbacks run on
 * the calling thread, one at a time, in the order of each stream's bytes (with output_at, of
 * both streams together); while one runs no read is in flight, so a process with a lease must
 * not be held up longer than the lease (keep it alive from another thread with
 * bk_process_wait() when a callback may block).
 *
 * The data a callback gets is the library's: valid during the call only (it is in the answer it
 * arrived in, freed once the callbacks of that answer returned). Copy what you keep. */

#define BK_FOLLOW_POLL_MS 10000u /* how long one read of bk_process_follow() waits for output */

enum bk_stream { BK_STREAM_STDOUT = 1, BK_STREAM_STDERR = 2 };

typedef struct bk_process_handlers {
	/* Bytes of stream (enum bk_stream) starting at absolute offset `offset`. Return false to
	 * stop following (the call then returns BK_CANCELLED). */
	bool (*output)(void *arg, int stream, uint64_t offset, const uint8_t *data, size_t len);
	/* May be NULL: the ring dropped `bytes` bytes before they could be read; offset is where the
	 * stream goes on. */
	void (*lost)(void *arg, int stream, uint64_t offset, uint64_t bytes);
	/* May be NULL. bk_exec_stream() only: the process started as `id` in `epoch`, before any
	 * output; from here on other threads may write, signal or resize it (with both). Return
	 * false not to follow it (it is killed and removed; the call returns BK_CANCELLED). */
	bool (*started)(void *arg, const char *id, uint64_t epoch);
	/* May be NULL. Set, it is called instead of output: both streams' bytes in the order
	 * boxkited read them (docs/PROTOCOL.md, "ProcessRead": its marks), each piece with the wall
	 * clock time it was read (ms since the Unix epoch). Writes to the two streams closer
	 * together than boxkited's reads of them may come in either order (as with docker logs). */
	bool (*output_at)(void *arg, int stream, uint64_t offset, int64_t time_ms, const uint8_t *data, size_t len);
	/* Stop once both streams are read as far as they reached at the first read (BK_OK, *status
	 * the process's status then, running or not): what a process wrote so far, without
	 * waiting for more. */
	bool until_now;
	void *arg;
} bk_process_handlers;

/* Follow process id from the offsets *stdout_offset and *stderr_offset until both streams are at
 * eof and it has ended; *status (may be NULL) receives its final status. The offsets are kept up
 * to date (also on an error: follow again from there), and *epoch as for bk_process_read(): a
 * follow that outlives its boxkited never goes on with another one's process of the same id.
 * Returns BK_OK when it ended. */
BK_EXPORT int bk_process_follow(bk_client *client, const char *id, uint64_t *epoch, uint64_t *stdout_offset,
				uint64_t *stderr_offset, const bk_process_handlers *h, bk_process_status *status,
				bk_status *st);

/* A command run as exec runs it, its output streamed as produced: bk_process_start(), then
 * h->started, bk_process_follow() to the end, and bk_process_remove(). *status (may be NULL)
 * receives how it ended. If following fails or a callback stops it, the process is killed
 * (SIGKILL, whole tree) and removed, as far as the server can be reached — that process, in its
 * epoch, never another of the same id in a boxkited restarted meanwhile: give rq->lease_ms so that
 * a client that cannot reach it, or dies, leaves nothing running either. A command a Reset killed
 * is BK_ABORTED. started_out (may be NULL) receives the id, epoch and isolation profile. */
BK_EXPORT int bk_exec_stream(bk_client *client, const bk_process_request *rq, const bk_process_handlers *h,
			     bk_process_started *started_out, bk_process_status *status, bk_status *st);

/* --- Reset ------------------------------------------------------------------------------------ */

/* For the warm-pool recycle: the server kills every process and exec tree, empties the workspace
 * and tmp and checks they are empty, and forgets the session (rings, uploads, replay answers). A
 * reset that cannot prove the sandbox clean fails loudly, and the server then refuses all work
 * until it is discarded. */
#define BK_RESET_KEY_LEN 32

typedef struct bk_reset_request {
	/* A key for the next tenant (all three may be NULL/0: the keys stay). Once the reset
	 * succeeded it is the only key the server accepts; its answer is MAC'd with it, and this
	 * client uses it from then on. Refused on a plain tcp:// URL, where it would cross the
	 * network in clear. */
	const char *new_key_id;
	const uint8_t *new_key;  /* new_key_len bytes, which must be 32 (BK_RESET_KEY_LEN): the
				    server takes no other size. A length, so that a buffer of another
				    size is refused here (BK_INVALID_ARGUMENT) instead of read past
				    its end or cut short; a client's own key (bk_client_options) may
				    be 32..64 bytes, a reset's is 32 */
	size_t new_key_len;
} bk_reset_request;

typedef struct bk_reset_result {
	uint64_t processes_killed;
	uint64_t entries_removed;
} bk_reset_result;

/* Reset the sandbox. rq may be NULL (no new key). With a new key, must not race with other calls
 * on the same client (the client's key changes). */
BK_EXPORT int bk_reset(bk_client *client, const bk_reset_request *rq, bk_reset_result *out, bk_status *st);

/* --- Sync: snapshots of the workspace in a store boxkited was configured with (--sync-store) ----
 *
 * A push snapshots a tree of the sandbox (the workspace by default) to a store; a pull restores
 * one (a given id, or the latest) into it. One sync runs at a time on the server; a second is
 * BK_FAILED_PRECONDITION. A push or pull waits up to timeout_ms (0: BK_SYNC_WAIT_DEFAULT_MS);
 * bk_sync_status(), from another thread or client, reports its progress meanwhile. */
#define BK_SYNC_WAIT_DEFAULT_MS (3600 * 1000)
#define BK_SNAPSHOT_ID_MAX 128

typedef struct bk_sync_request {
	const char *url;         /* a --sync-store URL or a prefix under one; NULL or "": the first */
	const char *snapshot;    /* push: the id to write, NULL: one made of the time; pull: NULL, the latest */
	const char *path;        /* the tree; NULL: /workspace */
	const char *const *exclude; /* fnmatch patterns (see docs/PROTOCOL.md, "Sync") */
	size_t n_exclude;
	bool default_excludes;   /* push: also node_modules and caches */
	bool mirror;             /* pull: also remove what the snapshot lacks (but the excluded) */
	int timeout_ms;
} bk_sync_request;

typedef struct bk_sync_result {
	char snapshot[BK_SNAPSHOT_ID_MAX + 1];
	uint64_t files, bytes, directories, symlinks, skipped;
	uint64_t blobs, blobs_uploaded, bytes_uploaded, files_read; /* push */
	uint64_t blobs_fetched, removed;                            /* pull */
} bk_sync_result;

BK_EXPORT int bk_sync_push(bk_client *client, const bk_sync_request *rq, bk_sync_result *out, bk_status *st);
BK_EXPORT int bk_sync_pull(bk_client *client, const bk_sync_request *rq, bk_sync_result *out, bk_status *st);

typedef struct bk_snapshot_info {
	char name[BK_SNAPSHOT_ID_MAX + 1];
	uint64_t files, bytes;
	int64_t created_ms;      /* wall clock */
	char *path;              /* the tree it was pushed from (malloc'd) */
} bk_snapshot_info;

/* The snapshots under url (NULL: the first store), oldest first: *out (free with
 * bk_snapshot_list_free) holds *n of them. */
BK_EXPORT int bk_sync_list(bk_client *client, const char *url, bk_snapshot_info **out, size_t *n, bk_status *st);
BK_EXPORT void bk_snapshot_list_free(bk_snapshot_info *list, size_t n);

typedef struct bk_sync_progress {
	bool running;            /* false: the rest describes the last sync to end */
	char operation[8];       /* "push", "pull", "" */
	char snapshot[BK_SNAPSHOT_ID_MAX + 1];
	uint64_t files_done, bytes_done, files_total, bytes_total, blobs_uploaded;
	uint64_t files_read, bytes_uploaded; /* push: files read (new or changed), bytes put in the store */
	int64_t started_ms;
	int status;              /* once ended */
	char message[512];
} bk_sync_progress;

BK_EXPORT int bk_sync_status(bk_client *client, bk_sync_progress *out, bk_status *st);

#ifdef __cplusplus
}
#endif

#endif
