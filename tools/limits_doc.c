/* bk-limits-doc: print docs/PROTOCOL.md's limits tables from the server's own constants — its
 * configuration's defaults, the fixed sizes and the dispatch table's rows (server/rpc/methods.c).
 * `make docs` puts the output into PROTOCOL.md; `make test` fails when PROTOCOL.md says
 * something else, so that the spec cannot drift from the code. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "boundary/command.h"
#include "config.h"
#include "envelope.h"
#include "files/files.h"
#include "files/watch.h"
#include "keys.h"
#include "rpc/methods.h"
#include "runs/process.h"
#include "docbytes.h"

int main(void)
{
	char *argv[] = { "bk-limits-doc", "--listen", "inproc://limits-doc", NULL };
	char a[64], b[64];
	bk_config cfg;
	bk_error *err = NULL;

	if (bk_config_parse(&cfg, 3, argv, &err) != 0) {
		fprintf(stderr, "bk-limits-doc: %s\n", bk_error_msg(err));
		return 1;
	}
	printf("Server limits (boxkited's flags, `boxkited --help`), at their defaults:\n\n");
	printf("| what | default | flag | on excess |\n|---|---|---|---|\n");
	printf("| connections at once, authenticated or not | %u | `--max-connections` | one more takes the place of "
	       "one that is neither busy nor keyed, from the source address holding the most; or is closed as it "
	       "arrives |\n",
	       cfg.max_connections);
	printf("| message size (request ID + Envelope) | %s, the largest legal request; it may only be lowered | "
	       "`--max-message` | nng closes the connection; no answer |\n",
	       bytes(cfg.max_message, a, sizeof(a)));
	printf("| memory one request may decode into (its data field aside) | %s (2 × max-message) | `--decode-cap` | "
	       "8 RESOURCE_EXHAUSTED / OVERSIZED |\n",
	       bytes(cfg.decode_cap, a, sizeof(a)));
	printf("| clock skew accepted, each way | %" PRId64 " s | `--window` | 16 UNAUTHENTICATED / STALE or FUTURE |\n",
	       (int64_t)cfg.window_ms / 1000);
	printf("| live nonces remembered | %zu | `--replay-capacity` | 8 RESOURCE_EXHAUSTED / REPLAY_CACHE_FULL |\n",
	       (size_t)cfg.replay_capacity);
	printf("| bytes of answers kept for re-sends | %s | `--replay-answer-cap` | oldest answers dropped; their "
	       "re-sends get REPLAYED |\n",
	       bytes(cfg.replay_answer_cap, a, sizeof(a)));
	printf("| requests served at once | %u | `--contexts` | further requests wait in nng |\n", cfg.contexts);
	printf("| uploads open at once | %u | `--uploads-max` | FileUploadBegin: 8 RESOURCE_EXHAUSTED |\n",
	       cfg.uploads_max);
	printf("| largest file an upload writes | %s | `--file-max` | FileUploadBegin: 8 RESOURCE_EXHAUSTED |\n",
	       bytes(cfg.file_max, a, sizeof(a)));
	printf("| an upload untouched this long is dropped | %" PRId64 " s | `--upload-idle` | its id: 5 NOT_FOUND |\n",
	       (int64_t)cfg.upload_idle_ms / 1000);
	printf("| bytes the workspace may hold, uploads counted | none | `--workspace-quota` | FileUploadBegin: "
	       "8 RESOURCE_EXHAUSTED |\n");
	printf("| an exec's timeout: default, largest asked | %" PRId64 " s, %" PRId64
	       " s | `--exec-timeout`, `--exec-timeout-max` | above the largest: 3 INVALID_ARGUMENT |\n",
	       (int64_t)cfg.exec_timeout_ms / 1000, (int64_t)cfg.exec_timeout_max_ms / 1000);
	printf("| an exec's output kept per stream: default, largest asked | %s, %s | `--exec-output`, "
	       "`--exec-output-max` | past the limit: read and dropped, counted; above the largest: 3 "
	       "INVALID_ARGUMENT |\n",
	       bytes(cfg.exec_output, a, sizeof(a)), bytes(cfg.exec_output_max, b, sizeof(b)));
	printf("| output and stdin buffered for all running execs, each reserving its two streams' limits and its "
	       "stdin when admitted | %s | "
	       "`--exec-output-budget` | Exec: 8 RESOURCE_EXHAUSTED before it runs |\n",
	       bytes(cfg.exec_output_budget, a, sizeof(a)));
	printf("| memory and processes of every exec and process together (their common cgroup) | %s, %u | "
	       "`--sandbox-memory`, `--sandbox-pids` | the OOM killer (`oom_killed`); fork fails |\n",
	       bytes(cfg.sandbox_memory, a, sizeof(a)), cfg.sandbox_pids);
	printf("| background processes kept, running or ended and not removed | %u | `--processes-max` | "
	       "ProcessStart: 8 RESOURCE_EXHAUSTED |\n",
	       cfg.processes_max);
	printf("| a process's ring per stream: default, largest asked | %s, %s | `--process-ring`, "
	       "`--process-ring-max` | above the largest: 3 INVALID_ARGUMENT |\n",
	       bytes(cfg.process_ring, a, sizeof(a)), bytes(cfg.process_ring_max, b, sizeof(b)));
	printf("| ring bytes of all processes kept, two rings each | %s | `--process-ring-budget` | ProcessStart: 8 "
	       "RESOURCE_EXHAUSTED |\n",
	       bytes(cfg.process_ring_budget, a, sizeof(a)));
	printf("| longest a process runs, and the default | none | `--process-runtime-max` | above it: 3 "
	       "INVALID_ARGUMENT; at it: killed, `runtime_exceeded` |\n\n");

	printf("Fixed sizes:\n\n| what | size |\n|---|---|\n");
	printf("| nonce | exactly %d bytes |\n| MAC | exactly %d bytes (longer: MALFORMED; shorter: BAD_MAC) |\n",
	       BK_NONCE_LEN, BK_MAC_LEN);
	printf("| key | %d to %d bytes |\n| key id | 1 to %d characters of `[A-Za-z0-9._-]` |\n", BK_KEY_MIN, BK_KEY_MAX,
	       BK_KEY_ID_MAX);
	printf("| block of the content hash; largest chunk either way (uncompressed) | %s |\n",
	       bytes(BK_FILE_CHUNK_MAX, a, sizeof(a)));
	printf("| chunks of one upload waiting ahead of a gap; how long one waits | %d; %d s |\n", BK_CHUNK_QUEUE_MAX,
	       BK_GAP_WAIT_MS / 1000);
	printf("| reads of a download chunk while its file keeps changing | %d, then 10 ABORTED |\n", BK_READ_TRIES);
	printf("| FileList page: entries by default; most asked | %d; %d |\n", BK_LIST_PAGE_DEFAULT, BK_LIST_PAGE_MAX);
	printf("| Exec: argv entries; environment variables | at most %d; at most %d |\n", BK_EXEC_ARGV_MAX,
	       BK_EXEC_ENV_MAX);
	printf("| Exec: bytes of argv (or shell), and of the environment, a NUL counted per string | at most %s each |\n",
	       bytes(BK_EXEC_STRINGS_MAX, a, sizeof(a)));
	printf("| ProcessRead: bytes per stream by default; most asked | %s; %s |\n", bytes(BK_PROCESS_READ_DEFAULT, a, sizeof(a)),
	       bytes(BK_PROCESS_READ_MAX, b, sizeof(b)));
	printf("| ProcessWrite: bytes per write | at most %s |\n", bytes(BK_PROCESS_WRITE_MAX, a, sizeof(a)));
	printf("| ProcessRead, ProcessWait, a ProcessWrite not taken: longest wait | %d s |\n", BK_PROCESS_WAIT_MAX_MS / 1000);
	printf("| calls waiting (long-polls) at once, beside `--contexts`; past them, the wait to ask again after "
	       "(`retry_after_ms`) | %d; %d s |\n",
	       BK_PARKED_MAX, BK_PROCESS_RETRY_AFTER_MS / 1000);
	printf("| bytes of ProcessRead answers being made and sent, every process together | %s |\n",
	       bytes(BK_PROCESS_ANSWER_BUDGET, a, sizeof(a)));
	printf("| FileWatch: watches of a sandbox at once; the directories they watch together | %d; %d |\n",
	       BK_WATCHES_MAX, BK_WATCH_DIRS_MAX);
	printf("| FileWatch: events a watch keeps for its reader, and their paths' bytes (past either, one "
	       "OVERFLOW event counts the rest) | %d; %s |\n",
	       BK_WATCH_EVENTS_MAX, bytes(BK_WATCH_BYTES_MAX, a, sizeof(a)));
	printf("| FileWatch: events in one answer, by default and at most; their paths' bytes at most | %d; %s |\n",
	       BK_WATCH_READ_MAX, bytes(BK_WATCH_READ_BYTES, a, sizeof(a)));
	printf("| FileWatch: longest wait of a read; a watch no read came for this long expires | %d s; %d s |\n",
	       BK_WATCH_WAIT_MAX_MS / 1000, BK_WATCH_IDLE_MS / 1000);
	printf("| largest legal request Envelope (the largest body, or data, and every other field) | %s |\n\n",
	       bytes(BK_REQUEST_MAX, a, sizeof(a)));

	printf("Per method ([server/rpc/methods.c](../server/rpc/methods.c)): the largest request `body` and `data`, "
	       "larger refused 8 RESOURCE_EXHAUSTED / OVERSIZED before decoding (data to a method that takes "
	       "none: 3 INVALID_ARGUMENT / BAD_BODY); whether it needs a key; whether this server serves it "
	       "(if not: 12 UNIMPLEMENTED, `not implemented yet`, after every check):\n\n");
	printf("| method | max body | max data | needs a key | served |\n|---|---|---|---|---|\n");
	for (size_t i = 0; bk_methods_row(i); i++) {
		const bk_method *m = bk_methods_row(i);
		printf("| %s | %s | %s | %s | %s |\n", m->name, bytes(m->max_body, a, sizeof(a)),
		       bytes(m->max_data, b, sizeof(b)), m->flags & BK_METHOD_UNKEYED ? "no" : "yes", m->handler ? "yes" : "not yet");
	}
	bk_config_free(&cfg);
	return 0;
}
