# Benchmarks: every figure is printed with a baseline measured in the same run, and once more
# as a machine-readable line `bench: NAME VALUE UNIT` (and `bench: NAME.ratio VALUE x`).
# docs/BENCHMARKS.md says how to read them and records what was measured.
#
#   health round trip  bench/health_rtt.c, driven by bench/health-rtt.sh: the authenticated
#                      Health call through libboxkite against a real boxkited, beside a raw nng
#                      REQ/REP echo, over ipc:// and tcp://127.0.0.1.
#   exec               bench/exec_bench.c, driven by bench/exec.sh: the isolated-spawn floor (the
#                      executor's own code, no RPC) beside the exec round trip of `true`; execs/s
#                      with 8 concurrent clients beside one client's rate (1e6 / the round trip's
#                      p50), and the health latency meanwhile beside that of the same daemon with
#                      no exec running; a full listing of 100 000 entries; the health latency while
#                      8 clients exec and 8 list those entries, beside idle Health. All of it once
#                      more for BENCH_BASELINE (main unless set; empty: none), built from
#                      `git archive` in a scratch directory in the same run, and ours against it.
#   files              bench/files_bench.c, driven by bench/files.sh: 256 MiB up and down through
#                      boxkited, ipc and tcp, beside the same run's one-core SHA-256 rate (the
#                      targets' base), raw nng and a local write, with each side's CPU per GiB;
#                      1,000 x 4 KiB with bkctl cp -r beside a local cp -r.
#   processes          bench/process_bench.c, driven by bench/process.sh: 1 GiB of `head -c` streamed
#                      through ProcessRead beside the same command into a pipe; the latency from a
#                      command's write to a long-polling reader; Health with 100 long-polls waiting
#                      beside idle Health, same daemon.
#   sync               bench/sync.sh: a 1 GiB source-like workspace pushed to a file:// store
#                      (full, then after changing 1 % of the files) and pulled into an empty
#                      one, beside tar -c | zstd -1 of the same tree in the same run.
#   watch              bench/watch_bench.c, driven by bench/watch.sh: from a change (FileMkdir) to its
#                      event at a long-polling reader beside the FileMkdir round trip itself; a
#                      burst of files made while nobody reads: kept, counted lost, drained.
#   egress             bench/egress.sh: 64 MiB from an upstream on loopback through the egress proxy
#                      (a forwarded request and a CONNECT tunnel) beside the same fetch direct, and
#                      the first-byte latency the proxy adds; its CPU per GiB relayed.
# Percentiles are nearest-rank, computed one way for all (bench/stats.h).
# BENCH_ARGS passes options to the drivers, e.g. `make bench BENCH_ARGS="--iterations 5000"`.

.PHONY: bench

BENCH_ARGS ?=

$(B)/bench/health_rtt: $(call obj,bench/health_rtt.c) $(B)/libboxkite.a
	@mkdir -p $(@D)
	$(CC) -pie $(LDFLAGS) -o $@ $^ $(LDLIBS_CLIENT)

# The floor links the executor's code (libbkexec.a) beside the client library.
$(B)/obj/bench/exec_bench.o: CPPFLAGS += -Isidecar
$(B)/bench/exec_bench: $(call obj,bench/exec_bench.c) $(B)/libboxkite.a $(B)/libbkexec.a $(B)/libbkcore.a
	@mkdir -p $(@D)
	$(CC) -pie $(LDFLAGS) -o $@ $^ $(LDLIBS_SERVER)

$(B)/bench/files_bench: $(call obj,bench/files_bench.c) $(B)/libboxkite.a
	@mkdir -p $(@D)
	$(CC) -pie $(LDFLAGS) -o $@ $^ $(LDLIBS_CLIENT)

# It calls the rpcs through libboxkite's generic call (client/lib/request.h).
$(B)/obj/bench/process_bench.o: CPPFLAGS += -Iclient/lib
$(B)/bench/process_bench: $(call obj,bench/process_bench.c) $(B)/libboxkite.a
	@mkdir -p $(@D)
	$(CC) -pie $(LDFLAGS) -o $@ $^ $(LDLIBS_CLIENT)

$(B)/bench/watch_bench: $(call obj,bench/watch_bench.c) $(B)/libboxkite.a
	@mkdir -p $(@D)
	$(CC) -pie $(LDFLAGS) -o $@ $^ $(LDLIBS_CLIENT)

bench: all $(B)/bench/health_rtt $(B)/bench/exec_bench $(B)/bench/files_bench $(B)/bench/process_bench \
       $(B)/bench/watch_bench
	bench/health-rtt.sh $(B) $(BENCH_ARGS)
	bench/exec.sh $(B)
	bench/files.sh $(B)
	bench/process.sh $(B)
	bench/watch.sh $(B)
	bench/sync.sh $(B)
	bench/egress.sh $(B)
