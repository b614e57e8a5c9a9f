/* Small files the kernel generates (procfs, cgroupfs), read whole into the caller's buffer: the
 * one reader the executor uses for /proc/<pid>/status, cgroup.controllers and the like. */
#ifndef BK_KFILE_H
#define BK_KFILE_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/types.h>

#include "cleanup.h"
#include "fullio.h"

/* Read path into buf, at most size - 1 bytes, and NUL-terminate what was read (which may itself
 * hold NULs, as /proc/<pid>/cmdline does). The length, or -errno. */
static inline ssize_t bk_kfile_read(const char *path, char *buf, size_t size)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = bk_pread_full(fd, (uint8_t *)buf, size - 1, 0);
	if (n >= 0)
		buf[n] = '\0';
	return n;
}

#endif
