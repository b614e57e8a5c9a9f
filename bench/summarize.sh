#!/bin/bash
# Summarize several benchmark runs: the median, minimum and maximum of every `bench:` line.
#
#   for i in 1 2 3 4 5; do make -s bench > run$i.txt; done
#   bench/summarize.sh run*.txt
set -euo pipefail

grep -h '^bench: ' "$@" | awk '{ print $2, $3, $4 }' | sort -k1,1 -k2,2g | awk '
function flush(   mid, med) {
	if (n == 0)
		return
	mid = int((n + 1) / 2)
	med = n % 2 ? v[mid] : (v[mid] + v[mid + 1]) / 2
	printf "%-34s %8.2f %8.2f %8.2f %-3s  (%d runs)\n", name, med, v[1], v[n], unit, n
	n = 0
}
$1 != name { flush(); name = $1; unit = $3 }
{ v[++n] = $2 }
END { flush() }' | { printf "%-34s %8s %8s %8s\n" "bench" "median" "min" "max"; cat; }
