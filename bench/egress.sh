#!/bin/bash
# The egress benchmark (`make bench`): what the egress proxy costs a granted command.
#
# An upstream HTTP server on 127.0.0.1 (bench/egress_upstream.py, bytes from memory), a local
# boxkited whose ceiling names exactly that address and port, and curl fetching from it:
#   direct   curl in boxkited's own network namespace, straight to the upstream (the baseline);
#   forward  curl inside an exec granted the destination, through the proxy its environment
#            names (an absolute-URI request the proxy parses, checks and forwards);
#   tunnel   the same with --proxytunnel: a CONNECT the proxy checks, then bytes relayed as they
#            are (what HTTPS takes).
# Throughput: SIZE MiB (64 by default) fetched ROUNDS times each, the three interleaved round by
# round; the medians of curl's own download speed, and each proxied one against direct (target
# >= 0.8x). First byte: N fetches of one byte each way (curl's time_starttransfer: from the
# transfer's start, connecting included, to the first byte of the answer; not curl's start-up),
# in interleaved batches; p50 and p99, and the p50 the proxy adds (target <= 1 ms). And the
# proxy's own CPU per GiB relayed, which says whether it or the machine is what limits.
#
# Usage: bench/egress.sh BUILD_DIR [SIZE_MIB] [ROUNDS] [N]
set -euo pipefail

build=${1:?usage: $0 BUILD_DIR [SIZE_MIB] [ROUNDS] [N]}
mib=${2:-64}
rounds=${3:-9}
n=${4:-400}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/daemon.sh"

if [ "$(id -u)" != 0 ]; then
	echo "egress benchmark: SKIP (needs root: boxkited makes a sandbox)"
	exit 0
fi
for tool in curl python3; do
	command -v "$tool" >/dev/null || { echo "egress benchmark: SKIP (no $tool: make deps installs it)"; exit 0; }
done
tmp=$(mktemp -d /tmp/boxkite-egress-bench.XXXXXX)
chmod 755 "$tmp"
pid= upstream=
cleanup() {
	[ -z "$pid" ] || { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }
	[ -z "$upstream" ] || { kill "$upstream" 2>/dev/null; wait "$upstream" 2>/dev/null || true; }
	rm -rf "$tmp"
}
trap cleanup EXIT

python3 -u "$here/egress_upstream.py" "$mib" >"$tmp/upstream.port" 2>"$tmp/upstream.log" &
upstream=$!
for _ in $(seq 100); do
	[ -s "$tmp/upstream.port" ] && break
	sleep 0.05
done
port=$(head -1 "$tmp/upstream.port")
[ -n "$port" ] || { echo "egress benchmark: the upstream did not start: $(cat "$tmp/upstream.log")" >&2; exit 1; }
dest="127.0.0.1:$port"
size=$((mib << 20))

"$build/bkctl" keygen "$tmp/key" >/dev/null
export BOXKITE_URL="ipc://$tmp/boxkited.sock" BOXKITE_KEY_FILE="$tmp/key"
mkdir -p "$tmp/ws"
chown 1001:1001 "$tmp/ws"
# The ceiling names the loopback destination exactly: loopback is never dialled otherwise.
"$build/boxkited" --listen "ipc://$tmp/boxkited.sock" --key-file "$tmp/key" --workspace "$tmp/ws" \
	--state-dir "$tmp/state" --egress-allow "$dest" 2>"$tmp/boxkited.log" &
pid=$!
if ! boxkited_ready "$pid"; then
	echo "egress benchmark: boxkited did not come up with its sandbox ready; its log:" >&2
	cat "$tmp/boxkited.log" >&2
	exit 1
fi

# curl's figures, one line per fetch. $1: how (direct | forward | tunnel), $2: the path, $3:
# how many fetches, $4: curl's -w format. A proxied fetch runs in one exec granted the
# destination; --noproxy '' because NO_PROXY lists loopback, which this destination is.
fetch() {
	local how=$1 path=$2 count=$3 fmt=$4 opts=""
	case $how in
	direct)
		for _ in $(seq "$count"); do
			curl -sS --noproxy '*' -o /dev/null -w "$fmt\n" "http://$dest$path"
		done
		return
		;;
	tunnel) opts="--proxytunnel" ;;
	esac
	"$build/bkctl" exec --allow-net "$dest" --timeout 600 --shell \
		"for i in \$(seq $count); do curl -sS --noproxy '' $opts -o /dev/null -w '$fmt\n' http://$dest$path || exit 1; done"
}

# Every fetch was answered with the whole body, or the figures mean nothing.
check_size() {
	local got
	got=$(fetch "$1" "/bytes/$size" 1 '%{size_download}')
	[ "$got" = "$size" ] || { echo "egress benchmark: $1 fetched $got bytes, not $size" >&2; exit 1; }
}
for how in direct forward tunnel; do check_size "$how"; done

# The proxy: the executor's boxkite-egress child. Its CPU (user + system, in clock ticks) is read
# around the proxied rounds, for the CPU it spends per GiB relayed.
proxy=
for child in $(cat /proc/"$pid"/task/*/children 2>/dev/null); do
	for grandchild in $(cat /proc/"$child"/task/*/children 2>/dev/null); do
		[ "$(cat /proc/"$grandchild"/comm 2>/dev/null)" = boxkite-egress ] && proxy=$grandchild
	done
done
[ -n "$proxy" ] || { echo "egress benchmark: no boxkite-egress under boxkited $pid" >&2; exit 1; }
ticks() { awk '{ print $14 + $15 }' /proc/"$1"/stat; }

echo "== egress: $mib MiB from an upstream on loopback, $rounds rounds; $n one-byte fetches each way"
: >"$tmp/direct.tp"; : >"$tmp/forward.tp"; : >"$tmp/tunnel.tp"
proxy_ticks=0
for _ in $(seq "$rounds"); do
	for how in direct forward tunnel; do
		before=$(ticks "$proxy")
		fetch "$how" "/bytes/$size" 1 '%{speed_download}' >>"$tmp/$how.tp"
		[ "$how" = direct ] || proxy_ticks=$((proxy_ticks + $(ticks "$proxy") - before))
	done
done
echo "$proxy_ticks $(getconf CLK_TCK) $((2 * rounds * mib))" >"$tmp/proxy.cpu"
: >"$tmp/direct.fb"; : >"$tmp/forward.fb"; : >"$tmp/tunnel.fb"
batch=$(( (n + 3) / 4 ))
for _ in 1 2 3 4; do
	for how in direct forward tunnel; do
		fetch "$how" /bytes/1 "$batch" '%{time_starttransfer}' >>"$tmp/$how.fb"
	done
done

python3 - "$tmp" <<'EOF'
import statistics, sys
d = sys.argv[1]

def read(name):
    return [float(x) for x in open(f"{d}/{name}").read().split()]

def pct(v, p):  # nearest rank, as bench/stats.h
    v = sorted(v)
    return v[max(0, -(-len(v) * p // 100) - 1)]

tp = {h: statistics.median(read(f"{h}.tp")) / (1 << 20) for h in ("direct", "forward", "tunnel")}
fb = {h: [x * 1e3 for x in read(f"{h}.fb")] for h in ("direct", "forward", "tunnel")}
print("throughput (median MiB/s): direct %.0f, forward %.0f (%.2fx; target >= 0.8x), tunnel %.0f (%.2fx; target >= 0.8x)"
      % (tp["direct"], tp["forward"], tp["forward"] / tp["direct"], tp["tunnel"], tp["tunnel"] / tp["direct"]))
for h in ("direct", "forward", "tunnel"):
    print("first byte, %-7s p50 %.3f ms, p99 %.3f ms (%d fetches)" % (h, pct(fb[h], 50), pct(fb[h], 99), len(fb[h])))
for h in ("forward", "tunnel"):
    print("first byte added by the proxy, %s: p50 %+.3f ms (target <= 1 ms)" % (h, pct(fb[h], 50) - pct(fb["direct"], 50)))
ticks, hz, mib = (int(x) for x in open(f"{d}/proxy.cpu").read().split())
cpu = ticks / hz / (mib / 1024)
print("the proxy's CPU (user + system): %.2f s per GiB relayed (%d MiB; %d ticks of 1/%d s)" % (cpu, mib, ticks, hz))
lines = ["egress_direct %.1f MiB/s" % tp["direct"]]
for h in ("forward", "tunnel"):
    lines += ["egress_%s %.1f MiB/s" % (h, tp[h]), "egress_%s.ratio %.2f x" % (h, tp[h] / tp["direct"])]
for h in ("direct", "forward", "tunnel"):
    lines += ["egress_first_byte_%s_p50 %.1f us" % (h, pct(fb[h], 50) * 1e3)]
for h in ("forward", "tunnel"):
    lines += ["egress_first_byte_added_%s_p50 %.1f us" % (h, (pct(fb[h], 50) - pct(fb["direct"], 50)) * 1e3)]
lines += ["egress_proxy_cpu %.2f s/GiB" % cpu]
print("\n".join("bench: " + l for l in lines))
EOF
