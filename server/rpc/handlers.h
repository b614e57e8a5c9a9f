/* The rpc handlers, one file per area (health.c, exec.c, files.c, ...). */
#ifndef BK_HANDLERS_H
#define BK_HANDLERS_H

#include "rpc/call.h"

void bk_handle_health(bk_call *call, const ProtobufCMessage *request);

#endif
