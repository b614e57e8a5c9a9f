/* Which environment variables a request may set for a sandboxed command. The command gets a
 * fixed safe base (server/exec.c) plus request variables that pass this check; a denied name is
 * an error naming it, never a silent drop. The front applies the deny list; the executor checks
 * only that each name is well-formed (bk_env_name_valid), since which variables may be set is
 * policy, not a privilege boundary: the command runs unprivileged whatever its environment. */
#ifndef BK_ENVPOLICY_H
#define BK_ENVPOLICY_H

#include <stdbool.h>
#include <stddef.h>

/* A POSIX name: [A-Za-z_][A-Za-z0-9_]*, at most 256 bytes. */
bool bk_env_name_valid(const char *name, size_t len);

/* NULL when a request may set `name`; otherwise why not. PATH only with allow_path. */
const char *bk_env_denied(const char *name, size_t len, bool allow_path);

#endif
