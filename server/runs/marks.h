/* When and in which order a background process's output was read, kept beside each of its two
 * rings (docs/PROTOCOL.md, "ProcessRead", marks): a mark says that the stream's bytes from `offset`
 * on were read at `time_ms` (wall clock), as part of its run's read number `seq`. A run numbers
 * its reads across both streams and moves to the next number only when it reads the other
 * stream than last time, so that ordering every stream's bytes by (seq, offset) puts the two
 * streams back together in the order they were read; marks that say nothing new (the same seq,
 * less than BK_MARKS_GRAIN_MS later) are not made.
 *
 * Bounded: at most `max` marks per stream (BK_MARKS_MAX). A full set halves: neighbours merge,
 * the merged mark keeping the earlier one's seq and time, so that the order and the times of
 * the older output grow coarser and nothing grows. Marks of bytes the ring dropped go with them
 * (bk_marks_trim).
 *
 * Not thread-safe: its owner (the run engine, runs.c) holds its lock around every call. */
#ifndef BK_MARKS_H
#define BK_MARKS_H

#include <stddef.h>
#include <stdint.h>

#include "cleanup.h"

#define BK_MARKS_MAX 4096
#define BK_MARKS_GRAIN_MS 10

typedef struct bk_mark {
	uint64_t offset;
	uint64_t seq;
	int64_t time_ms;
} bk_mark;

typedef struct bk_marks bk_marks;

/* A set that keeps at most max (>= 2) marks; no memory for them yet. NULL when out of memory. */
bk_marks *bk_marks_new(size_t max);
void bk_marks_free(bk_marks *m);
BK_DEFINE_PTR_CLEANUP(bk_marks_freep, bk_marks, bk_marks_free)

/* The stream's bytes from offset on (past every mark's) were read as read seq (never less than
 * the last one's) at time_ms. Out of memory, the last mark stands for them (coarser, never
 * wrong about the order). */
void bk_marks_add(bk_marks *m, uint64_t offset, uint64_t seq, int64_t time_ms);

/* The ring keeps nothing before first any more: marks of bytes wholly before it go (the one
 * first falls under stays). */
void bk_marks_trim(bk_marks *m, uint64_t first);

/* The marks of the bytes [off, off + len) (len > 0), in order: how many there are, and the
 * first of them in *from (an index for bk_marks_at). The first one's offset may lie before off:
 * the bytes at off are the rest of its read. 0 when no mark covers off. */
size_t bk_marks_find(const bk_marks *m, uint64_t off, size_t len, size_t *from);
const bk_mark *bk_marks_at(const bk_marks *m, size_t i);

/* How many marks it holds. */
size_t bk_marks_count(const bk_marks *m);

#endif
