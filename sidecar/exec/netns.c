#include "exec/netns.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "channel.h"
#include "cleanup.h"
#include "exec/child.h"
#include "log.h"

/* One credit in, one namespace out, until the executor goes away. */
__attribute__((noreturn)) static void maker_main(int sock, uint64_t bounding)
{
	char credit;

	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	prctl(PR_SET_NAME, "bk-netns", 0, 0, 0);
	/* Refilling the pool is background work: under load the executor comes first (an empty
	 * pool only means the exec makes its own namespace). */
	setpriority(PRIO_PROCESS, 0, BK_SANDBOX_NICE);
	/* CAP_SYS_ADMIN to unshare a network namespace, CAP_NET_ADMIN to bring its lo up: nothing
	 * else, and nothing in the bounding set (it never execs). */
	if (bk_child_keep_caps(BK_CAP(CAP_SYS_ADMIN) | BK_CAP(CAP_NET_ADMIN), bounding))
		_exit(1);
	while (read(sock, &credit, 1) == 1) {
		int fd;

		if (unshare(CLONE_NEWNET) < 0 || bk_child_loopback_up() < 0)
			_exit(1);
		fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
		if (fd < 0 || bk_fd_send(sock, "n", 1, &fd, 1, 0) < 0)
			_exit(1);
		bk_close(fd);
	}
	_exit(0);
}

int bk_netns_pool_start(bk_netns_pool *pool, unsigned depth, bk_error **err)
{
	uint64_t bounding = bk_capbset_read();
	_cleanup_close_pair_ int sv[2] = BK_FD_PAIR_NONE;

	pool->maker = 0;
	pool->sock = -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return bk_error_errno(err, errno, "socketpair");
	pool->maker = fork();
	if (pool->maker == 0) {
		/* Nothing of the executor's but its end of the pair. */
		if (bk_child_close_fds(&sv[1], 1) < 0)
			_exit(1);
		maker_main(sv[1], bounding);
	}
	if (pool->maker < 0)
		return bk_error_errno(err, errno, "fork the netns maker");
	pool->sock = TAKE_FD(sv[0]);
	for (unsigned i = 0; i < depth; i++)
		if (write(pool->sock, "c", 1) != 1)
			break;
	return 0;
}

int bk_netns_pool_take(bk_netns_pool *pool)
{
	char byte;
	int fd = -1;
	size_t nfds;

	/* fd stays -1 if a packet came without one. */
	if (pool->sock < 0 || bk_fd_recv(pool->sock, &byte, 1, MSG_DONTWAIT, &fd, 1, &nfds, NULL) != 1)
		return -1;
	/* One taken, one more to make. */
	if (write(pool->sock, "c", 1) != 1)
		pool->sock = bk_close(pool->sock);
	return fd;
}

int bk_netns_fresh(bk_netns_pool *pool, int self_net)
{
	int fd = bk_netns_pool_take(pool), errnum;

	if (fd >= 0)
		return fd;
	if (unshare(CLONE_NEWNET) < 0)
		return -errno;
	fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	errnum = fd < 0 ? errno : bk_child_loopback_up() < 0 ? errno : 0;
	if (setns(self_net, CLONE_NEWNET) < 0) {
		/* Everything made next would be in that namespace. */
		bk_log(BK_LOG_ERROR, "executor: cannot return to its own network namespace: %s", strerror(errno));
		abort();
	}
	if (errnum) {
		bk_close(fd);
		return -errnum;
	}
	return fd;
}

void bk_netns_pool_stop(bk_netns_pool *pool)
{
	pool->sock = bk_close(pool->sock);
	if (pool->maker > 0)
		waitpid(pool->maker, NULL, 0);
	pool->maker = 0;
}
