/* Unit tests of sidecar/exec/cgroup.c's reading of /proc/self/cgroup — from fixture files (v1, v2,
 * hybrid, odd paths), then on a real cgroup2 mount made in a mount namespace of the test's own:
 * on a pure v2 node the "0::" line is all there is, and misreading it silently lost every
 * per-exec limit. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cmocka.h>

#include "exec/cgroup.h"

#define CGROUP2_SUPER_MAGIC 0x63677270

/* `text` as a /proc/<pid>/cgroup file; its path in path (64 bytes). */
static void fixture(char *path, const char *text)
{
	int fd;

	snprintf(path, 64, "/tmp/bk-cgroup-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static void expect(const char *text, const char *controller, const char *want)
{
	char path[64];
	char *got;

	fixture(path, text);
	got = bk_cgroup_self_path(path, controller);
	unlink(path);
	if (!want) {
		if (got)
			fail_msg("%s: expected no line, got %s", controller ? controller : "v2", got);
		return;
	}
	if (!got)
		fail_msg("%s: expected %s, got no line", controller ? controller : "v2", want);
	assert_string_equal(got, want);
	free(got);
}

static void test_pure_v2(void **state)
{
	(void)state;
	expect("0::/\n", NULL, "/");
	expect("0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-abc.scope\n", NULL,
	       "/kubepods.slice/kubepods-pod1.slice/cri-containerd-abc.scope");
	/* Without its newline (the last line of a file may lack one). */
	expect("0::/system.slice/boxkite.service", NULL, "/system.slice/boxkite.service");
	/* A pure v2 node has no v1 controller to find. */
	expect("0::/a\n", "pids", NULL);
}

static void test_v1(void **state)
{
	static const char v1[] = "12:pids:/user.slice/user-0.slice/session-3.scope\n"
				 "11:cpu,cpuacct:/user.slice\n"
				 "7:memory:/user.slice/user-0.slice/session-3.scope\n"
				 "1:name=systemd:/user.slice/user-0.slice/session-3.scope\n";

	(void)state;
	expect(v1, "pids", "/user.slice/user-0.slice/session-3.scope");
	expect(v1, "memory", "/user.slice/user-0.slice/session-3.scope");
	expect(v1, "cpuacct", "/user.slice");
	expect(v1, "cpuset", NULL);
	/* "name=systemd" is not a controller named "systemd", nor a v2 line. */
	expect(v1, "systemd", NULL);
	expect(v1, NULL, NULL);
}

static void test_hybrid(void **state)
{
	static const char hybrid[] = "13:pids:/p\n"
				     "5:memory:/m\n"
				     "0::/unified/path\n";

	(void)state;
	expect(hybrid, NULL, "/unified/path");
	expect(hybrid, "pids", "/p");
	expect(hybrid, "memory", "/m");
}

static void test_odd_lines(void **state)
{
	(void)state;
	/* A path with colons is the rest of the line. */
	expect("0::/a:b:c\n", NULL, "/a:b:c");
	/* A v1 line with an empty controller list but id 3 is not the v2 line. */
	expect("3::/not-v2\n0::/v2\n", NULL, "/v2");
	/* Lines that are not ID:CONTROLLERS:PATH are passed over. */
	expect("garbage\n12\n0:/\n0::/ok\n", NULL, "/ok");
	expect("", NULL, NULL);
}

/* A real cgroup2 mount, in a mount namespace of this process (made private first, so nothing
 * reaches the host's mount table): bk_cgroups_init reads our own line and the controllers of our
 * own cgroup there. Where pids and memory are delegated to v2 it sets up per-exec cgroups and
 * tears them down again; where they are bound to v1 (this project's machines) it says that,
 * rather than the "no cgroup v2 line" that the misreading gave. */
static void test_a_real_cgroup2_mount(void **state)
{
	char dir[] = "/tmp/bk-cgroup2-XXXXXX";
	struct statfs sfs;
	bk_cgroups cg;
	bk_error *err = NULL;

	(void)state;
	if (geteuid() != 0) {
		skip(); /* needs root: a mount namespace and a mount */
	}
	assert_int_equal(unshare(CLONE_NEWNS), 0);
	assert_int_equal(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	assert_non_null(mkdtemp(dir));
	if (mount("cgroup2", dir, "cgroup2", 0, NULL) < 0) {
		int errnum = errno;
		rmdir(dir);
		fprintf(stderr, "SKIP test_a_real_cgroup2_mount: cannot mount cgroup2: %s\n", strerror(errnum));
		skip();
	}
	assert_int_equal(statfs(dir, &sfs), 0);
	assert_int_equal(sfs.f_type, CGROUP2_SUPER_MAGIC);

	char *own = bk_cgroup_self_path("/proc/self/cgroup", NULL);
	assert_non_null(own); /* every kernel with cgroup2 lists the 0:: line */
	const bk_cgroup_limits limits = { .exec_memory = 64u << 20, .exec_pids = 32, .sandbox_memory = 256u << 20,
					  .sandbox_pids = 128 };
	assert_int_equal(bk_cgroups_init(&cg, dir, "/proc/self/cgroup", &limits, &err), 0);
	if (cg.mode == BK_CGROUP_V2) {
		bk_exec_cgroup ecg;
		struct stat st;
		assert_int_equal(bk_cgroups_take(&cg, &ecg, &err), 0);
		assert_non_null(ecg.path[0]);
		assert_int_equal(stat(ecg.path[0], &st), 0);
		assert_int_equal(bk_cgroups_unstage(&cg, &err), 0);
		bk_exec_cgroup_release(&cg, &ecg);
	} else {
		assert_int_equal(cg.mode, BK_CGROUP_NONE);
		assert_non_null(cg.why_none);
		fprintf(stderr, "test_a_real_cgroup2_mount: own cgroup %s, no per-exec cgroups here: %s\n", own,
			cg.why_none);
		assert_null(strstr(cg.why_none, "no cgroup v2 line"));
		assert_non_null(strstr(cg.why_none, "lacks the pids or memory controller"));
	}
	bk_cgroups_fini(&cg);
	bk_error_free(err);
	free(own);
	assert_int_equal(umount2(dir, MNT_DETACH), 0);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pure_v2),
		cmocka_unit_test(test_v1),
		cmocka_unit_test(test_hybrid),
		cmocka_unit_test(test_odd_lines),
		cmocka_unit_test(test_a_real_cgroup2_mount),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
