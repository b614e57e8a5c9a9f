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

static const bkctl_command commands[] = {
	{ "keygen", bkctl_keygen, "write a new key file (mode 0600)", "[--id ID] PATH",
	  "  --id ID              key id to write (default: k1)\n",
	  "A missing parent directory is made, mode 0700. An existing file is never replaced.\n" },
	{ "health", bkctl_health, "check that boxkited answers, and whether our key works", "",
	  "  --wait S             retry for up to S seconds until boxkited answers with its sandbox ready\n",
	  "" },
	{ "exec", bkctl_exec, "run a command in the sandbox, its output streamed as it is produced",
	  "-- CMD [ARGS...] | --shell STRING",
	  "  -i, --stdin          stream our standard input to the command (as docker exec -i); without\n"
	  "                       it the command's stdin is empty\n"
	  "  -t, --tty            a terminal for the command, the size of ours (our stdin must be one);\n"
	  "                       with -i ours is in raw mode: bkctl exec -it -- bash is a shell\n"
	  "  -w, --workdir DIR    working directory: relative to /workspace, or absolute under\n"
	  "                       /workspace or /tmp (also -C, --cwd)\n"
	  "  -e, --env NAME=VALUE set a variable (repeatable)\n"
	  "  -s, --shell STRING   run STRING with /bin/sh -c\n"
	  "  --timeout S          kill the command (and everything it started) after S seconds\n"
	  "                       (default: none, or boxkited's --process-runtime-max; with -o json or\n"
	  "                       --output-limit: boxkited's --exec-timeout, 10 minutes unless set)\n"
	  "  --output-limit BYTES collect the output with one Exec call instead of streaming it, keeping\n"
	  "                       BYTES of stdout and of stderr each, e.g. 64M (default: boxkited's\n"
	  "                       --exec-output, 1M; at most its --exec-output-max)\n"
	  "  --raw                the command's output as it is, control sequences too (without -t, on\n"
	  "                       a terminal they are shown escaped, \\x1b: they are the command's)\n"
	  "  --allow-net HOST:PORT  let the command reach HOST:PORT through the sidecar's egress proxy\n"
	  "                       (a name, *.DOMAIN, an address or CIDR; a port or *), within\n"
	  "                       boxkited's --egress-allow; repeatable. Without it: no network\n",
	  "^C is passed to the command as SIGINT; a second ^C kills it and everything it started;\n"
	  "SIGTERM or SIGHUP to bkctl stops it (SIGTERM, SIGKILL 5 s later). A bkctl that dies or loses\n"
	  "boxkited leaves nothing running: the command is killed 15 s after bkctl last called. With\n"
	  "-o json (one Exec call) stdin is read whole first, at most 8 MiB. Exit status: the command's;\n"
	  "128+N if signal N killed it; 124 on timeout; 125 if bkctl or the server failed (the command\n"
	  "did not run, or was killed when bkctl could not follow it).\n" },
	{ "start", bkctl_start, "start a background process and print its id", "-- CMD [ARGS...] | --shell STRING",
	  "  -i, --stdin          keep its stdin open for bkctl send (else it reads EOF)\n"
	  "  -t, --tty            a terminal instead of pipes (its stderr is then on stdout)\n"
	  "  --expose PORT        run it in the sandbox's network namespace, not a fresh one, so that\n"
	  "                       the sidecar reaches PORT on 127.0.0.1\n"
	  "  --tag TAG            a label, shown by ps\n"
	  "  --max-runtime S      kill it (and everything it started) after S seconds\n"
	  "  --ring-size BYTES    output kept per stream for logs, e.g. 16M (default 1M, at most 64M)\n"
	  "  --lossless           when a ring is full of output nobody read, the process waits for a\n"
	  "                       reader (logs -f) instead of losing its oldest bytes\n"
	  "  -w, --workdir DIR    working directory, as for exec\n"
	  "  -e, --env NAME=VALUE set a variable (repeatable)\n"
	  "  -s, --shell STRING   run STRING with /bin/sh -c\n"
	  "  --allow-net HOST:PORT  as for exec (not with --expose)\n",
	  "It runs with exec's isolation until it ends, is killed, or boxkited resets; its record stays\n"
	  "(ps, logs, wait) until bkctl prune.\n" },
	{ "ps", bkctl_ps, "list background processes, running and ended", "", "", "" },
	{ "logs", bkctl_logs, "print a background process's output", "ID",
	  "  -f, --follow         go on printing as it is produced, until the process ends\n"
	  "  --from N             from byte offset N of the stream (default 0)\n"
	  "  --stderr             its stderr instead of its stdout\n"
	  "  --raw                the output as it is, control sequences too (on a terminal they are\n"
	  "                       shown escaped, \\x1b: they are the command's)\n",
	  "Output the ring dropped before it was read is reported on stderr as bytes lost, with the\n"
	  "offset output goes on from. -o json prints one read (at most 1 MiB) with the offset to go on\n"
	  "from (\"next\").\n" },
	{ "send", bkctl_send, "write to a background process's stdin", "ID [FILE]",
	  "  --close              close its stdin after the data (the command reads EOF)\n",
	  "Reads FILE (or our standard input, or - for it) to its end, in chunks as they come.\n" },
	{ "close-stdin", bkctl_close_stdin, "close a background process's stdin", "ID", "", "" },
	{ "kill", bkctl_kill, "send a signal to a background process and everything it started", "ID",
	  "  -s, --signal SIG     the signal, by name (TERM, INT, KILL, ...) or number (default TERM)\n"
	  "  --kill-after S       SIGKILL it S seconds later if it still runs (boxkited's timer)\n",
	  "" },
	{ "wait", bkctl_wait, "wait for a background process to end and print how it ended", "ID",
	  "  --timeout S          give up after S seconds (exit 1 if it still runs)\n", "" },
	{ "prune", bkctl_prune, "remove ended processes' records and output", "[ID...]", "",
	  "Without an id, every ended process. A running one is refused: bkctl kill it first.\n" },
	{ "reset", bkctl_reset, "kill every process and empty the workspace and tmp, for the next tenant", "",
	  "  --new-key FILE       install the first key of FILE (bkctl keygen) as the only key:\n"
	  "                       the current one is refused from then on\n",
	  "Also forgets the session (output rings, uploads, replay answers). A reset that cannot prove\n"
	  "the sandbox empty fails, and boxkited then refuses all work until it is discarded. The new\n"
	  "key travels in the request: refused on a plain tcp:// URL.\n" },
	{ "doctor", bkctl_doctor, "show the isolation a command in the sandbox really gets", "", "",
	  "Runs a probe as a sandboxed command and checks what it sees against SECURITY.md (layer 3):\n"
	  "identity, capabilities, no_new_privs, seccomp, network, PID namespace, cgroup, rlimits,\n"
	  "writable mounts. Exits 1 if a check fails.\n" },
	{ "cp", bkctl_cp, "copy files and trees into or out of the sandbox", "SRC... :DST | :SRC... DST",
	  "  -r, --recursive      copy directory trees, their symlinks as symlinks\n"
	  "  -n, --no-clobber     refuse to replace an existing file\n"
	  "  -p, --keep-mode      keep the permission bits (rwx only)\n"
	  "  -z, --compress       zstd on the wire\n"
	  "  --sha256             also the plain SHA-256 of each file, computed on both sides (one more\n"
	  "                       pass over it each), checked, and printed as sha256sum prints it\n"
	  "  -j, --jobs N         files in flight at once (default 8)\n"
	  "  --resume ID          finish an interrupted upload of one file (bkctl prints the command)\n",
	  "A sandbox path is :PATH, relative to /workspace or absolute under /workspace or /tmp. A file\n"
	  "copied onto a directory goes inside it; missing parents are made. A symlink whose target\n"
	  "leads out of the workspace is refused on upload. Exit status as the other commands, from the\n"
	  "worst failure; the others are still copied.\n" },
	{ "ls", bkctl_ls, "list a sandbox directory", "[PATH]",
	  "  -l, --long           type and mode, uid:gid, size, mtime, name, symlink target\n"
	  "  -a, --all            include names starting with '.'\n",
	  "On a terminal, names are quoted as GNU ls quotes them; -o json gives the exact bytes.\n" },
	{ "stat", bkctl_stat, "show a sandbox file's type, size, mode, owner and mtime", "PATH", "", "" },
	{ "rm", bkctl_rm, "remove sandbox files or trees", "PATH...",
	  "  -r, --recursive      remove directories and their contents\n", "" },
	{ "mkdir", bkctl_mkdir, "make sandbox directories", "PATH...",
	  "  -p, --parents        make missing parents; an existing directory is no error\n"
	  "  -m, --mode MODE      octal permission bits (default 755)\n",
	  "" },
	{ "kube", bkctl_kube, "print a sandbox's Secret (fresh key and TLS certificate) and pod for kubectl apply -f -",
	  "NAME",
	  "  -n, --namespace NS   the namespace (default boxkite)\n"
	  "  --template FILE      the pod to render instead of deploy/sandbox/pod.yaml (- for stdin),\n"
	  "                       e.g. kubectl kustomize of an overlay of deploy/sandbox\n"
	  "  --secret             the Secret alone, e.g. a warm pool's (its key is the claim key)\n",
	  "" },
	{ "verify", bkctl_verify, "check the three network-isolation layers, each from its vantage point",
	  "",
	  "  --pod NAME           the sandbox pod, for the kubectl commands it prints\n"
	  "  -n, --namespace NS   its namespace (default boxkite)\n",
	  "Layer 1 from inside an exec, layer 3 against the port without the key; layer 2 (and the\n"
	  "metadata endpoint) printed as commands to run on your cluster. Exits 1 if a check failed.\n" },
	{ "preview", bkctl_preview, "print a URL that reaches a port a background process exposes", "PORT",
	  "  --ttl SECONDS        how long the URL works (default 3600; the server allows at most its\n"
	  "                       --preview-ttl-max)\n"
	  "  --base URL           boxkited's --preview-listen as the browser reaches it (env\n"
	  "                       BOXKITE_PREVIEW_URL; default http://127.0.0.1:8081)\n",
	  "The token is signed here with the key (--key-file); anyone holding the URL reaches PORT\n"
	  "until it expires. Start the process with bkctl start --expose PORT.\n" },
	{ "watch", bkctl_watch, "print what changes under a sandbox directory, as it changes", "[PATH]",
	  "  -n, --count N        stop after N changes (exit 0)\n"
	  "  --timeout S          stop after S seconds (exit 0)\n",
	  "A line per change, recursively, paths relative to PATH (default /workspace), quoted as ls\n"
	  "quotes names (a directory's with a trailing /): created, modified, closed (after writing),\n"
	  "removed, moved A -> B, moved in, moved out, and overflow (changes were lost: list again).\n"
	  "-o json prints a JSON object per line: first {\"watching\", \"directories\"}, then one per\n"
	  "change ({\"kind\", \"path\", \"to\", \"directory\"} or {\"kind\":\"overflow\", \"lost\"}), exact\n"
	  "bytes. ^C, SIGTERM or SIGHUP stop the watch and exit 0. Exits 1 when the watch ends otherwise\n"
	  "(its directory removed, a reset, the bound on directories), saying why on stderr.\n" },
	{ "mv", bkctl_mv, "move or rename in the sandbox", "FROM TO",
	  "  -f, --force          replace an existing TO\n", "Onto an existing directory, FROM moves inside it.\n" },
	{ "sync", bkctl_sync, "push the workspace to a snapshot store, pull it back, list snapshots",
	  "push [--to URL] [--id ID] [-x PATTERN]... | pull [--from URL] [--id ID] [--mirror] | ls [--from URL] |\n"
	  "       prefix",
	  "  --to, --from URL     the store: a --sync-store of boxkited's, or a prefix under one\n"
	  "                       (default: its first)\n"
	  "  --id ID              push: the snapshot's id (default: made of the time); pull: which\n"
	  "                       snapshot (default: the latest)\n"
	  "  --path PATH          the tree, a sandbox directory (default /workspace)\n"
	  "  -x, --exclude PAT    push: leave out entries matching PAT (fnmatch; without '/', a name\n"
	  "                       anywhere); pull --mirror: leave them alone. Repeatable\n"
	  "  --default-excludes   push: also node_modules, .cache, __pycache__ and other caches\n"
	  "  --mirror             pull: also remove what the snapshot does not have\n",
	  "A snapshot is content-addressed: a push uploads only the blocks the store lacks. On a\n"
	  "terminal a progress line shows on stderr; -o json prints the counts. Snapshots are the\n"
	  "key's: boxkited keeps them under the key's store prefix (sync prefix prints it, for\n"
	  "an operator's --restore-from STORE/PREFIX), and another key sees none of them.\n" },
};

/* bkctl's own usage: every command, and the global options. */
static void usage(FILE *out)
{
	fprintf(out, "Usage: bkctl [global options] COMMAND [options] [args]\n\nCommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  %-11s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "\n%s\n'bkctl COMMAND --help' for a command's options. See bkctl(1).\n", bkctl_global_help);
}

int bkctl_keygen(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{
	static const struct option longopts[] = { { "id", required_argument, NULL, 'i' }, { 0 } };
	const char *id = "k1", *path;
	char dir[4096], failed[4096] = "";
	bk_error *err = NULL;
	bk_status st;
	int c, help = 0, rv;

	while ((c = bkctl_getopt(ctl, cmd, argc, argv, "", longopts, &help)) != -1) {
		if (c == 'i')
			id = optarg;
		else
			return BKCTL_EXIT_USAGE;
	}
	if (help)
		return BKCTL_EXIT_OK;
	if (optind != argc - 1) {
		bkctl_usage(stderr, cmd);
		return BKCTL_EXIT_USAGE;
	}
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
	static const struct option longopts[] = { { "wait", required_argument, NULL, 'W' }, { 0 } };
	struct timespec start;
	uint32_t wait_ms = 0;
	bk_health_info h;
	bk_status st;
	int opt, help = 0, code;

	while ((opt = bkctl_getopt(ctl, cmd, argc, argv, "", longopts, &help)) != -1) {
		if (opt != 'W' || bkctl_parse_seconds(optarg, &wait_ms) < 0) {
			if (opt == 'W')
				fprintf(stderr, "%s: --wait %s: expected seconds (0 < S <= 86400)\n", ctl->prog, optarg);
			return BKCTL_EXIT_USAGE;
		}
	}
	if (help)
		return BKCTL_EXIT_OK;
	if (optind != argc) {
		bkctl_usage(stderr, cmd);
		return BKCTL_EXIT_USAGE;
	}
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
	while ((c = bkctl_getopt(&ctl, NULL, argc, argv, "", NULL, &help)) != -1)
		return BKCTL_EXIT_USAGE;
	if (help) {
		usage(stdout);
		return BKCTL_EXIT_OK;
	}
	if (optind >= argc) {
		usage(stderr);
		return BKCTL_EXIT_USAGE;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (strcmp(argv[optind], commands[i].name) == 0) {
			int sub_argc = argc - optind;
			char **sub_argv = argv + optind;
			snprintf(prog, sizeof(prog), "bkctl %s", commands[i].name);
			ctl.prog = prog;
			optind = 1;
			return commands[i].run(&ctl, &commands[i], sub_argc, sub_argv);
		}
	}
	fprintf(stderr, "bkctl: unknown command '%s'\n", argv[optind]);
	usage(stderr);
	return BKCTL_EXIT_USAGE;
}
