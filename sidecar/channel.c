#include "channel.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cleanup.h"

int bk_channel_send(int sock, const ProtobufCMessage *msg, const int *fds, size_t nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * BK_CHANNEL_MAX_FDS)];
		struct cmsghdr align;
	} control;
	size_t len = protobuf_c_message_get_packed_size(msg);
	_cleanup_free_ uint8_t *buf = NULL;
	struct iovec iov;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (len > BK_CHANNEL_MAX_MSG || nfds > BK_CHANNEL_MAX_FDS)
		return -EMSGSIZE;
	buf = malloc(len ? len : 1);
	if (!buf)
		return -ENOMEM;
	protobuf_c_message_pack(msg, buf);
	iov.iov_base = buf;
	iov.iov_len = len;
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
	union {
		char buf[CMSG_SPACE(sizeof(int) * BK_CHANNEL_MAX_FDS)];
		struct cmsghdr align;
	} control;
	uint8_t *buf = ch->buf;
	struct iovec iov = { .iov_base = buf, .iov_len = BK_CHANNEL_MAX_MSG };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
			     .msg_controllen = sizeof(control.buf) };
	size_t got = 0;
	ssize_t n;

	if (nfds)
		*nfds = 0;
	do
		n = recvmsg(ch->fd, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		int *in = (int *)CMSG_DATA(cm);
		for (size_t i = 0; i < k; i++) {
			if (fds && got < BK_CHANNEL_MAX_FDS)
				fds[got++] = in[i];
			else
				close(in[i]);
		}
	}
	if (nfds)
		*nfds = got;
	if (n == 0 && !(mh.msg_flags & MSG_TRUNC))
		goto closed_or_empty;
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
		goto bad;
	*msg = protobuf_c_message_unpack(desc, NULL, (size_t)n, buf);
	if (!*msg)
		goto bad;
	return 0;
closed_or_empty:
	/* A zero-length packet is an empty message on SOCK_SEQPACKET, but EOF looks the same
	 * without ancillary data; the channel never sends empty messages, so treat it as EOF. */
	for (size_t i = 0; i < got; i++)
		close(fds[i]);
	if (nfds)
		*nfds = 0;
	return -EPIPE;
bad:
	for (size_t i = 0; i < got; i++)
		close(fds[i]);
	if (nfds)
		*nfds = 0;
	return -EBADMSG;
}
