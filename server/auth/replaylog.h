/* The replay log: the replay cache's memory across a restart of boxkited, so that the
 * never-twice promise of docs/PROTOCOL.md ("Replay") holds when a captured request is re-sent
 * to a fresh process within its time window.
 *
 * Every request the replay cache accepts is appended (key id, nonce, timestamp) before its
 * handler runs; a request whose record cannot be written is refused, never run unrecorded. At
 * start the records whose timestamp is still inside the window go back into the cache as
 * answered-and-forgotten, so a re-send is refused REPLAYED. Three files in the state directory
 * take turns as the replay cache's three generations do: the current one is appended to for a
 * window, then the next, and a file is emptied only when its turn comes again, two windows after
 * its last record — by then every record in it is out of the window.
 *
 * The records are written with write(2) and not synced: they survive boxkited being killed or
 * crashing (the kernel has them), not a power loss of the machine, whose reboot is in any case
 * longer than the window would need to be (SECURITY.md). Thread-safe. */
#ifndef BK_REPLAYLOG_H
#define BK_REPLAYLOG_H

#include <stdint.h>

#include "auth/replay.h"
#include "envelope.h"
#include "error.h"

typedef struct bk_replay_log bk_replay_log;

/* Open (creating, mode 0600) the log's files in dir and put every record still inside the
 * window of now_ms (wall clock) back into r. */
int bk_replay_log_open(const char *dir, int64_t window_ms, bk_replay *r, int64_t now_ms, bk_replay_log **out,
		       bk_error **err);
void bk_replay_log_free(bk_replay_log *log);

/* Record an accepted request (timestamp ts_ms, the envelope's) at now_ms. 0, or -errno. */
int bk_replay_log_append(bk_replay_log *log, const char *key_id, const uint8_t nonce[BK_NONCE_LEN], int64_t ts_ms,
			 int64_t now_ms);

/* How many records the last open put back (for the log line and tests). */
size_t bk_replay_log_restored(const bk_replay_log *log);

#endif
