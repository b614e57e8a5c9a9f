/* Reset: the warm-pool recycle (issue 10, docs/PROTOCOL.md "Reset"). One rpc that kills every
 * command, empties the sandbox's writable places and verifies them, forgets what the front kept
 * of the session, and optionally installs the next tenant's key. While it runs, and for good once
 * one failed, every call but Health is refused. */
#ifndef BK_RESET_H
#define BK_RESET_H

#include <stdbool.h>

#include "rpc/call.h"

/* At start-up, as root: the state directory's tenant-key, opened for later Resets, and the key a
 * past Reset left there, which then is the only key (the key file is not read). */
int bk_reset_init(bk_server *srv, bk_error **err);
/* Wait for a reset running to end (the links are closed first, so it ends soon). */
void bk_reset_stop(bk_server *srv);
void bk_reset_fini(bk_server *srv);

void bk_handle_reset(bk_call *call, const ProtobufCMessage *request);

#endif
