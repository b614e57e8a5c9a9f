/* bk-seccomp-shim: run a program under a small seccomp filter — a fixture of the escape probes'
 * self-test (tests/escape/selftest.sh), not the sandbox's filter (that is sidecar/exec/filter.c, and
 * deliberately not shared: the self-test proves that bk-probe reads a refusal right, whoever
 * refuses).
 *
 * Some attacks are stopped in a boxkite sandbox only by seccomp: personality changes, a foreign
 * syscall ABI, userfaultfd, keyctl, perf_event_open, an unprivileged user namespace, vsock and
 * other socket families, TIOCSTI on one's own terminal, set-id modes, modify_ldt, calls an
 * allowlist leaves out. To prove that bk-probe reports those denials as DENIED, the self-test
 * runs it under this shim, which sets no_new_privs, loads the filter below and execs argv[1].
 * Like the sandbox's filter it kills on a foreign architecture or x32; io_uring_setup alone
 * kills, so that the probe's "a seccomp kill is DENIED SIGSYS" path is exercised as well.
 *
 * usage: bk-seccomp-shim PROGRAM [ARGS...]
 */
#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"

#define EPERM_ACT SCMP_ACT_ERRNO(EPERM)

static const int eperm_calls[] = { SCMP_SYS(personality), SCMP_SYS(userfaultfd), SCMP_SYS(perf_event_open),
				   SCMP_SYS(bpf), SCMP_SYS(add_key), SCMP_SYS(keyctl), SCMP_SYS(unshare),
				   SCMP_SYS(setns), SCMP_SYS(modify_ldt) };
static const int enosys_calls[] = { SCMP_SYS(clone3), SCMP_SYS(get_mempolicy), SCMP_SYS(openat2), SCMP_SYS(mbind) };
static const uint64_t namespace_flags = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID |
					CLONE_NEWNET | CLONE_NEWCGROUP;
/* syscall, index of its mode argument */
static const int mode_calls[][2] = { { SCMP_SYS(chmod), 1 },  { SCMP_SYS(fchmod), 1 }, { SCMP_SYS(fchmodat), 2 },
				     { SCMP_SYS(open), 2 },   { SCMP_SYS(openat), 3 }, { SCMP_SYS(creat), 1 },
				     { SCMP_SYS(mknod), 1 },  { SCMP_SYS(mknodat), 2 } };

static int rules(scmp_filter_ctx ctx)
{
	int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);

	rc = rc ?: seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, SCMP_SYS(io_uring_setup), 0);
	for (size_t i = 0; i < BK_ARRAY_SIZE(eperm_calls); i++)
		rc = rc ?: seccomp_rule_add(ctx, EPERM_ACT, eperm_calls[i], 0);
	for (size_t i = 0; i < BK_ARRAY_SIZE(enosys_calls); i++)
		rc = rc ?: seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), enosys_calls[i], 0);
	for (int bit = 0; bit < 64; bit++)
		if (namespace_flags & (UINT64_C(1) << bit))
			rc = rc ?: seccomp_rule_add(ctx, EPERM_ACT, SCMP_SYS(clone), 1,
						    SCMP_A0(SCMP_CMP_MASKED_EQ, UINT64_C(1) << bit, UINT64_C(1) << bit));
	/* socket: anything but unix, inet and inet6 (netlink: route only) is EAFNOSUPPORT. */
	for (int f = 0; f < AF_MAX; f++)
		if (f != AF_UNIX && f != AF_INET && f != AF_INET6 && f != AF_NETLINK)
			rc = rc ?: seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
						    SCMP_A0(SCMP_CMP_EQ, (uint64_t)f));
	rc = rc ?: seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
				    SCMP_A0(SCMP_CMP_GE, (uint64_t)AF_MAX));
	rc = rc ?: seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPROTONOSUPPORT), SCMP_SYS(socket), 2,
				    SCMP_A0(SCMP_CMP_EQ, (uint64_t)AF_NETLINK), SCMP_A2(SCMP_CMP_NE, 0));
	rc = rc ?: seccomp_rule_add(ctx, EPERM_ACT, SCMP_SYS(ioctl), 1, SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI));
	rc = rc ?: seccomp_rule_add(ctx, EPERM_ACT, SCMP_SYS(ioctl), 1, SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSETD));
	for (size_t i = 0; i < BK_ARRAY_SIZE(mode_calls); i++) {
		struct scmp_arg_cmp uid = { (unsigned)mode_calls[i][1], SCMP_CMP_MASKED_EQ, S_ISUID, S_ISUID };
		struct scmp_arg_cmp gid = { (unsigned)mode_calls[i][1], SCMP_CMP_MASKED_EQ, S_ISGID, S_ISGID };
		rc = rc ?: seccomp_rule_add_array(ctx, EPERM_ACT, mode_calls[i][0], 1, &uid);
		rc = rc ?: seccomp_rule_add_array(ctx, EPERM_ACT, mode_calls[i][0], 1, &gid);
	}
	return rc ?: seccomp_load(ctx);
}

int main(int argc, char **argv)
{
	scmp_filter_ctx ctx;

	if (argc < 2) {
		fprintf(stderr, "usage: bk-seccomp-shim PROGRAM [ARGS...]\n");
		return 2;
	}
	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx || rules(ctx) < 0) {
		fprintf(stderr, "bk-seccomp-shim: cannot load the filter\n");
		return 2;
	}
	seccomp_release(ctx);
	execv(argv[1], argv + 1);
	perror("bk-seccomp-shim: exec");
	return 2;
}
