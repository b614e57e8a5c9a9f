#!/bin/bash
# The sync benchmark (`make bench`): a source-like workspace of SYNC_MIB MiB (1 GiB by default:
# many files of mixed sizes, text that compresses as source does) pushed to a file:// store
# through boxkited — a full push, a push after changing 1 % of the files, a pull into an empty
# workspace — beside `tar -c | zstd -1` of the same tree to the same filesystem in the same run
# (the baseline: one pass over the tree, one core compressing).
#
# Usage: bench/sync.sh BUILD_DIR [SYNC_MIB]
set -euo pipefail
. "$(dirname "$0")/daemon.sh"

build=${1:?usage: $0 BUILD_DIR [SYNC_MIB]}
mib=${2:-1024}

if [ "$(id -u)" != 0 ]; then
	echo "sync benchmark: SKIP (needs root: boxkited makes a sandbox)"
	exit 0
fi
for tool in tar zstd python3 bc; do
	command -v "$tool" >/dev/null || { echo "sync benchmark: SKIP (no $tool: make test-deps installs it)"; exit 0; }
done
tmp=$(mktemp -d /tmp/boxkite-sync-bench.XXXXXX)
# The store is written by boxkited's unprivileged front: it must be able to reach it.
chmod 755 "$tmp"
pid=
cleanup() {
	[ -z "$pid" ] || { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }
	rm -rf "$tmp"
}
trap cleanup EXIT

"$build/bkctl" keygen "$tmp/key" >/dev/null
export BOXKITE_URL="ipc://$tmp/boxkited.sock" BOXKITE_KEY_FILE="$tmp/key"
mkdir -p "$tmp/ws"

# The tree: files of 1-16 KiB (70 %), 16 KiB-1 MiB (25 %) and 1-8 MiB (5 %) in directories of
# at most 100, until SYNC_MIB MiB; their text lines of words from a vocabulary, with numbers
# and punctuation, which zstd -1 compresses about as much as it does a source tree (~3-4x).
python3 - "$tmp/ws" "$mib" <<'EOF'
import os, random, sys
top, total = sys.argv[1], int(sys.argv[2]) << 20
rnd = random.Random(1)
words = ["".join(rnd.choice("abcdefghijklmnopqrstuvwxyz_") for _ in range(rnd.randint(2, 12))) for _ in range(5000)]
syms = ["(", ")", "{", "}", ";", " = ", ", ", "->", "::", " + ", "[i]", "0", "1", "42", "\"%s\""]
def text(n):
    out, size = [], 0
    while size < n:
        line = "    " * rnd.randint(0, 3) + " ".join(rnd.choice(words) + rnd.choice(syms) for _ in range(rnd.randint(1, 9))) + "\n"
        out.append(line)
        size += len(line)
    return "".join(out).encode()[:n]
pool = text(64 << 20)
done, i = 0, 0
while done < total:
    r = rnd.random()
    n = rnd.randint(1 << 10, 16 << 10) if r < 0.70 else rnd.randint(16 << 10, 1 << 20) if r < 0.95 else rnd.randint(1 << 20, 8 << 20)
    n = min(n, total - done)
    d = os.path.join(top, "d%03d" % (i // 100))
    os.makedirs(d, exist_ok=True)
    at = rnd.randrange(0, len(pool) - n) if n < len(pool) else 0
    with open(os.path.join(d, "f%05d.src" % i), "wb") as f:
        f.write(("// file %d\n" % i).encode() + pool[at:at + n])
    done += n
    i += 1
print("sync benchmark: %d files, %.0f MiB" % (i, done / (1 << 20)))
EOF
chown -R 1001:1001 "$tmp/ws"
files=$(find "$tmp/ws" -type f | wc -l)

"$build/boxkited" --listen "ipc://$tmp/boxkited.sock" --key-file "$tmp/key" --workspace "$tmp/ws" \
	--state-dir "$tmp/state" --sync-store "file://$tmp/store" 2>"$tmp/boxkited.log" &
pid=$!
if ! boxkited_ready "$pid"; then
	echo "sync benchmark: boxkited did not come up with its sandbox ready; its log:" >&2
	cat "$tmp/boxkited.log" >&2
	exit 1
fi

timed() {
	local start end
	start=$(date +%s.%N)
	"$@" >"$tmp/out" || { echo "sync benchmark: $* failed" >&2; exit 1; }
	end=$(date +%s.%N)
	echo "$end - $start" | bc -l
}
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$tmp/out" "$1"; }

echo "== sync: $files files, $mib MiB, source-like; a file:// store on the same filesystem"
# Both read a tree whose pages were just written (in the page cache), and write to /tmp.
tar_secs=$(timed sh -c "tar -C '$tmp/ws' -cf - . | zstd -1 -q -T1 -o '$tmp/tree.tar.zst'")
tar_size=$(stat -c %s "$tmp/tree.tar.zst")
rm -f "$tmp/tree.tar.zst"
tar_rate=$(echo "$mib / $tar_secs" | bc -l)
printf 'tar -c | zstd -1: %.2f s, %.1f MiB/s, %.1f MiB written\n' "$tar_secs" "$tar_rate" "$(echo "$tar_size / 1048576" | bc -l)"

full_secs=$(timed "$build/bkctl" -o json sync push --id full)
full_rate=$(echo "$mib / $full_secs" | bc -l)
printf 'full push: %.2f s, %.1f MiB/s (%.2fx tar|zstd; target >= 0.5x), %s blobs, %.1f MiB written\n' \
	"$full_secs" "$full_rate" "$(echo "$full_rate / $tar_rate" | bc -l)" "$(field blobs_uploaded)" \
	"$(echo "$(field bytes_uploaded) / 1048576" | bc -l)"

# 1 % of the files, spread over the tree, rewritten (as the sandbox user would: a new version).
find "$tmp/ws" -type f | awk 'NR % 100 == 0' >"$tmp/changed"
while read -r f; do printf '// changed\n' >>"$f"; done <"$tmp/changed"
changed=$(wc -l <"$tmp/changed")
inc_secs=$(timed "$build/bkctl" -o json sync push --id incremental)
printf 'push after changing %s files (1 %%): %.2f s (target <= 2 s), %s blobs uploaded, %s files read\n' \
	"$changed" "$inc_secs" "$(field blobs_uploaded)" "$(field files_read)"

# A pull into an empty workspace: every file written through the file worker.
find "$tmp/ws" -mindepth 1 -delete
pull_secs=$(timed "$build/bkctl" -o json sync pull --id incremental)
pull_rate=$(echo "$mib / $pull_secs" | bc -l)
printf 'pull into an empty workspace: %.2f s, %.1f MiB/s (%s files)\n' "$pull_secs" "$pull_rate" "$(field files)"

printf 'bench: sync_tar_zstd %.2f s\nbench: sync_full_push %.2f s\nbench: sync_full_push.ratio %.2f x\n' \
	"$tar_secs" "$full_secs" "$(echo "$full_rate / $tar_rate" | bc -l)"
printf 'bench: sync_incremental_push %.2f s\nbench: sync_pull %.2f s\n' "$inc_secs" "$pull_secs"
