#!/bin/bash
# The exec benchmark (`make bench`): the isolated-spawn floor measured in-process with the
# executor's own code, then a real boxkited: the exec round trip of `true` (against the floor),
# and execs/s with CLIENTS concurrent clients (against one client's rate, from the round trip)
# with the health latency meanwhile (against that of the same daemon with no exec running).
#
# Usage: bench/exec.sh BUILD_DIR [ITERATIONS] [CLIENTS] [SECONDS]
set -euo pipefail

build=${1:?usage: $0 BUILD_DIR [ITERATIONS] [CLIENTS] [SECONDS]}
n=${2:-2000}
clients=${3:-8}
seconds=${4:-10}
warmup=$((n / 10))

if [ "$(id -u)" != 0 ]; then
	echo "exec benchmark: SKIP (needs root: namespaces, cgroups)"
	exit 0
fi
tmp=$(mktemp -d /tmp/boxkite-exec-bench.XXXXXX)
pid=
cleanup() {
	[ -z "$pid" ] || { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }
	rm -rf "$tmp"
}
trap cleanup EXIT

# bench_value FILE NAME: the value of the line `bench: NAME VALUE us` in FILE; fails loudly
# without one (a baseline that is not there must not just drop the ratio).
bench_value() {
	local v
	v=$(sed -n "s/^bench: $2 \([0-9.]*\) us\$/\1/p" "$1")
	if ! [[ "$v" =~ ^[0-9]+(\.[0-9]*)?$ ]] || [ "$(echo "$v > 0" | bc)" != 1 ]; then
		echo "exec benchmark: no positive figure for $2 in the output above" >&2
		exit 1
	fi
	echo "$v"
}

echo "== exec: isolated-spawn floor (no RPC) vs round trip through boxkited, command: true"
"$build/bench/exec_bench" floor "$tmp/floor-ws" "$build/boxkite-init" "$n" "$warmup" | tee "$tmp/floor.out"
floor_p50=$(bench_value "$tmp/floor.out" exec_floor_p50)

"$build/bkctl" keygen "$tmp/key" >/dev/null
"$build/boxkited" --listen "ipc://$tmp/boxkited.sock" --key-file "$tmp/key" --workspace "$tmp/ws" --state-dir "$tmp/state" \
	2>"$tmp/boxkited.log" &
pid=$!
# Until it answers Health with its sandbox ready (at most 10 s), or it exits.
up=
for _ in $(seq 200); do
	if BOXKITE_URL="ipc://$tmp/boxkited.sock" BOXKITE_KEY_FILE="$tmp/key" "$build/bkctl" -o json health \
		2>/dev/null | grep -q '"sandbox_ready": *true'; then
		up=1
		break
	fi
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.05
done
if [ -z "$up" ]; then
	echo "exec benchmark: boxkited did not come up with its sandbox ready; its log:" >&2
	cat "$tmp/boxkited.log" >&2
	exit 1
fi
"$build/bench/exec_bench" rpc "ipc://$tmp/boxkited.sock" "$tmp/key" "$n" "$warmup" "$floor_p50" | tee "$tmp/rpc.out"
rtt_p50=$(bench_value "$tmp/rpc.out" exec_rtt_p50)
echo "== exec: $clients concurrent clients for ${seconds}s, health latency meanwhile (and before, with no exec)"
"$build/bench/exec_bench" load "ipc://$tmp/boxkited.sock" "$tmp/key" "$clients" "$seconds" "$rtt_p50"
