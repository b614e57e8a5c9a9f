/* A pool of fresh network namespaces, made ahead of need. Creating a network namespace is the
 * largest single cost of an exec (~0.4-0.5 ms, notes/limits.md §3.2) and is serial in the
 * single-threaded executor; a helper process ("bk-netns") makes them in parallel, each with lo
 * up, and hands each one over exactly once — a namespace from the pool is as fresh as one from
 * CLONE_NEWNET: nothing ever ran in it. When the pool is empty an exec makes its own. */
#ifndef BK_NETNS_H
#define BK_NETNS_H

#include <sys/types.h>

#include "error.h"

typedef struct bk_netns_pool {
	pid_t maker;
	int sock; /* SOCK_SEQPACKET: namespaces come in (SCM_RIGHTS), credits go out */
} bk_netns_pool;

/* Start the maker with `depth` namespaces to make ahead. */
int bk_netns_pool_start(bk_netns_pool *pool, unsigned depth, bk_error **err);
/* A fresh namespace's descriptor, or -1 when none is ready (the caller makes its own). */
int bk_netns_pool_take(bk_netns_pool *pool);
/* A fresh namespace's descriptor, from the pool or, when none is ready, made here (the caller
 * enters it and comes back to self_net: only a single-threaded caller may). -errno on failure. */
int bk_netns_fresh(bk_netns_pool *pool, int self_net);
void bk_netns_pool_stop(bk_netns_pool *pool);

#endif
