#include "sync/hashset.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static size_t slot_of(const struct bk_hashset *s, const bk_hash h)
{
	uint64_t x;

	memcpy(&x, h, sizeof(x));
	return (size_t)x & (s->cap - 1);
}

bool bk_hashset_has(const struct bk_hashset *s, const bk_hash h)
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

static int hashset_grow(struct bk_hashset *s)
{
	struct bk_hashset bigger = { .cap = s->cap ? 2 * s->cap : 1024 };

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

int bk_hashset_add(struct bk_hashset *s, const bk_hash h)
{
	size_t i;

	if (bk_hashset_has(s, h))
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

void bk_hashset_fini(struct bk_hashset *s)
{
	free(s->slots);
	free(s->used);
	*s = (struct bk_hashset){ 0 };
}
