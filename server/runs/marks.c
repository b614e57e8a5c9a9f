#include "runs/marks.h"

#include <stdlib.h>
#include <string.h>

/* v[head .. head + n) are the marks, oldest first, offsets increasing. The array grows by
 * doubling up to max; trimmed marks leave room at the front, taken back when the array is full. */
struct bk_marks {
	bk_mark *v;
	size_t head, n, size, max;
};

bk_marks *bk_marks_new(size_t max)
{
	bk_marks *m = calloc(1, sizeof(*m));

	if (m)
		m->max = max < 2 ? 2 : max;
	return m;
}

void bk_marks_free(bk_marks *m)
{
	if (!m)
		return;
	free(m->v);
	free(m);
}

/* Neighbours merged two by two (each pair keeps its first: the earlier seq and time). */
static void halve(bk_marks *m)
{
	bk_mark *v = m->v + m->head;
	size_t k = 0;

	for (size_t i = 0; i < m->n; i += 2)
		v[k++] = v[i];
	m->n = k;
}

/* Room for one more mark at the end: false when there is none (out of memory). */
static int make_room(bk_marks *m)
{
	if (m->head + m->n < m->size)
		return 1;
	if (m->head) {
		memmove(m->v, m->v + m->head, m->n * sizeof(*m->v));
		m->head = 0;
		return 1;
	}
	if (m->size < m->max) {
		size_t size = m->size ? 2 * m->size : 16;
		bk_mark *v;

		if (size > m->max)
			size = m->max;
		v = realloc(m->v, size * sizeof(*v));
		if (v) {
			m->v = v;
			m->size = size;
			return 1;
		}
	}
	if (m->n < 2)
		return 0;
	halve(m);
	return 1;
}

void bk_marks_add(bk_marks *m, uint64_t offset, uint64_t seq, int64_t time_ms)
{
	const bk_mark *last = m->n ? &m->v[m->head + m->n - 1] : NULL;

	if (last && (offset <= last->offset || (seq == last->seq && time_ms - last->time_ms < BK_MARKS_GRAIN_MS)))
		return;
	if (!make_room(m))
		return;
	m->v[m->head + m->n++] = (bk_mark){ .offset = offset, .seq = seq, .time_ms = time_ms };
}

void bk_marks_trim(bk_marks *m, uint64_t first)
{
	while (m->n >= 2 && m->v[m->head + 1].offset <= first) {
		m->head++;
		m->n--;
	}
	if (m->n == 0)
		m->head = 0;
}

size_t bk_marks_find(const bk_marks *m, uint64_t off, size_t len, size_t *from)
{
	const bk_mark *v = m->v + m->head;
	size_t lo = 0, hi = m->n, k;

	/* The last mark at or before off: v[lo - 1]. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid].offset <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return 0;
	*from = lo - 1;
	for (k = lo; k < m->n && v[k].offset < off + len; k++)
		;
	return k - (lo - 1);
}

const bk_mark *bk_marks_at(const bk_marks *m, size_t i)
{
	return &m->v[m->head + i];
}

size_t bk_marks_count(const bk_marks *m)
{
	return m->n;
}
