/* boxkite-init: the first process of a sandbox, and of each exec.
 *
 *   boxkite-init                                   the sandbox's init. In local mode boxkited
 *       starts it as PID 1 of the sandbox it builds; in a pod it is the sandbox container's
 *       command (the executor finds it by this name). It only reaps: orphans re-parented to it
 *       are waited for, so none stays a zombie, and it exits on SIGTERM or SIGINT so the
 *       container stops promptly.
 *   boxkite-init --exec --status-fd=N -- ARGV...    an exec's init, PID 1 of the exec's own PID
 *       namespace, already inside every layer of the sandbox (the executor execs it by
 *       descriptor as the last step of the exec path). As `docker run --init`: it runs ARGV as
 *       its child, so that the command is not PID 1 (whose signals to itself without a handler
 *       are ignored, and whose abort() looks like a segfault), forwards the signals it gets to
 *       every process of the namespace (the whole tree), reaps every orphan, and when the command ends writes how on N (init/init_status.h) and
 *       exits with its status — taking every process left in the namespace with it.
 *   boxkite-init --exec --status-fd=N --order-fd=M   the same, prepared ahead: the command,
 *       its environment and working directory come as an order on M (init_status.h), which it
 *       reads, enters the directory as the sandbox user (beneath its root, as the exec path
 *       would), acknowledges, and goes on as above.
 *
 * Built static against musl: it runs inside the sandbox's root, which need not have our libraries,
 * and it starts in tens of microseconds where glibc's start-up (its CPU feature probing: dozens of
 * cpuid instructions, each a trap to the hypervisor on a VM) took ~0.6 ms of every exec. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* statx(2)'s buffer, of which the mount id is read: musl's headers here have no statx (the layout
 * is ABI). */
struct mnt_statx {
	uint32_t mask;
	uint8_t before[140];
	uint64_t mnt_id;
	uint8_t after[104];
};
#define STATX_MNT_ID 0x1000U

#include "init_status.h"

static int sandbox_init(void)
{
	sigset_t set;
	int sig;

	/* When it is not PID 1 (a pod's PID 1 is the pause container), orphans of its
	 * descendants still come to it. */
	if (getpid() != 1 && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		perror("boxkite-init: PR_SET_CHILD_SUBREAPER");

	/* Exactly these blocked (the executor started us with every signal blocked, so that none
	 * sent meanwhile was lost): the others, unhandled, are ignored as by any PID 1. */
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_SETMASK, &set, NULL);
	for (;;) {
		sig = sigwaitinfo(&set, NULL);
		if (sig < 0) {
			if (errno == EINTR)
				continue;
			perror("boxkite-init: sigwaitinfo");
			return 1;
		}
		if (sig == SIGTERM || sig == SIGINT)
			return 0;
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
	}
}

/* The command's end, told to the executor, then as our own exit. */
__attribute__((noreturn)) static void finish(int status_fd, int wstatus)
{
	struct bk_init_status st;

	if (WIFSIGNALED(wstatus))
		st = (struct bk_init_status){ .how = BK_INIT_SIGNALED, .value = WTERMSIG(wstatus) };
	else
		st = (struct bk_init_status){ .how = BK_INIT_EXITED, .value = WEXITSTATUS(wstatus) };
	if (write(status_fd, &st, sizeof(st)) != (ssize_t)sizeof(st)) {
		/* The executor then takes our exit status for the command's. */
	}
	_exit(st.how == BK_INIT_SIGNALED ? 128 + st.value : st.value);
}

/* Says why the command could not start, as a shell would; its exit status: 127 not found, 126 not
 * executable. */
static int command_failed(const char *name, int err)
{
	fprintf(stderr, "boxkite: %s: %s\n", name, strerror(err));
	return err == ENOENT ? 127 : 126;
}

/* On a terminal (the executor made it our controlling one), the command leads a process group of
 * its own in the terminal's foreground, as a shell starts a job: ^C and window changes reach it
 * and what it starts, never us. A fork, so that the child can take the foreground before its
 * execve (musl's posix_spawn has no action for it); an interactive exec is not on the hot path.
 * The failure travels back on a CLOEXEC pipe: nothing read means the execve happened. */
static pid_t start_in_foreground(int status_fd, char **argv)
{
	int pipefd[2], err = 0;
	sigset_t none;
	pid_t pid;

	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -command_failed(argv[0], errno);
	pid = fork();
	if (pid == 0) {
		close(pipefd[0]);
		close(status_fd);
		/* SIGTTOU is blocked (all are), so a background group may take the terminal. */
		if (setpgid(0, 0) < 0 || tcsetpgrp(0, getpid()) < 0) {
			err = errno;
		} else {
			sigemptyset(&none);
			sigprocmask(SIG_SETMASK, &none, NULL);
			execvp(argv[0], argv);
			err = errno;
		}
		if (write(pipefd[1], &err, sizeof(err)) < 0)
			err = 0;
		_exit(127);
	}
	if (pid < 0)
		err = errno;
	close(pipefd[1]);
	if (pid > 0 && read(pipefd[0], &err, sizeof(err)) == (ssize_t)sizeof(err))
		waitpid(pid, NULL, 0);
	else if (pid > 0)
		err = 0;
	close(pipefd[0]);
	return err ? -command_failed(argv[0], err) : pid;
}

/* The command, as a child with an empty mask (and the default dispositions we have: the executor's
 * child reset them, and we set none): vfork and execvp, as cheap as posix_spawn on the path of
 * every exec. Not musl's posix_spawn: it gives the parent back its mask as sigprocmask reported
 * it, without 32-34, so SIGRTMIN (34) was no longer blocked — and a PID namespace's init drops a
 * signal it neither handles nor blocks. PATH is the command's own (the environment the executor
 * built, ours). Returns its pid, or -(exit status) having said why. */
static pid_t start_command(int status_fd, char **argv)
{
	volatile int err = 0;
	sigset_t none;
	pid_t pid;

	if (isatty(0))
		return start_in_foreground(status_fd, argv);
	sigemptyset(&none);
	pid = vfork();
	if (pid == 0) {
		/* Our memory, until the execve: only what a vfork child may do. */
		close(status_fd);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execvp(argv[0], argv);
		err = errno;
		_exit(127);
	}
	if (pid < 0)
		err = errno;
	return err ? -command_failed(argv[0], err) : pid;
}

/* The signals the exec's init takes (to forward, and SIGCHLD): 1-64 but 32 and 33, glibc's own
 * (its programs, the sandbox's, can neither catch nor send them; a glibc init never took them).
 * Not sigfillset: musl's leaves out 32-34, its own internal signals (which this single-threaded
 * init never uses), and 34 is SIGRTMIN to the sandbox's glibc programs, a signal a command may
 * handle like any other — musl's sigaddset refuses it too. So the bits, as the kernel reads a
 * set: its first 64 bits, signal N at bit N-1 (sigprocmask and sigwaitinfo pass them through). */
static void forwarded_signals(sigset_t *set)
{
	uint64_t bits = ~(uint64_t)0 & ~((uint64_t)1 << 31) & ~((uint64_t)1 << 32);

	sigemptyset(set);
	memcpy(set, &bits, sizeof(bits));
}

static int exec_init(int status_fd, char **argv)
{
	sigset_t all;
	int sig, wstatus;
	pid_t child, pid;

	/* Every signal is taken synchronously: SIGCHLD to reap, the others to forward. Blocked
	 * before the command starts (and since before our execve: the executor's child blocked them
	 * all), so none sent meanwhile is lost. */
	forwarded_signals(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	child = start_command(status_fd, argv);
	if (child < 0)
		return -child; /* 127 not found, 126 not executable: as a shell says it */
	/* The command's stdio is its own: our copies would keep its pipes open after it ends. */
	close(0);
	close(1);
	close(2);
	/* Nothing in the namespace may read our memory or descriptors (the status pipe). */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	for (;;) {
		siginfo_t info;

		sig = sigwaitinfo(&all, &info);
		if (sig < 0)
			continue; /* EINTR: nothing is lost, the signals stay pending */
		/* To every process of the namespace but us: the whole tree, what daemonized included.
		 * A SIGCHLD someone sent (not the kernel's news of a child) is forwarded too. */
		if (sig != SIGCHLD || info.si_code == SI_USER || info.si_code == SI_QUEUE)
			kill(-1, sig);
		if (sig != SIGCHLD)
			continue;
		while ((pid = waitpid(-1, &wstatus, WNOHANG)) > 0)
			if (pid == child)
				finish(status_fd, wstatus);
	}
}

/* Read exactly len bytes of the order; false at EOF or an error (the executor dropped us). */
static bool read_order(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len > 0) {
		ssize_t n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

/* The next NUL-terminated string of the order's body, or NULL when there is none within it. */
static char *next_string(char **p, char *end)
{
	char *s = *p, *nul = s < end ? memchr(s, '\0', (size_t)(end - s)) : NULL;

	if (!nul)
		return NULL;
	*p = nul + 1;
	return s;
}

static int send_ack(int fd, int errnum)
{
	struct bk_init_ack ack = { .errnum = errnum };

	return write(fd, &ack, sizeof(ack)) == (ssize_t)sizeof(ack) ? 0 : -1;
}

/* The mount a directory is on: 0 with *id, or -1. */
static int mount_id(int fd, uint64_t *id)
{
	struct mnt_statx stx;

	if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) < 0 || !(stx.mask & STATX_MNT_ID))
		return -1;
	*id = stx.mnt_id;
	return 0;
}

/* Enter rel beneath root (init_status.h, BK_INIT_ACK_DEFER): 0, an errno, or BK_INIT_ACK_DEFER. */
static int enter_beneath(const char *root, char *rel)
{
	uint64_t root_mnt, mnt;
	struct stat st;
	char *name, *save = NULL;
	int dir, next;

	dir = open(root, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir < 0)
		return errno;
	if (mount_id(dir, &root_mnt) < 0) {
		close(dir);
		return BK_INIT_ACK_DEFER;
	}
	for (name = strtok_r(rel, "/", &save); name; name = strtok_r(NULL, "/", &save)) {
		if (strcmp(name, ".") == 0)
			continue;
		if (strcmp(name, "..") == 0) {
			close(dir);
			return BK_INIT_ACK_DEFER;
		}
		next = openat(dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0) {
			int errnum = errno;
			/* A symlink (refused by O_NOFOLLOW) may lead somewhere beneath the root. */
			bool link = fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
			close(dir);
			return link ? BK_INIT_ACK_DEFER : errnum;
		}
		close(dir);
		dir = next;
		if (mount_id(dir, &mnt) < 0 || mnt != root_mnt) {
			close(dir);
			return BK_INIT_ACK_DEFER;
		}
	}
	if (fchdir(dir) < 0) {
		int errnum = errno;
		close(dir);
		return errnum;
	}
	close(dir);
	return 0;
}

/* Prepared ahead: wait for the command, enter its working directory — its root opened here, in
 * the exec's own mount table, the rest walked beneath it as the sandbox user — and run it. */
static int warm_init(int status_fd, int order_fd)
{
	struct bk_init_order head;
	char *body, *p, *end, *root, *rel, **args;
	int entered;

	/* Signals taken as exec_init takes them (blocked since before our execve: the executor's
	 * child blocked them all), so that none sent before the command starts is lost. */
	sigset_t all;
	forwarded_signals(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	/* Nothing may read our memory or descriptors (the order and status sockets) while we wait. */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (!read_order(order_fd, &head, sizeof(head)))
		return 0; /* dropped before use: nothing ran */
	if (head.magic != BK_INIT_ORDER_MAGIC || head.len > BK_INIT_ORDER_MAX || head.argc == 0 ||
	    head.argc > head.len || head.envc > head.len || !(body = malloc((size_t)head.len + 1)) ||
	    !(args = calloc((size_t)head.argc + head.envc + 2, sizeof(*args))) || !read_order(order_fd, body, head.len)) {
		send_ack(order_fd, EPROTO);
		return 127;
	}
	p = body;
	end = body + head.len;
	root = next_string(&p, end);
	rel = next_string(&p, end);
	for (uint32_t i = 0; i < head.argc + head.envc + 1; i++) {
		/* argv, a NULL, then envp (its NULL from calloc) */
		if (i == head.argc)
			continue;
		if (!(args[i] = next_string(&p, end))) {
			send_ack(order_fd, EPROTO);
			return 127;
		}
	}
	if (!root || !rel || p != end) {
		send_ack(order_fd, EPROTO);
		return 127;
	}
	entered = enter_beneath(root, rel);
	if (entered != 0) {
		send_ack(order_fd, entered);
		return 127;
	}
	if (send_ack(order_fd, 0) < 0)
		return 127;
	close(order_fd);
	/* The command's environment, also for its PATH lookup (execvp). */
	environ = args + head.argc + 1;
	return exec_init(status_fd, args);
}

/* A descriptor argument (FLAG then the number), or -1. */
static int fd_arg(const char *arg, const char *flag)
{
	size_t flag_len = strlen(flag);
	char *end;
	long fd;

	if (strncmp(arg, flag, flag_len) != 0)
		return -1;
	fd = strtol(arg + flag_len, &end, 10);
	return *end == '\0' && end != arg + flag_len && fd > 2 && fd < 65536 ? (int)fd : -1;
}

int main(int argc, char **argv)
{
	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		printf("Usage: boxkite-init\n       boxkite-init " BK_INIT_EXEC_FLAG " " BK_INIT_STATUS_FLAG
		       "N -- COMMAND [ARG...]\n       boxkite-init " BK_INIT_EXEC_FLAG " " BK_INIT_STATUS_FLAG
		       "N " BK_INIT_ORDER_FLAG "M\n\n"
		       "The boxkite sandbox's init: reaps orphans until SIGTERM or SIGINT. With " BK_INIT_EXEC_FLAG
		       ", an exec's init:\nruns COMMAND as its child, forwards signals to every process of\nits namespace, reaps, and exits "
		       "with its status.\nWith " BK_INIT_ORDER_FLAG "M instead of the command, the same once the command comes\n"
		       "as an order on M (from boxkite's executor).\n");
		return 0;
	}
	if (argc == 1)
		return sandbox_init();
	if (argc >= 4 && strcmp(argv[1], BK_INIT_EXEC_FLAG) == 0 && fd_arg(argv[2], BK_INIT_STATUS_FLAG) >= 0) {
		if (argc >= 5 && strcmp(argv[3], "--") == 0)
			return exec_init(fd_arg(argv[2], BK_INIT_STATUS_FLAG), argv + 4);
		if (argc == 4 && fd_arg(argv[3], BK_INIT_ORDER_FLAG) >= 0)
			return warm_init(fd_arg(argv[2], BK_INIT_STATUS_FLAG), fd_arg(argv[3], BK_INIT_ORDER_FLAG));
	}
	fprintf(stderr, "boxkite-init: bad arguments (see --help)\n");
	return 2;
}
