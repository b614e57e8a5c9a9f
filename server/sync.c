#include "sync.h"

#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <zstd.h>

#include "boxkite/store/snapshot.pb-c.h"
#include "contenthash.h"
#include "fileindex.h"
#include "files.h"
#include "fullio.h"
#include "link.h"
#include "log.h"
#include "sbpath.h"
#include "store.h"
#include "workers.h"

#define MANIFEST_VERSION 1
#define ID_MAX 128
#define LIST_PAGE 1000
#define BLOB_KEY_MAX (sizeof("blobs/xx/") + 2 * BK_HASH_LEN)
#define ZSTD_LEVEL 1
/* Blocks compressed and uploaded at once, beside the thread that reads and hashes: the push is a
 * pipeline of one reader and UPLOADERS compressors (a buffer each, and one being read). */
#define UPLOADERS 2
#define BUFS (UPLOADERS + 1)
#define STORE_ID_KEY "store-id"
#define STORE_ID_LEN 32

/* Not stored unless asked for (default_excludes): caches and installed packages, which a
 * restore can rebuild. */
static const char *const default_excludes[] = {
	"node_modules", ".cache", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache",
};

/* --- a set of hashes ------------------------------------------------------------------------- */

/* Open addressing on the hash's own first bytes (they are SHA-256 output: uniform). */
struct hashset {
	bk_hash *slots;
	uint8_t *used;
	size_t cap, n; /* cap a power of two, kept at most half full */
};

static size_t slot_of(const struct hashset *s, const bk_hash h)
{
	uint64_t x;

	memcpy(&x, h, sizeof(x));
	return (size_t)x & (s->cap - 1);
}

static bool hashset_has(const struct hashset *s, const bk_hash h)
{
	if (!s->cap)
		return false;
	for (size_t i = slot_of(s, h);; i = (i + 1) & (s->cap - 1)) {
		if (!s->used[i])
			return false;
		if (memcmp(s->slots[i], h, BK_HASH_LEN) == 0)
			return true;
	}
}

static int hashset_grow(struct hashset *s)
{
	struct hashset bigger = { .cap = s->cap ? 2 * s->cap : 1024 };

	bigger.slots = malloc(bigger.cap * sizeof(*bigger.slots));
	bigger.used = calloc(bigger.cap, 1);
	if (!bigger.slots || !bigger.used) {
		free(bigger.slots);
		free(bigger.used);
		return -ENOMEM;
	}
	for (size_t i = 0; i < s->cap; i++) {
		if (!s->used[i])
			continue;
		size_t j = slot_of(&bigger, s->slots[i]);
		while (bigger.used[j])
			j = (j + 1) & (bigger.cap - 1);
		memcpy(bigger.slots[j], s->slots[i], BK_HASH_LEN);
		bigger.used[j] = 1;
	}
	bigger.n = s->n;
	free(s->slots);
	free(s->used);
	*s = bigger;
	return 0;
}

/* 1 when added, 0 when it was there, -ENOMEM. */
static int hashset_add(struct hashset *s, const bk_hash h)
{
	size_t i;

	if (hashset_has(s, h))
		return 0;
	if (2 * (s->n + 1) > s->cap && hashset_grow(s) < 0)
		return -ENOMEM;
	for (i = slot_of(s, h); s->used[i]; i = (i + 1) & (s->cap - 1))
		;
	memcpy(s->slots[i], h, BK_HASH_LEN);
	s->used[i] = 1;
	s->n++;
	return 1;
}

static void hashset_fini(struct hashset *s)
{
	free(s->slots);
	free(s->used);
	*s = (struct hashset){ 0 };
}

/* --- the module ------------------------------------------------------------------------------ */

/* The blobs known to be in one store: the local index that makes "does the store have it" free
 * after the first time. In memory, so a restarted boxkited asks the store again. */
struct seen {
	struct seen *next;
	struct hashset blobs;
	char epoch[STORE_ID_LEN + 1]; /* the store's id when blobs was filled (see store_epoch) */
	char url[];
};

struct progress {
	bool running;
	const char *operation;
	char snapshot[ID_MAX + 1];
	uint64_t files_done, bytes_done, files_total, bytes_total, blobs_uploaded;
	int64_t started_ms;
	int status;
	char message[512];
};

struct bk_sync {
	pthread_mutex_t lock; /* all below */
	pthread_cond_t idle;  /* running went false */
	struct progress p;
	bool thread_live;     /* thread below has not been joined */
	pthread_t thread;
	struct seen *seen;
	bk_workers *uploaders; /* compress and put a push's blobs */
};

enum op { PUSH, PULL };

struct job {
	bk_server *srv;
	bk_call *call;         /* NULL: start-up's restore, or a reset's push */
	enum op op;
	char url[1100];
	char root[4096];       /* the tree, a normalized sandbox path */
	bk_root tree;          /* the same, for bk_symlink_contained */
	char snapshot[ID_MAX + 1];
	char **exclude;        /* patterns (the request's, or copies) */
	size_t nexclude;
	bool mirror;
	bool defaults;         /* push: the default excludes too */
	bk_store *store;
	struct seen *seen;     /* the store's, in bk_sync (only this job uses it while it runs) */
	uint8_t *buf;          /* pull: a block */
	ZSTD_DCtx *dctx;
	/* push: the blocks being uploaded (upload_work), under ulock */
	pthread_mutex_t ulock;
	pthread_cond_t ucond;  /* a buffer came free, or the uploads ended */
	uint8_t *bufs[BUFS];
	bool busy[BUFS];
	unsigned inflight;
	struct hashset pending; /* blobs submitted, not yet put */
	bk_error *upload_err;  /* the first upload's failure */
	/* results */
	Boxkite__V1__SyncPushResponse push;
	Boxkite__V1__SyncPullResponse pull;
	struct hashset distinct; /* push: the snapshot's blobs */
	/* push: the manifest being built */
	Boxkite__Store__Entry **entries;
	size_t nentries, capentries;
	bk_error *err;
};

static struct bk_sync *sync_of(bk_server *srv)
{
	return srv->sync;
}

static void progress_add(struct job *j, uint64_t files, uint64_t bytes, uint64_t blobs)
{
	struct bk_sync *s = sync_of(j->srv);

	pthread_mutex_lock(&s->lock);
	s->p.files_done += files;
	s->p.bytes_done += bytes;
	s->p.blobs_uploaded += blobs;
	pthread_mutex_unlock(&s->lock);
}

/* --- orders to the file worker ----------------------------------------------------------------- */

static int order_call(struct job *j, bk_order *order, bk_reply **reply, int *fd, const char *what, const char *path)
{
	size_t nfds = fd ? 1 : 0;
	int ret = bk_link_call(j->srv->files_link, order, reply, fd, fd ? &nfds : NULL, &j->err);

	if (ret < 0)
		return bk_error_prefix(&j->err, ret, "%s %.300s", what, path);
	if (fd && nfds != 1) {
		bk_reply_free(*reply);
		return bk_error_set(&j->err, BK_INTERNAL, EPROTO, "%s %.300s: no descriptor came", what, path);
	}
	return 0;
}

struct dirent_info {
	char *name, *target;
	uint32_t type, mode;
	uint64_t size;
	int64_t mtime_ns;
};

static void dirents_free(struct dirent_info *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].name);
		free(v[i].target);
	}
	free(v);
}

/* Every entry of a directory, page after page. */
static int list_dir(struct job *j, const char *path, struct dirent_info **out, size_t *nout)
{
	struct dirent_info *v = NULL;
	size_t n = 0, cap = 0;
	char after[256 + 1] = "";
	bool more = true;

	while (more) {
		Boxkite__Executor__List op = BOXKITE__EXECUTOR__LIST__INIT;
		bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;
		bk_reply *reply = NULL;
		Boxkite__Executor__Listed *l;

		op.path = (char *)path;
		op.after = after;
		op.limit = LIST_PAGE;
		order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_LIST;
		order.list = &op;
		if (order_call(j, &order, &reply, NULL, "list", path) < 0) {
			dirents_free(v, n);
			return -EIO;
		}
		l = reply->listed;
		more = l->more && l->n_entries;
		if (n + l->n_entries > cap) {
			cap = n + l->n_entries + 64;
			struct dirent_info *grown = realloc(v, cap * sizeof(*v));
			if (!grown) {
				bk_reply_free(reply);
				dirents_free(v, n);
				return bk_error_errno(&j->err, ENOMEM, "list %.300s", path);
			}
			v = grown;
		}
		for (size_t i = 0; i < l->n_entries; i++) {
			const Boxkite__Executor__FileInfo *e = l->entries[i];
			v[n] = (struct dirent_info){ .name = strdup(e->name), .target = strdup(e->symlink_target),
						     .type = e->type, .mode = e->mode & 07777, .size = e->size,
						     .mtime_ns = e->mtime_ns };
			if (!v[n].name || !v[n].target) {
				n++;
				bk_reply_free(reply);
				dirents_free(v, n);
				return bk_error_errno(&j->err, ENOMEM, "list %.300s", path);
			}
			n++;
		}
		if (more)
			snprintf(after, sizeof(after), "%s", l->entries[l->n_entries - 1]->name);
		bk_reply_free(reply);
	}
	*out = v;
	*nout = n;
	return 0;
}

/* --- excludes ---------------------------------------------------------------------------------- */

static bool excluded_by(const char *pattern, const char *name, const char *rel)
{
	return strchr(pattern, '/') ? fnmatch(pattern, rel, FNM_PATHNAME | FNM_PERIOD) == 0
				    : fnmatch(pattern, name, FNM_PERIOD) == 0;
}

static bool excluded(const struct job *j, bool defaults, const char *name, const char *rel)
{
	for (size_t i = 0; i < j->nexclude; i++)
		if (excluded_by(j->exclude[i], name, rel))
			return true;
	for (size_t i = 0; defaults && i < BK_ARRAY_SIZE(default_excludes); i++)
		if (excluded_by(default_excludes[i], name, rel))
			return true;
	return false;
}

/* --- blobs ------------------------------------------------------------------------------------- */

static void blob_key(const bk_hash h, char out[BLOB_KEY_MAX])
{
	char hex[2 * BK_HASH_LEN + 1];

	bk_block_name(h, hex);
	snprintf(out, BLOB_KEY_MAX, "blobs/%.2s/%s", hex, hex);
}

/* Whether the store has blob h (or it is on its way there): the seen set, else the store (and
 * then the set). 1, 0, -errno. */
static int blob_present(struct job *j, const bk_hash h)
{
	char key[BLOB_KEY_MAX];
	bool known;
	int ret;

	pthread_mutex_lock(&j->ulock);
	known = hashset_has(&j->seen->blobs, h) || hashset_has(&j->pending, h);
	pthread_mutex_unlock(&j->ulock);
	if (known)
		return 1;
	blob_key(h, key);
	ret = j->store->ops->has(j->store, key, &j->err);
	pthread_mutex_lock(&j->ulock);
	if (ret == 1 && hashset_add(&j->seen->blobs, h) < 0)
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

	blob_key(u->h, key);
	if (ZSTD_isError(z))
		bk_error_set(&err, BK_INTERNAL, 0, "zstd: %s", ZSTD_getErrorName(z));
	else
		j->store->ops->put(j->store, key, scratch, z, &err);
	pthread_mutex_lock(&j->ulock);
	if (!err && hashset_add(&j->seen->blobs, u->h) < 0)
		bk_error_errno(&err, ENOMEM, "blob set");
	if (!err) {
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
	if (!ZSTD_isError(z))
		progress_add(j, 0, 0, 1);
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
	ret = hashset_add(&j->pending, h);
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

/* Blob h, checked, into j->buf: exactly n plain bytes whose SHA-256 is h. DATA_LOSS otherwise. */
static int blob_get(struct job *j, const bk_hash h, size_t n, const char *path)
{
	char key[BLOB_KEY_MAX];
	_cleanup_free_ uint8_t *z = NULL;
	uint8_t sum[BK_HASH_LEN];
	size_t zlen, got;
	int ret;

	blob_key(h, key);
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

/* --- push -------------------------------------------------------------------------------------- */

static void entry_free(Boxkite__Store__Entry *e)
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
		entry_free(e);
		return bk_error_errno(&j->err, ENOMEM, "manifest");
	}
	if (j->nentries == j->capentries) {
		size_t cap = j->capentries ? 2 * j->capentries : 1024;
		Boxkite__Store__Entry **grown = realloc(j->entries, cap * sizeof(*grown));
		if (!grown) {
			entry_free(e);
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
	if (order_call(j, &order, &reply, &fd, "open", path) < 0)
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
		if (hashset_add(&j->distinct, blocks[k]) < 0)
			return bk_error_errno(&j->err, ENOMEM, "blob set");
	j->push.files++;
	j->push.bytes += e->size;
	j->push.files_read += read_any;
	progress_add(j, 1, e->size, 0);
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
	if (excluded(j, defaults, d->name, rel)) {
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

	if (list_dir(j, path, &v, &n) < 0)
		return -EIO;
	for (size_t i = 0; i < n && ret == 0; i++) {
		if (atomic_load(&j->srv->stopping))
			ret = bk_error_set(&j->err, BK_UNAVAILABLE, 0, "boxkited is shutting down");
		else
			ret = push_entry(j, path, rel, &v[i], defaults);
	}
	dirents_free(v, n);
	return ret;
}

static int id_valid(const char *id)
{
	size_t len = strlen(id);

	return len >= 1 && len <= ID_MAX && id[0] != '.' && strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
								"0123456789._-") == len;
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
	if (zlen > BK_MANIFEST_MAX || len > BK_MANIFEST_MAX)
		return bk_error_set(&j->err, BK_RESOURCE_EXHAUSTED, 0, "the manifest (%zu bytes) is above %u bytes", len,
				    BK_MANIFEST_MAX);
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
		hashset_fini(&j->seen->blobs);
		snprintf(j->seen->epoch, sizeof(j->seen->epoch), "%s", fresh);
	}
	return 0;
}

static int run_push(struct job *j)
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

/* --- pull -------------------------------------------------------------------------------------- */

static void manifest_freep(Boxkite__Store__Manifest **m)
{
	if (*m)
		boxkite__store__manifest__free_unpacked(*m, NULL);
}

static int manifest_read(struct job *j, const char *id, Boxkite__Store__Manifest **out)
{
	char key[sizeof("snapshots/") + ID_MAX];
	_cleanup_free_ uint8_t *z = NULL, *plain = NULL;
	unsigned long long size;
	size_t zlen, got;
	int ret;

	snprintf(key, sizeof(key), "snapshots/%s", id);
	if ((ret = j->store->ops->get(j->store, key, BK_MANIFEST_MAX, &z, &zlen, &j->err)) < 0)
		return bk_error_prefix(&j->err, ret, "snapshot %s", id);
	size = ZSTD_getFrameContentSize(z, zlen);
	if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN || size > BK_MANIFEST_MAX ||
	    !(plain = malloc((size_t)size + 1)))
		return bk_error_set(&j->err, BK_DATA_LOSS, 0, "snapshot %s: not a manifest", id);
	got = ZSTD_decompress(plain, (size_t)size, z, zlen);
	if (ZSTD_isError(got) || got != size || !(*out = boxkite__store__manifest__unpack(NULL, got, plain)))
		return bk_error_set(&j->err, BK_DATA_LOSS, 0, "snapshot %s: not a manifest", id);
	if ((*out)->version != MANIFEST_VERSION) {
		uint32_t version = (*out)->version;
		boxkite__store__manifest__free_unpacked(*out, NULL);
		*out = NULL;
		return bk_error_set(&j->err, BK_FAILED_PRECONDITION, 0, "snapshot %s: manifest version %u, not %d", id,
				    version, MANIFEST_VERSION);
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
	if (order_call(j, &order, &reply, NULL, "remove", path) < 0)
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
		if (order_call(j, order, &reply, fd, what, path) == 0) {
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
	if (order_call(j, &order, &reply, NULL, "stat", path) == 0) {
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
	if (order_call(j, &order, &reply, NULL, "mkdir", path) < 0)
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
	if (order_call(j, &order, &reply, NULL, "stat", path) == 0) {
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

static int pull_file(struct job *j, const Boxkite__Store__Entry *e, const char *path)
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
	if (order_call(j, &order, &reply, &fd, "create", path) < 0)
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
		progress_add(j, 0, len, 0);
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
	progress_add(j, 1, 0, 0);
	return 0;
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

	if (list_dir(j, dir, &v, &nv) < 0)
		return -EIO;
	for (size_t i = 0; i < nv && ret == 0; i++) {
		char path[4096], rel[4096];
		Boxkite__Store__Entry key = { .path = { 0 } }, *kp = &key, **hit;

		snprintf(path, sizeof(path), "%s/%s", dir, v[i].name);
		snprintf(rel, sizeof(rel), "%s%s%s", dir_rel, dir_rel[0] ? "/" : "", v[i].name);
		if (excluded(j, false, v[i].name, rel))
			continue;
		key.path = (ProtobufCBinaryData){ .len = strlen(rel), .data = (uint8_t *)rel };
		hit = bsearch(&kp, sorted, n, sizeof(*sorted), rel_cmp);
		if (!hit)
			ret = fw_remove(j, path, true);
		else if (v[i].type == BOXKITE__V1__FILE_TYPE__FILE_TYPE_DIRECTORY)
			ret = mirror_dir(j, sorted, n, path, rel);
	}
	dirents_free(v, nv);
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
		Boxkite__Store__Manifest *m = NULL;
		if (!id_valid(names[i]))
			continue;
		if (manifest_read(j, names[i], &m) < 0) {
			/* One unreadable manifest does not hide the others. */
			bk_log(BK_LOG_WARN, "sync: %s: %s", j->url, bk_error_msg(j->err));
			bk_error_free(TAKE_PTR(j->err));
			continue;
		}
		if (m->created_ms > best || (m->created_ms == best && strcmp(names[i], j->snapshot) > 0)) {
			best = m->created_ms;
			snprintf(j->snapshot, sizeof(j->snapshot), "%s", names[i]);
		}
		boxkite__store__manifest__free_unpacked(m, NULL);
	}
	size_t ids = 0;
	for (size_t i = 0; i < n; i++) {
		ids += id_valid(names[i]);
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

static int run_pull(struct job *j)
{
	__attribute__((cleanup(manifest_freep))) Boxkite__Store__Manifest *m = NULL;
	_cleanup_free_ Boxkite__Store__Entry **sorted = NULL;
	struct bk_sync *s = sync_of(j->srv);
	int ret = 0;

	if (!j->snapshot[0] && latest_id(j) < 0)
		return -ENOENT;
	if (manifest_read(j, j->snapshot, &m) < 0 || manifest_check(j, m) < 0)
		return -EIO;
	pthread_mutex_lock(&s->lock);
	snprintf(s->p.snapshot, sizeof(s->p.snapshot), "%s", j->snapshot);
	s->p.files_total = m->files;
	s->p.bytes_total = m->bytes;
	pthread_mutex_unlock(&s->lock);
	for (size_t i = 0; i < m->n_entries && ret == 0; i++) {
		const Boxkite__Store__Entry *e = m->entries[i];
		char path[4096];

		if (atomic_load(&j->srv->stopping))
			return bk_error_set(&j->err, BK_UNAVAILABLE, 0, "boxkited is shutting down");
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

/* --- jobs -------------------------------------------------------------------------------------- */

static void job_free(struct job *j)
{
	for (size_t i = 0; i < j->nentries; i++)
		entry_free(j->entries[i]);
	free(j->entries);
	hashset_fini(&j->distinct);
	bk_store_free(j->store);
	ZSTD_freeDCtx(j->dctx);
	free(j->buf);
	for (int i = 0; i < BUFS; i++)
		free(j->bufs[i]);
	hashset_fini(&j->pending);
	bk_error_free(j->upload_err);
	pthread_cond_destroy(&j->ucond);
	pthread_mutex_destroy(&j->ulock);
	for (size_t i = 0; i < j->nexclude; i++)
		free(j->exclude[i]);
	free(j->exclude);
	bk_error_free(j->err);
	free(j);
}

/* A job for url (checked against the configured stores) on the tree at path. NULL with *err. */
static struct job *job_new(bk_server *srv, bk_call *call, enum op op, const char *url, const char *path,
			   const char *snapshot, char *const *exclude, size_t nexclude, bk_error **err)
{
	struct job *j = calloc(1, sizeof(*j));
	const bk_root *root;
	const char *why;

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
	if (bk_store_url_allowed(url, srv->cfg.sync_store, srv->cfg.nsync_store, err) < 0)
		goto fail;
	snprintf(j->url, sizeof(j->url), "%s", url);
	if (bk_sandbox_path(&srv->cfg.roots, path[0] ? path : BK_WORKSPACE, j->root, sizeof(j->root), &root, &why) < 0) {
		bk_error_set(err, BK_INVALID_ARGUMENT, 0, "'%.200s': %s", path, why);
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
	if (snapshot[0] && !id_valid(snapshot)) {
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
	if (bk_store_open(j->url, &j->store, err) < 0)
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
		if (strcmp(e->url, j->url) == 0)
			break;
	if (!e) {
		if (!(e = calloc(1, sizeof(*e) + strlen(j->url) + 1)))
			return -ENOMEM;
		strcpy(e->url, j->url);
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
	snprintf(s->p.snapshot, sizeof(s->p.snapshot), "%s", j->snapshot);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static int job_run(struct job *j)
{
	struct bk_sync *s = sync_of(j->srv);
	int ret = j->op == PUSH ? run_push(j) : run_pull(j);

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
		bk_log(BK_LOG_WARN, "sync %s %s: %s", j->op == PUSH ? "push" : "pull", j->url, bk_error_msg(j->err));
	else
		bk_log(BK_LOG_INFO, "sync %s %s: snapshot %s", j->op == PUSH ? "push" : "pull", j->url, j->snapshot);
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
	j = job_new(call->srv, call, PUSH, rq->url, rq->path, rq->snapshot, rq->exclude, rq->n_exclude, &err);
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
	j = job_new(call->srv, call, PULL, rq->url, rq->path, rq->snapshot, rq->exclude, rq->n_exclude, &err);
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
	Boxkite__Store__Manifest **ms = NULL;
	char **names = NULL;
	size_t n = 0, k = 0;

	(void)scratch;
	if (j->store->ops->list(j->store, "snapshots", &names, &n, &j->err) < 0) {
		bk_call_fail(call, TAKE_PTR(j->err));
		job_free(j);
		return;
	}
	infos = calloc(n + 1, sizeof(*infos));
	ptrs = calloc(n + 1, sizeof(*ptrs));
	ms = calloc(n + 1, sizeof(*ms));
	for (size_t i = 0; infos && ptrs && ms && i < n; i++) {
		if (!id_valid(names[i]) || manifest_read(j, names[i], &ms[k]) < 0) {
			bk_error_free(TAKE_PTR(j->err));
			continue;
		}
		boxkite__v1__snapshot_info__init(&infos[k]);
		infos[k].name = names[i];
		infos[k].files = ms[k]->files;
		infos[k].bytes = ms[k]->bytes;
		infos[k].created_ms = ms[k]->created_ms;
		infos[k].path = ms[k]->root;
		k++;
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
	if (!infos || !ptrs || !ms) {
		bk_call_failf(call, BK_RESOURCE_EXHAUSTED, 0, "out of memory");
	} else {
		resp.n_snapshots = k;
		resp.snapshots = ptrs;
		bk_call_reply(call, &resp.base);
	}
	for (size_t i = 0; ms && i < k; i++)
		boxkite__store__manifest__free_unpacked(ms[i], NULL);
	free(ms);
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
	j = job_new(call->srv, call, PULL, rq->url, "", "", NULL, 0, &err);
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
		if (!(j = job_new(srv, NULL, PULL, url, "", "", NULL, 0, err)))
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

int bk_sync_final_push(bk_server *srv, char *snapshot, size_t size, bk_error **err)
{
	struct job *j;
	int ret;

	if (size)
		snapshot[0] = '\0';
	if (!srv->cfg.sync_on_reset)
		return 0;
	if (!(j = job_new(srv, NULL, PUSH, srv->cfg.sync_on_reset, "", "", NULL, 0, err)))
		return -EINVAL;
	ret = job_run_here(j, err);
	if (ret == 0 && size)
		snprintf(snapshot, size, "%s", j->snapshot);
	job_free(j);
	return ret;
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
	if (s->thread_live)
		pthread_join(s->thread, NULL);
	bk_workers_stop(s->uploaders);
	while (s->seen) {
		struct seen *next = s->seen->next;
		hashset_fini(&s->seen->blobs);
		free(s->seen);
		s->seen = next;
	}
	pthread_cond_destroy(&s->idle);
	pthread_mutex_destroy(&s->lock);
	free(s);
	srv->sync = NULL;
}
