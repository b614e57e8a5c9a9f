#include "exec/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "channel.h"
#include "egresspolicy.h"
#include "cleanup.h"
#include "exec/init/init_status.h"

#define CHILD_STACK_SIZE (256 * 1024)
#define OUTPUT_PIPE_SIZE (1024 * 1024)

/* What the child reads: it lives in the parent's frame, which CLONE_VM shares and CLONE_VFORK
 * keeps alive until the child has exec'd or exited. */
struct child_ctx {
	const bk_spawner *sp;
	const bk_spawn_request *rq;
	char *const *init_argv; /* boxkite-init --exec --status-fd=N -- argv... */
	int stdin_r, stdout_w, stderr_w, report_w, status_w;
	int order_r; /* prepared ahead: where the init's command will come (-1: it is in init_argv) */
	int console_w; /* tty: where the child sends the terminal's master (a unix socket) */
	int *pidfd; /* of the exec's init, however it was made (bk_spawn's) */
	char ca_opts[64]; /* the CA tmpfs's mount options, made before the clone */
};

#define CLONE_EXEC_FLAGS (CLONE_VM | CLONE_VFORK | CLONE_PIDFD)
#define RESOLVE_CONTAINED (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

/* A network namespace of its own: from the pool, or made by the clone itself. */
static int netns_flag(const bk_spawn_request *rq)
{
	return rq->netns >= 0 ? 0 : CLONE_NEWNET;
}

static int set_rlimit(int resource, uint64_t value)
{
	struct rlimit rl = { .rlim_cur = value, .rlim_max = value };

	return (int)syscall(SYS_prlimit64, 0, resource, &rl, NULL);
}

/* Step 6: core 0, nice and rtprio 0 (no lowering its nice value, no real-time scheduling),
 * nofile, fsize; nproc only when no pids cgroup limits the exec (RLIMIT_NPROC counts every
 * process of the uid on the node, other pods' sandboxes included), and data when asked
 * (without a memory cgroup). */
static int apply_rlimits(const bk_spawn_limits *l)
{
	if (set_rlimit(RLIMIT_CORE, 0) < 0 || set_rlimit(RLIMIT_NICE, 0) < 0 || set_rlimit(RLIMIT_RTPRIO, 0) < 0 ||
	    set_rlimit(RLIMIT_NOFILE, l->nofile) < 0 || set_rlimit(RLIMIT_FSIZE, l->fsize) < 0)
		return -1;
	if (l->nproc && set_rlimit(RLIMIT_NPROC, l->nproc) < 0)
		return -1;
	return l->data ? set_rlimit(RLIMIT_DATA, l->data) : 0;
}

/* Step 7 with a terminal: a new one from the exec's own devpts (its /dev/ptmx), opened
 * as the sandbox user so that its slave is the user's as on any machine; its master goes to the
 * executor over the console socket (as runc's --console-socket does), its slave becomes stdin,
 * stdout, stderr and the controlling terminal of the session step 0 made. */
static int open_terminal(const struct child_ctx *c)
{
	struct winsize ws = { .ws_row = c->rq->rows, .ws_col = c->rq->cols };
	int unlock = 0, master, slave, ret = -1;

	master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (master < 0)
		return -1;
	if (ioctl(master, TIOCSPTLCK, &unlock) < 0 || ioctl(master, TIOCSWINSZ, &ws) < 0)
		goto out;
	slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (slave < 0)
		goto out;
	if (bk_fd_send(c->console_w, "m", 1, &master, 1, 0) == 0 && dup2(slave, 0) >= 0 && dup2(slave, 1) >= 0 &&
	    dup2(slave, 2) >= 0 && ioctl(0, TIOCSCTTY, 0) == 0)
		ret = 0;
	close(slave);
out:
	close(master);
	return ret;
}

/* A tmpfs mounted on dir (with opts) holding one file, path, of len bytes of data, mode 0444,
 * written as root: 0, or -1 (errno says why). Raw system calls only. */
static int tmpfs_file(const char *dir, const char *opts, const char *path, const char *data, size_t len)
{
	size_t off = 0;
	int fd;

	if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) < 0)
		return -1;
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
	if (fd < 0)
		return -1;
	while (off < len) {
		ssize_t n = write(fd, data + off, len - off);
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	/* Closed first: a file open for writing keeps a remount read-only busy. */
	close(fd);
	if (off != len) {
		errno = EIO;
		return -1;
	}
	return 0;
}

/* Step 2, for a grant that reaches a brokered destination: the proxy's CA bundle, in a tmpfs of
 * the exec's own on the sandbox's BK_EGRESS_CA_DIR, written as root and then read-only — the
 * command can read what it trusts, and change nothing of it. */
static int mount_ca(const struct child_ctx *c)
{
	const bk_spawn_request *rq = c->rq;

	if (tmpfs_file(BK_EGRESS_CA_DIR, c->ca_opts, BK_EGRESS_CA_FILE, rq->ca_bundle, rq->ca_len) < 0)
		return -1;
	return mount(NULL, BK_EGRESS_CA_DIR, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
}

/* Step 2, where a memory cgroup limits the exec: text as its /proc/meminfo, read-only — a file on
 * a tmpfs mounted for the purpose on /proc/sys (a directory every exec has, and only for the
 * moment), bound over /proc/meminfo, and the tmpfs detached again. */
static int mount_meminfo(const char *text)
{
	size_t len = 0;

	while (text[len])
		len++;
	if (tmpfs_file("/proc/sys", "size=16k,mode=0700", "/proc/sys/meminfo", text, len) < 0 ||
	    mount("/proc/sys/meminfo", "/proc/meminfo", NULL, MS_BIND, NULL) < 0 ||
	    mount(NULL, "/proc/meminfo", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  NULL) < 0) {
		umount2("/proc/sys", MNT_DETACH);
		return -1;
	}
	return umount2("/proc/sys", MNT_DETACH);
}

/* The exec child, pid 1 of its own PID namespace and alone in a fresh network namespace (both
 * from clone) until it becomes the exec's init. Each step is one of DESIGN.md §3, in order; any
 * failure is reported by name. */
static int exec_child(void *arg)
{
	struct child_ctx *c = arg;
	const bk_spawn_request *rq = c->rq;
	const int rfd = c->report_w;
	int root_fd, cwd_fd;

	/* 0. A session of its own, without a controlling terminal: whatever terminal boxkited was
	 *    started from, /dev/tty leads nowhere and nothing can be typed into it. */
	if (setsid() < 0)
		bk_child_fail(rfd, BOXKITE__EXECUTOR__STEP__STEP_SESSION);

	/* 3. Its cgroup(s) it already is in: clone created it where the executor waited for it
	 *    (sidecar/exec/cgroup.h, "Staging"), so from its first instruction it is charged to its
	 *    own pids and memory limits. */

	/* 1. A network namespace nothing ever ran in, with only lo, up — so that servers the
	 *    command starts on localhost work, and nothing else exists to reach: one from the
	 *    pool (lo already up), or the one the clone just made. */
	if (rq->netns >= 0) {
		if (setns(rq->netns, CLONE_NEWNET) < 0)
			bk_child_fail(rfd, BOXKITE__EXECUTOR__STEP__STEP_LOOPBACK);
	} else if (bk_child_loopback_up() < 0) {
		bk_child_fail(rfd, BOXKITE__EXECUTOR__STEP__STEP_LOOPBACK);
	}

	/* 2. The sandbox's filesystem and hostname; System V IPC of its own, whose objects die
	 *    with the exec instead of piling up in the sandbox outside any exec's memory limit... */
	if (setns(rq->ns->mnt, CLONE_NEWNS) < 0)
		bk_child_fail(rfd, BOXKITE__EXECUTOR__STEP__STEP_SETNS_MNT);
	if (setns(rq->ns->uts, CLONE_NEWUTS) < 0)
		bk_child_fail(rfd, BOXKITE__EXECUTOR__STEP__STEP_SETNS_UTS);
	if (unshare(CLONE_NEWIPC) < 0)
		bk_child_fail(rfd, BOXKITE__EXECUTOR__STEP__STEP_IPC_NS);
	/*    ...in a copy of its mount table, receiving but never propagating mounts, where a
	 *    fresh /proc shows only this exec's PID namespace: other execs' processes cannot be
	 *    seen, read or signalled although they run as the same uid... */
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
		bk_child_fail(rfd, BOXKITE__EXECUTOR__STEP__STEP_MOUNT_NS);
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		bk_child_fail(rfd, BOXKITE__EXECUTOR__STEP__STEP_MOUNT_PROC);
	/*    ...whose meminfo is the exec's memory limit, where a memory cgroup sets one: what free,
	 *    top and the runtimes that size themselves by it see (exec/meminfo.h). Read-only: nothing
	 *    in the exec can change what the next reader sees. */
	if (rq->meminfo && mount_meminfo(rq->meminfo) < 0)
		bk_child_fail(rfd, BOXKITE__EXECUTOR__STEP__STEP_MOUNT_MEMINFO);
	/*    ...and a devpts instance of its own on /dev/pts (the sandbox's /dev/ptmx leads to it):
	 *    the terminals it makes can be opened by its own processes only, none of another
	 *    exec's is there to open — before, a process without a terminal read and wrote another
	 *    process's through the one devpts of the sandbox —, and it makes BK_EXEC_PTYS at most. */
	/*    (A container without /dev/pts has no terminal anywhere to reach: nothing to mount on.) */
	if (mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, BK_DEVPTS_OPTIONS) < 0 && errno != ENOENT)
		bk_child_fail(rfd, BOXKITE__EXECUTOR__STEP__STEP_MOUNT_DEVPTS);
	/*    ...with, for a brokered grant, what it is to trust... */
	if (rq->ca_bundle && mount_ca(c) < 0)
		bk_child_fail(rfd, BOXKITE__EXECUTOR__STEP__STEP_EGRESS_CA);
	/*    ...and a cgroup namespace rooted at its own cgroup: /proc/self/cgroup shows "/", not
	 *    the host's cgroup paths and the executor's pid. */
	if (unshare(CLONE_NEWCGROUP) < 0)
		bk_child_fail(rfd, BOXKITE__EXECUTOR__STEP__STEP_CGROUP_NS);

	/* 4. The working directory's root, here in the exec's own mount table (a mount point of
	 *    the sandbox's read-only root, not something a command can replace)... (Prepared
	 *    ahead, the init does step 4 in the same mount table once the command has come.) */
	root_fd = rq->warm ? -1 : open(rq->cwd_root, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (root_fd < 0 && !rq->warm)
		bk_child_fail(rfd, BOXKITE__EXECUTOR__STEP__STEP_CHDIR);

	/* 5. The sandbox's user namespace, where the per-user limits of the kernel are the sandbox's
	 *    own (exec/userns.h) — everything above needed the node's; then the sandbox user, no
	 *    capabilities in any set, no_new_privs. */
	if (c->sp->userns >= 0 && setns(c->sp->userns, CLONE_NEWUSER) < 0)
		bk_child_fail(rfd, BOXKITE__EXECUTOR__STEP__STEP_USERNS);
	bk_step failed = bk_child_drop_privileges(&c->sp->creds);
	if (failed)
		bk_child_fail(rfd, failed);

	/* 4. ...and the directory itself, resolved beneath that root as the sandbox user: a symlink
	 *    that leaves the root, an absolute one, or a directory the sandbox user may not enter is
	 *    refused, as the file rpcs refuse them. */
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC, .resolve = RESOLVE_CONTAINED };
	cwd_fd = rq->warm ? -1 : (int)syscall(SYS_openat2, root_fd, rq->cwd_rel, &how, sizeof(how));
	if (!rq->warm && (cwd_fd < 0 || fchdir(cwd_fd) < 0))
		bk_child_fail(rfd, BOXKITE__EXECUTOR__STEP__STEP_CHDIR);

	/* 6. Resource limits that hold with or without a cgroup. */
	if (apply_rlimits(&rq->limits) < 0)
		bk_child_fail(rfd, BOXKITE__EXECUTOR__STEP__STEP_RLIMIT);

	/* 7. stdio onto the pipes, default signal state, no other descriptor than the init's status
	 *    pipe (kept across its execve), then seccomp — last, so nothing above needs a syscall
	 *    the filter refuses. */
	if (rq->tty) {
		if (open_terminal(c) < 0)
			bk_child_fail(rfd, BOXKITE__EXECUTOR__STEP__STEP_TERMINAL);
	} else if (dup2(c->stdin_r, 0) < 0 || dup2(c->stdout_w, 1) < 0 || dup2(c->stderr_w, 2) < 0) {
		bk_child_fail(rfd, BOXKITE__EXECUTOR__STEP__STEP_STDIO);
	}
	if (fcntl(c->status_w, F_SETFD, 0) < 0 || (c->order_r >= 0 && fcntl(c->order_r, F_SETFD, 0) < 0))
		bk_child_fail(rfd, BOXKITE__EXECUTOR__STEP__STEP_STDIO);
	if (bk_child_reset_signals() < 0)
		bk_child_fail(rfd, BOXKITE__EXECUTOR__STEP__STEP_SIGNALS);
	if (bk_child_close_fds((const int[]){ rfd, c->status_w, c->sp->init_fd, c->order_r }, 4) < 0)
		bk_child_fail(rfd, BOXKITE__EXECUTOR__STEP__STEP_CLOSE_FDS);
	/*    Below boxkited in the CPU's eyes (child.h) from here on: not before, since the
	 *    executor waits for this child (CLONE_VFORK), and every step above at nice 10 was one
	 *    the rest of the machine could preempt with the executor held up behind it. Raising
	 *    one's nice value needs no privilege, and with RLIMIT_NICE 0 (step 6) the command cannot
	 *    lower it again. */
	setpriority(PRIO_PROCESS, 0, BK_SANDBOX_NICE);
	if (bk_child_seccomp(c->sp->seccomp) < 0)
		bk_child_fail(rfd, BOXKITE__EXECUTOR__STEP__STEP_SECCOMP);

	/* 8. The exec's init (as `docker run --init`): it starts the command as its child, forwards
	 *    signals, reaps, and ends with the command's status — so the command is not PID 1, and
	 *    its signals to itself and abort() behave as on any machine. */
	syscall(SYS_execveat, c->sp->init_fd, "", c->init_argv, rq->envp, AT_EMPTY_PATH);
	bk_child_fail(rfd, BOXKITE__EXECUTOR__STEP__STEP_EXECVE);
	return 127;
}

/* Local mode only. CLONE_NEWPID works only from a process whose own PID namespace is the one
 * the new namespace is nested in, and the executor's is not the sandbox's: this short-lived
 * helper is born in the sandbox's namespace, unshares a new one for its next child, and makes
 * the exec's init with CLONE_PARENT, so that the executor is its parent (and reaps it). It
 * shares the executor's descriptor table, so it must close nothing. */
static int pidns_helper(void *arg)
{
	struct child_ctx *c = arg;
	const bk_spawner *sp = c->sp;

	if (unshare(CLONE_NEWPID) < 0)
		bk_child_fail(c->report_w, BOXKITE__EXECUTOR__STEP__STEP_PIDNS);
	if (clone(exec_child, (char *)sp->stack + 2 * (4096 + sp->stack_size),
		  CLONE_EXEC_FLAGS | netns_flag(c->rq) | CLONE_PARENT | SIGCHLD, c, c->pidfd) < 0)
		bk_child_fail(c->report_w, BOXKITE__EXECUTOR__STEP__STEP_PIDNS);
	syscall(SYS_exit, 0);
	return 0;
}

void bk_pidfd_kill_reap(int pidfd)
{
	siginfo_t info;

	syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
	while (waitid(P_PIDFD, (id_t)pidfd, &info, WEXITED) < 0 && errno == EINTR)
		;
}

void bk_spawned_close(bk_spawned *s)
{
	s->pidfd = bk_close(s->pidfd);
	s->stdin_w = bk_close(s->stdin_w);
	s->stdout_r = bk_close(s->stdout_r);
	s->stderr_r = bk_close(s->stderr_r);
	s->status_r = bk_close(s->status_r);
	s->order = bk_close(s->order);
}

int bk_spawner_init(bk_spawner *sp, const bk_seccomp *seccomp, const char *init_path, uid_t uid, gid_t gid,
		     bk_error **err)
{
	memset(sp, 0, sizeof(*sp));
	sp->self_pidns = sp->init_fd = sp->userns = -1;
	/* Opened here, outside any sandbox, and executed by descriptor in each exec's mount
	 * namespace: the sandbox's root need not hold it, and nothing in the sandbox can swap it. */
	sp->init_fd = open(init_path, O_RDONLY | O_CLOEXEC);
	if (sp->init_fd < 0)
		return bk_error_errno(err, errno, "cannot open the exec init %s", init_path);
	sp->seccomp = seccomp;
	sp->creds.uid = uid;
	sp->creds.gid = gid;
	sp->creds.bounding = bk_capbset_read();
	sp->self_pidns = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
	if (sp->self_pidns < 0)
		return bk_error_errno(err, errno, "open /proc/self/ns/pid");
	/* Two stacks (the helper's and the exec child's), each above a guard page. CLONE_VFORK
	 * keeps each parent off the stack its child runs on. */
	sp->stack_size = CHILD_STACK_SIZE;
	sp->stack = mmap(NULL, 2 * (sp->stack_size + 4096), PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (sp->stack == MAP_FAILED) {
		sp->stack = NULL;
		return bk_error_errno(err, errno, "child stack");
	}
	/* Without its guard pages a child overrunning its stack would write over the other's, or
	 * over whatever is mapped next: the executor does not run that way. */
	if (mprotect(sp->stack, 4096, PROT_NONE) < 0 ||
	    mprotect((char *)sp->stack + 4096 + sp->stack_size, 4096, PROT_NONE) < 0)
		return bk_error_errno(err, errno, "child stack guard pages");
	return 0;
}

void bk_spawner_fini(bk_spawner *sp)
{
	if (sp->stack)
		munmap(sp->stack, 2 * (sp->stack_size + 4096));
	sp->stack = NULL;
	sp->self_pidns = bk_close(sp->self_pidns);
	sp->init_fd = bk_close(sp->init_fd);
	sp->userns = bk_close(sp->userns);
}

/* An exec child bk_spawn made and is leaving without handing over: killed and reaped. */
static void child_abandon(int *pidfd)
{
	if (*pidfd >= 0) {
		bk_pidfd_kill_reap(*pidfd);
		*pidfd = bk_close(*pidfd);
	}
}

/* Make the exec child: straight from here in pod mode, through pidns_helper in local mode. 0
 * once it has exec'd or exited (CLONE_VFORK), with *c->pidfd set; -errno when it was not made. */
static int clone_child(struct child_ctx *c, bk_error **err)
{
	const bk_spawner *sp = c->sp;
	char *stack_top = (char *)sp->stack + 4096 + sp->stack_size;
	int clone_errno;
	pid_t pid;

	if (c->rq->ns->pid_is_ours) {
		/* Pod mode: the sandbox's PID namespace is ours (shareProcessNamespace). */
		pid = clone(exec_child, stack_top, CLONE_EXEC_FLAGS | netns_flag(c->rq) | CLONE_NEWPID | SIGCHLD, c,
			    c->pidfd);
		return pid < 0 ? bk_error_errno(err, errno, "clone") : 0;
	}
	/* Local mode: pid_for_children := the sandbox's PID namespace for the helper, which nests the
	 * exec's namespace in it; restored right after. */
	if (setns(c->rq->ns->pid, CLONE_NEWPID) < 0)
		return bk_error_errno(err, errno, "setns(pid) into the sandbox");
	/* CLONE_FILES: the pidfd the helper gets for the exec's init lands in our table. */
	pid = clone(pidns_helper, stack_top, CLONE_VM | CLONE_VFORK | CLONE_FILES | SIGCHLD, c);
	clone_errno = errno;
	if (setns(sp->self_pidns, CLONE_NEWPID) < 0) {
		/* Every later clone would land in the wrong place: the executor cannot go on. */
		fprintf(stderr, "boxkited executor: cannot restore pid_for_children: %s\n", strerror(errno));
		abort();
	}
	if (pid < 0)
		return bk_error_errno(err, clone_errno, "clone");
	while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR)
		;
	return 0;
}

int bk_spawn(const bk_spawner *sp, const bk_spawn_request *rq, bk_spawned *out, struct bk_step_report *report,
	     bk_error **err)
{
	_cleanup_close_pair_ int in[2] = BK_FD_PAIR_NONE, o[2] = BK_FD_PAIR_NONE, e[2] = BK_FD_PAIR_NONE;
	_cleanup_close_pair_ int rep[2] = BK_FD_PAIR_NONE, st[2] = BK_FD_PAIR_NONE, con[2] = BK_FD_PAIR_NONE;
	_cleanup_close_pair_ int ord[2] = BK_FD_PAIR_NONE;
	_cleanup_(child_abandon) int pidfd = -1;
	_cleanup_free_ char **init_argv = NULL;
	struct child_ctx ctx = { .sp = sp, .rq = rq, .pidfd = &pidfd };
	char status_arg[sizeof(BK_INIT_STATUS_FLAG) + 12], order_arg[sizeof(BK_INIT_ORDER_FLAG) + 12];
	size_t argc = 0;
	int ret;

	*report = (struct bk_step_report){ .step = BOXKITE__EXECUTOR__STEP__STEP_NONE };
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(o, O_CLOEXEC) < 0 || pipe2(e, O_CLOEXEC) < 0 ||
	    pipe2(rep, O_CLOEXEC) < 0 || pipe2(st, O_CLOEXEC | O_NONBLOCK) < 0)
		return bk_error_errno(err, errno, "pipe2");
	if (rq->tty && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, con) < 0)
		return bk_error_errno(err, errno, "socketpair for the terminal");
	if (rq->warm && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ord) < 0)
		return bk_error_errno(err, errno, "socketpair for the init's order");
	/* Room for the bundle, and no more files than it. */
	snprintf(ctx.ca_opts, sizeof(ctx.ca_opts), "size=%zu,nr_inodes=4,mode=0755", rq->ca_len + 65536);
	/* The init's command line: built here, the child may not allocate. */
	while (!rq->warm && rq->argv[argc])
		argc++;
	init_argv = calloc(argc + 5, sizeof(*init_argv));
	if (!init_argv)
		return bk_error_errno(err, ENOMEM, "init argv");
	snprintf(status_arg, sizeof(status_arg), BK_INIT_STATUS_FLAG "%d", st[1]);
	snprintf(order_arg, sizeof(order_arg), BK_INIT_ORDER_FLAG "%d", ord[1]);
	init_argv[0] = "boxkite-init";
	init_argv[1] = BK_INIT_EXEC_FLAG;
	init_argv[2] = status_arg;
	init_argv[3] = rq->warm ? order_arg : "--";
	if (!rq->warm) /* prepared ahead, there is no argv yet */
		memcpy(init_argv + 4, rq->argv, argc * sizeof(*init_argv));
	/* Large pipes: output capture runs at ~2 GB/s with 1 MiB, ~1.4 with the default 64 KiB. */
	fcntl(o[0], F_SETPIPE_SZ, OUTPUT_PIPE_SIZE);
	fcntl(e[0], F_SETPIPE_SZ, OUTPUT_PIPE_SIZE);
	ctx.init_argv = init_argv;
	ctx.stdin_r = in[0];
	ctx.stdout_w = o[1];
	ctx.stderr_w = e[1];
	ctx.report_w = rep[1];
	ctx.status_w = st[1];
	ctx.console_w = con[1];
	ctx.order_r = ord[1];

	if ((ret = clone_child(&ctx, err)) < 0)
		return ret;
	/* The child has exec'd or exited (CLONE_VFORK): its ends of the pipes are its own now. */
	in[0] = bk_close(in[0]);
	o[1] = bk_close(o[1]);
	e[1] = bk_close(e[1]);
	rep[1] = bk_close(rep[1]);
	st[1] = bk_close(st[1]);
	ord[1] = bk_close(ord[1]);
	if ((ret = bk_step_report_read(rep[0], report, err)) < 0)
		return ret;
	if (rq->tty) {
		/* The master the child sent before it went on (CLONE_VFORK: it is in the socket). Its
		 * stderr pipe is at EOF already: a terminal has one stream. */
		_cleanup_close_ int master = -1;
		char tag;
		size_t n = 0;

		if (bk_fd_recv(con[0], &tag, 1, MSG_DONTWAIT, &master, 1, &n, NULL) != 1 || n != 1)
			return bk_error_errno(err, EPROTO, "the exec's terminal did not arrive");
		bk_close(in[1]);
		bk_close(o[0]);
		o[0] = fcntl(master, F_DUPFD_CLOEXEC, 3);
		in[1] = TAKE_FD(master);
		if (o[0] < 0)
			return bk_error_errno(err, errno, "dup of the terminal");
	}
	out->pidfd = TAKE_FD(pidfd);
	out->stdin_w = TAKE_FD(in[1]);
	out->stdout_r = TAKE_FD(o[0]);
	out->stderr_r = TAKE_FD(e[0]);
	out->status_r = TAKE_FD(st[0]);
	out->order = TAKE_FD(ord[0]);
	return 0;
}

/* The order's body (init_status.h): root, relative directory, argv, envp, each NUL-terminated. */
static char *order_body(char *const *argv, char *const *envp, const char *cwd_root, const char *cwd_rel,
			struct bk_init_order *head)
{
	size_t len = strlen(cwd_root) + 1 + strlen(cwd_rel) + 1;
	char *body, *p;

	*head = (struct bk_init_order){ .magic = BK_INIT_ORDER_MAGIC };
	for (; argv[head->argc]; head->argc++)
		len += strlen(argv[head->argc]) + 1;
	for (; envp[head->envc]; head->envc++)
		len += strlen(envp[head->envc]) + 1;
	if (len > BK_INIT_ORDER_MAX || !(body = malloc(len)))
		return NULL;
	head->len = (uint32_t)len;
	p = stpcpy(body, cwd_root) + 1;
	p = stpcpy(p, cwd_rel) + 1;
	for (uint32_t i = 0; i < head->argc; i++)
		p = stpcpy(p, argv[i]) + 1;
	for (uint32_t i = 0; i < head->envc; i++)
		p = stpcpy(p, envp[i]) + 1;
	return body;
}

int bk_spawn_order(bk_spawned *s, char *const *argv, char *const *envp, const char *cwd_root, const char *cwd_rel,
		   struct bk_step_report *report, bk_error **err)
{
	const struct timeval limit = { .tv_sec = BK_SPAWN_ORDER_TIMEOUT_MS / 1000,
				       .tv_usec = BK_SPAWN_ORDER_TIMEOUT_MS % 1000 * 1000 };
	struct bk_init_order head;
	_cleanup_free_ char *body = order_body(argv, envp, cwd_root, cwd_rel, &head);
	struct bk_init_ack ack;
	struct iovec iov[2] = { { &head, sizeof(head) }, { body, head.len } };
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2 };
	ssize_t n;

	*report = (struct bk_step_report){ .step = BOXKITE__EXECUTOR__STEP__STEP_NONE };
	if (!body) {
		s->order = bk_close(s->order);
		return bk_error_errno(err, ENOMEM, "the init's order (at most %u bytes)", BK_INIT_ORDER_MAX);
	}
	/* The init is the sandbox user's by now: it is given a moment, never the executor. */
	if (setsockopt(s->order, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit)) < 0 ||
	    setsockopt(s->order, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit)) < 0) {
		s->order = bk_close(s->order);
		return bk_error_errno(err, errno, "the init's order socket");
	}
	while (msg.msg_iovlen > 0) {
		n = sendmsg(s->order, &msg, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int errnum = errno == EAGAIN ? ETIMEDOUT : errno;
			s->order = bk_close(s->order);
			return bk_error_errno(err, errnum, "sending the init its command");
		}
		for (; msg.msg_iovlen > 0 && (size_t)n >= msg.msg_iov[0].iov_len; msg.msg_iov++, msg.msg_iovlen--)
			n -= (ssize_t)msg.msg_iov[0].iov_len;
		if (msg.msg_iovlen > 0) {
			msg.msg_iov[0].iov_base = (char *)msg.msg_iov[0].iov_base + n;
			msg.msg_iov[0].iov_len -= (size_t)n;
		}
	}
	do
		n = recv(s->order, &ack, sizeof(ack), MSG_WAITALL);
	while (n < 0 && errno == EINTR);
	int recv_errno = n < 0 ? (errno == EAGAIN ? ETIMEDOUT : errno) : EPIPE;
	s->order = bk_close(s->order);
	if (n != (ssize_t)sizeof(ack))
		return bk_error_errno(err, recv_errno, "the init did not take its command");
	if (ack.errnum == BK_INIT_ACK_DEFER)
		return bk_error_errno(err, EAGAIN, "the working directory is the whole exec path's to resolve");
	if (ack.errnum != 0) {
		/* Entering the working directory is step 4 of the exec path, wherever it runs. */
		*report = (struct bk_step_report){ .step = BOXKITE__EXECUTOR__STEP__STEP_CHDIR,
						   .errnum = ack.errnum > 0 ? ack.errnum : EIO };
		return bk_error_errno(err, report->errnum, "%s", bk_step_name(report->step));
	}
	return 0;
}
