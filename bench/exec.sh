#!/bin/bash
# The exec benchmark (`make bench`): the isolated-spawn floor measured in-process with the
# executor's own code, then a real boxkited: the exec round trip of `true` (against the floor),
# execs/s with CLIENTS concurrent clients (against one client's rate, from the round trip) with
# the health latency meanwhile (against that of the same daemon with no exec running); a full
# listing of a directory of 100 000 entries; and the health latency while CLIENTS exec and
# CLIENTS list that directory (against idle Health, same daemon, same run). Beside the round
# trip, the peer a user would pick instead (bench/peers.sh): a bare bubblewrap spawn of `true`,
# measured just before it, and the round trip against it (`exec_rtt_vs_bwrap`, target <= 0.25x).
#
# The same is then measured on the baseline (BENCH_BASELINE, a git ref: main unless set; empty to
# skip), built in a scratch directory from `git archive`, in the same run: its figures as
# `bench: baseline.NAME`, and ours against them as `bench: NAME.vs_baseline`. The client side of
# every measure is this tree's exec_bench; the floor is each build's own (it is the executor's
# code).
#
# Usage: bench/exec.sh BUILD_DIR [ITERATIONS] [CLIENTS] [SECONDS]
set -euo pipefail

build=$(cd "${1:?usage: $0 BUILD_DIR [ITERATIONS] [CLIENTS] [SECONDS]}" && pwd)
n=${2:-2000}
clients=${3:-8}
seconds=${4:-10}
warmup=$((n / 10))
entries=100000
baseline=${BENCH_BASELINE-main}

if [ "$(id -u)" != 0 ]; then
	echo "exec benchmark: SKIP (needs root: namespaces, cgroups)"
	exit 0
fi
repo=$(cd "$(dirname "$0")/.." && pwd)
. "$repo/bench/peers.sh"
. "$repo/bench/daemon.sh"
tmp=$(mktemp -d /tmp/boxkite-exec-bench.XXXXXX)
pid=
cleanup() {
	[ -z "$pid" ] || { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }
	rm -rf "$tmp"
}
trap cleanup EXIT

# bench_value FILE NAME [UNIT]: the value of the line `bench: NAME VALUE UNIT` in FILE; fails
# loudly without one (a baseline that is not there must not just drop the ratio).
bench_value() {
	local v
	v=$(sed -n "s|^bench: $2 \([0-9.]*\) ${3:-us}\$|\1|p" "$1" | tail -1)
	if ! [[ "$v" =~ ^[0-9]+(\.[0-9]*)?$ ]] || [ "$(echo "$v > 0" | bc)" != 1 ]; then
		echo "exec benchmark: no positive figure for $2 in $1" >&2
		exit 1
	fi
	echo "$v"
}

# record OUT LABEL: the figures on stdin appended to OUT as they are, and shown — the baseline's as
# `bench: baseline.NAME`, so that several runs summarized (bench/summarize.sh) never mix its
# figures into ours.
record() {
	if [ "$2" = ours ]; then
		tee -a "$1"
	else
		tee -a "$1" | sed "s/^bench: /bench: $2./"
	fi
}

# suite BUILD LABEL: every figure above for the boxkited of BUILD, into $tmp/LABEL.out.
suite() {
	local b=$1 label=$2 out=$tmp/$2.out dir=$tmp/$2
	mkdir -p "$dir"
	echo "== exec ($label): isolated-spawn floor (no RPC) vs round trip through boxkited, command: true"
	: >"$out"
	"$b/bench/exec_bench" floor "$dir/floor-ws" "$b/boxkite-init" "$n" "$warmup" | record "$out" "$label"
	local floor_p50 rtt_p50
	floor_p50=$(bench_value "$out" exec_floor_p50)
	"$build/bkctl" keygen "$dir/key" >/dev/null
	"$b/boxkited" --listen "ipc://$dir/boxkited.sock" --key-file "$dir/key" --workspace "$dir/ws" \
		--state-dir "$dir/state" 2>"$dir/boxkited.log" &
	pid=$!
	if ! BOXKITE_URL="ipc://$dir/boxkited.sock" BOXKITE_KEY_FILE="$dir/key" boxkited_ready "$pid"; then
		echo "exec benchmark: the $label boxkited did not come up with its sandbox ready; its log:" >&2
		cat "$dir/boxkited.log" >&2
		exit 1
	fi
	local url=ipc://$dir/boxkited.sock
	[ "$label" != ours ] || peer_bwrap "$build/bench/exec_bench" $((n / 4)) $((warmup / 4)) | record "$out" "$label"
	"$build/bench/exec_bench" rpc "$url" "$dir/key" "$n" "$warmup" "$floor_p50" | record "$out" "$label"
	rtt_p50=$(bench_value "$out" exec_rtt_p50)
	if [ "$label" = ours ] && grep -q '^bench: peer_bwrap_spawn_p50 ' "$out"; then
		local bwrap_p50 ratio
		bwrap_p50=$(bench_value "$out" peer_bwrap_spawn_p50)
		ratio=$(echo "$rtt_p50 / $bwrap_p50" | bc -l)
		printf 'exec round trip / bare bubblewrap spawn: %.2fx (target <= 0.25x)\nbench: exec_rtt_vs_bwrap.ratio %.2f x\n' \
			"$ratio" "$ratio" | record "$out" "$label"
	fi
	echo "== exec ($label): $clients concurrent clients for ${seconds}s, health latency meanwhile (and before, with no exec)"
	"$build/bench/exec_bench" load "$url" "$dir/key" "$clients" "$seconds" "$rtt_p50" | record "$out" "$label"
	# A directory of $entries entries in the workspace, made from the host side, then left still
	# for 3 s: boxkited keeps a listing only of a directory that has settled (sidecar/files/fsops.h).
	mkdir "$dir/ws/big"
	(cd "$dir/ws/big" && seq -f "entry-%06g" "$entries" | xargs touch)
	sleep 3
	echo "== files ($label): full listings of $entries entries (1000 a page)"
	"$build/bench/exec_bench" list "$url" "$dir/key" big 6 | record "$out" "$label"
	echo "== health ($label): with $clients clients running execs and $clients listing the $entries entries"
	"$build/bench/exec_bench" mixed "$url" "$dir/key" "$clients" "$clients" "$seconds" big | record "$out" "$label"
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	pid=
}

suite "$build" ours
if [ -z "$baseline" ]; then
	echo "exec benchmark: no baseline (BENCH_BASELINE is empty)"
	exit 0
fi
echo "== baseline: $baseline ($(git -C "$repo" rev-parse --short "$baseline")), built in a scratch directory"
mkdir "$tmp/src"
git -C "$repo" archive "$baseline" | tar -x -C "$tmp/src"
if ! make -C "$tmp/src" -s -j"$(nproc)" all build/bench/exec_bench >"$tmp/build.log" 2>&1; then
	echo "exec benchmark: the baseline did not build; the end of its log:" >&2
	tail -20 "$tmp/build.log" >&2
	exit 1
fi
suite "$tmp/src/build" baseline
echo "== ours against the baseline, measured in this run"
compare() { # NAME UNIT
	local ours theirs
	ours=$(bench_value "$tmp/ours.out" "$1" "$2")
	theirs=$(bench_value "$tmp/baseline.out" "$1" "$2")
	printf '%-44s ours %10.1f  baseline %10.1f %-8s ours/baseline %.2fx\n' "$1" "$ours" "$theirs" "$2" \
		"$(echo "$ours / $theirs" | bc -l)"
	printf 'bench: %s.vs_baseline %.2f x\n' "$1" "$(echo "$ours / $theirs" | bc -l)"
}
compare exec_floor_p50 us
compare exec_rtt_p50 us
compare exec_throughput_${clients}c execs/s
compare health_rtt_under_exec_load_p99 us
compare list_full_p50 us
compare health_rtt_under_exec_and_list_load_p99 us
