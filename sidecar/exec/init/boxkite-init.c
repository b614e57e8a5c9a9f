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
 *
 * Built static against musl: it runs inside the sandbox's root, which need not have our libraries,
 * and it starts in tens of microseconds where glibc's start-up (its CPU feature probing: dozens of
 * cpuid instructions, each a trap to the hypervisor on a VM) took ~0.6 ms of every exec. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

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

int main(int argc, char **argv)
{
	size_t flag_len = strlen(BK_INIT_STATUS_FLAG);

	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		printf("Usage: boxkite-init\n       boxkite-init " BK_INIT_EXEC_FLAG " " BK_INIT_STATUS_FLAG
		       "N -- COMMAND [ARG...]\n\n"
		       "The boxkite sandbox's init: reaps orphans until SIGTERM or SIGINT. With " BK_INIT_EXEC_FLAG
		       ", an exec's init:\nruns COMMAND as its child, forwards signals to every process of\nits namespace, reaps, and exits "
		       "with its status.\n");
		return 0;
	}
	if (argc == 1)
		return sandbox_init();
	if (argc >= 5 && strcmp(argv[1], BK_INIT_EXEC_FLAG) == 0 && strncmp(argv[2], BK_INIT_STATUS_FLAG, flag_len) == 0 &&
	    strcmp(argv[3], "--") == 0) {
		char *end;
		long fd = strtol(argv[2] + flag_len, &end, 10);
		if (*end == '\0' && end != argv[2] + flag_len && fd > 2 && fd < 65536)
			return exec_init((int)fd, argv + 4);
	}
	fprintf(stderr, "boxkite-init: bad arguments (see --help)\n");
	return 2;
}
