/* The replay cache: which (key, nonce) pairs the server has accepted, and the answer it gave.
 *
 * An entry is added only after the MAC and the time window passed, so an unauthenticated
 * sender cannot fill it. Entries live in three generations, each `window` long; a lookup looks
 * in all three and a rotation drops the oldest. An entry therefore outlives the moment its
 * timestamp leaves the window, after which the window check refuses the request anyway.
 * The cache is bounded: past `capacity` live entries new requests are refused (FULL), never
 * let through. Answers are kept so that a re-sent request (nng's REQ resends after a timeout)
 * gets the same answer instead of a second execution; their bytes are capped, and the oldest
 * answer is dropped first, after which its request is refused as replayed.
 * Thread-safe. Time is passed in, never read. */
#ifndef BK_REPLAY_H
#define BK_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "envelope.h"

typedef struct bk_replay bk_replay;

typedef enum bk_replay_verdict {
	BK_REPLAY_FRESH,     /* first sight: recorded as in flight; answer it with bk_replay_answer() */
	BK_REPLAY_IN_FLIGHT, /* seen, its answer is not ready yet */
	BK_REPLAY_ANSWERED,  /* seen and answered; *answer holds a copy of the answer */
	BK_REPLAY_REPLAYED,  /* seen, answer no longer kept */
	BK_REPLAY_FULL,      /* not seen, but no room to record it */
} bk_replay_verdict;

bk_replay *bk_replay_new(size_t capacity, int64_t window_ms, size_t answer_bytes_cap);
void bk_replay_free(bk_replay *r);

/* Look up (key_id, nonce) at time now; on FRESH, record it. On ANSWERED, *answer is a malloc'd
 * copy of the stored answer (the caller frees it) and *answer_len its length. */
bk_replay_verdict bk_replay_check(bk_replay *r, const char *key_id, const uint8_t nonce[BK_NONCE_LEN], int64_t now_ms,
				  uint8_t **answer, size_t *answer_len);

/* Store the answer to a FRESH request (copied). Answers larger than the byte cap are not kept;
 * with answer NULL none is (the request is only marked answered: its re-sends are REPLAYED). */
void bk_replay_answer(bk_replay *r, const char *key_id, const uint8_t nonce[BK_NONCE_LEN], const uint8_t *answer,
		      size_t len);

/* Record (key_id, nonce) as answered with no answer kept, so that it is refused REPLAYED: what
 * the replay log (replaylog.h) puts back after a restart. 0, or -ENOSPC when the cache is full
 * (-EEXIST when already there). */
int bk_replay_forget(bk_replay *r, const char *key_id, const uint8_t nonce[BK_NONCE_LEN], int64_t now_ms);

/* Drop every kept answer (a Reset: they are the last tenant's output). The entries stay, so that
 * a re-send of any of those requests is refused REPLAYED rather than run again. */
void bk_replay_drop_answers(bk_replay *r);

/* Live entries and kept answer bytes, for tests and metrics. */
size_t bk_replay_count(bk_replay *r);
size_t bk_replay_answer_bytes(bk_replay *r);

#endif
