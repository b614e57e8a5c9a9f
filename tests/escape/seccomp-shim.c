/* bk-seccomp-shim: run a program under a small seccomp filter — a fixture of the escape probes'
 * self-test (tests/escape/selftest.sh), not the sandbox's filter (that is sidecar/seccomp.c).
 *
 * Some attacks are stopped in a boxkite sandbox only by seccomp: personality changes, a foreign
 * syscall ABI, userfaultfd, keyctl, perf_event_open, an unprivileged user namespace. To prove that
 * bk-probe reports those denials as DENIED, the self-test runs it under this shim, which sets
 * no_new_privs, loads the filter below and execs argv[1]. Like the sandbox's filter it kills on a
 * foreign architecture or x32 and answers EPERM (ENOSYS for clone3); io_uring_setup alone kills,
 * so that the probe's "a seccomp kill is DENIED SIGSYS" path is exercised as well.
 *
 * usage: bk-seccomp-shim PROGRAM [ARGS...]
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cleanup.h"

#define LOAD(field) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, field))
#define RET(action) BPF_STMT(BPF_RET | BPF_K, (action))
/* if (A == nr) return action; */
#define ON_SYSCALL(nr, action) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), RET(action)

#define NAMESPACE_FLAGS                                                                            \
	(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | \
	 CLONE_NEWCGROUP)

static struct sock_filter filter[] = {
	LOAD(arch),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
	RET(SECCOMP_RET_KILL_PROCESS),
	LOAD(nr),
	BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, __X32_SYSCALL_BIT, 0, 1),
	RET(SECCOMP_RET_KILL_PROCESS),
	ON_SYSCALL(__NR_io_uring_setup, SECCOMP_RET_KILL_PROCESS),
	ON_SYSCALL(__NR_clone3, SECCOMP_RET_ERRNO | ENOSYS),
	ON_SYSCALL(__NR_personality, SECCOMP_RET_ERRNO | EPERM),
	ON_SYSCALL(__NR_userfaultfd, SECCOMP_RET_ERRNO | EPERM),
	ON_SYSCALL(__NR_perf_event_open, SECCOMP_RET_ERRNO | EPERM),
	ON_SYSCALL(__NR_bpf, SECCOMP_RET_ERRNO | EPERM),
	ON_SYSCALL(__NR_add_key, SECCOMP_RET_ERRNO | EPERM),
	ON_SYSCALL(__NR_keyctl, SECCOMP_RET_ERRNO | EPERM),
	ON_SYSCALL(__NR_unshare, SECCOMP_RET_ERRNO | EPERM),
	ON_SYSCALL(__NR_setns, SECCOMP_RET_ERRNO | EPERM),
	/* clone with a namespace flag (in the low word of its first argument) */
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 3),
	LOAD(args[0]),
	BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, NAMESPACE_FLAGS, 0, 1),
	RET(SECCOMP_RET_ERRNO | EPERM),
	RET(SECCOMP_RET_ALLOW),
};

int main(int argc, char **argv)
{
	struct sock_fprog prog = { .len = BK_ARRAY_SIZE(filter), .filter = filter };

	if (argc < 2) {
		fprintf(stderr, "usage: bk-seccomp-shim PROGRAM [ARGS...]\n");
		return 2;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0) {
		perror("bk-seccomp-shim: seccomp");
		return 2;
	}
	execv(argv[1], argv + 1);
	perror("bk-seccomp-shim: exec");
	return 2;
}
