/* Background processes: ProcessStart ... ProcessRemove (DESIGN.md §5, docs/PROTOCOL.md
 * "Processes"), a thin rpc module on the run engine (runs.h). Each is an exec of the executor's —
 * the whole isolation, its own PID namespace — that outlives the call that started it: a run
 * whose rings keep the tail of its output (read from absolute offsets, or lossless: waiting for
 * its readers), whose stdin is written call by call, whose deadlines are its runtime, its lease
 * and a kill after a signal's grace, and whose record stays until removed. */
#ifndef BK_PROCESS_H
#define BK_PROCESS_H

#include <stdbool.h>
#include <stdint.h>

#include "rpc/call.h"

#define BK_PROCESS_READ_DEFAULT (1u << 20) /* bytes per stream a read returns, unless it asks */
#define BK_PROCESS_READ_MAX (4u << 20)
#define BK_PROCESS_WAIT_MAX_MS 60000 /* longest long-poll: Read, Wait, a Write the process does not take */
#define BK_PROCESS_WRITE_MAX (1u << 20)

typedef struct bk_processes bk_processes;

/* After bk_runs_start(). */
int bk_processes_start(bk_server *srv, bk_error **err);
/* Kill what runs, drop every record, answer waiting calls UNAVAILABLE; refuse from now on.
 * Before the front stops (it waits for every call). */
void bk_processes_stop(bk_server *srv);
/* After bk_runs_stop(). */
void bk_processes_free(bk_server *srv);

/* Reset: every process killed (SIGKILL, whole tree) and every record, ring and waiting call
 * gone (answered ABORTED); the next process is p1 again. Returns how many were running. */
unsigned bk_processes_reset(bk_server *srv);

/* Whether a live process exposes port (the preview relay's check). */
bool bk_processes_exposing(bk_server *srv, unsigned port);

void bk_handle_process_start(bk_call *call, const ProtobufCMessage *request);
void bk_handle_process_read(bk_call *call, const ProtobufCMessage *request);
void bk_handle_process_write(bk_call *call, const ProtobufCMessage *request);
void bk_handle_process_close_stdin(bk_call *call, const ProtobufCMessage *request);
void bk_handle_process_signal(bk_call *call, const ProtobufCMessage *request);
void bk_handle_process_wait(bk_call *call, const ProtobufCMessage *request);
void bk_handle_process_resize(bk_call *call, const ProtobufCMessage *request);
void bk_handle_process_list(bk_call *call, const ProtobufCMessage *request);
void bk_handle_process_remove(bk_call *call, const ProtobufCMessage *request);

#endif
