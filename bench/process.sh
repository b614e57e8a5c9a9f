#!/bin/bash
# The process benchmark (`make bench`): against a real boxkited (local mode), streaming
# throughput through ProcessRead beside the raw pipe throughput of the same command in the same
# run; the latency from a command's write to a long-polling reader; Health's latency with 100
# long-polls waiting beside the same daemon's idle Health. bench/process_bench.c says how.
#
# Usage: bench/process.sh BUILD_DIR [BYTES] [LINES] [READERS]
set -euo pipefail

build=$(cd "${1:?usage: $0 BUILD_DIR [BYTES] [LINES] [READERS]}" && pwd)
bytes=${2:-1073741824}
lines=${3:-500}
readers=${4:-100}

if [ "$(id -u)" != 0 ]; then
	echo "process benchmark: SKIP (needs root: boxkited makes a sandbox)"
	exit 0
fi
tmp=$(mktemp -d /tmp/boxkite-process-bench.XXXXXX)
pid=
cleanup() {
	[ -z "$pid" ] || { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }
	rm -rf "$tmp"
}
trap cleanup EXIT

"$build/bkctl" keygen "$tmp/key" >/dev/null
"$build/boxkited" --listen "ipc://$tmp/boxkited.sock" --key-file "$tmp/key" --workspace "$tmp/ws" \
	--state-dir "$tmp/state" --max-connections $((readers + 16)) >"$tmp/log" 2>&1 &
pid=$!
BOXKITE_URL="ipc://$tmp/boxkited.sock" BOXKITE_KEY_FILE="$tmp/key" "$build/bkctl" health --wait 10 >/dev/null
url="ipc://$tmp/boxkited.sock"
echo "== processes: streaming, write-to-stream latency, Health with $readers long-polls waiting"
"$build/bench/process_bench" stream "$url" "$tmp/key" "$bytes"
"$build/bench/process_bench" latency "$url" "$tmp/key" "$lines"
"$build/bench/process_bench" polls "$url" "$tmp/key" "$readers" 1000
