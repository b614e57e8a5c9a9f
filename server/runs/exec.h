/* Exec: a thin rpc module on the run engine (runs.h). Each Exec is a run whose rings keep the
 * head of stdout and stderr (its limits, reserved from --exec-output-budget with its stdin), whose
 * stdin is the request's, whose timeout is a deadline of the engine's, and which is answered once,
 * with an ExecResponse, when the command's whole process tree is gone; its call waits parked, or
 * the Exec is refused. */
#ifndef BK_EXEC_H
#define BK_EXEC_H

#include "rpc/call.h"

typedef struct bk_execs bk_execs;

/* After bk_runs_start(). */
int bk_execs_start(bk_server *srv, bk_error **err);
/* Kill what runs and answer its calls UNAVAILABLE; Exec refuses from now on. Before the front
 * stops (it waits for every call). */
void bk_execs_stop(bk_server *srv);
/* After bk_runs_stop(): nothing can reach Exec's state any more. */
void bk_execs_free(bk_server *srv);

void bk_handle_exec(bk_call *call, const ProtobufCMessage *request);

#endif
