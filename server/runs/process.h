/* Background processes: ProcessStart ... ProcessRemove (DESIGN.md §5, docs/PROTOCOL.md
 * "Processes"). Each is an exec of the executor's — the whole isolation, its own PID namespace —
 * that outlives the call that started it: its output goes to two rings read from absolute
 * offsets, its stdin is written call by call, its record stays until removed. One I/O thread
 * reads every process's pipes (or terminal) and keeps the deadlines: long-polls, runtime, leases,
 * kills after a grace. */
#ifndef BK_PROCESS_H
#define BK_PROCESS_H

#include <stdbool.h>
#include <stdint.h>

#include "boundary/link.h"
#include "rpc/call.h"

/* The exec ids of processes have this bit, Exec's never: the executor's Exited events are routed
 * by it. */
#define BK_PROCESS_ID_BIT (UINT64_C(1) << 62)

#define BK_PROCESS_READ_DEFAULT (1u << 20) /* bytes per stream a read returns, unless it asks */
#define BK_PROCESS_READ_MAX (4u << 20)
#define BK_PROCESS_WAIT_MAX_MS 60000 /* longest long-poll: Read, Wait, a Write the process does not take */
#define BK_PROCESS_WRITE_MAX (1u << 20)

typedef struct bk_processes bk_processes;

int bk_processes_start(bk_server *srv, bk_error **err);
/* Kill what runs, answer waiting calls UNAVAILABLE, stop the thread. */
void bk_processes_stop(bk_server *srv);

/* Reset: every process killed (SIGKILL, whole tree) and every record, ring and waiting call
 * gone (answered ABORTED). Returns how many were running. */
unsigned bk_processes_reset(bk_server *srv);

/* Whether a live process exposes port (the preview relay's check). */
bool bk_processes_exposing(bk_server *srv, unsigned port);

/* An Exited event whose id has BK_PROCESS_ID_BIT (the executor link's thread). */
void bk_processes_exited(bk_server *srv, const Boxkite__Executor__Exited *exited);

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
