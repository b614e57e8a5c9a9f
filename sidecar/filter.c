/* What the filter does (SECURITY.md, "seccomp"):
 *
 *  - a syscall of another architecture (i386 via int 0x80, x32) kills the process: the rules
 *    below are written for x86-64 numbers and would not hold for another table;
 *  - syscalls that reach kernel surfaces a sandboxed command never needs fail with EPERM —
 *    a clean error helps the programs that probe for features (unshare, io_uring) and costs no
 *    safety: the process has no capabilities for most of them anyway, the filter is the second
 *    layer against a kernel bug behind them;
 *  - clone/unshare with a namespace flag fail with EPERM; clone3 fails with ENOSYS (its flags
 *    live in memory a filter cannot read), so libc falls back to clone, which is checked;
 *  - everything else is allowed.
 * The program is compiled with libseccomp's binary-tree optimizer: it halves the load cost
 * (notes/limits.md §3.3). */
#include "filter.h"

#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cleanup.h"

static const char *const denied_syscalls[] = {
	/* filesystems and mounts, old and new API */
	"mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount",
	"open_tree", "mount_setattr", "quotactl", "quotactl_fd",
	/* namespaces */
	"setns",
	/* kernel programmability and introspection */
	"bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
	"lookup_dcookie", "kcmp",
	/* keys */
	"keyctl", "add_key", "request_key",
	/* other processes' memory */
	"ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd",
	/* the machine */
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot", "swapon",
	"swapoff", "acct", "syslog", "vhangup", "iopl", "ioperm", "uselib", "nfsservctl",
	/* clocks */
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	/* handles that bypass path permissions */
	"open_by_handle_at", "name_to_handle_at",
};

static const uint64_t namespace_flags[] = {
	CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP,
	CLONE_NEWTIME,
};

BK_DEFINE_PTR_CLEANUP(seccomp_releasep, void, seccomp_release)

static int add_rules(scmp_filter_ctx ctx, bk_error **err)
{
	const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
	int rc;

	for (size_t i = 0; i < BK_ARRAY_SIZE(denied_syscalls); i++) {
		int nr = seccomp_syscall_resolve_name(denied_syscalls[i]);
		/* A syscall this libseccomp does not know is not in the kernel's table either. */
		if (nr == __NR_SCMP_ERROR)
			continue;
		rc = seccomp_rule_add(ctx, eperm, nr, 0);
		if (rc < 0)
			return bk_error_errno(err, -rc, "seccomp rule for %s", denied_syscalls[i]);
	}
	/* One rule per flag: rules with the same action are ORed, so any namespace flag denies. */
	for (size_t i = 0; i < BK_ARRAY_SIZE(namespace_flags); i++) {
		uint64_t f = namespace_flags[i];
		if ((rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, f, f))) < 0 ||
		    (rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(unshare), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, f, f))) < 0)
			return bk_error_errno(err, -rc, "seccomp rule for namespace flag %#llx", (unsigned long long)f);
	}
	if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0)) < 0)
		return bk_error_errno(err, -rc, "seccomp rule for clone3");
	/* personality: only the query (0xffffffff) — every change is refused. Two rules because
	 * libseccomp takes one comparison per argument in a rule. */
	if ((rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(personality), 1, SCMP_A0(SCMP_CMP_LT, 0xffffffff))) < 0 ||
	    (rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(personality), 1, SCMP_A0(SCMP_CMP_GT, 0xffffffff))) < 0)
		return bk_error_errno(err, -rc, "seccomp rule for personality");
	return 0;
}

/* Export the BPF through a memfd: libseccomp 2.5 exports only to a file descriptor. */
static int export_bpf(scmp_filter_ctx ctx, bk_seccomp *out, bk_error **err)
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
	out->prog.len = (unsigned short)(size / sizeof(struct sock_filter));
	out->prog.filter = malloc((size_t)size);
	if (!out->prog.filter)
		return bk_error_errno(err, ENOMEM, "seccomp program");
	if (pread(fd, out->prog.filter, (size_t)size, 0) != size) {
		bk_seccomp_free(out);
		return bk_error_errno(err, EIO, "reading the exported seccomp program");
	}
	out->id = 2166136261u;
	for (off_t i = 0; i < size; i++) {
		out->id ^= ((const uint8_t *)out->prog.filter)[i];
		out->id *= 16777619u;
	}
	return 0;
}

int bk_seccomp_compile(bk_seccomp *out, bk_error **err)
{
	_cleanup_(seccomp_releasep) void *ctx = seccomp_init(SCMP_ACT_ALLOW);
	int rc;

	memset(out, 0, sizeof(*out));
	if (!ctx)
		return bk_error_set(err, BK_INTERNAL, ENOMEM, "seccomp_init failed");
	/* Only the native architecture is in the filter; anything else (i386, x32) kills. */
	if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)) < 0 ||
	    (rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2)) < 0)
		return bk_error_errno(err, -rc, "seccomp attributes");
	rc = add_rules(ctx, err);
	if (rc < 0)
		return rc;
	return export_bpf(ctx, out, err);
}

void bk_seccomp_free(bk_seccomp *f)
{
	free(f->prog.filter);
	f->prog.filter = NULL;
	f->prog.len = 0;
}
