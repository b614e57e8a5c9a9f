#!/bin/bash
# The health round-trip benchmark (`make bench`): start a real boxkited (its per-request JSON log
# to a file, its sandbox's workspace in the temp dir) and two plain nng echo servers (synchronous,
# and a ctx+aio pool), each on a temp ipc path and a free 127.0.0.1 TCP port; run health_rtt over
# both transports; stop them all.
#
# Usage: bench/health-rtt.sh BUILD_DIR [--iterations N] [--warmup N]
set -euo pipefail

build=${1:?usage: $0 BUILD_DIR [--iterations N] [--warmup N]}
shift
tmp=$(mktemp -d /tmp/boxkite-bench.XXXXXX)
boxkited_pid=
echo_pids=()

stop() {
	local pid=$1
	[ -n "$pid" ] || return 0
	kill -TERM "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null
}
cleanup() {
	stop "$boxkited_pid" || true
	for pid in "${echo_pids[@]}"; do
		stop "$pid" || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT

# A port below the ephemeral range (so no outgoing connection takes it meanwhile) that nothing
# listens on now. A race with another listener is caught by the start-up check below.
free_port() {
	local p
	for _ in $(seq 100); do
		p=$((20000 + RANDOM % 12000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	echo "health-rtt.sh: no free TCP port found" >&2
	return 1
}

# wait_for FILE PATTERN PID: until FILE holds PATTERN, while PID lives, at most 10 s.
wait_for() {
	for _ in $(seq 200); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		kill -0 "$3" 2>/dev/null || break
		sleep 0.05
	done
	return 1
}

"$build/bkctl" keygen "$tmp/key" >/dev/null

for attempt in 1 2 3 4 5; do
	bk_tcp=$(free_port)
	"$build/boxkited" --listen "ipc://$tmp/boxkited.sock" --listen "tcp://127.0.0.1:$bk_tcp" \
		--key-file "$tmp/key" --workspace "$tmp/workspace" --state-dir "$tmp/state" 2>"$tmp/boxkited.log" &
	boxkited_pid=$!
	wait_for "$tmp/boxkited.log" "listening on tcp://" "$boxkited_pid" && break
	stop "$boxkited_pid" || true
	boxkited_pid=
	grep -qi "address in use" "$tmp/boxkited.log" && [ "$attempt" -lt 5 ] && continue
	echo "health-rtt.sh: boxkited did not start; its log:" >&2
	cat "$tmp/boxkited.log" >&2
	exit 1
done

# start_echo MODE: a plain nng echo server (health_rtt echo-MODE) on ipc and a free TCP port.
start_echo() {
	local mode=$1 pid port
	for attempt in 1 2 3 4 5; do
		port=$(free_port)
		"$build/bench/health_rtt" "echo-$mode" "ipc://$tmp/echo-$mode.sock" "tcp://127.0.0.1:$port" \
			>"$tmp/echo-$mode.out" 2>&1 &
		pid=$!
		echo_pids+=("$pid")
		if wait_for "$tmp/echo-$mode.out" "^ready" "$pid"; then
			echo_tcp[$mode]=$port
			return 0
		fi
		grep -qi "address in use" "$tmp/echo-$mode.out" && [ "$attempt" -lt 5 ] && continue
		echo "health-rtt.sh: echo-$mode server did not start:" >&2
		cat "$tmp/echo-$mode.out" >&2
		return 1
	done
}
declare -A echo_tcp
start_echo sync
start_echo async

echo "health round trip: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')," \
	"Linux $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
"$build/bench/health_rtt" run "$@" --key-file "$tmp/key" \
	ipc "ipc://$tmp/boxkited.sock" "ipc://$tmp/echo-sync.sock" "ipc://$tmp/echo-async.sock" \
	tcp "tcp://127.0.0.1:$bk_tcp" "tcp://127.0.0.1:${echo_tcp[sync]}" "tcp://127.0.0.1:${echo_tcp[async]}"

status=0
stop "$boxkited_pid" || status=$?
boxkited_pid=
if [ "$status" -ne 0 ]; then
	echo "health-rtt.sh: boxkited exited with status $status; the end of its log:" >&2
	tail -5 "$tmp/boxkited.log" >&2
	exit 1
fi
echo "boxkited served $(grep -c '"method":"Health"' "$tmp/boxkited.log") Health calls, one log line each"
