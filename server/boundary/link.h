/* The front's end of a channel (common/channel.h) to the executor or to the file worker: orders
 * out, their replies matched back, events in.
 *
 * Any thread may send an order: it is registered in the link's pending table (a lock of its
 * own, held for the table only), packed and sent or queued by the channel without waiting. The
 * link's thread runs the event loop: it drains the queue when the socket is writable and
 * receives, always — replies go to their order's callback, events to the link's event callback,
 * both on the link's thread. A callback must not block; it may send further orders.
 *
 * Every order kind has one row in the link's table of reply decoders (link.c): the reply it
 * expects and how many descriptors come with it. A callback is handed a reply only once it has
 * been checked against that row. */
#ifndef BK_LINK_H
#define BK_LINK_H

#include <stddef.h>
#include <sys/types.h>

#include "boxkite/executor/order.pb-c.h"
#include "error.h"

typedef struct bk_link bk_link;
typedef Boxkite__Executor__Order bk_order;
typedef Boxkite__Executor__Reply bk_reply;

/* An order's end. err 0: reply is the answer its kind expects, with the descriptors that kind
 * carries (the callback owns both). Otherwise the order failed, and the callback owns reply
 * (which may be NULL) but no descriptors: err is the reply's errnum (reply says where and why),
 * or, with reply NULL, EPIPE (the peer went away), EAGAIN (no peer attached yet), ENOBUFS (the
 * channel's queue is full), EPROTO (a reply of the wrong shape), EMSGSIZE or ENOMEM. Runs exactly
 * once, on the link's thread — or on the sender's, before bk_link_send() returns, when the order
 * could not be sent. */
typedef void (*bk_reply_fn)(void *arg, int err, bk_reply *reply, int *fds, size_t nfds);

/* An event (a reply with id 0), owned by the callback with its descriptors; NULL when the
 * channel in use closed. On the link's thread. */
typedef void (*bk_event_fn)(void *arg, bk_reply *event, int *fds, size_t nfds);

static inline void bk_reply_free(bk_reply *reply)
{
	if (reply)
		protobuf_c_message_free_unpacked(&reply->base, NULL);
}

/* Why an order failed, for a message: the peer's own words for an error reply ("message"), or
 * what err means for the channel ("the executor went away"). Valid while reply lives. */
const char *bk_link_why(const bk_link *link, int err, const bk_reply *reply);

/* A link named `name` ("executor", "file worker": in messages). Fails if a kind of Order has no
 * row in the reply decoders' table. */
int bk_link_new(const char *name, bk_event_fn on_event, void *arg, bk_link **out, bk_error **err);

/* Serve the channel on fd (taken). Before bk_link_start(), or later from any thread: then the
 * channel in use is replaced, and what was sent on it fails with EPIPE. */
void bk_link_attach(bk_link *link, int fd);

int bk_link_start(bk_link *link, bk_error **err);

/* Past the queue's bound, for small orders that must go out whatever the load (a timeout's kill, a
 * watch's Unwatch). */
#define BK_LINK_URGENT 1
/* What the front may have queued for one peer: orders are at most BK_CHANNEL_MAX_MSG each and
 * there are at most as many at once as calls in flight; past it an order fails ENOBUFS. */
#define BK_LINK_QUEUE_LIMIT (64u << 20)

/* Send an order with nfds descriptors (the caller's still); order->id is assigned. cb runs
 * exactly once (see bk_reply_fn). */
void bk_link_send(bk_link *link, bk_order *order, const int *fds, size_t nfds, int flags, bk_reply_fn cb,
		  void *arg);

/* Send an order and wait for its checked reply (free with bk_reply_free), up to *nfds
 * descriptors into fds. For start-up and the main thread; never from a link's thread. */
int bk_link_call(bk_link *link, bk_order *order, bk_reply **reply, int *fds, size_t *nfds, bk_error **err);
/* The same, sending nsend descriptors (the caller's still) with the order. */
int bk_link_call_with(bk_link *link, bk_order *order, const int *send, size_t nsend, bk_reply **reply, int *fds,
		      size_t *nfds, bk_error **err);

/* Stop the thread and close the channel; what is pending fails with EPIPE, and so does every
 * order sent afterwards: the link stays valid until freed. */
void bk_link_close(bk_link *link);
/* Close if not yet closed, and free. Accepts NULL. */
void bk_link_free(bk_link *link);

#endif
