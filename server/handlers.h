/* The rpc handlers, one file per area (health.c, exec.c, files.c, ...). */
#ifndef BK_HANDLERS_H
#define BK_HANDLERS_H

#include "server.h"

int bk_methods_init(bk_server *srv, bk_error **err);

void bk_handle_health(bk_call *call, const ProtobufCMessage *request);

#endif
