/* Which environment variables a request may set for a sandboxed command: any well-formed name.
 * The command is the caller's own and runs as the sandbox user with no capability and
 * no_new_privs, so its environment crosses no privilege boundary: a denylist there (LD_PRELOAD,
 * PYTHONPATH, ...) protects nothing the command could not do itself with `X=y cmd`, and only
 * gets in the way (SECURITY.md, "The environment"). What keeps the sidecar's own variables out
 * is that the command's environment is built from a fixed base (server/runs/exec.c), never from
 * boxkited's. Both the front and the executor check each name. */
#ifndef BK_ENVPOLICY_H
#define BK_ENVPOLICY_H

#include <stdbool.h>
#include <stddef.h>

/* A POSIX name: [A-Za-z_][A-Za-z0-9_]*, at most 256 bytes. */
bool bk_env_name_valid(const char *name, size_t len);

#endif
