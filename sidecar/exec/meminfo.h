/* The /proc/meminfo a command sees (spawn.c, step 2). The kernel's says what the node has — 24 GiB
 * where the command may use 512 MiB — and `free`, `top`, psutil and libuv's total memory read it.
 * Where a memory cgroup limits the exec, it gets a file of its own instead, written by the exec's
 * child into a tmpfs of its own and bound read-only over /proc/meminfo in its mount namespace (the
 * tmpfs detached at once: nothing else of it is reachable): MemTotal its limit (the exec's, or
 * what the whole sandbox may still hold, whichever is less), MemFree and MemAvailable what it
 * could take when it started, nothing in caches or swap. It is made when the exec starts (an exec
 * prepared ahead: when it was prepared, as the one before it ended) and does not follow it: a
 * command that allocates sees the same free memory afterwards — no further from the truth than
 * the node's numbers, and its total is the one that stops it (SECURITY.md, "What a
 * command sees of the node's memory"). Without a memory cgroup, the node's. */
#ifndef BK_MEMINFO_H
#define BK_MEMINFO_H

#include <stddef.h>
#include <stdint.h>

#define BK_MEMINFO_MAX 512

/* The file's text for a limit of total bytes of which available were free, NUL-terminated, in
 * out (BK_MEMINFO_MAX bytes). */
void bk_meminfo_text(uint64_t total, uint64_t available, char out[BK_MEMINFO_MAX]);

#endif
