/* An output stream's bytes as they are read from a pipe or terminal, numbered from 0 in the
 * order they came (absolute offsets: a reader names where it is, however much was dropped), in
 * a buffer of at most `cap` bytes allocated as it fills (64 KiB, doubling). Two policies:
 *
 *   BK_RING_KEEP_HEAD  the first cap bytes are kept; what comes after is read and counted,
 *                      never kept (Exec: a command is neither blocked on a full pipe nor killed
 *                      for talking too much, and its answer says how much was dropped);
 *   BK_RING_KEEP_TAIL  the last cap bytes are kept: the buffer wraps (offset o lives at
 *                      o % cap), and the oldest bytes give way (background processes).
 *
 * Bytes read and not kept are lost, and counted: [first, last) is what is kept, end what was
 * read. Without memory to grow, a ring keeps what it has: keep-tail wraps at the size it
 * reached, keep-head keeps nothing more (so that what it keeps is always a prefix).
 *
 * Not thread-safe: its owner (the run engine, runs.c) holds its lock around every call. */
#ifndef BK_RING_H
#define BK_RING_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cleanup.h"

typedef struct bk_ring bk_ring;

enum bk_ring_policy {
	BK_RING_KEEP_HEAD,
	BK_RING_KEEP_TAIL,
};

/* A ring that keeps at most cap bytes; no buffer yet. NULL when out of memory. */
bk_ring *bk_ring_new(enum bk_ring_policy policy, size_t cap);
void bk_ring_free(bk_ring *r);
BK_DEFINE_PTR_CLEANUP(bk_ring_freep, bk_ring, bk_ring_free)

/* One read(2) of at most max bytes (max > 0) from fd: straight into the ring where they are kept,
 * into a scratch area where they are not. The count (> 0), 0 at end of file, or -errno (-EAGAIN,
 * -EINTR, -EIO from a terminal whose other side closed, ...). */
ssize_t bk_ring_read(bk_ring *r, int fd, size_t max);

/* Offsets: end is one past the last byte read; [first, last) is kept. */
uint64_t bk_ring_end(const bk_ring *r);
uint64_t bk_ring_first(const bk_ring *r);
uint64_t bk_ring_last(const bk_ring *r);
/* Bytes read and not kept: keep-head's dropped tail, keep-tail's overwritten head. */
uint64_t bk_ring_lost(const bk_ring *r);
/* The most it keeps now (less than it was made with once memory ran out). */
size_t bk_ring_cap(const bk_ring *r);

/* The kept bytes from off (first <= off <= last) that lie in one piece: where they are, and how
 * many in *len (0 at last, or NULL with *len 0 when nothing was ever kept). */
const uint8_t *bk_ring_peek(const bk_ring *r, uint64_t off, size_t *len);
/* Copy the n kept bytes from off (first <= off, off + n <= last) to out, across the wrap. */
void bk_ring_copy(const bk_ring *r, uint64_t off, uint8_t *out, size_t n);

#endif
