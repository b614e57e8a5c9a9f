/* The two clocks: wall time for the envelope's timestamps, monotonic time for durations. */
#ifndef BK_CLOCK_H
#define BK_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t bk_clock_realtime_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline int64_t bk_clock_monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Microseconds since `since` (CLOCK_MONOTONIC). */
static inline uint64_t bk_elapsed_us(const struct timespec *since)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)(((int64_t)now.tv_sec - since->tv_sec) * 1000000 + (now.tv_nsec - since->tv_nsec) / 1000);
}

#endif
