/* File operations in the sandbox, done by the executor as the sandbox user (DESIGN.md §4).
 *
 * Identity: the executor switches its filesystem uid and gid to the sandbox user's for each
 * operation (single-threaded, so nothing else runs meanwhile). The kernel then checks
 * permissions as uid 1001 and clears the DAC-overriding capabilities from the effective set, and
 * whatever is created belongs to 1001. Containment: each root (/workspace, /tmp, ...) is opened
 * once inside the sandbox's root; every path is resolved beneath its root with openat2's
 * RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV, so "..", absolute symlinks,
 * /proc magic links and a symlink swapped in mid-operation cannot leave it. Operations on a last
 * component use the *at() calls on its resolved directory and never follow it. */
#ifndef BK_FILES_H
#define BK_FILES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "boxkite/executor/order.pb-c.h"
#include "error.h"
#include "sbpath.h"

typedef struct bk_fs {
	const bk_roots *roots;
	int root_fd[BK_ROOTS_MAX]; /* per root, -1 if the sandbox has no such directory */
	uid_t uid;
	gid_t gid;
} bk_fs;

/* What a failed operation reports: the errno, and the sandbox path it concerns. */
typedef struct bk_fs_error {
	int errnum;
	char path[4096];
} bk_fs_error;

typedef Boxkite__Executor__FileInfo bk_fs_info;

void bk_fs_init(bk_fs *fs, const bk_roots *roots, uid_t uid, gid_t gid);
/* Open the roots inside the sandbox's root directory (when the sandbox is acquired). */
void bk_fs_attach(bk_fs *fs, int sandbox_root_fd);
void bk_fs_detach(bk_fs *fs);

/* info->name and ->symlink_target point into `names` (at least 2 x 4096 bytes). */
int bk_fs_stat(bk_fs *fs, const char *path, bk_fs_info *info, char *names, bk_fs_error *e);
/* Entries of a directory sorted by name, after `after`: at most `limit`, and fewer when their
 * names and symlink targets fill a page's bytes (*more says whether any are left). *entries and
 * their strings are one malloc'd block (free it). */
int bk_fs_list(bk_fs *fs, const char *path, const char *after, uint32_t limit, bk_fs_info **entries, size_t *n,
	       bool *more, bk_fs_error *e);
/* A regular file opened for reading; its descriptor. */
int bk_fs_open_read(bk_fs *fs, const char *path, bk_fs_error *e);
/* An unnamed file in the directory of `path`, read-write; its descriptor. */
int bk_fs_create_temp(bk_fs *fs, const char *path, bool make_parents, bool overwrite, bk_fs_error *e);
/* Give fd (from bk_fs_create_temp) its mode and name. */
int bk_fs_commit(bk_fs *fs, int fd, const char *path, uint32_t mode, bool overwrite, bk_fs_error *e);
int bk_fs_mkdir(bk_fs *fs, const char *path, bool parents, uint32_t mode, bk_fs_error *e);
/* A symlink at path to target (stored as given), refused (EXDEV) when the target leaves path's
 * root (bk_symlink_contained); an existing path is EEXIST. */
int bk_fs_symlink(bk_fs *fs, const char *path, const char *target, bk_fs_error *e);
int bk_fs_remove(bk_fs *fs, const char *path, bool recursive, uint64_t *count, bk_fs_error *e);
int bk_fs_rename(bk_fs *fs, const char *from, const char *to, bool overwrite, bk_fs_error *e);
/* Bytes of the regular files under path (not following symlinks; what 1001 cannot read is not
 * counted). Stops at `limit` entries with -E2BIG: a tree that large is over any sane quota. */
int bk_fs_usage(bk_fs *fs, const char *path, uint64_t limit, uint64_t *bytes, bk_fs_error *e);

#endif
