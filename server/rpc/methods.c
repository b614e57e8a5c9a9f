/* The dispatch table: one row per rpc of service boxkite.v1.Sandbox. The generated service
 * descriptor gives each row its request and response types; bk_methods_init() fails if a row
 * names no rpc or an rpc has no row, so the table cannot drift from proto/. */
#include "rpc/methods.h"

#include <errno.h>
#include <string.h>

#include <zstd.h>

#include "files/files.h"
#include "files/watch.h"
#include "rpc/handlers.h"
#include "runs/exec.h"
#include "runs/process.h"
#include "session/reset.h"
#include "sync/sync.h"

_Static_assert(BK_DATA_MAX >= ZSTD_COMPRESSBOUND(BK_FILE_CHUNK_MAX), "a chunk's zstd frame fits the data limit");

#define KiB BK_KiB
#define MiB BK_MiB

static const bk_method method_rows[] = {
	/* name                 flags  handler               max request body, max data */
	{ "Health",             BK_METHOD_UNKEYED | BK_METHOD_DURING_RESET | BK_METHOD_CLAIM,
				       bk_handle_health,     1 * KiB, 0 },
	{ "Exec",               0,     bk_handle_exec,       BK_BODY_MAX, 0 },
	/* a file of at most one block may come whole in the data field */
	{ "FileUploadBegin",    0,     bk_handle_upload_begin, 16 * KiB, BK_DATA_MAX },
	/* the chunk is the data field; the body says where it goes */
	{ "FileUploadChunk",    0,     bk_handle_upload_chunk, 1 * KiB, BK_DATA_MAX },
	{ "FileUploadCommit",   0,     bk_handle_upload_commit, 1 * KiB, 0 },
	{ "FileUploadAbort",    0,     bk_handle_upload_abort, 1 * KiB, 0 },
	{ "FileDownload",       0,     bk_handle_file_download, 16 * KiB, 0 },
	{ "FileStat",           0,     bk_handle_file_stat,  16 * KiB, 0 },
	{ "FileList",           0,     bk_handle_file_list,  16 * KiB, 0 },
	{ "FileMkdir",          0,     bk_handle_file_mkdir, 16 * KiB, 0 },
	{ "FileRemove",         0,     bk_handle_file_remove, 16 * KiB, 0 },
	{ "FileMove",           0,     bk_handle_file_move,  16 * KiB, 0 },
	{ "FileSymlink",        0,     bk_handle_file_symlink, 16 * KiB, 0 },
	{ "ProcessStart",       0,     bk_handle_process_start, 1 * MiB, 0 },
	{ "ProcessRead",        0,     bk_handle_process_read, 1 * KiB, 0 },
	{ "ProcessWrite",       0,     bk_handle_process_write, 1 * MiB + 1 * KiB, 0 },
	{ "ProcessCloseStdin",  0,     bk_handle_process_close_stdin, 1 * KiB, 0 },
	{ "ProcessSignal",      0,     bk_handle_process_signal, 1 * KiB, 0 },
	{ "ProcessWait",        0,     bk_handle_process_wait, 1 * KiB, 0 },
	{ "ProcessList",        0,     bk_handle_process_list, 1 * KiB, 0 },
	{ "ProcessResize",      0,     bk_handle_process_resize, 1 * KiB, 0 },
	{ "ProcessRemove",      0,     bk_handle_process_remove, 1 * KiB, 0 },
	{ "SyncPush",           0,     bk_handle_sync_push,  16 * KiB, 0 },
	{ "SyncPull",           0,     bk_handle_sync_pull,  16 * KiB, 0 },
	{ "SyncList",           0,     bk_handle_sync_list,  1 * KiB, 0 },
	{ "SyncStatus",         0,     bk_handle_sync_status, 1 * KiB, 0 },
	{ "Reset",              BK_METHOD_CLAIM, bk_handle_reset, 1 * KiB, 0 },
	{ "FileWatch",          0,     bk_handle_file_watch, 16 * KiB, 0 },
};

const bk_method *bk_methods_row(size_t i)
{
	return i < BK_ARRAY_SIZE(method_rows) ? &method_rows[i] : NULL;
}

int bk_methods_init(bk_server *srv, bk_error **err)
{
	const ProtobufCServiceDescriptor *svc = &boxkite__v1__sandbox__descriptor;

	srv->nmethods = svc->n_methods;
	srv->methods = calloc(svc->n_methods, sizeof(*srv->methods));
	if (!srv->methods)
		return bk_error_errno(err, ENOMEM, "method table");
	for (size_t i = 0; i < BK_ARRAY_SIZE(method_rows); i++) {
		const ProtobufCMethodDescriptor *d =
			protobuf_c_service_descriptor_get_method_by_name(svc, method_rows[i].name);
		bk_method *m;

		if (!d)
			return bk_error_set(err, BK_INTERNAL, EINVAL, "method table row %s names no rpc of %s",
					    method_rows[i].name, svc->name);
		m = &srv->methods[d - svc->methods];
		m->name = method_rows[i].name;
		m->flags = method_rows[i].flags;
		m->handler = method_rows[i].handler;
		m->max_body = method_rows[i].max_body;
		m->max_data = method_rows[i].max_data;
		m->desc = d;
		if (m->max_body + m->max_data + BK_ENVELOPE_FIELDS_MAX > BK_REQUEST_MAX)
			return bk_error_set(err, BK_INTERNAL, EINVAL, "method table row %s allows more than BK_REQUEST_MAX",
					    m->name);
	}
	for (size_t i = 0; i < svc->n_methods; i++)
		if (!srv->methods[i].desc)
			return bk_error_set(err, BK_INTERNAL, EINVAL, "rpc %s.%s has no row in the method table",
					    svc->name, svc->methods[i].name);
	return 0;
}
