/* The orders a process on the far side of a channel serves, as a table: one row per order kind,
 * with the descriptors an order of that kind carries, the check of its typed fields and the
 * function that serves it. The executor has its table (executor.c), the file worker its own
 * (fileworker.c); bk_order_decode() is the one way a packet from the front becomes an order, so
 * that nothing the front sends reaches a serving function unchecked. It is what
 * tests/fuzz/fuzz_order.c fuzzes. */
#ifndef BK_ORDERS_H
#define BK_ORDERS_H

#include <stddef.h>
#include <stdint.h>

#include "boxkite/executor/order.pb-c.h"
#include "channel.h"
#include "error.h"
#include "sbpath.h"

typedef Boxkite__Executor__Order bk_order;
typedef Boxkite__Executor__Reply bk_reply;

typedef struct bk_order_row {
	Boxkite__Executor__Order__KindCase kind;
	size_t nfds;        /* descriptors an order of this kind comes with, exactly */
	/* 0 when the fields are fine; otherwise -EINVAL, *err saying why (bk_error_invalid).
	 * roots: where paths may point. */
	int (*check)(const bk_roots *roots, const bk_order *o, bk_error **err);
	/* Serve it: 0, or <0 when the channel broke (the process ends). */
	int (*serve)(void *server, const bk_order *o, int *fds, size_t nfds);
} bk_order_row;

typedef struct bk_order_table {
	const bk_order_row *rows;
	size_t n;
} bk_order_table;

/* Decode a packet of len bytes that came with nfds descriptors: a canonically encoded Order
 * (re-encoded, it is len bytes: no NUL inside a string, no unknown field), a nonzero id, a kind
 * of this table with exactly its descriptors, and fields its check accepts. Returns
 *   0        *order (free with bk_order_free) and *row set: serve it;
 *   -EINVAL  a well-formed Order refused: *order set, answer its id with *err's message;
 *   -EBADMSG not an Order at all: nothing to answer, the channel is broken. */
int bk_order_decode(const bk_order_table *t, const bk_roots *roots, const uint8_t *buf, size_t len, size_t nfds,
		    bk_order **order, const bk_order_row **row, bk_error **err);

void bk_order_free(bk_order *o);

/* --- serving ---------------------------------------------------------------------------------

 * One loop for each process that serves a table (the executor, the file worker): wait for what
 * bk_orders_events() says, flush the channel when writable, bk_orders_serve() when readable.
 * Answers are queued without a bound and never waited for; instead, with BK_ORDERS_PAUSE_BYTES
 * waiting to go out no order is read until the front has taken some (it always reads). Each
 * order adds at most one answer, so the queue stays near that bound. */
#define BK_ORDERS_PAUSE_BYTES (4u << 20)

/* The poll(2)/epoll events to wait for on the channel now: input while answers waiting are
 * few, output while any wait. */
unsigned bk_orders_events(bk_channel *ch);

/* Serve the orders waiting, a batch at a time: decoded, checked, served by their row's
 * function with `server`, a refused one answered EINVAL. 0; -EPIPE when the front closed the
 * channel; another -errno when it broke or sent what is not an Order. */
int bk_orders_serve(bk_channel *ch, const bk_order_table *t, const bk_roots *roots, void *server);

/* Send an answer or event: sent, or queued for the loop. An answer too large for one packet
 * fails its order (EMSGSIZE) instead. 0, or <0 once the channel is broken. */
int bk_answer(bk_channel *ch, bk_reply *reply, const int *fds, size_t nfds);
/* An order answered Opened with the descriptor fd (which stays the caller's). */
int bk_answer_opened(bk_channel *ch, uint64_t id, int fd);
/* An order failed at `step`: errnum (EIO if 0) and a message. */
int bk_answer_error(bk_channel *ch, uint64_t id, int errnum, const char *step, const char *message);

/* The checks rows share. */
int bk_order_check_none(const bk_roots *roots, const bk_order *o, bk_error **err);
/* A path inside a root, as sbpath.h normalizes it ("" refused). */
int bk_order_check_path(const bk_roots *roots, const char *path, bk_error **err);

#endif
