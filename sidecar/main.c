/* boxkite-executor: the privileged half of boxkited, executed by it (server/boundary/privsep.c) with its
 * channel as descriptor 3, stdio, an empty environment and no argument — its configuration
 * comes over the channel, as the first order. Not for running by hand. */
#include <stdio.h>
#include <sys/socket.h>

#include "channel.h"
#include "executor.h"

int main(int argc, char **argv)
{
	int type = 0;
	socklen_t len = sizeof(type);

	(void)argv;
	if (argc != 1 || getsockopt(BK_EXECUTOR_CHANNEL_FD, SOL_SOCKET, SO_TYPE, &type, &len) < 0 ||
	    type != SOCK_SEQPACKET) {
		fprintf(stderr, "boxkite-executor: started by boxkited, which hands it its channel as descriptor %d\n",
			BK_EXECUTOR_CHANNEL_FD);
		return 2;
	}
	return bk_executor_main(BK_EXECUTOR_CHANNEL_FD);
}
