#include "privsep.h"

#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>

#include "channel.h"
#include "executor.h"

int bk_privsep_start(const bk_config *cfg, int *fd, pid_t *pid, bk_error **err)
{
	pid_t front = getpid();
	int sv[2], ret;

	if ((ret = bk_channel_socketpair(sv)) < 0)
		return bk_error_errno(err, -ret, "the executor's channel");
	*pid = fork();
	if (*pid < 0) {
		ret = bk_error_errno(err, errno, "cannot fork the executor");
		bk_close(sv[0]);
		bk_close(sv[1]);
		return ret;
	}
	if (*pid == 0) {
		bk_close(sv[0]);
		_exit(bk_executor_main(sv[1], cfg, front));
	}
	bk_close(sv[1]);
	*fd = sv[0];
	return 0;
}

void bk_privsep_reap(pid_t pid)
{
	if (pid <= 0)
		return;
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}
