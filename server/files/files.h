/* The file rpcs (DESIGN.md §4): stat, list, mkdir, remove, move, symlink, and chunked, resumable,
 * hash-checked upload and download. The executor resolves and opens as the sandbox user; the
 * front only ever holds descriptors it was handed, and does the reading, writing and hashing on
 * its worker threads. */
#ifndef BK_FILES_FRONT_H
#define BK_FILES_FRONT_H

#include "boundary/link.h"
#include "rpc/call.h"

#include "contenthash.h"
#include "sbpath.h"

/* The largest chunk, either way (uncompressed): the content hash's block, well below the
 * transport's message limit. */
#define BK_FILE_CHUNK_MAX BK_BLOCK_SIZE
/* Chunks of one upload waiting for a gap before them to fill, and how long one waits. */
#define BK_CHUNK_QUEUE_MAX 8
#define BK_GAP_WAIT_MS 2000
/* Reads of a download chunk of a file that changes meanwhile, before it is answered ABORTED. */
#define BK_READ_TRIES 3
/* FileList's page: entries when page_size is 0, and the most a page_size may ask. */
#define BK_LIST_PAGE_DEFAULT 200
#define BK_LIST_PAGE_MAX 1000

typedef struct bk_files bk_files;

int bk_files_start(bk_server *srv, bk_error **err);
void bk_files_stop(bk_server *srv);

/* What the front knows of files' contents (fileindex.h), for the sync. */
struct bk_fileindex *bk_files_index(bk_server *srv);

/* A Reset, once no call is in flight: drop every upload (its unnamed file goes with it) and
 * what the file index knows. */
void bk_files_reset(bk_server *srv);

/* The workspace quota for what is not an upload (a sync's pull): take size bytes for a file at
 * path before it is written — 0, or RESOURCE_EXHAUSTED when they do not fit; it may walk the
 * workspace through the file worker, so only a thread that may wait calls it — and give them back
 * once it landed (then counted as used) or not. Nothing when there is no quota or path is not in
 * the workspace. */
int bk_files_quota_take(bk_server *srv, const char *path, uint64_t size, bk_error **err);
void bk_files_quota_give(bk_server *srv, const char *path, uint64_t size, bool landed);

/* Drop uploads untouched for --upload-idle (called once a second). */
void bk_files_expire(bk_server *srv);

/* For the file rpcs of the room (files.c, watch.c). Each ends the call when it says false. */
/* Whether this server serves files (it has a file worker's link): UNAVAILABLE otherwise. */
bool bk_files_ready(bk_call *call);
/* A request path, normalized into out, under a root (*root, when root is not NULL, says which):
 * INVALID_ARGUMENT otherwise. */
bool bk_files_path_ok(bk_call *call, const char *in, char *out, size_t size, const bk_root **root);
/* End the call of a file order that failed (bk_reply_fn's err and reply): the file worker's error
 * about a path, with the status its errno means, or the channel's. */
void bk_files_fail_reply(bk_call *call, int err, const bk_reply *reply);

void bk_handle_file_stat(bk_call *call, const ProtobufCMessage *request);
void bk_handle_file_list(bk_call *call, const ProtobufCMessage *request);
void bk_handle_file_mkdir(bk_call *call, const ProtobufCMessage *request);
void bk_handle_file_remove(bk_call *call, const ProtobufCMessage *request);
void bk_handle_file_move(bk_call *call, const ProtobufCMessage *request);
void bk_handle_file_symlink(bk_call *call, const ProtobufCMessage *request);
void bk_handle_file_download(bk_call *call, const ProtobufCMessage *request);
void bk_handle_upload_begin(bk_call *call, const ProtobufCMessage *request);
void bk_handle_upload_chunk(bk_call *call, const ProtobufCMessage *request);
void bk_handle_upload_commit(bk_call *call, const ProtobufCMessage *request);
void bk_handle_upload_abort(bk_call *call, const ProtobufCMessage *request);

#endif
