/* Where snapshots are kept (issue 13): a flat space of keys ("blobs/ab/abcd...", "snapshots/ID")
 * under a store's URL, written whole or not at all. Backends: file:///DIR (a directory: in
 * Kubernetes a mounted volume; store_file.c) and s3://BUCKET/PREFIX (store_s3.c). The sync
 * (sync.c) is the only user; it runs on its own thread, so every call here may block. */
#ifndef BK_STORE_H
#define BK_STORE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

typedef struct bk_store bk_store;

/* What one store call may take (s3://; a file:// store is a local directory): all its tries in
 * BK_STORE_CALL_MS, a connection in BK_STORE_CONNECT_S, a transfer that moves nothing for
 * BK_STORE_STALL_S given up; a listing at most BK_STORE_LIST_NAMES_MAX names in
 * BK_STORE_LIST_PAGES_MAX pages. */
#define BK_STORE_CALL_MS (120 * 1000)
#define BK_STORE_CONNECT_S 10
#define BK_STORE_STALL_S 30
#define BK_STORE_LIST_NAMES_MAX 100000
#define BK_STORE_LIST_PAGES_MAX 1000

struct bk_store_ops {
	/* 1 when key is there, 0 when not. */
	int (*has)(bk_store *s, const char *key, bk_error **err);
	/* key holds exactly these bytes afterwards, or (on failure) what it held before. */
	int (*put)(bk_store *s, const char *key, const uint8_t *data, size_t len, bk_error **err);
	/* The whole value into a malloc'd *data; -ENOENT (status NOT_FOUND) when absent, -EFBIG past max. */
	int (*get)(bk_store *s, const char *key, size_t max, uint8_t **data, size_t *len, bk_error **err);
	/* The names directly under dir ("snapshots"), malloc'd, each and the array. */
	int (*list)(bk_store *s, const char *dir, char ***names, size_t *n, bk_error **err);
	/* Everything put so far is durable before whatever is put next (the manifest after its blobs). */
	int (*barrier)(bk_store *s, bk_error **err);
	void (*free)(bk_store *s);
};

struct bk_store {
	const struct bk_store_ops *ops;
	/* The caller's: once true, a call in progress ends (CANCELLED) and every later one fails,
	 * so that a Reset or a stop never waits on a store that does not answer. */
	const atomic_bool *cancel;
	char url[];
};

/* The store at url (a --sync-store URL or a prefix under one: the caller checks), its calls
 * ended by *cancel (which may be NULL). Every call has a deadline and a size bound of its own
 * besides (store_s3.c). */
int bk_store_open(const char *url, const atomic_bool *cancel, bk_store **out, bk_error **err);
void bk_store_free(bk_store *s);

/* At start-up, as root: make a file:// store's directory if missing and give it to the front's
 * user (owner, mode 0700). Other schemes: nothing to do. */
int bk_store_prepare(const char *url, uid_t owner, bk_error **err);

/* At start-up, as the front (its privileges dropped): a file:// store is a directory it can
 * search, read and write, below directories it can search; else the error says which directory
 * stops it and what to change (prepare made the store the front's, but not the directories above
 * it). An s3:// store has credentials (bk_store_s3_check) but is not contacted: an endpoint away
 * for a moment would keep the sandbox from serving at all, and a push or pull says what its
 * store answered. */
int bk_store_check(const char *url, bk_error **err);

/* Whether url may be used given the configured stores: one of them, or a prefix under one
 * ("/"-separated, no "." or ".." component). */
int bk_store_url_allowed(const char *url, char *const *configured, size_t n, bk_error **err);

/* Where a tenant's url is (docs/PROTOCOL.md, "Sync: whose snapshots"): url checked as
 * bk_store_url_allowed does, then the same place under prefix (a key's store prefix, keys.h) in
 * the store it is in — STORE/rest is STORE/prefix/rest, in the most specific configured store
 * that holds url — into out. A tenant names nothing outside its prefix: every URL it can write
 * is under it. prefix NULL (the operator's own --restore-from): url as it is. */
int bk_store_url_scope(const char *url, char *const *configured, size_t n, const char *prefix, char *out, size_t size,
		       bk_error **err);

static inline void bk_store_freep(bk_store **s)
{
	bk_store_free(*s);
}

/* file:// (store_file.c) */
int bk_store_file_open(const char *url, const char *dir, bk_store **out, bk_error **err);

/* s3:// (store_s3.c). Set up once at start-up, as root and before any thread: where S3 is and
 * the credentials (from the credentials file, else the AWS_* environment variables, which are
 * then removed from the environment). */
int bk_store_s3_setup(const char *endpoint, const char *region, bool path_style, const char *credentials,
		      bk_error **err);
int bk_store_s3_open(const char *url, const char *rest, bk_store **out, bk_error **err);
/* Whether s3:// stores can be used, as far as that is known without contacting them: the set-up
 * found credentials; else the error names what is missing or wrong and what to give. */
int bk_store_s3_check(const char *url, bk_error **err);

#endif
