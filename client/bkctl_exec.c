/* bkctl exec: run one command in the sandbox, and end with its exit status. */
#include <errno.h>
#include <fcntl.h>
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

int bkctl_exec(bkctl *ctl, const bkctl_command *cmd, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "timeout", required_argument, NULL, 't' }, { "cwd", required_argument, NULL, 'C' },
		{ "env", required_argument, NULL, 'e' },     { "stdin", required_argument, NULL, 'i' },
		{ "shell", required_argument, NULL, 's' },   { 0 },
	};
	_cleanup_free_ bk_env_var *env = calloc((size_t)argc, sizeof(*env));
	_cleanup_free_ uint8_t *in = NULL;
	bk_exec_request rq = { 0 };
	bk_exec_result res;
	bk_status st;
	bk_client *c;
	int opt, help = 0, code;

	if (!env) {
		fprintf(stderr, "%s: out of memory\n", ctl->prog);
		return BKCTL_EXIT_EXEC_FAILED;
	}
	while ((opt = bkctl_getopt(ctl, cmd, argc, argv, "t:C:e:i:s:", longopts, &help)) != -1) {
		char *end, *eq;
		double secs;
		switch (opt) {
		case 't':
			secs = strtod(optarg, &end);
			if (*end || secs <= 0 || secs > 86400) {
				fprintf(stderr, "%s: --timeout %s: expected seconds\n", ctl->prog, optarg);
				goto usage;
			}
			rq.timeout_ms = (uint32_t)(secs * 1000);
			break;
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
		case 'i': {
			int fd, r;

			/* As with any option given twice, the last --stdin counts. */
			free(in);
			in = NULL;
			fd = strcmp(optarg, "-") ? open(optarg, O_RDONLY | O_CLOEXEC) : STDIN_FILENO;
			r = fd < 0 ? -errno : bk_read_all(fd, STDIN_MAX, &in, &rq.stdin_len);
			if (fd > STDIN_FILENO)
				close(fd);
			if (r < 0) {
				fprintf(stderr, "%s: --stdin %s: %s\n", ctl->prog, optarg,
					r == -EFBIG ? "larger than 8 MiB" : strerror(-r));
				return BKCTL_EXIT_EXEC_FAILED;
			}
			rq.stdin_data = in;
			break;
		}
		case 's':
			rq.shell = optarg;
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
