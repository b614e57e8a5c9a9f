/* The executor: the privileged, single-threaded half of boxkited (docs/ARCHITECTURE.md). It is
 * forked by the front before any thread exists, serves typed orders on one SOCK_SEQPACKET
 * socket and is the only code that holds capabilities. */
#ifndef BK_EXECUTOR_H
#define BK_EXECUTOR_H

#include <sys/types.h>

#include "config.h"
#include "orders.h"

/* The orders the executor serves, one row each (executor.c). */
extern const bk_order_table bk_executor_orders;

/* Run the executor's order loop on sock until the front (pid `front`, its parent) goes away.
 * Returns the exit status. */
int bk_executor_main(int sock, const bk_config *cfg, pid_t front);

#endif
