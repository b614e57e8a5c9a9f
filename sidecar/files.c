#include "files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "boxkite/v1/boxkite.pb-c.h"
#include "cleanup.h"

#define RESOLVE_CONTAINED (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)
#define REMOVE_DEPTH_MAX 256

void bk_fs_init(bk_fs *fs, const bk_roots *roots, uid_t uid, gid_t gid)
{
	fs->roots = roots;
	fs->uid = uid;
	fs->gid = gid;
	for (size_t i = 0; i < BK_ROOTS_MAX; i++)
		fs->root_fd[i] = -1;
}

static int openat2_fd(int dirfd, const char *path, uint64_t flags, uint64_t mode, uint64_t resolve)
{
	struct open_how how = { .flags = flags | O_CLOEXEC, .mode = mode, .resolve = resolve };

	return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

void bk_fs_attach(bk_fs *fs, int sandbox_root_fd)
{
	for (size_t i = 0; i < fs->roots->n; i++) {
		/* Inside the sandbox's own root, as its processes would see it: a root that is a
		 * symlink in the image resolves the same way for them and for us. */
		fs->root_fd[i] = openat2_fd(sandbox_root_fd, fs->roots->root[i].path + 1, O_PATH | O_DIRECTORY, 0,
					    RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
	}
}

void bk_fs_detach(bk_fs *fs)
{
	for (size_t i = 0; i < BK_ROOTS_MAX; i++)
		fs->root_fd[i] = bk_close(fs->root_fd[i]);
}

/* Work as the sandbox user: permission checks are 1001's, and the kernel drops the
 * DAC-overriding capabilities from our effective set while fsuid is not 0. */
static void become_user(const bk_fs *fs)
{
	setfsgid(fs->gid);
	setfsuid(fs->uid);
}

static void become_self(void)
{
	setfsuid(0);
	setfsgid(0);
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
	const char *why;

	if (bk_sandbox_path(fs->roots, path, pl->norm, sizeof(pl->norm), &root, &why) < 0)
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
	become_user(fs);
	if (!*pl.rel) {
		ret = stat_entry(pl.root_fd, "", info, names + 4096, 4096);
	} else {
		_cleanup_close_ int dirfd = open_parent(&pl, &name, e);
		ret = dirfd < 0 ? dirfd : stat_entry(dirfd, name, info, names + 4096, 4096);
	}
	become_self();
	if (ret < 0)
		return e->errnum ? ret : fail(e, -ret, pl.norm);
	snprintf(names, 4096, "%s", pl.norm);
	info->name = names;
	return 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* What one List page may hold of names and symlink targets. With the entries' other fields
 * (~50 bytes each, at most LIST_PAGE_MAX of them) the answer stays far below one channel packet
 * (BK_CHANNEL_MAX_MSG) however long the names and targets the sandbox made. */
#define LIST_PAGE_BYTES (256u << 10)

int bk_fs_list(bk_fs *fs, const char *path, const char *after, uint32_t limit, bk_fs_info **entries, size_t *n,
	       bool *more, bk_fs_error *e)
{
	struct place pl;
	_cleanup_free_ char **names = NULL;
	size_t count = 0, cap = 0, take, i, used = 0;
	DIR *d = NULL;
	struct dirent *de;
	char *pool;
	int ret, fd;

	*entries = NULL;
	*n = 0;
	*more = false;
	if ((ret = locate(fs, path, &pl, e)) < 0)
		return ret;
	become_user(fs);
	fd = openat2_fd(pl.root_fd, *pl.rel ? pl.rel : ".", O_RDONLY | O_DIRECTORY, 0, RESOLVE_CONTAINED);
	if (fd < 0 || !(d = fdopendir(fd))) {
		ret = fail(e, errno, pl.norm);
		bk_close(fd);
		goto out;
	}
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    (after && after[0] && strcmp(de->d_name, after) <= 0))
			continue;
		if (count == cap) {
			char **nn = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof(*names));
			if (!nn) {
				ret = fail(e, ENOMEM, pl.norm);
				goto out;
			}
			names = nn;
		}
		if (!(names[count] = strdup(de->d_name))) {
			ret = fail(e, ENOMEM, pl.norm);
			goto out;
		}
		count++;
	}
	qsort(names, count, sizeof(*names), name_cmp);
	take = count < limit ? count : limit;
	/* One block: the entries, then their names and symlink targets — LIST_PAGE_BYTES of them,
	 * and room for one more entry of the longest name and target. */
	*entries = malloc(take * sizeof(bk_fs_info) + LIST_PAGE_BYTES + NAME_MAX + 1 + PATH_MAX);
	if (!*entries) {
		ret = fail(e, ENOMEM, pl.norm);
		goto out;
	}
	pool = (char *)(*entries + take);
	for (i = 0; i < take && used < LIST_PAGE_BYTES; i++) {
		bk_fs_info *info = &(*entries)[*n];
		size_t len = strlen(names[i]) + 1;

		boxkite__executor__file_info__init(info);
		memcpy(pool + used, names[i], len);
		info->name = pool + used;
		/* An entry removed since readdir is simply not listed. */
		if (stat_entry(dirfd(d), names[i], info, pool + used + len, PATH_MAX) == 0) {
			used += len + strlen(info->symlink_target) + 1;
			(*n)++;
		}
	}
	*more = i < count;
	ret = 0;
out:
	become_self();
	if (d)
		closedir(d);
	for (size_t k = 0; k < count; k++)
		free(names[k]);
	if (ret < 0) {
		free(*entries);
		*entries = NULL;
		*n = 0;
	}
	return ret;
}

int bk_fs_open_read(bk_fs *fs, const char *path, bk_fs_error *e)
{
	struct place pl;
	struct stat st;
	int ret, fd;

	if ((ret = locate(fs, path, &pl, e)) < 0)
		return ret;
	become_user(fs);
	fd = openat2_fd(pl.root_fd, *pl.rel ? pl.rel : ".", O_RDONLY | O_NOCTTY | O_NONBLOCK, 0, RESOLVE_CONTAINED);
	become_self();
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
	become_user(fs);
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
	become_self();
	bk_close(dirfd);
	return ret;
}

int bk_fs_commit(bk_fs *fs, int fd, const char *path, uint32_t mode, bool overwrite, bk_fs_error *e)
{
	struct place pl;
	const char *name;
	char proc[64], tmpname[64];
	uint64_t rnd = 0;
	int ret, dirfd = -1;
	struct stat st;

	if ((ret = locate(fs, path, &pl, e)) < 0)
		return ret;
	if (pl.read_only)
		return fail(e, EROFS, pl.norm);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 0 || st.st_uid != fs->uid)
		return fail(e, EINVAL, pl.norm); /* not one of our unnamed files */
	become_user(fs);
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
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (!overwrite) {
		/* linkat never replaces: the name appears atomically, or EEXIST. */
		if (linkat(AT_FDCWD, proc, dirfd, name, AT_SYMLINK_FOLLOW) < 0)
			ret = fail(e, errno, pl.norm);
		goto out;
	}
	/* Replacing: link under a private name, then rename over the target in one step. */
	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
		rnd ^= (uint64_t)(uintptr_t)&rnd;
	snprintf(tmpname, sizeof(tmpname), ".boxkite-upload-%016llx", (unsigned long long)rnd);
	if (linkat(AT_FDCWD, proc, dirfd, tmpname, AT_SYMLINK_FOLLOW) < 0) {
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
	become_self();
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
	become_user(fs);
	if (parents) {
		ret = *pl.rel ? mkdir_parents(pl.root_fd, pl.rel, mode & 0777, pl.norm, e) : 0;
	} else {
		dirfd = open_parent(&pl, &name, e);
		ret = dirfd < 0 ? dirfd : mkdirat(dirfd, name, mode & 0777) < 0 ? fail(e, errno, pl.norm) : 0;
		bk_close(dirfd);
	}
	become_self();
	return ret;
}

int bk_fs_symlink(bk_fs *fs, const char *path, const char *target, bk_fs_error *e)
{
	struct place pl;
	const char *name;
	int ret, dirfd;

	if ((ret = locate(fs, path, &pl, e)) < 0)
		return ret;
	if (pl.read_only)
		return fail(e, EROFS, pl.norm);
	/* The front checked it too; the executor trusts nothing it says. */
	if (!bk_symlink_contained(pl.root, pl.norm, target))
		return fail(e, EXDEV, target);
	become_user(fs);
	dirfd = open_parent(&pl, &name, e);
	ret = dirfd < 0 ? dirfd : symlinkat(target, dirfd, name) < 0 ? fail(e, errno, pl.norm) : 0;
	become_self();
	bk_close(dirfd);
	return ret;
}

/* Remove name in dirfd and, for a directory, everything in it — never following a symlink:
 * a directory is opened O_NOFOLLOW relative to its parent's descriptor. */
static int remove_tree(int parent, const char *name, int depth, uint64_t *count, char *where, size_t wsize)
{
	DIR *d;
	struct dirent *de;
	int fd, ret = 0;

	if (unlinkat(parent, name, 0) == 0) {
		(*count)++;
		return 0;
	}
	if (errno != EISDIR && errno != EPERM)
		return snprintf(where, wsize, "%s", name), -errno;
	if (depth > REMOVE_DEPTH_MAX)
		return snprintf(where, wsize, "%s", name), -ELOOP;
	fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || !(d = fdopendir(fd))) {
		ret = -errno;
		bk_close(fd);
		return snprintf(where, wsize, "%s", name), ret;
	}
	while (ret == 0 && (errno = 0, de = readdir(d))) {
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			ret = remove_tree(dirfd(d), de->d_name, depth + 1, count, where, wsize);
	}
	closedir(d);
	if (ret < 0) {
		/* Keep the innermost name: prepend ours. */
		char inner[4096];
		snprintf(inner, sizeof(inner), "%s", where);
		snprintf(where, wsize, "%.255s/%.3800s", name, inner);
		return ret;
	}
	if (unlinkat(parent, name, AT_REMOVEDIR) < 0)
		return snprintf(where, wsize, "%s", name), -errno;
	(*count)++;
	return 0;
}

int bk_fs_remove(bk_fs *fs, const char *path, bool recursive, uint64_t *count, bk_fs_error *e)
{
	struct place pl;
	const char *name;
	char where[4096] = "";
	int ret, dirfd;

	*count = 0;
	if ((ret = locate(fs, path, &pl, e)) < 0)
		return ret;
	if (pl.read_only)
		return fail(e, EROFS, pl.norm);
	become_user(fs);
	dirfd = open_parent(&pl, &name, e);
	if (dirfd < 0) {
		ret = dirfd;
	} else if (recursive) {
		ret = remove_tree(dirfd, name, 0, count, where, sizeof(where));
		if (ret < 0) {
			char full[4096];
			snprintf(full, sizeof(full), "%.*s/%.3000s", (int)(strrchr(pl.norm, '/') - pl.norm), pl.norm, where);
			ret = fail(e, -ret, full);
		}
	} else if (unlinkat(dirfd, name, 0) == 0 || ((errno == EISDIR || errno == EPERM) &&
						       unlinkat(dirfd, name, AT_REMOVEDIR) == 0)) {
		*count = 1;
		ret = 0;
	} else {
		ret = fail(e, errno, pl.norm);
	}
	become_self();
	bk_close(dirfd);
	return ret;
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
	become_user(fs);
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
	become_self();
	bk_close(da);
	bk_close(db);
	return ret;
}

static int usage_walk(int fd, int depth, uint64_t *entries, uint64_t limit, uint64_t *bytes)
{
	DIR *d;
	struct dirent *de;
	int ret = 0;

	if (depth > REMOVE_DEPTH_MAX || !(d = fdopendir(fd))) {
		bk_close(fd);
		return 0;
	}
	while (ret == 0 && (de = readdir(d))) {
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (++*entries > limit) {
			ret = -E2BIG;
			break;
		}
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISREG(st.st_mode)) {
			*bytes += (uint64_t)st.st_size;
		} else if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0)
				ret = usage_walk(sub, depth + 1, entries, limit, bytes);
		}
	}
	closedir(d);
	return ret;
}

int bk_fs_usage(bk_fs *fs, const char *path, uint64_t limit, uint64_t *bytes, bk_fs_error *e)
{
	struct place pl;
	uint64_t entries = 0;
	int ret, fd;

	*bytes = 0;
	if ((ret = locate(fs, path, &pl, e)) < 0)
		return ret;
	become_user(fs);
	fd = openat2_fd(pl.root_fd, *pl.rel ? pl.rel : ".", O_RDONLY | O_DIRECTORY, 0, RESOLVE_CONTAINED);
	ret = fd < 0 ? fail(e, errno, pl.norm) : usage_walk(fd, 0, &entries, limit, bytes);
	become_self();
	if (ret == -E2BIG)
		return fail(e, E2BIG, pl.norm);
	return ret;
}
