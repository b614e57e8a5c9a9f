/* The privilege split's process boundary, front side: start the executor — its own program
 * image (boxkite-executor, built from sidecar/ and common/), executed afresh from a descriptor
 * opened before the fork, with its own address layout and nothing of the front's memory — on the
 * far end of a new channel, and reap it once the channel has closed. It is started before the
 * front reads its keys, and its configuration goes over the channel (main.c). */
#ifndef BK_PRIVSEP_H
#define BK_PRIVSEP_H

#include <sys/types.h>

#include "config.h"
#include "error.h"

/* Before any thread exists and before the keys are read, as root: the channel (sized for
 * BK_CHANNEL_MAX_MSG, which needs CAP_NET_ADMIN) and the executor (cfg->executor_path) on its far
 * end. *fd: the front's end; *pid: the executor. */
int bk_privsep_start(const bk_config *cfg, int *fd, pid_t *pid, bk_error **err);

/* Wait for the executor to exit (it does once its channel closes). Accepts pid <= 0. */
void bk_privsep_reap(pid_t pid);

#endif
