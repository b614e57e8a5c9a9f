#include "exec/child.h"

#include <errno.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cleanup.h"
#include "egresspolicy.h"

static const char *const step_names[] = {
	[BOXKITE__EXECUTOR__STEP__STEP_PIDNS] = "new PID namespace",
	[BOXKITE__EXECUTOR__STEP__STEP_LOOPBACK] = "network namespace",
	[BOXKITE__EXECUTOR__STEP__STEP_SETNS_MNT] = "setns(mnt)",
	[BOXKITE__EXECUTOR__STEP__STEP_IPC_NS] = "new IPC namespace",
	[BOXKITE__EXECUTOR__STEP__STEP_SETNS_UTS] = "setns(uts)",
	[BOXKITE__EXECUTOR__STEP__STEP_MOUNT_NS] = "unshare(mnt)",
	[BOXKITE__EXECUTOR__STEP__STEP_MOUNT_PROC] = "mount /proc",
	[BOXKITE__EXECUTOR__STEP__STEP_CHDIR] = "chdir",
	[BOXKITE__EXECUTOR__STEP__STEP_CAPBSET] = "drop bounding set",
	[BOXKITE__EXECUTOR__STEP__STEP_SETGROUPS] = "setgroups",
	[BOXKITE__EXECUTOR__STEP__STEP_SETRESGID] = "setresgid",
	[BOXKITE__EXECUTOR__STEP__STEP_SETRESUID] = "setresuid",
	[BOXKITE__EXECUTOR__STEP__STEP_CAPSET] = "capset",
	[BOXKITE__EXECUTOR__STEP__STEP_NO_NEW_PRIVS] = "no_new_privs",
	[BOXKITE__EXECUTOR__STEP__STEP_PDEATHSIG] = "pdeathsig",
	[BOXKITE__EXECUTOR__STEP__STEP_RLIMIT] = "setrlimit",
	[BOXKITE__EXECUTOR__STEP__STEP_STDIO] = "stdio",
	[BOXKITE__EXECUTOR__STEP__STEP_CLOSE_FDS] = "close fds",
	[BOXKITE__EXECUTOR__STEP__STEP_SIGNALS] = "reset signals",
	[BOXKITE__EXECUTOR__STEP__STEP_SECCOMP] = "seccomp",
	[BOXKITE__EXECUTOR__STEP__STEP_EXECVE] = "execve of boxkite-init",
	[BOXKITE__EXECUTOR__STEP__STEP_SANDBOX_ROOT] = "build sandbox root",
	[BOXKITE__EXECUTOR__STEP__STEP_PIVOT_ROOT] = "pivot_root",
	[BOXKITE__EXECUTOR__STEP__STEP_HOSTNAME] = "sethostname",
	[BOXKITE__EXECUTOR__STEP__STEP_CGROUP_NS] = "new cgroup namespace",
	[BOXKITE__EXECUTOR__STEP__STEP_SESSION] = "setsid",
	[BOXKITE__EXECUTOR__STEP__STEP_TERMINAL] = "terminal",
	[BOXKITE__EXECUTOR__STEP__STEP_MOUNT_DEVPTS] = "mount /dev/pts",
	[BOXKITE__EXECUTOR__STEP__STEP_USERNS] = "join the sandbox's user namespace",
	[BOXKITE__EXECUTOR__STEP__STEP_EGRESS_CA] = "egress CA bundle at " BK_EGRESS_CA_DIR,
	[BOXKITE__EXECUTOR__STEP__STEP_MOUNT_MEMINFO] = "mount /proc/meminfo",
};

/* A step a child can fail at (STEP_NONE is not one). */
static bool step_known(int step)
{
	return step > 0 && (size_t)step < BK_ARRAY_SIZE(step_names) && step_names[step];
}

const char *bk_step_name(int step)
{
	return step_known(step) ? step_names[step] : "unknown step";
}

void bk_child_fail(int report_fd, bk_step step)
{
	struct bk_step_report r = { .step = step, .errnum = errno ? errno : EIO };

	/* Best effort: if the report cannot be written, the parent sees exit status 127 without
	 * a report and says so. */
	if (write(report_fd, &r, sizeof(r)) < 0)
		r.errnum = 0;
	syscall(SYS_exit, 127);
	__builtin_unreachable();
}

int bk_step_report_read(int fd, struct bk_step_report *r, bk_error **err)
{
	ssize_t n;
	int errnum;

	do
		n = read(fd, r, sizeof(*r));
	while (n < 0 && errno == EINTR);
	if (n == (ssize_t)sizeof(*r) && step_known(r->step)) {
		r->errnum = r->errnum > 0 ? r->errnum : EIO;
		return bk_error_errno(err, r->errnum, "%s", bk_step_name(r->step));
	}
	errnum = n < 0 ? errno : EBADMSG;
	*r = (struct bk_step_report){ .step = BOXKITE__EXECUTOR__STEP__STEP_NONE, .errnum = n == 0 ? 0 : errnum };
	return n == 0 ? 0 : bk_error_errno(err, errnum, "no report from the child");
}

uint64_t bk_capbset_read(void)
{
	cap_value_t ncaps = cap_max_bits();
	uint64_t set = 0;

	for (cap_value_t cap = 0; cap < ncaps && cap < 64; cap++)
		if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1)
			set |= BK_CAP(cap);
	return set;
}

uint64_t bk_capbset_all(void)
{
	cap_value_t ncaps = cap_max_bits();

	return ncaps >= 64 ? UINT64_MAX : BK_CAP(ncaps) - 1;
}

bk_step bk_child_keep_caps(uint64_t keep, uint64_t drop)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[2] = {
		{ .effective = (uint32_t)keep, .permitted = (uint32_t)keep },
		{ .effective = (uint32_t)(keep >> 32), .permitted = (uint32_t)(keep >> 32) },
	};

	for (int cap = 0; cap < 64; cap++)
		if ((drop & BK_CAP(cap)) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
			return BOXKITE__EXECUTOR__STEP__STEP_CAPBSET;
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return BOXKITE__EXECUTOR__STEP__STEP_CAPSET;
	/* Raw syscall: glibc has no capset wrapper, and libcap's may allocate. */
	if (syscall(SYS_capset, &hdr, data) < 0)
		return BOXKITE__EXECUTOR__STEP__STEP_CAPSET;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return BOXKITE__EXECUTOR__STEP__STEP_NO_NEW_PRIVS;
	return BOXKITE__EXECUTOR__STEP__STEP_NONE;
}

bk_step bk_child_drop_privileges(const bk_child_creds *c)
{
	/* The bounding set caps what any later execve could ever gain: empty it while we still
	 * hold CAP_SETPCAP, and keep only what the identity change below needs. */
	bk_step failed = bk_child_keep_caps(BK_CAP(CAP_SETUID) | BK_CAP(CAP_SETGID), c->bounding);

	if (failed)
		return failed;
	/* Raw syscalls: glibc's wrappers would signal every thread of the executor, which this
	 * child shares memory with. */
	if (syscall(SYS_setgroups, 0, NULL) < 0)
		return BOXKITE__EXECUTOR__STEP__STEP_SETGROUPS;
	if (syscall(SYS_setresgid, c->gid, c->gid, c->gid) < 0)
		return BOXKITE__EXECUTOR__STEP__STEP_SETRESGID;
	if (syscall(SYS_setresuid, c->uid, c->uid, c->uid) < 0)
		return BOXKITE__EXECUTOR__STEP__STEP_SETRESUID;
	/* Leaving uid 0 cleared permitted and effective, unless securebits said otherwise: the
	 * sets are emptied explicitly, whatever boxkited was started with. */
	failed = bk_child_keep_caps(0, 0);
	if (failed)
		return failed;
	/* The uid change cleared any parent-death signal; set it now, it survives execve. If the
	 * executor dies, its commands die with it rather than run unwatched. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		return BOXKITE__EXECUTOR__STEP__STEP_PDEATHSIG;
	return BOXKITE__EXECUTOR__STEP__STEP_NONE;
}

int bk_child_loopback_up(void)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int ret = -1;

	if (fd < 0)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, "lo", 3);
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		ret = ioctl(fd, SIOCSIFFLAGS, &ifr);
	}
	bk_close(fd);
	return ret;
}

int bk_child_reset_signals(void)
{
	/* Files the command creates get the mode a login shell would give them. */
	umask(022);
	static const int sigs[] = { SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD };
	struct sigaction dfl;
	sigset_t all;

	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	/* glibc's sigaction and sigprocmask are thin wrappers: no locks, no allocation. */
	for (size_t i = 0; i < BK_ARRAY_SIZE(sigs); i++)
		if (sigaction(sigs[i], &dfl, NULL) < 0)
			return -1;
	/* Every signal blocked, across the execve: the init that runs next is PID 1 of a namespace,
	 * and the kernel drops a signal sent to such an init that neither handles nor blocks it. A
	 * SIGTERM sent the moment the spawn is answered (before the init had blocked it itself) was
	 * lost; blocked, it waits for the init, which forwards it once its command runs. */
	sigfillset(&all);
	return sigprocmask(SIG_SETMASK, &all, NULL);
}

int bk_child_close_fds(const int *keep, size_t n)
{
	unsigned int lo = 3;

	/* close_range over each gap between kept descriptors, lowest first. */
	for (;;) {
		unsigned int next = ~0U; /* the lowest kept descriptor at or above lo */

		for (size_t i = 0; i < n; i++)
			if (keep[i] >= (int)lo && (unsigned int)keep[i] < next)
				next = (unsigned int)keep[i];
		if (next == ~0U)
			return (int)syscall(SYS_close_range, lo, ~0U, 0);
		if (next > lo && syscall(SYS_close_range, lo, next - 1, 0) < 0)
			return -1;
		lo = next + 1;
	}
}

int bk_child_seccomp_program(const struct sock_fprog *prog)
{
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, prog);
}

int bk_child_seccomp(const bk_seccomp *filter)
{
	/* The allowlist first: it lets seccomp() through for the second. */
	if (bk_child_seccomp_program(&filter->allowlist) < 0)
		return -1;
	return bk_child_seccomp_program(&filter->arguments);
}
