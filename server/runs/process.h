/* Background processes: ProcessStart ... ProcessRemove (DESIGN.md §5, docs/PROTOCOL.md
 * "Processes"), a thin rpc module on the run engine (runs.h). Each is an exec of the executor's —
 * the whole isolation, its own PID namespace — that outlives the call that started it: a run
 * whose rings keep the tail of its output (read from absolute offsets, or lossless: waiting for
 * its readers), whose stdin is written call by call, whose deadlines are its runtime, its lease
 * and a kill after a signal's grace, and whose record stays until removed. Its id ("p1") names it
 * in one epoch (random, new at the start and at each Reset), which a call may give: a call of
 * another epoch is NOT_FOUND, so that no client acts on another boxkited's or tenant's p1. */
#ifndef BK_PROCESS_H
#define BK_PROCESS_H

#include <stdbool.h>
#include <stdint.h>

#include "rpc/call.h"

#define BK_PROCESS_READ_DEFAULT (1u << 20) /* bytes per stream a read returns, unless it asks */
#define BK_PROCESS_READ_MAX (4u << 20)
#define BK_PROCESS_WAIT_MAX_MS 60000 /* longest long-poll: Read, Wait, a Write the process does not take */
#define BK_PROCESS_WRITE_MAX (1u << 20)
/* What a call that wanted to wait and could not (every place for a waiting call taken, or no room
 * for its answer yet) is told to wait before its next (retry_after_ms). */
#define BK_PROCESS_RETRY_AFTER_MS 1000
/* Bytes of read answers made and not yet taken by their connection, all processes together: a
 * write that wakes every reader of a process makes their answers within it, not one copy each at
 * once (two hundred readers of a 1 MiB write took 200 MiB). At least two of the largest answers. */
#define BK_PROCESS_ANSWER_BUDGET (16u << 20)

typedef struct bk_processes bk_processes;

/* After bk_runs_start(). */
int bk_processes_start(bk_server *srv, bk_error **err);
/* Kill what runs, drop every record, answer waiting calls UNAVAILABLE; refuse from now on.
 * Before the front stops (it waits for every call). */
void bk_processes_stop(bk_server *srv);
/* After bk_runs_stop(). */
void bk_processes_free(bk_server *srv);

/* A reset begins (before its KillAll): every process running now is the reset's to kill, and a
 * call waiting on one is answered ABORTED — now, and whenever one would be answered until the
 * reset drops it — not with the end the kill gives it. */
void bk_processes_reset_begin(bk_server *srv);
/* Reset (after its KillAll): every record, ring and waiting call gone — a call waiting on a
 * process that ended before the reset is answered its end, any other ABORTED; the next process is
 * p1 again, of a new epoch. Returns how many were running. */
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
