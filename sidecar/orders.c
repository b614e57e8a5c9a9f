#include "orders.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

int bk_order_check_none(const bk_roots *roots, const bk_order *o, bk_error **err)
{
	(void)roots;
	(void)o;
	(void)err;
	return 0;
}

int bk_order_check_path(const bk_roots *roots, const char *path, bk_error **err)
{
	char norm[4096];

	if (!path[0])
		return bk_error_invalid(err, "empty path");
	return bk_sandbox_path(roots, path, norm, sizeof(norm), NULL, err);
}

static const bk_order_row *find_row(const bk_order_table *t, Boxkite__Executor__Order__KindCase kind)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->rows[i].kind == kind)
			return &t->rows[i];
	return NULL;
}

int bk_order_decode(const bk_order_table *t, const bk_roots *roots, const uint8_t *buf, size_t len, size_t nfds,
		    bk_order **order, const bk_order_row **row, bk_error **err)
{
	bk_order *o = boxkite__executor__order__unpack(NULL, len, buf);
	const bk_order_row *r;
	int ret;

	*order = NULL;
	*row = NULL;
	if (!o)
		return -EBADMSG;
	/* Only what protobuf-c itself would write: a string with a NUL byte would be acted on up to
	 * the NUL, and an unknown field means a front of another version. */
	if (o->id == 0 || !bk_message_canonical(&o->base, len)) {
		bk_order_free(o);
		return -EBADMSG;
	}
	*order = o;
	r = find_row(t, o->kind_case);
	if (!r)
		return bk_error_invalid(err, "not an order this process serves");
	if (nfds != r->nfds)
		return bk_error_invalid(err, "the wrong number of descriptors for this order");
	if ((ret = r->check(roots, o, err)) < 0)
		return ret;
	*row = r;
	return 0;
}

void bk_order_free(bk_order *o)
{
	if (o)
		boxkite__executor__order__free_unpacked(o, NULL);
}

int bk_answer(bk_channel *ch, bk_reply *reply, const int *fds, size_t nfds)
{
	int ret = bk_channel_send(ch, &reply->base, fds, nfds, BK_CHANNEL_FORCE);

	if (ret == -EMSGSIZE && reply->id)
		return bk_answer_error(ch, reply->id, EMSGSIZE, "reply", "the answer is larger than a channel packet");
	if (ret == -ENOMEM)
		bk_log(BK_LOG_ERROR, "out of memory for an answer to the front");
	else if (ret < 0)
		return ret;
	return 0;
}

int bk_answer_error(bk_channel *ch, uint64_t id, int errnum, const char *step, const char *message)
{
	bk_reply reply = BOXKITE__EXECUTOR__REPLY__INIT;

	reply.id = id;
	reply.errnum = errnum ? errnum : EIO;
	reply.step = (char *)step;
	reply.message = (char *)message;
	return bk_answer(ch, &reply, NULL, 0);
}

int bk_answer_opened(bk_channel *ch, uint64_t id, int fd)
{
	bk_reply reply = BOXKITE__EXECUTOR__REPLY__INIT;
	Boxkite__Executor__Opened opened = BOXKITE__EXECUTOR__OPENED__INIT;

	reply.id = id;
	reply.kind_case = BOXKITE__EXECUTOR__REPLY__KIND_OPENED;
	reply.opened = &opened;
	return bk_answer(ch, &reply, &fd, 1);
}

unsigned bk_orders_events(bk_channel *ch)
{
	size_t queued = bk_channel_queued(ch);

	return (queued < BK_ORDERS_PAUSE_BYTES ? POLLIN : 0) | (queued ? POLLOUT : 0);
}

/* Orders served per wake-up before the rest of the loop gets its turn. */
#define ORDER_BATCH 16

int bk_orders_serve(bk_channel *ch, const bk_order_table *t, const bk_roots *roots, void *server)
{
	for (int i = 0; i < ORDER_BATCH && bk_channel_queued(ch) < BK_ORDERS_PAUSE_BYTES; i++) {
		int fds[BK_CHANNEL_MAX_FDS];
		size_t nfds = 0, len;
		const uint8_t *buf;
		const bk_order_row *row;
		_cleanup_error_ bk_error *err = NULL;
		bk_order *order;
		bool lost = false;
		int ret = bk_channel_recv_raw(ch, &buf, &len, fds, &nfds, &lost);

		if (ret == -EAGAIN)
			return 0;
		if (ret < 0)
			return ret;
		ret = bk_order_decode(t, roots, buf, len, nfds, &order, &row, &err);
		if (ret == 0) {
			ret = row->serve(server, order, fds, nfds);
		} else if (order && lost) {
			/* Out of descriptors here: this order fails, the channel goes on. */
			ret = bk_answer_error(ch, order->id, EMFILE, "order", "its descriptors did not arrive");
		} else if (order) {
			ret = bk_answer_error(ch, order->id, EINVAL, "order", bk_error_msg(err));
		} else {
			/* The two ends no longer agree, and this end never guesses. */
			bk_log(BK_LOG_ERROR, "the front sent a packet that is not an order");
			ret = -EBADMSG;
		}
		for (size_t k = 0; k < nfds; k++)
			close(fds[k]);
		bk_order_free(order);
		if (ret < 0)
			return ret;
	}
	return 0;
}
