/* bk-bounds-doc: print SECURITY.md's table "What any party can make boxkited hold" from the code's
 * own constants and the configuration's defaults, as bk-limits-doc prints PROTOCOL.md's limits:
 * `make docs` puts the output into SECURITY.md and `make test` fails when SECURITY.md says
 * something else. A bound that changes in the code changes the table, or the build's check fails. */
#include <inttypes.h>
#include <stdio.h>

#include "boundary/link.h"
#include "config.h"
#include "egress.h"
#include "exec/child.h"
#include "files/watch.h"
#include "rpc/call.h"
#include "rpc/server.h"
#include "runs/marks.h"
#include "runs/process.h"
#include "sync/store.h"
#include "sync/sync.h"
#include "transport/door.h"
#include "transport/proxy.h"
#include "docbytes.h"

int main(void)
{
	char *argv[] = { "bk-bounds-doc", "--listen", "inproc://bounds-doc", "--http-listen", "http://127.0.0.1:1",
			 "--preview-listen", "http://127.0.0.1:2", NULL };
	char a[64], b[64], c[64];
	bk_config cfg;
	bk_error *err = NULL;

	if (bk_config_parse(&cfg, 7, argv, &err) != 0) {
		fprintf(stderr, "bk-bounds-doc: %s\n", bk_error_msg(err));
		return 1;
	}
	printf("Each row is a resource one party can make the sidecar hold, or a wait it can make the sidecar "
	       "do, and what bounds it (defaults; flags in `boxkited --help`). Who: *anyone* who reaches a "
	       "listener, a *key holder* (a client with the key), the *sandbox* (code running in it), the "
	       "*store* (whoever can write the sync store).\n\n");
	printf("| what | who | bound | beyond it |\n|---|---|---|---|\n");

	printf("| connections to `--listen` | anyone | %u (`--max-connections`) | a new one replaces one that is "
	       "neither busy nor keyed, from the source holding the most; one from that source replaces only its "
	       "own idle %d s, else it is closed |\n",
	       cfg.max_connections, BK_FRONT_SAME_SOURCE_IDLE_MS / 1000);
	printf("| bytes of messages not yet authenticated | anyone | (%u + %d) × %s (connections and those closing, "
	       "each up to `--max-message`), beside one per context being checked | a longer message: the "
	       "connection is closed |\n",
	       cfg.max_connections, BK_FRONT_CLOSING_MAX, bytes(cfg.max_message, a, sizeof(a)));
	printf("| memory one request decodes into | anyone | %s (`--decode-cap`) | 8 RESOURCE_EXHAUSTED |\n",
	       bytes(cfg.decode_cap, a, sizeof(a)));
	printf("| requests served at once; calls waiting (long-polls) beside them | key holder | %u (`--contexts`); "
	       "%d, each up to %d s | further requests wait in nng; past the waiting ones, a read, wait or write "
	       "answers at once with `retry_after_ms` %d (the clients wait that long), an Exec is refused "
	       "RESOURCE_EXHAUSTED: no wait holds a context |\n",
	       cfg.contexts, BK_PARKED_MAX, BK_PROCESS_WAIT_MAX_MS / 1000, BK_PROCESS_RETRY_AFTER_MS);
	printf("| read answers made from the rings and not yet taken by their connection | key holder | %s, every "
	       "process together (a connection writes one answer at a time: at most %u more, one per connection, "
	       "each up to %s) | a read that has its bytes waits for room (or, not waiting, gets none and "
	       "`retry_after_ms`) |\n",
	       bytes(BK_PROCESS_ANSWER_BUDGET, a, sizeof(a)), cfg.max_connections,
	       bytes(2 * (size_t)BK_PROCESS_READ_MAX, b, sizeof(b)));
	printf("| connections to `--http-listen` and to `--preview-listen` | anyone | %d each, a request's head "
	       "%s and %d s to send it (and as long to take the answer) | the oldest is closed for a new one; "
	       "a larger head 431 |\n",
	       BK_DOOR_MAX, bytes(BK_DOOR_HEAD_MAX, a, sizeof(a)), BK_DOOR_WAIT_MS / 1000);
	printf("| preview relays | a preview token's holder | %d, each with a valid token for an exposed port; "
	       "%d s for the port to take the connection; %d min idle | 503; 502 |\n",
	       BK_PROXY_MAX, BK_PROXY_CONNECT_WAIT_MS / 1000, BK_PROXY_IDLE_MS / 60000);
	printf("| descriptors of the front | all of the above | %zu at the defaults (`bk_config_descriptors`: the "
	       "sum of every bound on them), checked against RLIMIT_NOFILE (raised to its hard limit) at start | "
	       "boxkited does not start; a descriptor that still does not arrive fails its one order EMFILE |\n",
	       bk_config_descriptors(&cfg));
	printf("| orders queued for the executor or the file worker | key holder | %s per peer | UNAVAILABLE |\n",
	       bytes(BK_LINK_QUEUE_LIMIT, a, sizeof(a)));
	printf("| nonces remembered; answers kept for re-sends | key holder | %zu; %s (`--replay-capacity`, "
	       "`--replay-answer-cap`) | RESOURCE_EXHAUSTED; oldest answers dropped |\n",
	       cfg.replay_capacity, bytes(cfg.replay_answer_cap, a, sizeof(a)));
	printf("| output and stdin buffered for running execs | key holder | %s (`--exec-output-budget`) | Exec "
	       "refused RESOURCE_EXHAUSTED before it runs |\n",
	       bytes(cfg.exec_output_budget, a, sizeof(a)));
	printf("| background processes; their rings | key holder | %u; %s (`--processes-max`, "
	       "`--process-ring-budget`) | ProcessStart: RESOURCE_EXHAUSTED |\n",
	       cfg.processes_max, bytes(cfg.process_ring_budget, a, sizeof(a)));
	printf("| marks of when each process's output was read (logs' order and times) | sandbox | %d per "
	       "stream, %s (two per process) | older marks merge: coarser order and times |\n",
	       BK_MARKS_MAX, bytes((uint64_t)BK_MARKS_MAX * sizeof(bk_mark), a, sizeof(a)));
	printf("| uploads open; bytes they and pulls add to /workspace | key holder | %u, idle %" PRId64
	       " s (`--uploads-max`, `--upload-idle`); `--workspace-quota` | RESOURCE_EXHAUSTED |\n",
	       cfg.uploads_max, (int64_t)cfg.upload_idle_ms / 1000);
	printf("| watches; the directories they watch (an inotify watch each); the events each keeps for its "
	       "reader | key holder | %d; %d together; %d events and %s of paths each, %d s unread | FileWatch: "
	       "RESOURCE_EXHAUSTED; the watch ends (LIMIT); what comes past it is counted in one OVERFLOW "
	       "event; the watch expires |\n",
	       BK_WATCHES_MAX, BK_WATCH_DIRS_MAX, BK_WATCH_EVENTS_MAX, bytes(BK_WATCH_BYTES_MAX, a, sizeof(a)),
	       BK_WATCH_IDLE_MS / 1000);
	printf("| changes under a watched directory | sandbox | the file worker reads inotify only while the front "
	       "takes what it sends (it pauses as it does for orders); the kernel's queue "
	       "(`fs.inotify.max_queued_events`) holds the rest | an OVERFLOW event (lost: unknown), and the "
	       "worker walks the tree again |\n");
	printf("| memory and processes of every command together | sandbox | %s, %u (`--sandbox-memory`, "
	       "`--sandbox-pids`; each command %s, %u) | the OOM killer; fork fails |\n",
	       bytes(cfg.sandbox_memory, a, sizeof(a)), cfg.sandbox_pids, bytes(cfg.exec_memory, b, sizeof(b)),
	       cfg.exec_pids);
	printf("| pseudo-terminals | sandbox | %d per exec or process, in a devpts of its own | ENOSPC |\n",
	       BK_EXEC_PTYS);
	printf("| connections through the egress proxy | sandbox (an exec granted a destination) | %u per exec "
	       "at once (`--egress-connections`), %d in all; a request head %s (`--egress-header-max`) within %" PRId64
	       " s, and as long to dial (`--egress-connect-timeout`); %" PRId64 " s idle (`--egress-idle`); every "
	       "connection ends with its exec | 503; 431; 408, 502; closed |\n",
	       cfg.egress_connections, BK_EGRESS_CONNS_TOTAL, bytes(cfg.egress_header_max, a, sizeof(a)),
	       (int64_t)cfg.egress_connect_ms / 1000, (int64_t)cfg.egress_idle_ms / 1000);
	printf("| the executor's connect to an exposed port | sandbox | none: begun without waiting, the relay "
	       "waits %d s | 502 |\n",
	       BK_PROXY_CONNECT_WAIT_MS / 1000);
	printf("| a store call | store | %d s all tries together, %d s to connect, %d s without a byte; the answer no "
	       "larger than asked (a manifest %s, a blob one compressed block) | DEADLINE_EXCEEDED; DATA_LOSS |\n",
	       BK_STORE_CALL_MS / 1000, BK_STORE_CONNECT_S, BK_STORE_STALL_S, bytes(BK_MANIFEST_MAX, a, sizeof(a)));
	printf("| a store listing | store | %d names, %d pages, a continuation token never repeated | "
	       "RESOURCE_EXHAUSTED; DATA_LOSS |\n",
	       BK_STORE_LIST_NAMES_MAX, BK_STORE_LIST_PAGES_MAX);
	printf("| a manifest read back | store | stored %s; unpacked at most %d × that and %s; decoded at most %d × "
	       "the unpacked bytes and %s; %d entries — each checked before the step that allocates it | "
	       "DATA_LOSS |\n",
	       bytes(BK_MANIFEST_MAX, a, sizeof(a)), BK_MANIFEST_RATIO, bytes(BK_MANIFEST_PLAIN_MAX, b, sizeof(b)),
	       BK_MANIFEST_DECODE_RATIO, bytes(BK_MANIFEST_DECODED_MAX, c, sizeof(c)), BK_MANIFEST_ENTRIES_MAX);
	printf("| a sync a Reset or the stop waits for | store | none: cancelled at once | the sync's call: "
	       "CANCELLED |\n");
	printf("| boxkited's stop | anyone | %d s (nng's close %d s) | it exits regardless |\n", BK_STOP_MAX_S,
	       BK_FRONT_CLOSE_MS / 1000);
	bk_config_free(&cfg);
	return 0;
}
