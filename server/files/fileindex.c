#include "files/fileindex.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define BUCKETS 4096 /* a power of two */

struct entry {
	struct entry *chain;             /* the bucket's next */
	struct entry *older, *newer;     /* least recently used first */
	bk_filever v;
	uint64_t n, known;               /* blocks, and how many of them are in */
	size_t bytes;                    /* what it holds, for the bound */
	bool ready;                      /* all blocks are in: content is the content hash */
	bk_hash content;
	uint8_t *have;                   /* n bits: which blocks are in */
	bk_hash blocks[];
};

struct bk_fileindex {
	pthread_mutex_t lock;
	size_t max_bytes, bytes;
	struct entry *oldest, *newest;
	struct entry *buckets[BUCKETS];
};

void bk_filever_of(const struct stat *st, bk_filever *out)
{
	*out = (bk_filever){
		.dev = (uint64_t)st->st_dev,
		.ino = (uint64_t)st->st_ino,
		.size = (uint64_t)st->st_size,
		.mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec,
		.ctime_ns = (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec,
	};
}

bool bk_filever_same(const bk_filever *a, const bk_filever *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime_ns == b->mtime_ns &&
	       a->ctime_ns == b->ctime_ns;
}

static struct entry **bucket(bk_fileindex *ix, const bk_filever *v)
{
	uint64_t h = (v->ino * 0x9e3779b97f4a7c15ull) ^ v->dev;

	return &ix->buckets[(h >> 32) & (BUCKETS - 1)];
}

bk_fileindex *bk_fileindex_new(size_t max_bytes)
{
	bk_fileindex *ix = calloc(1, sizeof(*ix));

	if (!ix)
		return NULL;
	pthread_mutex_init(&ix->lock, NULL);
	ix->max_bytes = max_bytes;
	return ix;
}

static void lru_unlink(bk_fileindex *ix, struct entry *e)
{
	*(e->older ? &e->older->newer : &ix->oldest) = e->newer;
	*(e->newer ? &e->newer->older : &ix->newest) = e->older;
	e->older = e->newer = NULL;
}

static void lru_push(bk_fileindex *ix, struct entry *e)
{
	e->older = ix->newest;
	e->newer = NULL;
	*(ix->newest ? &ix->newest->newer : &ix->oldest) = e;
	ix->newest = e;
}

static void entry_remove(bk_fileindex *ix, struct entry *e)
{
	struct entry **pp = bucket(ix, &e->v);

	while (*pp != e)
		pp = &(*pp)->chain;
	*pp = e->chain;
	lru_unlink(ix, e);
	ix->bytes -= e->bytes;
	free(e);
}

void bk_fileindex_clear(bk_fileindex *ix)
{
	pthread_mutex_lock(&ix->lock);
	while (ix->oldest)
		entry_remove(ix, ix->oldest);
	pthread_mutex_unlock(&ix->lock);
}

void bk_fileindex_free(bk_fileindex *ix)
{
	if (!ix)
		return;
	bk_fileindex_clear(ix);
	pthread_mutex_destroy(&ix->lock);
	free(ix);
}

/* The entry of v's inode, under the lock; NULL when there is none. */
static struct entry *find(bk_fileindex *ix, const bk_filever *v)
{
	for (struct entry *e = *bucket(ix, v); e; e = e->chain)
		if (e->v.dev == v->dev && e->v.ino == v->ino)
			return e;
	return NULL;
}

/* Once every block is in. (libcrypto failing leaves it not ready: never a wrong answer.) */
static void complete(struct entry *e)
{
	e->ready = e->known == e->n && bk_content_hash(e->blocks, e->n, e->content) == 0;
}

/* The entry for this very version, made afresh (replacing another version's) when needed;
 * NULL when out of memory or larger than the whole bound. Under the lock. */
static struct entry *entry_for(bk_fileindex *ix, const bk_filever *v)
{
	struct entry *e = find(ix, v);
	uint64_t n = bk_blocks_of(v->size);
	size_t bytes;

	if (e && bk_filever_same(&e->v, v)) {
		lru_unlink(ix, e);
		lru_push(ix, e);
		return e;
	}
	if (e)
		entry_remove(ix, e);
	if (n > (SIZE_MAX - sizeof(*e)) / (BK_HASH_LEN + 1))
		return NULL;
	bytes = sizeof(*e) + (size_t)n * BK_HASH_LEN + (size_t)(n + 7) / 8;
	if (bytes > ix->max_bytes)
		return NULL;
	while (ix->oldest && ix->bytes + bytes > ix->max_bytes)
		entry_remove(ix, ix->oldest);
	e = calloc(1, bytes);
	if (!e)
		return NULL;
	e->v = *v;
	e->n = n;
	e->bytes = bytes;
	e->have = (uint8_t *)&e->blocks[n];
	e->chain = *bucket(ix, v);
	*bucket(ix, v) = e;
	lru_push(ix, e);
	ix->bytes += bytes;
	complete(e); /* an empty file has no blocks to wait for */
	return e;
}

void bk_fileindex_put(bk_fileindex *ix, const bk_filever *v, const bk_hash *blocks)
{
	struct entry *e;

	pthread_mutex_lock(&ix->lock);
	e = entry_for(ix, v);
	if (e && e->n) {
		memcpy(e->blocks, blocks, (size_t)e->n * BK_HASH_LEN);
		memset(e->have, 0xff, (size_t)(e->n + 7) / 8);
	}
	if (e) {
		e->known = e->n;
		complete(e);
	}
	pthread_mutex_unlock(&ix->lock);
}

void bk_fileindex_note(bk_fileindex *ix, const bk_filever *v, uint64_t k, const bk_hash hash)
{
	struct entry *e;

	pthread_mutex_lock(&ix->lock);
	e = entry_for(ix, v);
	if (e && k < e->n && !(e->have[k / 8] & (1u << (k % 8)))) {
		memcpy(e->blocks[k], hash, BK_HASH_LEN);
		e->have[k / 8] |= (uint8_t)(1u << (k % 8));
		e->known++;
		complete(e);
	}
	pthread_mutex_unlock(&ix->lock);
}

int bk_fileindex_get(bk_fileindex *ix, const bk_filever *v, bk_hash out, bk_hash *blocks)
{
	struct entry *e;
	int ret = -ENOENT;

	pthread_mutex_lock(&ix->lock);
	e = find(ix, v);
	if (e && bk_filever_same(&e->v, v) && e->ready) {
		memcpy(out, e->content, BK_HASH_LEN);
		if (blocks)
			memcpy(blocks, e->blocks, (size_t)e->n * BK_HASH_LEN);
		lru_unlink(ix, e);
		lru_push(ix, e);
		ret = 0;
	}
	pthread_mutex_unlock(&ix->lock);
	return ret;
}
