#include "exec/userns.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/securebits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "fullio.h"

/* The helper that creates the namespace, and so owns it: the executor's fork, with its euid set
 * to the owner. NO_SETUID_FIXUP keeps its capabilities across that change, so that making the
 * namespace does not depend on unprivileged user namespaces being allowed. It waits, with the
 * namespace, until the executor has written its maps and opened it. */
__attribute__((noreturn)) static void helper(uid_t owner, int ready, int done)
{
	char c;

	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (prctl(PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP, 0, 0, 0) < 0 || setresuid(-1, owner, -1) < 0 ||
	    unshare(CLONE_NEWUSER) < 0) {
		int errnum = errno;
		(void)!write(ready, &errnum, sizeof(errnum));
		_exit(1);
	}
	(void)!write(ready, &(int){ 0 }, sizeof(int));
	(void)!read(done, &c, 1);
	_exit(0);
}

/* Every id to itself — but root's where the executor may not map it (mapping uid 0 takes
 * CAP_SETFCAP, which a pod's sidecar need not have): then root's files show as nobody's inside. */
static int write_map(pid_t pid, const char *which)
{
	static const char all[] = "0 0 4294967295\n", but_root[] = "1 1 4294967294\n";
	char path[64];
	_cleanup_close_ int fd = -1;
	int ret;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, which);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = bk_write_full(fd, (const uint8_t *)all, sizeof(all) - 1);
	if (ret == -EPERM)
		ret = bk_write_full(fd, (const uint8_t *)but_root, sizeof(but_root) - 1);
	return ret;
}

int bk_userns_make(uid_t *owner, bk_error **err)
{
	_cleanup_close_pair_ int ready[2] = BK_FD_PAIR_NONE, done[2] = BK_FD_PAIR_NONE;
	uint32_t r;
	int errnum = 0, fd = -1, ret;
	char path[64];
	pid_t pid;

	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return bk_error_errno(err, errno ? errno : EIO, "the user namespace's owner");
	*owner = BK_USERNS_OWNER_BASE | (r & 0x3fffffff);
	if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(done, O_CLOEXEC) < 0)
		return bk_error_errno(err, errno, "the user namespace's helper");
	pid = fork();
	if (pid < 0)
		return bk_error_errno(err, errno, "the user namespace's helper");
	if (pid == 0)
		helper(*owner, ready[1], done[0]);
	ready[1] = bk_close(ready[1]);
	if (read(ready[0], &errnum, sizeof(errnum)) != (ssize_t)sizeof(errnum))
		errnum = EIO;
	if (errnum) {
		ret = bk_error_errno(err, errnum, "cannot make a user namespace");
		goto out;
	}
	if ((ret = write_map(pid, "uid_map")) < 0 || (ret = write_map(pid, "gid_map")) < 0) {
		ret = bk_error_errno(err, -ret, "cannot map the ids in the sandbox's user namespace");
		goto out;
	}
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	ret = fd < 0 ? bk_error_errno(err, errno, "cannot open the sandbox's user namespace") : fd;
out:
	/* A byte, not the end of the pipe: the helper, a fork, holds that end too. */
	(void)!write(done[1], "x", 1);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	return ret;
}
