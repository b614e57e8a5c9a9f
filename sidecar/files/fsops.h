/* File operations in the sandbox (DESIGN.md §4), done by the file worker (fileworker.c), which
 * is the sandbox user: the kernel checks 1001's permissions, and whatever is made is 1001's.
 * Containment: each root (/workspace, /tmp, ...) is opened
 * once inside the sandbox's root; every path is resolved beneath its root with openat2's
 * RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV, so "..", absolute symlinks,
 * /proc magic links and a symlink swapped in mid-operation cannot leave it. Operations on a last
 * component use the *at() calls on its resolved directory and never follow it. */
#ifndef BK_FSOPS_H
#define BK_FSOPS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "boxkite/executor/order.pb-c.h"
#include "error.h"
#include "sbpath.h"

typedef struct bk_fs_snapshot bk_fs_snapshot;

/* What a reset empties beside the writable roots: the sandbox user's home and /dev/shm. */
#define BK_FS_WIPE_EXTRA 2
extern const char *const bk_fs_wipe_extra[BK_FS_WIPE_EXTRA];

typedef struct bk_fs {
	const bk_roots *roots;
	int root_fd[BK_ROOTS_MAX]; /* per root, -1 if the sandbox has no such directory */
	int wipe_fd[BK_FS_WIPE_EXTRA]; /* bk_fs_wipe_extra's directories, -1 if the sandbox has none */
	int proc_fd;               /* this process's /proc/<pid>/fd: how an unnamed file gets a name */
	uid_t uid;                 /* ours: the owner of the unnamed files we make */
	bk_fs_snapshot *snapshots; /* FileList: directories' sorted names, most recently used first */
	size_t snapshot_bytes;
} bk_fs;

/* What a failed operation reports: the errno, and the sandbox path it concerns. */
typedef struct bk_fs_error {
	int errnum;
	char path[4096];
} bk_fs_error;

typedef Boxkite__Executor__FileInfo bk_fs_info;

void bk_fs_init(bk_fs *fs, const bk_roots *roots, uid_t uid);
/* Open the roots inside the sandbox's root directory; proc_fd (taken) is our /proc/<pid>/fd. */
void bk_fs_attach(bk_fs *fs, int sandbox_root_fd, int proc_fd);
void bk_fs_detach(bk_fs *fs);

/* info->name and ->symlink_target point into `names` (at least 2 x 4096 bytes). */
int bk_fs_stat(bk_fs *fs, const char *path, bk_fs_info *info, char *names, bk_fs_error *e);
/* Entries of a directory sorted by name, after `after`: at most `limit`, and fewer when their
 * names and symlink targets fill a page's bytes (*more says whether any are left). *entries and
 * their strings are one malloc'd block (free it).
 *
 * A page costs O(page), not O(directory): the directory's names are read and sorted once and
 * kept (a snapshot, 64 MiB for all directories at most), and a page is a binary search in them
 * plus an lstat per entry. The snapshot is used while the directory's mtime and ctime are what
 * they were when it was read — an entry added or removed since changes them — and kept only for
 * a directory that had not changed for 2 s before (now, CLOCK_REALTIME), as a change within a
 * timestamp's granularity would not show. *read says whether this page read the directory. */
int bk_fs_list(bk_fs *fs, const char *path, const char *after, uint32_t limit, const struct timespec *now,
	       bk_fs_info **entries, size_t *n, bool *more, bool *read, bk_fs_error *e);
/* A directory opened O_PATH (a final symlink followed as long as it stays in the root, as List
 * follows it), and its normalized sandbox path into norm (4096 bytes); its descriptor. */
int bk_fs_open_dir(bk_fs *fs, const char *path, char *norm, bk_fs_error *e);
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
/* recursive: a directory and everything below it, however deep, never following a symlink. */
int bk_fs_remove(bk_fs *fs, const char *path, bool recursive, uint64_t *count, bk_fs_error *e);
int bk_fs_rename(bk_fs *fs, const char *from, const char *to, bool overwrite, bk_fs_error *e);
/* Bytes of the regular files under path, however deep (not following symlinks; what 1001 cannot
 * read is not counted). Stops at `limit` entries with -E2BIG: a tree that large is over any
 * sane quota. */
int bk_fs_usage(bk_fs *fs, const char *path, uint64_t limit, uint64_t *bytes, bk_fs_error *e);
/* A path relative to dirfd ("" for dirfd itself) opened with flags (O_CLOEXEC added), resolved
 * beneath it as every path here is and through real directories only, no symlink at all
 * (RESOLVE_NO_SYMLINKS): its descriptor, or -1 with errno. */
int bk_fs_open_real(int dirfd, const char *rel, int flags);

/* What a walk (bk_fs_walk) does at each entry. */
typedef struct bk_fs_walk_ops {
	/* An entry that is not a directory (or no longer one). <0 stops the walk. */
	int (*leaf)(void *arg, int dirfd, const char *name);
	/* A directory whose entries are all done, in its parent. <0 stops the walk. */
	int (*dir_done)(void *arg, int parent_fd, const char *name);
	/* A subdirectory that cannot be opened: <0 stops the walk, 0 passes it by. */
	int (*unopened)(void *arg, int errnum);
	void *arg;
	/* Optional: called before a directory (the start included) is opened, to make it one the
	 * walk may enter and change. */
	void (*before_open)(void *arg, int parent_fd, const char *name);
	/* Optional: a directory (the start included, at depth 1) was opened as fd, before any of its
	 * entries: 0 goes on into it, >0 leaves its entries alone, <0 stops the walk. */
	int (*entered)(void *arg, int fd, size_t depth, const char *name);
} bk_fs_walk_ops;

/* Walk the directory `name` in parent, depth first, with no limit on its depth and one
 * descriptor open at a time: down by name, never following a symlink (O_NOFOLLOW); back up by
 * "..", which must lead to the directory we came from (same device and inode) — if the tree was
 * moved meanwhile the walk stops (-ESTALE) rather than go on elsewhere. On failure `where` names
 * the entry, below `name`. */
int bk_fs_walk(int parent, const char *name, const bk_fs_walk_ops *ops, char *where, size_t wsize);

/* Reset: empty every writable root and bk_fs_wipe_extra's directories, however deep, as the
 * sandbox user — a directory of ours that it may not enter or change (mode 000, 0555) is given
 * u+rwx first —, then read each again to verify it is empty; then give each root itself back
 * what a fresh sandbox's has (mode 0755 when the sandbox user owns it, none of the user.*
 * attributes and ACLs it may have set) and verify that. *count: entries removed. -EIO when
 * anything is left, e->path naming what (as many as fit); the listing snapshots are dropped. */
int bk_fs_wipe(bk_fs *fs, uint64_t *count, bk_fs_error *e);

#endif
