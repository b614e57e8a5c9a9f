/* A small pool of threads for handler work that blocks (file reads and writes, hashing):
 * nng's callbacks and the executor link's reader must never wait on a disk. */
#ifndef BK_WORKERS_H
#define BK_WORKERS_H

#include "error.h"

typedef struct bk_workers bk_workers;

/* Each worker owns `scratch_size` bytes of scratch memory, allocated once and handed to every
 * job it runs: large transfer buffers are not re-faulted for each request. */
int bk_workers_start(bk_workers **out, unsigned threads, size_t scratch_size, bk_error **err);
/* Run fn(arg, scratch) on a worker. 0, or -ENOMEM / -ESHUTDOWN (fn not called). */
int bk_workers_submit(bk_workers *w, void (*fn)(void *arg, void *scratch), void *arg);
/* Finish what is queued, stop the threads. */
void bk_workers_stop(bk_workers *w);

#endif
