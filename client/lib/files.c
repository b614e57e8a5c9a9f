/* The file rpcs: stat, list, mkdir, remove, move, the upload primitives, and whole-file upload
 * and download over them with SHA-256 end to end and optional zstd on the wire. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <zstd.h>

#include "request.h"
#include "contenthash.h"
#include "fullio.h"

#define SHA256_LEN 32
/* The most data one chunk carries either way: one block of the content hash, which is the
 * server's 4 MiB, and our buffers' size even if a server offers more. */
#define CHUNK_MAX BK_BLOCK_SIZE
_Static_assert(BK_CONTENT_BLOCK == BK_BLOCK_SIZE, "the public header's block is the content hash's");
#define ZSTD_LEVEL 1

BK_DEFINE_PTR_CLEANUP(md_ctx_freep, EVP_MD_CTX, EVP_MD_CTX_free)
BK_DEFINE_PTR_CLEANUP(zstd_dctx_freep, ZSTD_DCtx, ZSTD_freeDCtx)

/* Every file rpc: the client's default timeout, the decoded answer in *resp. */
static int file_call(bk_client *c, const char *method, const ProtobufCMessage *req,
		     const ProtobufCMessageDescriptor *desc, void *resp, bk_status *st)
{
	bool verified;

	return bk_client_call(c, method, req, desc, (ProtobufCMessage **)resp, 0, &verified, st);
}

/* A string field that may come with its exact bytes (raw, for a name that is not UTF-8: escaped
 * in text, exact in raw); C wants the bytes. */
static void name_bytes(const char *text, const ProtobufCBinaryData *raw, const char **p, size_t *len)
{
	if (raw->len) {
		*p = (const char *)raw->data;
		*len = raw->len;
	} else {
		*p = text;
		*len = strlen(text);
	}
}

/* out's two strings in one allocation sized to them: path, NUL, target, NUL (freed through
 * path). 0, or -ENOMEM. */
static int info_names(bk_file_info *out, const char *path, size_t path_len, const char *target, size_t target_len)
{
	out->path = malloc(path_len + target_len + 2);
	if (!out->path)
		return -ENOMEM;
	memcpy(out->path, path, path_len);
	out->path[path_len] = '\0';
	out->symlink_target = out->path + path_len + 1;
	memcpy(out->symlink_target, target, target_len);
	out->symlink_target[target_len] = '\0';
	return 0;
}

static int info_from(bk_file_info *out, const Boxkite__V1__FileInfo *in, const char *method, bk_status *st)
{
	const char *path, *target;
	size_t path_len, target_len;

	memset(out, 0, sizeof(*out));
	if (!in)
		return bk_status_set(st, BK_DATA_LOSS, 0, true, "%s: the answer carries no file info", method);
	name_bytes(in->path, &in->raw_path, &path, &path_len);
	name_bytes(in->symlink_target, &in->raw_symlink_target, &target, &target_len);
	/* A name is a C string: one with a NUL inside could not be used as one. */
	if (memchr(path, '\0', path_len) || memchr(target, '\0', target_len))
		return bk_status_set(st, BK_DATA_LOSS, 0, true, "%s: a name with a NUL byte in the answer", method);
	if (info_names(out, path, path_len, target, target_len) < 0)
		return bk_status_set(st, BK_RESOURCE_EXHAUSTED, 0, false, "out of memory");
	out->type = in->type >= BOXKITE__V1__FILE_TYPE__FILE_TYPE_REGULAR &&
				    in->type <= BOXKITE__V1__FILE_TYPE__FILE_TYPE_OTHER
			    ? (int)in->type
			    : BK_FILE_UNKNOWN;
	out->size = in->size;
	out->mode = in->mode;
	out->uid = in->uid;
	out->gid = in->gid;
	out->mtime_ns = in->mtime_ns;
	return BK_OK;
}

void bk_file_info_free(bk_file_info *info)
{
	if (!info)
		return;
	free(info->path); /* symlink_target lives in the same allocation */
	info->path = info->symlink_target = NULL;
}

void bk_file_list_free(bk_file_info *entries, size_t n)
{
	if (!entries)
		return;
	for (size_t i = 0; i < n; i++)
		bk_file_info_free(&entries[i]);
	free(entries);
}

int bk_file_stat(bk_client *c, const char *path, bk_file_info *out, bk_status *st)
{
	Boxkite__V1__FileStatRequest req = BOXKITE__V1__FILE_STAT_REQUEST__INIT;
	_cleanup_response_ Boxkite__V1__FileStatResponse *resp = NULL;
	int code;

	memset(out, 0, sizeof(*out));
	req.path = (char *)path;
	code = file_call(c, "FileStat", &req.base, &boxkite__v1__file_stat_response__descriptor, &resp, st);
	if (code != BK_OK)
		return code;
	return info_from(out, resp->info, "FileStat", st);
}

int bk_file_list(bk_client *c, const char *path, uint32_t page_size, const char *page_token,
		 bk_file_info **entries, size_t *n, char *next_token, bk_status *st)
{
	Boxkite__V1__FileListRequest req = BOXKITE__V1__FILE_LIST_REQUEST__INIT;
	_cleanup_response_ Boxkite__V1__FileListResponse *resp = NULL;
	bk_file_info *v;
	int code;

	*entries = NULL;
	*n = 0;
	next_token[0] = '\0';
	req.path = (char *)path;
	req.page_size = page_size;
	req.page_token = (char *)(page_token ? page_token : "");
	code = file_call(c, "FileList", &req.base, &boxkite__v1__file_list_response__descriptor, &resp, st);
	if (code != BK_OK)
		return code;
	/* A truncated token would page from the wrong place without anyone noticing, and one that
	 * does not move would page forever. */
	if (strlen(resp->next_page_token) >= BK_PAGE_TOKEN_MAX)
		return bk_status_set(st, BK_DATA_LOSS, 0, true, "FileList: page token longer than %d bytes",
				     BK_PAGE_TOKEN_MAX - 1);
	if (resp->next_page_token[0] && strcmp(resp->next_page_token, req.page_token) == 0)
		return bk_status_set(st, BK_DATA_LOSS, 0, true, "FileList: the next page token is this page's");
	if (resp->n_entries == 0) {
		strcpy(next_token, resp->next_page_token);
		return BK_OK;
	}
	v = calloc(resp->n_entries, sizeof(*v));
	if (!v)
		return bk_status_set(st, BK_RESOURCE_EXHAUSTED, 0, false, "out of memory for %zu entries",
				     resp->n_entries);
	for (size_t i = 0; i < resp->n_entries; i++) {
		code = info_from(&v[i], resp->entries[i], "FileList", st);
		if (code != BK_OK) {
			bk_file_list_free(v, i);
			return code;
		}
	}
	strcpy(next_token, resp->next_page_token);
	*n = resp->n_entries;
	*entries = v;
	return BK_OK;
}

int bk_file_mkdir(bk_client *c, const char *path, bool parents, uint32_t mode, bk_status *st)
{
	Boxkite__V1__FileMkdirRequest req = BOXKITE__V1__FILE_MKDIR_REQUEST__INIT;
	_cleanup_response_ Boxkite__V1__FileMkdirResponse *resp = NULL;

	req.path = (char *)path;
	req.parents = parents;
	req.mode = mode;
	return file_call(c, "FileMkdir", &req.base, &boxkite__v1__file_mkdir_response__descriptor, &resp, st);
}

int bk_file_remove(bk_client *c, const char *path, bool recursive, uint64_t *removed, bk_status *st)
{
	Boxkite__V1__FileRemoveRequest req = BOXKITE__V1__FILE_REMOVE_REQUEST__INIT;
	_cleanup_response_ Boxkite__V1__FileRemoveResponse *resp = NULL;
	int code;

	req.path = (char *)path;
	req.recursive = recursive;
	code = file_call(c, "FileRemove", &req.base, &boxkite__v1__file_remove_response__descriptor, &resp, st);
	if (code == BK_OK && removed)
		*removed = resp->removed;
	return code;
}

int bk_file_move(bk_client *c, const char *from, const char *to, bool overwrite, bk_status *st)
{
	Boxkite__V1__FileMoveRequest req = BOXKITE__V1__FILE_MOVE_REQUEST__INIT;
	_cleanup_response_ Boxkite__V1__FileMoveResponse *resp = NULL;

	req.from = (char *)from;
	req.to = (char *)to;
	req.overwrite = overwrite;
	return file_call(c, "FileMove", &req.base, &boxkite__v1__file_move_response__descriptor, &resp, st);
}

int bk_file_symlink(bk_client *c, const char *path, const char *target, bk_status *st)
{
	Boxkite__V1__FileSymlinkRequest req = BOXKITE__V1__FILE_SYMLINK_REQUEST__INIT;
	_cleanup_response_ Boxkite__V1__FileSymlinkResponse *resp = NULL;

	req.path = (char *)path;
	req.target = (char *)target;
	return file_call(c, "FileSymlink", &req.base, &boxkite__v1__file_symlink_response__descriptor, &resp, st);
}

/* --- upload ---------------------------------------------------------------------------------- */

int bk_content_hash_fd(int fd, uint64_t size, uint8_t out[32], bk_status *st)
{
	_cleanup_free_ uint8_t *buf = malloc(size < CHUNK_MAX ? (size ? (size_t)size : 1) : CHUNK_MAX);
	bk_blockhash b;
	int code = BK_OK;

	if (!buf || bk_blockhash_init(&b, size) < 0)
		return bk_status_set(st, BK_RESOURCE_EXHAUSTED, 0, false, "out of memory for the content hash");
	while (code == BK_OK && b.done < size) {
		size_t len = size - b.done < CHUNK_MAX ? (size_t)(size - b.done) : CHUNK_MAX;
		ssize_t n = bk_pread_full(fd, buf, len, b.done);
		if (n < 0)
			code = bk_status_errno(st, (int)-n, "read");
		else if ((size_t)n != len)
			code = bk_status_set(st, BK_DATA_LOSS, 0, false, "the file shrank while it was read");
		else if (bk_blockhash_add(&b, buf, len, NULL) < 0)
			code = bk_status_set(st, BK_INTERNAL, 0, false, "SHA-256 failed in libcrypto");
	}
	if (code == BK_OK && bk_blockhash_final(&b, out) < 0)
		code = bk_status_set(st, BK_INTERNAL, 0, false, "SHA-256 failed in libcrypto");
	bk_blockhash_fini(&b);
	return code == BK_OK ? bk_status_set(st, BK_OK, 0, false, "OK") : code;
}

int bk_upload_start(bk_client *c, const bk_upload_begin *rq, bk_upload_state *out, bk_status *st)
{
	Boxkite__V1__FileUploadBeginRequest req = BOXKITE__V1__FILE_UPLOAD_BEGIN_REQUEST__INIT;
	_cleanup_response_ Boxkite__V1__FileUploadBeginResponse *resp = NULL;
	int code;

	memset(out, 0, sizeof(*out));
	if (!rq->path)
		return bk_status_set(st, BK_INVALID_ARGUMENT, 0, false, "an upload needs a path");
	req.path = (char *)rq->path;
	req.size = rq->size;
	if (rq->sha256)
		req.sha256 = (ProtobufCBinaryData){ .len = SHA256_LEN, .data = (uint8_t *)rq->sha256 };
	req.mode = rq->mode;
	req.overwrite = rq->overwrite;
	req.make_parents = rq->make_parents;
	req.upload_id = (char *)(rq->upload_id ? rq->upload_id : "");
	code = file_call(c, "FileUploadBegin", &req.base, &boxkite__v1__file_upload_begin_response__descriptor,
			 &resp, st);
	if (code != BK_OK)
		return code;
	if (!resp->upload_id[0] || strlen(resp->upload_id) >= sizeof(out->upload_id) ||
	    resp->confirmed_offset > rq->size || resp->max_chunk == 0)
		return bk_status_set(st, BK_DATA_LOSS, 0, true,
				     "FileUploadBegin: implausible answer (id of %zu bytes, offset %llu of %llu, "
				     "max chunk %u)",
				     strlen(resp->upload_id), (unsigned long long)resp->confirmed_offset,
				     (unsigned long long)rq->size, resp->max_chunk);
	strcpy(out->upload_id, resp->upload_id);
	out->confirmed_offset = resp->confirmed_offset;
	out->max_chunk = resp->max_chunk;
	return BK_OK;
}

/* zstd state for compressing chunks: one context and one output buffer, reused chunk after
 * chunk. The buffer is one byte shorter than the largest chunk: a chunk is sent compressed
 * only when its frame is smaller than the chunk itself, and zstd fails when it would not fit. */
typedef struct chunk_packer {
	ZSTD_CCtx *cctx;
	uint8_t *buf;
	size_t cap;
} chunk_packer;

static void chunk_packer_done(chunk_packer *p)
{
	ZSTD_freeCCtx(p->cctx);
	free(p->buf);
	p->cctx = NULL;
	p->buf = NULL;
}

static int chunk_packer_init(chunk_packer *p, size_t max_chunk, bk_status *st)
{
	p->cap = max_chunk > 1 ? max_chunk - 1 : 1;
	p->cctx = ZSTD_createCCtx();
	p->buf = malloc(p->cap);
	if (!p->cctx || !p->buf) {
		chunk_packer_done(p);
		return bk_status_set(st, BK_RESOURCE_EXHAUSTED, 0, false, "out of memory for zstd");
	}
	return BK_OK;
}

/* Where a chunk's bytes come from: len bytes of fd at the chunk's offset (read straight into
 * the request), or len bytes in memory. */
typedef struct chunk_src {
	int fd;
	const uint8_t *mem;
	const char *path;   /* fd's name, for messages */
} chunk_src;

/* Send one chunk of len bytes at off. packer NULL: uncompressed. scratch (len bytes) takes a
 * chunk read from fd to compress it. block_hash (may be NULL) receives the SHA-256 of the
 * uncompressed bytes — for a plain chunk the digest its MAC covers, hashed once. */
static int send_chunk(bk_client *c, const char *upload_id, uint64_t off, size_t len, chunk_src src,
		      chunk_packer *packer, uint8_t *scratch, uint8_t *block_hash, uint64_t *confirmed, bk_status *st)
{
	Boxkite__V1__FileUploadChunkRequest req = BOXKITE__V1__FILE_UPLOAD_CHUNK_REQUEST__INIT;
	_cleanup_response_ Boxkite__V1__FileUploadChunkResponse *resp = NULL;
	const uint8_t *plain = src.mem, *payload;
	size_t payload_len = len;
	bk_request rq;
	uint8_t *dst;
	bk_digest d;
	bool verified;
	ssize_t n;
	int code;

	req.upload_id = (char *)upload_id;
	req.offset = off;
	if (packer && len > 0) {
		if (!plain) {
			n = bk_pread_full(src.fd, scratch, len, off);
			if (n < 0)
				return bk_status_errno(st, (int)-n, "read the source of %s", src.path);
			if ((size_t)n != len)
				return bk_status_set(st, BK_DATA_LOSS, 0, false, "the source of %s shrank during the upload",
						     src.path);
			plain = scratch;
		}
		if (bk_digest_of(plain, len, &d) < 0)
			return bk_status_set(st, BK_INTERNAL, 0, false, "SHA-256 failed in libcrypto");
		if (block_hash)
			memcpy(block_hash, d.sha256, SHA256_LEN);
		payload = plain;
		size_t z = ZSTD_compressCCtx(packer->cctx, packer->buf, len - 1 < packer->cap ? len - 1 : packer->cap,
					     plain, len, ZSTD_LEVEL);
		/* An error here is almost always "does not fit": the chunk does not compress. */
		if (!ZSTD_isError(z)) {
			payload = packer->buf;
			payload_len = z;
			req.compression = BOXKITE__V1__COMPRESSION__COMPRESSION_ZSTD;
		}
		code = bk_request_init(c, &rq, "FileUploadChunk", &req.base, payload_len, &dst, st);
		if (code != BK_OK)
			return code;
		memcpy(dst, payload, payload_len);
		/* The frame's own digest for the MAC: what travels is what the MAC covers. */
		if (payload != plain && bk_digest_of(dst, payload_len, &d) < 0) {
			bk_request_drop(&rq);
			return bk_status_set(st, BK_INTERNAL, 0, false, "SHA-256 failed in libcrypto");
		}
	} else {
		code = bk_request_init(c, &rq, "FileUploadChunk", &req.base, len, &dst, st);
		if (code != BK_OK)
			return code;
		if (plain) {
			memcpy(dst, plain, len);
		} else if (len) {
			n = bk_pread_full(src.fd, dst, len, off);
			if (n < 0 || (size_t)n != len) {
				bk_request_drop(&rq);
				return n < 0 ? bk_status_errno(st, (int)-n, "read the source of %s", src.path)
					     : bk_status_set(st, BK_DATA_LOSS, 0, false,
							     "the source of %s shrank during the upload", src.path);
			}
		}
		if (bk_digest_of(dst, len, &d) < 0) {
			bk_request_drop(&rq);
			return bk_status_set(st, BK_INTERNAL, 0, false, "SHA-256 failed in libcrypto");
		}
		if (block_hash)
			memcpy(block_hash, d.sha256, SHA256_LEN);
	}
	code = bk_request_call(c, &rq, &d, &boxkite__v1__file_upload_chunk_response__descriptor,
			       (ProtobufCMessage **)&resp, 0, &verified, NULL, st);
	if (code != BK_OK)
		return code;
	*confirmed = resp->confirmed_offset;
	return BK_OK;
}

int bk_upload_chunk(bk_client *c, const char *upload_id, uint64_t offset, const void *data, size_t len,
		    bool compress, uint64_t *confirmed, bk_status *st)
{
	chunk_packer packer = { 0 };
	int code;

	if (compress && len > 0) {
		code = chunk_packer_init(&packer, len, st);
		if (code != BK_OK)
			return code;
	}
	code = send_chunk(c, upload_id, offset, len, (chunk_src){ .fd = -1, .mem = data, .path = upload_id },
			  compress && len > 0 ? &packer : NULL, NULL, NULL, confirmed, st);
	chunk_packer_done(&packer);
	return code;
}

int bk_upload_commit(bk_client *c, const char *upload_id, const uint8_t content_hash[32], bk_file_info *out,
		     bk_status *st)
{
	Boxkite__V1__FileUploadCommitRequest req = BOXKITE__V1__FILE_UPLOAD_COMMIT_REQUEST__INIT;
	_cleanup_response_ Boxkite__V1__FileUploadCommitResponse *resp = NULL;
	bk_file_info ignored;
	int code;

	if (out)
		memset(out, 0, sizeof(*out));
	req.upload_id = (char *)upload_id;
	req.content_hash = (ProtobufCBinaryData){ .len = BK_HASH_LEN, .data = (uint8_t *)content_hash };
	code = file_call(c, "FileUploadCommit", &req.base, &boxkite__v1__file_upload_commit_response__descriptor,
			 &resp, st);
	if (code != BK_OK)
		return code;
	code = info_from(out ? out : &ignored, resp->info, "FileUploadCommit", st);
	if (code == BK_OK && out) {
		/* The server took it: its content hash is the one given. */
		out->has_content_hash = true;
		memcpy(out->content_hash, content_hash, BK_HASH_LEN);
	}
	if (!out)
		bk_file_info_free(&ignored);
	return code;
}

int bk_upload_abort(bk_client *c, const char *upload_id, bk_status *st)
{
	Boxkite__V1__FileUploadAbortRequest req = BOXKITE__V1__FILE_UPLOAD_ABORT_REQUEST__INIT;
	_cleanup_response_ Boxkite__V1__FileUploadAbortResponse *resp = NULL;

	req.upload_id = (char *)upload_id;
	return file_call(c, "FileUploadAbort", &req.base, &boxkite__v1__file_upload_abort_response__descriptor,
			 &resp, st);
}

/* The chunks from the confirmed offset to the end, then the commit. Chunks are whole blocks,
 * each read straight into its request, hashed once (the digest its MAC covers, which is its
 * block hash too) and sent from one of SENDERS threads, in order of offset, so that the next
 * chunk is read, hashed and sealed while the server writes the previous one (it queues chunks
 * that arrive in order). A chunk that overtook its predecessor on the way is refused
 * FAILED_PRECONDITION and sent again once the predecessor is confirmed. What fits in one chunk
 * is sent from the calling thread. */
#define SENDERS 2

struct senders {
	bk_client *c;
	int fd;
	const char *path;
	const bk_transfer_options *o;
	const char *upload_id;
	uint64_t size;
	bk_hash *blocks;    /* each sender fills in those it sends */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t next;      /* the next offset to send */
	uint64_t confirmed; /* the highest offset the server confirmed */
	bool stop;
	int code;           /* the first failure */
	bk_status st;
};

/* Record the first failure and stop every sender. Called with the lock held. */
static void senders_fail(struct senders *s, int code, const bk_status *st)
{
	if (s->code == BK_OK) {
		s->code = code;
		s->st = *st;
	}
	s->stop = true;
	pthread_cond_broadcast(&s->cond);
}

static void *sender_main(void *arg)
{
	struct senders *s = arg;
	chunk_packer packer = { 0 };
	chunk_src src = { .fd = s->fd, .path = s->path };
	size_t buf_len = s->size < CHUNK_MAX ? (size_t)s->size : CHUNK_MAX;
	uint8_t *scratch = s->o->compress ? malloc(buf_len ? buf_len : 1) : NULL;
	bk_status st;
	int code = BK_OK;

	if ((s->o->compress && !scratch) || (s->o->compress && chunk_packer_init(&packer, buf_len, &st) != BK_OK)) {
		pthread_mutex_lock(&s->lock);
		senders_fail(s, BK_RESOURCE_EXHAUSTED,
			     &(bk_status){ .code = BK_RESOURCE_EXHAUSTED, .message = "out of memory for an upload buffer" });
		pthread_mutex_unlock(&s->lock);
		free(scratch);
		return NULL;
	}
	pthread_mutex_lock(&s->lock);
	while (!s->stop && s->next < s->size) {
		uint64_t off = s->next, confirmed = 0;
		size_t len = s->size - off < CHUNK_MAX ? (size_t)(s->size - off) : CHUNK_MAX;
		uint8_t *block = s->blocks[off / CHUNK_MAX];

		s->next += len;
		pthread_mutex_unlock(&s->lock);
		code = send_chunk(s->c, s->upload_id, off, len, src, s->o->compress ? &packer : NULL, scratch, block,
				  &confirmed, &st);
		pthread_mutex_lock(&s->lock);
		if (code == BK_FAILED_PRECONDITION && !s->stop) {
			/* Overtook its predecessor: send it again once that one is confirmed. */
			while (!s->stop && s->confirmed < off)
				pthread_cond_wait(&s->cond, &s->lock);
			if (s->stop)
				break;
			pthread_mutex_unlock(&s->lock);
			code = send_chunk(s->c, s->upload_id, off, len, src, s->o->compress ? &packer : NULL, scratch,
					  block, &confirmed, &st);
			pthread_mutex_lock(&s->lock);
		}
		if (code == BK_OK && (confirmed < off + len || confirmed > s->size))
			code = bk_status_set(&st, BK_DATA_LOSS, 0, true,
					     "FileUploadChunk: confirmed offset %llu after a chunk at %llu+%zu of %llu",
					     (unsigned long long)confirmed, (unsigned long long)off, len,
					     (unsigned long long)s->size);
		if (code != BK_OK) {
			senders_fail(s, code, &st);
			break;
		}
		if (confirmed > s->confirmed) {
			s->confirmed = confirmed;
			pthread_cond_broadcast(&s->cond);
			if (s->o->progress && !s->o->progress(s->o->progress_arg, confirmed, s->size)) {
				bk_status_set(&st, BK_CANCELLED, 0, false, "upload of %s stopped at %llu of %llu bytes (upload id %s)",
					      s->path, (unsigned long long)confirmed, (unsigned long long)s->size, s->upload_id);
				senders_fail(s, BK_CANCELLED, &st);
			}
		}
	}
	pthread_mutex_unlock(&s->lock);
	chunk_packer_done(&packer);
	free(scratch);
	return NULL;
}

/* A resumed upload: the hashes of the blocks the server already has, read and hashed again
 * (the content hash needs them), and the rest of a block it has part of, sent from those bytes.
 * Moves s->next to the first block boundary after what the server has. */
static int upload_resume(struct senders *s, bk_status *st)
{
	uint64_t end = (s->next + CHUNK_MAX - 1) / CHUNK_MAX * CHUNK_MAX;
	_cleanup_free_ uint8_t *buf = malloc(CHUNK_MAX);
	int code = BK_OK;

	if (end > s->size)
		end = s->size;
	if (!buf)
		return bk_status_set(st, BK_RESOURCE_EXHAUSTED, 0, false, "out of memory for an upload buffer");
	for (uint64_t off = 0; off < end; off += CHUNK_MAX) {
		size_t len = s->size - off < CHUNK_MAX ? (size_t)(s->size - off) : CHUNK_MAX;
		ssize_t n = bk_pread_full(s->fd, buf, len, off);
		uint64_t confirmed = 0;

		if (n < 0)
			return bk_status_errno(st, (int)-n, "read the source of %s", s->path);
		if ((size_t)n != len)
			return bk_status_set(st, BK_DATA_LOSS, 0, false, "the source of %s shrank during the upload", s->path);
		if (!EVP_Digest(buf, len, s->blocks[off / CHUNK_MAX], NULL, EVP_sha256(), NULL))
			return bk_status_set(st, BK_INTERNAL, 0, false, "SHA-256 failed in libcrypto");
		if (off + len <= s->next)
			continue;
		code = send_chunk(s->c, s->upload_id, s->next, (size_t)(off + len - s->next),
				  (chunk_src){ .fd = -1, .mem = buf + (s->next - off), .path = s->path }, NULL, NULL, NULL,
				  &confirmed, st);
		if (code != BK_OK)
			return code;
		if (confirmed != off + len)
			return bk_status_set(st, BK_DATA_LOSS, 0, true,
					     "FileUploadChunk: confirmed offset %llu after the rest of a block up to %llu",
					     (unsigned long long)confirmed, (unsigned long long)(off + len));
	}
	s->next = s->confirmed = end;
	return BK_OK;
}

/* Send what s describes from s->next on, then commit. */
static int upload_body(struct senders *s, bk_file_info *out, bk_status *st)
{
	uint64_t left = s->size - s->next;
	pthread_t threads[SENDERS];
	bk_hash content;
	int n = 0, code;

	if (s->next > 0) {
		code = upload_resume(s, st);
		if (code != BK_OK)
			return code;
		left = s->size - s->next;
	}
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	if (left > CHUNK_MAX) {
		for (; n < SENDERS; n++)
			if (pthread_create(&threads[n], NULL, sender_main, s) != 0)
				break;
		for (int i = 0; i < n; i++)
			pthread_join(threads[i], NULL);
	}
	if (n == 0 && left > 0)
		sender_main(s);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	if (s->code != BK_OK) {
		if (st)
			*st = s->st;
		return s->code;
	}
	if (bk_content_hash(s->blocks, bk_blocks_of(s->size), content) < 0)
		return bk_status_set(st, BK_INTERNAL, 0, false, "SHA-256 failed in libcrypto");
	return bk_upload_commit(s->c, s->upload_id, content, out, st);
}

/* A file of at most one block in one request (PROTOCOL.md, "A file in one request"): FileUploadBegin
 * carrying the whole content and its content hash, answered with the committed file — one call
 * where the chunked upload makes three. size is the source's; sha256 (may be NULL) its plain
 * SHA-256, for the server to check. */
static int upload_whole(bk_client *c, int fd, const char *path, const bk_transfer_options *o, uint64_t size,
			const uint8_t *sha256, bk_file_info *out, bk_status *st)
{
	Boxkite__V1__FileUploadBeginRequest req = BOXKITE__V1__FILE_UPLOAD_BEGIN_REQUEST__INIT;
	_cleanup_response_ Boxkite__V1__FileUploadBeginResponse *resp = NULL;
	_cleanup_free_ uint8_t *plain = malloc(size ? (size_t)size : 1), *frame = NULL;
	const uint8_t *payload;
	size_t payload_len = (size_t)size;
	bk_blockhash b = { 0 };
	bk_file_info ignored;
	bk_hash content;
	bk_digest d;
	bk_request rq;
	uint8_t *dst;
	bool verified;
	ssize_t n;
	int code;

	if (!plain)
		return bk_status_set(st, BK_RESOURCE_EXHAUSTED, 0, false, "out of memory for %s", path);
	n = bk_pread_full(fd, plain, (size_t)size, 0);
	if (n < 0)
		return bk_status_errno(st, (int)-n, "read the source of %s", path);
	if ((uint64_t)n != size)
		return bk_status_set(st, BK_DATA_LOSS, 0, false, "the source of %s shrank during the upload", path);
	/* Its one block's hash is the digest of the plain bytes: made once, for both. */
	if (bk_digest_of(plain, (size_t)size, &d) < 0 || bk_blockhash_init(&b, size) < 0 ||
	    (size && bk_blockhash_add(&b, plain, (size_t)size, d.sha256) < 0) || bk_blockhash_final(&b, content) < 0) {
		bk_blockhash_fini(&b);
		return bk_status_set(st, BK_INTERNAL, 0, false, "SHA-256 failed in libcrypto");
	}
	bk_blockhash_fini(&b);
	payload = plain;
	/* Compressed only when the frame is smaller than the bytes themselves. */
	if (o->compress && size > 1 && (frame = malloc((size_t)size - 1))) {
		size_t z = ZSTD_compress(frame, (size_t)size - 1, plain, (size_t)size, ZSTD_LEVEL);
		if (!ZSTD_isError(z)) {
			payload = frame;
			payload_len = z;
			req.compression = BOXKITE__V1__COMPRESSION__COMPRESSION_ZSTD;
		}
	}
	req.path = (char *)path;
	req.size = size;
	if (sha256)
		req.sha256 = (ProtobufCBinaryData){ .len = SHA256_LEN, .data = (uint8_t *)sha256 };
	req.mode = o->mode;
	req.overwrite = o->overwrite;
	req.make_parents = o->make_parents;
	req.upload_id = "";
	req.content_hash = (ProtobufCBinaryData){ .len = BK_HASH_LEN, .data = content };
	code = bk_request_init(c, &rq, "FileUploadBegin", &req.base, payload_len, &dst, st);
	if (code != BK_OK)
		return code;
	if (payload_len) /* an empty file has no data field to fill */
		memcpy(dst, payload, payload_len);
	/* What travels is what the MAC covers. */
	if (payload != plain && bk_digest_of(dst, payload_len, &d) < 0) {
		bk_request_drop(&rq);
		return bk_status_set(st, BK_INTERNAL, 0, false, "SHA-256 failed in libcrypto");
	}
	code = bk_request_call(c, &rq, &d, &boxkite__v1__file_upload_begin_response__descriptor,
			       (ProtobufCMessage **)&resp, 0, &verified, NULL, st);
	if (code != BK_OK)
		return code;
	if (!resp->info)
		return bk_status_set(st, BK_DATA_LOSS, 0, true,
				     "FileUploadBegin: %s was sent whole, and the answer does not say it was committed", path);
	code = info_from(out ? out : &ignored, resp->info, "FileUploadBegin", st);
	if (code == BK_OK && out) {
		out->has_content_hash = true;
		memcpy(out->content_hash, content, BK_HASH_LEN);
	}
	if (!out)
		bk_file_info_free(&ignored);
	return code;
}

int bk_upload_fd(bk_client *c, int fd, const char *path, const bk_transfer_options *opts, bk_file_info *out,
		 char *upload_id_out, bk_status *st)
{
	static const bk_transfer_options defaults = { 0 };
	const bk_transfer_options *o = opts ? opts : &defaults;
	struct senders s = { .c = c, .fd = fd, .path = path, .o = o };
	_cleanup_free_ bk_hash *blocks = NULL;
	uint8_t sha256[SHA256_LEN];
	bk_upload_state up;
	struct stat sb;
	int code;

	if (upload_id_out)
		upload_id_out[0] = '\0';
	if (out)
		memset(out, 0, sizeof(*out));
	if (fstat(fd, &sb) < 0)
		return bk_status_errno(st, errno, "stat the source of %s", path);
	if (!S_ISREG(sb.st_mode))
		return bk_status_set(st, BK_INVALID_ARGUMENT, 0, false, "the source of %s is not a regular file", path);
	s.size = (uint64_t)sb.st_size;
	blocks = calloc(s.size ? (size_t)bk_blocks_of(s.size) : 1, sizeof(*blocks));
	if (!blocks || bk_blocks_of(s.size) > SIZE_MAX / sizeof(*blocks))
		return bk_status_set(st, BK_RESOURCE_EXHAUSTED, 0, false, "out of memory for the block hashes");
	s.blocks = blocks;
	/* Asked for: the plain SHA-256, a pass of its own before the upload, for the server to
	 * check at commit. */
	if (o->sha256) {
		_cleanup_free_ uint8_t *buf = malloc(CHUNK_MAX);
		code = buf ? bk_sha256_fd(fd, s.size, buf, CHUNK_MAX, sha256) : -ENOMEM;
		if (code == -ENODATA)
			return bk_status_set(st, BK_DATA_LOSS, 0, false, "the source of %s changed size while being read",
					     path);
		if (code == -ENOMEM)
			return bk_status_set(st, BK_RESOURCE_EXHAUSTED, 0, false, "out of memory for the SHA-256");
		if (code < 0)
			return bk_status_errno(st, -code, "read the source of %s", path);
	}
	/* One block at most, and not a resumption: the whole file in one request. A boxkited from
	 * before that refuses data in a Begin (3, BAD_BODY), having written nothing: to it the file
	 * goes in chunks. */
	if (s.size <= CHUNK_MAX && !(o->upload_id && o->upload_id[0])) {
		bk_status whole;

		code = upload_whole(c, fd, path, o, s.size, o->sha256 ? sha256 : NULL, out, &whole);
		if (code == BK_OK && out && o->sha256) {
			out->has_sha256 = true;
			memcpy(out->sha256, sha256, SHA256_LEN);
		}
		if (code != BK_INVALID_ARGUMENT || whole.detail != BK_DETAIL_BAD_BODY) {
			if (st)
				*st = whole;
			return code;
		}
	}
	code = bk_upload_start(c,
			       &(bk_upload_begin){ .path = path,
						   .size = s.size,
						   .sha256 = o->sha256 ? sha256 : NULL,
						   .mode = o->mode,
						   .overwrite = o->overwrite,
						   .make_parents = o->make_parents,
						   .upload_id = o->upload_id },
			       &up, st);
	if (code != BK_OK)
		return code;
	if (up.max_chunk < CHUNK_MAX) {
		bk_upload_abort(c, up.upload_id, NULL);
		return bk_status_set(st, BK_FAILED_PRECONDITION, 0, true,
				     "FileUploadBegin: the server takes chunks of %u bytes, smaller than the %u-byte block",
				     up.max_chunk, CHUNK_MAX);
	}
	s.upload_id = up.upload_id;
	s.next = s.confirmed = up.confirmed_offset;
	code = upload_body(&s, out, st);
	if (code == BK_OK && out && o->sha256) {
		out->has_sha256 = true;
		memcpy(out->sha256, sha256, SHA256_LEN);
	}
	if (code != BK_OK && upload_id_out)
		strcpy(upload_id_out, up.upload_id);
	return code;
}

/* --- download -------------------------------------------------------------------------------- */

/* What the first answer said about the file; every later one must agree. */
typedef struct download_ref {
	uint64_t size;
	int64_t mtime_ns, ctime_ns;
	bool has_content_hash;
	uint8_t content_hash[BK_HASH_LEN];
	uint8_t sha256[SHA256_LEN];
} download_ref;

/* The uncompressed bytes of one answer at offset off (its data `a`): checked against ref and the
 * request, decompressed into *zbuf (allocated on first use, CHUNK_MAX bytes) when zstd; *plain
 * tells when they are the bytes a's digest is of. Every answer but the last is a whole chunk (the
 * fetchers count on it), and eof marks exactly the one that reaches the end: one that reached it
 * unmarked would leave the reader waiting for more. */
static int download_data(const Boxkite__V1__FileDownloadResponse *r, const bk_answer_data *a, const download_ref *ref,
			 uint64_t off, const char *path, ZSTD_DCtx **dctx, uint8_t **zbuf, const uint8_t **data,
			 bool *plain, bk_status *st)
{
	unsigned long long fcs;
	size_t n;

	if (r->size != ref->size || r->mtime_ns != ref->mtime_ns || r->ctime_ns != ref->ctime_ns)
		return bk_status_set(st, BK_DATA_LOSS, 0, true, "%s changed during the download", path);
	if (r->offset != off || r->data_length > CHUNK_MAX || r->data_length > ref->size - off ||
	    (bool)r->eof != (off + r->data_length == ref->size) || (!r->eof && r->data_length != CHUNK_MAX))
		return bk_status_set(st, BK_DATA_LOSS, 0, true,
				     "FileDownload: implausible answer for %s (%llu bytes at %llu, eof %d, size %llu, "
				     "asked at %llu)",
				     path, (unsigned long long)r->data_length, (unsigned long long)r->offset, r->eof,
				     (unsigned long long)ref->size, (unsigned long long)off);
	switch (r->compression) {
	case BOXKITE__V1__COMPRESSION__COMPRESSION_NONE:
		if (a->len != r->data_length)
			return bk_status_set(st, BK_DATA_LOSS, 0, true, "FileDownload: %zu data bytes, %llu announced",
					     a->len, (unsigned long long)r->data_length);
		*data = a->data;
		*plain = true;
		return BK_OK;
	case BOXKITE__V1__COMPRESSION__COMPRESSION_ZSTD:
		fcs = ZSTD_getFrameContentSize(a->data, a->len);
		if (fcs == ZSTD_CONTENTSIZE_UNKNOWN || fcs == ZSTD_CONTENTSIZE_ERROR || fcs != r->data_length)
			return bk_status_set(st, BK_DATA_LOSS, 0, true,
					     "FileDownload: a zstd frame whose content size is not the %llu bytes announced",
					     (unsigned long long)r->data_length);
		if (!*dctx)
			*dctx = ZSTD_createDCtx();
		if (!*zbuf)
			*zbuf = malloc(CHUNK_MAX);
		if (!*dctx || !*zbuf)
			return bk_status_set(st, BK_RESOURCE_EXHAUSTED, 0, false, "out of memory for zstd");
		n = ZSTD_decompressDCtx(*dctx, *zbuf, r->data_length, a->data, a->len);
		if (ZSTD_isError(n) || n != r->data_length)
			return bk_status_set(st, BK_DATA_LOSS, 0, true, "FileDownload: bad zstd data: %s",
					     ZSTD_isError(n) ? ZSTD_getErrorName(n) : "wrong length");
		*data = *zbuf;
		*plain = false;
		return BK_OK;
	default:
		return bk_status_set(st, BK_DATA_LOSS, 0, true, "FileDownload: unknown compression %d",
				     (int)r->compression);
	}
}

/* Chunks after the first are fetched ahead by FETCHERS threads, at most WINDOW chunks ahead of
 * the one being written: the server reads and seals the next chunks while this one is checked
 * and written, where one request at a time would leave both sides waiting in turn. */
#define FETCHERS 2
#define WINDOW 4

struct fetch_slot {
	uint64_t offset;
	bool ready;
	int code;
	bk_status st;
	Boxkite__V1__FileDownloadResponse *r;
	bk_answer_data data;
};

struct prefetch {
	bk_client *c;
	const char *path;
	Boxkite__V1__Compression compression;
	uint64_t size;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t next;     /* the next offset to fetch */
	uint64_t consumed; /* everything below is written */
	bool stop;
	struct fetch_slot slot[WINDOW];
};

static struct fetch_slot *slot_of(struct prefetch *p, uint64_t offset)
{
	return &p->slot[(offset / CHUNK_MAX) % WINDOW];
}

/* One FileDownload: the answer in *r, its data in *data. */
static int download_call(bk_client *c, const Boxkite__V1__FileDownloadRequest *req,
			 Boxkite__V1__FileDownloadResponse **r, bk_answer_data *data, bk_status *st)
{
	bk_request rq;
	bool verified;
	int code;

	*r = NULL;
	*data = (bk_answer_data){ 0 };
	code = bk_request_init(c, &rq, "FileDownload", &req->base, 0, NULL, st);
	if (code != BK_OK)
		return code;
	return bk_request_call(c, &rq, NULL, &boxkite__v1__file_download_response__descriptor, (ProtobufCMessage **)r,
			       0, &verified, data, st);
}

static void *fetcher_main(void *arg)
{
	struct prefetch *p = arg;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		Boxkite__V1__FileDownloadRequest req = BOXKITE__V1__FILE_DOWNLOAD_REQUEST__INIT;
		Boxkite__V1__FileDownloadResponse *r = NULL;
		bk_answer_data data;
		struct fetch_slot *sl;
		bk_status st;
		uint64_t off;
		int code;

		while (!p->stop && p->next < p->size && p->next >= p->consumed + (uint64_t)WINDOW * CHUNK_MAX)
			pthread_cond_wait(&p->cond, &p->lock);
		if (p->stop || p->next >= p->size)
			break;
		off = p->next;
		p->next += CHUNK_MAX;
		pthread_mutex_unlock(&p->lock);

		req.path = (char *)p->path;
		req.offset = off;
		req.length = CHUNK_MAX;
		req.compression = p->compression;
		code = download_call(p->c, &req, &r, &data, &st);

		pthread_mutex_lock(&p->lock);
		sl = slot_of(p, off);
		sl->offset = off;
		sl->code = code;
		sl->st = st;
		sl->r = r;
		sl->data = data;
		sl->ready = true;
		pthread_cond_broadcast(&p->cond);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* Free a fetched answer and its data. */
static void fetched_free(Boxkite__V1__FileDownloadResponse *r, bk_answer_data *data)
{
	if (r)
		protobuf_c_message_free_unpacked(&r->base, NULL);
	bk_answer_data_free(data);
}

int bk_download_fd(bk_client *c, const char *path, int fd, const bk_transfer_options *opts, bk_file_info *info,
		   bk_status *st)
{
	static const bk_transfer_options defaults = { 0 };
	const bk_transfer_options *o = opts ? opts : &defaults;
	Boxkite__V1__FileDownloadRequest req = BOXKITE__V1__FILE_DOWNLOAD_REQUEST__INIT;
	_cleanup_(md_ctx_freep) EVP_MD_CTX *md = NULL;
	_cleanup_(zstd_dctx_freep) ZSTD_DCtx *dctx = NULL;
	_cleanup_free_ uint8_t *zbuf = NULL;
	bk_blockhash blocks = { 0 };
	uint8_t sha256[SHA256_LEN];
	bk_hash content;
	download_ref ref = { 0 };
	uint32_t mode = 0;
	bool eof = false;
	int code;

	if (info)
		memset(info, 0, sizeof(*info));
	if (o->sha256 && (!(md = EVP_MD_CTX_new()) || !EVP_DigestInit_ex(md, EVP_sha256(), NULL)))
		return bk_status_set(st, BK_INTERNAL, 0, false, "SHA-256 failed in libcrypto");
	req.path = (char *)path;
	req.length = CHUNK_MAX;
	req.compression = o->compress ? BOXKITE__V1__COMPRESSION__COMPRESSION_ZSTD
				      : BOXKITE__V1__COMPRESSION__COMPRESSION_NONE;
	req.sha256 = o->sha256;
	struct prefetch pf = { .c = c, .path = path, .compression = req.compression, .next = CHUNK_MAX };
	pthread_t fetchers[FETCHERS];
	int nfetchers = 0;

	pthread_mutex_init(&pf.lock, NULL);
	pthread_cond_init(&pf.cond, NULL);
	code = BK_OK;
	while (!eof) {
		Boxkite__V1__FileDownloadResponse *r = NULL;
		bk_answer_data data = { 0 };
		const uint8_t *bytes = NULL;
		bool plain = false;
		int rv;

		if (req.offset == 0) {
			code = download_call(c, &req, &r, &data, st);
		} else {
			/* The fetchers' answer for this offset, in order. */
			struct fetch_slot *sl = slot_of(&pf, req.offset);
			pthread_mutex_lock(&pf.lock);
			while (!(sl->ready && sl->offset == req.offset))
				pthread_cond_wait(&pf.cond, &pf.lock);
			sl->ready = false;
			r = sl->r;
			data = sl->data;
			code = sl->code;
			if (code != BK_OK && st)
				*st = sl->st;
			pthread_mutex_unlock(&pf.lock);
		}
		if (code != BK_OK) {
			fetched_free(r, &data);
			break;
		}
		if (req.offset == 0) {
			if (o->sha256 && r->sha256.len != SHA256_LEN) {
				fetched_free(r, &data);
				code = bk_status_set(st, BK_DATA_LOSS, 0, true,
						     "FileDownload: no SHA-256 in the first answer for %s", path);
				break;
			}
			ref.size = r->size;
			ref.mtime_ns = r->mtime_ns;
			ref.ctime_ns = r->ctime_ns;
			ref.has_content_hash = r->content_hash.len == BK_HASH_LEN;
			if (ref.has_content_hash)
				memcpy(ref.content_hash, r->content_hash.data, BK_HASH_LEN);
			if (o->sha256)
				memcpy(ref.sha256, r->sha256.data, SHA256_LEN);
			mode = r->mode;
			if (bk_blockhash_init(&blocks, ref.size) < 0) {
				fetched_free(r, &data);
				code = bk_status_set(st, BK_RESOURCE_EXHAUSTED, 0, false, "out of memory for the block hashes");
				break;
			}
			pf.size = ref.size;
			pf.consumed = 0;
			for (; nfetchers < FETCHERS && !r->eof; nfetchers++)
				if (pthread_create(&fetchers[nfetchers], NULL, fetcher_main, &pf) != 0)
					break;
			if (nfetchers == 0 && !r->eof) {
				fetched_free(r, &data);
				code = bk_status_set(st, BK_RESOURCE_EXHAUSTED, 0, false, "cannot start a download thread");
				break;
			}
		}
		code = download_data(r, &data, &ref, req.offset, path, &dctx, &zbuf, &bytes, &plain, st);
		/* A plain chunk's block hash is the digest its MAC was checked with. */
		if (code == BK_OK &&
		    (bk_blockhash_add(&blocks, bytes, r->data_length, plain && r->data_length ? data.digest.sha256 : NULL) < 0 ||
		     (md && !EVP_DigestUpdate(md, bytes, r->data_length))))
			code = bk_status_set(st, BK_INTERNAL, 0, false, "SHA-256 failed in libcrypto");
		if (code == BK_OK && (rv = bk_write_full(fd, bytes, r->data_length)) < 0)
			code = bk_status_errno(st, -rv, "write the copy of %s", path);
		if (code == BK_OK) {
			req.offset += r->data_length;
			eof = r->eof;
		}
		fetched_free(r, &data);
		if (code != BK_OK)
			break;
		pthread_mutex_lock(&pf.lock);
		pf.consumed = req.offset;
		pthread_cond_broadcast(&pf.cond);
		pthread_mutex_unlock(&pf.lock);
		if (o->progress && !o->progress(o->progress_arg, req.offset, ref.size)) {
			code = bk_status_set(st, BK_CANCELLED, 0, false, "download of %s stopped at %llu of %llu bytes",
					     path, (unsigned long long)req.offset, (unsigned long long)ref.size);
			break;
		}
	}
	/* Stop the fetchers and drop what they fetched that will not be used. */
	pthread_mutex_lock(&pf.lock);
	pf.stop = true;
	pthread_cond_broadcast(&pf.cond);
	pthread_mutex_unlock(&pf.lock);
	for (int i = 0; i < nfetchers; i++)
		pthread_join(fetchers[i], NULL);
	for (int i = 0; i < WINDOW; i++)
		if (pf.slot[i].ready)
			fetched_free(pf.slot[i].r, &pf.slot[i].data);
	pthread_mutex_destroy(&pf.lock);
	pthread_cond_destroy(&pf.cond);
	if (code == BK_OK && bk_blockhash_final(&blocks, content) < 0)
		code = bk_status_set(st, BK_INTERNAL, 0, false, "SHA-256 failed in libcrypto");
	bk_blockhash_fini(&blocks);
	if (code != BK_OK)
		return code;
	if (ref.has_content_hash && memcmp(content, ref.content_hash, BK_HASH_LEN) != 0)
		return bk_status_set(st, BK_DATA_LOSS, 0, true,
				     "%s: the content hash of the bytes received is not the file's", path);
	if (md && (!EVP_DigestFinal_ex(md, sha256, NULL) || memcmp(sha256, ref.sha256, SHA256_LEN) != 0))
		return bk_status_set(st, BK_DATA_LOSS, 0, true, "%s: the SHA-256 of the bytes received is not the file's",
				     path);
	if (info) {
		if (info_names(info, path, strlen(path), "", 0) < 0)
			return bk_status_set(st, BK_RESOURCE_EXHAUSTED, 0, false, "out of memory");
		info->type = BK_FILE_REGULAR;
		info->size = ref.size;
		info->mode = mode;
		info->mtime_ns = ref.mtime_ns;
		info->has_content_hash = true;
		memcpy(info->content_hash, content, BK_HASH_LEN);
		info->has_sha256 = md != NULL;
		if (md)
			memcpy(info->sha256, sha256, SHA256_LEN);
	}
	return bk_status_set(st, BK_OK, 0, true, "OK");
}

/* --- watching a directory ---------------------------------------------------------------------- */

_Static_assert((int)BK_WATCH_CREATED == (int)BOXKITE__V1__WATCH_EVENT_KIND__WATCH_EVENT_KIND_CREATED &&
		       (int)BK_WATCH_OVERFLOW == (int)BOXKITE__V1__WATCH_EVENT_KIND__WATCH_EVENT_KIND_OVERFLOW &&
		       (int)BK_WATCH_END_STOPPED == (int)BOXKITE__V1__WATCH_END__WATCH_END_STOPPED,
	       "the header's watch enums are the wire's");

static int cursor_copy(char *out, const char *cursor, const char *method, bk_status *st)
{
	size_t len = strlen(cursor);

	if (!len || len >= BK_WATCH_CURSOR_MAX)
		return bk_status_set(st, BK_DATA_LOSS, 0, true, "%s: the answer's cursor is not one", method);
	memcpy(out, cursor, len + 1);
	return BK_OK;
}

int bk_watch_start(bk_client *c, const char *path, char *cursor, uint32_t *directories, bk_status *st)
{
	Boxkite__V1__FileWatchRequest req = BOXKITE__V1__FILE_WATCH_REQUEST__INIT;
	_cleanup_response_ Boxkite__V1__FileWatchResponse *resp = NULL;
	int code;

	cursor[0] = '\0';
	if (directories)
		*directories = 0;
	req.path = (char *)path;
	code = file_call(c, "FileWatch", &req.base, &boxkite__v1__file_watch_response__descriptor, &resp, st);
	if (code != BK_OK)
		return code;
	if (resp->end)
		return bk_status_set(st, BK_DATA_LOSS, 0, true, "FileWatch: a start answered with an end");
	if (directories)
		*directories = resp->directories;
	return cursor_copy(cursor, resp->cursor, "FileWatch", st);
}

int bk_watch_read(bk_client *c, const char *cursor, uint32_t wait_ms, uint32_t max_events, bk_watch_batch *out,
		  bk_status *st)
{
	Boxkite__V1__FileWatchRequest req = BOXKITE__V1__FILE_WATCH_REQUEST__INIT;
	_cleanup_response_ Boxkite__V1__FileWatchResponse *resp = NULL;
	size_t strings = 0;
	char *at;
	bool verified;
	int code;

	memset(out, 0, sizeof(*out));
	req.cursor = (char *)cursor;
	req.wait_ms = wait_ms < BK_WATCH_WAIT_MAX_MS ? wait_ms : BK_WATCH_WAIT_MAX_MS;
	req.max_events = max_events;
	code = bk_client_call(c, "FileWatch", &req.base, &boxkite__v1__file_watch_response__descriptor,
			      (ProtobufCMessage **)&resp, (int)req.wait_ms + bk_client_timeout(c), &verified, st);
	if (code != BK_OK)
		return code;
	if ((code = cursor_copy(out->cursor, resp->cursor, "FileWatch", st)) != BK_OK)
		return code;
	out->end = (int)resp->end;
	if (!resp->n_events)
		return BK_OK;
	/* One block: the events, then their strings (path, NUL, to, NUL each). */
	for (size_t i = 0; i < resp->n_events; i++) {
		const char *p, *t;
		size_t plen, tlen;
		name_bytes(resp->events[i]->path, &resp->events[i]->raw_path, &p, &plen);
		name_bytes(resp->events[i]->to, &resp->events[i]->raw_to, &t, &tlen);
		if (memchr(p, '\0', plen) || memchr(t, '\0', tlen))
			return bk_status_set(st, BK_DATA_LOSS, 0, true, "FileWatch: a name with a NUL byte in the answer");
		strings += plen + tlen + 2;
	}
	out->events = malloc(resp->n_events * sizeof(*out->events) + strings);
	if (!out->events)
		return bk_status_set(st, BK_RESOURCE_EXHAUSTED, 0, false, "out of memory");
	at = (char *)(out->events + resp->n_events);
	for (size_t i = 0; i < resp->n_events; i++) {
		const Boxkite__V1__WatchEvent *e = resp->events[i];
		bk_watch_event *ev = &out->events[i];
		const char *p, *t;
		size_t plen, tlen;

		name_bytes(e->path, &e->raw_path, &p, &plen);
		name_bytes(e->to, &e->raw_to, &t, &tlen);
		ev->kind = (int)e->kind;
		ev->directory = e->directory;
		ev->lost = e->lost;
		ev->path = memcpy(at, p, plen);
		at[plen] = '\0';
		at += plen + 1;
		ev->to = memcpy(at, t, tlen);
		at[tlen] = '\0';
		at += tlen + 1;
	}
	out->n = resp->n_events;
	return BK_OK;
}

void bk_watch_batch_free(bk_watch_batch *batch)
{
	if (!batch)
		return;
	free(batch->events);
	batch->events = NULL;
	batch->n = 0;
}

int bk_watch_stop(bk_client *c, const char *cursor, bk_status *st)
{
	Boxkite__V1__FileWatchRequest req = BOXKITE__V1__FILE_WATCH_REQUEST__INIT;
	_cleanup_response_ Boxkite__V1__FileWatchResponse *resp = NULL;

	req.cursor = (char *)cursor;
	req.stop = true;
	return file_call(c, "FileWatch", &req.base, &boxkite__v1__file_watch_response__descriptor, &resp, st);
}
