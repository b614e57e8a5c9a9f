#include "files/fsops.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <linux/limits.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "boxkite/v1/boxkite.pb-c.h"
#include "cleanup.h"

#define RESOLVE_CONTAINED (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

const char *const bk_fs_wipe_extra[BK_FS_WIPE_EXTRA] = { BK_SANDBOX_HOME, "/dev/shm" };

void bk_fs_init(bk_fs *fs, const bk_roots *roots, uid_t uid)
{
	memset(fs, 0, sizeof(*fs));
	fs->roots = roots;
	fs->uid = uid;
	fs->proc_fd = -1;
	for (size_t i = 0; i < BK_ROOTS_MAX; i++)
		fs->root_fd[i] = -1;
	for (size_t i = 0; i < BK_FS_WIPE_EXTRA; i++)
		fs->wipe_fd[i] = -1;
}

static void snapshots_drop(bk_fs *fs);

static int openat2_fd(int dirfd, const char *path, uint64_t flags, uint64_t mode, uint64_t resolve)
{
	struct open_how how = { .flags = flags | O_CLOEXEC, .mode = mode, .resolve = resolve };

	return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

int bk_fs_open_real(int dirfd, const char *rel, int flags)
{
	return openat2_fd(dirfd, *rel ? rel : ".", (uint64_t)flags, 0, RESOLVE_CONTAINED | RESOLVE_NO_SYMLINKS);
}

void bk_fs_attach(bk_fs *fs, int sandbox_root_fd, int proc_fd)
{
	fs->proc_fd = proc_fd;
	for (size_t i = 0; i < fs->roots->n; i++) {
		/* Inside the sandbox's own root, as its processes would see it: a root that is a
		 * symlink in the image resolves the same way for them and for us. */
		fs->root_fd[i] = openat2_fd(sandbox_root_fd, fs->roots->root[i].path + 1, O_PATH | O_DIRECTORY, 0,
					    RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
	}
	for (size_t i = 0; i < BK_FS_WIPE_EXTRA; i++)
		fs->wipe_fd[i] = openat2_fd(sandbox_root_fd, bk_fs_wipe_extra[i] + 1, O_PATH | O_DIRECTORY, 0,
					    RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
}

void bk_fs_detach(bk_fs *fs)
{
	for (size_t i = 0; i < BK_ROOTS_MAX; i++)
		fs->root_fd[i] = bk_close(fs->root_fd[i]);
	for (size_t i = 0; i < BK_FS_WIPE_EXTRA; i++)
		fs->wipe_fd[i] = bk_close(fs->wipe_fd[i]);
	fs->proc_fd = bk_close(fs->proc_fd);
	snapshots_drop(fs);
}

static int fail(bk_fs_error *e, int errnum, const char *path)
{
	e->errnum = errnum;
	snprintf(e->path, sizeof(e->path), "%.4095s", path);
	return -errnum;
}

/* A sandbox path → its root's descriptor and the path relative to it ("" for the root). */
struct place {
	const bk_root *root;
	int root_fd;
	bool read_only;
	const char *rel;
	char norm[4096];
};

static int locate(bk_fs *fs, const char *path, struct place *pl, bk_fs_error *e)
{
	const bk_root *root;

	/* The order's check gave the reason already: here only the errno is the answer's. */
	if (bk_sandbox_path(fs->roots, path, pl->norm, sizeof(pl->norm), &root, NULL) < 0)
		return fail(e, EINVAL, path);
	pl->root = root;
	pl->root_fd = fs->root_fd[root - fs->roots->root];
	pl->read_only = root->read_only;
	pl->rel = pl->norm + strlen(root->path);
	if (*pl->rel == '/')
		pl->rel++;
	if (pl->root_fd < 0)
		return fail(e, ENOENT, root->path);
	return 0;
}

/* The directory holding the last component of pl, opened O_PATH beneath the root, and the
 * last component itself (no '/'). The root itself has no parent here: EBUSY. */
static int open_parent(const struct place *pl, const char **name, bk_fs_error *e)
{
	const char *slash = strrchr(pl->rel, '/');
	char dir[4096];
	int fd;

	if (!*pl->rel)
		return fail(e, EBUSY, pl->norm);
	if (!slash) {
		*name = pl->rel;
		fd = openat2_fd(pl->root_fd, ".", O_PATH | O_DIRECTORY, 0, RESOLVE_CONTAINED);
	} else {
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - pl->rel), pl->rel);
		*name = slash + 1;
		fd = openat2_fd(pl->root_fd, dir, O_PATH | O_DIRECTORY, 0, RESOLVE_CONTAINED);
	}
	return fd < 0 ? fail(e, errno, pl->norm) : fd;
}

static void info_from_stat(bk_fs_info *info, const struct stat *st)
{
	info->type = S_ISREG(st->st_mode)   ? BOXKITE__V1__FILE_TYPE__FILE_TYPE_REGULAR
		     : S_ISDIR(st->st_mode) ? BOXKITE__V1__FILE_TYPE__FILE_TYPE_DIRECTORY
		     : S_ISLNK(st->st_mode) ? BOXKITE__V1__FILE_TYPE__FILE_TYPE_SYMLINK
					    : BOXKITE__V1__FILE_TYPE__FILE_TYPE_OTHER;
	info->size = (uint64_t)st->st_size;
	info->mode = st->st_mode & 07777;
	info->uid = st->st_uid;
	info->gid = st->st_gid;
	info->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

/* lstat of name in dirfd, with the symlink's target when it is one (into target). */
static int stat_entry(int dirfd, const char *name, bk_fs_info *info, char *target, size_t size)
{
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) < 0)
		return -errno;
	info_from_stat(info, &st);
	target[0] = '\0';
	if (S_ISLNK(st.st_mode)) {
		ssize_t n = readlinkat(dirfd, name, target, size - 1);
		if (n >= 0)
			target[n] = '\0';
	}
	info->symlink_target = target;
	return 0;
}

int bk_fs_stat(bk_fs *fs, const char *path, bk_fs_info *info, char *names, bk_fs_error *e)
{
	struct place pl;
	const char *name;
	int ret;

	if ((ret = locate(fs, path, &pl, e)) < 0)
		return ret;
	if (!*pl.rel) {
		ret = stat_entry(pl.root_fd, "", info, names + 4096, 4096);
	} else {
		_cleanup_close_ int dirfd = open_parent(&pl, &name, e);
		ret = dirfd < 0 ? dirfd : stat_entry(dirfd, name, info, names + 4096, 4096);
	}
	if (ret < 0)
		return e->errnum ? ret : fail(e, -ret, pl.norm);
	snprintf(names, 4096, "%s", pl.norm);
	info->name = names;
	return 0;
}

/* --- listing: a snapshot of each directory's sorted names ----------------------------------- */

/* What one List page may hold of names and symlink targets. With the entries' other fields
 * (~50 bytes each, at most LIST_PAGE_MAX of them) the answer stays far below one channel packet
 * (BK_CHANNEL_MAX_MSG) however long the names and targets the sandbox made. */
#define LIST_PAGE_BYTES (256u << 10)
/* The names kept for paging, all directories together; the least recently used go first. */
#define SNAPSHOT_BYTES (64u << 20)
/* A directory changed this recently may change again within its timestamps' granularity (a
 * jiffy on most filesystems, up to 2 s on some) without its mtime or ctime showing it: its
 * snapshot is used for the page it was made for, not kept. */
#define SETTLED_NS (2 * 1000000000LL)

struct bk_fs_snapshot {
	bk_fs_snapshot *next;         /* most recently used first */
	dev_t dev;
	ino_t ino;
	struct timespec mtime, ctime; /* the directory's when read */
	size_t n, bytes;
	char **names;                 /* sorted (strcmp: bytes), into `pool` */
	char pool[];
};

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int64_t ts_ns(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

static bool same_time(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

static void snapshot_unlink(bk_fs *fs, bk_fs_snapshot *s)
{
	for (bk_fs_snapshot **pp = &fs->snapshots; *pp; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			fs->snapshot_bytes -= s->bytes;
			return;
		}
	}
}

static void snapshots_drop(bk_fs *fs)
{
	while (fs->snapshots) {
		bk_fs_snapshot *next = fs->snapshots->next;
		free(fs->snapshots);
		fs->snapshots = next;
	}
	fs->snapshot_bytes = 0;
}

/* Every name of the directory open on fd, sorted, in one block. NULL with errno. */
static bk_fs_snapshot *snapshot_read(int fd, const struct stat *st)
{
	_cleanup_free_ char *pool = NULL;
	_cleanup_free_ char **sorted = NULL;
	size_t used = 0, cap = 0, n = 0;
	bk_fs_snapshot *s;
	struct dirent *de;
	DIR *d;
	int dfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);

	if (dfd < 0 || !(d = fdopendir(dfd))) {
		bk_close(dfd);
		return NULL;
	}
	while ((errno = 0, de = readdir(d))) {
		size_t len = strlen(de->d_name) + 1;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (used + len > cap) {
			char *np = realloc(pool, cap = (cap + len) * 2);
			if (!np) {
				closedir(d);
				errno = ENOMEM;
				return NULL;
			}
			pool = np;
		}
		memcpy(pool + used, de->d_name, len);
		used += len;
		n++;
	}
	if (errno) {
		int saved = errno;
		closedir(d);
		errno = saved;
		return NULL;
	}
	closedir(d);
	s = malloc(sizeof(*s) + used + (n + 1) * sizeof(char *));
	sorted = malloc((n + 1) * sizeof(char *));
	if (!s || !sorted) {
		free(s);
		errno = ENOMEM;
		return NULL;
	}
	for (size_t i = 0, off = 0; i < n; i++, off += strlen(pool + off) + 1)
		sorted[i] = pool + off;
	qsort(sorted, n, sizeof(char *), name_cmp);
	/* The names copied in their sorted order, so that a page reads its names in one run of
	 * memory rather than scattered over the pool in the directory's hash order. Their pointers
	 * after the pool, aligned: the allocation has room (one spare). */
	memset(s, 0, sizeof(*s));
	s->names = (char **)(void *)(((uintptr_t)(s->pool + used) + sizeof(char *) - 1) & ~(uintptr_t)(sizeof(char *) - 1));
	for (size_t i = 0, off = 0; i < n; i++) {
		size_t len = strlen(sorted[i]) + 1;
		memcpy(s->pool + off, sorted[i], len);
		s->names[i] = s->pool + off;
		off += len;
	}
	s->n = n;
	s->bytes = sizeof(*s) + used + (n + 1) * sizeof(char *);
	s->dev = st->st_dev;
	s->ino = st->st_ino;
	s->mtime = st->st_mtim;
	s->ctime = st->st_ctim;
	return s;
}

/* The directory's snapshot, reading it when there is none or it changed since: *read says
 * which. *keep false: the caller frees it after use (not cached). */
static bk_fs_snapshot *snapshot_get(bk_fs *fs, int fd, const struct timespec *now, bool *read, bool *keep)
{
	struct stat st;
	bk_fs_snapshot *s;

	*read = false;
	*keep = true;
	if (fstat(fd, &st) < 0)
		return NULL;
	for (s = fs->snapshots; s; s = s->next)
		if (s->dev == st.st_dev && s->ino == st.st_ino)
			break;
	if (s && same_time(&s->mtime, &st.st_mtim) && same_time(&s->ctime, &st.st_ctim)) {
		snapshot_unlink(fs, s);
	} else {
		if (s) {
			snapshot_unlink(fs, s);
			free(s);
		}
		if (!(s = snapshot_read(fd, &st)))
			return NULL;
		*read = true;
		if (ts_ns(now) - ts_ns(&st.st_mtim) < SETTLED_NS || ts_ns(now) - ts_ns(&st.st_ctim) < SETTLED_NS ||
		    s->bytes > SNAPSHOT_BYTES) {
			*keep = false;
			return s;
		}
	}
	/* Most recently used first, the oldest dropped while over the budget. */
	while (fs->snapshots && fs->snapshot_bytes + s->bytes > SNAPSHOT_BYTES) {
		bk_fs_snapshot *last = fs->snapshots;
		while (last->next)
			last = last->next;
		snapshot_unlink(fs, last);
		free(last);
	}
	s->next = fs->snapshots;
	fs->snapshots = s;
	fs->snapshot_bytes += s->bytes;
	return s;
}

/* The first name sorting after `after` ("" : the first of all). */
static size_t first_after(const bk_fs_snapshot *s, const char *after)
{
	size_t lo = 0, hi = s->n;

	if (!after[0])
		return 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(s->names[mid], after) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int bk_fs_list(bk_fs *fs, const char *path, const char *after, uint32_t limit, const struct timespec *now,
	       bk_fs_info **entries, size_t *n, bool *more, bool *read, bk_fs_error *e)
{
	struct place pl;
	bk_fs_snapshot *s;
	size_t first, i, take, used = 0;
	bool keep;
	char *pool;
	int ret;
	_cleanup_close_ int fd = -1;

	*entries = NULL;
	*n = 0;
	*more = false;
	*read = false;
	if ((ret = locate(fs, path, &pl, e)) < 0)
		return ret;
	fd = openat2_fd(pl.root_fd, *pl.rel ? pl.rel : ".", O_RDONLY | O_DIRECTORY, 0, RESOLVE_CONTAINED);
	if (fd < 0 || !(s = snapshot_get(fs, fd, now, read, &keep)))
		return fail(e, errno, pl.norm);
	first = first_after(s, after);
	take = s->n - first < limit ? s->n - first : limit;
	/* One block: the entries, then their names and symlink targets — LIST_PAGE_BYTES of them,
	 * and room for one more entry of the longest name and target. */
	*entries = malloc(take * sizeof(bk_fs_info) + LIST_PAGE_BYTES + NAME_MAX + 1 + PATH_MAX);
	if (!*entries) {
		if (!keep)
			free(s);
		return fail(e, ENOMEM, pl.norm);
	}
	pool = (char *)(*entries + take);
	for (i = 0; i < take && used < LIST_PAGE_BYTES; i++) {
		const char *name = s->names[first + i];
		bk_fs_info *info = &(*entries)[*n];
		size_t len = strlen(name) + 1;

		boxkite__executor__file_info__init(info);
		memcpy(pool + used, name, len);
		info->name = pool + used;
		/* An entry removed since the snapshot is simply not listed. */
		if (stat_entry(fd, name, info, pool + used + len, PATH_MAX) == 0) {
			used += len + strlen(info->symlink_target) + 1;
			(*n)++;
		}
	}
	*more = first + i < s->n;
	if (!keep)
		free(s);
	return 0;
}

int bk_fs_open_dir(bk_fs *fs, const char *path, char *norm, bk_fs_error *e)
{
	struct place pl;
	int ret, fd;

	if ((ret = locate(fs, path, &pl, e)) < 0)
		return ret;
	fd = openat2_fd(pl.root_fd, *pl.rel ? pl.rel : ".", O_PATH | O_DIRECTORY, 0, RESOLVE_CONTAINED);
	if (fd < 0)
		return fail(e, errno, pl.norm);
	memcpy(norm, pl.norm, strlen(pl.norm) + 1);
	return fd;
}

int bk_fs_open_read(bk_fs *fs, const char *path, bk_fs_error *e)
{
	struct place pl;
	struct stat st;
	int ret, fd;

	if ((ret = locate(fs, path, &pl, e)) < 0)
		return ret;
	fd = openat2_fd(pl.root_fd, *pl.rel ? pl.rel : ".", O_RDONLY | O_NOCTTY | O_NONBLOCK, 0, RESOLVE_CONTAINED);
	if (fd < 0)
		return fail(e, errno, pl.norm);
	if (fstat(fd, &st) < 0) {
		int errnum = errno;
		bk_close(fd);
		return fail(e, errnum, pl.norm);
	}
	if (!S_ISREG(st.st_mode)) {
		bk_close(fd);
		return fail(e, S_ISDIR(st.st_mode) ? EISDIR : EINVAL, pl.norm);
	}
	return fd;
}

/* mkdir -p of rel beneath root_fd, as the caller's identity; EEXIST of a directory is fine. */
static int mkdir_parents(int root_fd, const char *rel, mode_t mode, const char *norm, bk_fs_error *e)
{
	char prefix[4096], upto[4096];
	const char *p = rel;

	while (*p) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - rel) : strlen(rel);
		struct stat st;
		int dirfd;
		const char *name;

		snprintf(upto, sizeof(upto), "%.*s", (int)len, rel);
		snprintf(prefix, sizeof(prefix), "%s", upto);
		name = strrchr(prefix, '/');
		if (name) {
			prefix[name - prefix] = '\0';
			dirfd = openat2_fd(root_fd, prefix, O_PATH | O_DIRECTORY, 0, RESOLVE_CONTAINED);
			name++;
		} else {
			dirfd = openat2_fd(root_fd, ".", O_PATH | O_DIRECTORY, 0, RESOLVE_CONTAINED);
			name = prefix;
		}
		if (dirfd < 0)
			return fail(e, errno, norm);
		if (mkdirat(dirfd, name, mode) < 0) {
			/* It exists: fine if it is a directory beneath the root. Checked by resolving
			 * it contained, never with a plain stat, which would follow a symlink out of
			 * the sandbox and tell what the host has there. */
			int errnum = errno, sub = -1;
			if (errnum == EEXIST) {
				sub = openat2_fd(root_fd, upto, O_PATH, 0, RESOLVE_CONTAINED);
				errnum = sub < 0 ? errno : fstat(sub, &st) < 0 ? errno : S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
				bk_close(sub);
			}
			if (errnum) {
				bk_close(dirfd);
				return fail(e, errnum, norm);
			}
		}
		bk_close(dirfd);
		if (!slash)
			break;
		p = slash + 1;
	}
	return 0;
}

int bk_fs_create_temp(bk_fs *fs, const char *path, bool make_parents, bool overwrite, bk_fs_error *e)
{
	struct place pl;
	const char *name;
	struct stat st;
	int ret, dirfd = -1, fd = -1;

	if ((ret = locate(fs, path, &pl, e)) < 0)
		return ret;
	if (pl.read_only)
		return fail(e, EROFS, pl.norm);
	if (make_parents && strrchr(pl.rel, '/')) {
		char parents[4096];
		snprintf(parents, sizeof(parents), "%.*s", (int)(strrchr(pl.rel, '/') - pl.rel), pl.rel);
		if ((ret = mkdir_parents(pl.root_fd, parents, 0755, pl.norm, e)) < 0)
			goto out;
	}
	dirfd = open_parent(&pl, &name, e);
	if (dirfd < 0) {
		ret = dirfd;
		goto out;
	}
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && (!overwrite || S_ISDIR(st.st_mode))) {
		ret = fail(e, S_ISDIR(st.st_mode) ? EISDIR : EEXIST, pl.norm);
		goto out;
	}
	/* Unnamed until committed: a reader never sees it, and if the upload is abandoned the
	 * kernel frees it with its last descriptor. */
	fd = openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	ret = fd < 0 ? fail(e, errno, pl.norm) : fd;
out:
	bk_close(dirfd);
	return ret;
}

int bk_fs_commit(bk_fs *fs, int fd, const char *path, uint32_t mode, bool overwrite, bk_fs_error *e)
{
	struct place pl;
	const char *name;
	char fdname[16], tmpname[64];
	uint64_t rnd = 0;
	int ret, dirfd = -1;
	struct stat st;

	if ((ret = locate(fs, path, &pl, e)) < 0)
		return ret;
	if (pl.read_only)
		return fail(e, EROFS, pl.norm);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 0 || st.st_uid != fs->uid)
		return fail(e, EINVAL, pl.norm); /* not one of our unnamed files */
	/* Permission bits only: never setuid, setgid or sticky from a client. */
	if (fchmod(fd, mode & 0777) < 0) {
		ret = fail(e, errno, pl.norm);
		goto out;
	}
	dirfd = open_parent(&pl, &name, e);
	if (dirfd < 0) {
		ret = dirfd;
		goto out;
	}
	/* Named through our own /proc/<pid>/fd (opened before entering the sandbox, whose /proc may
	 * not show us): linkat with AT_EMPTY_PATH would need CAP_DAC_READ_SEARCH. */
	snprintf(fdname, sizeof(fdname), "%d", fd);
	if (!overwrite) {
		/* linkat never replaces: the name appears atomically, or EEXIST. */
		if (linkat(fs->proc_fd, fdname, dirfd, name, AT_SYMLINK_FOLLOW) < 0)
			ret = fail(e, errno, pl.norm);
		goto out;
	}
	/* Replacing: link under a private name, then rename over the target in one step. */
	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
		rnd ^= (uint64_t)(uintptr_t)&rnd;
	snprintf(tmpname, sizeof(tmpname), ".boxkite-upload-%016llx", (unsigned long long)rnd);
	if (linkat(fs->proc_fd, fdname, dirfd, tmpname, AT_SYMLINK_FOLLOW) < 0) {
		ret = fail(e, errno, pl.norm);
		goto out;
	}
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
		errno = EISDIR;
	else if (renameat(dirfd, tmpname, dirfd, name) == 0)
		goto out;
	ret = fail(e, errno, pl.norm);
	unlinkat(dirfd, tmpname, 0);
out:
	bk_close(dirfd);
	return ret;
}

int bk_fs_mkdir(bk_fs *fs, const char *path, bool parents, uint32_t mode, bk_fs_error *e)
{
	struct place pl;
	const char *name;
	int ret, dirfd;

	if ((ret = locate(fs, path, &pl, e)) < 0)
		return ret;
	if (pl.read_only)
		return fail(e, EROFS, pl.norm);
	if (parents) {
		ret = *pl.rel ? mkdir_parents(pl.root_fd, pl.rel, mode & 0777, pl.norm, e) : 0;
	} else {
		dirfd = open_parent(&pl, &name, e);
		ret = dirfd < 0 ? dirfd : mkdirat(dirfd, name, mode & 0777) < 0 ? fail(e, errno, pl.norm) : 0;
		bk_close(dirfd);
	}
	return ret;
}

int bk_fs_symlink(bk_fs *fs, const char *path, const char *target, bk_fs_error *e)
{
	struct place pl;
	const char *name;
	int ret;

	if ((ret = locate(fs, path, &pl, e)) < 0)
		return ret;
	if (pl.read_only)
		return fail(e, EROFS, pl.norm);
	/* The front checked it too; the worker trusts nothing it says. */
	if (!bk_symlink_contained(pl.root, pl.norm, target))
		return fail(e, EXDEV, target);
	_cleanup_close_ int dirfd = open_parent(&pl, &name, e);
	if (dirfd < 0)
		return dirfd;
	return symlinkat(target, dirfd, name) < 0 ? fail(e, errno, pl.norm) : 0;
}

/* --- walking a tree ------------------------------------------------------------------------- */

/* One directory of the walk: its identity (to check that ".." leads back to it) and its
 * subdirectories still to visit. */
struct walk_level {
	dev_t dev;
	ino_t ino;
	char *names;         /* the subdirectories' names, each NUL-terminated */
	size_t used, cap, next;
	size_t name_at;      /* where this directory's own name is in its parent's `names` */
};

struct walk {
	struct walk_level *levels;
	size_t depth, cap;
	char failed[NAME_MAX + 1]; /* the entry of the deepest level that stopped the walk */
};

static void walk_free(struct walk *w)
{
	for (size_t i = 0; i < w->depth; i++)
		free(w->levels[i].names);
	free(w->levels);
}

/* Enter the directory `name` open on fd: note who it is, tell entered(), hand its non-directories
 * to leaf(), keep its subdirectories' names. fd stays open. */
static int walk_enter(struct walk *w, int fd, const char *name, size_t name_at, const bk_fs_walk_ops *ops)
{
	struct walk_level *l;
	struct dirent *de;
	struct stat st;
	DIR *d;
	int dfd, ret = 0;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (w->depth == w->cap) {
		struct walk_level *nl = realloc(w->levels, (w->cap = w->cap ? 2 * w->cap : 64) * sizeof(*nl));
		if (!nl)
			return -ENOMEM;
		w->levels = nl;
	}
	l = &w->levels[w->depth++];
	*l = (struct walk_level){ .dev = st.st_dev, .ino = st.st_ino, .name_at = name_at };
	/* Entered: nothing of it read (its entries are left alone when entered() says so). */
	if (ops->entered && (ret = ops->entered(ops->arg, fd, w->depth, name)) != 0)
		return ret > 0 ? 0 : ret;
	dfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (dfd < 0 || !(d = fdopendir(dfd))) {
		ret = -errno;
		bk_close(dfd);
		return ret;
	}
	while (ret == 0 && (errno = 0, de = readdir(d))) {
		unsigned char type = de->d_type;
		size_t len = strlen(de->d_name) + 1;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (type == DT_UNKNOWN) {
			struct stat est;
			type = fstatat(fd, de->d_name, &est, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(est.st_mode) ? DT_DIR : DT_REG;
		}
		if (type != DT_DIR) {
			if ((ret = ops->leaf(ops->arg, fd, de->d_name)) < 0)
				snprintf(w->failed, sizeof(w->failed), "%s", de->d_name);
			continue;
		}
		if (l->used + len > l->cap) {
			char *nn = realloc(l->names, l->cap = (l->cap + len) * 2);
			if (!nn) {
				ret = -ENOMEM;
				break;
			}
			l->names = nn;
		}
		memcpy(l->names + l->used, de->d_name, len);
		l->used += len;
	}
	if (ret == 0 && errno)
		ret = -errno;
	closedir(d);
	return ret;
}

/* "where" gets the path of the failing entry below the walk's start, its end kept when long. */
static void walk_where(const struct walk *w, const char *start, const char *leaf, char *where, size_t size)
{
	_cleanup_free_ char *path = NULL;
	size_t len = strlen(start) + strlen(leaf) + 2, at = 0;

	for (size_t i = 1; i < w->depth; i++)
		len += strlen(w->levels[i - 1].names + w->levels[i].name_at) + 1;
	if (!(path = malloc(len))) {
		snprintf(where, size, "%s", start);
		return;
	}
	at += (size_t)sprintf(path, "%s", start);
	for (size_t i = 1; i < w->depth; i++)
		at += (size_t)sprintf(path + at, "/%s", w->levels[i - 1].names + w->levels[i].name_at);
	if (leaf[0])
		sprintf(path + at, "/%s", leaf);
	len = strlen(path);
	if (len < size)
		memcpy(where, path, len + 1);
	else
		snprintf(where, size, "...%s", path + len - (size - 4));
}

int bk_fs_walk(int parent, const char *name, const bk_fs_walk_ops *ops, char *where, size_t wsize)
{
	struct walk w = { 0 };
	int fd, ret;

	if (ops->before_open)
		ops->before_open(ops->arg, parent, name);
	fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		snprintf(where, wsize, "%s", name);
		return -errno;
	}
	ret = walk_enter(&w, fd, name, 0, ops);
	while (ret == 0) {
		struct walk_level *l = &w.levels[w.depth - 1];

		if (l->next < l->used) {
			const char *sub = l->names + l->next;
			size_t at = l->next;
			int child;

			l->next += strlen(sub) + 1;
			if (ops->before_open)
				ops->before_open(ops->arg, fd, sub);
			child = openat(fd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (child < 0) {
				/* Gone since it was read, replaced by a file or symlink, or not ours to open. */
				if (errno == ENOENT)
					continue;
				ret = errno == ENOTDIR || errno == ELOOP ? ops->leaf(ops->arg, fd, sub)
									  : ops->unopened(ops->arg, errno);
				if (ret < 0)
					snprintf(w.failed, sizeof(w.failed), "%s", sub);
				continue;
			}
			bk_close(fd);
			fd = child;
			ret = walk_enter(&w, fd, l->names + at, at, ops);
			continue;
		}
		/* This directory is done: up to its parent, and done there. */
		if (w.depth == 1) {
			fd = bk_close(fd);
			ret = ops->dir_done(ops->arg, parent, name);
			if (ret < 0)
				w.depth = 0; /* the start itself failed: where is its name */
			break;
		}
		struct walk_level *up = &w.levels[w.depth - 2];
		struct stat st;
		int pfd = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (pfd < 0 || fstat(pfd, &st) < 0 || st.st_dev != up->dev || st.st_ino != up->ino) {
			ret = pfd < 0 ? -errno : -ESTALE;
			bk_close(pfd);
			break;
		}
		bk_close(fd);
		fd = pfd;
		free(l->names);
		w.depth--;
		ret = ops->dir_done(ops->arg, fd, up->names + l->name_at);
		if (ret < 0)
			snprintf(w.failed, sizeof(w.failed), "%s", up->names + l->name_at);
	}
	if (ret < 0) {
		if (w.depth)
			walk_where(&w, name, w.failed, where, wsize);
		else
			snprintf(where, wsize, "%s", name);
	}
	bk_close(fd);
	walk_free(&w);
	return ret;
}

/* --- remove -r ------------------------------------------------------------------------------- */

struct removal {
	uint64_t count;
};

static int remove_leaf(void *arg, int dirfd, const char *name)
{
	struct removal *r = arg;

	if (unlinkat(dirfd, name, 0) < 0)
		return -errno;
	r->count++;
	return 0;
}

static int remove_dir_done(void *arg, int parent_fd, const char *name)
{
	struct removal *r = arg;

	if (unlinkat(parent_fd, name, AT_REMOVEDIR) < 0)
		return -errno;
	r->count++;
	return 0;
}

static int remove_unopened(void *arg, int errnum)
{
	(void)arg;
	return -errnum;
}

int bk_fs_remove(bk_fs *fs, const char *path, bool recursive, uint64_t *count, bk_fs_error *e)
{
	struct place pl;
	const char *name;
	int ret;
	_cleanup_close_ int dirfd = -1;

	*count = 0;
	if ((ret = locate(fs, path, &pl, e)) < 0)
		return ret;
	if (pl.read_only)
		return fail(e, EROFS, pl.norm);
	if ((dirfd = open_parent(&pl, &name, e)) < 0)
		return dirfd;
	if (unlinkat(dirfd, name, 0) == 0) {
		*count = 1;
		return 0;
	}
	if (errno != EISDIR && errno != EPERM)
		return fail(e, errno, pl.norm);
	if (!recursive)
		return unlinkat(dirfd, name, AT_REMOVEDIR) == 0 ? (*count = 1, 0) : fail(e, errno, pl.norm);

	struct removal r = { 0 };
	const bk_fs_walk_ops ops = { remove_leaf, remove_dir_done, remove_unopened, &r };
	char where[3072], dir[4096], full[4096];

	ret = bk_fs_walk(dirfd, name, &ops, where, sizeof(where));
	*count = r.count;
	if (ret < 0) {
		/* where starts with the last component of the path; the rest of the path before it. */
		snprintf(dir, sizeof(dir), "%.*s", (int)(strrchr(pl.norm, '/') - pl.norm), pl.norm);
		snprintf(full, sizeof(full), "%.1000s/%s", dir, where);
		return fail(e, -ret, full);
	}
	return 0;
}

int bk_fs_rename(bk_fs *fs, const char *from, const char *to, bool overwrite, bk_fs_error *e)
{
	struct place a, b;
	const char *na, *nb;
	int ret, da = -1, db = -1;

	if ((ret = locate(fs, from, &a, e)) < 0 || (ret = locate(fs, to, &b, e)) < 0)
		return ret;
	if (a.read_only || b.read_only)
		return fail(e, EROFS, a.read_only ? a.norm : b.norm);
	if ((da = open_parent(&a, &na, e)) < 0)
		ret = da;
	else if ((db = open_parent(&b, &nb, e)) < 0)
		ret = db;
	else if (renameat2(da, na, db, nb, overwrite ? 0 : RENAME_NOREPLACE) < 0) {
		/* Name what the error is about: the source when it is missing, the target when it
		 * is in the way, both otherwise. */
		char both[4096];
		int errnum = errno;
		if (errnum == ENOENT)
			ret = fail(e, errnum, a.norm);
		else if (errnum == EEXIST || errnum == EISDIR || errnum == ENOTEMPTY || errnum == ENOTDIR)
			ret = fail(e, errnum, b.norm);
		else {
			snprintf(both, sizeof(both), "%.2000s -> %.2000s%s", a.norm, b.norm,
				 errnum == EXDEV ? " (another filesystem)" : "");
			ret = fail(e, errnum, both);
		}
	}
	bk_close(da);
	bk_close(db);
	return ret;
}

/* --- usage ---------------------------------------------------------------------------------- */

struct usage {
	uint64_t entries, limit, bytes;
};

static int usage_leaf(void *arg, int dirfd, const char *name)
{
	struct usage *u = arg;
	struct stat st;

	if (++u->entries > u->limit)
		return -E2BIG;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
		u->bytes += (uint64_t)st.st_size;
	return 0;
}

static int usage_dir_done(void *arg, int parent_fd, const char *name)
{
	struct usage *u = arg;

	(void)parent_fd;
	(void)name;
	return ++u->entries > u->limit ? -E2BIG : 0;
}

/* What the sandbox user may not open is not counted. */
static int usage_unopened(void *arg, int errnum)
{
	(void)arg;
	(void)errnum;
	return 0;
}

int bk_fs_usage(bk_fs *fs, const char *path, uint64_t limit, uint64_t *bytes, bk_fs_error *e)
{
	struct place pl;
	struct usage u = { .limit = limit };
	const bk_fs_walk_ops ops = { usage_leaf, usage_dir_done, usage_unopened, &u };
	char where[4096];
	int ret;
	_cleanup_close_ int dirfd = -1;

	*bytes = 0;
	if ((ret = locate(fs, path, &pl, e)) < 0)
		return ret;
	if (!*pl.rel) {
		/* A root itself: walked from its own descriptor's parent view, "." in the root. */
		dirfd = openat2_fd(pl.root_fd, ".", O_PATH | O_DIRECTORY, 0, RESOLVE_CONTAINED);
		if (dirfd < 0)
			return fail(e, errno, pl.norm);
		ret = bk_fs_walk(dirfd, ".", &ops, where, sizeof(where));
	} else {
		const char *name;
		if ((dirfd = open_parent(&pl, &name, e)) < 0)
			return dirfd;
		ret = bk_fs_walk(dirfd, name, &ops, where, sizeof(where));
	}
	if (ret < 0)
		return fail(e, -ret, pl.norm);
	/* The directory itself is not an entry of it. */
	*bytes = u.bytes;
	return 0;
}

/* --- wipe (Reset) --------------------------------------------------------------------------- */

struct wipe {
	bk_fs *fs;
	const char *start; /* the directory emptied, which itself stays */
	uint64_t count;
};

/* A directory of ours that we may not enter, list or change (an agent's chmod 000 or 0555) is
 * given u+rwx, through /proc/self/fd on a descriptor that names it without following a symlink
 * (fchmod needs a descriptor opened for reading, which its mode refuses). */
static void wipe_unlock(void *arg, int parent_fd, const char *name)
{
	struct wipe *w = arg;
	char fdname[16];
	struct stat st;
	_cleanup_close_ int fd = openat(parent_fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) < 0 || st.st_uid != w->fs->uid || (st.st_mode & 0700) == 0700)
		return;
	snprintf(fdname, sizeof(fdname), "%d", fd);
	/* What fails here shows as what is left: the verification names it. */
	if (fchmodat(w->fs->proc_fd, fdname, (st.st_mode & 0777) | 0700, 0) < 0)
		return;
}

/* Failures do not stop a wipe: everything that can go goes, and the listing after it says what
 * did not. */
static int wipe_leaf(void *arg, int dirfd, const char *name)
{
	struct wipe *w = arg;

	if (unlinkat(dirfd, name, 0) == 0)
		w->count++;
	return 0;
}

static int wipe_dir_done(void *arg, int parent_fd, const char *name)
{
	struct wipe *w = arg;

	if (name != w->start && unlinkat(parent_fd, name, AT_REMOVEDIR) == 0)
		w->count++;
	return 0;
}

static int wipe_unopened(void *arg, int errnum)
{
	(void)arg;
	(void)errnum;
	return 0;
}

/* Append the entries left in the directory on dirfd (shown as `shown`) to left; how many. */
static size_t wipe_left(int dirfd, const char *shown, char *left, size_t size)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	size_t n = 0;
	DIR *d;

	if (fd < 0 || !(d = fdopendir(fd))) {
		size_t used = strlen(left);
		snprintf(left + used, size - used, "%s%s (cannot be listed: %s)", used ? ", " : "", shown, strerror(errno));
		bk_close(fd);
		return 1;
	}
	while ((de = readdir(d))) {
		size_t used = strlen(left);
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (n++ < 16 && used + 1 < size)
			snprintf(left + used, size - used, "%s%s/%s", used ? ", " : "", shown, de->d_name);
	}
	closedir(d);
	return n;
}

/* The mode of a root the sandbox user owns in a fresh sandbox: what boxkited makes (the local
 * sandbox's workspace and home, sidecar/exec/sandbox.c). */
#define ROOT_MODE 0755

/* An extended attribute the sandbox user may have set on a root: a user.* one (on anything it may
 * write), or an ACL (on what it owns) — a default ACL would decide the mode of every file the
 * next tenant makes there. */
static bool tenant_xattr(const char *name)
{
	return strncmp(name, "user.", 5) == 0 || strcmp(name, "system.posix_acl_access") == 0 ||
	       strcmp(name, "system.posix_acl_default") == 0;
}

/* Give the root on fd (O_PATH) what a fresh sandbox's has: ROOT_MODE when the sandbox user owns it
 * (it may have changed that), and none of the extended attributes it may have set — removed as
 * the same user, so what it is refused (EPERM, EACCES) it could not have set either. Then
 * checked: what differs is appended to left, and counted. names: XATTR_LIST_MAX bytes. */
static size_t root_renew(bk_fs *fs, int fd, const char *shown, char *names, char *left, size_t size)
{
	char fdname[16];
	struct stat st;
	size_t bad = 0;
	int chmod_errno = 0;
	ssize_t n;

	snprintf(fdname, sizeof(fdname), "%d", fd);
	if (fstat(fd, &st) == 0 && st.st_uid == fs->uid && (st.st_mode & 07777) != ROOT_MODE &&
	    fchmodat(fs->proc_fd, fdname, ROOT_MODE, 0) < 0)
		chmod_errno = errno;
	/* flistxattr and fremovexattr take no O_PATH descriptor: the root opened again, for reading. */
	_cleanup_close_ int dfd = openat(fs->proc_fd, fdname, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fstat(dfd, &st) < 0 || (n = flistxattr(dfd, names, XATTR_LIST_MAX)) < 0) {
		size_t used = strlen(left);
		snprintf(left + used, size - used, "%s%s (cannot be read: %s)", used ? ", " : "", shown, strerror(errno));
		return 1;
	}
	for (char *name = names; name < names + n; name += strlen(name) + 1) {
		if (!tenant_xattr(name) || fremovexattr(dfd, name) == 0 || errno == EPERM || errno == EACCES ||
		    errno == ENODATA)
			continue;
		size_t used = strlen(left);
		if (bad++ < 16)
			snprintf(left + used, size - used, "%s%s %s (%s)", used ? ", " : "", shown, name, strerror(errno));
	}
	if (st.st_uid == fs->uid && (st.st_mode & 07777) != ROOT_MODE) {
		size_t used = strlen(left);
		if (bad++ < 16)
			snprintf(left + used, size - used, "%s%s mode %04o (%s)", used ? ", " : "", shown,
				 (unsigned)(st.st_mode & 07777), strerror(chmod_errno));
	}
	return bad;
}

int bk_fs_wipe(bk_fs *fs, uint64_t *count, bk_fs_error *e)
{
	struct wipe w = { .fs = fs, .start = "." };
	const bk_fs_walk_ops ops = { wipe_leaf, wipe_dir_done, wipe_unopened, &w, wipe_unlock };
	int fds[BK_ROOTS_MAX + BK_FS_WIPE_EXTRA];
	const char *names[BK_ROOTS_MAX + BK_FS_WIPE_EXTRA];
	char where[4096], left[sizeof(e->path) - 64] = "";
	size_t n = 0, nleft = 0;

	snapshots_drop(fs);
	for (size_t i = 0; i < fs->roots->n; i++) {
		if (fs->root_fd[i] >= 0 && !fs->roots->root[i].read_only) {
			fds[n] = fs->root_fd[i];
			names[n++] = fs->roots->root[i].path;
		}
	}
	for (size_t i = 0; i < BK_FS_WIPE_EXTRA; i++) {
		if (fs->wipe_fd[i] >= 0) {
			fds[n] = fs->wipe_fd[i];
			names[n++] = bk_fs_wipe_extra[i];
		}
	}
	for (size_t i = 0; i < n; i++) {
		/* From the root's own descriptor, as "." (bk_fs_walk only ever leaves it by ".."). */
		int dirfd = openat2_fd(fds[i], ".", O_PATH | O_DIRECTORY, 0, RESOLVE_CONTAINED);
		if (dirfd >= 0) {
			bk_fs_walk(dirfd, w.start, &ops, where, sizeof(where));
			bk_close(dirfd);
		}
	}
	*count = w.count;
	for (size_t i = 0; i < n; i++)
		nleft += wipe_left(fds[i], names[i], left, sizeof(left));
	if (nleft) {
		e->errnum = EIO;
		snprintf(e->path, sizeof(e->path), "%zu entr%s left: %s%s", nleft, nleft == 1 ? "y" : "ies", left,
			 nleft > 16 ? ", ..." : "");
		return -EIO;
	}
	/* The roots themselves, as new: their mode, their extended attributes and ACLs. */
	_cleanup_free_ char *xattrs = malloc(XATTR_LIST_MAX);
	if (!xattrs)
		return fail(e, ENOMEM, "the roots' attributes");
	for (size_t i = 0; i < n; i++)
		nleft += root_renew(fs, fds[i], names[i], xattrs, left, sizeof(left));
	if (nleft) {
		e->errnum = EIO;
		snprintf(e->path, sizeof(e->path), "the roots are not as new: %s%s", left, nleft > 16 ? ", ..." : "");
		return -EIO;
	}
	return 0;
}
