/* One protobuf message per SOCK_SEQPACKET packet, with file descriptors attached by
 * SCM_RIGHTS: the framing of the front ↔ executor channel. Below it, the one place that passes
 * descriptors over a socket (the netns pool uses it too). */
#ifndef BK_CHANNEL_H
#define BK_CHANNEL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <protobuf-c/protobuf-c.h>

#define BK_CHANNEL_MAX_MSG (1u << 20)
#define BK_CHANNEL_MAX_FDS 8

/* Send len bytes as one packet with nfds (at most BK_CHANNEL_MAX_FDS) descriptors attached,
 * which stay open here. 0, or -errno (-EMSGSIZE when the packet did not go out whole). */
int bk_fd_send(int sock, const void *buf, size_t len, const int *fds, size_t nfds);

/* Receive one packet of at most size bytes and the descriptors that came with it, close-on-exec:
 * up to max into fds (which may be NULL when max is 0), any beyond closed. flags are recvmsg's
 * (MSG_DONTWAIT). Returns the packet's length (0 at EOF) with *nfds set; -EMSGSIZE when the
 * packet or its descriptors did not fit (none kept); or -errno. */
ssize_t bk_fd_recv(int sock, void *buf, size_t size, int flags, int *fds, size_t max, size_t *nfds);

/* The receiving side keeps one buffer of BK_CHANNEL_MAX_MSG for all its packets. */
typedef struct bk_channel {
	int fd;
	uint8_t *buf;
} bk_channel;

int bk_channel_init(bk_channel *ch, int fd);
void bk_channel_fini(bk_channel *ch); /* frees the buffer and closes fd */

/* Send msg with nfds descriptors (not closed). 0 or -errno. */
int bk_channel_send(int sock, const ProtobufCMessage *msg, const int *fds, size_t nfds);

/* Receive one message of type desc (free with protobuf_c_message_free_unpacked(msg, NULL)) and
 * up to BK_CHANNEL_MAX_FDS descriptors, all marked close-on-exec; fds may be NULL when none are
 * expected, in which case any that arrive are closed. -EPIPE when the peer closed. */
int bk_channel_recv(bk_channel *ch, const ProtobufCMessageDescriptor *desc, ProtobufCMessage **msg, int *fds,
		    size_t *nfds);

#endif
