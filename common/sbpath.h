/* Paths inside the sandbox as requests name them: relative to the workspace, or absolute under
 * one of the roots (/workspace, /tmp). Normalized lexically — "." and repeated '/' removed,
 * ".." refused outright — so that the result names a place under a root whatever the
 * filesystem holds; symlinks are the file code's business (openat2 with RESOLVE_BENEATH). */
#ifndef BK_SBPATH_H
#define BK_SBPATH_H

#include <stddef.h>

#define BK_WORKSPACE "/workspace"

/* Write the normalized absolute path of `in` to out. Returns 0, or -EINVAL with *why set. */
int bk_sandbox_path(const char *in, char *out, size_t size, const char **why);

#endif
