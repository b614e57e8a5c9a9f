/* The privilege split's process boundary, front side: start the executor on the far end of a
 * new channel, and reap it once the channel has closed. */
#ifndef BK_PRIVSEP_H
#define BK_PRIVSEP_H

#include <sys/types.h>

#include "config.h"
#include "error.h"

/* Before any thread exists, as root: the channel (sized for BK_CHANNEL_MAX_MSG, which needs
 * CAP_NET_ADMIN) and the executor on its far end. *fd: the front's end; *pid: the executor. */
int bk_privsep_start(const bk_config *cfg, int *fd, pid_t *pid, bk_error **err);

/* Wait for the executor to exit (it does once its channel closes). Accepts pid <= 0. */
void bk_privsep_reap(pid_t pid);

#endif
