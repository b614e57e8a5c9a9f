/* Sync (issue 13): snapshots of a tree of the sandbox (the workspace by default) pushed to a
 * store (store.h) and pulled back, content-addressed by the transfer path's block hashes.
 *
 * A push walks the tree through the file worker (List and OpenRead orders: the sandbox user's
 * view, nothing privileged walks it), takes each file's block hashes from the file index when
 * its version is known there (fileindex.h: not read at all) and reads and hashes it otherwise,
 * uploads the blocks the store does not have (a set of the blobs known to be in each store
 * makes the check free after the first), and writes the manifest last, after a barrier. A file
 * whose version moves while it is read is read again, and after BK_SYNC_READ_TRIES the push
 * fails ABORTED naming it: nothing is ever stored torn.
 *
 * A pull checks the whole manifest first, then writes each file as uploads do — an unnamed file
 * made by the file worker, filled here with blocks whose hashes are checked, committed by the
 * file worker with its mode in one rename — so a blob that is missing or corrupt fails the pull
 * with that file as it was. Directories and contained symlinks are made; with mirror, what the
 * manifest lacks is removed.
 *
 * One sync runs at a time, on a thread of its own; SyncStatus reads its progress.
 *
 * Snapshots belong to a tenant: what a request names is under its key's store prefix
 * (store.h, bk_store_url_scope), and only the operator's --restore-from names a store's real
 * URL. */
#ifndef BK_SYNC_H
#define BK_SYNC_H

#include "rpc/call.h"

#define BK_SYNC_READ_TRIES 3
/* What a manifest may be, and expand to, each checked before the step that would allocate it
 * (a manifest comes from the store, whose writer is not boxkited alone): as stored (compressed);
 * its plain bytes, which the zstd frame declares, at most BK_MANIFEST_RATIO times the stored ones
 * (and 64 KiB); decoded, in an allocator capped at BK_MANIFEST_DECODE_RATIO times the plain
 * bytes (and 1 MiB); its entries. A push never writes one that a pull would refuse. Before, a
 * 740-byte manifest unpacked to 8 MiB and took the front's peak up by 237 MiB. */
#define BK_MANIFEST_MAX (64u << 20)
#define BK_MANIFEST_PLAIN_MAX (256u << 20)
#define BK_MANIFEST_RATIO 64
#define BK_MANIFEST_DECODE_RATIO 24
#define BK_MANIFEST_DECODED_MAX (512u << 20)
#define BK_MANIFEST_ENTRIES_MAX 1000000

int bk_sync_start(bk_server *srv, bk_error **err);
/* Waits for a running sync to end (its orders fail once the links are closed). */
void bk_sync_stop(bk_server *srv);

/* --restore-from: the latest snapshot under the URL pulled into /workspace before boxkited
 * serves, waiting (up to wait_ms) for the file worker. No snapshot there yet is not an error
 * (logged): a session's first pod starts empty. */
int bk_sync_restore(bk_server *srv, const char *url, int64_t wait_ms, bk_error **err);

/* End the sync running (its store calls end CANCELLED at once, its file orders after the one in
 * progress) and any listing: for the Reset rpc, before it waits for every call to end, and for
 * the stop. A sync begun afterwards runs. */
void bk_sync_cancel(bk_server *srv);

/* For the Reset rpc: wait until no sync runs (a pull still writing into the workspace, a push
 * still reading it). The gate keeps new ones out. */
void bk_sync_idle(bk_server *srv);

/* For the Reset rpc: with --sync-on-reset, push /workspace there — under the departing
 * tenant's prefix (the key that signed the Reset), which the next tenant cannot name — and wait
 * for it to end (after any sync running); *snapshot gets its id. 0 and "" when not configured. */
int bk_sync_final_push(bk_server *srv, const bk_key *tenant, char *snapshot, size_t size, bk_error **err);

/* For the Reset rpc, once no sync runs: forget the last tenant's syncs — SyncStatus answers as
 * before the first, and which blobs each store holds is asked again. */
void bk_sync_reset(bk_server *srv);

void bk_handle_sync_push(bk_call *call, const ProtobufCMessage *request);
void bk_handle_sync_pull(bk_call *call, const ProtobufCMessage *request);
void bk_handle_sync_list(bk_call *call, const ProtobufCMessage *request);
void bk_handle_sync_status(bk_call *call, const ProtobufCMessage *request);

#endif
