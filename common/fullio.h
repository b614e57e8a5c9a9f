/* Reads and writes that finish what they start: short counts and EINTR retried. */
#ifndef BK_FULLIO_H
#define BK_FULLIO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Read up to len bytes at off; fewer only at end of file. The count, or -errno. */
ssize_t bk_pread_full(int fd, uint8_t *buf, size_t len, uint64_t off);

/* Read fd (a pipe too) to its end into a malloc'd *out. 0; -EFBIG past max bytes; or -errno. */
int bk_read_all(int fd, size_t max, uint8_t **out, size_t *len);

/* Write all of p. 0, or -errno (-EIO for a write that made no progress). */
int bk_write_full(int fd, const uint8_t *p, size_t len);

/* Write all of p at off. 0, or -errno (-EIO for a write that made no progress). */
int bk_pwrite_full(int fd, const uint8_t *p, size_t len, uint64_t off);

/* SHA-256 of the first size bytes of fd, read through buf (buf_len bytes). 0; -ENODATA when fd
 * holds fewer than size bytes (it changed under us); -ENOMEM when libcrypto fails; or the
 * -errno of a read. */
int bk_sha256_fd(int fd, uint64_t size, uint8_t *buf, size_t buf_len, uint8_t out[32]);

#endif
