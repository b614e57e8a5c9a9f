#!/bin/bash
# The exec benchmark (`make bench`): the isolated-spawn floor measured in-process with the
# executor's own code, then a real boxkited: the exec round trip of `true`, and execs/s with
# CLIENTS concurrent clients with the health latency meanwhile.
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

echo "== exec: isolated-spawn floor (no RPC) vs round trip through boxkited, command: true"
floor_out=$("$build/bench/exec_bench" floor "$tmp/floor-ws" "$build/boxkite-init" "$n" "$warmup")
echo "$floor_out"
floor_p50=$(echo "$floor_out" | sed -n 's/^bench: exec_floor_p50 \([0-9.]*\) us$/\1/p')

"$build/bkctl" keygen "$tmp/key" >/dev/null
"$build/boxkited" --listen "ipc://$tmp/boxkited.sock" --key-file "$tmp/key" --workspace "$tmp/ws" \
	2>"$tmp/boxkited.log" &
pid=$!
for _ in $(seq 100); do
	BOXKITE_URL="ipc://$tmp/boxkited.sock" "$build/bkctl" health >/dev/null 2>&1 && break
	sleep 0.05
done
"$build/bench/exec_bench" rpc "ipc://$tmp/boxkited.sock" "$tmp/key" "$n" "$warmup" "$floor_p50"
echo "== exec: $clients concurrent clients for ${seconds}s, health latency meanwhile"
"$build/bench/exec_bench" load "ipc://$tmp/boxkited.sock" "$tmp/key" "$clients" "$seconds"
