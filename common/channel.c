#include "channel.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cleanup.h"

struct bk_channel_packet {
	bk_channel_packet *next;
	size_t len, nfds;
	int fds[BK_CHANNEL_MAX_FDS]; /* duplicates, owned by the packet */
	uint8_t data[];
};

int bk_fd_send(int sock, const void *buf, size_t len, const int *fds, size_t nfds, int flags)
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
		n = sendmsg(sock, &mh, MSG_NOSIGNAL | flags);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	return (size_t)n == len ? 0 : -EMSGSIZE;
}

ssize_t bk_fd_recv(int sock, void *buf, size_t size, int flags, int *fds, size_t max, size_t *nfds, bool *lost)
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
	if (lost)
		*lost = false;
	do
		n = recvmsg(sock, &mh, flags | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
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
	/* Descriptors that did not arrive (MSG_CTRUNC: the receiver had no descriptor to spare, or
	 * more came than fit) lose nothing of the packet itself: a caller that can tell its peer so
	 * gets the packet and *lost. A packet cut short (MSG_TRUNC) is not one. */
	if ((mh.msg_flags & MSG_TRUNC) || ((mh.msg_flags & MSG_CTRUNC) && !lost)) {
		for (size_t i = 0; i < got; i++)
			close(fds[i]);
		return -EMSGSIZE;
	}
	if (mh.msg_flags & MSG_CTRUNC) {
		for (size_t i = 0; i < got; i++)
			close(fds[i]);
		*lost = true;
		return n;
	}
	*nfds = got;
	return n;
}

int bk_channel_socketpair(int sv[2])
{
	int size = BK_CHANNEL_SNDBUF;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	/* FORCE: above net.core.wmem_max, which is what a SEQPACKET packet's size is bounded by;
	 * the kernel doubles the value for its bookkeeping. */
	for (int i = 0; i < 2; i++) {
		if (setsockopt(sv[i], SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)) < 0) {
			int ret = -errno;
			bk_close_pair(sv);
			return ret;
		}
	}
	return 0;
}

int bk_channel_init(bk_channel *ch, int fd, size_t limit)
{
	memset(ch, 0, sizeof(*ch));
	ch->fd = -1;
	ch->rbuf = malloc(BK_CHANNEL_MAX_MSG);
	if (!ch->rbuf) {
		bk_close(fd);
		return -ENOMEM;
	}
	ch->fd = fd;
	ch->limit = limit;
	pthread_mutex_init(&ch->lock, NULL);
	ch->live = true;
	return 0;
}

static void packet_free(bk_channel_packet *p)
{
	for (size_t i = 0; i < p->nfds; i++)
		bk_close(p->fds[i]);
	free(p);
}

void bk_channel_fini(bk_channel *ch)
{
	if (!ch->live)
		return;
	while (ch->head) {
		bk_channel_packet *next = ch->head->next;
		packet_free(ch->head);
		ch->head = next;
	}
	ch->tail = NULL;
	ch->queued = 0;
	free(ch->rbuf);
	ch->rbuf = NULL;
	pthread_mutex_destroy(&ch->lock);
	ch->fd = bk_close(ch->fd);
	ch->live = false;
}

/* A send error that ends the channel, rather than this one packet. */
static bool socket_failed(int ret)
{
	return ret != -EAGAIN && ret != -EMSGSIZE && ret != -ENOMEM && ret != -ENOBUFS;
}

int bk_channel_send(bk_channel *ch, const ProtobufCMessage *msg, const int *fds, size_t nfds, int flags)
{
	size_t len = protobuf_c_message_get_packed_size(msg);
	bk_channel_packet *p;
	int ret;

	/* An empty packet reads as EOF on SOCK_SEQPACKET: a channel never sends one. */
	if (len == 0 || len > BK_CHANNEL_MAX_MSG || nfds > BK_CHANNEL_MAX_FDS)
		return -EMSGSIZE;
	p = malloc(sizeof(*p) + len);
	if (!p)
		return -ENOMEM;
	p->next = NULL;
	p->len = len;
	p->nfds = 0;
	protobuf_c_message_pack(msg, p->data);

	pthread_mutex_lock(&ch->lock);
	if (ch->broken) {
		ret = ch->broken;
		goto out;
	}
	/* Straight out when nothing waits before it (packets keep their order). */
	if (!ch->head) {
		ret = bk_fd_send(ch->fd, p->data, len, fds, nfds, MSG_DONTWAIT);
		if (ret != -EAGAIN) {
			if (ret < 0 && socket_failed(ret))
				ch->broken = ret;
			goto out;
		}
	}
	if (!(flags & BK_CHANNEL_FORCE) && ch->queued + len > ch->limit) {
		ret = -ENOBUFS;
		goto out;
	}
	/* The caller keeps its descriptors: the packet holds duplicates until it is sent. */
	for (; p->nfds < nfds; p->nfds++) {
		p->fds[p->nfds] = fcntl(fds[p->nfds], F_DUPFD_CLOEXEC, 3);
		if (p->fds[p->nfds] < 0) {
			ret = -errno;
			goto out;
		}
	}
	if (ch->tail)
		ch->tail->next = p;
	else
		ch->head = p;
	ch->tail = p;
	ch->queued += len;
	p = NULL;
	ret = 1;
out:
	pthread_mutex_unlock(&ch->lock);
	if (p)
		packet_free(p);
	return ret;
}

int bk_channel_flush(bk_channel *ch)
{
	int ret;

	pthread_mutex_lock(&ch->lock);
	while (ch->head && !ch->broken) {
		bk_channel_packet *p = ch->head;

		ret = bk_fd_send(ch->fd, p->data, p->len, p->fds, p->nfds, MSG_DONTWAIT);
		if (ret == -EAGAIN)
			break;
		/* A packet accepted into the queue that cannot go out (its answer would never come)
		 * ends the channel, like a failed socket. */
		if (ret < 0) {
			ch->broken = ret;
			break;
		}
		ch->head = p->next;
		if (!ch->head)
			ch->tail = NULL;
		ch->queued -= p->len;
		packet_free(p);
	}
	ret = ch->broken ? ch->broken : ch->head ? 1 : 0;
	pthread_mutex_unlock(&ch->lock);
	return ret;
}

size_t bk_channel_queued(bk_channel *ch)
{
	size_t n;

	pthread_mutex_lock(&ch->lock);
	n = ch->queued;
	pthread_mutex_unlock(&ch->lock);
	return n;
}

bool bk_channel_broken(bk_channel *ch)
{
	bool broken;

	pthread_mutex_lock(&ch->lock);
	broken = ch->broken != 0;
	pthread_mutex_unlock(&ch->lock);
	return broken;
}

int bk_channel_recv_raw(bk_channel *ch, const uint8_t **buf, size_t *len, int *fds, size_t *nfds, bool *lost)
{
	size_t got = 0;
	ssize_t n = bk_fd_recv(ch->fd, ch->rbuf, BK_CHANNEL_MAX_MSG, MSG_DONTWAIT, fds, fds ? BK_CHANNEL_MAX_FDS : 0,
			       &got, lost);

	if (nfds)
		*nfds = 0;
	if (n < 0)
		return n == -EMSGSIZE ? -EBADMSG : (int)n;
	/* A zero-length packet is an empty message on SOCK_SEQPACKET, but EOF looks the same; the
	 * channel never sends empty packets, so it is EOF. */
	if (n == 0) {
		for (size_t i = 0; i < got; i++)
			close(fds[i]);
		return -EPIPE;
	}
	*buf = ch->rbuf;
	*len = (size_t)n;
	if (nfds)
		*nfds = got;
	return 0;
}

int bk_channel_recv(bk_channel *ch, const ProtobufCMessageDescriptor *desc, ProtobufCMessage **msg, int *fds,
		    size_t *nfds, bool *lost)
{
	const uint8_t *buf = NULL;
	size_t len = 0, got = 0;
	int ret = bk_channel_recv_raw(ch, &buf, &len, fds, &got, lost);

	if (nfds)
		*nfds = 0;
	if (ret < 0)
		return ret;
	*msg = protobuf_c_message_unpack(desc, NULL, len, buf);
	if (!*msg) {
		for (size_t i = 0; i < got; i++)
			close(fds[i]);
		return -EBADMSG;
	}
	if (nfds)
		*nfds = got;
	return 0;
}

static bool known_fields_only(const ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;

	if (m->n_unknown_fields)
		return false;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const char *at = (const char *)m + f->offset;

		if (f->type != PROTOBUF_C_TYPE_MESSAGE)
			continue;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(const size_t *)((const char *)m + f->quantifier_offset);
			const ProtobufCMessage *const *v = *(const ProtobufCMessage *const *const *)at;
			for (size_t k = 0; k < n; k++)
				if (!known_fields_only(v[k]))
					return false;
			continue;
		}
		if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
		    *(const uint32_t *)((const char *)m + f->quantifier_offset) != f->id)
			continue;
		if (*(const ProtobufCMessage *const *)at && !known_fields_only(*(const ProtobufCMessage *const *)at))
			return false;
	}
	return true;
}

bool bk_message_canonical(const ProtobufCMessage *m, size_t len)
{
	return known_fields_only(m) && protobuf_c_message_get_packed_size(m) == len;
}
