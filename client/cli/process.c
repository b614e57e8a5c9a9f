/* bkctl's background-process commands (start, ps, logs, send, close-stdin, kill, wait, prune) and
 * reset, each one or a few calls of libboxkite's process API. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bkctl.h"
#include "cleanup.h"
#include "clock.h"
#include "fullio.h"
#include "json.h"
#include "keys.h"

/* send: the most one ProcessWrite carries. */
#define SEND_CHUNK (1u << 20)

const char *bkctl_process_id_arg(const bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{
	if (!bkctl_args_fit(ctl, cmd, argc, argv, 1, 1))
		return NULL;
	if (!argv[optind][0]) {
		fprintf(stderr, "%s: the process ID is empty\n", ctl->prog);
		bkctl_usage_error(cmd);
		return NULL;
	}
	return argv[optind];
}

/* The options of a command that has none of its own (only the global ones): 0 (and *help set
 * when --help was shown), or the exit code of a bad command line. */
static int no_options(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv, int *help)
{
	while (bkctl_getopt(ctl, cmd, argc, argv, help) != -1)
		return BKCTL_EXIT_USAGE;
	return 0;
}

/* How a process ended (or that it runs), for a person: "running", "exited 3", "killed by SIGKILL
 * (timed out)". */
static void status_text(const bk_process_status *ps, char *out, size_t size)
{
	const char *why = ps->runtime_exceeded ? " (timed out)"
			  : ps->lease_expired  ? " (lease expired)"
			  : ps->oom_killed     ? " (out of memory)"
					       : "";
	const char *abbrev = ps->signal ? sigabbrev_np(ps->signal) : NULL;

	if (ps->running)
		snprintf(out, size, "running");
	else if (ps->signal && abbrev)
		snprintf(out, size, "killed by SIG%s%s", abbrev, why);
	else if (ps->signal)
		snprintf(out, size, "killed by signal %d%s", ps->signal, why);
	else
		snprintf(out, size, "exited %d%s", ps->exit_code, why);
}

void bkctl_process_status_json(bk_json *j, const char *key, const bk_process_status *ps)
{
	bk_json_begin_object(j, key);
	bk_json_bool(j, "running", ps->running);
	bk_json_int(j, "exit_code", ps->exit_code);
	bk_json_int(j, "signal", ps->signal);
	bk_json_bool(j, "runtime_exceeded", ps->runtime_exceeded);
	bk_json_bool(j, "lease_expired", ps->lease_expired);
	bk_json_bool(j, "oom_killed", ps->oom_killed);
	bk_json_uint(j, "duration_us", ps->duration_us);
	bk_json_end_object(j);
}

/* A signal by name (TERM, SIGTERM, term) or number (1-64): 0, or -1. */
static int parse_signal(const char *s, int *sig)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (end != s && !*end && !errno) {
		if (v < 1 || v > 64)
			return -1;
		*sig = (int)v;
		return 0;
	}
	if (strncasecmp(s, "SIG", 3) == 0)
		s += 3;
	for (int i = 1; i < NSIG; i++) {
		const char *name = sigabbrev_np(i);
		if (name && strcasecmp(name, s) == 0) {
			*sig = i;
			return 0;
		}
	}
	return -1;
}

int bkctl_start(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{
	_cleanup_free_ bk_env_var *env = calloc((size_t)argc, sizeof(*env));
	_cleanup_free_ const char **allow = calloc((size_t)argc, sizeof(*allow));
	bk_process_request rq = { 0 };
	bk_process_started started;
	bk_status st;
	bk_client *c;
	int opt, help = 0, code;
	unsigned long port;
	char *end;

	if (!env || !allow) {
		fprintf(stderr, "%s: out of memory\n", ctl->prog);
		return BKCTL_EXIT_STATUS;
	}
	while ((opt = bkctl_getopt(ctl, cmd, argc, argv, &help)) != -1) {
		switch (opt) {
		case BKCTL_OPT_EXPOSE:
			errno = 0;
			port = strtoul(optarg, &end, 10);
			if (end == optarg || *end || errno || port < 1 || port > 65535) {
				fprintf(stderr, "%s: --expose %s: expected a port, 1-65535\n", ctl->prog, optarg);
				return BKCTL_EXIT_USAGE;
			}
			rq.expose_port = (uint32_t)port;
			break;
		case BKCTL_OPT_TAG:
			rq.tag = optarg;
			break;
		case 't':
			rq.tty = true;
			break;
		case 'i':
			rq.stdin_open = true;
			break;
		case BKCTL_OPT_MAX_RUNTIME:
			if (bkctl_parse_seconds(optarg, &rq.max_runtime_ms) < 0) {
				fprintf(stderr, "%s: --max-runtime %s: expected seconds (0 < S <= 86400)\n", ctl->prog,
					optarg);
				return BKCTL_EXIT_USAGE;
			}
			break;
		case BKCTL_OPT_RING_SIZE:
			if (bkctl_parse_size(optarg, &rq.ring_size) < 0) {
				fprintf(stderr, "%s: --ring-size %s: expected bytes, e.g. 64K, 16M\n", ctl->prog, optarg);
				return BKCTL_EXIT_USAGE;
			}
			break;
		case BKCTL_OPT_LOSSLESS:
			rq.lossless = true;
			break;
		case BKCTL_OPT_ALLOW_NET:
			allow[rq.n_allow_net++] = optarg;
			break;
		case 'w':
			rq.cwd = optarg;
			break;
		case 'e':
			if (bkctl_parse_env(ctl, optarg, env, &rq.n_env) < 0)
				return BKCTL_EXIT_USAGE;
			break;
		case 's':
			rq.shell = optarg;
			break;
		default:
			return BKCTL_EXIT_USAGE;
		}
	}
	if (help)
		return BKCTL_EXIT_OK;
	if ((optind < argc) == (rq.shell != NULL)) {
		fprintf(stderr, "%s: give a command after --, or --shell STRING\n", ctl->prog);
		return bkctl_usage_error(cmd);
	}
	if (!rq.shell)
		rq.argv = (const char *const *)argv + optind;
	rq.env = env;
	rq.allow_net = rq.n_allow_net ? allow : NULL;
	/* The size of the terminal bkctl runs on, if it does; else the server's 24x80. */
	if (rq.tty && bkctl_terminal_size(&rq.rows, &rq.cols) < 0)
		rq.rows = rq.cols = 0;
	c = bkctl_connect(ctl, &code);
	if (!c)
		return code;
	code = bk_process_start(c, &rq, &started, &st);
	bk_client_close(c);
	if (code != BK_OK) {
		code = bkctl_fail(ctl, &st);
		if (st.code == BK_RESOURCE_EXHAUSTED)
			fprintf(stderr, "%s: ended processes keep their records and output until bkctl prune removes "
					"them\n",
				ctl->prog);
		return code;
	}
	if (ctl->json) {
		bk_json j = { .out = stdout };
		bk_json_begin_object(&j, NULL);
		bk_json_string(&j, "process_id", started.id);
		bk_json_string(&j, "isolation_profile", started.isolation_profile);
		bk_json_end_object(&j);
	} else {
		printf("%s\n", started.id);
	}
	return BKCTL_EXIT_OK;
}

/* ps's COMMAND column: argv, each word quoted as a shell would need it (names the sandbox or
 * another client chose are escaped on the way to a terminal). */
static void put_argv(const bk_process_info *p)
{
	for (size_t i = 0; i < p->argc; i++) {
		if (i)
			putchar(' ');
		bkctl_quote_name(stdout, p->argv[i]);
	}
}

int bkctl_ps(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{
	bk_process_info *procs;
	bk_status st;
	bk_client *c;
	size_t n;
	int help = 0, code = no_options(ctl, cmd, argc, argv, &help);

	if (code || help)
		return code;
	if (!bkctl_args_fit(ctl, cmd, argc, argv, 0, 0))
		return BKCTL_EXIT_USAGE;
	c = bkctl_connect(ctl, &code);
	if (!c)
		return code;
	code = bk_process_list(c, &procs, &n, &st);
	bk_client_close(c);
	if (code != BK_OK)
		return bkctl_fail(ctl, &st);
	if (ctl->json) {
		bk_json j = { .out = stdout };
		bk_json_begin_array(&j, NULL);
		for (size_t i = 0; i < n; i++) {
			bk_json_begin_object(&j, NULL);
			bk_json_string(&j, "process_id", procs[i].id);
			bk_json_begin_array(&j, "argv");
			for (size_t a = 0; a < procs[i].argc; a++)
				bk_json_bytes(&j, NULL, (const uint8_t *)procs[i].argv[a], strlen(procs[i].argv[a]));
			bk_json_end_array(&j);
			bk_json_bytes(&j, "tag", (const uint8_t *)procs[i].tag, strlen(procs[i].tag));
			bkctl_process_status_json(&j, "status", &procs[i].status);
			bk_json_uint(&j, "expose_port", procs[i].expose_port);
			bk_json_int(&j, "started_ms", procs[i].started_ms);
			bk_json_bool(&j, "tty", procs[i].tty);
			bk_json_uint(&j, "stdout_end", procs[i].stdout_end);
			bk_json_uint(&j, "stderr_end", procs[i].stderr_end);
			bk_json_end_object(&j);
		}
		bk_json_end_array(&j);
	} else {
		printf("%-6s %-34s %9s %5s %-12s %s\n", "ID", "STATUS", "DURATION", "PORT", "TAG", "COMMAND");
		for (size_t i = 0; i < n; i++) {
			char status[64], port[12] = "-";
			if (procs[i].expose_port)
				snprintf(port, sizeof(port), "%u", procs[i].expose_port);
			status_text(&procs[i].status, status, sizeof(status));
			printf("%-6s %-34s %8.1fs %5s ", procs[i].id, status,
			       (double)procs[i].status.duration_us / 1e6, port);
			if (procs[i].tag[0]) {
				bkctl_quote_name(stdout, procs[i].tag);
				putchar(' ');
			} else {
				printf("%-12s ", "-");
			}
			put_argv(&procs[i]);
			putchar('\n');
		}
	}
	bk_process_list_free(procs, n);
	return BKCTL_EXIT_OK;
}

int bkctl_process_now(bk_client *c, const char *id, uint64_t ends[2], bool *running, uint64_t *epoch, bk_status *st)
{
	bk_process_info *procs;
	size_t n;
	int code = bk_process_list(c, &procs, &n, st);

	if (code != BK_OK)
		return code;
	ends[0] = ends[1] = 0;
	*running = false;
	*epoch = 0;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(procs[i].id, id) == 0) {
			ends[0] = procs[i].stdout_end;
			ends[1] = procs[i].stderr_end;
			*running = procs[i].status.running;
			*epoch = procs[i].epoch;
		}
	}
	bk_process_list_free(procs, n);
	return BK_OK;
}

int bkctl_send(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{
	_cleanup_free_ uint8_t *buf = NULL;
	_cleanup_close_ int file = -1;
	uint64_t total = 0, written, ends[2], epoch;
	bool close_after = false, running;
	const char *id, *path = "-";
	int opt, help = 0, code = BK_OK, fd = STDIN_FILENO;
	bk_status st;
	bk_client *c;

	while ((opt = bkctl_getopt(ctl, cmd, argc, argv, &help)) != -1) {
		if (opt != BKCTL_OPT_CLOSE)
			return BKCTL_EXIT_USAGE;
		close_after = true;
	}
	if (help)
		return BKCTL_EXIT_OK;
	if (!bkctl_args_fit(ctl, cmd, argc, argv, 1, 2))
		return BKCTL_EXIT_USAGE;
	if (optind == argc - 2) {
		path = argv[argc - 1];
		argc--;
	}
	if (!(id = bkctl_process_id_arg(ctl, cmd, argc, argv)))
		return BKCTL_EXIT_USAGE;
	if (strcmp(path, "-") != 0) {
		file = open(path, O_RDONLY | O_CLOEXEC);
		if (file < 0) {
			bk_status_errno(&st, errno, "%s", path);
			return bkctl_fail(ctl, &st);
		}
		fd = file;
	}
	buf = malloc(SEND_CHUNK);
	if (!buf) {
		fprintf(stderr, "%s: out of memory\n", ctl->prog);
		return BKCTL_EXIT_STATUS;
	}
	c = bkctl_connect(ctl, &code);
	if (!c)
		return code;
	code = bkctl_process_now(c, id, ends, &running, &epoch, &st);
	/* A chunk at a time, as it comes (a pipe may never end): each in once the last is. */
	while (code == BK_OK) {
		ssize_t n = read(fd, buf, SEND_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			bk_status_errno(&st, errno, "reading %s", strcmp(path, "-") ? path : "our standard input");
			code = st.code;
			break;
		}
		if (n == 0) {
			if (close_after)
				code = bk_process_close_stdin(c, id, epoch, &st);
			break;
		}
		code = bk_process_write(c, id, epoch, buf, (size_t)n, false, &written, &st);
		total += written;
		if (code != BK_OK)
			break;
	}
	bk_client_close(c);
	if (code != BK_OK) {
		code = bkctl_fail(ctl, &st);
		if (st.code == BK_FAILED_PRECONDITION)
			fprintf(stderr, "%s: only a process started with -i (bkctl start -i) whose stdin is open takes "
					"input\n",
				ctl->prog);
		fprintf(stderr, "%s: %llu bytes were written before this\n", ctl->prog, (unsigned long long)total);
		return code;
	}
	if (ctl->json) {
		bk_json j = { .out = stdout };
		bk_json_begin_object(&j, NULL);
		bk_json_uint(&j, "written", total);
		bk_json_bool(&j, "closed", close_after);
		bk_json_end_object(&j);
	}
	return BKCTL_EXIT_OK;
}

int bkctl_close_stdin(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{
	const char *id;
	bk_status st;
	bk_client *c;
	int help = 0, code = no_options(ctl, cmd, argc, argv, &help);

	if (code || help)
		return code;
	if (!(id = bkctl_process_id_arg(ctl, cmd, argc, argv)))
		return BKCTL_EXIT_USAGE;
	c = bkctl_connect(ctl, &code);
	if (!c)
		return code;
	code = bk_process_close_stdin(c, id, 0, &st);
	bk_client_close(c);
	if (code != BK_OK)
		return bkctl_fail(ctl, &st);
	if (ctl->json) {
		bk_json j = { .out = stdout };
		bk_json_begin_object(&j, NULL);
		bk_json_string(&j, "process_id", id);
		bk_json_bool(&j, "closed", true);
		bk_json_end_object(&j);
	}
	return BKCTL_EXIT_OK;
}

int bkctl_kill(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{
	uint32_t kill_after_ms = 0;
	int opt, help = 0, code, sig = SIGTERM;
	const char *id;
	bk_status st;
	bk_client *c;

	while ((opt = bkctl_getopt(ctl, cmd, argc, argv, &help)) != -1) {
		switch (opt) {
		case 's':
			if (parse_signal(optarg, &sig) < 0) {
				fprintf(stderr, "%s: -s %s: expected a signal name (TERM, SIGINT, ...) or number 1-64\n",
					ctl->prog, optarg);
				return BKCTL_EXIT_USAGE;
			}
			break;
		case BKCTL_OPT_KILL_AFTER:
			if (bkctl_parse_seconds(optarg, &kill_after_ms) < 0) {
				fprintf(stderr, "%s: --kill-after %s: expected seconds (0 < S <= 86400)\n", ctl->prog,
					optarg);
				return BKCTL_EXIT_USAGE;
			}
			break;
		default:
			return BKCTL_EXIT_USAGE;
		}
	}
	if (help)
		return BKCTL_EXIT_OK;
	if (!(id = bkctl_process_id_arg(ctl, cmd, argc, argv)))
		return BKCTL_EXIT_USAGE;
	c = bkctl_connect(ctl, &code);
	if (!c)
		return code;
	code = bk_process_signal(c, id, 0, sig, kill_after_ms, &st);
	bk_client_close(c);
	if (code != BK_OK) {
		code = bkctl_fail(ctl, &st);
		if (st.code == BK_FAILED_PRECONDITION)
			fprintf(stderr, "%s: %s has ended already (bkctl ps shows how)\n", ctl->prog, id);
		return code;
	}
	if (ctl->json) {
		bk_json j = { .out = stdout };
		bk_json_begin_object(&j, NULL);
		bk_json_string(&j, "process_id", id);
		bk_json_int(&j, "signal", sig);
		bk_json_uint(&j, "kill_after_ms", kill_after_ms);
		bk_json_end_object(&j);
	}
	return BKCTL_EXIT_OK;
}

int bkctl_wait(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{
	uint32_t timeout_ms = 0;
	uint64_t epoch = 0;
	struct timespec start;
	bk_process_status ps;
	const char *id;
	bk_status st;
	bk_client *c;
	int opt, help = 0, code;

	while ((opt = bkctl_getopt(ctl, cmd, argc, argv, &help)) != -1) {
		if (opt != BKCTL_OPT_TIMEOUT || bkctl_parse_seconds(optarg, &timeout_ms) < 0) {
			if (opt == BKCTL_OPT_TIMEOUT)
				fprintf(stderr, "%s: --timeout %s: expected seconds (0 < S <= 86400)\n", ctl->prog, optarg);
			return BKCTL_EXIT_USAGE;
		}
	}
	if (help)
		return BKCTL_EXIT_OK;
	if (!(id = bkctl_process_id_arg(ctl, cmd, argc, argv)))
		return BKCTL_EXIT_USAGE;
	c = bkctl_connect(ctl, &code);
	if (!c)
		return code;
	clock_gettime(CLOCK_MONOTONIC, &start);
	/* Long-polls of at most the server's maximum, until it ends or our --timeout is up; each after
	 * the first names the epoch the first found, so that a boxkited restarted meanwhile is not
	 * waited on for its own process of that id. */
	for (;;) {
		uint64_t waited_ms = bk_elapsed_us(&start) / 1000;
		uint32_t left = timeout_ms ? (waited_ms >= timeout_ms ? 0 : timeout_ms - (uint32_t)waited_ms)
					   : BK_PROCESS_LONG_POLL_MAX_MS;
		code = bk_process_wait(c, id, &epoch, left, &ps, &st);
		if (code != BK_OK || !ps.running || (timeout_ms && left == 0))
			break;
	}
	bk_client_close(c);
	if (code != BK_OK)
		return bkctl_fail(ctl, &st);
	if (ctl->json) {
		bk_json j = { .out = stdout };
		bk_json_begin_object(&j, NULL);
		bk_json_string(&j, "process_id", id);
		bkctl_process_status_json(&j, "status", &ps);
		bk_json_end_object(&j);
	} else {
		char text[64];
		status_text(&ps, text, sizeof(text));
		printf("%s %s\n", id, text);
	}
	/* Still running after --timeout: what the caller waited for did not happen. */
	return ps.running ? BKCTL_EXIT_STATUS : BKCTL_EXIT_OK;
}

int bkctl_prune(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{
	bk_process_info *procs = NULL;
	bkctl_failures f = { 0 };
	size_t n = 0, removed = 0;
	bk_status st;
	bk_client *c;
	int help = 0, code = no_options(ctl, cmd, argc, argv, &help);

	if (code || help)
		return code;
	c = bkctl_connect(ctl, &code);
	if (!c)
		return code;
	if (optind == argc) {
		/* No id: every ended process. */
		code = bk_process_list(c, &procs, &n, &st);
		if (code != BK_OK) {
			bk_client_close(c);
			return bkctl_fail(ctl, &st);
		}
		for (size_t i = 0; i < n; i++) {
			if (procs[i].status.running)
				continue;
			if (bk_process_remove(c, procs[i].id, procs[i].epoch, &st) == BK_OK)
				removed++;
			else
				bkctl_failures_add(ctl, &f, procs[i].id, &st, NULL, NULL);
		}
		bk_process_list_free(procs, n);
	} else {
		for (int i = optind; i < argc; i++) {
			if (bk_process_remove(c, argv[i], 0, &st) == BK_OK)
				removed++;
			else
				bkctl_failures_add(ctl, &f, argv[i], &st, NULL, NULL);
		}
	}
	bk_client_close(c);
	for (size_t i = 0; i < f.n; i++) {
		if (f.v[i].st.code == BK_FAILED_PRECONDITION) {
			fprintf(stderr, "%s: a running process is removed once it ended: bkctl kill ID, then prune\n",
				ctl->prog);
			break;
		}
	}
	if (ctl->json) {
		bk_json j = { .out = stdout };
		bk_json_begin_object(&j, NULL);
		bk_json_uint(&j, "removed", removed);
		bk_json_uint(&j, "failed", f.n);
		bk_json_end_object(&j);
	}
	code = f.exit_code;
	bkctl_failures_free(&f);
	return code;
}

/* reset --new-key FILE: the file's first key. */
static int load_new_key(const bkctl *ctl, const char *path, bk_keyring **ring)
{
	bk_error *err = NULL;
	bk_status st;

	if (bk_keyring_load(path, ring, &err) < 0) {
		bk_status_set(&st, err->status, 0, false, "--new-key: %s", bk_error_msg(err));
		bk_error_free(err);
		return bkctl_fail(ctl, &st);
	}
	return 0;
}

int bkctl_reset(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{
	_cleanup_(bk_keyring_freep) bk_keyring *ring = NULL;
	const char *new_key_path = NULL;
	bk_reset_request rq = { 0 };
	bk_reset_result res;
	bk_status st;
	bk_client *c;
	int opt, help = 0, code;

	while ((opt = bkctl_getopt(ctl, cmd, argc, argv, &help)) != -1) {
		if (opt != BKCTL_OPT_NEW_KEY)
			return BKCTL_EXIT_USAGE;
		new_key_path = optarg;
	}
	if (help)
		return BKCTL_EXIT_OK;
	if (!bkctl_args_fit(ctl, cmd, argc, argv, 0, 0))
		return BKCTL_EXIT_USAGE;
	if (new_key_path) {
		code = load_new_key(ctl, new_key_path, &ring);
		if (code)
			return code;
		rq.new_key_id = ring->keys[0].id;
		rq.new_key = ring->keys[0].secret;
		rq.new_key_len = ring->keys[0].len;
	}
	c = bkctl_connect(ctl, &code);
	if (!c)
		return code;
	code = bk_reset(c, &rq, &res, &st);
	bk_client_close(c);
	if (code != BK_OK) {
		code = bkctl_fail(ctl, &st);
		if (code == BKCTL_EXIT_STATUS && st.code != BK_FAILED_PRECONDITION && st.code != BK_INVALID_ARGUMENT &&
		    st.detail != BK_DETAIL_CLAIM_KEY)
			fprintf(stderr, "%s: a reset that cannot prove the sandbox clean leaves boxkited refusing all "
					"work: discard this sandbox (delete its pod) rather than reuse it\n",
				ctl->prog);
		return code;
	}
	if (ctl->json) {
		bk_json j = { .out = stdout };
		bk_json_begin_object(&j, NULL);
		bk_json_uint(&j, "processes_killed", res.processes_killed);
		bk_json_uint(&j, "entries_removed", res.entries_removed);
		if (new_key_path) {
			bk_json_string(&j, "key_id", rq.new_key_id);
			bk_json_string(&j, "key_file", new_key_path);
		}
		bk_json_end_object(&j);
	} else {
		printf("reset: %llu processes killed, %llu entries removed, workspace and tmp verified empty\n",
		       (unsigned long long)res.processes_killed, (unsigned long long)res.entries_removed);
		if (new_key_path)
			printf("reset: boxkited now accepts only key '%s' of %s; the previous key is refused\n"
			       "reset: from now on: export BOXKITE_KEY_FILE=%s (or --key-file %s)\n",
			       rq.new_key_id, new_key_path, new_key_path, new_key_path);
	}
	return BKCTL_EXIT_OK;
}
