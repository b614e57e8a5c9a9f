#include "boundary/command.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egresspolicy.h"
#include "envpolicy.h"
#include "sbpath.h"

#define ORDER_STRINGS_MAX (2 * BK_EXEC_STRINGS_MAX)

/* The environment every command starts from — never boxkited's own (its key file, storage
 * credentials); request variables are added or replace these. */
static const char *const base_env[] = {
	"PATH=/usr/local/bin:/usr/bin:/bin",
	"HOME=" BK_SANDBOX_HOME,
	"LANG=C.UTF-8",
	"TERM=dumb",
	"TMPDIR=/tmp",
	"USER=sandbox",
	"LOGNAME=sandbox",
	"SHELL=/bin/sh",
};

/* A granted command's way out (docs/PROTOCOL.md, "Egress"): the proxy on its own loopback, in
 * both spellings tools read; loopback itself never through it. */
static const char *const proxy_env[] = {
	"HTTP_PROXY=" BK_EGRESS_PROXY_URL,  "http_proxy=" BK_EGRESS_PROXY_URL,
	"HTTPS_PROXY=" BK_EGRESS_PROXY_URL, "https_proxy=" BK_EGRESS_PROXY_URL,
	"ALL_PROXY=" BK_EGRESS_PROXY_URL,   "all_proxy=" BK_EGRESS_PROXY_URL,
	"NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1",
};

/* A grant reaching a brokered destination: what the proxy presents there is signed by its CA,
 * and these tell the usual clients to trust that bundle (the system's roots and the CA). */
static const char *const ca_env[] = {
	"SSL_CERT_FILE=" BK_EGRESS_CA_FILE,  "REQUESTS_CA_BUNDLE=" BK_EGRESS_CA_FILE,
	"NODE_EXTRA_CA_CERTS=" BK_EGRESS_CA_FILE, "CURL_CA_BUNDLE=" BK_EGRESS_CA_FILE,
	"GIT_SSL_CAINFO=" BK_EGRESS_CA_FILE,
};

#define BASE_MAX (BK_ARRAY_SIZE(base_env) + BK_ARRAY_SIZE(proxy_env) + BK_ARRAY_SIZE(ca_env))

/* The environment: the base (nbase entries already in env), then the request's variables (any
 * well-formed name, envpolicy.h), which replace a base one of the same name. Returns the number
 * of entries, or -1 with *bad naming the variable refused. */
static int build_env(const bk_command_request *rq, char **env, size_t nbase, char *storage, size_t size,
		     const char **bad, const char **why)
{
	size_t n = nbase, used = 0;

	for (size_t i = 0; i < rq->n_env; i++) {
		const char *name = rq->env[i]->name, *value = rq->env[i]->value;
		size_t nlen = strlen(name), vlen = strlen(value), j;

		*bad = name;
		if (!bk_env_name_valid(name, nlen)) {
			*why = "not a valid variable name ([A-Za-z_][A-Za-z0-9_]*, at most 256 bytes)";
			return -1;
		}
		for (j = nbase; j < n; j++) {
			if (strncmp(env[j], name, nlen) == 0 && env[j][nlen] == '=') {
				*why = "set twice in the request";
				return -1;
			}
		}
		if (used + nlen + vlen + 2 > size) {
			*why = "the environment is too large";
			return -1;
		}
		char *entry = storage + used;
		memcpy(entry, name, nlen);
		entry[nlen] = '=';
		memcpy(entry + nlen + 1, value, vlen + 1);
		used += nlen + vlen + 2;
		/* A request variable replaces a base one of the same name. */
		for (j = 0; j < nbase; j++) {
			if (strncmp(env[j], name, nlen) == 0 && env[j][nlen] == '=') {
				env[j] = entry;
				break;
			}
		}
		if (j == nbase)
			env[n++] = entry;
	}
	return (int)n;
}

/* A grant, checked: well-formed, and within the ceiling (PERMISSION_DENIED beyond it, or with no
 * ceiling at all), before anything runs. *brokered: it reaches a destination with a credential.
 * 0, or -1 having ended the call. */
static int grant_check(bk_call *call, const bk_command_request *rq, bool *brokered)
{
	const bk_config *cfg = &call->srv->cfg;

	*brokered = false;
	if (!cfg->negress_allow) {
		bk_call_failf(call, BK_PERMISSION_DENIED, 0,
			      "allow_net: this sidecar grants no network (it was started without --egress-allow)");
		return -1;
	}
	if (rq->n_allow_net > BK_EGRESS_GRANT_MAX) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "allow_net: at most %d patterns", BK_EGRESS_GRANT_MAX);
		return -1;
	}
	for (size_t i = 0; i < rq->n_allow_net; i++) {
		_cleanup_error_ bk_error *err = NULL;
		bk_egress_pattern p;
		if (bk_egress_pattern_parse(rq->allow_net[i], &p, &err) < 0) {
			bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "allow_net '%.300s': %s", rq->allow_net[i],
				      bk_error_msg(err));
			return -1;
		}
		if (bk_egress_grant_beyond(&p, 1, cfg->egress_ceiling, cfg->negress_allow) >= 0) {
			bk_call_failf(call, BK_PERMISSION_DENIED, 0, "allow_net '%.300s': beyond the egress ceiling",
				      rq->allow_net[i]);
			return -1;
		}
		for (size_t c = 0; c < cfg->negress_credential && !*brokered; c++)
			*brokered = bk_egress_pattern_matches(&p, &cfg->egress_credential[c].host,
							      cfg->egress_credential[c].port);
	}
	return 0;
}

int bk_command_prepare(bk_call *call, const bk_command_request *rq, bk_command *cmd)
{
	const bk_config *cfg = &call->srv->cfg;
	const char *bad = NULL, *why = NULL;
	_cleanup_error_ bk_error *path_err = NULL;
	size_t strings = 0, env_bytes = 1, nbase = 0;
	bool brokered = false;
	int nenv;

	memset(cmd, 0, sizeof(*cmd));
	cmd->spawn = (Boxkite__Executor__Spawn)BOXKITE__EXECUTOR__SPAWN__INIT;
	if ((rq->n_argv > 0) == (rq->shell[0] != '\0')) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "give exactly one of argv or shell");
		return -1;
	}
	if (rq->n_argv > BK_EXEC_ARGV_MAX || rq->n_env > BK_EXEC_ENV_MAX) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "at most %d argv entries and %d variables",
			      BK_EXEC_ARGV_MAX, BK_EXEC_ENV_MAX);
		return -1;
	}
	if (rq->n_argv && !rq->argv[0][0]) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "argv[0] is empty");
		return -1;
	}
	for (size_t i = 0; i < rq->n_argv; i++)
		strings += strlen(rq->argv[i]) + 1;
	strings += strlen(rq->shell) + 1;
	if (strings > ORDER_STRINGS_MAX / 2) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "argv/shell is %zu bytes; at most %d", strings,
			      ORDER_STRINGS_MAX / 2);
		return -1;
	}
	cmd->cwd_asked = rq->cwd[0] ? rq->cwd : BK_WORKSPACE;
	if (bk_sandbox_path(&cfg->roots, cmd->cwd_asked, cmd->cwd, sizeof(cmd->cwd), NULL, &path_err) < 0) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "cwd '%.200s': %s", rq->cwd, bk_error_msg(path_err));
		return -1;
	}
	/* Exactly what the request's variables need: "NAME=value\0" each. */
	for (size_t i = 0; i < rq->n_env; i++)
		env_bytes += strlen(rq->env[i]->name) + strlen(rq->env[i]->value) + 2;
	if (env_bytes > ORDER_STRINGS_MAX / 2) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "the environment is %zu bytes; at most %d", env_bytes,
			      ORDER_STRINGS_MAX / 2);
		return -1;
	}
	if (rq->n_allow_net && grant_check(call, rq, &brokered) < 0)
		return -1;
	cmd->env_storage = malloc(env_bytes);
	cmd->env = calloc(BASE_MAX + rq->n_env, sizeof(*cmd->env));
	if (!cmd->env_storage || !cmd->env) {
		bk_call_failf(call, BK_RESOURCE_EXHAUSTED, 0, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < BK_ARRAY_SIZE(base_env); i++)
		cmd->env[nbase++] = (char *)base_env[i];
	for (size_t i = 0; rq->n_allow_net && i < BK_ARRAY_SIZE(proxy_env); i++)
		cmd->env[nbase++] = (char *)proxy_env[i];
	for (size_t i = 0; brokered && i < BK_ARRAY_SIZE(ca_env); i++)
		cmd->env[nbase++] = (char *)ca_env[i];
	nenv = build_env(rq, cmd->env, nbase, cmd->env_storage, env_bytes, &bad, &why);
	if (nenv < 0) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "environment variable '%.100s': %s", bad, why);
		return -1;
	}
	cmd->shell_argv[0] = "/bin/sh";
	cmd->shell_argv[1] = "-c";
	cmd->shell_argv[2] = (char *)rq->shell;
	cmd->spawn.n_argv = rq->n_argv ? rq->n_argv : 3;
	cmd->spawn.argv = rq->n_argv ? rq->argv : cmd->shell_argv;
	cmd->spawn.n_env = (size_t)nenv;
	cmd->spawn.env = cmd->env;
	cmd->spawn.cwd = cmd->cwd;
	cmd->spawn.n_egress = rq->n_allow_net;
	cmd->spawn.egress = rq->allow_net;
	cmd->spawn.key_id = call->key ? (char *)call->key->id : "";
	return 0;
}

void bk_command_fini(bk_command *cmd)
{
	free(cmd->env);
	free(cmd->env_storage);
	cmd->env = NULL;
	cmd->env_storage = NULL;
}

int bk_command_spawn_failed(const bk_server *srv, const char *cwd, int err, const bk_reply *reply, char *msg,
			    size_t size)
{
	int status = err == EAGAIN || err == EPIPE || err == ENOBUFS ? BK_UNAVAILABLE : bk_status_from_errno(err);

	if (reply && reply->child_step == BOXKITE__EXECUTOR__STEP__STEP_CHDIR)
		snprintf(msg, size, "cwd %s: %s", cwd, strerror(err));
	else
		snprintf(msg, size, "exec failed at %s: %s", reply && reply->step[0] ? reply->step : "executor",
			 bk_link_why(srv->executor, err, reply));
	return status;
}
