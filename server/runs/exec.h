/* Exec: the rpc handler and the I/O thread that feeds commands their stdin, collects their
 * output within limits, enforces the timeout on the server's clock and answers when the
 * command's whole process tree is gone. */
#ifndef BK_EXEC_H
#define BK_EXEC_H

#include "boundary/link.h"
#include "rpc/call.h"

typedef struct bk_execs bk_execs;

int bk_execs_start(bk_server *srv, bk_error **err);
/* Kill what runs, answer its calls CANCELLED, stop the thread. */
void bk_execs_stop(bk_server *srv);

void bk_handle_exec(bk_call *call, const ProtobufCMessage *request);

/* An Exited event from the executor (reader thread). */
void bk_execs_exited(bk_server *srv, const Boxkite__Executor__Exited *exited);

#endif
