/* The dispatch table: one row per rpc of service boxkite.v1.Sandbox. The generated service
 * descriptor gives each row its request and response types; bk_server_init() fails if a row
 * names no rpc or an rpc has no row, so the table cannot drift from proto/. */
#include <errno.h>
#include <string.h>

#include "exec.h"
#include "files.h"
#include "handlers.h"
#include "server.h"

#define KiB (1u << 10)
#define MiB (1u << 20)

static const bk_method method_rows[] = {
	/* name                 auth   handler               max request body */
	{ "Health",             false, bk_handle_health,     1 * KiB },
	{ "Exec",               true,  bk_handle_exec,       8 * MiB },
	{ "FileUploadBegin",    true,  bk_handle_upload_begin, 16 * KiB },
	/* a chunk, compressed or not (zstd's worst case adds under 0.5 %), and its fields */
	{ "FileUploadChunk",    true,  bk_handle_upload_chunk, BK_FILE_CHUNK_MAX + 64 * KiB },
	{ "FileUploadCommit",   true,  bk_handle_upload_commit, 1 * KiB },
	{ "FileUploadAbort",    true,  bk_handle_upload_abort, 1 * KiB },
	{ "FileDownload",       true,  bk_handle_file_download, 16 * KiB },
	{ "FileStat",           true,  bk_handle_file_stat,  16 * KiB },
	{ "FileList",           true,  bk_handle_file_list,  16 * KiB },
	{ "FileMkdir",          true,  bk_handle_file_mkdir, 16 * KiB },
	{ "FileRemove",         true,  bk_handle_file_remove, 16 * KiB },
	{ "FileMove",           true,  bk_handle_file_move,  16 * KiB },
	{ "FileSymlink",        true,  bk_handle_file_symlink, 16 * KiB },
	{ "ProcessStart",       true,  NULL,                 1 * MiB },
	{ "ProcessRead",        true,  NULL,                 1 * KiB },
	{ "ProcessWrite",       true,  NULL,                 8 * MiB },
	{ "ProcessCloseStdin",  true,  NULL,                 1 * KiB },
	{ "ProcessSignal",      true,  NULL,                 1 * KiB },
	{ "ProcessWait",        true,  NULL,                 1 * KiB },
	{ "ProcessList",        true,  NULL,                 1 * KiB },
	{ "SyncPush",           true,  NULL,                 4 * KiB },
	{ "SyncPull",           true,  NULL,                 4 * KiB },
	{ "SyncList",           true,  NULL,                 1 * KiB },
	{ "Reset",              true,  NULL,                 1 * KiB },
};

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
		m->auth = method_rows[i].auth;
		m->handler = method_rows[i].handler;
		m->max_body = method_rows[i].max_body;
		m->desc = d;
	}
	for (size_t i = 0; i < svc->n_methods; i++)
		if (!srv->methods[i].desc)
			return bk_error_set(err, BK_INTERNAL, EINVAL, "rpc %s.%s has no row in the method table",
					    svc->name, svc->methods[i].name);
	return 0;
}
