#include "channel.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cleanup.h"

int bk_fd_send(int sock, const void *buf, size_t len, const int *fds, size_t nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * BK_CHANNEL_MAX_FDS)];
		struct cmsghdr align;
	} control;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (nfds > BK_CHANNEL_MAX_FDS)
		return -EMSGSIZE;
	if (nfds) {
		struct cmsghdr *cm;
		memset(&control, 0, sizeof(control));
		mh.msg_control = control.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
	}
	do
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EMSGSIZE;
}

ssize_t bk_fd_recv(int sock, void *buf, size_t size, int flags, int *fds, size_t max, size_t *nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * BK_CHANNEL_MAX_FDS)];
		struct cmsghdr align;
	} control;
	struct iovec iov = { .iov_base = buf, .iov_len = size };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
			     .msg_controllen = sizeof(control.buf) };
	size_t got = 0;
	ssize_t n;

	*nfds = 0;
	do
		n = recvmsg(sock, &mh, flags | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		int *in = (int *)CMSG_DATA(cm);
		for (size_t i = 0; i < k; i++) {
			if (got < max)
				fds[got++] = in[i];
			else
				close(in[i]);
		}
	}
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
		for (size_t i = 0; i < got; i++)
			close(fds[i]);
		return -EMSGSIZE;
	}
	*nfds = got;
	return n;
}

int bk_channel_send(int sock, const ProtobufCMessage *msg, const int *fds, size_t nfds)
{
	size_t len = protobuf_c_message_get_packed_size(msg);
	_cleanup_free_ uint8_t *buf = NULL;

	if (len > BK_CHANNEL_MAX_MSG)
		return -EMSGSIZE;
	buf = malloc(len ? len : 1);
	if (!buf)
		return -ENOMEM;
	protobuf_c_message_pack(msg, buf);
	return bk_fd_send(sock, buf, len, fds, nfds);
}

int bk_channel_init(bk_channel *ch, int fd)
{
	ch->fd = fd;
	ch->buf = malloc(BK_CHANNEL_MAX_MSG);
	return ch->buf ? 0 : -ENOMEM;
}

void bk_channel_fini(bk_channel *ch)
{
	free(ch->buf);
	ch->buf = NULL;
	ch->fd = bk_close(ch->fd);
}

int bk_channel_recv(bk_channel *ch, const ProtobufCMessageDescriptor *desc, ProtobufCMessage **msg, int *fds,
		    size_t *nfds)
{
	size_t got = 0;
	ssize_t n = bk_fd_recv(ch->fd, ch->buf, BK_CHANNEL_MAX_MSG, 0, fds, fds ? BK_CHANNEL_MAX_FDS : 0, &got);

	if (nfds)
		*nfds = 0;
	if (n < 0)
		return n == -EMSGSIZE ? -EBADMSG : (int)n;
	/* A zero-length packet is an empty message on SOCK_SEQPACKET, but EOF looks the same; the
	 * channel never sends empty messages, so it is EOF. */
	*msg = n ? protobuf_c_message_unpack(desc, NULL, (size_t)n, ch->buf) : NULL;
	if (!*msg) {
		for (size_t i = 0; i < got; i++)
			close(fds[i]);
		return n ? -EBADMSG : -EPIPE;
	}
	if (nfds)
		*nfds = got;
	return 0;
}
