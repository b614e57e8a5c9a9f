# Benchmarks: every figure is printed with a baseline measured in the same run, and once more
# as a machine-readable line `bench: NAME VALUE UNIT` (and `bench: NAME.ratio VALUE x`).
# docs/BENCHMARKS.md says how to read them and records what was measured.
#
#   health round trip  bench/health_rtt.c, driven by bench/health-rtt.sh: the authenticated
#                      Health call through libboxkite against a real boxkited, beside a raw nng
#                      REQ/REP echo, over ipc:// and tcp://127.0.0.1.
# BENCH_ARGS passes options to the drivers, e.g. `make bench BENCH_ARGS="--iterations 5000"`.

.PHONY: bench

BENCH_ARGS ?=

$(B)/bench/health_rtt: $(call obj,bench/health_rtt.c) $(B)/libboxkite.a
	@mkdir -p $(@D)
	$(CC) -pie $(LDFLAGS) -o $@ $^ $(LDLIBS_CLIENT)

bench: all $(B)/bench/health_rtt
	bench/health-rtt.sh $(B) $(BENCH_ARGS)
