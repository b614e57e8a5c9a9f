/* Ownership helpers: cleanup attributes for the resources this project holds, and the explicit
 * TAKE_PTR / TAKE_FD that move ownership out of a scope. Every destructor accepts NULL / -1. */
#ifndef BK_CLEANUP_H
#define BK_CLEANUP_H

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(bk_freep)
#define _cleanup_close_ _cleanup_(bk_closep)
#define _cleanup_close_pair_ _cleanup_(bk_close_pairp)

/* A pair of descriptors (pipe2, socketpair) that is not open yet. */
#define BK_FD_PAIR_NONE { -1, -1 }

/* Move ownership out of a variable that has a cleanup attribute. */
#define TAKE_PTR(p)                                                                                \
	({                                                                                         \
		__typeof__(p) _bk_took = (p);                                                      \
		(p) = NULL;                                                                        \
		_bk_took;                                                                          \
	})
#define TAKE_FD(fd)                                                                                \
	({                                                                                         \
		int _bk_took = (fd);                                                               \
		(fd) = -1;                                                                         \
		_bk_took;                                                                          \
	})

/* Define `static inline void name(type **p)` that calls `fn(*p)` when *p is not NULL. */
#define BK_DEFINE_PTR_CLEANUP(name, type, fn)                                                      \
	static inline void name(type **p)                                                          \
	{                                                                                          \
		if (*p)                                                                            \
			fn(*p);                                                                    \
	}

static inline void bk_freep(void *p)
{
	free(*(void **)p);
}

/* close() that keeps errno: cleanups run on error paths whose errno the caller still reads. */
static inline int bk_close(int fd)
{
	if (fd >= 0) {
		int saved = errno;
		close(fd);
		errno = saved;
	}
	return -1;
}

static inline void bk_closep(int *fd)
{
	bk_close(*fd);
}

/* Close both ends of a pair, either of which may have been taken (-1). */
static inline void bk_close_pair(int p[2])
{
	p[0] = bk_close(p[0]);
	p[1] = bk_close(p[1]);
}

static inline void bk_close_pairp(int (*p)[2])
{
	bk_close_pair(*p);
}

#define BK_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
