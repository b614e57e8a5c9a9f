#include "netns.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "cleanup.h"

/* Keep CAP_SYS_ADMIN (to unshare a network namespace) and CAP_NET_ADMIN (to bring its lo up),
 * nothing else, in the bounding set too. */
static int maker_caps(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2];

	for (int cap = 0; cap <= 63; cap++)
		if (cap != CAP_SYS_ADMIN && cap != CAP_NET_ADMIN && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 &&
		    errno != EINVAL)
			return -1;
	memset(data, 0, sizeof(data));
	data[0].effective = data[0].permitted = (1u << CAP_SYS_ADMIN) | (1u << CAP_NET_ADMIN);
	if (syscall(SYS_capset, &hdr, data) < 0)
		return -1;
	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

static int send_fd(int sock, int fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} control;
	char byte = 'n';
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
			     .msg_controllen = sizeof(control.buf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	return sendmsg(sock, &mh, MSG_NOSIGNAL) == 1 ? 0 : -1;
}

/* One credit in, one namespace out, until the executor goes away. */
__attribute__((noreturn)) static void maker_main(int sock)
{
	char credit;

	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	prctl(PR_SET_NAME, "bk-netns", 0, 0, 0);
	/* Refilling the pool is background work: under load the executor comes first (an empty
	 * pool only means the exec makes its own namespace). */
	setpriority(PRIO_PROCESS, 0, BK_SANDBOX_NICE);
	if (maker_caps() < 0)
		_exit(1);
	while (read(sock, &credit, 1) == 1) {
		int fd;

		if (unshare(CLONE_NEWNET) < 0 || bk_child_loopback_up() < 0)
			_exit(1);
		fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
		if (fd < 0 || send_fd(sock, fd) < 0)
			_exit(1);
		bk_close(fd);
	}
	_exit(0);
}

int bk_netns_pool_start(bk_netns_pool *pool, unsigned depth, bk_error **err)
{
	int sv[2];

	pool->maker = 0;
	pool->sock = -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return bk_error_errno(err, errno, "socketpair");
	pool->maker = fork();
	if (pool->maker == 0) {
		/* Nothing of the executor's but its end of the pair. */
		if (dup3(sv[1], 3, 0) < 0)
			_exit(1);
		syscall(SYS_close_range, 4, ~0U, 0);
		maker_main(3);
	}
	bk_close(sv[1]);
	if (pool->maker < 0) {
		bk_close(sv[0]);
		return bk_error_errno(err, errno, "fork the netns maker");
	}
	pool->sock = sv[0];
	for (unsigned i = 0; i < depth; i++)
		if (write(pool->sock, "c", 1) != 1)
			break;
	return 0;
}

int bk_netns_pool_take(bk_netns_pool *pool)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} control;
	char byte;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
			     .msg_controllen = sizeof(control.buf) };
	struct cmsghdr *cm;
	int fd = -1;

	if (pool->sock < 0 || recvmsg(pool->sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) != 1)
		return -1;
	cm = CMSG_FIRSTHDR(&mh);
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS && cm->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	/* One taken, one more to make. */
	if (write(pool->sock, "c", 1) != 1)
		pool->sock = bk_close(pool->sock);
	return fd;
}

void bk_netns_pool_stop(bk_netns_pool *pool)
{
	pool->sock = bk_close(pool->sock);
	if (pool->maker > 0)
		waitpid(pool->maker, NULL, 0);
	pool->maker = 0;
}
