#include "child.h"

#include <errno.h>
#include <linux/capability.h>
#include <linux/close_range.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cleanup.h"

static const char *const step_names[BK_STEP_MAX] = {
	[BK_STEP_NONE] = "none",
	[BK_STEP_PIDNS] = "new PID namespace",
	[BK_STEP_LOOPBACK] = "network namespace",
	[BK_STEP_SETNS_MNT] = "setns(mnt)",
	[BK_STEP_SETNS_IPC] = "setns(ipc)",
	[BK_STEP_SETNS_UTS] = "setns(uts)",
	[BK_STEP_MOUNT_NS] = "unshare(mnt)",
	[BK_STEP_MOUNT_PROC] = "mount /proc",
	[BK_STEP_CHDIR] = "chdir",
	[BK_STEP_CAPBSET] = "drop bounding set",
	[BK_STEP_SETGROUPS] = "setgroups",
	[BK_STEP_SETRESGID] = "setresgid",
	[BK_STEP_SETRESUID] = "setresuid",
	[BK_STEP_CAPSET] = "capset",
	[BK_STEP_NO_NEW_PRIVS] = "no_new_privs",
	[BK_STEP_PDEATHSIG] = "pdeathsig",
	[BK_STEP_RLIMIT] = "setrlimit",
	[BK_STEP_STDIO] = "stdio",
	[BK_STEP_CLOSE_FDS] = "close fds",
	[BK_STEP_SIGNALS] = "reset signals",
	[BK_STEP_SECCOMP] = "seccomp",
	[BK_STEP_EXECVE] = "execve",
	[BK_STEP_SANDBOX_ROOT] = "build sandbox root",
	[BK_STEP_PIVOT_ROOT] = "pivot_root",
	[BK_STEP_HOSTNAME] = "sethostname",
};

const char *bk_step_name(int step)
{
	if (step <= 0 || step >= BK_STEP_MAX || !step_names[step])
		return "unknown step";
	return step_names[step];
}

void bk_child_fail(int report_fd, enum bk_step step)
{
	struct bk_step_report r = { .step = step, .errnum = errno ? errno : EIO };

	/* Best effort: if the report cannot be written, the parent sees exit status 127 without
	 * a report and says so. */
	if (write(report_fd, &r, sizeof(r)) < 0)
		r.errnum = 0;
	syscall(SYS_exit, 127);
	__builtin_unreachable();
}

int bk_step_report_read(int fd, struct bk_step_report *r)
{
	ssize_t n;

	do
		n = read(fd, r, sizeof(*r));
	while (n < 0 && errno == EINTR);
	if (n == 0)
		return 0;
	if (n != (ssize_t)sizeof(*r) || r->step <= 0 || r->step >= BK_STEP_MAX)
		return n < 0 ? -errno : -EBADMSG;
	return 1;
}

enum bk_step bk_child_drop_privileges(const bk_child_creds *c)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[2];

	/* The bounding set caps what any later execve could ever gain: empty it while we still
	 * hold CAP_SETPCAP. */
	for (int cap = 0; cap <= c->last_cap; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return BK_STEP_CAPBSET;
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return BK_STEP_CAPBSET;
	/* Raw syscalls: glibc's wrappers would signal every thread of the executor, which this
	 * child shares memory with. */
	if (syscall(SYS_setgroups, 0, NULL) < 0)
		return BK_STEP_SETGROUPS;
	if (syscall(SYS_setresgid, c->gid, c->gid, c->gid) < 0)
		return BK_STEP_SETRESGID;
	if (syscall(SYS_setresuid, c->uid, c->uid, c->uid) < 0)
		return BK_STEP_SETRESUID;
	/* setresuid away from 0 cleared permitted and effective; inheritable stays: clear all. */
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capset, &hdr, data) < 0)
		return BK_STEP_CAPSET;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return BK_STEP_NO_NEW_PRIVS;
	/* The uid change cleared any parent-death signal; set it now, it survives execve. If the
	 * executor dies, its commands die with it rather than run unwatched. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		return BK_STEP_PDEATHSIG;
	return BK_STEP_NONE;
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
	sigset_t none;

	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	/* glibc's sigaction and sigprocmask are thin wrappers: no locks, no allocation. */
	for (size_t i = 0; i < BK_ARRAY_SIZE(sigs); i++)
		if (sigaction(sigs[i], &dfl, NULL) < 0)
			return -1;
	sigemptyset(&none);
	return sigprocmask(SIG_SETMASK, &none, NULL);
}

int bk_child_close_fds(int keep_fd)
{
	if (keep_fd > 3 && syscall(SYS_close_range, 3, keep_fd - 1, 0) < 0)
		return -1;
	return (int)syscall(SYS_close_range, keep_fd + 1, ~0U, 0);
}

int bk_child_seccomp(const struct sock_fprog *prog)
{
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, prog);
}
