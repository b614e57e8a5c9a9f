#include "executor.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "boxkite/executor/order.pb-c.h"
#include "channel.h"

typedef Boxkite__Executor__Order order_t;
typedef Boxkite__Executor__Reply reply_t;

struct executor {
	bk_channel ch;
	const bk_config *cfg;
};

static void order_ping(struct executor *ex, const order_t *order, reply_t *reply, Boxkite__Executor__Pong *pong)
{
	(void)ex;
	(void)order;
	pong->sandbox_ready = false;
	pong->mode = "none";
	reply->kind_case = BOXKITE__EXECUTOR__REPLY__KIND_PONG;
	reply->pong = pong;
}

/* Serve one order. Unknown kinds are refused: the executor does only what it knows. */
static int serve(struct executor *ex, const order_t *order)
{
	reply_t reply = BOXKITE__EXECUTOR__REPLY__INIT;
	Boxkite__Executor__Pong pong = BOXKITE__EXECUTOR__PONG__INIT;

	reply.id = order->id;
	switch (order->kind_case) {
	case BOXKITE__EXECUTOR__ORDER__KIND_PING:
		order_ping(ex, order, &reply, &pong);
		break;
	default:
		reply.errnum = EINVAL;
		reply.step = "order";
		reply.message = "unknown order";
		break;
	}
	return bk_channel_send(ex->ch.fd, &reply.base, NULL, 0);
}

int bk_executor_main(int sock, const bk_config *cfg, pid_t front)
{
	struct executor ex = { .cfg = cfg };
	int status;

	/* Die with the front: nothing privileged outlives the process that talks to clients. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != front || bk_channel_init(&ex.ch, sock) < 0)
		return 1;
	for (;;) {
		order_t *order = NULL;
		int ret = bk_channel_recv(&ex.ch, &boxkite__executor__order__descriptor, (ProtobufCMessage **)&order,
					  NULL, NULL);
		if (ret < 0) {
			/* EPIPE: the front closed the channel, shut down. Anything else is a broken
			 * channel, and the executor never guesses. */
			status = ret == -EPIPE ? 0 : 1;
			break;
		}
		ret = serve(&ex, order);
		protobuf_c_message_free_unpacked(&order->base, NULL);
		if (ret < 0) {
			status = 1;
			break;
		}
	}
	bk_channel_fini(&ex.ch);
	return status;
}
