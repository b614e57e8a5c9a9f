/* Exec: the rpc handler and the I/O thread that feeds commands their stdin, collects their
 * output within limits, enforces the timeout on the server's clock and answers when the
 * command's whole process tree is gone. */
#ifndef BK_EXEC_H
#define BK_EXEC_H

#include "files.h"
#include "link.h"
#include "server.h"

/* What one Exec request may carry: argv (or the shell line) and the environment together, which
 * must fit one order to the executor; and stdin, no more than a file chunk. Its body limit is
 * their sum and room for its other fields (methods.c). */
#define BK_EXEC_STRINGS_MAX (512u << 10)
#define BK_EXEC_STDIN_MAX BK_FILE_CHUNK_MAX

typedef struct bk_execs bk_execs;

int bk_execs_start(bk_server *srv, bk_error **err);
/* Kill what runs, answer its calls CANCELLED, stop the thread. */
void bk_execs_stop(bk_server *srv);

void bk_handle_exec(bk_call *call, const ProtobufCMessage *request);

/* An Exited event from the executor (reader thread). */
void bk_execs_exited(bk_server *srv, const Boxkite__Executor__Exited *exited);

#endif
