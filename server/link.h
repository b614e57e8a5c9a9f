/* The front's end of the executor channel: start the executor, send orders, route replies.
 *
 * Orders go out under a lock from any thread; one reader thread receives replies (matched to
 * their order by id) and events, and runs their callbacks. A callback must not block: it may
 * send further orders. bk_link_call() is the blocking form for start-up and tests. */
#ifndef BK_LINK_H
#define BK_LINK_H

#include <stddef.h>
#include <sys/types.h>

#include "boxkite/executor/order.pb-c.h"
#include "config.h"
#include "error.h"

typedef struct bk_link bk_link;
typedef Boxkite__Executor__Order bk_order;
typedef Boxkite__Executor__Reply bk_reply;

/* Called with the reply and the descriptors that came with it; the callback owns both (free the
 * reply with bk_reply_free). reply is NULL when the executor went away. */
typedef void (*bk_reply_fn)(void *arg, bk_reply *reply, int *fds, size_t nfds);

static inline void bk_reply_free(bk_reply *reply)
{
	if (reply)
		protobuf_c_message_free_unpacked(&reply->base, NULL);
}

/* Events (replies with id 0) go to this callback on the reader thread, with the same ownership
 * rules; a NULL event, last, when the channel has closed. Set it before bk_link_start(). */
void bk_link_on_event(bk_link *link, bk_reply_fn cb, void *arg);

/* Fork the executor (before any thread exists) and start the reader thread later with
 * bk_link_start(), once the process is ready for threads. */
int bk_link_spawn(const bk_config *cfg, bk_link **out, bk_error **err);
int bk_link_start(bk_link *link, bk_error **err);

/* Send an order; cb runs exactly once: on the reader thread when the reply arrives, or with a
 * NULL reply when the order cannot be sent or the executor goes away (then possibly on this
 * thread, before bk_link_send returns). order->id is assigned. */
void bk_link_send(bk_link *link, bk_order *order, const int *fds, size_t nfds, bk_reply_fn cb, void *arg);

/* Send an order and wait for its reply (free with bk_reply_free). */
int bk_link_call(bk_link *link, bk_order *order, bk_reply **reply, int *fds, size_t *nfds, bk_error **err);

/* Close the channel (the executor shuts down), fail what is pending, reap the executor. Orders
 * sent afterwards fail at once (their callback gets NULL): the link stays valid until freed. */
void bk_link_close(bk_link *link);
/* Close if not yet closed, and free. */
void bk_link_free(bk_link *link);

#endif
