/* A set of 32-byte hashes (block hashes: SHA-256 output, so their own first bytes spread them),
 * open addressing, kept at most half full. Not locked: its owner says who may touch it. */
#ifndef BK_HASHSET_H
#define BK_HASHSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "contenthash.h"

struct bk_hashset {
	bk_hash *slots;
	uint8_t *used;
	size_t cap, n; /* cap a power of two, kept at most half full */
};

/* A set starts all zeroes (empty). */
bool bk_hashset_has(const struct bk_hashset *s, const bk_hash h);
/* 1 when added, 0 when it was there, -ENOMEM. */
int bk_hashset_add(struct bk_hashset *s, const bk_hash h);
/* Free its memory; it is empty again. */
void bk_hashset_fini(struct bk_hashset *s);

#endif
