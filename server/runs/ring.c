#include "runs/ring.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RING_INITIAL (64 * 1024)
#define DISCARD_SIZE (256 * 1024)

struct bk_ring {
	enum bk_ring_policy policy;
	uint8_t *buf;
	size_t alloc, cap;
	uint64_t first, last, end;
};

/* Where bytes that are not kept are read to. Nothing ever reads it back, so every ring (and
 * every thread) may share it. */
static uint8_t discard[DISCARD_SIZE];

bk_ring *bk_ring_new(enum bk_ring_policy policy, size_t cap)
{
	bk_ring *r = calloc(1, sizeof(*r));

	if (r) {
		r->policy = policy;
		r->cap = cap;
	}
	return r;
}

void bk_ring_free(bk_ring *r)
{
	if (r) {
		free(r->buf);
		free(r);
	}
}

/* Room past pos: the buffer doubles (from RING_INITIAL) when pos has reached its end and it may
 * grow, so that a ring holds about what was written to it, not its cap. Without memory, the ring
 * is as large as it got. */
static void grow(bk_ring *r, size_t pos)
{
	size_t want = r->alloc ? r->alloc * 2 : RING_INITIAL;
	uint8_t *buf;

	if (pos < r->alloc || r->alloc == r->cap)
		return;
	if (want > r->cap)
		want = r->cap;
	buf = realloc(r->buf, want);
	if (!buf) {
		r->cap = r->alloc;
		return;
	}
	r->buf = buf;
	r->alloc = want;
}

/* Where up to max bytes read next are kept (*at), and how many fit there in one piece; 0 when
 * they are not kept. */
static size_t space(bk_ring *r, size_t max, uint8_t **at)
{
	size_t pos, room;

	if (r->policy == BK_RING_KEEP_HEAD) {
		pos = (size_t)r->last;
		grow(r, pos);
		if (pos >= r->cap)
			return 0;
	} else {
		/* Growing, the end is below what is allocated; full size, it wraps at cap. */
		if (r->end < r->cap)
			grow(r, (size_t)r->end);
		if (r->cap == 0)
			return 0;
		pos = (size_t)(r->end % r->cap);
	}
	room = r->alloc - pos;
	*at = r->buf + pos;
	return room < max ? room : max;
}

ssize_t bk_ring_read(bk_ring *r, int fd, size_t max)
{
	uint8_t *at = discard;
	size_t room = space(r, max, &at);
	bool kept = room > 0;
	ssize_t n;

	if (!kept)
		room = max < sizeof(discard) ? max : sizeof(discard);
	n = read(fd, at, room);
	if (n <= 0)
		return n < 0 ? -errno : 0;
	r->end += (uint64_t)n;
	if (r->policy == BK_RING_KEEP_HEAD) {
		if (kept)
			r->last += (uint64_t)n;
	} else {
		r->last = r->end;
		if (r->end - r->first > r->cap)
			r->first = r->end - r->cap;
	}
	return n;
}

uint64_t bk_ring_end(const bk_ring *r)
{
	return r->end;
}

uint64_t bk_ring_first(const bk_ring *r)
{
	return r->first;
}

uint64_t bk_ring_last(const bk_ring *r)
{
	return r->last;
}

uint64_t bk_ring_lost(const bk_ring *r)
{
	return r->end - (r->last - r->first);
}

size_t bk_ring_cap(const bk_ring *r)
{
	return r->cap;
}

const uint8_t *bk_ring_peek(const bk_ring *r, uint64_t off, size_t *len)
{
	size_t pos;

	*len = 0;
	if (!r->buf || off < r->first || off >= r->last)
		return r->buf;
	if (r->policy == BK_RING_KEEP_HEAD) {
		*len = (size_t)(r->last - off);
		return r->buf + off;
	}
	pos = (size_t)(off % r->cap);
	*len = r->last - off < r->cap - pos ? (size_t)(r->last - off) : r->cap - pos;
	return r->buf + pos;
}

void bk_ring_copy(const bk_ring *r, uint64_t off, uint8_t *out, size_t n)
{
	while (n) {
		size_t len;
		const uint8_t *at = bk_ring_peek(r, off, &len);

		if (!len)
			return; /* not kept: the caller asked outside [first, last) */
		if (len > n)
			len = n;
		memcpy(out, at, len);
		out += len;
		off += len;
		n -= len;
	}
}
