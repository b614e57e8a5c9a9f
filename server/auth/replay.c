#include "auth/replay.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define GENERATIONS 3
#define BUCKETS_MIN 64

struct entry {
	struct entry *hnext;               /* hash chain within its generation */
	struct entry *aprev, *anext;       /* list of entries holding an answer, oldest first */
	uint64_t hash;
	uint64_t key_hash;
	uint8_t nonce[BK_NONCE_LEN];
	bool answered;
	uint8_t *answer;
	size_t answer_len;
};

struct generation {
	struct entry **buckets;
	size_t nbuckets, n;
	int64_t started_ms;
};

struct bk_replay {
	pthread_mutex_t lock;
	struct generation gen[GENERATIONS]; /* gen[0] is the newest */
	bool started;
	size_t capacity, count;
	int64_t window_ms;
	size_t answer_cap, answer_bytes;
	struct entry *ahead, *atail;
	uint64_t seed;
};

/* FNV-1a over a secret seed and the bytes: nonces come from authenticated clients only, and the
 * seed keeps even those from choosing colliding chains. */
static uint64_t hash_bytes(uint64_t h, const void *data, size_t len)
{
	const uint8_t *p = data;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

bk_replay *bk_replay_new(size_t capacity, int64_t window_ms, size_t answer_bytes_cap)
{
	bk_replay *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	pthread_mutex_init(&r->lock, NULL);
	r->capacity = capacity;
	r->window_ms = window_ms;
	r->answer_cap = answer_bytes_cap;
	if (getrandom(&r->seed, sizeof(r->seed), 0) != sizeof(r->seed))
		r->seed = (uint64_t)(uintptr_t)r ^ 0xcbf29ce484222325ULL;
	return r;
}

static void answer_unlink(bk_replay *r, struct entry *e)
{
	if (!e->answer)
		return;
	if (e->aprev)
		e->aprev->anext = e->anext;
	else
		r->ahead = e->anext;
	if (e->anext)
		e->anext->aprev = e->aprev;
	else
		r->atail = e->aprev;
	r->answer_bytes -= e->answer_len;
	free(e->answer);
	e->answer = NULL;
	e->answer_len = 0;
	e->aprev = e->anext = NULL;
}

static void generation_clear(bk_replay *r, struct generation *g)
{
	for (size_t b = 0; b < g->nbuckets; b++) {
		struct entry *e = g->buckets[b];
		while (e) {
			struct entry *next = e->hnext;
			answer_unlink(r, e);
			free(e);
			e = next;
		}
	}
	r->count -= g->n;
	free(g->buckets);
	memset(g, 0, sizeof(*g));
}

void bk_replay_drop_answers(bk_replay *r)
{
	pthread_mutex_lock(&r->lock);
	while (r->ahead)
		answer_unlink(r, r->ahead);
	pthread_mutex_unlock(&r->lock);
}

void bk_replay_free(bk_replay *r)
{
	if (!r)
		return;
	for (int i = 0; i < GENERATIONS; i++)
		generation_clear(r, &r->gen[i]);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

/* Start a new generation once the newest is a window old. One rotation per call is enough:
 * an entry is only ever inserted into a generation less than a window old, and it is dropped
 * two rotations later, at least two windows after its insertion — by then its timestamp
 * (at most a window ahead of the clock when it was accepted) is out of the window. */
static void rotate(bk_replay *r, int64_t now_ms)
{
	if (r->started && now_ms - r->gen[0].started_ms < r->window_ms)
		return;
	if (r->started) {
		generation_clear(r, &r->gen[GENERATIONS - 1]);
		memmove(&r->gen[1], &r->gen[0], (GENERATIONS - 1) * sizeof(r->gen[0]));
		memset(&r->gen[0], 0, sizeof(r->gen[0]));
	}
	r->started = true;
	r->gen[0].started_ms = now_ms;
}

static struct entry *lookup(bk_replay *r, uint64_t hash, uint64_t key_hash, const uint8_t *nonce)
{
	for (int i = 0; i < GENERATIONS; i++) {
		struct generation *g = &r->gen[i];
		if (!g->nbuckets)
			continue;
		for (struct entry *e = g->buckets[hash & (g->nbuckets - 1)]; e; e = e->hnext)
			if (e->hash == hash && e->key_hash == key_hash && memcmp(e->nonce, nonce, BK_NONCE_LEN) == 0)
				return e;
	}
	return NULL;
}

static int generation_grow(struct generation *g)
{
	size_t nb = g->nbuckets ? g->nbuckets * 2 : BUCKETS_MIN;
	struct entry **buckets = calloc(nb, sizeof(*buckets));

	if (!buckets)
		return -1;
	for (size_t b = 0; b < g->nbuckets; b++) {
		struct entry *e = g->buckets[b];
		while (e) {
			struct entry *next = e->hnext;
			e->hnext = buckets[e->hash & (nb - 1)];
			buckets[e->hash & (nb - 1)] = e;
			e = next;
		}
	}
	free(g->buckets);
	g->buckets = buckets;
	g->nbuckets = nb;
	return 0;
}

static void hashes(const bk_replay *r, const char *key_id, const uint8_t *nonce, uint64_t *hash, uint64_t *key_hash)
{
	*key_hash = hash_bytes(r->seed, key_id, strlen(key_id));
	*hash = hash_bytes(*key_hash, nonce, BK_NONCE_LEN);
}

/* A new entry for (hash, key_hash, nonce) in the newest generation; NULL when full. Locked. */
static struct entry *insert(bk_replay *r, uint64_t hash, uint64_t key_hash, const uint8_t *nonce)
{
	struct generation *g = &r->gen[0];
	struct entry *e;

	if (r->count >= r->capacity)
		return NULL;
	if (g->n >= g->nbuckets && generation_grow(g) < 0)
		return NULL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->hash = hash;
	e->key_hash = key_hash;
	memcpy(e->nonce, nonce, BK_NONCE_LEN);
	e->hnext = g->buckets[hash & (g->nbuckets - 1)];
	g->buckets[hash & (g->nbuckets - 1)] = e;
	g->n++;
	r->count++;
	return e;
}

int bk_replay_forget(bk_replay *r, const char *key_id, const uint8_t nonce[BK_NONCE_LEN], int64_t now_ms)
{
	uint64_t hash, key_hash;
	struct entry *e;
	int ret = 0;

	hashes(r, key_id, nonce, &hash, &key_hash);
	pthread_mutex_lock(&r->lock);
	rotate(r, now_ms);
	if (lookup(r, hash, key_hash, nonce))
		ret = -EEXIST;
	else if (!(e = insert(r, hash, key_hash, nonce)))
		ret = -ENOSPC;
	else
		e->answered = true;
	pthread_mutex_unlock(&r->lock);
	return ret;
}

bk_replay_verdict bk_replay_check(bk_replay *r, const char *key_id, const uint8_t nonce[BK_NONCE_LEN], int64_t now_ms,
				  uint8_t **answer, size_t *answer_len)
{
	bk_replay_verdict v = BK_REPLAY_FULL;
	uint64_t hash, key_hash;
	struct entry *e;

	hashes(r, key_id, nonce, &hash, &key_hash);
	pthread_mutex_lock(&r->lock);
	rotate(r, now_ms);
	e = lookup(r, hash, key_hash, nonce);
	if (e) {
		v = !e->answered ? BK_REPLAY_IN_FLIGHT : e->answer ? BK_REPLAY_ANSWERED : BK_REPLAY_REPLAYED;
		if (v == BK_REPLAY_ANSWERED) {
			*answer = malloc(e->answer_len);
			if (!*answer)
				v = BK_REPLAY_REPLAYED;
			else {
				memcpy(*answer, e->answer, e->answer_len);
				*answer_len = e->answer_len;
			}
		}
		goto out;
	}
	if (insert(r, hash, key_hash, nonce))
		v = BK_REPLAY_FRESH;
out:
	pthread_mutex_unlock(&r->lock);
	return v;
}

void bk_replay_answer(bk_replay *r, const char *key_id, const uint8_t nonce[BK_NONCE_LEN], const uint8_t *answer,
		      size_t len)
{
	uint64_t hash, key_hash;
	struct entry *e;

	hashes(r, key_id, nonce, &hash, &key_hash);
	pthread_mutex_lock(&r->lock);
	e = lookup(r, hash, key_hash, nonce);
	if (!e || e->answered)
		goto out;
	e->answered = true;
	if (!answer || len > r->answer_cap)
		goto out;
	/* Make room by forgetting the oldest answers: a resend comes soon after its request. */
	while (r->ahead && r->answer_bytes + len > r->answer_cap)
		answer_unlink(r, r->ahead);
	e->answer = malloc(len ? len : 1);
	if (!e->answer)
		goto out;
	memcpy(e->answer, answer, len);
	e->answer_len = len;
	r->answer_bytes += len;
	e->aprev = r->atail;
	if (r->atail)
		r->atail->anext = e;
	else
		r->ahead = e;
	r->atail = e;
out:
	pthread_mutex_unlock(&r->lock);
}

size_t bk_replay_count(bk_replay *r)
{
	size_t n;

	pthread_mutex_lock(&r->lock);
	n = r->count;
	pthread_mutex_unlock(&r->lock);
	return n;
}

size_t bk_replay_answer_bytes(bk_replay *r)
{
	size_t n;

	pthread_mutex_lock(&r->lock);
	n = r->answer_bytes;
	pthread_mutex_unlock(&r->lock);
	return n;
}
