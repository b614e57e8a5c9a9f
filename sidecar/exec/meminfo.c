#include "exec/meminfo.h"

#include <inttypes.h>
#include <stdio.h>

void bk_meminfo_text(uint64_t total, uint64_t available, char out[BK_MEMINFO_MAX])
{
	uint64_t kb = total / 1024, free_kb = (available < total ? available : total) / 1024;

	/* The fields free(1), top and psutil read, in the kernel's layout; what a memory cgroup
	 * charges is all the exec's own: no buffers, caches or swap apart from it. */
	snprintf(out, BK_MEMINFO_MAX,
		 "MemTotal:       %8" PRIu64 " kB\n"
		 "MemFree:        %8" PRIu64 " kB\n"
		 "MemAvailable:   %8" PRIu64 " kB\n"
		 "Buffers:               0 kB\n"
		 "Cached:                0 kB\n"
		 "SwapCached:            0 kB\n"
		 "Active:                0 kB\n"
		 "Inactive:              0 kB\n"
		 "SwapTotal:             0 kB\n"
		 "SwapFree:              0 kB\n"
		 "Shmem:                 0 kB\n"
		 "SReclaimable:          0 kB\n",
		 kb, free_kb, free_kb);
}
