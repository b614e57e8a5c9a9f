#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "request.h"

int bk_command_pb(const char *const *argv, const char *shell, const bk_env_var *env, size_t n, size_t *argc,
		  Boxkite__V1__EnvVar **vars, Boxkite__V1__EnvVar ***ptrs, bk_status *st)
{
	*argc = 0;
	*vars = NULL;
	*ptrs = NULL;
	if (argv)
		while (argv[*argc])
			(*argc)++;
	if ((*argc > 0) == (shell != NULL))
		return bk_status_set(st, BK_INVALID_ARGUMENT, 0, false, "give exactly one of argv and shell");
	if (!n)
		return BK_OK;
	*vars = calloc(n, sizeof(**vars));
	*ptrs = calloc(n, sizeof(**ptrs));
	if (!*vars || !*ptrs) {
		free(*vars);
		free(*ptrs);
		*vars = NULL;
		*ptrs = NULL;
		return bk_status_set(st, BK_RESOURCE_EXHAUSTED, 0, false, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		boxkite__v1__env_var__init(&(*vars)[i]);
		(*vars)[i].name = (char *)env[i].name;
		(*vars)[i].value = (char *)env[i].value;
		(*ptrs)[i] = &(*vars)[i];
	}
	return BK_OK;
}

int bk_exec(bk_client *c, const bk_exec_request *rq, bk_exec_result *out, bk_status *st)
{
	Boxkite__V1__ExecRequest req = BOXKITE__V1__EXEC_REQUEST__INIT;
	Boxkite__V1__ExecResponse *resp = NULL;
	Boxkite__V1__EnvVar *vars, **varp;
	size_t argc;
	bool verified;
	int code;

	memset(out, 0, sizeof(*out));
	code = bk_command_pb(rq->argv, rq->shell, rq->env, rq->n_env, &argc, &vars, &varp, st);
	if (code != BK_OK)
		return code;
	req.n_argv = argc;
	req.argv = (char **)rq->argv;
	req.shell = (char *)(rq->shell ? rq->shell : "");
	req.cwd = (char *)(rq->cwd ? rq->cwd : "");
	req.n_env = rq->n_env;
	req.env = varp;
	req.stdin = (ProtobufCBinaryData){ .len = rq->stdin_len, .data = (uint8_t *)rq->stdin_data };
	req.timeout_ms = rq->timeout_ms;
	req.stdout_limit = rq->stdout_limit;
	req.stderr_limit = rq->stderr_limit;
	req.n_allow_net = rq->n_allow_net;
	req.allow_net = (char **)rq->allow_net;

	code = bk_client_call(c, "Exec", &req.base, &boxkite__v1__exec_response__descriptor, (ProtobufCMessage **)&resp,
			      (int)(rq->timeout_ms ? rq->timeout_ms : BK_EXEC_WAIT_DEFAULT_MS) + bk_client_timeout(c),
			      &verified, st);
	free(vars);
	free(varp);
	if (code != BK_OK)
		return code;
	out->exit_code = resp->exit_code;
	out->signal = resp->signal;
	out->timed_out = resp->timed_out;
	out->oom_killed = resp->oom_killed;
	/* Take the output buffers over from the decoded message rather than copy them. */
	out->stdout_data = resp->stdout.data;
	out->stdout_len = resp->stdout.len;
	resp->stdout.data = NULL;
	out->stderr_data = resp->stderr.data;
	out->stderr_len = resp->stderr.len;
	resp->stderr.data = NULL;
	out->stdout_truncated = resp->stdout_truncated;
	out->stdout_dropped = resp->stdout_dropped;
	out->stderr_truncated = resp->stderr_truncated;
	out->stderr_dropped = resp->stderr_dropped;
	out->duration_us = resp->duration_us;
	snprintf(out->isolation_profile, sizeof(out->isolation_profile), "%s", resp->isolation_profile);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return BK_OK;
}

void bk_exec_result_free(bk_exec_result *res)
{
	if (!res)
		return;
	free(res->stdout_data);
	free(res->stderr_data);
	res->stdout_data = res->stderr_data = NULL;
}
