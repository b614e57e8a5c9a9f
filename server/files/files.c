#include "files/files.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <zstd.h>

#include "boundary/link.h"
#include "files/fileindex.h"
#include "fullio.h"
#include "log.h"
#include "rpc/workers.h"
#include "sbpath.h"
#include "utf8.h"

#define WORKERS 4
#define SHA256_LEN 32
#define QUOTA_CACHE_MS 2000
/* The index's bound: 32 bytes per 4 MiB block, so some 8 TiB of files' blocks. */
#define INDEX_BYTES (64u << 20)

/* Each worker's scratch: a chunk, and the zstd bound of a chunk for (de)compression. */
#define SCRATCH_SIZE (BK_FILE_CHUNK_MAX + ZSTD_COMPRESSBOUND(BK_FILE_CHUNK_MAX))

struct upload {
	struct upload *next;
	char id[2 * 16 + 1];
	char path[4096];
	uint64_t size, offset;
	bool check_sha256;  /* Begin gave the plain SHA-256: md hashes the content a second time */
	uint8_t sha256[SHA256_LEN];
	uint32_t mode;
	bool overwrite;
	bool make_parents;
	bool busy;          /* being committed, aborted, or resumed */
	bool reserved;      /* admitted by the quota, its size in bk_files.reserved until in the table */
	bool draining;      /* a worker is writing its queued chunks */
	bool whole;         /* the Begin carried the whole content (its call's data): written and
			       committed at once, never in the table */
	Boxkite__V1__Compression compression; /* whole: how the Begin's data is encoded */
	uint8_t content_hash[BK_HASH_LEN];    /* whole: the content hash the Begin gave */
	struct chunk_job *queue; /* chunks waiting to be written, by offset */
	int fd;             /* the unnamed file */
	bk_blockhash blocks; /* the hashes of the blocks written so far */
	EVP_MD_CTX *md;     /* the plain SHA-256 of what arrived so far, when asked for */
	struct timespec touched;
};

struct bk_files {
	bk_workers *workers;
	bk_fileindex *index;  /* what is known of files' contents (fileindex.h) */
	pthread_mutex_t lock; /* uploads, nuploads, reserved, usage */
	struct upload *uploads;
	unsigned nuploads;    /* including uploads being created */
	uint64_t reserved;    /* bytes of uploads admitted by the quota and being created */
	uint64_t usage;       /* the workspace's bytes at usage_at, plus commits since */
	struct timespec usage_at;
};

/* --- errors ---------------------------------------------------------------------------------- */

/* The status of a file operation's errno: DESIGN's mapping, with the cases that mean a path
 * tried to leave its root (EXDEV from RESOLVE_BENEATH, ELOOP from RESOLVE_NO_MAGICLINKS). */
static int file_status(int errnum)
{
	switch (errnum) {
	case EXDEV:
	case ELOOP:
		return BK_PERMISSION_DENIED;
	case ENOTEMPTY:
	case EBUSY:
	case ENOTDIR:
	case EISDIR:
		return BK_FAILED_PRECONDITION;
	case EAGAIN:
		return BK_UNAVAILABLE;
	default:
		return bk_status_from_errno(errnum);
	}
}

static const char *file_reason(int errnum)
{
	switch (errnum) {
	case EXDEV:
		return "outside its root (an absolute or escaping symlink?) or on another filesystem";
	case ELOOP:
		return "too many symlinks, or a /proc magic link";
	case EBUSY:
		return "is a root itself";
	default:
		return strerror(errnum);
	}
}

/* The most of a path an error message shows: its end, where a deep path says where. */
#define PATH_SHOWN 320

/* Where file orders go. */
static bk_link *files_link(const bk_call *call)
{
	return call->srv->files_link;
}

void bk_files_fail_reply(bk_call *call, int err, const bk_reply *reply)
{
	if (!reply)
		bk_call_failf(call, err == EPIPE || err == EAGAIN || err == ENOBUFS ? BK_UNAVAILABLE : BK_INTERNAL, 0,
			      "%s", bk_link_why(files_link(call), err, reply));
	else if (err == EAGAIN && strcmp(reply->step, "sandbox") == 0)
		bk_call_failf(call, BK_UNAVAILABLE, 0, "the sandbox is not ready: %s", reply->message);
	else if (strlen(reply->message) <= PATH_SHOWN)
		bk_call_failf(call, file_status(err), 0, "%s: %s", reply->message, file_reason(err));
	else /* a deep path: its end says where */
		bk_call_failf(call, file_status(err), 0, "...%s: %s",
			      reply->message + strlen(reply->message) - PATH_SHOWN, file_reason(err));
}

bool bk_files_path_ok(bk_call *call, const char *in, char *out, size_t size, const bk_root **root)
{
	_cleanup_error_ bk_error *err = NULL;

	if (!in[0]) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "empty path");
		return false;
	}
	if (bk_sandbox_path(&call->srv->cfg.roots, in, out, size, root, &err) < 0) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "'%.200s': %s", in, bk_error_msg(err));
		return false;
	}
	return true;
}

bool bk_files_ready(bk_call *call)
{
	if (call->srv->files_link && call->srv->files)
		return true;
	bk_call_failf(call, BK_UNAVAILABLE, 0, "no executor: this server does not serve files");
	return false;
}

/* A name fit for a protobuf string: itself when valid UTF-8; otherwise escaped (malloc'd,
 * recorded in *owned for the caller to free) with the exact bytes in *raw. */
static char *wire_name(char *name, ProtobufCBinaryData *raw, char **owned)
{
	size_t len = strlen(name);

	if (bk_utf8_valid(name) || !(*owned = malloc(4 * len + 1)))
		return name;
	*raw = (ProtobufCBinaryData){ .len = len, .data = (uint8_t *)name };
	return bk_utf8_escape(name, *owned, 4 * len + 1);
}

/* owned[2] receives what must be freed after the answer is sent (NULL if nothing). */
static void info_to_wire(Boxkite__V1__FileInfo *out, const Boxkite__Executor__FileInfo *in, char *owned[2])
{
	owned[0] = owned[1] = NULL;
	out->path = wire_name(in->name, &out->raw_path, &owned[0]);
	out->symlink_target = wire_name(in->symlink_target, &out->raw_symlink_target, &owned[1]);
	out->type = (Boxkite__V1__FileType)in->type;
	out->size = in->size;
	out->mode = in->mode;
	out->uid = in->uid;
	out->gid = in->gid;
	out->mtime_ns = in->mtime_ns;
}

/* --- stat, list, mkdir, remove, move --------------------------------------------------------- */

/* Orders whose reply is enough to answer, on the reader thread: no blocking I/O. */
static void stat_replied(void *arg, int err, bk_reply *reply, int *fds, size_t nfds)
{
	bk_call *call = arg;
	Boxkite__V1__FileStatResponse resp = BOXKITE__V1__FILE_STAT_RESPONSE__INIT;
	Boxkite__V1__FileInfo info = BOXKITE__V1__FILE_INFO__INIT;

	(void)fds;
	(void)nfds;
	if (err) {
		bk_files_fail_reply(call, err, reply);
	} else {
		char *owned[2];
		info_to_wire(&info, reply->done->info, owned);
		resp.info = &info;
		bk_call_reply(call, &resp.base);
		free(owned[0]);
		free(owned[1]);
	}
	bk_reply_free(reply);
}

void bk_handle_file_stat(bk_call *call, const ProtobufCMessage *request)
{
	const Boxkite__V1__FileStatRequest *rq = (const Boxkite__V1__FileStatRequest *)request;
	Boxkite__Executor__Stat op = BOXKITE__EXECUTOR__STAT__INIT;
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;
	char path[4096];

	if (!bk_files_ready(call) || !bk_files_path_ok(call, rq->path, path, sizeof(path), NULL))
		return;
	op.path = path;
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_STAT;
	order.stat = &op;
	bk_link_send(files_link(call), &order, NULL, 0, 0, stat_replied, call);
}

static void list_replied(void *arg, int err, bk_reply *reply, int *fds, size_t nfds)
{
	bk_call *call = arg;
	Boxkite__V1__FileListResponse resp = BOXKITE__V1__FILE_LIST_RESPONSE__INIT;
	_cleanup_free_ Boxkite__V1__FileInfo *infos = NULL;
	_cleanup_free_ Boxkite__V1__FileInfo **ptrs = NULL;
	_cleanup_free_ char **owned = NULL;
	const Boxkite__Executor__Listed *l;

	(void)fds;
	(void)nfds;
	if (err) {
		bk_files_fail_reply(call, err, reply);
		bk_reply_free(reply);
		return;
	}
	l = reply->listed;
	infos = calloc(l->n_entries + 1, sizeof(*infos));
	ptrs = calloc(l->n_entries + 1, sizeof(*ptrs));
	owned = calloc(2 * l->n_entries + 1, sizeof(*owned));
	if (!infos || !ptrs || !owned) {
		bk_call_failf(call, BK_RESOURCE_EXHAUSTED, 0, "out of memory");
		bk_reply_free(reply);
		return;
	}
	for (size_t i = 0; i < l->n_entries; i++) {
		boxkite__v1__file_info__init(&infos[i]);
		info_to_wire(&infos[i], l->entries[i], &owned[2 * i]);
		ptrs[i] = &infos[i];
	}
	resp.n_entries = l->n_entries;
	resp.entries = ptrs;
	/* The token is the last name returned, in hex (a name need not be UTF-8, a token must):
	 * the next page starts after it. */
	char token[2 * 256 + 1] = "";
	if (l->more && l->n_entries) {
		const char *last = l->entries[l->n_entries - 1]->name;
		for (size_t i = 0; last[i] && i < 256; i++)
			snprintf(token + 2 * i, 3, "%02x", (unsigned char)last[i]);
	}
	resp.next_page_token = token;
	bk_call_reply(call, &resp.base);
	for (size_t i = 0; i < 2 * l->n_entries; i++)
		free(owned[i]);
	bk_reply_free(reply);
}

void bk_handle_file_list(bk_call *call, const ProtobufCMessage *request)
{
	const Boxkite__V1__FileListRequest *rq = (const Boxkite__V1__FileListRequest *)request;
	Boxkite__Executor__List op = BOXKITE__EXECUTOR__LIST__INIT;
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;
	char path[4096];

	if (!bk_files_ready(call) || !bk_files_path_ok(call, rq->path, path, sizeof(path), NULL))
		return;
	if (rq->page_size > BK_LIST_PAGE_MAX) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "page_size %u is above %d", rq->page_size, BK_LIST_PAGE_MAX);
		return;
	}
	size_t tlen = strlen(rq->page_token);
	char after[256 + 1];
	if (tlen % 2 || tlen > 2 * 256) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "not a page token from a FileList answer");
		return;
	}
	for (size_t i = 0; i < tlen / 2; i++) {
		/* Two hex digits, nothing else ("%2x" would take " f" or "-1"); no NUL byte. */
		int hi = OPENSSL_hexchar2int((unsigned char)rq->page_token[2 * i]);
		int lo = OPENSSL_hexchar2int((unsigned char)rq->page_token[2 * i + 1]);
		if (hi < 0 || lo < 0 || (hi | lo) == 0) {
			bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "not a page token from a FileList answer");
			return;
		}
		after[i] = (char)(hi << 4 | lo);
	}
	after[tlen / 2] = '\0';
	op.path = path;
	op.after = after;
	op.limit = rq->page_size ? rq->page_size : BK_LIST_PAGE_DEFAULT;
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_LIST;
	order.list = &op;
	bk_link_send(files_link(call), &order, NULL, 0, 0, list_replied, call);
}

/* Mkdir, Move, Symlink: an empty answer; Remove: the count. */
static void done_replied(void *arg, int err, bk_reply *reply, int *fds, size_t nfds)
{
	bk_call *call = arg;

	(void)fds;
	(void)nfds;
	if (err) {
		bk_files_fail_reply(call, err, reply);
	} else if (call->method->desc->output == &boxkite__v1__file_remove_response__descriptor) {
		Boxkite__V1__FileRemoveResponse resp = BOXKITE__V1__FILE_REMOVE_RESPONSE__INIT;
		resp.removed = reply->done->count;
		bk_call_reply(call, &resp.base);
	} else {
		/* FileMkdirResponse, FileMoveResponse and FileSymlinkResponse are empty messages. */
		ProtobufCMessage empty;
		protobuf_c_message_init(call->method->desc->output, &empty);
		bk_call_reply(call, &empty);
	}
	bk_reply_free(reply);
}

void bk_handle_file_mkdir(bk_call *call, const ProtobufCMessage *request)
{
	const Boxkite__V1__FileMkdirRequest *rq = (const Boxkite__V1__FileMkdirRequest *)request;
	Boxkite__Executor__Mkdir op = BOXKITE__EXECUTOR__MKDIR__INIT;
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;
	char path[4096];

	if (!bk_files_ready(call) || !bk_files_path_ok(call, rq->path, path, sizeof(path), NULL))
		return;
	if (rq->mode > 0777) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "mode %o: permission bits only (at most 0777)", rq->mode);
		return;
	}
	op.path = path;
	op.parents = rq->parents;
	op.mode = rq->mode;
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_MKDIR;
	order.mkdir = &op;
	bk_link_send(files_link(call), &order, NULL, 0, 0, done_replied, call);
}

void bk_handle_file_remove(bk_call *call, const ProtobufCMessage *request)
{
	const Boxkite__V1__FileRemoveRequest *rq = (const Boxkite__V1__FileRemoveRequest *)request;
	Boxkite__Executor__Remove op = BOXKITE__EXECUTOR__REMOVE__INIT;
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;
	char path[4096];

	if (!bk_files_ready(call) || !bk_files_path_ok(call, rq->path, path, sizeof(path), NULL))
		return;
	op.path = path;
	op.recursive = rq->recursive;
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_REMOVE;
	order.remove = &op;
	bk_link_send(files_link(call), &order, NULL, 0, 0, done_replied, call);
}

void bk_handle_file_move(bk_call *call, const ProtobufCMessage *request)
{
	const Boxkite__V1__FileMoveRequest *rq = (const Boxkite__V1__FileMoveRequest *)request;
	Boxkite__Executor__Rename op = BOXKITE__EXECUTOR__RENAME__INIT;
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;
	char from[4096], to[4096];

	if (!bk_files_ready(call) || !bk_files_path_ok(call, rq->from, from, sizeof(from), NULL) || !bk_files_path_ok(call, rq->to, to, sizeof(to), NULL))
		return;
	op.from = from;
	op.to = to;
	op.overwrite = rq->overwrite;
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_RENAME;
	order.rename = &op;
	bk_link_send(files_link(call), &order, NULL, 0, 0, done_replied, call);
}

void bk_handle_file_symlink(bk_call *call, const ProtobufCMessage *request)
{
	const Boxkite__V1__FileSymlinkRequest *rq = (const Boxkite__V1__FileSymlinkRequest *)request;
	Boxkite__Executor__Symlink op = BOXKITE__EXECUTOR__SYMLINK__INIT;
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;
	const bk_root *root;
	char path[4096];

	if (!bk_files_ready(call) || !bk_files_path_ok(call, rq->path, path, sizeof(path), &root))
		return;
	if (!bk_symlink_contained(root, path, rq->target)) {
		bk_call_failf(call, BK_PERMISSION_DENIED, 0, "symlink %s -> %s: the target leads out of %s", path,
			      rq->target, root->path);
		return;
	}
	op.path = path;
	op.target = rq->target;
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_SYMLINK;
	order.symlink = &op;
	bk_link_send(files_link(call), &order, NULL, 0, 0, done_replied, call);
}

/* --- download -------------------------------------------------------------------------------- */

struct download {
	bk_call *call;
	int fd;
	uint64_t offset, length;
	bool zstd;
	bool sha256;        /* the plain SHA-256 of the whole file asked for */
};

static bool file_unchanged(const bk_filever *v, const struct stat *now)
{
	bk_filever w;

	bk_filever_of(now, &w);
	return bk_filever_same(v, &w);
}

/* One try at the answer to d: the file as st shows it, read and sealed. 0 when the call was
 * ended; -EAGAIN when the file changed while it was read (nothing sent: try again). */
static int download_try(struct download *d, const struct stat *st, uint8_t *buf, uint8_t *zbuf)
{
	Boxkite__V1__FileDownloadResponse resp = BOXKITE__V1__FILE_DOWNLOAD_RESPONSE__INIT;
	bk_files *f = d->call->srv->files;
	uint64_t left = (uint64_t)st->st_size - d->offset;
	/* Never more than the size this answer states: a file growing meanwhile is read up to the
	 * size measured, and the client sees the change in size, mtime or ctime next time. */
	size_t n = d->length < left ? (size_t)d->length : (size_t)left;
	uint8_t sum[SHA256_LEN], *dst;
	const uint8_t *src = NULL;
	bk_hash content;
	bk_answer *a;
	bk_digest dig;
	bk_filever v;
	struct stat after;
	ssize_t got = 0;
	int r;

	bk_filever_of(st, &v);
	if (d->sha256) {
		r = bk_sha256_fd(d->fd, (uint64_t)st->st_size, buf, BK_FILE_CHUNK_MAX, sum);
		if (r == -ENODATA)
			return -EAGAIN;
		if (r < 0) {
			bk_call_failf(d->call, file_status(-r), 0, "cannot read the file: %s", strerror(-r));
			return 0;
		}
		resp.sha256 = (ProtobufCBinaryData){ .len = SHA256_LEN, .data = sum };
	}
	if (bk_fileindex_get(f->index, &v, content, NULL) == 0)
		resp.content_hash = (ProtobufCBinaryData){ .len = BK_HASH_LEN, .data = content };
	resp.size = v.size;
	resp.offset = d->offset;
	resp.data_length = n;
	resp.eof = d->offset + n >= v.size;
	resp.mode = st->st_mode & 07777;
	resp.mtime_ns = v.mtime_ns;
	resp.ctime_ns = v.ctime_ns;
	if (d->zstd && n > 0) {
		/* Level 1, and only when it saves something: incompressible data goes as it is. */
		got = bk_pread_full(d->fd, buf, n, d->offset);
		if (got < 0) {
			bk_call_failf(d->call, file_status((int)-got), 0, "read: %s", strerror((int)-got));
			return 0;
		}
		if ((size_t)got != n)
			return -EAGAIN; /* it shrank */
		size_t z = ZSTD_compress(zbuf, ZSTD_compressBound(n), buf, n, 1);
		src = buf;
		if (!ZSTD_isError(z) && z < n) {
			src = zbuf;
			n = z;
			resp.compression = BOXKITE__V1__COMPRESSION__COMPRESSION_ZSTD;
		}
	}
	a = bk_call_answer(d->call, &resp.base, n, &dst);
	if (!a) {
		bk_call_failf(d->call, BK_RESOURCE_EXHAUSTED, 0, "out of memory for a %zu-byte answer", n);
		return 0;
	}
	/* Plain: read straight into the answer, which goes out from there. */
	if (src)
		memcpy(dst, src, n);
	else if (n)
		got = bk_pread_full(d->fd, dst, n, d->offset);
	if (got < 0) {
		bk_call_answer_drop(a);
		bk_call_failf(d->call, file_status((int)-got), 0, "read: %s", strerror((int)-got));
		return 0;
	}
	if (fstat(d->fd, &after) < 0 || !file_unchanged(&v, &after) || (size_t)got != resp.data_length) {
		bk_call_answer_drop(a);
		return -EAGAIN;
	}
	/* The one hash of these bytes on this side: the answer's MAC covers it, and a plain block
	 * read whole is its block hash, for the index. */
	if (bk_digest_of(dst, n, &dig) < 0) {
		bk_call_answer_drop(a);
		bk_call_failf(d->call, BK_INTERNAL, 0, "SHA-256 failed in libcrypto");
		return 0;
	}
	if (resp.compression == BOXKITE__V1__COMPRESSION__COMPRESSION_NONE && d->offset % BK_BLOCK_SIZE == 0 &&
	    (n == BK_BLOCK_SIZE || (n > 0 && resp.eof)))
		bk_fileindex_note(f->index, &v, d->offset / BK_BLOCK_SIZE, dig.sha256);
	bk_call_reply_data(d->call, a, &dig);
	return 0;
}

static void download_work(void *arg, void *scratch)
{
	struct download *d = arg;
	uint8_t *buf = scratch, *zbuf = buf + BK_FILE_CHUNK_MAX;
	struct stat st;
	int tries = 0, r;

	do {
		if (fstat(d->fd, &st) < 0) {
			bk_call_failf(d->call, BK_INTERNAL, 0, "fstat: %s", strerror(errno));
			goto out;
		}
		if (d->offset > (uint64_t)st.st_size) {
			bk_call_failf(d->call, BK_OUT_OF_RANGE, 0, "offset %llu is past the end (%lld bytes)",
				      (unsigned long long)d->offset, (long long)st.st_size);
			goto out;
		}
		r = download_try(d, &st, buf, zbuf);
	} while (r == -EAGAIN && ++tries < BK_READ_TRIES);
	if (r == -EAGAIN)
		bk_call_failf(d->call, BK_ABORTED, 0, "the file changed while it was read (%d tries): ask again",
			      BK_READ_TRIES);
out:
	bk_close(d->fd);
	free(d);
}

static void download_opened(void *arg, int err, bk_reply *reply, int *fds, size_t nfds)
{
	struct download *d = arg;

	(void)nfds;
	if (err) {
		bk_files_fail_reply(d->call, err, reply);
		free(d);
	} else {
		d->fd = fds[0];
		if (bk_workers_submit(d->call->srv->files->workers, download_work, d) < 0) {
			bk_call_failf(d->call, BK_UNAVAILABLE, 0, "boxkited is shutting down");
			bk_close(d->fd);
			free(d);
		}
	}
	bk_reply_free(reply);
}

void bk_handle_file_download(bk_call *call, const ProtobufCMessage *request)
{
	const Boxkite__V1__FileDownloadRequest *rq = (const Boxkite__V1__FileDownloadRequest *)request;
	Boxkite__Executor__OpenRead op = BOXKITE__EXECUTOR__OPEN_READ__INIT;
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;
	struct download *d;
	char path[4096];

	if (!bk_files_ready(call) || !bk_files_path_ok(call, rq->path, path, sizeof(path), NULL))
		return;
	if (rq->compression != BOXKITE__V1__COMPRESSION__COMPRESSION_NONE &&
	    rq->compression != BOXKITE__V1__COMPRESSION__COMPRESSION_ZSTD) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "unknown compression %d", rq->compression);
		return;
	}
	if (rq->sha256 && rq->offset) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "the whole file's SHA-256 comes with the answer at offset 0");
		return;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		bk_call_failf(call, BK_RESOURCE_EXHAUSTED, 0, "out of memory");
		return;
	}
	d->call = call;
	d->fd = -1;
	d->offset = rq->offset;
	d->length = rq->length && rq->length < BK_FILE_CHUNK_MAX ? rq->length : BK_FILE_CHUNK_MAX;
	d->zstd = rq->compression == BOXKITE__V1__COMPRESSION__COMPRESSION_ZSTD;
	d->sha256 = rq->sha256;
	op.path = path;
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_OPEN_READ;
	order.open_read = &op;
	bk_link_send(files_link(call), &order, NULL, 0, 0, download_opened, d);
}

/* --- upload ---------------------------------------------------------------------------------- */

static void upload_free(struct upload *u)
{
	bk_close(u->fd);
	bk_blockhash_fini(&u->blocks);
	EVP_MD_CTX_free(u->md);
	free(u);
}

static void upload_unlink(bk_files *f, struct upload *u)
{
	for (struct upload **pp = &f->uploads; *pp; pp = &(*pp)->next) {
		if (*pp == u) {
			*pp = u->next;
			break;
		}
	}
	f->nuploads--;
}

/* Find an upload and take it for one operation; NULL with the call answered otherwise. */
static struct upload *upload_take(bk_call *call, const char *id)
{
	bk_files *f = call->srv->files;
	struct upload *u;

	pthread_mutex_lock(&f->lock);
	for (u = f->uploads; u; u = u->next)
		if (strcmp(u->id, id) == 0)
			break;
	if (u && (u->busy || u->draining || u->queue)) {
		pthread_mutex_unlock(&f->lock);
		bk_call_failf(call, BK_ABORTED, 0, "upload %.40s: another request for it is in progress", id);
		return NULL;
	}
	if (u)
		u->busy = true;
	pthread_mutex_unlock(&f->lock);
	if (!u)
		bk_call_failf(call, BK_NOT_FOUND, 0, "no upload %.40s (finished, aborted, expired, or never started)", id);
	return u;
}

static void upload_release(bk_files *f, struct upload *u)
{
	pthread_mutex_lock(&f->lock);
	u->busy = false;
	clock_gettime(CLOCK_MONOTONIC, &u->touched);
	pthread_mutex_unlock(&f->lock);
}

/* Forget it: the unnamed file goes with its last descriptor, leaving nothing behind. */
static void upload_drop(bk_files *f, struct upload *u)
{
	pthread_mutex_lock(&f->lock);
	upload_unlink(f, u);
	pthread_mutex_unlock(&f->lock);
	upload_free(u);
}

struct upload_op {
	bk_call *call;
	struct upload *u;
};

static void begin_answer(bk_call *call, const char *upload_id, uint64_t offset)
{
	Boxkite__V1__FileUploadBeginResponse resp = BOXKITE__V1__FILE_UPLOAD_BEGIN_RESPONSE__INIT;

	resp.upload_id = (char *)upload_id;
	resp.confirmed_offset = offset;
	resp.max_chunk = BK_FILE_CHUNK_MAX;
	bk_call_reply(call, &resp.base);
}

/* Once in the table (or failed) an upload counts there, not as reserved. Called with the lock held. */
static void quota_unreserve(bk_files *f, struct upload *u)
{
	if (u->reserved)
		f->reserved -= u->size;
	u->reserved = false;
}

/* A whole upload (struct upload.whole) that ends here: its place and its reservation given
 * back, nothing of it left (its unnamed file goes with its descriptor). */
static void whole_drop(bk_files *f, struct upload *u)
{
	pthread_mutex_lock(&f->lock);
	quota_unreserve(f, u);
	f->nuploads--;
	pthread_mutex_unlock(&f->lock);
	upload_free(u);
}

static void whole_fail(struct upload_op *op, int status, const char *why)
{
	whole_drop(op->call->srv->files, op->u);
	bk_call_failf(op->call, status, 0, "%s", why);
	free(op);
}

static void commit_done(void *arg, int err, bk_reply *reply, int *fds, size_t nfds);

/* The worker's part of a whole upload: the Begin's data written into the unnamed file, its
 * content hash (and plain SHA-256, when given) checked, then committed as any upload is. */
static void whole_write(void *arg, void *scratch)
{
	struct upload_op *op = arg;
	struct upload *u = op->u;
	Boxkite__Executor__Commit c = BOXKITE__EXECUTOR__COMMIT__INIT;
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;
	const uint8_t *data = op->call->data, *sum = NULL;
	size_t len = op->call->data_len;
	uint8_t sha256[SHA256_LEN];
	char why[4200];
	bk_hash content;
	int ret;

	if (u->compression == BOXKITE__V1__COMPRESSION__COMPRESSION_ZSTD) {
		size_t got = ZSTD_decompress(scratch, BK_FILE_CHUNK_MAX, data, len);
		if (ZSTD_isError(got) || got != u->size) {
			whole_fail(op, BK_INVALID_ARGUMENT, "the content is not one zstd frame of the file's size");
			return;
		}
		data = scratch;
		len = got;
	} else if (len && bk_blockhash_whole(&u->blocks, len)) {
		sum = op->call->data_digest.sha256;
	}
	if ((ret = bk_pwrite_full(u->fd, data, len, 0)) < 0) {
		snprintf(why, sizeof(why), "%s: %s (nothing written)", u->path, strerror(-ret));
		whole_fail(op, file_status(-ret), why);
		return;
	}
	if ((len && bk_blockhash_add(&u->blocks, data, len, sum) < 0) || bk_blockhash_final(&u->blocks, content) < 0 ||
	    (u->md && (!EVP_DigestUpdate(u->md, data, len) || !EVP_DigestFinal_ex(u->md, sha256, NULL)))) {
		whole_fail(op, BK_INTERNAL, "SHA-256 failed in libcrypto (nothing written)");
		return;
	}
	if (CRYPTO_memcmp(content, u->content_hash, BK_HASH_LEN) || (u->md && CRYPTO_memcmp(sha256, u->sha256, SHA256_LEN))) {
		snprintf(why, sizeof(why), "%s: the %s of the bytes received is not the one given: nothing written", u->path,
			 CRYPTO_memcmp(content, u->content_hash, BK_HASH_LEN) ? "content hash" : "SHA-256");
		whole_fail(op, BK_DATA_LOSS, why);
		return;
	}
	u->offset = u->size;
	c.path = u->path;
	c.mode = u->mode;
	c.overwrite = u->overwrite;
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_COMMIT;
	order.commit = &c;
	bk_link_send(files_link(op->call), &order, &u->fd, 1, 0, commit_done, op);
}

static void begin_created(void *arg, int err, bk_reply *reply, int *fds, size_t nfds)
{
	struct upload_op *op = arg;
	struct upload *u = op->u;
	bk_files *f = op->call->srv->files;
	uint8_t rnd[16];

	(void)nfds;
	if (err)
		goto fail;
	u->fd = fds[0];
	if (u->check_sha256 && (!(u->md = EVP_MD_CTX_new()) || !EVP_DigestInit_ex(u->md, EVP_sha256(), NULL)))
		goto fail;
	if (bk_blockhash_init(&u->blocks, u->size) < 0 || getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		goto fail;
	if (u->whole) {
		/* Written, checked and committed by a worker (decompressing and hashing up to a block
		 * is no work for the link's thread); the call stays unanswered until then. */
		bk_reply_free(reply);
		if (bk_workers_submit(f->workers, whole_write, op) < 0)
			whole_fail(op, BK_RESOURCE_EXHAUSTED, "cannot queue the write");
		return;
	}
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(u->id + 2 * i, 3, "%02x", rnd[i]);
	clock_gettime(CLOCK_MONOTONIC, &u->touched);
	char id[sizeof(u->id)];
	memcpy(id, u->id, sizeof(id));
	/* In the table before the answer (the client's next request must find it), so the
	 * answer uses a copy of its id: from here on another request may drop it. */
	pthread_mutex_lock(&f->lock);
	u->next = f->uploads;
	f->uploads = u;
	quota_unreserve(f, u);
	pthread_mutex_unlock(&f->lock);
	begin_answer(op->call, id, 0);
	bk_reply_free(reply);
	free(op);
	return;
fail:
	/* Its place given back before the answer: the client's next Begin must find it free. */
	pthread_mutex_lock(&f->lock);
	f->nuploads--;
	quota_unreserve(f, u);
	pthread_mutex_unlock(&f->lock);
	upload_free(u);
	if (err)
		bk_files_fail_reply(op->call, err, reply);
	else
		bk_call_failf(op->call, BK_INTERNAL, 0, "cannot set up the upload");
	bk_reply_free(reply);
	free(op);
}

/* Make the upload's unnamed file. */
static void begin_create(struct upload_op *op)
{
	Boxkite__Executor__CreateTemp ct = BOXKITE__EXECUTOR__CREATE_TEMP__INIT;
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;

	ct.path = op->u->path;
	ct.make_parents = op->u->make_parents;
	ct.overwrite = op->u->overwrite;
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_CREATE_TEMP;
	order.create_temp = &ct;
	bk_link_send(files_link(op->call), &order, NULL, 0, 0, begin_created, op);
}

static bool in_workspace(const char *path)
{
	size_t n = strlen(BK_WORKSPACE);

	return strncmp(path, BK_WORKSPACE, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* The workspace quota (--workspace-quota): what its files hold, plus what open uploads will
 * add (those in the table and those admitted and being created), plus this upload, must stay
 * within it; admitting it reserves its size at once, under the same lock, so that Begins at
 * the same time cannot each pass alone. The walk is cached for QUOTA_CACHE_MS, and uploads
 * committed meanwhile are added to the cached figure. It bounds what uploads write; what
 * commands write is bounded by the volume's own size (see SECURITY.md). */
/* Admit size bytes more into the workspace, reserving them: true, or false with what is used
 * and on its way. Called with the lock held. */
static bool quota_admit_locked(bk_files *f, uint64_t quota, uint64_t size, uint64_t *used, uint64_t *pending)
{
	*used = f->usage;
	*pending = f->reserved;
	for (struct upload *u = f->uploads; u; u = u->next)
		if (in_workspace(u->path))
			*pending += u->size;
	if (*used + *pending + size > quota)
		return false;
	f->reserved += size;
	return true;
}

static void quota_decide(struct upload_op *op)
{
	bk_files *f = op->call->srv->files;
	uint64_t quota = op->call->srv->cfg.workspace_quota, used, pending;
	bool admit;

	pthread_mutex_lock(&f->lock);
	admit = quota_admit_locked(f, quota, op->u->size, &used, &pending);
	if (admit)
		op->u->reserved = true;
	else
		f->nuploads--;
	pthread_mutex_unlock(&f->lock);
	if (!admit) {
		bk_call_failf(op->call, BK_RESOURCE_EXHAUSTED, 0,
			      "%s: the workspace quota is %llu bytes; %llu are used and %llu on their way",
			      op->u->path, (unsigned long long)quota, (unsigned long long)used,
			      (unsigned long long)pending);
		upload_free(op->u);
		free(op);
		return;
	}
	begin_create(op);
}

static void usage_replied(void *arg, int err, bk_reply *reply, int *fds, size_t nfds)
{
	struct upload_op *op = arg;
	bk_files *f = op->call->srv->files;

	(void)fds;
	(void)nfds;
	if (err) {
		pthread_mutex_lock(&f->lock);
		f->nuploads--;
		pthread_mutex_unlock(&f->lock);
		upload_free(op->u);
		bk_files_fail_reply(op->call, err, reply);
		free(op);
	} else {
		pthread_mutex_lock(&f->lock);
		f->usage = reply->done->count;
		clock_gettime(CLOCK_MONOTONIC, &f->usage_at);
		pthread_mutex_unlock(&f->lock);
		quota_decide(op);
	}
	bk_reply_free(reply);
}

static void quota_check(struct upload_op *op)
{
	Boxkite__Executor__Usage usage = BOXKITE__EXECUTOR__USAGE__INIT;
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;
	bk_files *f = op->call->srv->files;
	bool fresh;

	pthread_mutex_lock(&f->lock);
	fresh = f->usage_at.tv_sec && bk_elapsed_us(&f->usage_at) < QUOTA_CACHE_MS * 1000;
	pthread_mutex_unlock(&f->lock);
	if (fresh) {
		quota_decide(op);
		return;
	}
	usage.path = BK_WORKSPACE;
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_USAGE;
	order.usage = &usage;
	bk_link_send(files_link(op->call), &order, NULL, 0, 0, usage_replied, op);
}

int bk_files_quota_take(bk_server *srv, const char *path, uint64_t size, bk_error **err)
{
	Boxkite__Executor__Usage usage = BOXKITE__EXECUTOR__USAGE__INIT;
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;
	uint64_t quota = srv->cfg.workspace_quota, used = 0, pending = 0;
	bk_files *f = srv->files;
	bk_reply *reply = NULL;
	int ret;

	if (!quota || !in_workspace(path))
		return 0;
	/* With the figure at hand when it is fresh; else, or when that refuses (it counts a file
	 * being replaced twice), with the workspace walked now. */
	for (int walked = 0; walked < 2; walked++) {
		bool fresh;
		pthread_mutex_lock(&f->lock);
		fresh = f->usage_at.tv_sec && bk_elapsed_us(&f->usage_at) < QUOTA_CACHE_MS * 1000;
		if ((walked || fresh) && quota_admit_locked(f, quota, size, &used, &pending)) {
			pthread_mutex_unlock(&f->lock);
			return 0;
		}
		pthread_mutex_unlock(&f->lock);
		if (walked)
			break;
		usage.path = BK_WORKSPACE;
		order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_USAGE;
		order.usage = &usage;
		if ((ret = bk_link_call(srv->files_link, &order, &reply, NULL, NULL, err)) < 0)
			return bk_error_prefix(err, ret, "the workspace's usage");
		pthread_mutex_lock(&f->lock);
		f->usage = reply->done->count;
		clock_gettime(CLOCK_MONOTONIC, &f->usage_at);
		pthread_mutex_unlock(&f->lock);
		bk_reply_free(reply);
	}
	return bk_error_set(err, BK_RESOURCE_EXHAUSTED, ENOSPC,
			    "%s: the workspace quota is %llu bytes; %llu are used and %llu on their way", path,
			    (unsigned long long)quota, (unsigned long long)used, (unsigned long long)pending);
}

void bk_files_quota_give(bk_server *srv, const char *path, uint64_t size, bool landed)
{
	bk_files *f = srv->files;

	if (!srv->cfg.workspace_quota || !in_workspace(path))
		return;
	pthread_mutex_lock(&f->lock);
	f->reserved -= size;
	if (landed)
		f->usage += size;
	pthread_mutex_unlock(&f->lock);
}

void bk_handle_upload_begin(bk_call *call, const ProtobufCMessage *request)
{
	const Boxkite__V1__FileUploadBeginRequest *rq = (const Boxkite__V1__FileUploadBeginRequest *)request;
	bk_files *f = call->srv->files;
	struct upload_op *op;
	struct upload *u;
	char path[4096];

	if (!bk_files_ready(call) || !bk_files_path_ok(call, rq->path, path, sizeof(path), NULL))
		return;
	if (rq->sha256.len != 0 && rq->sha256.len != SHA256_LEN) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "sha256, when given, is the %d-byte SHA-256 of the content",
			      SHA256_LEN);
		return;
	}
	if (rq->mode > 0777) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "mode %o: permission bits only (at most 0777)", rq->mode);
		return;
	}
	if (rq->content_hash.len || call->data_len) {
		/* The whole content in this request (PROTOCOL.md, "A file in one request"). */
		unsigned long long n = call->data_len;
		if (rq->compression == BOXKITE__V1__COMPRESSION__COMPRESSION_ZSTD)
			n = ZSTD_getFrameContentSize(call->data, call->data_len);
		else if (rq->compression != BOXKITE__V1__COMPRESSION__COMPRESSION_NONE)
			n = ZSTD_CONTENTSIZE_ERROR;
		if (rq->content_hash.len != BK_HASH_LEN || rq->upload_id[0]) {
			bk_call_failf(call, BK_INVALID_ARGUMENT, 0,
				      "a Begin with data carries the %d-byte content hash of it, and starts an upload "
				      "(no upload_id)", BK_HASH_LEN);
			return;
		}
		if (rq->size > BK_FILE_CHUNK_MAX) {
			bk_call_failf(call, BK_OUT_OF_RANGE, 0, "%s: %llu bytes in one request: at most one block (%u bytes)",
				      path, (unsigned long long)rq->size, BK_FILE_CHUNK_MAX);
			return;
		}
		if (n != rq->size) {
			bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "%s: the data is not the file's %llu bytes, %s", path,
				      (unsigned long long)rq->size,
				      rq->compression == BOXKITE__V1__COMPRESSION__COMPRESSION_NONE
					      ? "plain"
					      : "in one zstd frame that says its size");
			return;
		}
	}
	if (rq->size > call->srv->cfg.file_max) {
		bk_call_failf(call, BK_RESOURCE_EXHAUSTED, 0, "%s: %llu bytes is above the %llu-byte file limit", path,
			      (unsigned long long)rq->size, (unsigned long long)call->srv->cfg.file_max);
		return;
	}
	if (rq->upload_id[0]) {
		/* Resume: the same file, or it is not a resume. Released before the answer (the
		 * client's next request must find it free), so the answer uses nothing of u: once
		 * released, another request may drop it. */
		if (!(u = upload_take(call, rq->upload_id)))
			return;
		bool same = !strcmp(u->path, path) && u->size == rq->size && u->check_sha256 == (rq->sha256.len != 0) &&
			    (!u->check_sha256 || !memcmp(u->sha256, rq->sha256.data, SHA256_LEN));
		uint64_t offset = u->offset;
		upload_release(f, u);
		if (same)
			begin_answer(call, rq->upload_id, offset);
		else
			bk_call_failf(call, BK_INVALID_ARGUMENT, 0,
				      "upload %s is of another file (path, size or SHA-256 differ)", rq->upload_id);
		return;
	}
	pthread_mutex_lock(&f->lock);
	if (f->nuploads >= call->srv->cfg.uploads_max) {
		pthread_mutex_unlock(&f->lock);
		bk_call_failf(call, BK_RESOURCE_EXHAUSTED, 0, "%u uploads are open: finish or abort one",
			      call->srv->cfg.uploads_max);
		return;
	}
	f->nuploads++;
	pthread_mutex_unlock(&f->lock);
	u = calloc(1, sizeof(*u));
	op = calloc(1, sizeof(*op));
	if (!u || !op) {
		free(u);
		free(op);
		pthread_mutex_lock(&f->lock);
		f->nuploads--;
		pthread_mutex_unlock(&f->lock);
		bk_call_failf(call, BK_RESOURCE_EXHAUSTED, 0, "out of memory");
		return;
	}
	snprintf(u->path, sizeof(u->path), "%s", path);
	u->size = rq->size;
	u->check_sha256 = rq->sha256.len != 0;
	if (u->check_sha256)
		memcpy(u->sha256, rq->sha256.data, SHA256_LEN);
	u->mode = rq->mode ? rq->mode : 0644;
	u->overwrite = rq->overwrite;
	u->make_parents = rq->make_parents;
	u->whole = rq->content_hash.len != 0;
	u->compression = rq->compression;
	if (u->whole)
		memcpy(u->content_hash, rq->content_hash.data, BK_HASH_LEN);
	u->fd = -1;
	op->call = call;
	op->u = u;
	if (call->srv->cfg.workspace_quota && in_workspace(path))
		quota_check(op);
	else
		begin_create(op);
}

/* A chunk waiting for its turn. Chunks are written strictly in order, but a client may send the
 * next ones before the previous is answered: they wait here, sorted by offset, at most
 * BK_CHUNK_QUEUE_MAX of them (BK_GAP_WAIT_MS at most for a gap before them), and one worker at
 * a time drains an upload's queue ("draining"). */
struct chunk_job {
	struct chunk_job *next;
	bk_call *call;        /* its data field is the chunk */
	const Boxkite__V1__FileUploadChunkRequest *rq;
	uint64_t offset, len; /* len: uncompressed */
	struct timespec queued;
	uint64_t confirmed;   /* when refused out of order: the upload's confirmed offset then */
};

static void chunk_answer(bk_call *call, uint64_t confirmed)
{
	Boxkite__V1__FileUploadChunkResponse resp = BOXKITE__V1__FILE_UPLOAD_CHUNK_RESPONSE__INIT;

	resp.confirmed_offset = confirmed;
	bk_call_reply(call, &resp.base);
}

/* Answer every queued chunk of u (taken off it under the lock by the caller) with msg. */
static void jobs_fail(struct chunk_job *j, int status, const char *msg)
{
	while (j) {
		struct chunk_job *next = j->next;
		bk_call_failf(j->call, status, 0, "%s", msg);
		free(j);
		j = next;
	}
}

/* A chunk that is not next: say where the client must send from. */
static void chunk_refuse_out_of_order(bk_call *call, uint64_t offset, uint64_t confirmed)
{
	bk_call_failf(call, BK_FAILED_PRECONDITION, 0, "chunk at offset %llu, but %llu bytes are confirmed: send from there",
		      (unsigned long long)offset, (unsigned long long)confirmed);
}

enum chunk_outcome { CHUNK_WRITTEN, CHUNK_REFUSED, CHUNK_WRITE_FAILED };

/* Decompress, write, add to the block hashes (and the plain hash when asked for). The MAC has
 * checked the bytes already; a plain chunk that is a whole block comes with its block hash,
 * the digest the MAC was checked with. On failure *status and msg say why. Only the upload's
 * draining worker runs this. */
static enum chunk_outcome chunk_write(struct upload *u, const struct chunk_job *j, void *scratch, int *status,
				      char *msg, size_t msgsz)
{
	const uint8_t *data = j->call->data, *sum = NULL;
	size_t len = j->call->data_len;
	int ret;

	if (j->rq->compression == BOXKITE__V1__COMPRESSION__COMPRESSION_ZSTD) {
		size_t got = ZSTD_decompress(scratch, BK_FILE_CHUNK_MAX, data, len);
		if (ZSTD_isError(got) || got != j->len) {
			*status = BK_INVALID_ARGUMENT;
			snprintf(msg, msgsz, "chunk at %llu is not one zstd frame of at most %u bytes with its size",
				 (unsigned long long)j->offset, BK_FILE_CHUNK_MAX);
			return CHUNK_REFUSED;
		}
		data = scratch;
		len = got;
	} else if (bk_blockhash_whole(&u->blocks, len)) {
		sum = j->call->data_digest.sha256;
	}
	if ((ret = bk_pwrite_full(u->fd, data, len, j->offset)) < 0) {
		*status = file_status(-ret);
		snprintf(msg, msgsz, "%.300s: %s (upload dropped, nothing written)", u->path, strerror(-ret));
		return CHUNK_WRITE_FAILED;
	}
	if (bk_blockhash_add(&u->blocks, data, len, sum) < 0 || (u->md && !EVP_DigestUpdate(u->md, data, len))) {
		*status = BK_INTERNAL;
		snprintf(msg, msgsz, "%.300s: SHA-256 failed in libcrypto (upload dropped, nothing written)", u->path);
		return CHUNK_WRITE_FAILED;
	}
	return CHUNK_WRITTEN;
}

/* The upload's worker: write queued chunks while the next one in order is there. */
static void upload_drain(void *arg, void *scratch)
{
	struct upload_op *op = arg;
	struct upload *u = op->u;
	bk_files *f = op->call->srv->files;

	free(op);
	for (;;) {
		struct chunk_job *j, *rest = NULL;
		enum chunk_outcome out;
		uint64_t confirmed = 0;
		char msg[512];
		int status = BK_OK;

		pthread_mutex_lock(&f->lock);
		j = u->queue;
		if (!j || j->offset != u->offset) {
			u->draining = false;
			pthread_mutex_unlock(&f->lock);
			return;
		}
		u->queue = j->next;
		pthread_mutex_unlock(&f->lock);

		out = chunk_write(u, j, scratch, &status, msg, sizeof(msg));

		bool more = false;
		pthread_mutex_lock(&f->lock);
		if (out == CHUNK_WRITTEN) {
			u->offset += j->len;
			confirmed = u->offset;
			clock_gettime(CLOCK_MONOTONIC, &u->touched);
			/* Settled before the answer goes out: a commit that follows it at once must find
			 * the upload idle. */
			more = u->queue && u->queue->offset == u->offset;
			u->draining = more;
		} else {
			/* What was queued behind a failed chunk cannot be written either. */
			rest = u->queue;
			u->queue = NULL;
			u->draining = false;
			if (out == CHUNK_WRITE_FAILED)
				upload_unlink(f, u); /* a failed write ends the upload: its space comes back */
		}
		pthread_mutex_unlock(&f->lock);

		if (out == CHUNK_WRITTEN) {
			chunk_answer(j->call, confirmed);
			free(j);
			if (more)
				continue;
			return;
		}
		bk_call_failf(j->call, status, 0, "%s", msg);
		free(j);
		jobs_fail(rest, BK_FAILED_PRECONDITION, "an earlier chunk of this upload failed: send again from the confirmed offset");
		if (out == CHUNK_WRITE_FAILED)
			upload_free(u);
		return;
	}
}

/* The uncompressed length of a chunk, or UINT64_MAX when a zstd frame does not declare it. */
static uint64_t chunk_len(const bk_call *call, const Boxkite__V1__FileUploadChunkRequest *rq)
{
	if (rq->compression != BOXKITE__V1__COMPRESSION__COMPRESSION_ZSTD)
		return call->data_len;
	unsigned long long n = ZSTD_getFrameContentSize(call->data, call->data_len);
	return n == ZSTD_CONTENTSIZE_ERROR || n == ZSTD_CONTENTSIZE_UNKNOWN ? UINT64_MAX : n;
}

static unsigned queued_chunks(const struct upload *u)
{
	unsigned n = 0;

	for (const struct chunk_job *j = u->queue; j; j = j->next)
		n++;
	return n;
}

/* Where the data confirmed or queued without a gap ends. */
static uint64_t contiguous_end(const struct upload *u)
{
	uint64_t end = u->offset;

	for (const struct chunk_job *j = u->queue; j && j->offset == end; j = j->next)
		end += j->len;
	return end;
}

void bk_handle_upload_chunk(bk_call *call, const ProtobufCMessage *request)
{
	const Boxkite__V1__FileUploadChunkRequest *rq = (const Boxkite__V1__FileUploadChunkRequest *)request;
	bk_files *f = call->srv->files;
	struct chunk_job *j, **pp;
	struct upload_op *op = NULL;
	struct upload *u;
	uint64_t len, end, confirmed;

	if (!bk_files_ready(call))
		return;
	if (rq->compression != BOXKITE__V1__COMPRESSION__COMPRESSION_NONE &&
	    rq->compression != BOXKITE__V1__COMPRESSION__COMPRESSION_ZSTD) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "unknown compression %d", rq->compression);
		return;
	}
	len = chunk_len(call, rq);
	if (len > BK_FILE_CHUNK_MAX) {
		if (rq->compression == BOXKITE__V1__COMPRESSION__COMPRESSION_ZSTD)
			bk_call_failf(call, BK_INVALID_ARGUMENT, 0,
				      "chunk is not one zstd frame of at most %u bytes with its size", BK_FILE_CHUNK_MAX);
		else
			bk_call_failf(call, BK_OUT_OF_RANGE, 0, "a chunk of %zu bytes is past the %u-byte chunk limit",
				      call->data_len, BK_FILE_CHUNK_MAX);
		return;
	}
	j = calloc(1, sizeof(*j));
	if (!j) {
		bk_call_failf(call, BK_RESOURCE_EXHAUSTED, 0, "out of memory");
		return;
	}
	pthread_mutex_lock(&f->lock);
	for (u = f->uploads; u; u = u->next)
		if (strcmp(u->id, rq->upload_id) == 0)
			break;
	if (!u || u->busy) {
		pthread_mutex_unlock(&f->lock);
		free(j);
		if (u)
			bk_call_failf(call, BK_ABORTED, 0, "upload %.40s is being committed or aborted", rq->upload_id);
		else
			bk_call_failf(call, BK_NOT_FOUND, 0,
				      "no upload %.40s (finished, aborted, expired, or never started)", rq->upload_id);
		return;
	}
	confirmed = u->offset;
	end = contiguous_end(u);
	/* A chunk already confirmed (its answer was lost) is answered again, not rewritten. */
	if (rq->offset < confirmed && rq->offset + len <= confirmed) {
		pthread_mutex_unlock(&f->lock);
		free(j);
		chunk_answer(call, confirmed);
		return;
	}
	/* Not offset + len > size: a client chooses the offset, and the sum may wrap. */
	if (len > u->size || rq->offset > u->size - len) {
		pthread_mutex_unlock(&f->lock);
		free(j);
		bk_call_failf(call, BK_OUT_OF_RANGE, 0, "chunk of %llu bytes at %llu goes past the %llu-byte file",
			      (unsigned long long)len, (unsigned long long)rq->offset, (unsigned long long)u->size);
		return;
	}
	/* The next in order; or, as chunks sent one after another may overtake each other on the
	 * way in (each is MAC-checked on its own thread before it gets here), one further ahead at
	 * a whole-chunk boundary, which waits for the gap before it to fill — for BK_GAP_WAIT_MS at
	 * most (bk_files_expire). */
	bool ahead_ok = rq->offset > end && rq->offset % BK_FILE_CHUNK_MAX == 0 &&
			rq->offset < confirmed + (uint64_t)BK_CHUNK_QUEUE_MAX * BK_FILE_CHUNK_MAX &&
			(len == BK_FILE_CHUNK_MAX || rq->offset + len == u->size);
	for (pp = &u->queue; *pp && (*pp)->offset < rq->offset; pp = &(*pp)->next)
		;
	if ((rq->offset != end && !ahead_ok) || (*pp && (*pp)->offset < rq->offset + len) || len == 0 ||
	    queued_chunks(u) >= BK_CHUNK_QUEUE_MAX) {
		pthread_mutex_unlock(&f->lock);
		free(j);
		if (len == 0 && rq->offset == confirmed)
			chunk_answer(call, confirmed);
		else
			chunk_refuse_out_of_order(call, rq->offset, confirmed);
		return;
	}
	j->call = call;
	j->rq = rq;
	j->offset = rq->offset;
	j->len = len;
	clock_gettime(CLOCK_MONOTONIC, &j->queued);
	j->next = *pp;
	*pp = j;
	clock_gettime(CLOCK_MONOTONIC, &u->touched);
	if (!u->draining && u->queue->offset == u->offset && (op = calloc(1, sizeof(*op)))) {
		u->draining = true;
		op->call = call;
		op->u = u;
	}
	pthread_mutex_unlock(&f->lock);
	if (op && bk_workers_submit(f->workers, upload_drain, op) < 0) {
		/* Shutting down: answer what is queued; the upload goes with the server. */
		pthread_mutex_lock(&f->lock);
		struct chunk_job *rest = u->queue;
		u->queue = NULL;
		u->draining = false;
		pthread_mutex_unlock(&f->lock);
		free(op);
		jobs_fail(rest, BK_UNAVAILABLE, "boxkited is shutting down");
	}
}

static void commit_done(void *arg, int err, bk_reply *reply, int *fds, size_t nfds)
{
	struct upload_op *op = arg;
	struct upload *u = op->u;
	bk_files *f = op->call->srv->files;
	Boxkite__V1__FileUploadCommitResponse resp = BOXKITE__V1__FILE_UPLOAD_COMMIT_RESPONSE__INIT;
	Boxkite__V1__FileInfo info = BOXKITE__V1__FILE_INFO__INIT;
	struct stat st;

	(void)fds;
	(void)nfds;
	if (err && u->whole) {
		/* No id to commit it again by: it goes. */
		bk_files_fail_reply(op->call, err, reply);
		whole_drop(f, u);
	} else if (err) {
		/* The content is whole and verified: keep it, the client may fix the cause (a name
		 * taken, a directory made read-only) and commit again, or abort. */
		upload_release(f, u);
		bk_files_fail_reply(op->call, err, reply);
	} else {
		if (fstat(u->fd, &st) == 0) {
			bk_filever v;
			info.type = BOXKITE__V1__FILE_TYPE__FILE_TYPE_REGULAR;
			info.size = (uint64_t)st.st_size;
			info.mode = st.st_mode & 07777;
			info.uid = st.st_uid;
			info.gid = st.st_gid;
			info.mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
			/* In place now, as it stands (its ctime moved with the link): what it holds is
			 * known without reading it again. */
			bk_filever_of(&st, &v);
			if (v.size == u->size)
				bk_fileindex_put(f->index, &v, u->blocks.blocks);
		}
		info.path = u->path;
		/* Out of the table first: a request naming it after the answer finds nothing. (A
		 * whole upload was never in it: it gives back its place and reservation here.) */
		pthread_mutex_lock(&f->lock);
		upload_unlink(f, u);
		quota_unreserve(f, u);
		if (in_workspace(u->path))
			f->usage += u->size;
		pthread_mutex_unlock(&f->lock);
		if (u->whole) {
			Boxkite__V1__FileUploadBeginResponse begun = BOXKITE__V1__FILE_UPLOAD_BEGIN_RESPONSE__INIT;
			begun.max_chunk = BK_FILE_CHUNK_MAX;
			begun.info = &info;
			bk_call_reply(op->call, &begun.base);
		} else {
			resp.info = &info;
			bk_call_reply(op->call, &resp.base);
		}
		upload_free(u);
	}
	bk_reply_free(reply);
	free(op);
}

void bk_handle_upload_commit(bk_call *call, const ProtobufCMessage *request)
{
	const Boxkite__V1__FileUploadCommitRequest *rq = (const Boxkite__V1__FileUploadCommitRequest *)request;
	Boxkite__Executor__Commit c = BOXKITE__EXECUTOR__COMMIT__INIT;
	bk_order order = BOXKITE__EXECUTOR__ORDER__INIT;
	bk_files *f = call->srv->files;
	uint8_t sum[SHA256_LEN];
	bk_hash content;
	struct upload_op *op;
	EVP_MD_CTX *md;
	struct upload *u;
	const char *wrong = NULL;

	if (!bk_files_ready(call))
		return;
	if (rq->content_hash.len != BK_HASH_LEN) {
		bk_call_failf(call, BK_INVALID_ARGUMENT, 0, "a commit carries the %d-byte content hash of what it commits",
			      BK_HASH_LEN);
		return;
	}
	if (!(u = upload_take(call, rq->upload_id)))
		return;
	if (u->offset != u->size) {
		/* Released before the answer (the client's next chunk must find it free), which
		 * therefore is written before: once released, another request may drop u. */
		char msg[4200];
		snprintf(msg, sizeof(msg), "%s: %llu of %llu bytes received", u->path, (unsigned long long)u->offset,
			 (unsigned long long)u->size);
		upload_release(f, u);
		bk_call_failf(call, BK_FAILED_PRECONDITION, 0, "%s", msg);
		return;
	}
	/* Both sides' content hashes, each of the blocks it hashed: they agree, or the bytes that
	 * arrived are not the content the client means (a source that changed between an upload
	 * and its resumption, say). */
	if (bk_blockhash_final(&u->blocks, content) < 0 || CRYPTO_memcmp(content, rq->content_hash.data, BK_HASH_LEN))
		wrong = "content hash";
	if (!wrong && u->md) {
		/* Finish a copy of the running hash: the upload's own context stays usable. */
		md = EVP_MD_CTX_new();
		if (!md || !EVP_MD_CTX_copy_ex(md, u->md) || !EVP_DigestFinal_ex(md, sum, NULL) ||
		    CRYPTO_memcmp(sum, u->sha256, SHA256_LEN) != 0)
			wrong = "SHA-256";
		EVP_MD_CTX_free(md);
	}
	if (wrong) {
		pthread_mutex_lock(&f->lock);
		upload_unlink(f, u);
		pthread_mutex_unlock(&f->lock);
		bk_call_failf(call, BK_DATA_LOSS, 0, "%s: the %s of the bytes received is not the one given: nothing written",
			      u->path, wrong);
		upload_free(u);
		return;
	}
	op = calloc(1, sizeof(*op));
	if (!op) {
		upload_release(f, u);
		bk_call_failf(call, BK_RESOURCE_EXHAUSTED, 0, "out of memory");
		return;
	}
	op->call = call;
	op->u = u;
	c.path = u->path;
	c.mode = u->mode;
	c.overwrite = u->overwrite;
	order.kind_case = BOXKITE__EXECUTOR__ORDER__KIND_COMMIT;
	order.commit = &c;
	bk_link_send(files_link(call), &order, &u->fd, 1, 0, commit_done, op);
}

void bk_handle_upload_abort(bk_call *call, const ProtobufCMessage *request)
{
	const Boxkite__V1__FileUploadAbortRequest *rq = (const Boxkite__V1__FileUploadAbortRequest *)request;
	Boxkite__V1__FileUploadAbortResponse resp = BOXKITE__V1__FILE_UPLOAD_ABORT_RESPONSE__INIT;
	struct upload *u;

	if (!bk_files_ready(call) || !(u = upload_take(call, rq->upload_id)))
		return;
	upload_drop(call->srv->files, u);
	bk_call_reply(call, &resp.base);
}

/* --- life cycle ------------------------------------------------------------------------------ */

int bk_files_start(bk_server *srv, bk_error **err)
{
	bk_files *f = calloc(1, sizeof(*f));
	int ret;

	if (!f)
		return bk_error_errno(err, ENOMEM, "files");
	pthread_mutex_init(&f->lock, NULL);
	f->index = bk_fileindex_new(INDEX_BYTES);
	if (!f->index) {
		free(f);
		return bk_error_errno(err, ENOMEM, "files");
	}
	ret = bk_workers_start(&f->workers, WORKERS, SCRATCH_SIZE, err);
	if (ret < 0) {
		bk_fileindex_free(f->index);
		free(f);
		return ret;
	}
	srv->files = f;
	return 0;
}

bk_fileindex *bk_files_index(bk_server *srv)
{
	return srv->files->index;
}

void bk_files_stop(bk_server *srv)
{
	bk_files *f = srv->files;

	if (!f)
		return;
	bk_workers_stop(f->workers);
	while (f->uploads) {
		struct upload *u = f->uploads;
		f->uploads = u->next;
		jobs_fail(u->queue, BK_UNAVAILABLE, "boxkited is shutting down");
		upload_free(u);
	}
	bk_fileindex_free(f->index);
	pthread_mutex_destroy(&f->lock);
	free(f);
	srv->files = NULL;
}

void bk_files_reset(bk_server *srv)
{
	bk_files *f = srv->files;
	struct upload *all;

	if (!f)
		return;
	pthread_mutex_lock(&f->lock);
	all = f->uploads;
	f->uploads = NULL;
	f->nuploads = 0;
	/* The workspace is empty now: measured again at the next upload. */
	f->usage = 0;
	f->usage_at = (struct timespec){ 0 };
	pthread_mutex_unlock(&f->lock);
	while (all) {
		struct upload *next = all->next;
		upload_free(all);
		all = next;
	}
	bk_fileindex_clear(f->index);
}

void bk_files_expire(bk_server *srv)
{
	bk_files *f = srv->files;
	struct timespec now;
	struct upload *dead = NULL;
	struct chunk_job *stale = NULL;

	if (!f)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	pthread_mutex_lock(&f->lock);
	for (struct upload *u = f->uploads; u; u = u->next) {
		/* Chunks waiting behind a gap that did not fill: the client skipped one. */
		uint64_t end = contiguous_end(u);
		for (struct chunk_job **jp = &u->queue; *jp;) {
			struct chunk_job *j = *jp;
			if (j->offset > end && bk_elapsed_us(&j->queued) >= BK_GAP_WAIT_MS * 1000) {
				j->confirmed = u->offset;
				*jp = j->next;
				j->next = stale;
				stale = j;
			} else {
				jp = &j->next;
			}
		}
	}
	for (struct upload **pp = &f->uploads; *pp;) {
		struct upload *u = *pp;
		int64_t idle_ms = ((int64_t)now.tv_sec - u->touched.tv_sec) * 1000 +
				  (now.tv_nsec - u->touched.tv_nsec) / 1000000;
		if (!u->busy && !u->draining && !u->queue && idle_ms >= srv->cfg.upload_idle_ms) {
			*pp = u->next;
			f->nuploads--;
			u->next = dead;
			dead = u;
		} else {
			pp = &u->next;
		}
	}
	pthread_mutex_unlock(&f->lock);
	while (stale) {
		struct chunk_job *next = stale->next;
		chunk_refuse_out_of_order(stale->call, stale->offset, stale->confirmed);
		free(stale);
		stale = next;
	}
	while (dead) {
		struct upload *next = dead->next;
		bk_log(BK_LOG_INFO, "upload %s of %s expired after %lld s idle: dropped", dead->id, dead->path,
		       (long long)(srv->cfg.upload_idle_ms / 1000));
		upload_free(dead);
		dead = next;
	}
}
