#!/bin/bash
# The watch benchmark (`make bench`): against a real boxkited (local mode), the latency from a
# change to its FileWatch event at a long-polling reader beside the change's own round trip, and a
# burst of files made while nobody reads. bench/watch_bench.c says how.
#
# Usage: bench/watch.sh BUILD_DIR [CHANGES] [FILES]
set -euo pipefail

build=$(cd "${1:?usage: $0 BUILD_DIR [CHANGES] [FILES]}" && pwd)
changes=${2:-2000}
files=${3:-20000}

if [ "$(id -u)" != 0 ]; then
	echo "watch benchmark: SKIP (needs root: boxkited makes a sandbox)"
	exit 0
fi
tmp=$(mktemp -d /tmp/boxkite-watch-bench.XXXXXX)
pid=
cleanup() {
	[ -z "$pid" ] || { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }
	rm -rf "$tmp"
}
trap cleanup EXIT

"$build/bkctl" keygen "$tmp/key" >/dev/null
"$build/boxkited" --listen "ipc://$tmp/boxkited.sock" --key-file "$tmp/key" --workspace "$tmp/ws" \
	--state-dir "$tmp/state" >"$tmp/log" 2>&1 &
pid=$!
BOXKITE_URL="ipc://$tmp/boxkited.sock" BOXKITE_KEY_FILE="$tmp/key" "$build/bkctl" health --wait 10 >/dev/null
url="ipc://$tmp/boxkited.sock"
echo "== watches: change to event, a burst past the bounds"
"$build/bench/watch_bench" latency "$url" "$tmp/key" "$changes"
"$build/bench/watch_bench" burst "$url" "$tmp/key" "$files"
