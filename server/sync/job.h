/* Inside the sync (sync.h): a job — one push, pull or listing — and what its parts share:
 * sync.c runs jobs and serves the rpcs, push.c and pull.c do the two directions, walk.c holds
 * what both use. */
#ifndef BK_SYNC_JOB_H
#define BK_SYNC_JOB_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <zstd.h>

#include "boundary/link.h"
#include "boxkite/store/snapshot.pb-c.h"
#include "rpc/call.h"
#include "rpc/workers.h"
#include "sbpath.h"
#include "sync/hashset.h"
#include "sync/store.h"
#include "sync/sync.h"

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

/* The blobs known to be in one store: the local index that makes "does the store have it" free
 * after the first time. In memory, so a restarted boxkited asks the store again. */
struct seen {
	struct seen *next;
	struct bk_hashset blobs;
	char epoch[STORE_ID_LEN + 1]; /* the store's id when blobs was filled (see store_epoch) */
	char url[];
};

struct progress {
	bool running;
	const char *operation;
	char snapshot[ID_MAX + 1];
	uint64_t files_done, bytes_done, files_total, bytes_total, blobs_uploaded;
	uint64_t files_read, bytes_uploaded; /* push: files read (changed since the store saw them), bytes put */
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
	atomic_bool cancel;   /* every job's store calls end (bk_sync_cancel); cleared as a job begins */
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
	struct bk_hashset pending; /* blobs submitted, not yet put */
	bk_error *upload_err;  /* the first upload's failure */
	/* results */
	Boxkite__V1__SyncPushResponse push;
	Boxkite__V1__SyncPullResponse pull;
	struct bk_hashset distinct; /* push: the snapshot's blobs */
	/* push: the manifest being built */
	Boxkite__Store__Entry **entries;
	size_t nentries, capentries;
	bk_error *err;
};

static inline struct bk_sync *sync_of(bk_server *srv)
{
	return srv->sync;
}

/* Whether the job must stop (bk_sync_cancel, or boxkited stopping): 0, or -ECANCELED with
 * j->err set. Checked between entries; the store's calls notice it themselves. */
static inline int sync_check_cancel(struct job *j)
{
	if (atomic_load(&j->srv->stopping))
		return bk_error_set(&j->err, BK_UNAVAILABLE, ECANCELED, "boxkited is shutting down");
	if (atomic_load(&sync_of(j->srv)->cancel))
		return bk_error_set(&j->err, BK_CANCELLED, ECANCELED, "cancelled by a reset");
	return 0;
}

/* An entry of a directory, as the file worker listed it. */
struct dirent_info {
	char *name, *target;
	uint32_t type, mode;
	uint64_t size;
	int64_t mtime_ns;
};

/* walk.c */
/* What the running sync did since: files walked (and of them read) with their bytes, blobs put
 * with their stored bytes. */
struct progress_step {
	uint64_t files, bytes, files_read, blobs, bytes_uploaded;
};
void sync_progress_add(struct job *j, struct progress_step d);
/* Send an order to the file worker and wait for its reply (with a descriptor into *fd when fd is
 * not NULL); the error in j->err, prefixed with what and path. */
int sync_order(struct job *j, bk_order *order, bk_reply **reply, int *fd, const char *what, const char *path);
/* Every entry of a directory, page after page; free with sync_dirents_free. */
int sync_list_dir(struct job *j, const char *path, struct dirent_info **out, size_t *nout);
void sync_dirents_free(struct dirent_info *v, size_t n);
/* Whether name (at rel, relative to the tree) matches the job's patterns (and the defaults). */
bool sync_excluded(const struct job *j, bool defaults, const char *name, const char *rel);
/* A blob's key: blobs/XX/HASH. */
void sync_blob_key(const bk_hash h, char out[BLOB_KEY_MAX]);
/* A snapshot id: [A-Za-z0-9._-], 1 to ID_MAX bytes, not first '.'. */
bool sync_id_valid(const char *id);

/* push.c */
int sync_run_push(struct job *j);
void sync_entry_free(Boxkite__Store__Entry *e);

/* pull.c */
int sync_run_pull(struct job *j);
/* A manifest read back: decoded in an arena of its own, within the bounds of sync.h. */
struct manifest {
	bk_arena *arena;
	Boxkite__Store__Manifest *m;
};
int sync_manifest_read(struct job *j, const char *id, struct manifest *out);
void sync_manifest_free(struct manifest *mf);
/* Whether a manifest of plain bytes that compressed to stored bytes is one a pull reads. */
static inline bool sync_manifest_fits(uint64_t plain, uint64_t stored)
{
	return stored <= BK_MANIFEST_MAX && plain <= BK_MANIFEST_PLAIN_MAX &&
	       plain <= (uint64_t)BK_MANIFEST_RATIO * stored + (64u << 10);
}

#endif
