/* The executor: the privileged, single-threaded half of boxkited (docs/ARCHITECTURE.md), its own
 * program image (boxkite-executor, sidecar/main.c), executed afresh by the front. It serves typed
 * orders on one SOCK_SEQPACKET channel and is the only code that holds capabilities; its whole
 * configuration is the channel's first order (Configure). */
#ifndef BK_EXECUTOR_H
#define BK_EXECUTOR_H

#include "orders.h"

/* The orders the executor serves, one row each (executor.c); and the one it takes first
 * (Configure: its row's serve is NULL, the executor takes it itself). */
extern const bk_order_table bk_executor_orders;
extern const bk_order_table bk_executor_first_order;

/* Take Configure from the channel on sock, set up, serve orders until the front goes away.
 * Returns the exit status. */
int bk_executor_main(int sock);

#endif
