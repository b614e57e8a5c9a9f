/* bkctl — the operator CLI for boxkited, built on libboxkite. */
#include "bkctl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "json.h"
#include "keys.h"
#include "mkdir.h"
#include "version.h"

/* The one table of bkctl's commands and their options: bkctl_getopt parses what it says, --help
 * prints it, bkctl completion makes the shells' completion of it. */
#define OPTIONS(...) ((const bkctl_option[]){ __VA_ARGS__, { 0 } })
#define ENV_HELP "set a variable (repeatable)"
#define SHELL_HELP "run STRING with /bin/sh -c"

static int help_command(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv);
static int completion_command(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv);

static const bkctl_command commands[] = {
	{ "keygen", bkctl_keygen, "write a new key file (mode 0600)", "[--id ID] PATH",
	  OPTIONS({ "id", 0, BKCTL_OPT_ID, "ID", "key id to write (default: k1)" }),
	  "A missing parent directory is made, mode 0700. An existing file is never replaced.\n", BKCTL_COMPLETE_FILE },
	{ "health", bkctl_health, "check that boxkited answers, and whether our key works", "",
	  OPTIONS({ "wait", 0, BKCTL_OPT_WAIT, "S", "retry for up to S seconds until boxkited answers with its sandbox ready" }),
	  "" },
	{ "exec", bkctl_exec, "run a command in the sandbox, its output streamed as it is produced",
	  "-- CMD [ARGS...] | --shell STRING",
	  OPTIONS({ "stdin", 'i', 'i', NULL,
		    "stream our standard input to the command (as docker exec -i, also\n"
		    "--interactive); without it the command's stdin is empty" },
		  { "interactive", 0, 'i', NULL, NULL },
		  { "tty", 't', 't', NULL,
		    "a terminal for the command, the size of ours (our stdin must be one), and\n"
		    "our TERM; with -i ours is in raw mode: bkctl exec -it -- bash is a shell" },
		  { "workdir", 'w', 'w', "DIR",
		    "working directory: relative to /workspace, or absolute under\n"
		    "/workspace or /tmp (also -C, --cwd)" },
		  { "cwd", 'C', 'C', "DIR", NULL },
		  { "env", 'e', 'e', "NAME=VALUE", ENV_HELP },
		  { "shell", 's', 's', "STRING", SHELL_HELP },
		  { "timeout", 0, BKCTL_OPT_TIMEOUT, "S",
		    "kill the command (and everything it started) after S seconds\n"
		    "(default: none, or boxkited's --process-runtime-max; with -o json or\n"
		    "--output-limit: boxkited's --exec-timeout, 10 minutes unless set)" },
		  { "output-limit", 0, BKCTL_OPT_OUTPUT_LIMIT, "BYTES",
		    "collect the output with one Exec call instead of streaming it, keeping\n"
		    "BYTES of stdout and of stderr each, e.g. 64M (default: boxkited's\n"
		    "--exec-output, 1M; at most its --exec-output-max)" },
		  { "raw", 0, BKCTL_OPT_RAW, NULL,
		    "the command's output as it is, control sequences too (without -t, on\n"
		    "a terminal they are shown escaped, \\x1b: they are the command's)" },
		  { "allow-net", 0, BKCTL_OPT_ALLOW_NET, "HOST:PORT",
		    "let the command reach HOST:PORT through the sidecar's egress proxy\n"
		    "(a name, *.DOMAIN, an address or CIDR; a port or *), within\n"
		    "boxkited's --egress-allow; repeatable. Without it: no network" }),
	  "^C is passed to the command as SIGINT; a second ^C kills it and everything it started;\n"
	  "SIGTERM or SIGHUP to bkctl stops it (SIGTERM, SIGKILL 5 s later). A bkctl that dies, loses\n"
	  "boxkited or is stopped (^Z) leaves nothing running: the command is killed 15 s after bkctl\n"
	  "last called. With -o json (one Exec call) stdin is read whole first, at most 8 MiB.\n"
	  "Exit status: the command's; 128+N if signal N killed it; 124 on timeout; 125 if bkctl or the\n"
	  "server failed (the command did not run, or was killed when bkctl could not follow it: a\n"
	  "stopped bkctl exits 125 when it goes on).\n" },
	{ "start", bkctl_start, "start a background process and print its id", "-- CMD [ARGS...] | --shell STRING",
	  OPTIONS({ "stdin", 'i', 'i', NULL, "keep its stdin open for bkctl send (else it reads EOF)" },
		  { "tty", 't', 't', NULL, "a terminal instead of pipes (its stderr is then on stdout)" },
		  { "expose", 0, BKCTL_OPT_EXPOSE, "PORT",
		    "run it in the sandbox's network namespace, not a fresh one, so that\n"
		    "the sidecar reaches PORT on 127.0.0.1" },
		  { "tag", 0, BKCTL_OPT_TAG, "TAG", "a label, shown by ps" },
		  { "max-runtime", 0, BKCTL_OPT_MAX_RUNTIME, "S", "kill it (and everything it started) after S seconds" },
		  { "ring-size", 0, BKCTL_OPT_RING_SIZE, "BYTES",
		    "output kept per stream for logs, e.g. 16M (default 1M, at most 64M)" },
		  { "lossless", 0, BKCTL_OPT_LOSSLESS, NULL,
		    "when a ring is full of output nobody read, the process waits for a\n"
		    "reader (logs -f) instead of losing its oldest bytes" },
		  { "workdir", 'w', 'w', "DIR", "working directory, as for exec" },
		  { "env", 'e', 'e', "NAME=VALUE", ENV_HELP },
		  { "shell", 's', 's', "STRING", SHELL_HELP },
		  { "allow-net", 0, BKCTL_OPT_ALLOW_NET, "HOST:PORT", "as for exec (not with --expose)" }),
	  "It runs with exec's isolation until it ends, is killed, or boxkited resets; its record stays\n"
	  "(ps, logs, wait) until bkctl prune.\n" },
	{ "ps", bkctl_ps, "list background processes, running and ended", "", NULL, "" },
	{ "logs", bkctl_logs, "print a background process's output", "ID",
	  OPTIONS({ "follow", 'f', 'f', NULL, "go on printing as it is produced, until the process ends" },
		  { "tail", 'n', 'n', "N", "from its last N lines (default: all it keeps)" },
		  { "since", 0, BKCTL_OPT_SINCE, "TIME",
		    "what was written since TIME: a time ago (30s, 10m, 2h, 1d) or an\n"
		    "RFC 3339 time (2026-01-02T15:04:05Z)" },
		  { "timestamps", 't', 't', NULL, "each line after the time it was written (RFC 3339, UTC)" },
		  { "stdout", 0, BKCTL_OPT_STDOUT, NULL, "its stdout alone" },
		  { "stderr", 0, BKCTL_OPT_STDERR, NULL, "its stderr alone" },
		  { "from", 0, BKCTL_OPT_FROM, "N", "from byte offset N of the one stream (stdout unless --stderr)" },
		  { "raw", 0, BKCTL_OPT_RAW, NULL,
		    "the output as it is, control sequences too (on a terminal they are\n"
		    "shown escaped, \\x1b: they are the command's)" }),
	  "Both streams by default, its stdout to ours and its stderr to ours, in the order boxkited\n"
	  "read them (writes to the two closer together than its reads may show in either order, as\n"
	  "with docker logs). Output the ring dropped before it was read is reported on stderr as\n"
	  "bytes lost, with the offset output goes on from. -o json prints one read of one stream (at\n"
	  "most 1 MiB) with the offset to go on from (\"next\").\n" },
	{ "send", bkctl_send, "write to a background process's stdin", "ID [FILE]",
	  OPTIONS({ "close", 0, BKCTL_OPT_CLOSE, NULL, "close its stdin after the data (the command reads EOF)" }),
	  "Reads FILE (or our standard input, or - for it) to its end, in chunks as they come.\n",
	  BKCTL_COMPLETE_FILE },
	{ "close-stdin", bkctl_close_stdin, "close a background process's stdin", "ID", NULL, "" },
	{ "kill", bkctl_kill, "send a signal to a background process and everything it started", "ID",
	  OPTIONS({ "signal", 's', 's', "SIG", "the signal, by name (TERM, INT, KILL, ...) or number (default TERM)",
		    BKCTL_COMPLETE_WORDS, "TERM INT KILL HUP QUIT USR1 USR2 STOP CONT" },
		  { "kill-after", 0, BKCTL_OPT_KILL_AFTER, "S",
		    "SIGKILL it S seconds later if it still runs (boxkited's timer)" }),
	  "" },
	{ "wait", bkctl_wait, "wait for a background process to end and print how it ended", "ID",
	  OPTIONS({ "timeout", 0, BKCTL_OPT_TIMEOUT, "S", "give up after S seconds (exit 1 if it still runs)" }), "" },
	{ "prune", bkctl_prune, "remove ended processes' records and output", "[ID...]", NULL,
	  "Without an id, every ended process. A running one is refused: bkctl kill it first.\n" },
	{ "reset", bkctl_reset, "kill every process and empty the workspace and tmp, for the next tenant", "",
	  OPTIONS({ "new-key", 0, BKCTL_OPT_NEW_KEY, "FILE",
		    "install the first key of FILE (bkctl keygen) as the only key:\n"
		    "the current one is refused from then on",
		    BKCTL_COMPLETE_FILE }),
	  "Also forgets the session (output rings, uploads, replay answers). A reset that cannot prove\n"
	  "the sandbox empty fails, and boxkited then refuses all work until it is discarded. The new\n"
	  "key travels in the request: refused on a plain tcp:// URL.\n" },
	{ "doctor", bkctl_doctor, "show the isolation a command in the sandbox really gets", "", NULL,
	  "Runs a probe as a sandboxed command and checks what it sees against SECURITY.md (layer 3):\n"
	  "identity, capabilities, no_new_privs, seccomp, network, PID namespace, cgroup, rlimits,\n"
	  "writable mounts. Exits 1 if a check fails.\n" },
	{ "cp", bkctl_cp, "copy files and trees into or out of the sandbox",
	  "SRC... :DST | :SRC... DST | - :FILE | :FILE -",
	  OPTIONS({ "recursive", 'r', 'r', NULL, "copy directory trees, their symlinks as symlinks" },
		  { "no-clobber", 'n', 'n', NULL, "refuse to replace an existing file" },
		  { "keep-mode", 'p', 'p', NULL, "keep the permission bits (rwx only)" },
		  { "compress", 'z', 'z', NULL, "zstd on the wire" },
		  { "sha256", 0, BKCTL_OPT_SHA256, NULL,
		    "also the plain SHA-256 of each file, computed on both sides (one more\n"
		    "pass over it each), checked, and printed as sha256sum prints it" },
		  { "jobs", 'j', 'j', "N", "files in flight at once (default 8)" },
		  { "resume", 0, BKCTL_OPT_RESUME, "ID",
		    "finish an interrupted upload of one file (bkctl prints the command)" }),
	  "A sandbox path is :PATH, relative to /workspace or absolute under /workspace or /tmp. A file\n"
	  "copied onto a directory goes inside it; missing parents are made. A symlink whose target\n"
	  "leads out of the workspace is refused on upload. Exit status as the other commands, from the\n"
	  "worst failure; the others are still copied. - is our standard input (cp - :FILE) or output\n"
	  "(cp :FILE -), one file's bytes; ./- is a local file named -.\n",
	  BKCTL_COMPLETE_FILE },
	{ "ls", bkctl_ls, "list a sandbox directory", "[PATH]",
	  OPTIONS({ "long", 'l', 'l', NULL, "type and mode, uid:gid, size, mtime, name, symlink target" },
		  { "all", 'a', 'a', NULL, "include names starting with '.'" }),
	  "On a terminal, names are quoted as GNU ls quotes them; -o json gives the exact bytes.\n" },
	{ "stat", bkctl_stat, "show a sandbox file's type, size, mode, owner and mtime", "PATH", NULL, "" },
	{ "rm", bkctl_rm, "remove sandbox files or trees", "PATH...",
	  OPTIONS({ "recursive", 'r', 'r', NULL, "remove directories and their contents" }), "" },
	{ "mkdir", bkctl_mkdir, "make sandbox directories", "PATH...",
	  OPTIONS({ "parents", 'p', 'p', NULL, "make missing parents; an existing directory is no error" },
		  { "mode", 'm', 'm', "MODE", "octal permission bits (default 755)" }),
	  "" },
	{ "mv", bkctl_mv, "move or rename in the sandbox", "FROM TO",
	  OPTIONS({ "force", 'f', 'f', NULL, "replace an existing TO" }), "Onto an existing directory, FROM moves inside it.\n" },
	{ "kube", bkctl_kube, "print a sandbox's Secret (fresh key and TLS certificate) and pod for kubectl apply -f -",
	  "NAME",
	  OPTIONS({ "namespace", 'n', 'n', "NS", "the namespace (default boxkite)" },
		  { "template", 0, BKCTL_OPT_TEMPLATE, "FILE",
		    "the pod to render instead of deploy/sandbox/pod.yaml (- for stdin),\n"
		    "e.g. kubectl kustomize of an overlay of deploy/sandbox",
		    BKCTL_COMPLETE_FILE },
		  { "secret", 0, BKCTL_OPT_SECRET, NULL, "the Secret alone, e.g. a warm pool's (its key is the claim key)" }),
	  "It prints YAML, what kubectl apply -f - reads; -o json is refused.\n" },
	{ "verify", bkctl_verify, "check the three network-isolation layers, each from its vantage point", "",
	  OPTIONS({ "pod", 0, BKCTL_OPT_POD, "NAME", "the sandbox pod, for the kubectl commands it prints" },
		  { "namespace", 'n', 'n', "NS", "its namespace (default boxkite)" }),
	  "Layer 1 from inside an exec, layer 3 against the port without the key; layer 2 (and the\n"
	  "metadata endpoint) printed as commands to run on your cluster. Exits 1 if a check failed.\n" },
	{ "preview", bkctl_preview, "print a URL that reaches a port a background process exposes", "PORT",
	  OPTIONS({ "ttl", 0, BKCTL_OPT_TTL, "SECONDS",
		    "how long the URL works (default 3600; the server allows at most its\n"
		    "--preview-ttl-max)" },
		  { "base", 0, BKCTL_OPT_BASE, "URL",
		    "boxkited's --preview-listen as the browser reaches it (env\n"
		    "BOXKITE_PREVIEW_URL; default http://127.0.0.1:8081)" }),
	  "The token is signed here with the key (--key-file); anyone holding the URL reaches PORT\n"
	  "until it expires. Start the process with bkctl start --expose PORT.\n" },
	{ "watch", bkctl_watch, "print what changes under a sandbox directory, as it changes", "[PATH]",
	  OPTIONS({ "count", 'n', 'n', "N", "stop after N changes (exit 0)" },
		  { "timeout", 0, BKCTL_OPT_TIMEOUT, "S", "stop after S seconds (exit 0)" }),
	  "A line per change, recursively, paths relative to PATH (default /workspace), quoted as ls\n"
	  "quotes names (a directory's with a trailing /): created, modified, closed (after writing),\n"
	  "removed, moved A -> B, moved in, moved out, and overflow (changes were lost: list again).\n"
	  "-o json prints a JSON object per line: first {\"watching\", \"directories\"}, then one per\n"
	  "change ({\"kind\", \"path\", \"to\", \"directory\"} or {\"kind\":\"overflow\", \"lost\"}), exact\n"
	  "bytes. ^C, SIGTERM or SIGHUP stop the watch and exit 0. Exits 1 when the watch ends otherwise\n"
	  "(its directory removed, a reset, the bound on directories), saying why on stderr.\n" },
	{ "sync", bkctl_sync, "push the workspace to a snapshot store, pull it back, list snapshots",
	  "push [--to URL] [--id ID] [-x PATTERN]... | pull [--from URL] [--id ID] [--mirror] | ls [--from URL] |\n"
	  "       prefix",
	  OPTIONS({ "to", 0, BKCTL_OPT_TO, "URL",
		    "push: the store, a --sync-store of boxkited's or a prefix under one\n"
		    "(default: its first)" },
		  { "from", 0, BKCTL_OPT_FROM, "URL", "pull, ls: the store, as --to" },
		  { "id", 0, BKCTL_OPT_ID, "ID",
		    "push: the snapshot's id (default: made of the time); pull: which\n"
		    "snapshot (default: the latest)" },
		  { "path", 0, BKCTL_OPT_PATH, "PATH", "the tree, a sandbox directory (default /workspace)" },
		  { "exclude", 'x', 'x', "PAT",
		    "push: leave out entries matching PAT (fnmatch; without '/', a name\n"
		    "anywhere); pull --mirror: leave them alone. Repeatable" },
		  { "default-excludes", 0, BKCTL_OPT_DEFAULT_EXCLUDES, NULL,
		    "push: also node_modules, .cache, __pycache__ and other caches" },
		  { "mirror", 0, BKCTL_OPT_MIRROR, NULL, "pull: also remove what the snapshot does not have" }),
	  "A snapshot is content-addressed: a push uploads only the blocks the store lacks. On a\n"
	  "terminal a progress line shows on stderr; -o json prints the counts. Snapshots are the\n"
	  "key's: boxkited keeps them under the key's store prefix (sync prefix prints it, for\n"
	  "an operator's --restore-from STORE/PREFIX), and another key sees none of them.\n",
	  BKCTL_COMPLETE_WORDS, "push pull ls prefix" },
	{ "help", help_command, "a command's options, or this list", "[COMMAND]", NULL, "",
	  BKCTL_COMPLETE_COMMAND },
	{ "completion", completion_command, "print a shell's completion of bkctl's commands and options", "bash | zsh",
	  NULL,
	  "make install installs both (bash-completion's and zsh's site directories). For this shell\n"
	  "alone: source <(bkctl completion bash), or in zsh source <(bkctl completion zsh).\n",
	  BKCTL_COMPLETE_WORDS, "bash zsh" },
};

/* bkctl's own usage: every command, and the global options. */
static void usage(FILE *out)
{
	fprintf(out, "Usage: bkctl [global options] COMMAND [options] [args]\n\nCommands:\n");
	for (size_t i = 0; i < BK_ARRAY_SIZE(commands); i++)
		fprintf(out, "  %-11s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "\nGlobal options (also after the command name):\n");
	bkctl_options_help(out, bkctl_global_options);
	fprintf(out, "\n'bkctl help COMMAND' (or bkctl COMMAND --help) for a command's options. See bkctl(1).\n");
}

static const bkctl_command *command_named(const char *name)
{
	for (size_t i = 0; i < BK_ARRAY_SIZE(commands); i++) {
		if (strcmp(name, commands[i].name) == 0)
			return &commands[i];
	}
	return NULL;
}

static int help_command(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{
	const bkctl_command *about;
	int help = 0;

	while (bkctl_getopt(ctl, cmd, argc, argv, &help) != -1)
		return BKCTL_EXIT_USAGE;
	if (help)
		return BKCTL_EXIT_OK;
	if (optind == argc) {
		usage(stdout);
		return BKCTL_EXIT_OK;
	}
	if (!bkctl_args_fit(ctl, cmd, argc, argv, 1, 1))
		return BKCTL_EXIT_USAGE;
	about = command_named(argv[optind]);
	if (!about) {
		fprintf(stderr, "%s: no command '%s' ('bkctl help' lists them)\n", ctl->prog, argv[optind]);
		return BKCTL_EXIT_USAGE;
	}
	bkctl_usage(stdout, about);
	return BKCTL_EXIT_OK;
}

static int completion_command(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{
	int help = 0;

	while (bkctl_getopt(ctl, cmd, argc, argv, &help) != -1)
		return BKCTL_EXIT_USAGE;
	if (help)
		return BKCTL_EXIT_OK;
	if (!bkctl_args_fit(ctl, cmd, argc, argv, 1, 1))
		return BKCTL_EXIT_USAGE;
	if (bkctl_completion_script(stdout, argv[optind], commands, BK_ARRAY_SIZE(commands)) < 0) {
		fprintf(stderr, "%s: bash or zsh, not '%s'\n", ctl->prog, argv[optind]);
		return BKCTL_EXIT_USAGE;
	}
	return fflush(stdout) == 0 ? BKCTL_EXIT_OK : BKCTL_EXIT_STATUS;
}

int bkctl_keygen(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{
	const char *id = "k1", *path;
	char dir[4096], failed[4096] = "";
	bk_error *err = NULL;
	bk_status st;
	int c, help = 0, rv;

	while ((c = bkctl_getopt(ctl, cmd, argc, argv, &help)) != -1) {
		if (c == BKCTL_OPT_ID)
			id = optarg;
		else
			return BKCTL_EXIT_USAGE;
	}
	if (help)
		return BKCTL_EXIT_OK;
	if (!bkctl_args_fit(ctl, cmd, argc, argv, 1, 1))
		return BKCTL_EXIT_USAGE;
	path = argv[optind];
	/* As a packaged daemon's key would be: a directory of its own that only its owner reads. */
	bkctl_path_dir(path, dir, sizeof(dir));
	rv = bk_mkdir_p(dir, 0700, 0700, true, failed, sizeof(failed));
	if (rv < 0) {
		bk_status_set(&st, bk_status_from_errno(-rv), 0, false, "cannot create %s, the key's directory: %s",
			      failed[0] ? failed : dir, strerror(-rv));
		return bkctl_fail(ctl, &st);
	}
	if (bk_keyfile_create(path, id, &err) < 0) {
		bk_status_set(&st, err->status, 0, false, "%s", bk_error_msg(err));
		bk_error_free(err);
		return bkctl_fail(ctl, &st);
	}
	if (ctl->json) {
		bk_json j = { .out = stdout };
		bk_json_begin_object(&j, NULL);
		bk_json_string(&j, "path", path);
		bk_json_string(&j, "key_id", id);
		bk_json_end_object(&j);
	} else {
		printf("wrote key '%s' to %s (mode 0600)\n", id, path);
	}
	return BKCTL_EXIT_OK;
}

/* One Health call on a connection of its own (a retry must dial again). */
static int health_once(bkctl *ctl, bk_health_info *h, bk_status *st)
{
	bk_client_options o = bkctl_client_options(ctl);
	bk_client *c;
	int code = bk_client_open(&c, ctl->url, &o, st);

	if (code != BK_OK)
		return code;
	code = bk_health(c, h, st);
	bk_client_close(c);
	return code;
}

int bkctl_health(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{
	struct timespec start;
	uint32_t wait_ms = 0;
	bk_health_info h;
	bk_status st;
	int opt, help = 0, code;

	while ((opt = bkctl_getopt(ctl, cmd, argc, argv, &help)) != -1) {
		if (opt != BKCTL_OPT_WAIT || bkctl_parse_seconds(optarg, &wait_ms) < 0) {
			if (opt == BKCTL_OPT_WAIT)
				fprintf(stderr, "%s: --wait %s: expected seconds (0 < S <= 86400)\n", ctl->prog, optarg);
			return BKCTL_EXIT_USAGE;
		}
	}
	if (help)
		return BKCTL_EXIT_OK;
	if (!bkctl_args_fit(ctl, cmd, argc, argv, 0, 0))
		return BKCTL_EXIT_USAGE;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		code = health_once(ctl, &h, &st);
		if ((code == BK_OK && h.sandbox_ready) || bk_elapsed_us(&start) >= (uint64_t)wait_ms * 1000)
			break;
		/* A key that does not work will not start working: only an absent server is waited for. */
		if (code != BK_OK && code != BK_UNAVAILABLE && code != BK_DEADLINE_EXCEEDED)
			break;
		nanosleep(&(struct timespec){ .tv_nsec = 100 * 1000 * 1000 }, NULL);
	}
	if (code != BK_OK)
		return bkctl_fail(ctl, &st);
	if (ctl->json) {
		bk_json j = { .out = stdout };
		bk_json_begin_object(&j, NULL);
		bk_json_string(&j, "status", "OK");
		bk_json_string(&j, "version", h.version);
		bk_json_string(&j, "mode", h.mode);
		bk_json_bool(&j, "sandbox_ready", h.sandbox_ready);
		bk_json_bool(&j, "auth_configured", h.auth_configured);
		bk_json_bool(&j, "authenticated", h.authenticated);
		bk_json_uint(&j, "uptime_ms", h.uptime_ms);
		bk_json_end_object(&j);
	} else {
		printf("ok: boxkited %s, mode %s, sandbox %s, auth %s, %s, up %.1f s\n", h.version, h.mode,
		       h.sandbox_ready ? "ready" : "not ready", h.auth_configured ? "configured" : "NOT configured",
		       h.authenticated ? "our key verified" : "unauthenticated call", (double)h.uptime_ms / 1000);
	}
	/* Waited for and not ready: the caller's next step would fail. */
	return wait_ms && !h.sandbox_ready ? BKCTL_EXIT_STATUS : BKCTL_EXIT_OK;
}

int main(int argc, char **argv)
{
	bkctl ctl = { .url = getenv("BOXKITE_URL"), .key_file = getenv("BOXKITE_KEY_FILE"),
		      .tls_cert = getenv("BOXKITE_TLS_CERT"), .prog = "bkctl" };
	const bkctl_command *cmd;
	char prog[64];
	int c, help = 0;

	if (!ctl.url || !ctl.url[0])
		ctl.url = BK_DEFAULT_URL;
	if (ctl.key_file && !ctl.key_file[0])
		ctl.key_file = NULL;
	if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
		printf("bkctl %s\n", BK_VERSION);
		return BKCTL_EXIT_OK;
	}
	/* Global options before the command name. */
	while ((c = bkctl_getopt(&ctl, NULL, argc, argv, &help)) != -1)
		return BKCTL_EXIT_USAGE;
	if (help) {
		usage(stdout);
		return BKCTL_EXIT_OK;
	}
	if (optind >= argc) {
		usage(stderr);
		return BKCTL_EXIT_USAGE;
	}
	cmd = command_named(argv[optind]);
	if (!cmd) {
		fprintf(stderr, "bkctl: unknown command '%s' ('bkctl help' lists them)\n", argv[optind]);
		return BKCTL_EXIT_USAGE;
	}
	snprintf(prog, sizeof(prog), "bkctl %s", cmd->name);
	ctl.prog = prog;
	argc -= optind;
	argv += optind;
	optind = 1;
	return cmd->run(&ctl, cmd, argc, argv);
}
