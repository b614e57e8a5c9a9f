#include "confine.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <sched.h>
#include <seccomp.h>
#include <stdbool.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cleanup.h"

#if !defined(__x86_64__)
#error "the egress proxy's filter is written for x86-64 system call numbers"
#endif

#define NAMES(...) ((const char *const[]){ __VA_ARGS__, NULL })

struct group {
	const char *what;
	const char *const *names;
};

/* What the proxy calls, unconditionally. */
static const struct group allowed[] = {
	{ "sockets (families and listening below)",
	  NAMES("connect", "accept4", "bind", "getsockopt", "setsockopt", "getsockname", "getpeername", "sendto",
		"recvfrom", "sendmsg", "recvmsg", "sendmmsg", "shutdown") },
	{ "a plain answer spliced from socket to socket", NAMES("pipe2", "splice") },
	{ "waiting", NAMES("poll", "ppoll", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait") },
	{ "reading and writing what is open",
	  NAMES("read", "write", "writev", "pread64", "close", "fstat", "newfstatat", "statx", "lseek", "fcntl", "access",
		"faccessat", "faccessat2") },
	{ "memory", NAMES("mmap", "munmap", "mprotect", "mremap", "madvise", "brk") },
	{ "its own threads",
	  NAMES("futex", "set_robust_list", "rseq", "sched_yield", "sched_getaffinity", "gettid", "getpid", "tgkill",
		"exit", "exit_group", "rt_sigprocmask", "rt_sigreturn", "rt_sigaction", "sigaltstack") },
	{ "time, randomness, identity",
	  NAMES("getrandom", "clock_gettime", "clock_nanosleep", "nanosleep", "gettimeofday", "uname", "getuid",
		"geteuid", "getgid", "getegid") },
};

static const int families[] = { AF_INET, AF_INET6 };

static const char *const argument_rules[] = {
	"`socket`: `AF_INET`, `AF_INET6`, and `AF_NETLINK` with `NETLINK_ROUTE` (the sidecar's own addresses); no "
	"unix, packet or other family (and no raw socket: it holds no capability)",
	"`openat`: read-only (no `O_WRONLY`, `O_RDWR`, `O_CREAT`, `O_TRUNC`, `O_APPEND`, `O_TMPFILE`): the resolver's "
	"and the trust store's files",
	"`clone`: threads only (`CLONE_THREAD`); `clone3`, `fork`, `vfork`, `execve` and `listen` are not in the "
	"filter",
};

BK_DEFINE_PTR_CLEANUP(seccomp_releasep, void, seccomp_release)

static int add_rules(scmp_filter_ctx ctx, bk_error **err)
{
	int rc = 0;

	for (size_t g = 0; g < BK_ARRAY_SIZE(allowed); g++) {
		for (const char *const *name = allowed[g].names; *name; name++) {
			int nr = seccomp_syscall_resolve_name(*name);
			if (nr == __NR_SCMP_ERROR)
				return bk_error_set(err, BK_INTERNAL, EINVAL, "seccomp: no system call named %s", *name);
			if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0)) < 0)
				return bk_error_errno(err, -rc, "seccomp rule for %s", *name);
		}
	}
	for (size_t i = 0; i < BK_ARRAY_SIZE(families) && rc >= 0; i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_EQ, (uint64_t)families[i]));
	if (rc >= 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 2, SCMP_A0(SCMP_CMP_EQ, (uint64_t)AF_NETLINK),
				      SCMP_A2(SCMP_CMP_EQ, (uint64_t)NETLINK_ROUTE));
	if (rc >= 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(openat), 1,
				      SCMP_A2(SCMP_CMP_MASKED_EQ,
					      (uint64_t)(O_ACCMODE | O_CREAT | O_TRUNC | O_APPEND | __O_TMPFILE), 0));
	if (rc >= 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
				      SCMP_A0(SCMP_CMP_MASKED_EQ, (uint64_t)CLONE_THREAD, (uint64_t)CLONE_THREAD));
	return rc < 0 ? bk_error_errno(err, -rc, "seccomp argument rules") : 0;
}

/* No capability in any set, and no way to gain one: what the executor's start-up made of us. */
static int check_unprivileged(bk_error **err)
{
	cap_t caps = cap_get_proc();
	cap_t none = cap_init();
	bool clean = caps && none && cap_compare(caps, none) == 0;

	cap_free(caps);
	cap_free(none);
	if (getuid() == 0 || geteuid() == 0 || getgid() == 0 || getegid() == 0)
		return bk_error_set(err, BK_FAILED_PRECONDITION, EPERM, "started as root: the proxy runs as a user of its own");
	if (!clean)
		return bk_error_set(err, BK_FAILED_PRECONDITION, EPERM, "started with a capability");
	for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
		if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1)
			return bk_error_set(err, BK_FAILED_PRECONDITION, EPERM, "started with a bounding set");
	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
		return bk_error_set(err, BK_FAILED_PRECONDITION, EPERM, "started without no_new_privs");
	return 0;
}

int bk_egress_confine(bk_error **err)
{
	_cleanup_(seccomp_releasep) void *ctx = NULL;
	int rc;

	if ((rc = check_unprivileged(err)) < 0)
		return rc;
	/* Its memory holds the CA's key and the credentials: no process of its uid (there is none
	 * other) or of the sandbox's may read it through /proc or ptrace. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return bk_error_errno(err, errno, "PR_SET_DUMPABLE");
	ctx = seccomp_init(SCMP_ACT_ERRNO(ENOSYS));
	if (!ctx)
		return bk_error_set(err, BK_INTERNAL, ENOMEM, "seccomp_init");
	if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)) < 0 ||
	    (rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2)) < 0)
		return bk_error_errno(err, -rc, "seccomp attributes");
	if ((rc = add_rules(ctx, err)) < 0)
		return rc;
	if ((rc = seccomp_load(ctx)) < 0)
		return bk_error_errno(err, -rc, "loading the proxy's seccomp filter");
	return 0;
}

void bk_egress_filter_describe(FILE *out)
{
	fprintf(out, "The egress proxy's own filter (one program; ENOSYS for every other system call, i386 and x32 "
		     "kill):\n\n");
	for (size_t g = 0; g < BK_ARRAY_SIZE(allowed); g++) {
		fprintf(out, "- *%s:*", allowed[g].what);
		for (const char *const *name = allowed[g].names; *name; name++)
			fprintf(out, "%s `%s`", name == allowed[g].names ? "" : ",", *name);
		fputc('\n', out);
	}
	for (size_t i = 0; i < BK_ARRAY_SIZE(argument_rules); i++)
		fprintf(out, "- %s.\n", argument_rules[i]);
}
