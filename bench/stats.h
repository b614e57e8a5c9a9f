/* Percentiles for the benchmarks (bench/health_rtt.c, bench/exec_bench.c): one rule for all. */
#ifndef BK_BENCH_STATS_H
#define BK_BENCH_STATS_H

#include <stddef.h>
#include <stdlib.h>

static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Sort n samples in place, ascending, for bench_percentile(). */
static inline void bench_sort(double *samples, size_t n)
{
	qsort(samples, n, sizeof(*samples), bench_cmp_double);
}

/* Nearest-rank percentile (pct of 100) of n > 0 sorted samples: the smallest sample with at least
 * pct% of the samples at or below it. */
static inline double bench_percentile(const double *sorted, size_t n, unsigned pct)
{
	size_t rank = (n * pct + 99) / 100;

	return sorted[rank ? rank - 1 : 0];
}

#endif
