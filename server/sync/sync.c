#include "sync/sync.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "sync/job.h"

/* --- jobs -------------------------------------------------------------------------------------- */

static void job_free(struct job *j)
{
	for (size_t i = 0; i < j->nentries; i++)
		sync_entry_free(j->entries[i]);
	free(j->entries);
	bk_hashset_fini(&j->distinct);
	bk_store_free(j->store);
	ZSTD_freeDCtx(j->dctx);
	free(j->buf);
	for (int i = 0; i < BUFS; i++)
		free(j->bufs[i]);
	bk_hashset_fini(&j->pending);
	bk_error_free(j->upload_err);
	pthread_cond_destroy(&j->ucond);
	pthread_mutex_destroy(&j->ulock);
	for (size_t i = 0; i < j->nexclude; i++)
		free(j->exclude[i]);
	free(j->exclude);
	bk_error_free(j->err);
	free(j);
}

/* A job for url (checked against the configured stores; for a tenant, under its key's prefix) on
 * the tree at path. tenant: the key whose snapshots these are; NULL for the operator's own
 * --restore-from, which names a store's real URL. NULL with *err. */
static struct job *job_new(bk_server *srv, bk_call *call, const bk_key *tenant, enum op op, const char *url,
			   const char *path, const char *snapshot, char *const *exclude, size_t nexclude, bk_error **err)
{
	struct job *j = calloc(1, sizeof(*j));
	char prefix[BK_STORE_PREFIX_LEN + 1], real[sizeof(j->url) + BK_STORE_PREFIX_LEN + 1];
	const bk_root *root;

	if (!j) {
		bk_error_errno(err, ENOMEM, "sync");
		return NULL;
	}
	pthread_mutex_init(&j->ulock, NULL);
	pthread_cond_init(&j->ucond, NULL);
	j->srv = srv;
	j->call = call;
	j->op = op;
	boxkite__v1__sync_push_response__init(&j->push);
	boxkite__v1__sync_pull_response__init(&j->pull);
	if (!url[0] && srv->cfg.nsync_store)
		url = srv->cfg.sync_store[0];
	if (tenant && bk_key_store_prefix(tenant, prefix) < 0) {
		bk_error_set(err, BK_INTERNAL, EIO, "HMAC-SHA256 failed in libcrypto");
		goto fail;
	}
	if (bk_store_url_scope(url, srv->cfg.sync_store, srv->cfg.nsync_store, tenant ? prefix : NULL, real,
			       sizeof(real), err) < 0)
		goto fail;
	snprintf(j->url, sizeof(j->url), "%s", url);
	if (bk_sandbox_path(&srv->cfg.roots, path[0] ? path : BK_WORKSPACE, j->root, sizeof(j->root), &root, err) < 0) {
		bk_error_prefix(err, 0, "'%.200s'", path);
		goto fail;
	}
	if (op == PULL && root->read_only) {
		bk_error_set(err, BK_PERMISSION_DENIED, EROFS, "%s is under a read-only root", j->root);
		goto fail;
	}
	if (strlen(j->root) >= sizeof(j->tree.path)) {
		bk_error_set(err, BK_INVALID_ARGUMENT, ENAMETOOLONG, "'%.200s': too long for a sync's tree", path);
		goto fail;
	}
	memcpy(j->tree.path, j->root, strlen(j->root) + 1);
	if (snapshot[0] && !sync_id_valid(snapshot)) {
		bk_error_set(err, BK_INVALID_ARGUMENT, 0, "snapshot id '%.200s': 1-%d of A-Z a-z 0-9 . _ -, not first '.'",
			     snapshot, ID_MAX);
		goto fail;
	}
	snprintf(j->snapshot, sizeof(j->snapshot), "%s", snapshot);
	j->exclude = calloc(nexclude + 1, sizeof(*j->exclude));
	for (size_t i = 0; j->exclude && i < nexclude; i++)
		if ((j->exclude[j->nexclude] = strdup(exclude[i])))
			j->nexclude++;
	j->buf = malloc(BK_BLOCK_SIZE);
	j->dctx = ZSTD_createDCtx();
	bool bufs_ok = true;
	for (int i = 0; op == PUSH && i < BUFS; i++)
		bufs_ok = (j->bufs[i] = malloc(BK_BLOCK_SIZE)) && bufs_ok;
	if (!j->exclude || j->nexclude != nexclude || !j->buf || !j->dctx || !bufs_ok) {
		bk_error_errno(err, ENOMEM, "sync");
		goto fail;
	}
	if (bk_store_open(real, &sync_of(srv)->cancel, &j->store, err) < 0)
		goto fail;
	return j;
fail:
	job_free(j);
	return NULL;
}

/* The seen set of j's store (made on first use). Under the lock. */
static int job_seen(struct bk_sync *s, struct job *j)
{
	struct seen *e;

	for (e = s->seen; e; e = e->next)
		if (strcmp(e->url, j->store->url) == 0)
			break;
	if (!e) {
		if (!(e = calloc(1, sizeof(*e) + strlen(j->store->url) + 1)))
			return -ENOMEM;
		strcpy(e->url, j->store->url);
		e->next = s->seen;
		s->seen = e;
	}
	j->seen = e;
	return 0;
}

/* Become the one running sync: 0, or -EBUSY (wait: false) when another runs. */
static int job_begin(struct bk_sync *s, struct job *j, bool wait)
{
	pthread_mutex_lock(&s->lock);
	while (wait && s->p.running)
		pthread_cond_wait(&s->idle, &s->lock);
	if (s->p.running || job_seen(s, j) < 0) {
		pthread_mutex_unlock(&s->lock);
		return s->p.running ? -EBUSY : -ENOMEM;
	}
	s->p = (struct progress){ .running = true, .operation = j->op == PUSH ? "push" : "pull",
				  .started_ms = bk_clock_realtime_ms() };
	atomic_store(&s->cancel, atomic_load(&j->srv->stopping));
	snprintf(s->p.snapshot, sizeof(s->p.snapshot), "%s", j->snapshot);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static int job_run(struct job *j)
{
	struct bk_sync *s = sync_of(j->srv);
	int ret = j->op == PUSH ? sync_run_push(j) : sync_run_pull(j);

	if (ret < 0 && !j->err)
		bk_error_set(&j->err, BK_INTERNAL, -ret, "sync");
	pthread_mutex_lock(&s->lock);
	s->p.running = false;
	snprintf(s->p.snapshot, sizeof(s->p.snapshot), "%s", j->snapshot);
	s->p.status = j->err ? j->err->status : BK_OK;
	snprintf(s->p.message, sizeof(s->p.message), "%s", bk_error_msg(j->err));
	pthread_cond_broadcast(&s->idle);
	pthread_mutex_unlock(&s->lock);
	if (j->err)
		bk_log(BK_LOG_WARN, "sync %s %s: %s", j->op == PUSH ? "push" : "pull", j->store->url, bk_error_msg(j->err));
	else
		bk_log(BK_LOG_INFO, "sync %s %s: snapshot %s", j->op == PUSH ? "push" : "pull", j->store->url, j->snapshot);
	return ret;
}

static void *job_thread(void *arg)
{
	struct job *j = arg;

	job_run(j);
	if (j->err) {
		bk_call_fail(j->call, TAKE_PTR(j->err));
	} else if (j->op == PUSH) {
		j->push.snapshot = j->snapshot;
		j->push.url = j->url;
		bk_call_reply(j->call, &j->push.base);
	} else {
		j->pull.snapshot = j->snapshot;
		bk_call_reply(j->call, &j->pull.base);
	}
	job_free(j);
	return NULL;
}

/* Run j for its call on a thread of its own. */
static void job_spawn(bk_call *call, struct job *j)
{
	struct bk_sync *s = sync_of(call->srv);
	pthread_attr_t attr;
	int ret;

	if (job_begin(s, j, false) < 0) {
		job_free(j);
		bk_call_failf(call, BK_FAILED_PRECONDITION, 0, "a sync is running (SyncStatus shows its progress)");
		return;
	}
	pthread_mutex_lock(&s->lock);
	/* The last one has ended (running was false): collect it. */
	if (s->thread_live)
		pthread_join(s->thread, NULL);
	pthread_attr_init(&attr);
	ret = pthread_create(&s->thread, &attr, job_thread, j);
	pthread_attr_destroy(&attr);
	s->thread_live = ret == 0;
	if (ret != 0)
		s->p.running = false;
	pthread_mutex_unlock(&s->lock);
	if (ret != 0) {
		job_free(j);
		bk_call_failf(call, BK_RESOURCE_EXHAUSTED, 0, "no thread for the sync: %s", strerror(ret));
	}
}

static bool sync_ok(bk_call *call)
{
	if (call->srv->files_link && call->srv->files && call->srv->sync)
		return true;
	bk_call_failf(call, BK_UNAVAILABLE, 0, "no executor: this server does not serve files");
	return false;
}

void bk_handle_sync_push(bk_call *call, const ProtobufCMessage *request)
{
	const Boxkite__V1__SyncPushRequest *rq = (const Boxkite__V1__SyncPushRequest *)request;
	bk_error *err = NULL;
	struct job *j;

	if (!sync_ok(call))
		return;
	j = job_new(call->srv, call, call->key, PUSH, rq->url, rq->path, rq->snapshot, rq->exclude, rq->n_exclude, &err);
	if (!j)
		return bk_call_fail(call, err);
	j->defaults = rq->default_excludes;
	job_spawn(call, j);
}

void bk_handle_sync_pull(bk_call *call, const ProtobufCMessage *request)
{
	const Boxkite__V1__SyncPullRequest *rq = (const Boxkite__V1__SyncPullRequest *)request;
	bk_error *err = NULL;
	struct job *j;

	if (!sync_ok(call))
		return;
	j = job_new(call->srv, call, call->key, PULL, rq->url, rq->path, rq->snapshot, rq->exclude, rq->n_exclude, &err);
	if (!j)
		return bk_call_fail(call, err);
	j->mirror = rq->mirror;
	job_spawn(call, j);
}

/* On an uploader's thread: a listing reads the store, which no nng callback may wait for. */
static void list_work(void *arg, void *scratch)
{
	struct job *j = arg;
	bk_call *call = j->call;
	Boxkite__V1__SyncListResponse resp = BOXKITE__V1__SYNC_LIST_RESPONSE__INIT;
	_cleanup_free_ Boxkite__V1__SnapshotInfo *infos = NULL;
	_cleanup_free_ Boxkite__V1__SnapshotInfo **ptrs = NULL;
	char **names = NULL;
	size_t n = 0, k = 0;
	bool ok;

	(void)scratch;
	if (j->store->ops->list(j->store, "snapshots", &names, &n, &j->err) < 0) {
		bk_call_fail(call, TAKE_PTR(j->err));
		job_free(j);
		return;
	}
	infos = calloc(n + 1, sizeof(*infos));
	ptrs = calloc(n + 1, sizeof(*ptrs));
	ok = infos && ptrs;
	/* One manifest at a time: what is kept of each is its info (its root copied). */
	for (size_t i = 0; ok && i < n; i++) {
		struct manifest mf;
		if (!sync_id_valid(names[i]) || sync_manifest_read(j, names[i], &mf) < 0) {
			bk_error_free(TAKE_PTR(j->err));
			continue;
		}
		boxkite__v1__snapshot_info__init(&infos[k]);
		infos[k].name = names[i];
		infos[k].files = mf.m->files;
		infos[k].bytes = mf.m->bytes;
		infos[k].created_ms = mf.m->created_ms;
		infos[k].path = strdup(mf.m->root);
		sync_manifest_free(&mf);
		ok = infos[k++].path != NULL;
	}
	/* Oldest first. */
	for (size_t a = 1; a < k; a++)
		for (size_t b = a; b > 0 && infos[b - 1].created_ms > infos[b].created_ms; b--) {
			Boxkite__V1__SnapshotInfo t = infos[b];
			infos[b] = infos[b - 1];
			infos[b - 1] = t;
		}
	for (size_t i = 0; ptrs && i < k; i++)
		ptrs[i] = &infos[i];
	if (!ok) {
		bk_call_failf(call, BK_RESOURCE_EXHAUSTED, 0, "out of memory");
	} else {
		resp.n_snapshots = k;
		resp.snapshots = ptrs;
		bk_call_reply(call, &resp.base);
	}
	for (size_t i = 0; i < k; i++)
		free(infos[i].path);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	job_free(j);
}

void bk_handle_sync_list(bk_call *call, const ProtobufCMessage *request)
{
	const Boxkite__V1__SyncListRequest *rq = (const Boxkite__V1__SyncListRequest *)request;
	bk_error *err = NULL;
	struct job *j;

	if (!sync_ok(call))
		return;
	j = job_new(call->srv, call, call->key, PULL, rq->url, "", "", NULL, 0, &err);
	if (!j)
		return bk_call_fail(call, err);
	if (bk_workers_submit(sync_of(call->srv)->uploaders, list_work, j) < 0) {
		job_free(j);
		bk_call_failf(call, BK_UNAVAILABLE, 0, "boxkited is shutting down");
	}
}

void bk_handle_sync_status(bk_call *call, const ProtobufCMessage *request)
{
	Boxkite__V1__SyncStatusResponse resp = BOXKITE__V1__SYNC_STATUS_RESPONSE__INIT;
	struct bk_sync *s = call->srv->sync;
	struct progress p;

	(void)request;
	if (!sync_ok(call))
		return;
	pthread_mutex_lock(&s->lock);
	p = s->p;
	pthread_mutex_unlock(&s->lock);
	resp.running = p.running;
	resp.operation = (char *)(p.operation ? p.operation : "");
	resp.snapshot = p.snapshot;
	resp.files_done = p.files_done;
	resp.bytes_done = p.bytes_done;
	resp.files_total = p.files_total;
	resp.bytes_total = p.bytes_total;
	resp.blobs_uploaded = p.blobs_uploaded;
	resp.files_read = p.files_read;
	resp.bytes_uploaded = p.bytes_uploaded;
	resp.started_ms = p.started_ms;
	resp.status = p.status;
	resp.message = p.message;
	bk_call_reply(call, &resp.base);
}

/* --- hooks ------------------------------------------------------------------------------------- */

/* A job run on the caller's thread, after any running one (the caller frees it). */
static int job_run_here(struct job *j, bk_error **err)
{
	int ret;

	if (job_begin(sync_of(j->srv), j, true) < 0)
		return bk_error_errno(err, ENOMEM, "sync");
	ret = job_run(j);
	if (ret < 0)
		*err = TAKE_PTR(j->err);
	return ret;
}

int bk_sync_restore(bk_server *srv, const char *url, int64_t wait_ms, bk_error **err)
{
	int64_t deadline = bk_clock_monotonic_ms() + wait_ms;
	struct job *j;
	int ret;

	for (;;) {
		bk_error *e = NULL;
		if (!(j = job_new(srv, NULL, NULL, PULL, url, "", "", NULL, 0, err)))
			return -EINVAL;
		ret = job_run_here(j, &e);
		if (ret == 0) {
			bk_log(BK_LOG_INFO, "restored snapshot %s from %s: %llu files, %llu bytes", j->snapshot, url,
			       (unsigned long long)j->pull.files, (unsigned long long)j->pull.bytes);
			job_free(j);
			return 0;
		}
		/* Not found, and no snapshot was picked: the store has none yet. */
		bool none = e->status == BK_NOT_FOUND && !j->snapshot[0];
		job_free(j);
		if (none) {
			bk_log(BK_LOG_INFO, "--restore-from %s: no snapshot there yet: starting empty", url);
			bk_error_free(e);
			return 0;
		}
		/* The file worker's channel comes with the executor's first FilesReady. */
		if (e->status != BK_UNAVAILABLE || bk_clock_monotonic_ms() >= deadline) {
			*err = e;
			return bk_error_prefix(err, -EIO, "--restore-from %s", url);
		}
		bk_error_free(e);
		usleep(100 * 1000);
	}
}

int bk_sync_final_push(bk_server *srv, const bk_key *tenant, char *snapshot, size_t size, bk_error **err)
{
	struct job *j;
	int ret;

	if (size)
		snapshot[0] = '\0';
	if (!srv->cfg.sync_on_reset)
		return 0;
	if (!(j = job_new(srv, NULL, tenant, PUSH, srv->cfg.sync_on_reset, "", "", NULL, 0, err)))
		return -EINVAL;
	ret = job_run_here(j, err);
	if (ret == 0 && size)
		snprintf(snapshot, size, "%s", j->snapshot);
	job_free(j);
	return ret;
}

/* What one tenant's syncs left: the progress SyncStatus shows, and which blobs each store holds. */
static void seen_drop(struct bk_sync *s)
{
	while (s->seen) {
		struct seen *next = s->seen->next;
		bk_hashset_fini(&s->seen->blobs);
		free(s->seen);
		s->seen = next;
	}
}

void bk_sync_reset(bk_server *srv)
{
	struct bk_sync *s = srv->sync;

	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->p = (struct progress){ 0 };
	seen_drop(s);
	pthread_mutex_unlock(&s->lock);
}

void bk_sync_cancel(bk_server *srv)
{
	struct bk_sync *s = srv->sync;

	if (s)
		atomic_store(&s->cancel, true);
}

void bk_sync_idle(bk_server *srv)
{
	struct bk_sync *s = srv->sync;

	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	while (s->p.running)
		pthread_cond_wait(&s->idle, &s->lock);
	pthread_mutex_unlock(&s->lock);
}

/* --- life cycle ------------------------------------------------------------------------------ */

int bk_sync_start(bk_server *srv, bk_error **err)
{
	struct bk_sync *s = calloc(1, sizeof(*s));

	if (!s)
		return bk_error_errno(err, ENOMEM, "sync");
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->idle, NULL);
	if (bk_workers_start(&s->uploaders, UPLOADERS, ZSTD_COMPRESSBOUND(BK_BLOCK_SIZE), err) < 0) {
		pthread_cond_destroy(&s->idle);
		pthread_mutex_destroy(&s->lock);
		free(s);
		return -ENOMEM;
	}
	srv->sync = s;
	return 0;
}

void bk_sync_stop(bk_server *srv)
{
	struct bk_sync *s = srv->sync;

	if (!s)
		return;
	atomic_store(&s->cancel, true);
	if (s->thread_live)
		pthread_join(s->thread, NULL);
	bk_workers_stop(s->uploaders);
	seen_drop(s);
	pthread_cond_destroy(&s->idle);
	pthread_mutex_destroy(&s->lock);
	free(s);
	srv->sync = NULL;
}
