/* bkctl internals: the options every subcommand shares, and the subcommand table. */
#ifndef BKCTL_H
#define BKCTL_H

#include <stdbool.h>
#include <getopt.h>
#include <stdio.h>

#include "boxkite/boxkite.h"
#include "json.h"
#include "keys.h"

/* Exit codes (bkctl(1), EXIT STATUS). `exec` instead exits with the command's own status. */
enum {
	BKCTL_EXIT_OK = 0,
	BKCTL_EXIT_STATUS = 1,      /* the server answered with an error status */
	BKCTL_EXIT_USAGE = 2,       /* bad command line */
	BKCTL_EXIT_UNREACHABLE = 3, /* no answer: cannot connect, timed out, or a broken answer */
	BKCTL_EXIT_AUTH = 4,        /* authentication refused, or no key configured */
	BKCTL_EXIT_INCOMPLETE = 5,  /* verify: nothing failed, but a check was skipped (no key to run it) */
	BKCTL_EXIT_EXEC_TIMEOUT = 124, /* exec: the command timed out */
	BKCTL_EXIT_EXEC_FAILED = 125,  /* exec: the command did not run (bad command line, bkctl or server failed) */
};

typedef struct bkctl {
	const char *url;
	const char *key_file;
	const char *key_id;
	const char *tls_cert;
	int timeout_ms;
	bool json;
	const char *prog; /* "bkctl health" etc., for messages */
} bkctl;

/* What completes a word (bkctl completion): an option's argument, or a command's operands. */
enum bkctl_complete {
	BKCTL_COMPLETE_NONE,    /* nothing bkctl can know here: an id, a number, a sandbox path */
	BKCTL_COMPLETE_FILE,    /* a local file */
	BKCTL_COMPLETE_WORDS,   /* one of the row's words */
	BKCTL_COMPLETE_COMMAND, /* a bkctl command */
};

/* The values bkctl_getopt returns for options that have no short name. */
enum bkctl_opt {
	BKCTL_OPT_URL = 1000, BKCTL_OPT_KEY_FILE, BKCTL_OPT_KEY_ID, BKCTL_OPT_TLS_CERT, BKCTL_OPT_CALL_TIMEOUT,
	BKCTL_OPT_HELP,
	BKCTL_OPT_ID, BKCTL_OPT_WAIT, BKCTL_OPT_TIMEOUT, BKCTL_OPT_OUTPUT_LIMIT, BKCTL_OPT_RAW, BKCTL_OPT_EXPOSE,
	BKCTL_OPT_TAG, BKCTL_OPT_MAX_RUNTIME, BKCTL_OPT_RING_SIZE, BKCTL_OPT_LOSSLESS, BKCTL_OPT_FROM,
	BKCTL_OPT_STDOUT, BKCTL_OPT_STDERR, BKCTL_OPT_SINCE, BKCTL_OPT_CLOSE, BKCTL_OPT_KILL_AFTER,
	BKCTL_OPT_NEW_KEY, BKCTL_OPT_RESUME, BKCTL_OPT_SHA256, BKCTL_OPT_TEMPLATE, BKCTL_OPT_SECRET, BKCTL_OPT_POD,
	BKCTL_OPT_TTL, BKCTL_OPT_BASE, BKCTL_OPT_TO, BKCTL_OPT_MIRROR, BKCTL_OPT_DEFAULT_EXCLUDES, BKCTL_OPT_PATH,
	BKCTL_OPT_ALLOW_NET,
};

/* One option: what bkctl_getopt parses, the lines --help shows, what completion offers. Every
 * one of them comes from these rows, so that the three cannot disagree. */
typedef struct bkctl_option {
	const char *name;              /* the long name */
	char short_name;               /* or 0 */
	int val;                       /* what bkctl_getopt returns: short_name, or a BKCTL_OPT_* */
	const char *arg;               /* its argument as --help names it ("DIR"); NULL: it takes none */
	const char *help;              /* --help's text, lines apart by '\n'; NULL: an alias --help leaves
					* out (the row it stands for names it) */
	enum bkctl_complete complete;  /* what completes its argument */
	const char *words;             /* BKCTL_COMPLETE_WORDS: the choices, apart by spaces */
} bkctl_option;

typedef struct bkctl_command {
	const char *name;
	int (*run)(bkctl *ctl, const struct bkctl_command *cmd, int argc, char **argv);
	const char *summary;
	const char *usage;             /* the usage line after "bkctl NAME [options]" */
	const bkctl_option *options;   /* the command's own, ended by a row without a name; NULL: none */
	const char *notes;             /* what else --help says ("" for nothing) */
	enum bkctl_complete operands;  /* what completes its operands */
	const char *operand_words;     /* BKCTL_COMPLETE_WORDS: the first operand's choices */
} bkctl_command;

/* The global options (client/cli/options.c). */
extern const bkctl_option bkctl_global_options[];

/* The completion script of shell ("bash" or "zsh") for the n commands of cmds and the global
 * options (client/cli/completion.c): 0, or -EINVAL for another shell. */
int bkctl_completion_script(FILE *out, const char *shell, const bkctl_command *cmds, size_t n);

/* Parse the global options that may appear anywhere before "--" (--url, --key-file, --key-id,
 * -o/--output, --timeout, --help) together with the command's own (cmd->options; cmd NULL for
 * none); getopt semantics. Returns the option's val, -1 at the end (after printing the command's
 * --help when asked for it: *want_help set), or '?' on error (already reported, with a pointer to
 * the command's --help). */
int bkctl_getopt(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv, int *want_help);

/* The global options as the library takes them (client/cli/report.c). */
bk_client_options bkctl_client_options(const bkctl *ctl);

/* The key the global options name (--key-file, --key-id; the file's first by default), for what
 * bkctl signs or derives itself (a preview's token, a store prefix): 0 with *ring (free it) and
 * *key in it, or bkctl's exit code, the reason reported (`what` says what needs the key). */
int bkctl_key(const bkctl *ctl, const char *what, bk_keyring **ring, const bk_key **key);

/* Connect with the global options. On failure reports it, sets *exit_code and returns NULL. */
bk_client *bkctl_connect(bkctl *ctl, int *exit_code);

/* The exit code for a failed call, after reporting it on stderr. */
int bkctl_fail(const bkctl *ctl, const bk_status *st);

/* A command's --help (client/cli/options.c): its usage line, summary, options, notes and the
 * global options. bkctl_options_help prints a table of options as --help shows them. */
void bkctl_usage(FILE *out, const bkctl_command *cmd);
void bkctl_options_help(FILE *out, const bkctl_option *opts);

/* A command line the command cannot take: its usage line and where its --help is, on stderr;
 * BKCTL_EXIT_USAGE. */
int bkctl_usage_error(const bkctl_command *cmd);

/* Whether the command's arguments after its options, argv[optind..argc), number min..max (max < 0:
 * any number from min); else says which is wrong (one missing, the first one too many) before
 * bkctl_usage_error()'s lines, and returns false. */
bool bkctl_args_fit(const bkctl *ctl, const bkctl_command *cmd, int argc, char **argv, int min, int max);

/* Seconds, as --timeout and --wait take them (0 < S <= 86400, fractions allowed), in ms rounded
 * up: 0, or -1 if s is not that. */
int bkctl_parse_seconds(const char *s, uint32_t *ms);

/* -e NAME=VALUE (exec, start): arg split in place at its '=' into env[(*n)++]. 0, or -1 after
 * saying what was expected. */
int bkctl_parse_env(const bkctl *ctl, char *arg, bk_env_var *env, size_t *n);

/* The size of the terminal on our stdin (client/cli/exec.c): 0, or -errno. */
int bkctl_terminal_size(uint32_t *rows, uint32_t *cols);

/* Out of memory: bkctl says so and exits (client/cli/report.c). bkctl_grow() makes room for
 * element n of a vector of n that grows by doubling. */
void bkctl_die_oom(void) __attribute__((noreturn));
char *bkctl_strdup(const char *s);
void *bkctl_grow(void *v, size_t n, size_t size);

/* Bytes: "4096", "64K", "16M", "1G" (binary multiples; at most 1 TiB, more than 0): 0, or -1. */
int bkctl_parse_size(const char *s, uint64_t *bytes);

/* --- Text the sandbox chose, shown to a person (client/cli/quote.c; STYLE.md §17) --- */

/* name quoted as GNU ls quotes on a terminal (--quoting-style=shell-escape): as it is when a
 * shell would take it as one plain word, else in quotes, with unprintable bytes as $'\ooo'. */
void bkctl_quote_name(FILE *out, const char *name);

/* name for a listing: quoted (bkctl_quote_name) when tty, else its bytes as they are (as ls). */
void bkctl_put_name(FILE *out, const char *name, bool tty);

/* A message that may quote such names: unprintable bytes written as C escapes (\n, \033). */
void bkctl_put_text(FILE *out, const char *text);

/* A command's output on its way to our stdout or stderr. On a terminal, unless raw (--raw):
 * printable characters, line breaks, tabs, carriage returns and backspaces as they are, and every
 * other byte — ESC and the rest of the C0 controls, DEL, the C1 controls, bytes that are not
 * UTF-8 — as \xNN, so that no control sequence reaches the terminal (OSC 52 clipboard writes,
 * title changes, report requests whose answers the terminal would type back); a character split
 * between two writes is held back for the next, and bkctl_term_flush() writes what is held at the
 * end. Elsewhere (a file, a pipe), the bytes as they are. Writes return 0 or -errno. */
typedef struct bkctl_term {
	int fd;
	bool escape;
	uint8_t held[4];
	size_t nheld;
} bkctl_term;
void bkctl_term_init(bkctl_term *t, int fd, bool raw);
int bkctl_term_write(bkctl_term *t, const uint8_t *data, size_t len);
int bkctl_term_flush(bkctl_term *t);

int bkctl_keygen(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv);
int bkctl_health(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv);
int bkctl_exec(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv);
int bkctl_doctor(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv);
int bkctl_cp(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv);
int bkctl_ls(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv);
int bkctl_stat(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv);
int bkctl_rm(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv);
int bkctl_mkdir(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv);
int bkctl_mv(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv);
int bkctl_kube(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv);
int bkctl_verify(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv);
int bkctl_preview(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv);
int bkctl_start(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv);
int bkctl_ps(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv);
int bkctl_logs(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv); /* client/cli/logs.c */
int bkctl_send(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv);
int bkctl_close_stdin(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv);
int bkctl_kill(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv);
int bkctl_wait(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv);
int bkctl_prune(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv);
int bkctl_reset(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv);
int bkctl_sync(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv);
int bkctl_watch(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv);

/* The one argument after the options of logs, send, kill, wait...: a process id. NULL after
 * reporting a usage error (client/cli/process.c). */
const char *bkctl_process_id_arg(const bkctl *ctl, const bkctl_command *cmd, int argc, char **argv);
/* A process's status in JSON, under key (client/cli/process.c). */
void bkctl_process_status_json(bk_json *j, const char *key, const bk_process_status *ps);
/* Where process id's streams end now (ends[0] stdout, ends[1] stderr), whether it still runs, and
 * the epoch its id is of now, which every call after names: a command that goes on for a while
 * (logs -f, send) never goes on with another boxkited's process of that id, restarted meanwhile.
 * An id not listed: all 0 (the call after it says NOT_FOUND). */
int bkctl_process_now(bk_client *c, const char *id, uint64_t ends[2], bool *running, uint64_t *epoch, bk_status *st);

/* --- bkctl logs' parts that need no server (client/cli/logs.c; tests/unit/test_bkctl_text.c) */

/* ms since the epoch as RFC 3339 in UTC with milliseconds, "2026-12-02T10:20:30.123Z". */
#define BKCTL_TIME_LEN 32
void bkctl_format_time(int64_t ms, char out[BKCTL_TIME_LEN]);

/* --since: a time ago ("90" or "90s", "10m", "2h", "1d", fractions allowed) from now_ms, or an RFC
 * 3339 time ("2026-12-02T10:20:30Z", ".123" and "+01:00" allowed), as ms since the epoch: 0, or -1
 * if s is neither. */
int bkctl_parse_since(const char *s, int64_t now_ms, int64_t *since_ms);

/* --tail N: the output's pieces, in order, as far as its last N lines need them (the earlier
 * ones are let go as later ones come: at most N lines and a piece are kept). */
typedef struct bkctl_tail_piece {
	int stream;              /* enum bk_stream */
	int64_t time_ms;
	uint8_t *data;
	size_t len;
} bkctl_tail_piece;

typedef struct bkctl_tail {
	uint64_t lines;
	bkctl_tail_piece *v;     /* v[head .. n) are kept */
	size_t head, n;
	uint64_t newlines;       /* in what is kept */
} bkctl_tail;

void bkctl_tail_init(bkctl_tail *t, uint64_t lines);
/* Keep a copy of the next piece (out of memory, bkctl exits). */
void bkctl_tail_add(bkctl_tail *t, int stream, int64_t time_ms, const uint8_t *data, size_t len);
/* Where the last N lines start: piece index (v[index], or n for none) and the bytes of it to skip. A
 * last line without its newline is a line. */
size_t bkctl_tail_start(const bkctl_tail *t, size_t *skip);
void bkctl_tail_free(bkctl_tail *t);

/* --- The file commands' parts that need no server (client/cli/files.c; tested by
 * tests/unit/test_bkctl_files.c). */

/* A path argument of cp: ":PATH" is PATH in the sandbox (":" alone is the workspace), anything
 * else a local path (write ./:x for a local file whose name starts with a colon). */
typedef struct bkctl_path {
	const char *path;
	bool remote;
} bkctl_path;

bkctl_path bkctl_path_parse(const char *arg);

/* A path argument of ls, stat, rm, mkdir, mv: always in the sandbox, the colon optional. */
const char *bkctl_sandbox_arg(const char *arg);

enum bkctl_cp_direction { BKCTL_CP_UPLOAD, BKCTL_CP_DOWNLOAD };

/* Which way `cp args[0..n-2] args[n-1]` copies: every source local and the destination in the
 * sandbox, or every source in the sandbox and the destination local. -1 with *why otherwise. */
int bkctl_cp_direction(int n, char *const *args, const char **why);

/* The last component of path, trailing slashes ignored ("a/b/" -> "b", "/" -> "/"). */
void bkctl_path_base(const char *path, char *out, size_t size);

/* The directory part of path ("." for a bare name, "/" for "/x"). */
void bkctl_path_dir(const char *path, char *out, size_t size);

/* dir/name with exactly one slash between them (malloc'd; NULL when out of memory). */
char *bkctl_path_join(const char *dir, const char *name);

/* Where cp puts a copy of src: inside dst when dst is a directory, else at dst (malloc'd). */
char *bkctl_cp_target(const char *dst, bool dst_is_dir, const char *src);

/* Octal permission bits (at most 0777: the server sets no others): 0, or -1 if s is not that. */
int bkctl_parse_mode(const char *s, uint32_t *mode);

/* ls -l's first column for a file type and permission bits, e.g. "drwxr-xr-x" (11 bytes). */
void bkctl_mode_string(int type, uint32_t mode, char out[11]);

/* A byte count for people: "512 B", "1.5 MiB". */
void bkctl_human_bytes(uint64_t n, char *out, size_t size);

/* cp's progress line: bar, percent, bytes done of total, rate, files done of total. */
void bkctl_progress_line(char *out, size_t size, uint64_t done, uint64_t total, double seconds,
			 size_t files_done, size_t files_total);

/* The command line that resumes a failed upload, its words quoted for sh (malloc'd). flags is
 * "" or cp's transfer options, e.g. "-z -p". */
char *bkctl_cp_resume_command(const char *flags, const char *upload_id, const char *src, const char *dst);

/* One failure of a command that goes on after it (cp, rm, mkdir). */
typedef struct bkctl_failure {
	char *path;              /* what it concerns */
	bk_status st;
	char upload_id[64];      /* an upload that can resume, or "" */
	char *resume;            /* the command that resumes it, or NULL */
} bkctl_failure;

typedef struct bkctl_failures {
	bkctl_failure *v;
	size_t n;
	int exit_code;           /* the highest exit code of the failures, 0 when none */
} bkctl_failures;

/* Record a failure (taking resume, which may be NULL), report it on stderr and raise the exit
 * code. Out of memory, bkctl exits. */
void bkctl_failures_add(const bkctl *ctl, bkctl_failures *f, const char *path, const bk_status *st,
			const char *upload_id, char *resume);
void bkctl_failures_free(bkctl_failures *f);

typedef struct bkctl_skip {
	char *path;
	const char *reason;      /* "not a regular file, directory or symlink" */
} bkctl_skip;

/* A file's plain SHA-256 (cp --sha256), named by its local path. */
typedef struct bkctl_digest {
	const char *path;
	uint8_t sha256[32];
} bkctl_digest;

/* What a cp run did: its -o json output and its text summary. */
typedef struct bkctl_cp_summary {
	uint64_t files, directories, symlinks, bytes;
	bkctl_skip *skipped;
	size_t n_skipped;
	bkctl_digest *digests;   /* with --sha256, in the order of the plan */
	size_t n_digests;
	bkctl_failures failures;
	double seconds;
} bkctl_cp_summary;

void bkctl_cp_summary_json(FILE *out, const bkctl_cp_summary *s);
void bkctl_cp_summary_text(FILE *out, const bkctl_cp_summary *s);
/* Its --sha256 lines alone, as sha256sum prints them (part of the text summary). */
void bkctl_cp_digests_text(FILE *out, const bkctl_cp_summary *s);

#endif
