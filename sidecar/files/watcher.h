/* Watching directories for FileWatch, in the file worker (fileworker.c): an inotify instance per
 * watch, a watch descriptor per directory of its tree, directories that appear watched as they
 * appear and those that go dropped. What inotify reports is turned into changes named by their
 * path relative to the watched directory — a rename's two halves paired into one move — and sent
 * to the front as Changes events, which keeps them for the watch's reader (server/files/watch.c).
 *
 * Bounds: BK_WATCHES_MAX watches, BK_WATCH_DIRS_MAX directories for all of them (watchbounds.h).
 * Nothing here queues without a bound: changes go to the channel as they are read, and while the
 * channel holds BK_ORDERS_PAUSE_BYTES the instances are not read at all, so that the kernel's
 * queue overflows instead and says so (IN_Q_OVERFLOW: an OVERFLOW change, and the tree is walked
 * again to know where every directory is). */
#ifndef BK_WATCHER_H
#define BK_WATCHER_H

#include <poll.h>
#include <stdint.h>

#include "boxkite/executor/order.pb-c.h"
#include "channel.h"
#include "files/fsops.h"
#include "watchbounds.h"

typedef struct bk_watch bk_watch;

/* Changes being gathered into one Changes event: at most this many, and this many bytes of paths. */
#define BK_WATCHER_BATCH 256
#define BK_WATCHER_BATCH_BYTES (256u << 10)

typedef struct bk_watchers {
	bk_fs *fs;
	bk_channel *ch;
	bk_watch *watch[BK_WATCHES_MAX];
	size_t n;
	size_t dirs;      /* directories watched, every watch together */
	int64_t checked_ms; /* when the watched directories were last checked for removal */
	/* The Changes event being gathered, for one watch at a time. */
	bk_watch *batch_of;
	size_t nchanges, pool_used;
	Boxkite__Executor__Change changes[BK_WATCHER_BATCH];
	uint8_t pool[BK_WATCHER_BATCH_BYTES + 2 * 4096];
} bk_watchers;

/* Our own /proc/self/fd must be the working directory (fileworker.c): inotify_add_watch() takes a
 * path only, and a directory's descriptor is named there. */
void bk_watchers_init(bk_watchers *ws, bk_fs *fs, bk_channel *ch);

/* Watch the directory at path (a sandbox path) and its tree as the front's watch `id`: 0 and
 * *dirs, the directories watched; or -errno, e saying where (EEXIST: id is watched already;
 * EMFILE: BK_WATCHES_MAX watches, or the sandbox user's inotify instances are all taken; ENOSPC:
 * more directories than BK_WATCH_DIRS_MAX, or than the kernel lets the sandbox user watch). */
int bk_watchers_add(bk_watchers *ws, uint64_t id, const char *path, uint64_t *dirs, bk_fs_error *e);
/* Stop watching: 0, or -ENOENT. */
int bk_watchers_remove(bk_watchers *ws, uint64_t id);
/* Every watch dropped and nothing sent (a Reset: the front has forgotten them). */
void bk_watchers_clear(bk_watchers *ws);

/* The instances to poll for input, one pollfd each into fds (BK_WATCHES_MAX of room): how many. */
size_t bk_watchers_pollfds(const bk_watchers *ws, struct pollfd *fds);
/* How long poll may wait (ms; -1: for ever) before bk_watchers_serve() has something to do of its
 * own: a rename's first half to send alone, the watched directories to check. */
int bk_watchers_timeout(const bk_watchers *ws, int64_t now_ms);
/* Read the instances poll found ready (fds and n as bk_watchers_pollfds() made them, revents set),
 * send what changed, the first halves of renames whose second did not come, and the ends of
 * watches whose directory was removed. 0, or <0 when the channel broke. */
int bk_watchers_serve(bk_watchers *ws, const struct pollfd *fds, size_t n, int64_t now_ms);

#endif
