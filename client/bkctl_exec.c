/* bkctl exec: run one command in the sandbox, and end with its exit status. */
#include <errno.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bkctl.h"
#include "cleanup.h"
#include "fullio.h"
#include "json.h"

#define STDIN_MAX (8u << 20) /* what one Exec request may carry (the server's limit) */

static void print_result_json(const bk_exec_result *r)
{
	bk_json j = { .out = stdout };

	bk_json_begin_object(&j, NULL);
	bk_json_int(&j, "exit_code", r->exit_code);
	bk_json_int(&j, "signal", r->signal);
	bk_json_bool(&j, "timed_out", r->timed_out);
	bk_json_bool(&j, "oom_killed", r->oom_killed);
	bk_json_bytes(&j, "stdout", r->stdout_data, r->stdout_len);
	bk_json_bytes(&j, "stderr", r->stderr_data, r->stderr_len);
	bk_json_bool(&j, "stdout_truncated", r->stdout_truncated);
	bk_json_bool(&j, "stderr_truncated", r->stderr_truncated);
	bk_json_uint(&j, "stdout_dropped", r->stdout_dropped);
	bk_json_uint(&j, "stderr_dropped", r->stderr_dropped);
	bk_json_uint(&j, "duration_us", r->duration_us);
	bk_json_string(&j, "isolation_profile", r->isolation_profile);
	bk_json_end_object(&j);
}

/* The exit status bkctl exec ends with: the command's own, 128+signal, or 124 on timeout. */
static int result_exit(const bk_exec_result *r)
{
	if (r->timed_out)
		return BKCTL_EXIT_EXEC_TIMEOUT;
	if (r->signal)
		return 128 + r->signal;
	return r->exit_code;
}

/* bkctl's own failures in exec exit 125, so that they cannot pass for the command's status. */
static int exec_fail(const bkctl *ctl, const bk_status *st)
{
	bkctl_fail(ctl, st);
	return BKCTL_EXIT_EXEC_FAILED;
}

/* Our standard input, whole (-i): what one Exec request may carry. 0, or the exit code. */
static int read_stdin(const bkctl *ctl, uint8_t **in, size_t *len)
{
	int r = bk_read_all(STDIN_FILENO, STDIN_MAX, in, len);

	if (r < 0) {
		fprintf(stderr, "%s: -i: reading our standard input: %s\n", ctl->prog,
			r == -EFBIG ? "more than 8 MiB (one request's limit)" : strerror(-r));
		return BKCTL_EXIT_EXEC_FAILED;
	}
	return 0;
}

/* A pipe on our stdin and no -i: the command would not see what is being piped, say so (the
 * data is not read: docker exec without -i does the same, silently). */
static void warn_unread_pipe(const bkctl *ctl)
{
	struct stat sb;

	if (fstat(STDIN_FILENO, &sb) == 0 && S_ISFIFO(sb.st_mode))
		fprintf(stderr, "%s: warning: standard input is a pipe, but without -i the command does not read it\n",
			ctl->prog);
}

int bkctl_exec(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{
	enum { OPT_OUTPUT_LIMIT = 2000 };
	static const struct option longopts[] = {
		{ "timeout", required_argument, NULL, 'T' }, { "workdir", required_argument, NULL, 'w' },
		{ "cwd", required_argument, NULL, 'C' },     { "env", required_argument, NULL, 'e' },
		{ "stdin", no_argument, NULL, 'i' },         { "interactive", no_argument, NULL, 'i' },
		{ "shell", required_argument, NULL, 's' },   { "tty", no_argument, NULL, 't' },
		{ "output-limit", required_argument, NULL, OPT_OUTPUT_LIMIT },
		{ 0 },
	};
	_cleanup_free_ bk_env_var *env = calloc((size_t)argc, sizeof(*env));
	_cleanup_free_ uint8_t *in = NULL;
	bk_exec_request rq = { 0 };
	bool want_stdin = false;
	bk_exec_result res;
	bk_status st;
	bk_client *c;
	int opt, help = 0, code;

	if (!env) {
		fprintf(stderr, "%s: out of memory\n", ctl->prog);
		return BKCTL_EXIT_EXEC_FAILED;
	}
	while ((opt = bkctl_getopt(ctl, cmd, argc, argv, "w:C:e:is:t", longopts, &help)) != -1) {
		char *eq;
		switch (opt) {
		case 'T':
			if (bkctl_parse_seconds(optarg, &rq.timeout_ms) < 0) {
				fprintf(stderr, "%s: --timeout %s: expected seconds (0 < S <= 86400)\n", ctl->prog, optarg);
				goto usage;
			}
			break;
		case 'w':
		case 'C':
			rq.cwd = optarg;
			break;
		case 'e':
			eq = strchr(optarg, '=');
			if (!eq) {
				fprintf(stderr, "%s: -e %s: expected NAME=VALUE\n", ctl->prog, optarg);
				goto usage;
			}
			*eq = '\0';
			env[rq.n_env++] = (bk_env_var){ .name = optarg, .value = eq + 1 };
			break;
		case 'i':
			want_stdin = true;
			break;
		case 's':
			rq.shell = optarg;
			break;
		case 't':
			/* -t is docker's and kubectl's terminal, which comes with the process rpcs; it must
			 * never mean anything else meanwhile. */
			fprintf(stderr, "%s: -t (a terminal for the command) is not supported yet; run without it "
					"(use -i to pass standard input, --timeout S for a time limit)\n",
				ctl->prog);
			return BKCTL_EXIT_EXEC_FAILED;
		case OPT_OUTPUT_LIMIT:
			if (bkctl_parse_size(optarg, &rq.stdout_limit) < 0) {
				fprintf(stderr, "%s: --output-limit %s: expected bytes, e.g. 4096, 64K, 16M, 1G\n",
					ctl->prog, optarg);
				goto usage;
			}
			rq.stderr_limit = rq.stdout_limit;
			break;
		default:
			goto usage;
		}
	}
	if (help)
		return BKCTL_EXIT_OK;
	if ((optind < argc) == (rq.shell != NULL)) {
		fprintf(stderr, "%s: give a command after --, or --shell STRING\n", ctl->prog);
		goto usage;
	}
	if (!rq.shell)
		rq.argv = (const char *const *)argv + optind;
	rq.env = env;
	if (want_stdin) {
		code = read_stdin(ctl, &in, &rq.stdin_len);
		if (code)
			return code;
		rq.stdin_data = in;
	} else {
		warn_unread_pipe(ctl);
	}
	c = bkctl_connect(ctl, &code);
	if (!c)
		return BKCTL_EXIT_EXEC_FAILED;
	code = bk_exec(c, &rq, &res, &st);
	bk_client_close(c);
	if (code != BK_OK)
		return exec_fail(ctl, &st);
	if (ctl->json) {
		print_result_json(&res);
	} else {
		/* Where our stdout went away (a closed pipe), there is no one to tell. */
		(void)bk_write_full(STDOUT_FILENO, res.stdout_data, res.stdout_len);
		(void)bk_write_full(STDERR_FILENO, res.stderr_data, res.stderr_len);
		if (res.stdout_truncated || res.stderr_truncated)
			fprintf(stderr, "%s: output truncated: %llu stdout and %llu stderr bytes dropped\n", ctl->prog,
				(unsigned long long)res.stdout_dropped, (unsigned long long)res.stderr_dropped);
		if (res.timed_out)
			fprintf(stderr, "%s: timed out after %.1f s: the command and everything it started were killed\n",
				ctl->prog, (double)res.duration_us / 1e6);
		else if (res.oom_killed)
			fprintf(stderr, "%s: killed by the out-of-memory killer (memory limit)\n", ctl->prog);
		else if (res.signal)
			fprintf(stderr, "%s: killed by signal %d\n", ctl->prog, res.signal);
	}
	code = result_exit(&res);
	bk_exec_result_free(&res);
	return code;
usage:
	/* A bad command line is one more way for the command not to run (bkctl(1)). */
	bkctl_usage(stderr, cmd);
	return BKCTL_EXIT_EXEC_FAILED;
}
