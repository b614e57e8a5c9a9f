/* The sync rpcs (SyncPush, SyncPull, SyncList, SyncStatus) as typed calls. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boxkite/v1/boxkite.pb-c.h"
#include "request.h"

static int wait_ms(const bk_client *c, const bk_sync_request *rq)
{
	return (rq->timeout_ms ? rq->timeout_ms : BK_SYNC_WAIT_DEFAULT_MS) + bk_client_timeout(c);
}

int bk_sync_push(bk_client *c, const bk_sync_request *rq, bk_sync_result *out, bk_status *st)
{
	Boxkite__V1__SyncPushRequest req = BOXKITE__V1__SYNC_PUSH_REQUEST__INIT;
	_cleanup_response_ Boxkite__V1__SyncPushResponse *resp = NULL;
	bool verified;
	int code;

	memset(out, 0, sizeof(*out));
	req.url = (char *)(rq->url ? rq->url : "");
	req.snapshot = (char *)(rq->snapshot ? rq->snapshot : "");
	req.path = (char *)(rq->path ? rq->path : "");
	req.exclude = (char **)rq->exclude;
	req.n_exclude = rq->n_exclude;
	req.default_excludes = rq->default_excludes;
	code = bk_client_call(c, "SyncPush", &req.base, &boxkite__v1__sync_push_response__descriptor,
			      (ProtobufCMessage **)&resp, wait_ms(c, rq), &verified, st);
	if (code != BK_OK)
		return code;
	snprintf(out->snapshot, sizeof(out->snapshot), "%s", resp->snapshot);
	out->files = resp->files;
	out->bytes = resp->bytes;
	out->directories = resp->directories;
	out->symlinks = resp->symlinks;
	out->skipped = resp->skipped;
	out->blobs = resp->blobs;
	out->blobs_uploaded = resp->blobs_uploaded;
	out->files_read = resp->files_read;
	out->bytes_uploaded = resp->bytes_uploaded;
	return code;
}

int bk_sync_pull(bk_client *c, const bk_sync_request *rq, bk_sync_result *out, bk_status *st)
{
	Boxkite__V1__SyncPullRequest req = BOXKITE__V1__SYNC_PULL_REQUEST__INIT;
	_cleanup_response_ Boxkite__V1__SyncPullResponse *resp = NULL;
	bool verified;
	int code;

	memset(out, 0, sizeof(*out));
	req.url = (char *)(rq->url ? rq->url : "");
	req.snapshot = (char *)(rq->snapshot ? rq->snapshot : "");
	req.path = (char *)(rq->path ? rq->path : "");
	req.exclude = (char **)rq->exclude;
	req.n_exclude = rq->n_exclude;
	req.mirror = rq->mirror;
	code = bk_client_call(c, "SyncPull", &req.base, &boxkite__v1__sync_pull_response__descriptor,
			      (ProtobufCMessage **)&resp, wait_ms(c, rq), &verified, st);
	if (code != BK_OK)
		return code;
	snprintf(out->snapshot, sizeof(out->snapshot), "%s", resp->snapshot);
	out->files = resp->files;
	out->bytes = resp->bytes;
	out->directories = resp->directories;
	out->symlinks = resp->symlinks;
	out->skipped = resp->skipped;
	out->blobs_fetched = resp->blobs_fetched;
	out->removed = resp->removed;
	return code;
}

void bk_snapshot_list_free(bk_snapshot_info *list, size_t n)
{
	for (size_t i = 0; list && i < n; i++)
		free(list[i].path);
	free(list);
}

int bk_sync_list(bk_client *c, const char *url, bk_snapshot_info **out, size_t *n, bk_status *st)
{
	Boxkite__V1__SyncListRequest req = BOXKITE__V1__SYNC_LIST_REQUEST__INIT;
	_cleanup_response_ Boxkite__V1__SyncListResponse *resp = NULL;
	bk_snapshot_info *v;
	bool verified;
	int code;

	*out = NULL;
	*n = 0;
	req.url = (char *)(url ? url : "");
	code = bk_client_call(c, "SyncList", &req.base, &boxkite__v1__sync_list_response__descriptor,
			      (ProtobufCMessage **)&resp, 0, &verified, st);
	if (code != BK_OK)
		return code;
	v = calloc(resp->n_snapshots + 1, sizeof(*v));
	if (!v)
		return bk_status_errno(st, ENOMEM, "snapshot list");
	for (size_t i = 0; i < resp->n_snapshots; i++) {
		const Boxkite__V1__SnapshotInfo *s = resp->snapshots[i];
		snprintf(v[i].name, sizeof(v[i].name), "%s", s->name);
		v[i].files = s->files;
		v[i].bytes = s->bytes;
		v[i].created_ms = s->created_ms;
		if (!(v[i].path = strdup(s->path))) {
			bk_snapshot_list_free(v, i);
			return bk_status_errno(st, ENOMEM, "snapshot list");
		}
	}
	*out = v;
	*n = resp->n_snapshots;
	return code;
}

int bk_sync_status(bk_client *c, bk_sync_progress *out, bk_status *st)
{
	Boxkite__V1__SyncStatusRequest req = BOXKITE__V1__SYNC_STATUS_REQUEST__INIT;
	_cleanup_response_ Boxkite__V1__SyncStatusResponse *resp = NULL;
	bool verified;
	int code;

	memset(out, 0, sizeof(*out));
	code = bk_client_call(c, "SyncStatus", &req.base, &boxkite__v1__sync_status_response__descriptor,
			      (ProtobufCMessage **)&resp, 0, &verified, st);
	if (code != BK_OK)
		return code;
	out->running = resp->running;
	snprintf(out->operation, sizeof(out->operation), "%s", resp->operation);
	snprintf(out->snapshot, sizeof(out->snapshot), "%s", resp->snapshot);
	out->files_done = resp->files_done;
	out->bytes_done = resp->bytes_done;
	out->files_total = resp->files_total;
	out->bytes_total = resp->bytes_total;
	out->blobs_uploaded = resp->blobs_uploaded;
	out->files_read = resp->files_read;
	out->bytes_uploaded = resp->bytes_uploaded;
	out->started_ms = resp->started_ms;
	out->status = resp->status;
	snprintf(out->message, sizeof(out->message), "%s", resp->message);
	return code;
}
