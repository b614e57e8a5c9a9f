#include "files/watcher.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <search.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "boxkite/v1/boxkite.pb-c.h"
#include "cleanup.h"
#include "orders.h"

/* What every watched directory reports. IN_ONLYDIR: what a descriptor names must still be a
 * directory; IN_EXCL_UNLINK: nothing more about a file once it is unlinked. */
#define WATCH_MASK                                                                                            \
	(IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF |   \
	 IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK)
/* A rename's two halves are queued back to back by the renaming process, but a read may fall
 * between them: a MOVED_FROM waits this long for its MOVED_TO before it is sent as a move out. */
#define MOVE_PAIR_MS 10
/* A watched directory is held open (what appears beneath it is resolved from it), and the kernel
 * reports the removal of a directory (IN_DELETE_SELF) only once nothing holds it: its link count
 * is checked this often instead. */
#define REMOVED_CHECK_MS 1000
/* What one read of an instance takes (a few thousand events); then the other instances and the
 * channel get their turn. */
#define READ_BYTES (64u << 10)

enum {
	CREATED = BOXKITE__V1__WATCH_EVENT_KIND__WATCH_EVENT_KIND_CREATED,
	MODIFIED = BOXKITE__V1__WATCH_EVENT_KIND__WATCH_EVENT_KIND_MODIFIED,
	CLOSED = BOXKITE__V1__WATCH_EVENT_KIND__WATCH_EVENT_KIND_CLOSED,
	REMOVED = BOXKITE__V1__WATCH_EVENT_KIND__WATCH_EVENT_KIND_REMOVED,
	MOVED = BOXKITE__V1__WATCH_EVENT_KIND__WATCH_EVENT_KIND_MOVED,
	OVERFLOW = BOXKITE__V1__WATCH_EVENT_KIND__WATCH_EVENT_KIND_OVERFLOW,
};

/* A watched directory: a node of the watch's tree, which mirrors where its directories are. */
struct node {
	int wd;                   /* first: the by_wd tree compares nodes and keys as ints */
	bool moved;               /* its rename was followed: its own IN_MOVE_SELF is expected */
	unsigned gen;             /* the walk that last found it (a walk after an overflow) */
	struct node *parent;      /* NULL: the watched directory */
	struct node *child;       /* its first watched subdirectory */
	struct node *prev, *next; /* its siblings */
	char *name;               /* in its parent ("" for the watched directory) */
};

struct bk_watch {
	uint64_t id;
	int ifd;           /* the inotify instance */
	int dir_fd;        /* the watched directory (O_PATH): what is found is opened beneath it */
	size_t base_len;   /* its sandbox path's length: a path under it must fit with it in PATH_MAX */
	struct node *root;
	void *by_wd;       /* tsearch(3) tree of the nodes by wd */
	size_t dirs;
	unsigned gen;
	/* A MOVED_FROM waiting for its MOVED_TO. */
	bool from_pending, from_dir;
	uint32_t cookie;
	int64_t from_due;
	char from[PATH_MAX];
};

static int wd_cmp(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

static struct node *find(bk_watch *w, int wd)
{
	void *p = tfind(&wd, &w->by_wd, wd_cmp);

	return p ? *(struct node **)p : NULL;
}

static void link_child(struct node *parent, struct node *n)
{
	n->parent = parent;
	n->prev = NULL;
	n->next = parent->child;
	if (n->next)
		n->next->prev = n;
	parent->child = n;
}

static void unlink_child(struct node *n)
{
	if (n->prev)
		n->prev->next = n->next;
	else if (n->parent)
		n->parent->child = n->next;
	if (n->next)
		n->next->prev = n->prev;
	n->parent = n->prev = n->next = NULL;
}

/* n's path relative to the watched directory into buf (PATH_MAX), and its length; -1 when it
 * would not fit in a sandbox path. */
static ssize_t node_path(const bk_watch *w, const struct node *n, char *buf)
{
	size_t len = 0, at;

	for (const struct node *p = n; p->parent; p = p->parent)
		len += strlen(p->name) + 1;
	if (len)
		len--;
	if (w->base_len + 1 + len >= PATH_MAX)
		return -1;
	buf[len] = '\0';
	at = len;
	for (const struct node *p = n; p->parent; p = p->parent) {
		size_t l = strlen(p->name);
		at -= l;
		memcpy(buf + at, p->name, l);
		if (at)
			buf[--at] = '/';
	}
	return (ssize_t)len;
}

/* The path of `name` in directory n, as node_path(). */
static ssize_t child_path(const bk_watch *w, const struct node *n, const char *name, char *buf)
{
	ssize_t len = node_path(w, n, buf);
	size_t nlen = strlen(name);

	if (len < 0 || w->base_len + 1 + (size_t)len + 1 + nlen >= PATH_MAX)
		return -1;
	if (len)
		buf[len++] = '/';
	memcpy(buf + len, name, nlen + 1);
	return len + (ssize_t)nlen;
}

/* Forget one node (its children gone already): rm its watch descriptor too unless the kernel
 * removed it (IN_IGNORED). */
static void node_free(bk_watchers *ws, bk_watch *w, struct node *n, bool rm)
{
	tdelete(n, &w->by_wd, wd_cmp);
	if (rm)
		inotify_rm_watch(w->ifd, n->wd);
	free(n->name);
	free(n);
	w->dirs--;
	ws->dirs--;
}

/* Forget top and everything beneath it, without recursion. */
static void drop(bk_watchers *ws, bk_watch *w, struct node *top, bool rm)
{
	struct node *n = top;

	unlink_child(top);
	while (n) {
		struct node *up;

		if (n->child) {
			n = n->child;
			continue;
		}
		up = n == top ? NULL : n->parent;
		unlink_child(n);
		node_free(ws, w, n, rm);
		n = up;
	}
}

/* n was found at `name` in parent: move it there in the tree, unless that would make it its own
 * ancestor (the tree is behind the events still queued: they will say). */
static void relocate(struct node *n, struct node *parent, const char *name)
{
	for (const struct node *p = parent; p; p = p->parent)
		if (p == n)
			return;
	if (n->parent != parent) {
		unlink_child(n);
		link_child(parent, n);
	}
	if (strcmp(n->name, name) != 0) {
		char *copy = strdup(name);
		if (copy) {
			free(n->name);
			n->name = copy;
		}
	}
}

/* Watch the directory open on fd, found at `name` in parent (NULL: the watched directory): its
 * node, new or (*existed) one it already had, moved to where it was found. NULL with errno:
 * ENAMETOOLONG (deeper than a sandbox path reaches), ENOSPC (BK_WATCH_DIRS_MAX, or the kernel's
 * max_user_watches), EACCES (the sandbox user may not read it), ... */
static struct node *watch_dir(bk_watchers *ws, bk_watch *w, int fd, struct node *parent, const char *name,
			      bool *existed)
{
	char path[PATH_MAX], fdname[16];
	struct node *n;
	int wd;

	*existed = false;
	if (parent && child_path(w, parent, name, path) < 0) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	/* By its descriptor's name in our /proc/self/fd, the working directory: the directory
	 * itself, whatever happened to the path it was found by. */
	snprintf(fdname, sizeof(fdname), "%d", fd);
	wd = inotify_add_watch(w->ifd, fdname, WATCH_MASK);
	if (wd < 0)
		return NULL;
	if ((n = find(w, wd))) {
		*existed = true;
		if (parent)
			relocate(n, parent, name);
		n->gen = w->gen;
		return n;
	}
	if (ws->dirs >= BK_WATCH_DIRS_MAX) {
		inotify_rm_watch(w->ifd, wd);
		errno = ENOSPC;
		return NULL;
	}
	if ((n = calloc(1, sizeof(*n))))
		n->wd = wd;
	if (!n || !(n->name = strdup(parent ? name : "")) || !tsearch(n, &w->by_wd, wd_cmp)) {
		if (n)
			free(n->name);
		free(n);
		inotify_rm_watch(w->ifd, wd);
		errno = ENOMEM;
		return NULL;
	}
	n->gen = w->gen;
	if (parent)
		link_child(parent, n);
	w->dirs++;
	ws->dirs++;
	return n;
}

/* --- sending changes ----------------------------------------------------------------------- */

static int flush(bk_watchers *ws)
{
	bk_reply reply = BOXKITE__EXECUTOR__REPLY__INIT;
	Boxkite__Executor__Changes changes = BOXKITE__EXECUTOR__CHANGES__INIT;
	Boxkite__Executor__Change *ptrs[BK_WATCHER_BATCH];
	int ret;

	if (!ws->batch_of || !ws->nchanges)
		return 0;
	for (size_t i = 0; i < ws->nchanges; i++)
		ptrs[i] = &ws->changes[i];
	changes.watch = ws->batch_of->id;
	changes.n_changes = ws->nchanges;
	changes.changes = ptrs;
	reply.kind_case = BOXKITE__EXECUTOR__REPLY__KIND_CHANGES;
	reply.changes = &changes;
	ret = bk_answer(ws->ch, &reply, NULL, 0);
	ws->nchanges = 0;
	ws->pool_used = 0;
	return ret;
}

static ProtobufCBinaryData pool_add(bk_watchers *ws, const char *s)
{
	size_t len = s ? strlen(s) : 0;
	uint8_t *at = ws->pool + ws->pool_used;

	memcpy(at, s ? s : "", len);
	ws->pool_used += len;
	return (ProtobufCBinaryData){ .len = len, .data = len ? at : NULL };
}

/* One change of w; paths relative to its directory (NULL: none). */
static int emit(bk_watchers *ws, bk_watch *w, uint32_t kind, const char *path, const char *to, bool dir,
		uint64_t lost)
{
	Boxkite__Executor__Change *c;
	size_t need = (path ? strlen(path) : 0) + (to ? strlen(to) : 0);
	int ret;

	if ((ws->batch_of != w || ws->nchanges == BK_WATCHER_BATCH || ws->pool_used + need > sizeof(ws->pool)) &&
	    (ret = flush(ws)) < 0)
		return ret;
	ws->batch_of = w;
	c = &ws->changes[ws->nchanges++];
	boxkite__executor__change__init(c);
	c->kind = kind;
	c->path = pool_add(ws, path);
	c->to = pool_add(ws, to);
	c->directory = dir;
	c->lost = lost;
	/* Full enough: out now, so that a batch's paths never outgrow the pool. */
	return ws->pool_used >= BK_WATCHER_BATCH_BYTES ? flush(ws) : 0;
}

/* The channel holds what the front has not taken yet: past the bound, changes are counted, not
 * queued (orders.h). */
static bool channel_full(bk_watchers *ws)
{
	return bk_channel_queued(ws->ch) >= BK_ORDERS_PAUSE_BYTES;
}

static void watch_free(bk_watchers *ws, bk_watch *w)
{
	if (ws->batch_of == w) {
		ws->batch_of = NULL;
		ws->nchanges = 0;
		ws->pool_used = 0;
	}
	if (w->root)
		drop(ws, w, w->root, false);
	bk_close(w->ifd);
	bk_close(w->dir_fd);
	free(w);
}

static void watch_unlist(bk_watchers *ws, bk_watch *w)
{
	for (size_t i = 0; i < ws->n; i++) {
		if (ws->watch[i] == w) {
			ws->watch[i] = ws->watch[--ws->n];
			return;
		}
	}
}

/* The watch is over (end: boxkite.v1.WatchEnd): what it gathered goes, then its end, and it is
 * forgotten. 1 (w is gone), or <0 when the channel broke. */
static int watch_end(bk_watchers *ws, bk_watch *w, uint32_t end)
{
	bk_reply reply = BOXKITE__EXECUTOR__REPLY__INIT;
	Boxkite__Executor__Changes changes = BOXKITE__EXECUTOR__CHANGES__INIT;
	int ret = ws->batch_of == w ? flush(ws) : 0;

	changes.watch = w->id;
	changes.end = end;
	reply.kind_case = BOXKITE__EXECUTOR__REPLY__KIND_CHANGES;
	reply.changes = &changes;
	if (ret == 0)
		ret = bk_answer(ws->ch, &reply, NULL, 0);
	watch_unlist(ws, w);
	watch_free(ws, w);
	return ret < 0 ? ret : 1;
}

/* --- walking a tree into the watch --------------------------------------------------------- */

enum add_mode {
	ADD_START,   /* the watch's whole tree, at its start: nothing reported */
	ADD_NEW,     /* a directory that appeared: what is in it reported CREATED */
	ADD_MOVED,   /* a directory renamed within the watch: its node moved, nothing walked */
	ADD_RESYNC,  /* after an overflow: the whole tree again, nodes not found dropped */
};

struct adding {
	bk_watchers *ws;
	bk_watch *w;
	enum add_mode mode;
	struct node *top_parent;  /* where the walk's start is (NULL: it is the watched directory) */
	const char *top_name;
	struct node **stack;      /* the node of each level of the walk */
	size_t cap;
	struct node *cur;         /* the directory whose entries are read now (NULL: not watched) */
	bool report;
	uint64_t lost;            /* CREATED not sent: the channel was full */
	int err;                  /* ENOSPC: past the bound */
};

static int report_created(struct adding *a, const struct node *dir, const char *name, bool is_dir)
{
	char path[PATH_MAX];

	if (!a->report || !dir || child_path(a->w, dir, name, path) < 0)
		return 0;
	if (channel_full(a->ws)) {
		a->lost++;
		return 0;
	}
	return emit(a->ws, a->w, CREATED, path, NULL, is_dir, 0) < 0 ? -EPIPE : 0;
}

static int add_entered(void *arg, int fd, size_t depth, const char *name)
{
	struct adding *a = arg;
	struct node *parent = depth == 1 ? a->top_parent : a->stack[depth - 2];
	const char *nm = depth == 1 ? a->top_name : name;
	struct node *n;
	bool existed;

	a->cur = NULL;
	if (depth > a->cap) {
		struct node **ns = realloc(a->stack, (a->cap = a->cap ? 2 * a->cap : 64) * sizeof(*ns));
		if (!ns)
			return -ENOMEM;
		a->stack = ns;
	}
	a->stack[depth - 1] = NULL;
	if (depth > 1 && report_created(a, parent, nm, true) < 0)
		return -EPIPE;
	if (!(n = watch_dir(a->ws, a->w, fd, parent, nm, &existed))) {
		if (errno == ENOSPC || errno == ENOMEM || errno == EMFILE) {
			a->err = errno;
			return -errno;
		}
		/* Deeper than a path reaches, not readable by the sandbox user, gone: not watched, nor
		 * walked (PROTOCOL.md says so). */
		return 1;
	}
	a->stack[depth - 1] = a->cur = n;
	if (depth == 1 && !parent)
		a->w->root = n;
	if (depth == 1 && a->mode == ADD_MOVED) {
		if (existed) {
			/* Its tree came with it: only where it is changed. Its own IN_MOVE_SELF comes. */
			n->moved = true;
			return 1;
		}
		/* A directory we did not watch (it was unreadable, say): new to us. */
		a->report = true;
	} else if (depth == 1 && existed && a->mode == ADD_NEW) {
		/* A move whose first half was sent alone (MOVE_PAIR_MS): it is ours, and moved. */
		n->moved = true;
	}
	return 0;
}

static int add_leaf(void *arg, int dirfd, const char *name)
{
	struct adding *a = arg;

	(void)dirfd;
	return report_created(a, a->cur, name, false);
}

static int add_dir_done(void *arg, int parent_fd, const char *name)
{
	(void)arg;
	(void)parent_fd;
	(void)name;
	return 0;
}

/* A subdirectory the sandbox user may not open: not watched (like one it may not read). */
static int add_unopened(void *arg, int errnum)
{
	(void)arg;
	(void)errnum;
	return 0;
}

/* Walk `name` in the directory open on parent_fd (node top_parent; NULL with name "." for the
 * watched directory itself) into the watch. 0, or -errno: what stopped it (a->err ENOSPC for the
 * bound). */
static int add_tree(bk_watchers *ws, bk_watch *w, enum add_mode mode, int parent_fd, struct node *top_parent,
		    const char *name, struct adding *a)
{
	const bk_fs_walk_ops ops = { add_leaf, add_dir_done, add_unopened, a, NULL, add_entered };
	char where[PATH_MAX];
	int ret;

	*a = (struct adding){ .ws = ws, .w = w, .mode = mode, .top_parent = top_parent,
			      .top_name = top_parent ? name : "", .report = mode == ADD_NEW };
	ret = bk_fs_walk(parent_fd, name, &ops, where, sizeof(where));
	free(a->stack);
	if (a->err)
		return -a->err;
	return ret;
}

/* A directory appeared at `name` in n (created, or moved in from outside, or renamed within:
 * mode): watch it and its tree. 0, 1 when the watch ended (LIMIT), <0 when the channel broke. */
static int add_found(bk_watchers *ws, bk_watch *w, struct node *n, const char *name, enum add_mode mode)
{
	char path[PATH_MAX];
	struct adding a;
	int ret;
	_cleanup_close_ int fd = -1;

	if (node_path(w, n, path) < 0)
		return 0;
	/* Through real directories only: a node's path names directories, never a symlink. */
	if ((fd = bk_fs_open_real(w->dir_fd, path, O_PATH | O_DIRECTORY)) < 0)
		return 0; /* gone meanwhile: its events say so */
	ret = add_tree(ws, w, mode, fd, n, name, &a);
	if (a.lost && emit(ws, w, OVERFLOW, NULL, NULL, false, a.lost) < 0)
		return -EPIPE;
	if (ret == -EPIPE)
		return ret;
	if (a.err)
		return watch_end(ws, w, BOXKITE__V1__WATCH_END__WATCH_END_LIMIT);
	/* It moved while it was walked, or could not be read: what it holds is not known. */
	if (ret < 0 && ret != -ENOENT && ret != -ENOTDIR && ret != -ELOOP && ret != -EACCES)
		return emit(ws, w, OVERFLOW, NULL, NULL, false, 0);
	return 0;
}

/* After the kernel's queue overflowed, the tree may be anywhere: walk it all again (moving the
 * nodes found to where they are now) and drop the nodes no longer found. 0, 1 when the watch
 * ended, <0 when the channel broke. */
static int resync(bk_watchers *ws, bk_watch *w)
{
	struct adding a;
	int ret;

	w->gen++;
	ret = add_tree(ws, w, ADD_RESYNC, w->dir_fd, NULL, ".", &a);
	if (a.err)
		return watch_end(ws, w, BOXKITE__V1__WATCH_END__WATCH_END_LIMIT);
	if (ret < 0 || w->root->gen != w->gen)
		return watch_end(ws, w, BOXKITE__V1__WATCH_END__WATCH_END_REMOVED);
	/* Depth first; a node the walk did not find is cut off with its tree (what was found below
	 * it, the walk moved to where it was found). */
	for (struct node *n = w->root->child; n;) {
		struct node *next;

		if (n->gen == w->gen && n->child) {
			n = n->child;
			continue;
		}
		next = n->next;
		for (struct node *p = n->parent; !next && p != w->root; p = p->parent)
			next = p->next;
		if (n->gen != w->gen)
			drop(ws, w, n, true);
		n = next;
	}
	return 0;
}

/* --- reading the instances ----------------------------------------------------------------- */

/* The first half of a rename whose second did not come: it left the watch. A directory's node
 * goes when its own IN_MOVE_SELF comes. */
static int from_flush(bk_watchers *ws, bk_watch *w)
{
	if (!w->from_pending)
		return 0;
	w->from_pending = false;
	return emit(ws, w, MOVED, w->from, NULL, w->from_dir, 0);
}

/* One event of w's instance. 0, 1 when the watch ended (w is gone), <0 when the channel broke. */
static int handle(bk_watchers *ws, bk_watch *w, const struct inotify_event *ev, int64_t now_ms)
{
	char path[PATH_MAX];
	bool dir = ev->mask & IN_ISDIR;
	struct node *n;
	int ret;

	if (!((ev->mask & IN_MOVED_TO) && w->from_pending && ev->cookie == w->cookie) && (ret = from_flush(ws, w)) < 0)
		return ret;
	if (ev->mask & IN_Q_OVERFLOW) {
		w->from_pending = false;
		if ((ret = emit(ws, w, OVERFLOW, NULL, NULL, false, 0)) < 0)
			return ret;
		return resync(ws, w);
	}
	if (!(n = find(w, ev->wd)))
		return 0; /* a directory dropped already */
	if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT)) {
		if (n == w->root)
			return watch_end(ws, w, BOXKITE__V1__WATCH_END__WATCH_END_REMOVED);
		if (ev->mask & (IN_IGNORED | IN_UNMOUNT))
			drop(ws, w, n, false);
		else if ((ev->mask & IN_MOVE_SELF) && n->moved)
			n->moved = false;
		else if (ev->mask & IN_MOVE_SELF)
			drop(ws, w, n, true); /* it left the watch: nothing there is ours to report */
		return 0;
	}
	if (!ev->len || child_path(w, n, ev->name, path) < 0)
		return 0;
	if (ev->mask & IN_CREATE) {
		if ((ret = emit(ws, w, CREATED, path, NULL, dir, 0)) < 0)
			return ret;
		return dir ? add_found(ws, w, n, ev->name, ADD_NEW) : 0;
	}
	if (ev->mask & IN_MODIFY)
		return emit(ws, w, MODIFIED, path, NULL, dir, 0);
	if (ev->mask & IN_CLOSE_WRITE)
		return emit(ws, w, CLOSED, path, NULL, dir, 0);
	if (ev->mask & IN_DELETE)
		return emit(ws, w, REMOVED, path, NULL, dir, 0);
	if (ev->mask & IN_MOVED_FROM) {
		w->from_pending = true;
		w->from_dir = dir;
		w->cookie = ev->cookie;
		w->from_due = now_ms + MOVE_PAIR_MS;
		memcpy(w->from, path, strlen(path) + 1);
		return 0;
	}
	if (ev->mask & IN_MOVED_TO) {
		bool paired = w->from_pending && ev->cookie == w->cookie;

		w->from_pending = false;
		if ((ret = emit(ws, w, MOVED, paired ? w->from : NULL, path, dir, 0)) < 0)
			return ret;
		return dir ? add_found(ws, w, n, ev->name, paired ? ADD_MOVED : ADD_NEW) : 0;
	}
	return 0;
}

/* One read of w's instance, every event in it handled. */
static int watch_read(bk_watchers *ws, bk_watch *w, int64_t now_ms)
{
	_Alignas(struct inotify_event) char buf[READ_BYTES];
	ssize_t len = read(w->ifd, buf, sizeof(buf));

	if (len <= 0)
		return 0;
	for (char *p = buf; p < buf + len;) {
		const struct inotify_event *ev = (const struct inotify_event *)(void *)p;
		int ret = handle(ws, w, ev, now_ms);

		if (ret != 0)
			return ret < 0 ? ret : 0;
		p += sizeof(*ev) + ev->len;
	}
	return 0;
}

/* --- the watches ----------------------------------------------------------------------------- */

void bk_watchers_init(bk_watchers *ws, bk_fs *fs, bk_channel *ch)
{
	memset(ws, 0, sizeof(*ws));
	ws->fs = fs;
	ws->ch = ch;
}

static bk_watch *lookup(bk_watchers *ws, uint64_t id)
{
	for (size_t i = 0; i < ws->n; i++)
		if (ws->watch[i]->id == id)
			return ws->watch[i];
	return NULL;
}

static int add_fail(bk_fs_error *e, int errnum, const char *what)
{
	e->errnum = errnum;
	snprintf(e->path, sizeof(e->path), "%s", what);
	return -errnum;
}

int bk_watchers_add(bk_watchers *ws, uint64_t id, const char *path, uint64_t *dirs, bk_fs_error *e)
{
	char norm[PATH_MAX];
	struct adding a;
	bk_watch *w;
	int ret;

	*dirs = 0;
	if (lookup(ws, id))
		return add_fail(e, EEXIST, "a watch of that id");
	if (ws->n == BK_WATCHES_MAX)
		return add_fail(e, EMFILE, "the sandbox has as many watches as it may");
	if (!(w = calloc(1, sizeof(*w))))
		return add_fail(e, ENOMEM, path);
	w->id = id;
	w->dir_fd = -1;
	if ((w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0) {
		ret = add_fail(e, errno, errno == EMFILE ? "the sandbox user has every inotify instance the kernel lets it "
							   "have (fs.inotify.max_user_instances)"
							 : path);
		watch_free(ws, w);
		return ret;
	}
	if ((w->dir_fd = bk_fs_open_dir(ws->fs, path, norm, e)) < 0) {
		ret = w->dir_fd;
		watch_free(ws, w);
		return ret;
	}
	w->base_len = strlen(norm);
	ret = add_tree(ws, w, ADD_START, w->dir_fd, NULL, ".", &a);
	if (ret < 0 || !w->root) {
		if (a.err == ENOSPC)
			ret = add_fail(e, ENOSPC, ws->dirs >= BK_WATCH_DIRS_MAX
							  ? "the tree holds more directories than the sandbox's watches may"
							  : "the kernel lets the sandbox user watch no more directories "
							    "(fs.inotify.max_user_watches)");
		else
			ret = add_fail(e, ret < 0 ? -ret : EACCES, norm);
		watch_free(ws, w);
		return ret;
	}
	ws->watch[ws->n++] = w;
	*dirs = w->dirs;
	return 0;
}

int bk_watchers_remove(bk_watchers *ws, uint64_t id)
{
	bk_watch *w = lookup(ws, id);

	if (!w)
		return -ENOENT;
	watch_unlist(ws, w);
	watch_free(ws, w);
	return 0;
}

void bk_watchers_clear(bk_watchers *ws)
{
	while (ws->n)
		bk_watchers_remove(ws, ws->watch[0]->id);
}

size_t bk_watchers_pollfds(const bk_watchers *ws, struct pollfd *fds)
{
	/* While the front has not taken what was sent, nothing more is read: the kernel's queue
	 * holds it, and overflows (IN_Q_OVERFLOW) rather than this process growing. */
	if (bk_channel_queued(ws->ch) >= BK_ORDERS_PAUSE_BYTES)
		return 0;
	for (size_t i = 0; i < ws->n; i++)
		fds[i] = (struct pollfd){ .fd = ws->watch[i]->ifd, .events = POLLIN };
	return ws->n;
}

int bk_watchers_timeout(const bk_watchers *ws, int64_t now_ms)
{
	int64_t first = ws->n ? ws->checked_ms + REMOVED_CHECK_MS : -1;

	for (size_t i = 0; i < ws->n; i++)
		if (ws->watch[i]->from_pending && (first < 0 || ws->watch[i]->from_due < first))
			first = ws->watch[i]->from_due;
	return first < 0 ? -1 : first <= now_ms ? 0 : (int)(first - now_ms);
}

/* The watches whose directory was removed (no link left) end. */
static int removed_check(bk_watchers *ws)
{
	for (size_t i = 0; i < ws->n;) {
		struct stat st;
		int ret;

		if (fstat(ws->watch[i]->dir_fd, &st) == 0 && st.st_nlink > 0) {
			i++;
			continue;
		}
		/* The list moved: the same index holds the next watch now. */
		if ((ret = watch_end(ws, ws->watch[i], BOXKITE__V1__WATCH_END__WATCH_END_REMOVED)) < 0)
			return ret;
	}
	return 0;
}

int bk_watchers_serve(bk_watchers *ws, const struct pollfd *fds, size_t n, int64_t now_ms)
{
	int ret;

	for (size_t i = 0; i < n; i++) {
		bk_watch *w = NULL;

		if (!fds[i].revents)
			continue;
		/* By descriptor: a watch may have ended meanwhile, and the list moved. */
		for (size_t k = 0; k < ws->n && !w; k++)
			if (ws->watch[k]->ifd == fds[i].fd)
				w = ws->watch[k];
		if (w && (ret = watch_read(ws, w, now_ms)) < 0)
			return ret;
	}
	for (size_t i = 0; i < ws->n; i++)
		if (ws->watch[i]->from_pending && ws->watch[i]->from_due <= now_ms && (ret = from_flush(ws, ws->watch[i])) < 0)
			return ret;
	if (now_ms >= ws->checked_ms + REMOVED_CHECK_MS) {
		ws->checked_ms = now_ms;
		if ((ret = flush(ws)) < 0 || (ret = removed_check(ws)) < 0)
			return ret;
	}
	return flush(ws);
}
