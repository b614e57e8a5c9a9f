# Benchmarks: every figure is printed with a baseline measured in the same run, and once more
# as a machine-readable line `bench: NAME VALUE UNIT` (and `bench: NAME.ratio VALUE x`).

.PHONY: bench

bench: all
