#!/bin/bash
# The file benchmark (`make bench`): 256 MiB up and down through boxkited, over ipc and tcp,
# beside the same run's one-core SHA-256 rate (the targets are fractions of it), raw nng and a
# local write to the same filesystem, with each side's CPU per GiB; then 1,000 files of 4 KiB
# uploaded as a batch with bkctl cp -r, beside a local cp -r. Beside each, the peer a user would
# pick instead (bench/peers.sh), over loopback to an sshd the bench starts: bkctl cp of the same
# MiB each way against scp -c aes128-gcm@openssh.com (target >= 1.5x its speed), and bkctl cp -r
# of the small files against tar c | ssh | tar x (target <= 0.5x its time).
#
# Usage: bench/files.sh BUILD_DIR [SIZE_MIB]
set -euo pipefail

build=${1:?usage: $0 BUILD_DIR [SIZE_MIB]}
mib=${2:-256}

if [ "$(id -u)" != 0 ]; then
	echo "files benchmark: SKIP (needs root: boxkited makes a sandbox)"
	exit 0
fi
tmp=$(mktemp -d /tmp/boxkite-files-bench.XXXXXX)
. "$(dirname "$0")/peers.sh"
. "$(dirname "$0")/daemon.sh"
pid=
cleanup() {
	[ -z "$pid" ] || { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }
	peer_sshd_stop
	rm -rf "$tmp"
}
trap cleanup EXIT

# As bench/health-rtt.sh: a port below the ephemeral range (so no outgoing connection takes it
# meanwhile) that nothing listens on now. A race with another listener is caught at start-up.
free_port() {
	local p
	for _ in $(seq 100); do
		p=$((20000 + RANDOM % 12000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	echo "files.sh: no free TCP port found" >&2
	return 1
}

"$build/bkctl" keygen "$tmp/key" >/dev/null
export BOXKITE_URL="ipc://$tmp/boxkited.sock" BOXKITE_KEY_FILE="$tmp/key"
# boxkited on ipc and a free TCP port, until it answers Health with its sandbox ready (at most
# 10 s); another try on another port if that one was taken meanwhile; else its log, and fail.
for attempt in 1 2 3 4 5; do
	bk_tcp=$(free_port)
	"$build/boxkited" --listen "ipc://$tmp/boxkited.sock" --listen "tcp://127.0.0.1:$bk_tcp" \
		--key-file "$tmp/key" --workspace "$tmp/ws" --state-dir "$tmp/state" 2>"$tmp/boxkited.log" &
	pid=$!
	! boxkited_ready "$pid" || break
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	pid=
	grep -qi "address in use" "$tmp/boxkited.log" && [ "$attempt" -lt 5 ] && continue
	echo "files benchmark: boxkited did not come up with its sandbox ready; its log:" >&2
	cat "$tmp/boxkited.log" >&2
	exit 1
done
head -c $((mib << 20)) /dev/urandom >"$tmp/src"

echo "== files: the disk itself: a local cp of the same $mib MiB (page cache, no sync)"
start=$(date +%s.%N)
cp "$tmp/src" "$tmp/cp-copy"
end=$(date +%s.%N)
cp_rate=$(echo "$mib / ($end - $start)" | bc -l)
printf 'local cp: %.1f MiB/s\nbench: local_cp %.1f MiB/s\n' "$cp_rate" "$cp_rate"
rm -f "$tmp/cp-copy"

echo "== files: $mib MiB up and down (4 MiB chunks), beside one core's SHA-256, raw nng and a local write"
# A warm-up transfer each way first: on this VM the first write into fresh page cache costs what
# the host takes to back the memory (and free memory goes back to it: page reporting), which a
# transfer into pages just freed does not pay. With it, every transfer below writes over pages
# of the same filesystem freed just before — the ipc and tcp runs alike.
"$build/bkctl" cp "$tmp/src" :warm.bin >/dev/null
"$build/bkctl" cp :warm.bin "$tmp/dst" >/dev/null
"$build/bkctl" rm :warm.bin >/dev/null
"$build/bench/files_bench" ipc "ipc://$tmp/raw.sock" "ipc://$tmp/boxkited.sock" "$tmp/key" "$pid" "$tmp/src" \
	"$tmp/dst" "$tmp/ws/local-write" $((mib << 20))
cmp -s "$tmp/src" "$tmp/dst" || { echo "files benchmark: download differs from upload" >&2; exit 1; }
"$build/bench/files_bench" tcp "tcp://127.0.0.1:$(free_port)" "tcp://127.0.0.1:$bk_tcp" "$tmp/key" "$pid" \
	"$tmp/src" "$tmp/dst" "$tmp/ws/local-write" $((mib << 20))
cmp -s "$tmp/src" "$tmp/dst" || { echo "files benchmark: download differs from upload" >&2; exit 1; }

# median VALUES...: the middle one (the lower of the two middle ones for an even count).
median() {
	printf '%s\n' "$@" | sort -g | sed -n "$(( ($# + 1) / 2 ))p"
}

have_ssh=
peer_sshd_start "$tmp/ssh" && have_ssh=1
me=$(id -un)
if [ -n "$have_ssh" ]; then
	echo "== files: bkctl cp of $mib MiB each way over tcp://127.0.0.1, beside scp -c aes128-gcm@openssh.com over loopback"
	# Three rounds, the two tools taking turns, each figure the median of its three.
	bk_up=() bk_down=() scp_up=() scp_down=()
	for _ in 1 2 3; do
		rm -f "$tmp/scp-up" "$tmp/scp-down" "$tmp/bk-down"
		scp_up+=("$(peer_seconds "${peer_scp[@]}" "$tmp/src" "$me@127.0.0.1:$tmp/scp-up")")
		bk_up+=("$(peer_seconds env BOXKITE_URL="tcp://127.0.0.1:$bk_tcp" "$build/bkctl" cp "$tmp/src" :scp-peer.bin)")
		scp_down+=("$(peer_seconds "${peer_scp[@]}" "$me@127.0.0.1:$tmp/src" "$tmp/scp-down")")
		bk_down+=("$(peer_seconds env BOXKITE_URL="tcp://127.0.0.1:$bk_tcp" "$build/bkctl" cp :scp-peer.bin "$tmp/bk-down")")
		cmp -s "$tmp/src" "$tmp/bk-down" && cmp -s "$tmp/src" "$tmp/scp-down" && cmp -s "$tmp/src" "$tmp/scp-up" ||
			{ echo "files benchmark: a copy differs from its source" >&2; exit 1; }
		"$build/bkctl" rm :scp-peer.bin >/dev/null
	done
	rm -f "$tmp/scp-up" "$tmp/scp-down" "$tmp/bk-down"
	for dir in up down; do
		eval "b=\$(median \"\${bk_$dir[@]}\")"
		eval "p=\$(median \"\${scp_$dir[@]}\")"
		printf 'bkctl cp %s: %.1f MiB/s; scp: %.1f MiB/s; bkctl cp / scp: %.2fx (target >= 1.5x)\n' "$dir" \
			"$(echo "$mib / $b" | bc -l)" "$(echo "$mib / $p" | bc -l)" "$(echo "$p / $b" | bc -l)"
		printf 'bench: bkctl_cp_%s %.1f MiB/s\nbench: peer_scp_%s %.1f MiB/s\nbench: bkctl_cp_%s_vs_scp.ratio %.2f x\n' \
			"$dir" "$(echo "$mib / $b" | bc -l)" "$dir" "$(echo "$mib / $p" | bc -l)" "$dir" "$(echo "$p / $b" | bc -l)"
	done
fi

echo "== files: 1000 files of 4 KiB as a batch (bkctl cp -r, 8 transfers at once), beside a local cp -r"
# The baseline is a local cp -r onto the same filesystem just before: creating 1 000 inodes on
# ext4 soon after many were deleted (earlier runs, the test suite) costs up to ~1 ms each in the
# kernel (ext4's recently_deleted scan), for cp and boxkited alike.
mkdir "$tmp/small"
for i in $(seq 1000); do head -c 4096 /dev/urandom >"$tmp/small/f$i"; done
timed() {
	local start end
	start=$(date +%s.%N)
	"$@" >/dev/null
	end=$(date +%s.%N)
	echo "$end - $start" | bc -l
}
cp_secs=$(timed cp -r "$tmp/small" "$tmp/small-copy")
secs=$(timed "$build/bkctl" cp -r "$tmp/small" :small)
ratio=$(echo "$secs / $cp_secs" | bc -l)
printf '1000 x 4 KiB: %.3f s (target <= 0.2 s); local cp -r: %.3f s (%.1fx)\n' "$secs" "$cp_secs" "$ratio"
printf 'bench: small_files_1000x4k %.3f s\nbench: small_files_local_cp %.3f s\n' "$secs" "$cp_secs"
printf 'bench: small_files_1000x4k.ratio %.2f x\n' "$ratio"
if [ -n "$have_ssh" ]; then
	mkdir "$tmp/small-ssh"
	ssh_secs=$(peer_seconds bash -c 'tar -C "$1" -cf - . | "${@:3}" "tar -C $2 -xf -"' tar "$tmp/small" \
		"$tmp/small-ssh" "${peer_ssh[@]}" "$me@127.0.0.1")
	[ "$(find "$tmp/small-ssh" -type f | wc -l)" = 1000 ] || { echo "files benchmark: tar | ssh lost files" >&2; exit 1; }
	ratio=$(echo "$secs / $ssh_secs" | bc -l)
	printf '1000 x 4 KiB: bkctl cp -r %.3f s; tar c | ssh | tar x %.3f s; bkctl / tar|ssh: %.2fx (target <= 0.5x)\n' \
		"$secs" "$ssh_secs" "$ratio"
	printf 'bench: peer_tar_ssh_1000x4k %.3f s\nbench: small_files_vs_tar_ssh.ratio %.2f x\n' "$ssh_secs" "$ratio"
fi
