/* The sandbox's seccomp filter (SECURITY.md, "The seccomp filter", is generated from the tables
 * below by bk_seccomp_describe — `make docs`; `make test` fails when it is stale).
 *
 * Two programs, both loaded just before execve, because the kernel runs every filter of a
 * process and keeps the most restrictive answer:
 *
 *  - the allowlist says which system calls exist: the ones ordinary programs use (after
 *    Docker's default profile, moby profiles/seccomp/default.json, narrowed), a few refused with
 *    EPERM by name (kernel surfaces a sandboxed command never needs, so that programs probing
 *    for them get a clean "not permitted"), and every other number answered ENOSYS — what a
 *    kernel too old for the call says, so that libc and runtimes fall back cleanly (clone3 →
 *    clone, openat2 → openat, statx → fstatat) and a syscall a future kernel adds is not
 *    reachable until it is listed here. Another architecture's entry points (i386 through int
 *    0x80, x32) kill the process: the rules are written for x86-64 numbers.
 *  - the argument rules refuse what is dangerous only in its argument: socket families other
 *    than unix, IPv4, IPv6 and route netlink; the terminal ioctls that inject input or change a
 *    line discipline; clone and unshare with a namespace flag; set-id mode bits on files.
 *
 * One program cannot do both: libseccomp lets a syscall's unconditional ALLOW override every
 * conditional rule of that syscall, and takes one comparison per argument per rule, so "ioctl,
 * unless its request is TIOCSTI" is not expressible in an allowlist. As its own filter with ALLOW
 * as the default it is one rule.
 *
 * Both programs are compiled with libseccomp's binary-tree optimizer, which halves the load
 * cost (notes/limits.md §3.3). */
#include "exec/filter.h"

#include <errno.h>
#include <linux/netlink.h>
#include <sched.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"

#if !defined(__x86_64__)
#error "the seccomp filter's tables are written for x86-64 system call numbers"
#endif

struct syscall_group {
	const char *what;
	const char *const *names; /* NULL-terminated */
};

#define NAMES(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* What a sandboxed command may call. */
static const struct syscall_group allowed[] = {
	{ "files and directories",
	  NAMES("open", "openat", "creat", "close", "close_range", "dup", "dup2", "dup3", "fcntl", "flock", "lseek",
		"access", "faccessat", "faccessat2", "chdir", "fchdir", "getcwd", "stat", "fstat", "lstat",
		"newfstatat", "statx", "statfs", "fstatfs", "getdents", "getdents64", "readlink", "readlinkat",
		"chmod", "fchmod", "fchmodat", "chown", "fchown", "fchownat", "lchown", "umask", "utime", "utimes",
		"utimensat", "futimesat", "link", "linkat", "symlink", "symlinkat", "unlink", "unlinkat", "rename",
		"renameat", "renameat2", "mkdir", "mkdirat", "rmdir", "mknod", "mknodat", "truncate", "ftruncate",
		"fallocate", "fadvise64", "readahead", "fsync", "fdatasync", "sync", "syncfs", "sync_file_range",
		"getxattr", "lgetxattr", "fgetxattr", "setxattr", "lsetxattr", "fsetxattr", "listxattr",
		"llistxattr", "flistxattr", "removexattr", "lremovexattr", "fremovexattr", "inotify_init",
		"inotify_init1", "inotify_add_watch", "inotify_rm_watch") },
	{ "reading, writing and waiting",
	  NAMES("read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2",
		"sendfile", "splice", "tee", "vmsplice", "copy_file_range", "ioctl", "pipe", "pipe2", "select",
		"pselect6", "poll", "ppoll", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait",
		"epoll_pwait2", "eventfd", "eventfd2", "signalfd", "signalfd4", "timerfd_create", "timerfd_settime",
		"timerfd_gettime", "io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents",
		"io_pgetevents", "memfd_create") },
	{ "memory",
	  NAMES("brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "mincore", "msync", "mlock", "mlock2",
		"munlock", "mlockall", "munlockall", "remap_file_pages", "membarrier", "pkey_alloc", "pkey_free",
		"pkey_mprotect") },
	{ "processes and threads",
	  NAMES("fork", "vfork", "clone", "unshare", "execve", "execveat", "exit", "exit_group", "wait4", "waitid",
		"kill", "tkill", "tgkill", "pidfd_open", "pidfd_send_signal", "process_mrelease", "getpid",
		"getppid", "gettid", "getpgid", "setpgid", "getpgrp", "getsid", "setsid", "set_tid_address",
		"set_robust_list", "get_robust_list", "futex", "futex_waitv", "rseq", "arch_prctl", "prctl",
		"seccomp", "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self", "capget",
		"capset") },
	{ "scheduling",
	  NAMES("sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getparam", "sched_setparam",
		"sched_getscheduler", "sched_setscheduler", "sched_getattr", "sched_setattr",
		"sched_get_priority_max", "sched_get_priority_min", "sched_rr_get_interval", "getpriority",
		"setpriority", "ioprio_get", "ioprio_set", "getcpu") },
	{ "identity and limits",
	  NAMES("getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups", "setuid", "setgid",
		"setreuid", "setregid", "setresuid", "setresgid", "setfsuid", "setfsgid", "setgroups", "getrlimit",
		"setrlimit", "prlimit64", "getrusage", "times", "sysinfo", "uname") },
	{ "signals",
	  NAMES("rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending", "rt_sigsuspend",
		"rt_sigtimedwait", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "sigaltstack", "pause", "alarm",
		"getitimer", "setitimer", "restart_syscall") },
	{ "time and randomness",
	  NAMES("clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
		"timer_create", "timer_settime", "timer_gettime", "timer_getoverrun", "timer_delete", "getrandom") },
	{ "sockets",
	  NAMES("socket", "socketpair", "bind", "listen", "accept", "accept4", "connect", "getsockname",
		"getpeername", "getsockopt", "setsockopt", "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg",
		"recvmmsg", "shutdown") },
	{ "System V IPC (in the exec's own IPC namespace) and POSIX message queues",
	  NAMES("shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop", "semctl", "msgget", "msgsnd",
		"msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify",
		"mq_getsetattr") },
};

/* Named and refused with EPERM: the kernel surfaces a sandboxed command never needs. */
static const struct syscall_group refused[] = {
	{ "mounts and filesystems", NAMES("mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount",
					  "fspick", "move_mount", "open_tree", "mount_setattr", "quotactl",
					  "quotactl_fd", "fanotify_init", "fanotify_mark") },
	{ "namespaces and the host's identity", NAMES("setns", "sethostname", "setdomainname") },
	{ "kernel programmability and introspection",
	  NAMES("bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
		"lookup_dcookie", "kcmp", "modify_ldt", "iopl", "ioperm") },
	{ "kernel keyrings (shared by every process of a uid)", NAMES("keyctl", "add_key", "request_key") },
	{ "other processes' memory and descriptors",
	  NAMES("ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd") },
	{ "the machine", NAMES("kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
			       "swapon", "swapoff", "acct", "syslog", "vhangup", "uselib") },
	{ "clocks", NAMES("settimeofday", "clock_settime", "clock_adjtime", "adjtimex") },
	{ "handles that bypass path permissions", NAMES("open_by_handle_at", "name_to_handle_at") },
};

/* The file worker's whole filter (fileworker.c): what its file operations, its channel and the C
 * library under them call — no socket, no process, no exec, no namespace, no mount. */
static const struct syscall_group files_allowed[] = {
	{ "files beneath its roots",
	  NAMES("openat", "openat2", "close", "fstat", "newfstatat", "statx", "lseek", "getdents64", "readlinkat",
		"mkdirat", "symlinkat", "unlinkat", "renameat", "renameat2", "linkat", "fchmod",
		"fchmodat", "fcntl") },
	{ "the roots' own attributes, given back as new at a Reset", NAMES("flistxattr", "fremovexattr") },
	{ "watching directories (FileWatch)", NAMES("inotify_init1", "inotify_add_watch", "inotify_rm_watch") },
	{ "its channel", NAMES("sendmsg", "recvmsg", "poll", "ppoll", "write") },
	{ "memory, time and the rest of the C library",
	  NAMES("read", "mmap", "munmap", "mremap", "madvise", "mprotect", "brk", "futex", "rt_sigreturn",
		"rt_sigprocmask", "sigaltstack", "clock_gettime", "getrandom", "getpid", "gettid", "exit",
		"exit_group") },
};

/* personality(2): the query and the plain Linux personas (Docker's set); any change of the
 * execution domain or address-space layout is not a call that exists here. */
static const uint64_t personas[] = { 0x0 /* PER_LINUX */, 0x8 /* PER_LINUX_32BIT */, 0x20000 /* UNAME26 */,
				     0x20008, 0xffffffff /* query */ };

/* What the allowlist answers for every other number. */
#define UNLISTED_ERRNO ENOSYS

/* --- argument rules ------------------------------------------------------------------------- */

static const uint64_t namespace_flags[] = {
	CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP,
	CLONE_NEWTIME,
};

/* The socket families that work; everything else is EAFNOSUPPORT — vsock (which ignores network
 * namespaces), packet, bluetooth, can, xdp, alg, rds and whatever a kernel adds. */
static const int families[] = { AF_UNIX, AF_INET, AF_INET6, AF_NETLINK };

/* ioctl requests refused whatever the host's sysctls say: TIOCSTI pushes bytes into a terminal's
 * input queue (dev.tty.legacy_tiocsti), TIOCLINUX's selection paste does the same on a console,
 * and TIOCSETD attaches a line discipline — kernel code few programs ever reach. The request
 * is compared on its low 32 bits, the kernel's `unsigned int cmd`. */
static const struct {
	const char *name;
	unsigned long request;
} ioctls[] = { { "TIOCSTI", TIOCSTI }, { "TIOCLINUX", TIOCLINUX }, { "TIOCSETD", TIOCSETD } };

/* Calls that set a file's mode, and which argument is the mode. */
static const struct {
	const char *name;
	unsigned arg;
} mode_calls[] = { { "chmod", 1 },  { "fchmod", 1 }, { "fchmodat", 2 }, { "creat", 1 },
		   { "open", 2 },   { "openat", 3 }, { "mknod", 1 },    { "mknodat", 2 } };

static const uint64_t setid_bits[] = { S_ISUID, S_ISGID };

/* The argument rules as SECURITY.md states them. */
static const char *const argument_rules[] = {
	"`socket`: only `AF_UNIX`, `AF_INET`, `AF_INET6`, and `AF_NETLINK` with protocol `NETLINK_ROUTE` (what "
	"getifaddrs and `ip` need); any other family `EAFNOSUPPORT` (vsock, packet, bluetooth, alg, xdp, ...), any "
	"other netlink protocol `EPROTONOSUPPORT`",
	"`ioctl`: `TIOCSTI`, `TIOCLINUX` and `TIOCSETD` `EPERM`, compared on the request's low 32 bits as the "
	"kernel reads it, whatever `dev.tty.legacy_tiocsti` says",
	"`clone`, `unshare`: any namespace flag (`CLONE_NEWNS`, `NEWUTS`, `NEWIPC`, `NEWUSER`, `NEWPID`, `NEWNET`, "
	"`NEWCGROUP`, `NEWTIME`) `EPERM`; `clone3` is not in the allowlist (its flags are in memory, where a filter "
	"cannot read them), so libc falls back to `clone`",
	"`chmod`, `fchmod`, `fchmodat`, `creat`, `open`, `openat`, `mknod`, `mknodat`: a mode with `S_ISUID` or "
	"`S_ISGID` `EPERM` — a set-id file made by the sandbox user would give its uid to whoever runs it outside "
	"the sandbox's nosuid mounts; `openat2` is not in the allowlist (its mode is in memory)",
	"`personality` (in the allowlist, by value): only the query and the plain personas (`0`, `0x8`, "
	"`0x20000`, `0x20008`); any change of execution domain or address-space layout (`ADDR_NO_RANDOMIZE`, "
	"`READ_IMPLIES_EXEC`) is answered like an unlisted call",
};

BK_DEFINE_PTR_CLEANUP(seccomp_releasep, void, seccomp_release)

/* A name of the tables as a syscall number of this architecture; a name libseccomp does not
 * know at all is a typo in the tables, not a kernel difference. */
static int resolve(const char *name, bk_error **err)
{
	int nr = seccomp_syscall_resolve_name(name);

	if (nr == __NR_SCMP_ERROR)
		return bk_error_set(err, BK_INTERNAL, EINVAL, "seccomp: no system call named %s", name);
	return nr;
}

static int add_group_rules(scmp_filter_ctx ctx, const struct syscall_group *groups, size_t n, uint32_t action,
			   bk_error **err)
{
	for (size_t g = 0; g < n; g++) {
		for (const char *const *name = groups[g].names; *name; name++) {
			int nr = resolve(*name, err), rc;
			if (nr < 0)
				return nr;
			if ((rc = seccomp_rule_add(ctx, action, nr, 0)) < 0)
				return bk_error_errno(err, -rc, "seccomp rule for %s", *name);
		}
	}
	return 0;
}

static int allowlist_rules(scmp_filter_ctx ctx, bk_error **err)
{
	int rc;

	if ((rc = add_group_rules(ctx, allowed, BK_ARRAY_SIZE(allowed), SCMP_ACT_ALLOW, err)) < 0 ||
	    (rc = add_group_rules(ctx, refused, BK_ARRAY_SIZE(refused), SCMP_ACT_ERRNO(EPERM), err)) < 0)
		return rc;
	for (size_t i = 0; i < BK_ARRAY_SIZE(personas); i++)
		if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 1,
					   SCMP_A0(SCMP_CMP_EQ, personas[i]))) < 0)
			return bk_error_errno(err, -rc, "seccomp rule for personality");
	return 0;
}

static bool family_allowed(int family)
{
	for (size_t i = 0; i < BK_ARRAY_SIZE(families); i++)
		if (families[i] == family)
			return true;
	return false;
}

/* Refusals only: this program's default is ALLOW, the allowlist decides the rest. Each rule
 * compares one argument once, so the complements are spelled out. */
static int argument_rules_add(scmp_filter_ctx ctx, bk_error **err)
{
	const uint32_t eperm = SCMP_ACT_ERRNO(EPERM), no_family = SCMP_ACT_ERRNO(EAFNOSUPPORT);
	int rc = 0;

	/* socket: the families below AF_MAX one by one, anything above (also a value with high bits
	 * set, which the kernel would truncate to an int) at once. */
	for (int f = 0; f < AF_MAX && rc >= 0; f++)
		if (!family_allowed(f))
			rc = seccomp_rule_add(ctx, no_family, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_EQ, (uint64_t)f));
	if (rc >= 0)
		rc = seccomp_rule_add(ctx, no_family, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_GE, (uint64_t)AF_MAX));
	if (rc >= 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPROTONOSUPPORT), SCMP_SYS(socket), 2,
				      SCMP_A0(SCMP_CMP_EQ, (uint64_t)AF_NETLINK),
				      SCMP_A2(SCMP_CMP_NE, (uint64_t)NETLINK_ROUTE));
	if (rc < 0)
		return bk_error_errno(err, -rc, "seccomp rule for socket families");

	for (size_t i = 0; i < BK_ARRAY_SIZE(ioctls); i++)
		if ((rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(ioctl), 1,
					   SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, ioctls[i].request))) < 0)
			return bk_error_errno(err, -rc, "seccomp rule for ioctl %s", ioctls[i].name);

	/* One rule per flag: rules with the same action are ORed, so any namespace flag refuses. */
	for (size_t i = 0; i < BK_ARRAY_SIZE(namespace_flags); i++) {
		uint64_t f = namespace_flags[i];
		if ((rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, f, f))) < 0 ||
		    (rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(unshare), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, f, f))) < 0)
			return bk_error_errno(err, -rc, "seccomp rule for namespace flag %#llx", (unsigned long long)f);
	}

	for (size_t i = 0; i < BK_ARRAY_SIZE(mode_calls); i++) {
		int nr = resolve(mode_calls[i].name, err);
		if (nr < 0)
			return nr;
		for (size_t b = 0; b < BK_ARRAY_SIZE(setid_bits); b++) {
			struct scmp_arg_cmp cmp = { mode_calls[i].arg, SCMP_CMP_MASKED_EQ, setid_bits[b], setid_bits[b] };
			if ((rc = seccomp_rule_add_array(ctx, eperm, nr, 1, &cmp)) < 0)
				return bk_error_errno(err, -rc, "seccomp rule for %s modes", mode_calls[i].name);
		}
	}
	return 0;
}

/* Export the BPF through a memfd: libseccomp 2.5 exports only to a file descriptor. */
static int export_bpf(scmp_filter_ctx ctx, struct sock_fprog *prog, bk_error **err)
{
	_cleanup_close_ int fd = memfd_create("bk-seccomp", MFD_CLOEXEC);
	off_t size;
	int rc;

	if (fd < 0)
		return bk_error_errno(err, errno, "memfd_create");
	rc = seccomp_export_bpf(ctx, fd);
	if (rc < 0)
		return bk_error_errno(err, -rc, "seccomp_export_bpf");
	size = lseek(fd, 0, SEEK_END);
	if (size <= 0 || size % sizeof(struct sock_filter) || size / sizeof(struct sock_filter) > BPF_MAXINSNS)
		return bk_error_set(err, BK_INTERNAL, EINVAL, "seccomp program has a bad size (%lld bytes)",
				    (long long)size);
	prog->filter = malloc((size_t)size);
	if (!prog->filter)
		return bk_error_errno(err, ENOMEM, "seccomp program");
	prog->len = (unsigned short)(size / sizeof(struct sock_filter));
	if (pread(fd, prog->filter, (size_t)size, 0) != size)
		return bk_error_errno(err, EIO, "reading the exported seccomp program");
	return 0;
}

/* One program: the default action, another architecture killed, the rules, optimized. */
static int build(struct sock_fprog *prog, uint32_t default_action, int (*rules)(scmp_filter_ctx, bk_error **),
		 bk_error **err)
{
	_cleanup_(seccomp_releasep) void *ctx = seccomp_init(default_action);
	int rc;

	if (!ctx)
		return bk_error_set(err, BK_INTERNAL, ENOMEM, "seccomp_init failed");
	/* Only the native architecture is in the filter; anything else (i386, x32) kills. */
	if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)) < 0 ||
	    (rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2)) < 0)
		return bk_error_errno(err, -rc, "seccomp attributes");
	if ((rc = rules(ctx, err)) < 0)
		return rc;
	return export_bpf(ctx, prog, err);
}

static uint32_t fnv1a(uint32_t h, const struct sock_fprog *prog)
{
	const uint8_t *p = (const uint8_t *)prog->filter;

	for (size_t i = 0; i < prog->len * sizeof(struct sock_filter); i++) {
		h ^= p[i];
		h *= 16777619u;
	}
	return h;
}

static int files_rules(scmp_filter_ctx ctx, bk_error **err)
{
	return add_group_rules(ctx, files_allowed, BK_ARRAY_SIZE(files_allowed), SCMP_ACT_ALLOW, err);
}

int bk_seccomp_compile_files(struct sock_fprog *prog, bk_error **err)
{
	int rc;

	memset(prog, 0, sizeof(*prog));
	if ((rc = build(prog, SCMP_ACT_ERRNO(UNLISTED_ERRNO), files_rules, err)) < 0) {
		free(prog->filter);
		memset(prog, 0, sizeof(*prog));
	}
	return rc;
}

int bk_seccomp_compile(bk_seccomp *out, bk_error **err)
{
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = build(&out->allowlist, SCMP_ACT_ERRNO(UNLISTED_ERRNO), allowlist_rules, err)) < 0 ||
	    (rc = build(&out->arguments, SCMP_ACT_ALLOW, argument_rules_add, err)) < 0) {
		bk_seccomp_free(out);
		return rc;
	}
	out->id = fnv1a(fnv1a(2166136261u, &out->allowlist), &out->arguments);
	return 0;
}

void bk_seccomp_free(bk_seccomp *f)
{
	free(f->allowlist.filter);
	free(f->arguments.filter);
	memset(f, 0, sizeof(*f));
}

static void describe_groups(FILE *out, const struct syscall_group *groups, size_t n)
{
	for (size_t g = 0; g < n; g++) {
		fprintf(out, "- *%s:*", groups[g].what);
		for (const char *const *name = groups[g].names; *name; name++)
			fprintf(out, "%s `%s`", name == groups[g].names ? "" : ",", *name);
		fputc('\n', out);
	}
}

void bk_seccomp_describe(FILE *out)
{
	fprintf(out, "Allowed (%s for every other system call; i386 and x32 entry points kill the process):\n\n",
		strerrorname_np(UNLISTED_ERRNO));
	describe_groups(out, allowed, BK_ARRAY_SIZE(allowed));
	fprintf(out, "\nRefused by name with `EPERM`:\n\n");
	describe_groups(out, refused, BK_ARRAY_SIZE(refused));
	fprintf(out, "\nRefused by argument (a second program, whose default is to allow):\n\n");
	for (size_t i = 0; i < BK_ARRAY_SIZE(argument_rules); i++)
		fprintf(out, "- %s.\n", argument_rules[i]);
	fprintf(out, "\nThe file worker's own filter (one program; %s for every other system call, i386 and x32 "
		     "kill):\n\n",
		strerrorname_np(UNLISTED_ERRNO));
	describe_groups(out, files_allowed, BK_ARRAY_SIZE(files_allowed));
}
