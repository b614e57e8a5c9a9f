/* Paths inside the sandbox as requests name them: relative to the workspace, or absolute under
 * one of the roots — /workspace and /tmp, plus any the configuration adds (--root PATH[:ro]).
 * Normalized lexically — "." and repeated '/' removed, ".." refused outright — so that the
 * result names a place under a root whatever the filesystem holds; symlinks are the executor's
 * business (openat2 with RESOLVE_BENEATH on the root). */
#ifndef BK_SBPATH_H
#define BK_SBPATH_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

#define BK_WORKSPACE "/workspace"
/* The sandbox user's home: outside the workspace, so that dotfiles and caches stay out of it. */
#define BK_SANDBOX_HOME "/home/sandbox"
#define BK_ROOTS_MAX 8
#define BK_ROOT_PATH_MAX 128

typedef struct bk_root {
	char path[BK_ROOT_PATH_MAX]; /* absolute, normalized, e.g. "/workspace" */
	bool read_only;
} bk_root;

typedef struct bk_roots {
	bk_root root[BK_ROOTS_MAX];
	size_t n;
} bk_roots;

/* /workspace and /tmp, both writable. */
void bk_roots_default(bk_roots *roots);

/* Add "PATH" or "PATH:ro" (an absolute sandbox path). 0, or -EINVAL with *err saying why. */
int bk_roots_add(bk_roots *roots, const char *spec, bk_error **err);

/* Write the normalized absolute path of `in` to out and say under which root it lies (the
 * longest matching one). Returns 0, or -EINVAL with *err saying why. */
int bk_sandbox_path(const bk_roots *roots, const char *in, char *out, size_t size, const bk_root **root,
		    bk_error **err);

/* Whether a symlink at link (a normalized path under root, as bk_sandbox_path() gives) with
 * this target stays inside root when read lexically: an absolute target under root, or a
 * relative one whose ".." never climb above root from link's directory. */
bool bk_symlink_contained(const bk_root *root, const char *link, const char *target);

#endif
