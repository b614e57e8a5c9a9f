/* Reads and writes that finish what they start: short counts and EINTR retried. */
#ifndef BK_FULLIO_H
#define BK_FULLIO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Read up to len bytes at off; fewer only at end of file. The count, or -errno. */
ssize_t bk_pread_full(int fd, uint8_t *buf, size_t len, uint64_t off);

/* Write all of p. 0, or -errno (-EIO for a write that made no progress). */
int bk_write_full(int fd, const uint8_t *p, size_t len);

#endif
