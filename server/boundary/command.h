/* A command as Exec and ProcessStart both take it — argv or a shell string, a working directory,
 * variables — checked and turned into the executor's Spawn order, the same way for both. */
#ifndef BK_COMMAND_H
#define BK_COMMAND_H

#include "boundary/link.h"
#include "boxkite/v1/boxkite.pb-c.h"
#include "rpc/call.h"

/* What one command may ask: argv entries, variables, and bytes of argv (or shell) and of the
 * environment, each counting a NUL per string — together within one executor packet. */
#define BK_EXEC_ARGV_MAX 4096
#define BK_EXEC_ENV_MAX 1024
#define BK_EXEC_STRINGS_MAX (256 * 1024)

typedef struct bk_command_request {
	size_t n_argv;
	char **argv;
	const char *shell;
	const char *cwd;
	size_t n_env;
	Boxkite__V1__EnvVar **env;
	size_t n_allow_net;     /* the grant: HOST:PORT patterns within the egress ceiling */
	char **allow_net;
} bk_command_request;

/* The environment every command starts from (base_env in command.c; with a grant, the proxy's
 * variables too) plus the request's. */
typedef struct bk_command {
	Boxkite__Executor__Spawn spawn; /* argv, env, cwd set; the caller sets the rest */
	char *shell_argv[4];
	char **env;
	char *env_storage;
	char cwd[4096];
	const char *cwd_asked;  /* as the request named it, for its error (in the request) */
} bk_command;

/* Check rq and fill cmd (free with bk_command_fini, whatever the result). 0, or -1 having ended
 * the call with INVALID_ARGUMENT (or RESOURCE_EXHAUSTED; PERMISSION_DENIED for a grant beyond
 * the egress ceiling) and why. */
int bk_command_prepare(bk_call *call, const bk_command_request *rq, bk_command *cmd);
void bk_command_fini(bk_command *cmd);

/* The message for a Spawn that failed (err, reply: bk_reply_fn's), and its status: a working
 * directory that is not there or may not be entered is the cwd's error, any other step's an
 * error of the sandbox. */
int bk_command_spawn_failed(const bk_server *srv, const char *cwd, int err, const bk_reply *reply, char *msg,
			    size_t size);

#endif
