#include "boundary/privsep.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "channel.h"

/* The forked child, before the executor's image replaces it: only the channel (as descriptor 3)
 * and stdio cross the execve; no environment. */
__attribute__((noreturn)) static void become_executor(int exe, int channel, pid_t front)
{
	char *const argv[] = { "boxkite-executor", NULL };
	char *const envp[] = { NULL };

	/* Die with the front (the setting survives execve); if it died already, do not start. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != front)
		_exit(127);
	/* Out of the way of descriptor 3 first, then onto it (dup2 clears close-on-exec). */
	exe = fcntl(exe, F_DUPFD_CLOEXEC, BK_EXECUTOR_CHANNEL_FD + 1);
	channel = fcntl(channel, F_DUPFD_CLOEXEC, BK_EXECUTOR_CHANNEL_FD + 1);
	if (exe < 0 || channel < 0 || dup2(channel, BK_EXECUTOR_CHANNEL_FD) < 0)
		_exit(127);
	/* Every descriptor of ours is close-on-exec from birth; one boxkited inherited may not be. */
	if ((exe > BK_EXECUTOR_CHANNEL_FD + 1 && close_range(BK_EXECUTOR_CHANNEL_FD + 1, (unsigned)exe - 1, 0) < 0) ||
	    close_range((unsigned)exe + 1, ~0U, 0) < 0)
		_exit(127);
	fexecve(exe, argv, envp);
	_exit(127);
}

int bk_privsep_start(const bk_config *cfg, int *fd, pid_t *pid, bk_error **err)
{
	_cleanup_close_ int exe = open(cfg->executor_path, O_RDONLY | O_CLOEXEC);
	pid_t front = getpid();
	_cleanup_close_pair_ int sv[2] = BK_FD_PAIR_NONE;
	int ret;

	if (exe < 0)
		return bk_error_errno(err, errno, "cannot open the executor %s (--executor)", cfg->executor_path);
	if ((ret = bk_channel_socketpair(sv)) < 0)
		return bk_error_errno(err, -ret, "the executor's channel");
	*pid = fork();
	if (*pid < 0)
		return bk_error_errno(err, errno, "cannot fork the executor");
	if (*pid == 0)
		become_executor(exe, sv[1], front);
	*fd = TAKE_FD(sv[0]);
	return 0;
}

void bk_privsep_reap(pid_t pid)
{
	if (pid <= 0)
		return;
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}
