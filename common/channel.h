/* boxkited's internal channels (front ↔ executor, front ↔ file worker; docs/ARCHITECTURE.md):
 * one protobuf message per SOCK_SEQPACKET packet, file descriptors attached by SCM_RIGHTS — the
 * one module both ends of every channel use.
 *
 * Nothing here ever waits for the peer. bk_channel_send() sends at once when nothing is queued
 * and the socket takes the packet; otherwise it queues it, up to the channel's bound, and the
 * owner's event loop drains the queue with bk_channel_flush() once the socket is writable
 * (bk_channel_queued() > 0: wait for POLLOUT). A sender that finds the queue full gets -ENOBUFS
 * and the packet is not sent: back-pressure is an answer, never a caller blocked while it holds
 * its locks. The queue has a lock of its own, held only across non-blocking calls and never
 * needed to receive; bk_channel_send() and bk_channel_flush() may be called from any thread,
 * receiving from the owner's loop only.
 *
 * Below it, the one place that passes descriptors over a socket (the netns pool uses it too). */
#ifndef BK_CHANNEL_H
#define BK_CHANNEL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <protobuf-c/protobuf-c.h>

#define BK_CHANNEL_MAX_MSG (1u << 20)
#define BK_CHANNEL_MAX_FDS 8
/* What each end's send buffer must hold: a SEQPACKET packet is never larger than its sender's
 * send buffer (~208 KiB by default), and the kernel's bookkeeping takes a share of it. */
#define BK_CHANNEL_SNDBUF ((int)BK_CHANNEL_MAX_MSG + 65536)

/* Send len bytes as one packet with nfds (at most BK_CHANNEL_MAX_FDS) descriptors attached,
 * which stay open here. flags are sendmsg's (MSG_DONTWAIT). 0, or -errno (-EMSGSIZE when the
 * packet did not go out whole). */
int bk_fd_send(int sock, const void *buf, size_t len, const int *fds, size_t nfds, int flags);

/* Receive one packet of at most size bytes and the descriptors that came with it, close-on-exec:
 * up to max into fds (which may be NULL when max is 0), any beyond closed. flags are recvmsg's
 * (MSG_DONTWAIT). Returns the packet's length (0 at EOF) with *nfds set; -EMSGSIZE when the
 * packet did not fit, or its descriptors did not arrive whole and lost is NULL (none kept); with
 * lost, descriptors that did not arrive (the receiver at its descriptor limit) set *lost, keep
 * none, and return the packet: a shortage of descriptors is not a broken peer. Or -errno. */
ssize_t bk_fd_recv(int sock, void *buf, size_t size, int flags, int *fds, size_t max, size_t *nfds, bool *lost);

/* Make both ends of a new channel socketpair able to carry BK_CHANNEL_MAX_MSG (SO_SNDBUFFORCE:
 * the caller needs CAP_NET_ADMIN). sv receives the two close-on-exec ends. 0 or -errno. */
int bk_channel_socketpair(int sv[2]);

/* Where the executor finds its channel: the front puts it there (server/boundary/privsep.c) before it
 * executes boxkite-executor (sidecar/main.c). */
#define BK_EXECUTOR_CHANNEL_FD 3

typedef struct bk_channel_packet bk_channel_packet;

typedef struct bk_channel {
	bool live;              /* set by bk_channel_init, cleared by bk_channel_fini */
	int fd;
	uint8_t *rbuf;          /* BK_CHANNEL_MAX_MSG: the packet last received */
	pthread_mutex_t lock;   /* the queue and `broken` */
	bk_channel_packet *head, *tail;
	size_t queued;          /* bytes waiting in the queue */
	size_t limit;           /* bound on queued bytes for bk_channel_send() without FORCE */
	int broken;             /* 0, or the -errno the socket failed with: nothing goes out any more */
} bk_channel;

/* Take fd (a SOCK_SEQPACKET end) as a channel whose queue holds at most `limit` bytes (SIZE_MAX:
 * no bound, for an end that stops receiving instead). 0 or -ENOMEM (fd is closed then too). */
int bk_channel_init(bk_channel *ch, int fd, size_t limit);
/* Free the queue (closing what it holds) and the buffer, close fd. Accepts a channel that was
 * zeroed and never initialised, or already finished. */
void bk_channel_fini(bk_channel *ch);

/* Queue past the bound: for small messages that must go out whatever the load (an exec's kill,
 * the executor's answers and events, which it bounds by not receiving). */
#define BK_CHANNEL_FORCE 1

/* Send msg with nfds descriptors (the caller's still: a queued packet carries duplicates).
 * Packed here, outside the queue's lock. 0 when sent, 1 when queued (the owner's loop must
 * flush), -ENOBUFS when the queue is full (nothing queued), -EMSGSIZE when msg is larger than
 * BK_CHANNEL_MAX_MSG or empty, -EPIPE (or another -errno) once the socket has failed. */
int bk_channel_send(bk_channel *ch, const ProtobufCMessage *msg, const int *fds, size_t nfds, int flags);

/* Send queued packets while the socket takes them: 0 when the queue is empty, 1 when packets
 * remain (wait for POLLOUT), <0 when the socket failed. */
int bk_channel_flush(bk_channel *ch);

/* Bytes waiting to be sent. */
size_t bk_channel_queued(bk_channel *ch);

/* Whether the socket has failed (nothing goes out any more). */
bool bk_channel_broken(bk_channel *ch);

/* Receive one packet without waiting: 0 with *buf, *len (valid until the next receive) and up to
 * BK_CHANNEL_MAX_FDS close-on-exec descriptors in fds (*nfds; fds may be NULL when none may come,
 * and any that do are closed) — and *lost when descriptors sent with it did not arrive (see
 * bk_fd_recv; lost NULL makes that -EBADMSG); -EAGAIN when nothing waits; -EPIPE when the peer
 * closed; -EBADMSG for a truncated packet; or another -errno. */
int bk_channel_recv_raw(bk_channel *ch, const uint8_t **buf, size_t *len, int *fds, size_t *nfds, bool *lost);

/* Whether m, decoded from len bytes, is what protobuf-c itself would write for it: no unknown
 * field at any depth (protobuf-c keeps and re-encodes them, so the size alone would let a field
 * of another version through in a nested message) and the same length (a string with a NUL
 * byte, acted on up to the NUL, re-encodes shorter). What every end of a channel checks before it
 * acts on a packet. */
bool bk_message_canonical(const ProtobufCMessage *m, size_t len);

/* bk_channel_recv_raw(), then decode the packet as desc (free with
 * protobuf_c_message_free_unpacked(msg, NULL)): -EBADMSG when it does not decode (its
 * descriptors closed). */
int bk_channel_recv(bk_channel *ch, const ProtobufCMessageDescriptor *desc, ProtobufCMessage **msg, int *fds,
		    size_t *nfds, bool *lost);

#endif
