/* The file rpcs (DESIGN.md §4): stat, list, mkdir, remove, move, symlink, and chunked, resumable,
 * hash-checked upload and download. The executor resolves and opens as the sandbox user; the
 * front only ever holds descriptors it was handed, and does the reading, writing and hashing on
 * its worker threads. */
#ifndef BK_FILES_FRONT_H
#define BK_FILES_FRONT_H

#include "server.h"

/* The largest chunk, either way (uncompressed): well below the transport's message limit. */
#define BK_FILE_CHUNK_MAX (4u << 20)

typedef struct bk_files bk_files;

int bk_files_start(bk_server *srv, bk_error **err);
void bk_files_stop(bk_server *srv);

/* Drop uploads untouched for --upload-idle (called once a second). */
void bk_files_expire(bk_server *srv);

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
