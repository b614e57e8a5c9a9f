/* The push (sync.h): the tree walked through the file worker, each file's blocks from the file
 * index or read and hashed, the blocks the store lacks compressed and put by the uploaders while
 * the walk goes on, the manifest last. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "files/fileindex.h"
#include "files/files.h"
#include "fullio.h"
#include "log.h"
#include "sync/job.h"

/* --- blobs ------------------------------------------------------------------------------------- */

/* Whether the store has blob h (or it is on its way there): the seen set, else the store (and
 * then the set). 1, 0, -errno. */
static int blob_present(struct job *j, const bk_hash h)
{
	char key[BLOB_KEY_MAX];
	bool known;
	int ret;

	pthread_mutex_lock(&j->ulock);
	known = bk_hashset_has(&j->seen->blobs, h) || bk_hashset_has(&j->pending, h);
	pthread_mutex_unlock(&j->ulock);
	if (known)
		return 1;
	sync_blob_key(h, key);
	ret = j->store->ops->has(j->store, key, &j->err);
	pthread_mutex_lock(&j->ulock);
	if (ret == 1 && bk_hashset_add(&j->seen->blobs, h) < 0)
		ret = bk_error_errno(&j->err, ENOMEM, "blob set");
	pthread_mutex_unlock(&j->ulock);
	return ret;
}

/* A free block buffer (waiting for an upload to end), or -EIO once an upload failed. */
static int buf_take(struct job *j)
{
	int i = -1;

	pthread_mutex_lock(&j->ulock);
	while (!j->upload_err && i < 0) {
		for (int k = 0; k < BUFS && i < 0; k++)
			if (!j->busy[k])
				i = k;
		if (i < 0)
			pthread_cond_wait(&j->ucond, &j->ulock);
	}
	if (i >= 0 && !j->upload_err)
		j->busy[i] = true;
	else
		i = -EIO;
	pthread_mutex_unlock(&j->ulock);
	return i;
}

static void buf_give(struct job *j, int i)
{
	pthread_mutex_lock(&j->ulock);
	j->busy[i] = false;
	pthread_cond_broadcast(&j->ucond);
	pthread_mutex_unlock(&j->ulock);
}

struct upload {
	struct job *j;
	bk_hash h;
	int buf;
	size_t len;
};

/* On an uploader: compress a block into the worker's scratch and put it. */
static void upload_work(void *arg, void *scratch)
{
	struct upload *u = arg;
	struct job *j = u->j;
	char key[BLOB_KEY_MAX];
	bk_error *err = NULL;
	size_t z = ZSTD_compress(scratch, ZSTD_COMPRESSBOUND(BK_BLOCK_SIZE), j->bufs[u->buf], u->len, ZSTD_LEVEL);

	sync_blob_key(u->h, key);
	if (ZSTD_isError(z))
		bk_error_set(&err, BK_INTERNAL, 0, "zstd: %s", ZSTD_getErrorName(z));
	else
		j->store->ops->put(j->store, key, scratch, z, &err);
	bool put;

	pthread_mutex_lock(&j->ulock);
	if (!err && bk_hashset_add(&j->seen->blobs, u->h) < 0)
		bk_error_errno(&err, ENOMEM, "blob set");
	put = !err;
	if (put) {
		j->push.blobs_uploaded++;
		j->push.bytes_uploaded += z;
	} else if (!j->upload_err) {
		j->upload_err = TAKE_PTR(err);
	}
	j->busy[u->buf] = false;
	j->inflight--;
	pthread_cond_broadcast(&j->ucond);
	pthread_mutex_unlock(&j->ulock);
	bk_error_free(err);
	if (put)
		sync_progress_add(j, (struct progress_step){ .blobs = 1, .bytes_uploaded = z });
	free(u);
}

/* Hand block h (in buffer buf, len bytes) to an uploader, which gives the buffer back. */
static int blob_submit(struct job *j, const bk_hash h, int buf, size_t len)
{
	struct upload *u = malloc(sizeof(*u));
	int ret;

	if (!u) {
		buf_give(j, buf);
		return bk_error_errno(&j->err, ENOMEM, "upload");
	}
	*u = (struct upload){ .j = j, .buf = buf, .len = len };
	memcpy(u->h, h, BK_HASH_LEN);
	pthread_mutex_lock(&j->ulock);
	ret = bk_hashset_add(&j->pending, h);
	if (ret >= 0)
		j->inflight++;
	pthread_mutex_unlock(&j->ulock);
	if (ret < 0 || bk_workers_submit(sync_of(j->srv)->uploaders, upload_work, u) < 0) {
		pthread_mutex_lock(&j->ulock);
		j->inflight -= ret >= 0;
		pthread_mutex_unlock(&j->ulock);
		free(u);
		buf_give(j, buf);
		return bk_error_set(&j->err, ret < 0 ? BK_RESOURCE_EXHAUSTED : BK_UNAVAILABLE, 0,
				    ret < 0 ? "out of memory for the blob set" : "boxkited is shutting down");
	}
	return 0;
}

/* Wait for every upload to end: 0, or the first one's failure. */
static int uploads_wait(struct job *j)
{
	pthread_mutex_lock(&j->ulock);
	while (j->inflight)
		pthread_cond_wait(&j->ucond, &j->ulock);
	pthread_mutex_unlock(&j->ulock);
	if (!j->upload_err)
		return 0;
	if (j->err)
		bk_error_free(TAKE_PTR(j->upload_err));
	else
		j->err = TAKE_PTR(j->upload_err);
	return -EIO;
}

void sync_entry_free(Boxkite__Store__Entry *e)
{
	if (!e)
		return;
	free(e->path.data);
	free(e->symlink_target.data);
	free(e->content_hash.data);
	free(e->blocks); /* the binary data array and the hashes it points at: one block */
	free(e);
}

static int entry_add(struct job *j, const char *rel, const struct dirent_info *d, Boxkite__Store__Entry **out)
{
	Boxkite__Store__Entry *e = calloc(1, sizeof(*e));

	if (!e)
		return bk_error_errno(&j->err, ENOMEM, "manifest");
	boxkite__store__entry__init(e);
	e->path.len = strlen(rel);
	e->path.data = (uint8_t *)strdup(rel);
	e->type = d->type;
	e->mode = d->mode;
	e->mtime_ns = d->mtime_ns;
	if (d->type == BOXKITE__V1__FILE_TYPE__FILE_TYPE_SYMLINK) {
		e->symlink_target.len = strlen(d->target);
		e->symlink_target.data = (uint8_t *)strdup(d->target);
	}
	if (!e->path.data || (d->type == BOXKITE__V1__FILE_TYPE__FILE_TYPE_SYMLINK && !e->symlink_target.data)) {
		sync_entry_free(e);
		return bk_error_errno(&j->err, ENOMEM, "manifest");
	}
	if (j->nentries == j->capentries) {
		size_t cap = j->capentries ? 2 * j->capentries : 1024;
		Boxkite__Store__Entry **grown = realloc(j->entries, cap * sizeof(*grown));
		if (!grown) {
			sync_entry_free(e);
			return bk_error_errno(&j->err, ENOMEM, "manifest");
		}
		j->entries = grown;
		j->capentries = cap;
	}
	j->entries[j->nentries++] = e;
	*out = e;
	return 0;
}

/* Give e its n block hashes (one allocation: the binary data array, then the hashes). */
static int entry_blocks(struct job *j, Boxkite__Store__Entry *e, uint64_t n, bk_hash **hashes)
{
	if (n > SIZE_MAX / (sizeof(ProtobufCBinaryData) + BK_HASH_LEN))
		return bk_error_errno(&j->err, EFBIG, "manifest");
	e->blocks = calloc(1, (size_t)n * (sizeof(ProtobufCBinaryData) + BK_HASH_LEN) + 1);
	e->content_hash.data = malloc(BK_HASH_LEN);
	if (!e->blocks || !e->content_hash.data)
		return bk_error_errno(&j->err, ENOMEM, "manifest");
	e->content_hash.len = BK_HASH_LEN;
	e->n_blocks = (size_t)n;
	*hashes = (bk_hash *)&e->blocks[n];
	for (uint64_t k = 0; k < n; k++)
		e->blocks[k] = (ProtobufCBinaryData){ .len = BK_HASH_LEN, .data = (*hashes)[k] };
	return 0;
}

/* One try at a file's blocks, as fd shows it now: 0; -EAGAIN when it changed meanwhile (blobs
 * uploaded so far are whole blocks of some version: harmless, never named by a manifest). */
static int file_try(struct job *j, int fd, const char *path, bk_hash *blocks, uint64_t *size, bool *read_any)
{
	bk_fileindex *ix = bk_files_index(j->srv);
	struct stat st, after;
	bk_filever v, w;
	bk_hash content;
	uint64_t n;
	bool known;
	int ret;

	if (fstat(fd, &st) < 0)
		return bk_error_errno(&j->err, errno, "fstat %.300s", path);
	if (!S_ISREG(st.st_mode))
		return -EAGAIN;
	bk_filever_of(&st, &v);
	if (v.size != *size)
		return -EAGAIN; /* not the size the caller made room for: ask again */
	n = bk_blocks_of(v.size);
	known = bk_fileindex_get(ix, &v, content, blocks) == 0;
	for (uint64_t k = 0; k < n; k++) {
		size_t len = k + 1 < n ? BK_BLOCK_SIZE : (size_t)(v.size - k * BK_BLOCK_SIZE);
		uint8_t sum[BK_HASH_LEN];
		ssize_t got;
		int b;

		if (known && (ret = blob_present(j, blocks[k])) != 0) {
			if (ret < 0)
				return ret;
			continue;
		}
		if ((b = buf_take(j)) < 0)
			return b;
		got = bk_pread_full(fd, j->bufs[b], len, k * BK_BLOCK_SIZE);
		*read_any = true;
		if (got < 0)
			ret = bk_error_errno(&j->err, (int)-got, "read %.300s", path);
		else if ((size_t)got != len)
			ret = -EAGAIN;
		else if (EVP_Digest(j->bufs[b], len, sum, NULL, EVP_sha256(), NULL) != 1)
			ret = bk_error_set(&j->err, BK_INTERNAL, 0, "SHA-256 failed in libcrypto");
		else if (known && memcmp(sum, blocks[k], BK_HASH_LEN) != 0)
			ret = -EAGAIN; /* the index's version, but other bytes: it is changing now */
		else
			ret = blob_present(j, sum);
		if (ret == 0) {
			/* The uploader gives the buffer back. */
			memcpy(blocks[k], sum, BK_HASH_LEN);
			if ((ret = blob_submit(j, sum, b, len)) < 0)
				return ret;
			continue;
		}
		buf_give(j, b);
		if (ret < 0)
			return ret;
		memcpy(blocks[k], sum, BK_HASH_LEN); /* in the store already */
	}
	if (fstat(fd, &after) < 0)
		return bk_error_errno(&j->err, errno, "fstat %.300s", path);
	bk_filever_of(&after, &w);
	if (!bk_filever_same(&v, &w))
		return -EAGAIN;
	if (!known)
		bk_fileindex_put(ix, &v, blocks);
	return 0;
}

static int push_file(struct job *j, const char *path, const char *rel, struct dirent_info *d)
{
	Boxkite__Executor__OpenRead op = BOXKITE__EXECUTOR__OPEN_READ__INIT;
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;
	Boxkite__Store__Entry *e;
	bk_reply *reply = NULL;
	_cleanup_close_ int fd = -1;
	bk_hash *blocks = NULL;
	bool read_any = false;
	int ret = -EAGAIN;

	op.path = (char *)path;
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_OPEN_READ;
	order.open_read = &op;
	if (sync_order(j, &order, &reply, &fd, "open", path) < 0)
		return -EIO;
	d->size = reply->opened->info ? reply->opened->info->size : d->size;
	d->mode = reply->opened->info ? reply->opened->info->mode & 07777 : d->mode;
	d->mtime_ns = reply->opened->info ? reply->opened->info->mtime_ns : d->mtime_ns;
	bk_reply_free(reply);
	if (entry_add(j, rel, d, &e) < 0)
		return -ENOMEM;
	for (int tries = 0; ret == -EAGAIN && tries < BK_SYNC_READ_TRIES; tries++) {
		struct stat st;
		if (fstat(fd, &st) < 0)
			return bk_error_errno(&j->err, errno, "fstat %.300s", path);
		/* Each try sizes its blocks afresh: the file may have grown or shrunk. */
		free(e->blocks);
		free(e->content_hash.data);
		e->blocks = NULL;
		e->content_hash.data = NULL;
		e->size = (uint64_t)st.st_size;
		e->mode = st.st_mode & 07777;
		e->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
		if ((ret = entry_blocks(j, e, bk_blocks_of(e->size), &blocks)) < 0)
			return ret;
		ret = file_try(j, fd, path, blocks, &e->size, &read_any);
	}
	if (ret == -EAGAIN)
		return bk_error_set(&j->err, BK_ABORTED, 0,
				    "%.300s changed while it was read (%d tries): not stored torn; push again",
				    path, BK_SYNC_READ_TRIES);
	if (ret < 0)
		return ret;
	if (bk_content_hash(blocks, e->n_blocks, e->content_hash.data) < 0)
		return bk_error_set(&j->err, BK_INTERNAL, 0, "SHA-256 failed in libcrypto");
	for (size_t k = 0; k < e->n_blocks; k++)
		if (bk_hashset_add(&j->distinct, blocks[k]) < 0)
			return bk_error_errno(&j->err, ENOMEM, "blob set");
	j->push.files++;
	j->push.bytes += e->size;
	j->push.files_read += read_any;
	sync_progress_add(j, (struct progress_step){ .files = 1, .bytes = e->size, .files_read = read_any });
	return 0;
}

static int push_dir(struct job *j, const char *path, const char *rel, bool defaults);

static int push_entry(struct job *j, const char *dir, const char *dir_rel, struct dirent_info *d, bool defaults)
{
	char path[4096], rel[4096];
	Boxkite__Store__Entry *e;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, d->name) >= sizeof(path) ||
	    (size_t)snprintf(rel, sizeof(rel), "%s%s%s", dir_rel, dir_rel[0] ? "/" : "", d->name) >= sizeof(rel))
		return bk_error_set(&j->err, BK_INVALID_ARGUMENT, ENAMETOOLONG, "a path under %.300s is too long", dir);
	if (sync_excluded(j, defaults, d->name, rel)) {
		j->push.skipped++;
		return 0;
	}
	switch (d->type) {
	case BOXKITE__V1__FILE_TYPE__FILE_TYPE_REGULAR:
		return push_file(j, path, rel, d);
	case BOXKITE__V1__FILE_TYPE__FILE_TYPE_DIRECTORY:
		if (entry_add(j, rel, d, &e) < 0)
			return -ENOMEM;
		j->push.directories++;
		return push_dir(j, path, rel, defaults);
	case BOXKITE__V1__FILE_TYPE__FILE_TYPE_SYMLINK:
		/* Stored as a link, never followed; one that leaves the tree is not stored at all. */
		if (!bk_symlink_contained(&j->tree, path, d->target)) {
			bk_log(BK_LOG_INFO, "sync push: %.300s -> %.300s leaves %s: not stored", path, d->target, j->root);
			j->push.skipped++;
			return 0;
		}
		if (entry_add(j, rel, d, &e) < 0)
			return -ENOMEM;
		j->push.symlinks++;
		return 0;
	default:
		j->push.skipped++;
		return 0;
	}
}

static int push_dir(struct job *j, const char *path, const char *rel, bool defaults)
{
	struct dirent_info *v;
	size_t n;
	int ret = 0;

	if (sync_list_dir(j, path, &v, &n) < 0)
		return -EIO;
	for (size_t i = 0; i < n && ret == 0; i++) {
		if ((ret = sync_check_cancel(j)) == 0)
			ret = push_entry(j, path, rel, &v[i], defaults);
	}
	sync_dirents_free(v, n);
	return ret;
}

/* A new id: the time, so that names sort as they were made, and randomness, so two never meet. */
static int id_make(char out[ID_MAX + 1])
{
	struct timespec ts;
	struct tm tm;
	uint32_t r;

	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		return -errno;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(out, ID_MAX + 1, "%04d%02d%02dT%02d%02d%02d.%03ldZ-%08x", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, r);
	return 0;
}

static int manifest_write(struct job *j)
{
	Boxkite__Store__Manifest m = BOXKITE__STORE__MANIFEST__INIT;
	_cleanup_free_ uint8_t *packed = NULL, *z = NULL;
	char key[sizeof("snapshots/") + ID_MAX];
	size_t len, zlen;
	int ret;

	m.version = MANIFEST_VERSION;
	m.id = j->snapshot;
	m.created_ms = bk_clock_realtime_ms();
	m.root = j->root;
	m.files = j->push.files;
	m.bytes = j->push.bytes;
	m.n_entries = j->nentries;
	m.entries = j->entries;
	len = boxkite__store__manifest__get_packed_size(&m);
	packed = malloc(len + 1);
	z = malloc(ZSTD_compressBound(len));
	if (!packed || !z)
		return bk_error_errno(&j->err, ENOMEM, "manifest of %zu bytes", len);
	boxkite__store__manifest__pack(&m, packed);
	zlen = ZSTD_compress(z, ZSTD_compressBound(len), packed, len, 3);
	if (ZSTD_isError(zlen))
		return bk_error_set(&j->err, BK_INTERNAL, 0, "zstd: %s", ZSTD_getErrorName(zlen));
	/* What a pull would refuse is not written: it could never be restored. */
	if (j->nentries > BK_MANIFEST_ENTRIES_MAX || !sync_manifest_fits(len, zlen))
		return bk_error_set(&j->err, BK_RESOURCE_EXHAUSTED, EFBIG,
				    "the manifest (%zu entries, %zu bytes, %zu compressed) is above what a pull reads "
				    "(%d entries, %u bytes, %u compressed)",
				    j->nentries, len, zlen, BK_MANIFEST_ENTRIES_MAX, BK_MANIFEST_PLAIN_MAX, BK_MANIFEST_MAX);
	/* Every blob durable before the manifest that names them exists. */
	if ((ret = j->store->ops->barrier(j->store, &j->err)) < 0)
		return ret;
	snprintf(key, sizeof(key), "snapshots/%s", j->snapshot);
	if ((ret = j->store->ops->put(j->store, key, z, zlen, &j->err)) < 0)
		return ret;
	j->push.bytes_uploaded += zlen;
	return j->store->ops->barrier(j->store, &j->err);
}

/* The seen set is only as good as the store it describes: a store that was emptied or replaced
 * (its random id, made by the first push, is gone or another) gets an empty set. Whatever removes
 * blobs from a store must remove its id too (docs/PROTOCOL.md, "Sync"). */
static int store_epoch(struct job *j)
{
	_cleanup_free_ uint8_t *id = NULL;
	char fresh[STORE_ID_LEN + 1];
	uint8_t r[STORE_ID_LEN / 2];
	size_t len = 0;
	int ret = j->store->ops->get(j->store, STORE_ID_KEY, STORE_ID_LEN, &id, &len, &j->err);

	if (ret == -ENOENT) {
		bk_error_free(TAKE_PTR(j->err));
		if (getrandom(r, sizeof(r), 0) != sizeof(r))
			return bk_error_errno(&j->err, errno, "getrandom");
		for (size_t i = 0; i < sizeof(r); i++)
			snprintf(fresh + 2 * i, 3, "%02x", r[i]);
		if ((ret = j->store->ops->put(j->store, STORE_ID_KEY, (uint8_t *)fresh, STORE_ID_LEN, &j->err)) < 0)
			return ret;
	} else if (ret < 0) {
		return ret;
	} else {
		snprintf(fresh, sizeof(fresh), "%.*s", (int)len, (const char *)id);
	}
	if (strcmp(fresh, j->seen->epoch) != 0) {
		bk_hashset_fini(&j->seen->blobs);
		snprintf(j->seen->epoch, sizeof(j->seen->epoch), "%s", fresh);
	}
	return 0;
}

int sync_run_push(struct job *j)
{
	char key[sizeof("snapshots/") + ID_MAX];
	int ret;

	if (!j->snapshot[0] && id_make(j->snapshot) < 0)
		return bk_error_errno(&j->err, errno, "getrandom");
	snprintf(key, sizeof(key), "snapshots/%s", j->snapshot);
	if ((ret = j->store->ops->has(j->store, key, &j->err)) != 0)
		return ret < 0 ? ret
			       : bk_error_set(&j->err, BK_ALREADY_EXISTS, EEXIST, "snapshot %s is already in %s", j->snapshot,
					      j->url);
	if ((ret = store_epoch(j)) < 0)
		return ret;
	ret = push_dir(j, j->root, "", j->defaults);
	/* Whatever happened, no upload may outlive the job. */
	if (uploads_wait(j) < 0 || ret < 0)
		return -EIO;
	j->push.blobs = j->distinct.n;
	return manifest_write(j);
}
