/* The pull (sync.h): the whole manifest checked first, then each entry made through the file
 * worker — a file into an unnamed file, block after checked block, named in one rename — and
 * with mirror what the manifest lacks removed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "files/fileindex.h"
#include "files/files.h"
#include "fullio.h"
#include "log.h"
#include "sync/job.h"

/* Blob h, checked, into j->buf: exactly n plain bytes whose SHA-256 is h. DATA_LOSS otherwise. */
static int blob_get(struct job *j, const bk_hash h, size_t n, const char *path)
{
	char key[BLOB_KEY_MAX];
	_cleanup_free_ uint8_t *z = NULL;
	uint8_t sum[BK_HASH_LEN];
	size_t zlen, got;
	int ret;

	sync_blob_key(h, key);
	ret = j->store->ops->get(j->store, key, ZSTD_compressBound(BK_BLOCK_SIZE), &z, &zlen, &j->err);
	if (ret < 0) {
		/* A blob the manifest names and the store lacks: the snapshot is damaged. */
		if (ret == -ENOENT)
			j->err->status = BK_DATA_LOSS;
		return bk_error_prefix(&j->err, ret, "%.300s: nothing written to this file", path);
	}
	got = ZSTD_decompressDCtx(j->dctx, j->buf, n, z, zlen);
	if (ZSTD_isError(got) || got != n || ZSTD_getFrameContentSize(z, zlen) != n ||
	    EVP_Digest(j->buf, n, sum, NULL, EVP_sha256(), NULL) != 1 || CRYPTO_memcmp(sum, h, BK_HASH_LEN) != 0)
		return bk_error_set(&j->err, BK_DATA_LOSS, 0,
				    "%.300s: blob %s is corrupt (not the %zu bytes its name says): nothing written to this file",
				    path, key, n);
	j->pull.blobs_fetched++;
	return 0;
}

void sync_manifest_free(struct manifest *mf)
{
	bk_arena_free(mf->arena);
	*mf = (struct manifest){ 0 };
}

int sync_manifest_read(struct job *j, const char *id, struct manifest *out)
{
	char key[sizeof("snapshots/") + ID_MAX];
	_cleanup_free_ uint8_t *z = NULL, *plain = NULL;
	unsigned long long size;
	size_t zlen, got, cap;
	int ret;

	*out = (struct manifest){ 0 };
	snprintf(key, sizeof(key), "snapshots/%s", id);
	if ((ret = j->store->ops->get(j->store, key, BK_MANIFEST_MAX, &z, &zlen, &j->err)) < 0)
		return bk_error_prefix(&j->err, ret, "snapshot %s", id);
	/* What it says it unpacks to, checked before a byte is unpacked. */
	size = ZSTD_getFrameContentSize(z, zlen);
	if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN)
		return bk_error_set(&j->err, BK_DATA_LOSS, 0, "snapshot %s: not a manifest", id);
	if (!sync_manifest_fits(size, zlen))
		return bk_error_set(&j->err, BK_DATA_LOSS, EFBIG,
				    "snapshot %s: a manifest of %zu bytes that unpacks to %llu is refused (at most %d times "
				    "its size, %u bytes)",
				    id, zlen, size, BK_MANIFEST_RATIO, BK_MANIFEST_PLAIN_MAX);
	if (!(plain = malloc((size_t)size + 1)))
		return bk_error_errno(&j->err, ENOMEM, "snapshot %s", id);
	got = ZSTD_decompress(plain, (size_t)size, z, zlen);
	if (ZSTD_isError(got) || got != size)
		return bk_error_set(&j->err, BK_DATA_LOSS, 0, "snapshot %s: not a manifest", id);
	free(TAKE_PTR(z));
	/* And what decoding it may take: an arena with a cap, so that entries that are small on
	 * the wire and large in memory cannot grow the front past it. */
	cap = got > (BK_MANIFEST_DECODED_MAX - (1u << 20)) / BK_MANIFEST_DECODE_RATIO
		      ? BK_MANIFEST_DECODED_MAX
		      : got * BK_MANIFEST_DECODE_RATIO + (1u << 20);
	if (!(out->arena = bk_arena_new(cap)))
		return bk_error_errno(&j->err, ENOMEM, "snapshot %s", id);
	out->m = boxkite__store__manifest__unpack(bk_arena_allocator(out->arena), got, plain);
	if (!out->m) {
		bool full = bk_arena_exhausted(out->arena);
		sync_manifest_free(out);
		return bk_error_set(&j->err, BK_DATA_LOSS, full ? EFBIG : 0, "snapshot %s: %s", id,
				    full ? "the manifest decodes to more memory than allowed" : "not a manifest");
	}
	if (out->m->version != MANIFEST_VERSION) {
		uint32_t version = out->m->version;
		sync_manifest_free(out);
		return bk_error_set(&j->err, BK_FAILED_PRECONDITION, 0, "snapshot %s: manifest version %u, not %d", id,
				    version, MANIFEST_VERSION);
	}
	if (out->m->n_entries > BK_MANIFEST_ENTRIES_MAX) {
		size_t n = out->m->n_entries;
		sync_manifest_free(out);
		return bk_error_set(&j->err, BK_DATA_LOSS, EFBIG, "snapshot %s: %zu entries, more than %d", id, n,
				    BK_MANIFEST_ENTRIES_MAX);
	}
	return 0;
}

/* A manifest's relative path: components that are not empty, "." or "..", no NUL. */
static bool rel_valid(const ProtobufCBinaryData *p)
{
	const char *s = (const char *)p->data;
	size_t i = 0;

	if (!p->len || p->len >= 4000 || memchr(s, '\0', p->len))
		return false;
	while (i < p->len) {
		size_t len = 0;
		while (i + len < p->len && s[i + len] != '/')
			len++;
		if (len == 0 || len > 255 || (len == 1 && s[i] == '.') || (len == 2 && s[i] == '.' && s[i + 1] == '.'))
			return false;
		i += len + 1;
	}
	return s[p->len - 1] != '/';
}

/* Every entry checked before anything is written: a bad manifest changes nothing. */
static int manifest_check(struct job *j, const Boxkite__Store__Manifest *m)
{
	for (size_t i = 0; i < m->n_entries; i++) {
		const Boxkite__Store__Entry *e = m->entries[i];
		bk_hash content;
		bool ok = rel_valid(&e->path) && e->mode <= 07777;

		if (ok && e->type == BOXKITE__V1__FILE_TYPE__FILE_TYPE_REGULAR) {
			ok = e->n_blocks == bk_blocks_of(e->size) && e->content_hash.len == BK_HASH_LEN;
			for (size_t k = 0; ok && k < e->n_blocks; k++)
				ok = e->blocks[k].len == BK_HASH_LEN;
			if (ok) {
				_cleanup_free_ bk_hash *b = malloc(e->n_blocks * BK_HASH_LEN + 1);
				for (size_t k = 0; b && k < e->n_blocks; k++)
					memcpy(b[k], e->blocks[k].data, BK_HASH_LEN);
				ok = b && bk_content_hash(b, e->n_blocks, content) == 0 &&
				     memcmp(content, e->content_hash.data, BK_HASH_LEN) == 0;
			}
		} else if (ok && e->type == BOXKITE__V1__FILE_TYPE__FILE_TYPE_SYMLINK) {
			ok = e->symlink_target.len > 0 && e->symlink_target.len < 4096 &&
			     !memchr(e->symlink_target.data, '\0', e->symlink_target.len);
		} else if (ok) {
			ok = e->type == BOXKITE__V1__FILE_TYPE__FILE_TYPE_DIRECTORY;
		}
		if (!ok)
			return bk_error_set(&j->err, BK_DATA_LOSS, 0, "snapshot %s: entry %zu is malformed: nothing restored",
					    j->snapshot, i);
	}
	return 0;
}

static int path_of(struct job *j, const ProtobufCBinaryData *rel, char *out, size_t size)
{
	if ((size_t)snprintf(out, size, "%s/%.*s", j->root, (int)rel->len, (const char *)rel->data) >= size)
		return bk_error_set(&j->err, BK_INVALID_ARGUMENT, ENAMETOOLONG, "a path of the snapshot is too long");
	return 0;
}

/* Remove path (recursively); mirror's removals are counted, replacements are not. */
static int fw_remove(struct job *j, const char *path, bool count)
{
	Boxkite__Executor__Remove op = BOXKITE__EXECUTOR__REMOVE__INIT;
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;
	bk_reply *reply = NULL;

	op.path = (char *)path;
	op.recursive = true;
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_REMOVE;
	order.remove = &op;
	if (sync_order(j, &order, &reply, NULL, "remove", path) < 0)
		return -EIO;
	if (count)
		j->pull.removed += reply->done->count;
	bk_reply_free(reply);
	return 0;
}

/* Whether an order's failure is a path of another type in the way (the snapshot's wins). */
static bool in_the_way(const bk_error *e)
{
	return e && (e->errnum == EEXIST || e->errnum == ENOTDIR || e->errnum == EISDIR || e->errnum == ENOTEMPTY);
}

/* Send order; when something of another type is in the way, remove it and send it once more. */
static int order_replacing(struct job *j, bk_order *order, const char *what, const char *path, int *fd)
{
	bk_reply *reply = NULL;

	for (int tries = 0;; tries++) {
		if (sync_order(j, order, &reply, fd, what, path) == 0) {
			bk_reply_free(reply);
			return 0;
		}
		if (tries || !in_the_way(j->err))
			return -EIO;
		bk_error_free(TAKE_PTR(j->err));
		if (fw_remove(j, path, false) < 0)
			return -EIO;
	}
}

static int pull_dir(struct job *j, const Boxkite__Store__Entry *e, const char *path)
{
	Boxkite__Executor__Mkdir op = BOXKITE__EXECUTOR__MKDIR__INIT;
	Boxkite__Executor__Stat st = BOXKITE__EXECUTOR__STAT__INIT;
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;
	bk_reply *reply = NULL;

	/* A directory that is there stays (with what is in it); anything else there goes. */
	st.path = (char *)path;
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_STAT;
	order.stat = &st;
	if (sync_order(j, &order, &reply, NULL, "stat", path) == 0) {
		bool dir = reply->done->info && reply->done->info->type == BOXKITE__V1__FILE_TYPE__FILE_TYPE_DIRECTORY;
		bk_reply_free(reply);
		if (dir) {
			j->pull.directories++;
			return 0;
		}
		if (fw_remove(j, path, false) < 0)
			return -EIO;
	} else if (j->err->errnum != ENOENT) {
		return -EIO;
	} else {
		bk_error_free(TAKE_PTR(j->err));
	}
	op.path = (char *)path;
	op.parents = true;
	op.mode = e->mode & 0777;
	order = (bk_order)BOXKITE__EXECUTOR__ORDER__INIT;
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_MKDIR;
	order.mkdir = &op;
	if (sync_order(j, &order, &reply, NULL, "mkdir", path) < 0)
		return -EIO;
	bk_reply_free(reply);
	j->pull.directories++;
	return 0;
}

static int pull_symlink(struct job *j, const Boxkite__Store__Entry *e, const char *path)
{
	Boxkite__Executor__Symlink op = BOXKITE__EXECUTOR__SYMLINK__INIT;
	Boxkite__Executor__Stat st = BOXKITE__EXECUTOR__STAT__INIT;
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;
	bk_reply *reply = NULL;
	char target[4096];

	snprintf(target, sizeof(target), "%.*s", (int)e->symlink_target.len, (const char *)e->symlink_target.data);
	/* The file worker refuses a target outside its root; this tree is narrower. */
	if (!bk_symlink_contained(&j->tree, path, target)) {
		bk_log(BK_LOG_WARN, "sync pull: %.300s -> %.300s would leave %s: not made", path, target, j->root);
		j->pull.skipped++;
		return 0;
	}
	/* The same link there already: kept. */
	st.path = (char *)path;
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_STAT;
	order.stat = &st;
	if (sync_order(j, &order, &reply, NULL, "stat", path) == 0) {
		bool same = reply->done->info && reply->done->info->type == BOXKITE__V1__FILE_TYPE__FILE_TYPE_SYMLINK &&
			    strcmp(reply->done->info->symlink_target, target) == 0;
		bk_reply_free(reply);
		if (same) {
			j->pull.symlinks++;
			return 0;
		}
	} else {
		bk_error_free(TAKE_PTR(j->err));
	}
	order = (bk_order)BOXKITE__EXECUTOR__ORDER__INIT;
	op.path = (char *)path;
	op.target = target;
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_SYMLINK;
	order.symlink = &op;
	if (order_replacing(j, &order, "symlink", path, NULL) < 0)
		return -EIO;
	j->pull.symlinks++;
	return 0;
}

static int pull_file_write(struct job *j, const Boxkite__Store__Entry *e, const char *path)
{
	Boxkite__Executor__CreateTemp ct = BOXKITE__EXECUTOR__CREATE_TEMP__INIT;
	Boxkite__Executor__Commit c = BOXKITE__EXECUTOR__COMMIT__INIT;
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;
	_cleanup_free_ bk_hash *blocks = malloc(e->n_blocks * BK_HASH_LEN + 1);
	_cleanup_close_ int fd = -1;
	bk_reply *reply = NULL;
	struct stat st;
	int ret;

	if (!blocks)
		return bk_error_errno(&j->err, ENOMEM, "%.300s", path);
	ct.path = (char *)path;
	ct.make_parents = true;
	ct.overwrite = true;
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_CREATE_TEMP;
	order.create_temp = &ct;
	if (sync_order(j, &order, &reply, &fd, "create", path) < 0)
		return -EIO;
	bk_reply_free(reply);
	/* Every block checked as it lands in the unnamed file: nothing is visible before all are. */
	for (size_t k = 0; k < e->n_blocks; k++) {
		size_t len = k + 1 < e->n_blocks ? BK_BLOCK_SIZE : (size_t)(e->size - k * BK_BLOCK_SIZE);
		memcpy(blocks[k], e->blocks[k].data, BK_HASH_LEN);
		if ((ret = blob_get(j, blocks[k], len, path)) < 0)
			return ret;
		if ((ret = bk_pwrite_full(fd, j->buf, len, k * (uint64_t)BK_BLOCK_SIZE)) < 0)
			return bk_error_errno(&j->err, -ret, "write %.300s", path);
		sync_progress_add(j, (struct progress_step){ .bytes = len });
	}
	c.path = (char *)path;
	c.mode = e->mode & 0777;
	c.overwrite = true;
	order = (bk_order)BOXKITE__EXECUTOR__ORDER__INIT;
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_COMMIT;
	order.commit = &c;
	/* Commit takes the descriptor along (sent, still ours). */
	for (int tries = 0;; tries++) {
		ret = bk_link_call_with(j->srv->files_link, &order, &fd, 1, &reply, NULL, NULL, &j->err);
		if (ret == 0)
			break;
		if (tries || !in_the_way(j->err))
			return bk_error_prefix(&j->err, ret, "commit %.300s", path);
		bk_error_free(TAKE_PTR(j->err));
		if (fw_remove(j, path, false) < 0)
			return -EIO;
	}
	bk_reply_free(reply);
	/* In place as the snapshot has it: known without reading it back. */
	if (fstat(fd, &st) == 0 && (uint64_t)st.st_size == e->size) {
		bk_filever v;
		bk_filever_of(&st, &v);
		bk_fileindex_put(bk_files_index(j->srv), &v, blocks);
	}
	j->pull.files++;
	j->pull.bytes += e->size;
	sync_progress_add(j, (struct progress_step){ .files = 1 });
	return 0;
}

/* A file counts against the workspace quota like an upload: its size is taken before anything
 * is written, and counted as used once it landed. */
static int pull_file(struct job *j, const Boxkite__Store__Entry *e, const char *path)
{
	int ret;

	if ((ret = bk_files_quota_take(j->srv, path, e->size, &j->err)) < 0)
		return ret;
	ret = pull_file_write(j, e, path);
	bk_files_quota_give(j->srv, path, e->size, ret == 0);
	return ret;
}

static int rel_cmp(const void *a, const void *b)
{
	const ProtobufCBinaryData *x = &(*(Boxkite__Store__Entry *const *)a)->path;
	const ProtobufCBinaryData *y = &(*(Boxkite__Store__Entry *const *)b)->path;
	int c = memcmp(x->data, y->data, x->len < y->len ? x->len : y->len);

	return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* Mirror: remove what is under dir (rel in the snapshot) and not in the sorted entries. */
static int mirror_dir(struct job *j, Boxkite__Store__Entry **sorted, size_t n, const char *dir, const char *dir_rel)
{
	struct dirent_info *v;
	size_t nv;
	int ret = 0;

	if (sync_list_dir(j, dir, &v, &nv) < 0)
		return -EIO;
	for (size_t i = 0; i < nv && ret == 0; i++) {
		char path[4096], rel[4096];
		Boxkite__Store__Entry key = { .path = { 0 } }, *kp = &key, **hit;

		snprintf(path, sizeof(path), "%s/%s", dir, v[i].name);
		snprintf(rel, sizeof(rel), "%s%s%s", dir_rel, dir_rel[0] ? "/" : "", v[i].name);
		if (sync_excluded(j, false, v[i].name, rel))
			continue;
		key.path = (ProtobufCBinaryData){ .len = strlen(rel), .data = (uint8_t *)rel };
		hit = bsearch(&kp, sorted, n, sizeof(*sorted), rel_cmp);
		if (!hit)
			ret = fw_remove(j, path, true);
		else if (v[i].type == BOXKITE__V1__FILE_TYPE__FILE_TYPE_DIRECTORY)
			ret = mirror_dir(j, sorted, n, path, rel);
	}
	sync_dirents_free(v, nv);
	return ret;
}

/* The latest snapshot under the store: the greatest created_ms (ties: the greatest id). */
static int latest_id(struct job *j)
{
	char **names = NULL;
	size_t n = 0;
	int64_t best = INT64_MIN;
	int ret = j->store->ops->list(j->store, "snapshots", &names, &n, &j->err);

	for (size_t i = 0; ret == 0 && i < n; i++) {
		struct manifest mf;
		if (!sync_id_valid(names[i]))
			continue;
		if (sync_manifest_read(j, names[i], &mf) < 0) {
			/* One unreadable manifest does not hide the others. */
			bk_log(BK_LOG_WARN, "sync: %s: %s", j->url, bk_error_msg(j->err));
			bk_error_free(TAKE_PTR(j->err));
			continue;
		}
		if (mf.m->created_ms > best || (mf.m->created_ms == best && strcmp(names[i], j->snapshot) > 0)) {
			best = mf.m->created_ms;
			snprintf(j->snapshot, sizeof(j->snapshot), "%s", names[i]);
		}
		sync_manifest_free(&mf);
	}
	size_t ids = 0;
	for (size_t i = 0; i < n; i++) {
		ids += sync_id_valid(names[i]);
		free(names[i]);
	}
	free(names);
	if (ret == 0 && !j->snapshot[0] && ids)
		return bk_error_set(&j->err, BK_DATA_LOSS, 0, "%s holds %zu snapshots and none of them is readable", j->url,
				    ids);
	if (ret == 0 && !j->snapshot[0])
		return bk_error_set(&j->err, BK_NOT_FOUND, ENOENT, "no snapshot in %s", j->url);
	return ret;
}

int sync_run_pull(struct job *j)
{
	_cleanup_(sync_manifest_free) struct manifest mf = { 0 };
	_cleanup_free_ Boxkite__Store__Entry **sorted = NULL;
	struct bk_sync *s = sync_of(j->srv);
	const Boxkite__Store__Manifest *m;
	int ret = 0;

	if (!j->snapshot[0] && latest_id(j) < 0)
		return -ENOENT;
	if (sync_manifest_read(j, j->snapshot, &mf) < 0 || manifest_check(j, mf.m) < 0)
		return -EIO;
	m = mf.m;
	pthread_mutex_lock(&s->lock);
	snprintf(s->p.snapshot, sizeof(s->p.snapshot), "%s", j->snapshot);
	s->p.files_total = m->files;
	s->p.bytes_total = m->bytes;
	pthread_mutex_unlock(&s->lock);
	for (size_t i = 0; i < m->n_entries && ret == 0; i++) {
		const Boxkite__Store__Entry *e = m->entries[i];
		char path[4096];

		if ((ret = sync_check_cancel(j)) < 0)
			return ret;
		if (path_of(j, &e->path, path, sizeof(path)) < 0)
			return -ENAMETOOLONG;
		switch (e->type) {
		case BOXKITE__V1__FILE_TYPE__FILE_TYPE_DIRECTORY:
			ret = pull_dir(j, e, path);
			break;
		case BOXKITE__V1__FILE_TYPE__FILE_TYPE_SYMLINK:
			ret = pull_symlink(j, e, path);
			break;
		default:
			ret = pull_file(j, e, path);
			break;
		}
	}
	if (ret < 0 || !j->mirror)
		return ret;
	sorted = malloc((m->n_entries + 1) * sizeof(*sorted));
	if (!sorted)
		return bk_error_errno(&j->err, ENOMEM, "mirror");
	memcpy(sorted, m->entries, m->n_entries * sizeof(*sorted));
	qsort(sorted, m->n_entries, sizeof(*sorted), rel_cmp);
	return mirror_dir(j, sorted, m->n_entries, j->root, "");
}
