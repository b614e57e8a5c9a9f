/* Unit tests of sidecar/files/fsops.c on a directory of its own standing in for a sandbox's root (with
 * a workspace and a tmp root below it): FileList's snapshots — a page reads the directory only
 * when it has none or it changed, the clock injected — and the walk of remove -r and the quota
 * without a depth limit, holding no descriptor beyond its own. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "files/fsops.h"

struct fixture {
	char dir[64]; /* the stand-in sandbox root: dir/workspace, dir/tmp */
	bk_roots roots;
	bk_fs fs;
	int ws;       /* dir/workspace */
};

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char path[128];
	int root;

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/bk-fsops-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(path, sizeof(path), "%s/workspace", f->dir);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/tmp", f->dir);
	assert_int_equal(mkdir(path, 0755), 0);
	bk_roots_default(&f->roots);
	bk_fs_init(&f->fs, &f->roots, geteuid());
	root = open(f->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(root >= 0);
	bk_fs_attach(&f->fs, root, open("/proc/self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC));
	close(root);
	snprintf(path, sizeof(path), "%s/workspace", f->dir);
	f->ws = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(f->ws >= 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];

	bk_fs_detach(&f->fs);
	close(f->ws);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

static struct timespec later(int seconds)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_sec += seconds;
	return t;
}

/* A full listing in pages of `limit`: the names in order, and how many pages read the
 * directory. */
static size_t list_all(struct fixture *f, const char *path, uint32_t limit, const struct timespec *now, char ***names,
		       size_t *reads)
{
	char after[256] = "";
	size_t total = 0;
	bool more = true;

	*names = NULL;
	*reads = 0;
	while (more) {
		bk_fs_info *entries;
		bk_fs_error e = { 0 };
		size_t n;
		bool read;

		assert_int_equal(bk_fs_list(&f->fs, path, after, limit, now, &entries, &n, &more, &read, &e), 0);
		*reads += read;
		*names = realloc(*names, (total + n + 1) * sizeof(char *));
		assert_non_null(*names);
		for (size_t i = 0; i < n; i++)
			(*names)[total + i] = strdup(entries[i].name);
		total += n;
		if (n)
			snprintf(after, sizeof(after), "%s", entries[n - 1].name);
		free(entries);
	}
	return total;
}

/* The first entry left in the directory on dirfd, or NULL when it is empty. */
static char *first_entry_left(int dirfd)
{
	static char name[256];
	struct dirent *de;
	DIR *d = fdopendir(openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
	char *left = NULL;

	assert_non_null(d);
	while (!left && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			left = strcpy(name, de->d_name);
	closedir(d);
	return left;
}

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

static void make_files(struct fixture *f, const char *dir, int n)
{
	int d;

	assert_int_equal(mkdirat(f->ws, dir, 0755), 0);
	d = openat(f->ws, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(d >= 0);
	for (int i = 0; i < n; i++) {
		char name[32];
		snprintf(name, sizeof(name), "f%05d", (i * 7919) % n); /* not in creation order */
		int fd = openat(d, name, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
		assert_true(fd >= 0);
		close(fd);
	}
	close(d);
}

/* A directory that has not changed is read once for all its pages; its names come sorted,
 * each once. */
static void test_a_settled_directory_is_read_once(void **state)
{
	struct fixture *f = *state;
	struct timespec now = later(10);
	char **names;
	size_t reads, n;

	make_files(f, "many", 5000);
	n = list_all(f, "many", 100, &now, &names, &reads);
	assert_int_equal(n, 5000);
	for (size_t i = 0; i < n; i++) {
		char want[32];
		snprintf(want, sizeof(want), "f%05zu", i);
		assert_string_equal(names[i], want);
	}
	assert_int_equal(reads, 1);
	free_names(names, n);
	/* Listed again: not read at all. */
	n = list_all(f, "many", 1000, &now, &names, &reads);
	assert_int_equal((long)n, 5000);
	assert_int_equal(reads, 0);
	free_names(names, n);
}

/* An entry added (or removed) changes the directory's mtime: the next page reads it again and
 * sees the change — a name after the page token is listed. */
static void test_a_change_is_seen_on_the_next_page(void **state)
{
	struct fixture *f = *state;
	struct timespec now = later(10);
	bk_fs_info *entries;
	bk_fs_error e = { 0 };
	size_t n;
	bool more, read;
	int fd;

	make_files(f, "changing", 300);
	/* Its mtime an hour back: the entry added below moves it, whatever the timestamps'
	 * granularity (the 2 s that production waits for is skipped here by the clock). */
	const struct timespec old[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_sec = now.tv_sec - 3600 } };
	assert_int_equal(utimensat(f->ws, "changing", old, 0), 0);
	assert_int_equal(bk_fs_list(&f->fs, "changing", "", 100, &now, &entries, &n, &more, &read, &e), 0);
	assert_true(read && more && n == 100);
	free(entries);
	assert_int_equal(bk_fs_list(&f->fs, "changing", "f00099", 100, &now, &entries, &n, &more, &read, &e), 0);
	assert_false(read);
	free(entries);
	fd = openat(f->ws, "changing/zzz", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(bk_fs_list(&f->fs, "changing", "f00199", 1000, &now, &entries, &n, &more, &read, &e), 0);
	assert_true(read);
	assert_false(more);
	assert_int_equal(n, 101);
	assert_string_equal(entries[n - 1].name, "zzz");
	free(entries);
}

/* A directory changed within the last two seconds may change again without its timestamps
 * showing it: its names are not kept, every page reads it. */
static void test_a_recent_directory_is_not_kept(void **state)
{
	struct fixture *f = *state;
	struct timespec now;
	char **names;
	size_t reads, n;

	make_files(f, "fresh", 250);
	clock_gettime(CLOCK_REALTIME, &now);
	n = list_all(f, "fresh", 100, &now, &names, &reads);
	assert_int_equal(n, 250);
	assert_int_equal(reads, 3);
	free_names(names, n);
}

/* A chain of `depth` directories "d" below workspace/name, a file of `size` bytes at the
 * bottom. Made with a descriptor per level, as a sandboxed command could. */
static void make_deep(struct fixture *f, const char *name, int depth, size_t size)
{
	int fd, next;

	assert_int_equal(mkdirat(f->ws, name, 0755), 0);
	fd = openat(f->ws, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (int i = 0; i < depth; i++) {
		assert_int_equal(mkdirat(fd, "d", 0755), 0);
		next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		assert_true(next >= 0);
		close(fd);
		fd = next;
	}
	next = openat(fd, "bottom", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	assert_true(next >= 0);
	assert_int_equal(ftruncate(next, (off_t)size), 0);
	close(next);
	close(fd);
}

/* Far deeper than any fixed depth limit or descriptor count (and than PATH_MAX as a path). */
#define DEEP 3000

static void test_usage_counts_files_however_deep(void **state)
{
	struct fixture *f = *state;
	bk_fs_error e = { 0 };
	uint64_t bytes = 0;
	int before;

	make_deep(f, "deep", DEEP, 123456);
	assert_int_equal(mkdirat(f->ws, "flat", 0755), 0);
	int fd = openat(f->ws, "flat/a", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	assert_int_equal(ftruncate(fd, 1000), 0);
	close(fd);
	before = open_fds();
	assert_int_equal(bk_fs_usage(&f->fs, "/workspace", 1000000, &bytes, &e), 0);
	assert_int_equal(bytes, 123456 + 1000);
	assert_int_equal(open_fds(), before);
	/* The entry limit still holds: a tree that large is over any quota. */
	assert_int_equal(bk_fs_usage(&f->fs, "/workspace", 100, &bytes, &e), -E2BIG);
	assert_int_equal(open_fds(), before);
}

static void test_remove_takes_a_tree_however_deep(void **state)
{
	struct fixture *f = *state;
	bk_fs_error e = { 0 };
	uint64_t count = 0;
	struct stat st;
	int before;

	make_deep(f, "deep", DEEP, 10);
	before = open_fds();
	assert_int_equal(bk_fs_remove(&f->fs, "deep", true, &count, &e), 0);
	assert_int_equal(count, DEEP + 2); /* the directories, the file, and deep itself */
	assert_int_equal(fstatat(f->ws, "deep", &st, AT_SYMLINK_NOFOLLOW), -1);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(open_fds(), before);
}

/* A symlink is removed, never followed: what it points at stays. */
static void test_remove_never_follows_a_symlink(void **state)
{
	struct fixture *f = *state;
	bk_fs_error e = { 0 };
	uint64_t count = 0;
	struct stat st;
	char target[128];

	make_files(f, "kept", 3);
	make_deep(f, "tree", 5, 1);
	snprintf(target, sizeof(target), "%s/workspace/kept", f->dir);
	assert_int_equal(symlinkat(target, f->ws, "tree/d/d/link"), 0);
	assert_int_equal(symlinkat("../../../kept", f->ws, "tree/d/d/rel"), 0);
	assert_int_equal(bk_fs_remove(&f->fs, "tree", true, &count, &e), 0);
	assert_int_equal(count, 5 + 1 + 1 + 2);
	assert_int_equal(fstatat(f->ws, "kept/f00001", &st, 0), 0);
}

/* Reset's wipe: every writable root emptied however deep and left in place, a symlink out of it
 * removed and not followed, the count exact, no descriptor kept; and then nothing left to do. */
static void test_wipe_empties_the_roots_and_keeps_them(void **state)
{
	struct fixture *f = *state;
	bk_fs_error e = { 0 };
	uint64_t count = 0;
	struct stat st;
	char outside[128], path[256];
	int before, fd;

	make_deep(f, "deep", DEEP, 10);
	make_files(f, "flat", 3);
	snprintf(outside, sizeof(outside), "%s/outside", f->dir);
	assert_int_equal(mkdir(outside, 0755), 0);
	snprintf(path, sizeof(path), "%s/kept", outside);
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(symlinkat(outside, f->ws, "flat/out"), 0);
	snprintf(path, sizeof(path), "%s/tmp/t", f->dir);
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	close(fd);
	before = open_fds();
	assert_int_equal(bk_fs_wipe(&f->fs, &count, &e), 0);
	/* deep: its directories, its file and itself; flat: 3 files, the link, itself; /tmp/t */
	assert_int_equal(count, (DEEP + 2) + (3 + 1 + 1) + 1);
	assert_int_equal(open_fds(), before);
	assert_null(first_entry_left(f->ws));
	assert_int_equal(fstatat(f->ws, ".", &st, 0), 0);
	snprintf(path, sizeof(path), "%s/kept", outside);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(bk_fs_wipe(&f->fs, &count, &e), 0);
	assert_int_equal(count, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_a_settled_directory_is_read_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_change_is_seen_on_the_next_page, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_recent_directory_is_not_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_usage_counts_files_however_deep, setup, teardown),
		cmocka_unit_test_setup_teardown(test_remove_takes_a_tree_however_deep, setup, teardown),
		cmocka_unit_test_setup_teardown(test_remove_never_follows_a_symlink, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wipe_empties_the_roots_and_keeps_them, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
