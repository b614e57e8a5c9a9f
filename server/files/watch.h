/* FileWatch (docs/PROTOCOL.md, "FileWatch"): the front's half of watching a directory. The file
 * worker watches (sidecar/files/watcher.c) and sends what changed as Changes events; here each
 * watch keeps its events for its reader, numbered, until a read with a later cursor says they
 * were received — so that a reader whose answer was lost reads them again —, within its bounds
 * (watchbounds.h: past them one OVERFLOW event counts what was not kept). A read that finds
 * nothing waits (parked: it holds none of the front's receiving contexts) until an event, the
 * watch's end or its deadline. A watch nobody reads for BK_WATCH_IDLE_MS goes; Reset ends every
 * watch, and a cursor of the session before says so.
 *
 * A cursor is SESSION.WATCH.SEQ: a random number drawn at start and at each Reset (so that a
 * cursor of the last tenant never names a watch of the next, and no count carries over), the
 * watch's number in that session, and the number of the next event to read. */
#ifndef BK_WATCH_H
#define BK_WATCH_H

#include "boundary/link.h"
#include "rpc/call.h"
#include "watchbounds.h"

typedef struct bk_watches bk_watches;

/* The longest a read waits; a watch no read came for this long after its last answer goes. The
 * same tokens as boxkite.h's: a file that includes both fails to build if they ever differ. */
#define BK_WATCH_WAIT_MAX_MS 60000u
#define BK_WATCH_IDLE_MS 60000u

int bk_watches_start(bk_server *srv, bk_error **err);
/* Answer every waiting read (UNAVAILABLE), drop every watch and stop the timer: calls that come
 * later are answered UNAVAILABLE. Before the transport stops; bk_watches_free() after it. */
void bk_watches_stop(bk_server *srv);
void bk_watches_free(bk_server *srv);

/* The file worker's Changes event (its link's thread). */
void bk_watches_changes(bk_server *srv, const Boxkite__Executor__Changes *changes);
/* The file worker's channel closed: what it watched is gone (WATCH_END_EXPIRED). */
void bk_watches_worker_lost(bk_server *srv);
/* A Reset: every watch ends (its reads told WATCH_END_RESET), a new session begins. The file
 * worker drops its instances at the Wipe. */
void bk_watches_reset(bk_server *srv);

void bk_handle_file_watch(bk_call *call, const ProtobufCMessage *request);

#endif
