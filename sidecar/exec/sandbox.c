#include "exec/sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "egresspolicy.h"
#include "exec/init/init_status.h"
#include "exec/kfile.h"
#include "log.h"
#include "sbpath.h"

#define SANDBOX_HOSTNAME "sandbox"
#define SANDBOX_USER "sandbox"
/* How long start-up waits for each orphaned exec to be gone after its SIGKILL (a hang guard). */
#define ORPHAN_WAIT_MS 2000

/* What the local sandbox shows of the host, read-only: programs and libraries, and /etc.
 * Nothing else — not /run, /home, /root, the host's /tmp, nor any socket: a read-only mount does
 * not stop connect() on a unix socket, so hiding is the only protection. (Its /run holds one
 * empty directory of its own, where a granted exec finds the egress proxy's CA bundle.) */
static const char *const host_ro_dirs[] = { "usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32" };
static const char *const dev_nodes[] = { "null", "zero", "full", "random", "urandom", "tty" };

void bk_sandbox_init(bk_sandbox *sb, const bk_sandbox_config *cfg)
{
	memset(sb, 0, sizeof(*sb));
	sb->cfg = *cfg;
	sb->init_pidfd = -1;
	sb->ns.mnt = sb->ns.pid = sb->ns.ipc = sb->ns.uts = sb->ns.net = -1;
	snprintf(sb->why, sizeof(sb->why), "not started");
}

static void close_ns(bk_sandbox *sb)
{
	sb->ns.mnt = bk_close(sb->ns.mnt);
	sb->ns.pid = bk_close(sb->ns.pid);
	sb->ns.ipc = bk_close(sb->ns.ipc);
	sb->ns.uts = bk_close(sb->ns.uts);
	sb->ns.net = bk_close(sb->ns.net);
	sb->ns.pid_is_ours = false;
}

/* Cache the namespaces of pid. */
static int open_ns(bk_sandbox *sb, pid_t pid, bk_error **err)
{
	static const char *const names[] = { "mnt", "pid", "ipc", "uts" };
	int *fds[] = { &sb->ns.mnt, &sb->ns.pid, &sb->ns.ipc, &sb->ns.uts };
	char path[64];

	for (size_t i = 0; i < BK_ARRAY_SIZE(names); i++) {
		snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)pid, names[i]);
		*fds[i] = open(path, O_RDONLY | O_CLOEXEC);
		if (*fds[i] < 0) {
			int ret = bk_error_errno(err, errno, "open %s", path);
			close_ns(sb);
			return ret;
		}
	}
	return 0;
}

/* --- local mode ------------------------------------------------------------------------------ */

/* Clone the mount tree at `path` (or the fd with path "") detached, with attributes set
 * recursively: a bind mount that is read-only all the way down, unlike MS_BIND|MS_REMOUNT. */
static int tree_clone(int dfd, const char *path, uint64_t attrs)
{
	struct mount_attr attr = { .attr_set = attrs };
	int fd = open_tree(dfd, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | (path[0] ? 0 : AT_EMPTY_PATH));

	if (fd < 0)
		return -1;
	if (mount_setattr(fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) < 0) {
		bk_close(fd);
		return -1;
	}
	return fd;
}

static int tree_attach(int tree, const char *target)
{
	return move_mount(tree, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH);
}

/* The minimal /dev: a few nodes bound from the host's, a private devpts, a tmpfs /dev/shm,
 * the usual symlinks; then the tmpfs itself read-only. */
static int build_dev(size_t shm_size)
{
	static const char *const links[][2] = {
		{ "/proc/self/fd", "dev/fd" },     { "/proc/self/fd/0", "dev/stdin" },
		{ "/proc/self/fd/1", "dev/stdout" }, { "/proc/self/fd/2", "dev/stderr" },
		{ "pts/ptmx", "dev/ptmx" },
	};
	char path[64], shm_opts[64];

	snprintf(shm_opts, sizeof(shm_opts), "mode=1777,size=%zu", shm_size);
	if (mkdir("dev", 0755) < 0 ||
	    mount("tmpfs", "dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k,nr_inodes=64") < 0)
		return -1;
	for (size_t i = 0; i < BK_ARRAY_SIZE(dev_nodes); i++) {
		char host[64];
		snprintf(path, sizeof(path), "dev/%s", dev_nodes[i]);
		snprintf(host, sizeof(host), "/dev/%s", dev_nodes[i]);
		int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
		if (fd < 0)
			return -1;
		bk_close(fd);
		if (mount(host, path, NULL, MS_BIND, NULL) < 0)
			return -1;
	}
	if (mkdir("dev/pts", 0755) < 0 ||
	    mount("devpts", "dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, BK_DEVPTS_OPTIONS) < 0)
		return -1;
	if (mkdir("dev/shm", 01777) < 0 ||
	    mount("tmpfs", "dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, shm_opts) < 0)
		return -1;
	for (size_t i = 0; i < BK_ARRAY_SIZE(links); i++)
		if (symlink(links[i][0], links[i][1]) < 0)
			return -1;
	return mount(NULL, "dev", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC, NULL);
}

/* Write `content` to a new file at path in the root's tmpfs and bind it, read-only, over
 * `target` (a file of the read-only /etc). */
static int bind_file(const char *path, const char *content, const char *target)
{
	size_t len = strlen(content);
	int fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);

	if (fd < 0)
		return -1;
	if (write(fd, content, len) != (ssize_t)len) {
		bk_close(fd);
		return -1;
	}
	bk_close(fd);
	if (mount(path, target, NULL, MS_BIND, NULL) < 0)
		return -1;
	return mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
}

/* The sandbox user has a name, a group and a home, as in a container image: whoami, id -un,
 * Python's pwd module and ssh-style tools look them up. The host's own users are not shown. */
static int write_identity(const bk_sandbox_config *cfg)
{
	char passwd[512], group[256];

	snprintf(passwd, sizeof(passwd),
		 "root:x:0:0:root:/root:/usr/sbin/nologin\n"
		 SANDBOX_USER ":x:%u:%u:boxkite sandbox:" BK_SANDBOX_HOME ":/bin/sh\n"
		 "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		 (unsigned)cfg->uid, (unsigned)cfg->gid);
	snprintf(group, sizeof(group), "root:x:0:\n" SANDBOX_USER ":x:%u:\nnogroup:x:65534:\n", (unsigned)cfg->gid);
	if (mkdir(".boxkite", 0755) < 0 || bind_file(".boxkite/passwd", passwd, "etc/passwd") < 0 ||
	    bind_file(".boxkite/group", group, "etc/group") < 0)
		return -1;
	return 0;
}

/* Populate the new root (the current directory, a fresh tmpfs) from the trees cloned before
 * the host's /tmp was covered. */
static int build_root(const bk_sandbox_config *cfg, const int *host_trees, int workspace_tree, int home_tree)
{
	char opts[64];
	struct stat st;

	for (size_t i = 0; i < BK_ARRAY_SIZE(host_ro_dirs); i++) {
		char host[64], target[PATH_MAX];
		ssize_t n;

		snprintf(host, sizeof(host), "/%s", host_ro_dirs[i]);
		if (lstat(host, &st) < 0)
			continue;
		/* Merged-/usr hosts have /bin -> usr/bin: keep the same links. */
		if (S_ISLNK(st.st_mode)) {
			n = readlink(host, target, sizeof(target) - 1);
			if (n < 0)
				return -1;
			target[n] = '\0';
			if (symlink(target, host_ro_dirs[i]) < 0)
				return -1;
			continue;
		}
		if (host_trees[i] < 0)
			continue;
		if (mkdir(host_ro_dirs[i], 0755) < 0 || tree_attach(host_trees[i], host_ro_dirs[i]) < 0)
			return -1;
	}
	if (mkdir("proc", 0555) < 0 || mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return -1;
	if (build_dev(cfg->shm_size) < 0)
		return -1;
	snprintf(opts, sizeof(opts), "mode=1777,size=%zu", cfg->tmp_size);
	if (mkdir("tmp", 01777) < 0 || mount("tmpfs", "tmp", "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
		return -1;
	/* /var/tmp, which tools expect to exist: the same tmpfs as /tmp. */
	if (mkdir("var", 0755) < 0 || symlink("/tmp", "var/tmp") < 0)
		return -1;
	/* Where a granted exec's own mount namespace gets the egress CA bundle (spawn.c). */
	if (mkdir("run", 0755) < 0 || mkdir(BK_EGRESS_CA_DIR + 1, 0755) < 0)
		return -1;
	if (mkdir("workspace", 0755) < 0 || tree_attach(workspace_tree, "workspace") < 0)
		return -1;
	if (mkdir("home", 0755) < 0 || mkdir("home/" SANDBOX_USER, 0755) < 0 ||
	    tree_attach(home_tree, BK_SANDBOX_HOME + 1) < 0)
		return -1;
	return write_identity(cfg);
}

/* The sandbox's first process, pid 1 of its new PID namespace, in its own mount namespace.
 * Runs as a fork of the executor (no shared memory), so ordinary calls are fine up to the
 * privilege drop; from there on it is the same sequence as an exec. */
__attribute__((noreturn)) static void local_child(const bk_sandbox *sb, const bk_spawner *sp, int workspace_tree,
						  int home_tree, int init_fd, int report)
{
	int host_trees[BK_ARRAY_SIZE(host_ro_dirs)];
	bk_step failed;
	int null_fd;

	/* If the executor dies, the sandbox — and with its init every process in it — goes too. */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	/* The modes below are the modes meant, whatever boxkited's own umask. */
	umask(0);
	/* Nothing mounted from here on may reach the host's mount table. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		bk_child_fail(report, BOXKITE__EXECUTOR__STEP__STEP_SANDBOX_ROOT);
	/* Clone what the root will show before /tmp is covered. */
	for (size_t i = 0; i < BK_ARRAY_SIZE(host_ro_dirs); i++) {
		char host[64];
		struct stat st;
		snprintf(host, sizeof(host), "/%s", host_ro_dirs[i]);
		host_trees[i] = -1;
		if (lstat(host, &st) == 0 && S_ISDIR(st.st_mode)) {
			host_trees[i] = tree_clone(AT_FDCWD, host, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV);
			if (host_trees[i] < 0)
				bk_child_fail(report, BOXKITE__EXECUTOR__STEP__STEP_SANDBOX_ROOT);
		}
	}
	/* The new root: a small tmpfs over the host's /tmp (in this namespace only). */
	if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") < 0 || chdir("/tmp") < 0 ||
	    build_root(&sb->cfg, host_trees, workspace_tree, home_tree) < 0)
		bk_child_fail(report, BOXKITE__EXECUTOR__STEP__STEP_SANDBOX_ROOT);
	/* Swap roots and drop the host's entirely, then make the root itself read-only. */
	if (syscall(SYS_pivot_root, ".", ".") < 0 || umount2(".", MNT_DETACH) < 0 || chdir("/") < 0 ||
	    mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
		bk_child_fail(report, BOXKITE__EXECUTOR__STEP__STEP_PIVOT_ROOT);
	if (sethostname(SANDBOX_HOSTNAME, strlen(SANDBOX_HOSTNAME)) < 0)
		bk_child_fail(report, BOXKITE__EXECUTOR__STEP__STEP_HOSTNAME);
	/* Its network namespace (CLONE_NEWNET) is empty and its own, never the host's. Where a
	 * process that exposes a port runs is another, the executor's (bk_sandbox_set_net). */
	/* No controlling terminal and no descriptor of boxkited's own stdio (the operator's
	 * terminal, when it was started from one): a session of its own, stdio on /dev/null. */
	if (setsid() < 0)
		bk_child_fail(report, BOXKITE__EXECUTOR__STEP__STEP_SESSION);
	null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(null_fd, 1) < 0 || dup2(null_fd, 2) < 0)
		bk_child_fail(report, BOXKITE__EXECUTOR__STEP__STEP_STDIO);
	failed = bk_child_drop_privileges(&sp->creds);
	if (failed)
		bk_child_fail(report, failed);
	if (bk_child_reset_signals() < 0)
		bk_child_fail(report, BOXKITE__EXECUTOR__STEP__STEP_SIGNALS);
	/* Keep only stdio, the report pipe and the init binary (both close-on-exec). */
	if (bk_child_close_fds((const int[]){ report, init_fd }, 2) < 0)
		bk_child_fail(report, BOXKITE__EXECUTOR__STEP__STEP_CLOSE_FDS);
	if (bk_child_seccomp(sp->seccomp) < 0)
		bk_child_fail(report, BOXKITE__EXECUTOR__STEP__STEP_SECCOMP);
	{
		char *const argv[] = { "boxkite-init", NULL };
		char *const envp[] = { "PATH=/usr/local/bin:/usr/bin:/bin", NULL };
		syscall(SYS_execveat, init_fd, "", argv, envp, AT_EMPTY_PATH);
	}
	bk_child_fail(report, BOXKITE__EXECUTOR__STEP__STEP_EXECVE);
}

/* A host directory the sandbox shows (the workspace, the home), created if missing, owned by
 * the sandbox user with mode 0755 — what a Reset gives it back (sidecar/files/fsops.c, ROOT_MODE)
 * —, cloned as a detached mount without set-id and device files. Cloned here, in the mount
 * namespace the path lives in (the host's); the child attaches the copy in its own. */
static int user_tree(const bk_sandbox_config *cfg, const char *what, const char *dir, bk_error **err)
{
	_cleanup_close_ int fd = -1;
	bool created = mkdir(dir, 0755) == 0;
	char path[64];
	int tree;

	if (!created && errno != EEXIST)
		return bk_error_errno(err, errno, "cannot create the %s %s", what, dir);
	fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return bk_error_errno(err, errno, "cannot open the %s %s", what, dir);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	/* A umask may have narrowed a directory we made, and a last tenant may have changed one
	 * that was there. Before the chown, while it is still ours: the executor holds no
	 * CAP_FOWNER. */
	if (chown(path, 0, 0) < 0 || chmod(path, 0755) < 0)
		return bk_error_errno(err, errno, "chmod %s", dir);
	if (chown(path, cfg->uid, cfg->gid) < 0)
		return bk_error_errno(err, errno, "cannot give the %s %s to uid %u", what, dir, (unsigned)cfg->uid);
	tree = tree_clone(fd, "", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (tree < 0)
		return bk_error_errno(err, errno, "cannot clone the %s mount %s", what, dir);
	return tree;
}

/* A sandbox init local_create made and is leaving without keeping: killed and reaped. */
static void init_abandon(int *pidfd)
{
	if (*pidfd >= 0) {
		bk_pidfd_kill_reap(*pidfd);
		*pidfd = bk_close(*pidfd);
	}
}

static int local_create(bk_sandbox *sb, const bk_spawner *sp, bk_error **err)
{
	_cleanup_close_ int workspace_tree = -1, home_tree = -1, init_fd = -1;
	_cleanup_close_pair_ int rep[2] = BK_FD_PAIR_NONE;
	_cleanup_(init_abandon) int pidfd = -1;
	struct bk_step_report report;
	long pid;
	int ret;

	workspace_tree = user_tree(&sb->cfg, "workspace", sb->cfg.workspace, err);
	if (workspace_tree < 0)
		return workspace_tree;
	home_tree = user_tree(&sb->cfg, "home", sb->cfg.home, err);
	if (home_tree < 0)
		return home_tree;
	init_fd = open(sb->cfg.init_path, O_RDONLY | O_CLOEXEC);
	if (init_fd < 0)
		return bk_error_errno(err, errno, "cannot open the sandbox init %s", sb->cfg.init_path);
	if (pipe2(rep, O_CLOEXEC) < 0)
		return bk_error_errno(err, errno, "pipe2");
	/* A fork (no shared memory) straight into the sandbox's new namespaces. */
	pid = syscall(SYS_clone,
		      CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET | CLONE_PIDFD | SIGCHLD,
		      NULL, &pidfd, NULL, NULL);
	if (pid == 0) {
		bk_close(rep[0]);
		local_child(sb, sp, workspace_tree, home_tree, init_fd, rep[1]);
	}
	if (pid < 0)
		return bk_error_errno(err, errno, "clone the sandbox");
	rep[1] = bk_close(rep[1]);
	if ((ret = bk_step_report_read(rep[0], &report, err)) < 0)
		return bk_error_prefix(err, ret, "sandbox set-up");
	sb->init_pid = (pid_t)pid;
	sb->init_pidfd = TAKE_FD(pidfd);
	return 0;
}

/* --- pod mode -------------------------------------------------------------------------------- */

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');

	return s ? s + 1 : p;
}

/* /proc/<pid>/status's parent and real uid: what rules out nearly every process at once. */
static bool proc_parent_uid(int pid, int *ppid, unsigned *uid)
{
	char path[64], buf[4096], *p;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (bk_kfile_read(path, buf, sizeof(buf)) <= 0)
		return false;
	p = strstr(buf, "\nPPid:");
	if (!p || sscanf(p + 6, "%d", ppid) != 1)
		return false;
	p = strstr(buf, "\nUid:");
	return p && sscanf(p + 5, "%u", uid) == 1;
}

/* Whether pid is a candidate for the sandbox's init (pod_find says which), and if so its start
 * time, which tells it from a later process given the same pid. status alone rules out nearly
 * every process (parent and uid), so cmdline and stat are read only for the few left. */
static bool pod_candidate(const bk_sandbox *sb, int pid, unsigned long long *start)
{
	char path[64], buf[4096], *p;
	unsigned uid;
	int ppid;

	if (!proc_parent_uid(pid, &ppid, &uid) || ppid != 0 || uid != sb->cfg.uid)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
	if (bk_kfile_read(path, buf, sizeof(buf)) <= 0 || strcmp(base_name(buf), sb->cfg.init_name) != 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (bk_kfile_read(path, buf, sizeof(buf)) <= 0)
		return false;
	/* comm may hold spaces and parentheses: fields resume after the last ')'. */
	p = strrchr(buf, ')');
	return p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
			   start) == 1;
}

/* The sandbox's init: argv[0] named init_name, running as the sandbox uid, and with its parent
 * outside our PID namespace (ppid 0) — the container runtime started it. No process in the
 * sandbox can make such a process: their orphans are reparented inside the namespace. */
static int pod_find(bk_sandbox *sb, bk_error **err)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int found = 0, pid = 0, pidfd;
	unsigned long long start = 0, start2;

	if (!d)
		return bk_error_errno(err, errno, "opendir /proc");
	while ((de = readdir(d))) {
		int p = atoi(de->d_name);
		unsigned long long st;
		if (p <= 0 || !pod_candidate(sb, p, &st))
			continue;
		found++;
		pid = p;
		start = st;
	}
	closedir(d);
	if (found == 0) {
		snprintf(sb->why, sizeof(sb->why), "no %s process (uid %u, started by the runtime) found yet",
			 sb->cfg.init_name, (unsigned)sb->cfg.uid);
		return -EAGAIN;
	}
	if (found > 1) {
		snprintf(sb->why, sizeof(sb->why), "%d candidate %s processes: refusing to guess", found,
			 sb->cfg.init_name);
		return -EAGAIN;
	}
	/* Pin it, then check the pid still names the same process (it may have been reused). */
	pidfd = pidfd_open(pid, 0);
	if (pidfd < 0) {
		snprintf(sb->why, sizeof(sb->why), "%s (pid %d) went away", sb->cfg.init_name, pid);
		return -EAGAIN;
	}
	if (!pod_candidate(sb, pid, &start2) || start2 != start) {
		bk_close(pidfd);
		snprintf(sb->why, sizeof(sb->why), "%s (pid %d) changed while pinning it", sb->cfg.init_name, pid);
		return -EAGAIN;
	}
	sb->init_pid = pid;
	sb->init_pidfd = pidfd;
	return 0;
}

/* An exec's init, as spawn.c starts it: boxkite-init --exec ..., the sandbox uid's. */
static bool exec_init(const bk_sandbox *sb, int pid)
{
	char path[64], buf[256];
	unsigned uid;
	int ppid;
	ssize_t n;

	if (!proc_parent_uid(pid, &ppid, &uid) || uid != sb->cfg.uid)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
	n = bk_kfile_read(path, buf, sizeof(buf));
	return n > 0 && strcmp(base_name(buf), "boxkite-init") == 0 && (size_t)n > strlen(buf) + 1 &&
	       strcmp(buf + strlen(buf) + 1, BK_INIT_EXEC_FLAG) == 0;
}

int bk_sandbox_kill_orphans(const bk_sandbox *sb)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int killed = 0;

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		int pid = atoi(de->d_name);
		_cleanup_close_ int pidfd = -1;
		struct pollfd pfd;

		if (pid <= 0 || !exec_init(sb, pid) || (pidfd = pidfd_open(pid, 0)) < 0)
			continue;
		/* Pinned: still the process looked at (its pid not reused meanwhile)? */
		if (!exec_init(sb, pid) || pidfd_send_signal(pidfd, SIGKILL, NULL, 0) < 0)
			continue;
		killed++;
		/* Its PID namespace, and everything the command started, goes with it: gone before
		 * the front serves (a hang guard, not a promise the kernel gives). */
		pfd = (struct pollfd){ .fd = pidfd, .events = POLLIN };
		if (poll(&pfd, 1, ORPHAN_WAIT_MS) == 0)
			bk_log(BK_LOG_ERROR, "executor: pid %d, a previous executor's exec, still there %d ms after SIGKILL",
			       pid, ORPHAN_WAIT_MS);
	}
	closedir(d);
	return killed;
}

/* --- both ------------------------------------------------------------------------------------ */

/* Whether fd is the same namespace as our /proc/self/ns/<name>. */
static bool ns_is_ours(int fd, const char *name)
{
	struct stat ours, theirs;
	char path[32];

	snprintf(path, sizeof(path), "/proc/self/ns/%s", name);
	return stat(path, &ours) == 0 && fstat(fd, &theirs) == 0 && ours.st_dev == theirs.st_dev &&
	       ours.st_ino == theirs.st_ino;
}

int bk_sandbox_acquire(bk_sandbox *sb, const bk_spawner *sp, bk_error **err)
{
	int ret;

	ret = sb->cfg.pod ? pod_find(sb, err) : local_create(sb, sp, err);
	if (ret < 0) {
		if (ret != -EAGAIN)
			snprintf(sb->why, sizeof(sb->why), "%s", err && *err ? (*err)->msg : "sandbox set-up failed");
		return ret;
	}
	ret = open_ns(sb, sb->init_pid, err);
	if (ret < 0) {
		bk_sandbox_stop(sb);
		return ret;
	}
	/* The namespaces were opened by pid number. A pod's init is not our child: had it died and
	 * been reaped since it was pinned, the number may name another process now, and the
	 * namespaces be that one's. Only if the pinned process is still there were they its. */
	if (sb->cfg.pod && pidfd_send_signal(sb->init_pidfd, 0, NULL, 0) < 0) {
		snprintf(sb->why, sizeof(sb->why), "%s (pid %d) went away while its namespaces were opened: %s",
			 sb->cfg.init_name, (int)sb->init_pid, strerror(errno));
		bk_sandbox_stop(sb);
		return -EAGAIN;
	}
	/* A "sandbox" in our own mount namespace would be the sidecar itself. */
	if (ns_is_ours(sb->ns.mnt, "mnt")) {
		bk_sandbox_stop(sb);
		return bk_error_set(err, BK_FAILED_PRECONDITION, EINVAL,
				    "the sandbox init shares boxkited's mount namespace: not a sandbox");
	}
	/* Decided once here, not per exec: whether an exec's PID namespace can be nested in the
	 * sandbox's straight from the executor (spawn.c). */
	sb->ns.pid_is_ours = ns_is_ours(sb->ns.pid, "pid");
	sb->ready = true;
	sb->why[0] = '\0';
	return 0;
}

void bk_sandbox_set_net(bk_sandbox *sb, int net)
{
	bk_close(sb->ns.net);
	sb->ns.net = net;
}

void bk_sandbox_lost(bk_sandbox *sb)
{
	siginfo_t info;

	/* Only a local sandbox's init is our child to reap. */
	if (!sb->cfg.pod && sb->init_pidfd >= 0)
		waitid(P_PIDFD, (id_t)sb->init_pidfd, &info, WEXITED | WNOHANG);
	sb->init_pidfd = bk_close(sb->init_pidfd);
	close_ns(sb);
	sb->ready = false;
	snprintf(sb->why, sizeof(sb->why), "the sandbox init (pid %d) exited", (int)sb->init_pid);
	sb->init_pid = 0;
}

void bk_sandbox_stop(bk_sandbox *sb)
{
	if (!sb->cfg.pod && sb->init_pidfd >= 0)
		bk_pidfd_kill_reap(sb->init_pidfd);
	sb->init_pidfd = bk_close(sb->init_pidfd);
	close_ns(sb);
	sb->ready = false;
}
