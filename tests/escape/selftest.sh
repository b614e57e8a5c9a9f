#!/bin/bash
# Self-test of the escape probes (make test-escape-selftest).
#
# A probe's verdict is worth something only if it can be trusted in both directions, so this runs
# the probes on this machine, unsandboxed, where the outcome is known, and asserts it:
#  - ALLOWED as root where root really can (so ALLOWED means allowed);
#  - DENIED where the attack really cannot work (so DENIED means denied, and its line parses):
#    as a user with no capabilities and no_new_privs (setpriv), as root of a throwaway user
#    namespace, in throwaway network/PID/mount namespaces, under rlimits (prlimit), and, for the
#    attacks only seccomp stops in a sandbox, under bk-seccomp-shim.
# Kernel features this machine lacks (modules, kexec, x32...) may show as DENIED ENOSYS even for
# root; the summary names every probe whose ALLOWED or DENIED path could not be shown here.
# Every probe `bk-probe list` names must have been run, or the test fails.
#
# Needs root (else it says SKIP, and counts it for make test), util-linux (unshare, setpriv, prlimit) and /usr/bin/python3
# for the 127.0.0.1 listeners. It never touches the host's network configuration, dials nothing
# but 127.0.0.1, and removes what it creates.
#
# usage: selftest.sh BK_PROBE BK_SECCOMP_SHIM
set -u

if [ $# -ne 2 ]; then
	echo "usage: $0 BK_PROBE BK_SECCOMP_SHIM" >&2
	exit 2
fi
# How many of its runs were skipped, for make test's last line (tests/tests.mk): all or none.
skipped() {
	[ -z "${BOXKITE_TEST_RESULTS:-}" ] || { mkdir -p "$BOXKITE_TEST_RESULTS" && echo "$1" >"$BOXKITE_TEST_RESULTS/escape-selftest.skipped"; }
}
skip() {
	echo "SKIP test-escape-selftest: $1"
	skipped 1
	exit 0
}
[ "$(id -u)" = 0 ] || skip "needs root (it runs the probes as root and as other users)"
for tool in unshare setpriv prlimit mount /usr/bin/python3; do
	command -v "$tool" >/dev/null || skip "needs $tool"
done
skipped 0

work=$(mktemp -d /tmp/bk-escape-selftest.XXXXXX) || exit 1
pids_to_kill=()
cleanup() {
	for pid in "${pids_to_kill[@]}"; do
		kill "$pid" 2>/dev/null
	done
	rm -rf "$work"
}
trap cleanup EXIT

# Copies every user can run, in a directory every user can enter.
chmod 755 "$work"
mkdir -m 755 "$work/bin" "$work/fs"
mkdir -m 1777 "$work/shared"
cp "$1" "$work/bin/bk-probe"
cp "$2" "$work/bin/bk-seccomp-shim"
probe=$work/bin/bk-probe
shim=$work/bin/bk-seccomp-shim
secret=bk-selftest-$RANDOM$RANDOM

no_privs=(--inh-caps=-all --bounding-set=-all --no-new-privs)

# The contexts a probe runs in: `expect` takes one of these functions.
as_root() { "$probe" "$@"; }
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "${no_privs[@]}" "$probe" "$@"; }
sandboxed() { setpriv --reuid=1001 --regid=1001 --clear-groups "${no_privs[@]}" "$shim" "$probe" "$@"; }
in_userns() { unshare --user --map-root-user "$probe" "$@"; }
in_netns() { unshare --net "$probe" "$@"; }
in_pidns() { unshare --pid --fork --mount-proc "$probe" "$@"; }
in_fs_dir() { (cd "$work/fs" && "$probe" "$@"); }

passed=0
failed=0
declare -A allowed_seen denied_seen

# expect VERDICTS PATTERN CONTEXT PROBE [ARGS...]: the probe must print exactly one line
# "PROBE <name> <verdict> <text>", with a verdict among VERDICTS (e.g. ALLOWED or ALLOWED|DENIED),
# text matching the extended regex PATTERN, and exit with its verdict's code.
expect() {
	local verdicts=$1 pattern=$2 context=$3 out code want lines tag name verdict text
	shift 3
	out=$("$context" "$@" 2>"$work/stderr")
	code=$?
	lines=$(printf '%s' "$out" | grep -c '')
	read -r tag name verdict text <<<"$out"
	case $verdict in
	DENIED | INFO) want=0 ;;
	ALLOWED) want=1 ;;
	*) want=2 ;;
	esac
	if [ "$lines" = 1 ] && [ "$tag" = PROBE ] && [[ "|$verdicts|" == *"|$verdict|"* ]] &&
		[ "$code" = "$want" ] && [[ $text =~ $pattern ]]; then
		passed=$((passed + 1))
		[ "$verdict" = ALLOWED ] && allowed_seen[$name]=1
		[ "$verdict" = DENIED ] && denied_seen[$name]=1
		printf 'ok    %-10s %.150s\n' "$context" "$out"
	else
		failed=$((failed + 1))
		printf 'FAIL  %-10s %s: wanted %s /%s/, got exit %s: %s\n' \
			"$context" "$*" "$verdicts" "$pattern" "$code" "$out"
		sed 's/^/      stderr: /' "$work/stderr"
	fi
}

# check DESCRIPTION COMMAND...: a side condition that must hold.
check() {
	local what=$1
	shift
	if "$@"; then
		passed=$((passed + 1))
		echo "ok    (check)    $what"
	else
		failed=$((failed + 1))
		echo "FAIL  (check)    $what"
	fi
}

sysctl_is() { [ "$(cat "/proc/sys/$1" 2>/dev/null)" = "$2" ]; }
sysctl_at_most() { local v; v=$(cat "/proc/sys/$1" 2>/dev/null) && [ "$v" -le "$2" ]; }

echo "== the grammar"
expect INFO '^uid=0 euid=0 gid=0 egid=0$' as_root whoami
expect INFO '^uid=1001 euid=1001 gid=1001 egid=1001$' sandboxed whoami
expect ERROR '^unknown probe' as_root no-such-probe
expect ERROR '^usage: bk-probe tcp HOST PORT$' as_root tcp 127.0.0.1
expect ERROR '^bad-endpoint' as_root tcp localhost 80
check "list names every probe once" bash -c '[ "$("$0" list | awk "{print \$1}" | sort | uniq -d)" = "" ]' "$probe"

echo "== the network (listeners on 127.0.0.1 only)"
# tcp_open listens with backlog 0 and never accepts: the first connection fills the queue, so
# the next SYN is dropped and times out. tcp_closed is bound but not listening: it refuses.
/usr/bin/python3 -c '
import socket, threading, time
tcp_open = socket.socket(); tcp_open.bind(("127.0.0.1", 0)); tcp_open.listen(0)
tcp_closed = socket.socket(); tcp_closed.bind(("127.0.0.1", 0))
udp = lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp_echo = udp(); udp_echo.bind(("127.0.0.1", 0))
udp_sink = udp(); udp_sink.bind(("127.0.0.1", 0))
gone = udp(); gone.bind(("127.0.0.1", 0)); udp_closed = gone.getsockname()[1]; gone.close()
def echo():
    while True:
        data, peer = udp_echo.recvfrom(2048)
        udp_echo.sendto(data, peer)
threading.Thread(target=echo, daemon=True).start()
print(*[s.getsockname()[1] for s in (tcp_open, tcp_closed, udp_echo, udp_sink)], udp_closed, flush=True)
time.sleep(600)
' >"$work/ports" &
pids_to_kill+=($!)
for _ in $(seq 50); do
	[ -s "$work/ports" ] && break
	sleep 0.1
done
read -r tcp_open tcp_closed udp_echo udp_sink udp_closed <"$work/ports"
expect ALLOWED "^connected to 127.0.0.1 port $tcp_open\$" as_root tcp 127.0.0.1 "$tcp_open"
expect DENIED '^ETIMEDOUT ' as_root tcp 127.0.0.1 "$tcp_open"
expect DENIED '^ECONNREFUSED ' as_root tcp 127.0.0.1 "$tcp_closed"
expect DENIED '^ENETUNREACH ' in_netns tcp 127.0.0.1 "$tcp_open"
expect ALLOWED '^reply of 9 bytes ' as_root udp 127.0.0.1 "$udp_echo"
expect DENIED '^ETIMEDOUT ' as_root udp 127.0.0.1 "$udp_sink"
expect DENIED '^ECONNREFUSED ' as_root udp 127.0.0.1 "$udp_closed"
expect DENIED '^ENETUNREACH ' in_netns udp 127.0.0.1 "$udp_echo"
if ls /sys/class/net | grep -qvx lo; then
	expect ALLOWED '^interfaces=.* non-lo-routes=' as_root interfaces
fi
expect DENIED '^only-lo interfaces=lo$' in_netns interfaces
for kind in raw-socket packet-socket; do
	expect ALLOWED '^socket opened$' as_root "$kind"
	expect DENIED '^EPERM$' as_nobody "$kind"
	expect DENIED '^EPERM$' in_userns "$kind"
done

# vsock (which ignores network namespaces) and the other families: only a filter refuses them.
expect 'ALLOWED|DENIED' '^(stream=|EAFNOSUPPORT )' as_root vsock # DENIED where the kernel has no vsock
expect DENIED '^EAFNOSUPPORT stream=EAFNOSUPPORT,dgram=EAFNOSUPPORT,high-bits=EAFNOSUPPORT$' sandboxed vsock
expect ALLOWED 'netlink-4=opened' as_root socket-families
expect DENIED '^families=EAFNOSUPPORT,netlink-4=EPROTONOSUPPORT,.*netlink-16=EPROTONOSUPPORT$' sandboxed socket-families

echo "== terminals"
# Under script(1), a pty as controlling terminal; what the probe wrote to it precedes its line.
with_ctty() {
	local out rc
	out=$(script -qec "$probe $*" /dev/null </dev/null)
	rc=$?
	printf '%s\n' "$out" | tr -d '\r' | sed -n 's/.*\(PROBE .*\)/\1/p'
	return $rc
}
expect ALLOWED '^dev-tty=opened\(write=ok,TIOCSTI=ok\)' with_ctty tty BKSELFTESTMARK
expect ALLOWED 'TIOCSETD=ok' as_root tty BKSELFTESTMARK
expect DENIED '^dev-tty=no-ctty,TIOCSTI=EPERM,TIOCSTI-high-bits=EPERM,TIOCSETD=EPERM$' sandboxed tty BKSELFTESTMARK

echo "== other processes (a root 'sleep' holding a secret in its environment)"
BK_SELFTEST_SECRET=$secret sleep 300 &
victim=$!
pids_to_kill+=("$victim")
for _ in $(seq 50); do
	grep -q sleep "/proc/$victim/cmdline" 2>/dev/null && break
	sleep 0.1
done
expect ALLOWED '^seize=ok$' as_root ptrace "$victim"
expect DENIED '^EPERM seize=EPERM,attach=EPERM$' as_nobody ptrace "$victim"
expect DENIED '^ESRCH ' in_pidns ptrace "$victim"
check "the ptrace probe left its target running" grep -q '^State:.S' "/proc/$victim/status"
expect ALLOWED '^read 8 bytes at ' as_root process-vm-read "$victim"
expect DENIED '^EPERM$' as_nobody process-vm-read "$victim"
expect ALLOWED '^read 1 byte' as_root read "/proc/$victim/environ"
expect DENIED '^EACCES open$' as_nobody read "/proc/$victim/environ"
expect DENIED '^ENOENT open$' as_root read "$work/absent/bk-selftest"
expect ALLOWED 'environ:[0-9]+-bytes:SECRET-FOUND' as_root cmdline-secret "$victim" "$secret"
expect ALLOWED '^readable cmdline:.* refused:environ=EACCES$' as_nobody cmdline-secret "$victim" "$secret"
expect DENIED '^ENOENT cmdline=ENOENT,environ=ENOENT$' in_pidns cmdline-secret "$victim" "$secret"
expect ERROR 'ancestor' as_root cmdline-secret "$$" "$secret"
expect ALLOWED "^signal 0 delivered to $victim\$" as_root kill "$victim"
expect DENIED '^EPERM$' as_nobody kill "$victim" SIGTERM
expect DENIED '^ESRCH$' in_pidns kill "$victim" KILL
expect ERROR '^bad-signal$' as_root kill "$victim" NOSUCHSIG
check "the kill probes left their target alive" kill -0 "$victim"
expect ALLOWED '^visible ' as_root pid-visible "$victim"
expect DENIED '^not-visible ' in_pidns pid-visible "$victim"
# As root on the host, kernel threads (children of pid 0) are outside our tree.
if awk '$4 == 0 && $1 != 1 { found = 1 } END { exit !found }' /proc/[0-9]*/stat 2>/dev/null; then
	expect ALLOWED '^visible=[0-9]+ our-root=1 outside-our-tree=[0-9]' as_root pids
fi
expect DENIED '^own-tree-only pids=1,2' in_pidns pids

echo "== mounts and namespaces"
count_temp_dirs() { find /tmp -maxdepth 1 -name 'bk-probe.*' | wc -l; }
temp_dirs=$(count_temp_dirs)
expect ALLOWED '^mount-tmpfs=ok$' as_root mount
expect DENIED '^EPERM ' as_nobody mount
expect DENIED '^EPERM ' in_userns mount
expect ALLOWED '^pivot_root=passed-privilege-check' as_root pivot-root
expect DENIED '^EPERM ' as_nobody pivot-root
expect DENIED '^EPERM ' in_userns pivot-root
check "mount and pivot-root removed their temporary directories" [ "$(count_temp_dirs)" = "$temp_dirs" ]
# umount as root, on a tmpfs of a throwaway mount namespace, which must survive the probe.
umount_own_tmpfs() {
	unshare --mount sh -c 'mount -t tmpfs bk-selftest "$1" && "$2" umount "$1"; rc=$?
		mountpoint -q "$1" || { echo "the umount probe unmounted $1" >&2; exit 99; }; exit $rc' \
		sh "$work/fs" "$probe"
}
expect ALLOWED '^umount2=passed-privilege-check\(EINVAL\)$' umount_own_tmpfs
expect DENIED '^EPERM ' as_nobody umount /proc
expect DENIED '^EPERM ' in_userns umount /proc
expect ERROR '^umount2=ENOENT' as_root umount "$work/absent/bk-selftest"
for ns in net mnt pid user ipc uts cgroup time; do
	expect ALLOWED '^unshare=ok$' as_root unshare "$ns"
	expect DENIED '^EPERM unshare=EPERM$' sandboxed unshare "$ns"
	if [ "$ns" = time ]; then
		expect ALLOWED '^clone3=ok$' as_root clone-ns "$ns"
		expect DENIED '^ENOSYS clone3=ENOSYS$' sandboxed clone-ns "$ns"
	else
		expect ALLOWED '^clone=ok,clone3=ok$' as_root clone-ns "$ns"
		expect DENIED '^clone=EPERM,clone3=ENOSYS$' sandboxed clone-ns "$ns"
	fi
	if [ "$ns" = user ] && ! sysctl_is user/max_user_namespaces 0; then
		# Unprivileged user namespaces: only the sandbox's seccomp filter stops these.
		expect ALLOWED '^unshare=ok$' as_nobody unshare "$ns"
		expect ALLOWED '^clone=ok,clone3=ok$' as_nobody clone-ns "$ns"
	elif [ "$ns" != user ] && [ "$ns" != time ]; then
		expect DENIED '^EPERM unshare=EPERM$' as_nobody unshare "$ns"
		expect DENIED '^EPERM clone=EPERM,clone3=EPERM$' as_nobody clone-ns "$ns"
	fi
done
expect ERROR '^bad-flag' as_root unshare nosuchns
expect ALLOWED '^setns=ok$' as_root setns "/proc/$victim/ns/net"
expect DENIED '^EACCES open=EACCES$' as_nobody setns "/proc/$victim/ns/net"
expect DENIED '^EPERM setns=EPERM$' as_nobody setns /proc/self/ns/uts
expect DENIED '^EPERM setns=EPERM$' sandboxed setns /proc/self/ns/uts
expect ERROR '^open=ENOENT' as_root setns "$work/absent/bk-selftest"
expect ALLOWED '^chroot=ok$' as_root chroot
expect ALLOWED '^chroot=ok$' in_userns chroot # CAP_SYS_CHROOT of a user namespace is enough
expect DENIED '^EPERM chroot=EPERM$' as_nobody chroot

echo "== the filesystem"
expect ALLOWED '^create-and-write=ok$' as_root write "$work/fs/new"
check "write removed the file it created" [ ! -e "$work/fs/new" ]
echo keep >"$work/fs/existing"
expect ALLOWED '^open-and-write=ok$' as_root write "$work/fs/existing"
check "write left an existing file unchanged" [ "$(cat "$work/fs/existing")" = keep ]
expect DENIED '^EIO open-and-write=EIO$' as_root write /proc/version
expect DENIED '^EACCES open=EACCES$' as_nobody write /etc/bk-probe
expect ERROR '^open=ENOENT' as_root write "$work/absent/bk-selftest"
write_read_only_tmpfs() {
	unshare --mount sh -c 'mount -t tmpfs -o ro bk-selftest "$1" && exec "$2" write "$1/x"' sh "$work/fs" "$probe"
}
expect DENIED '^EROFS open=EROFS$' write_read_only_tmpfs
expect ALLOWED '^mknod-char-1:3=ok$' as_root mknod "$work/fs/null"
check "mknod removed the node it made" [ ! -e "$work/fs/null" ]
expect DENIED '^EPERM mknod-char-1:3=EPERM$' as_nobody mknod "$work/shared/null"
expect ERROR '^mknod=EEXIST' as_root mknod "$work/fs/existing"
expect ALLOWED '^chmod-setuid=mode=4755,.*mknod-setgid=mode=2755$' as_root setid-mode "$work/fs"
expect ALLOWED '^chmod-setuid=mode=4755,' as_nobody setid-mode "$work/shared" # one's own files: yes
expect DENIED '^EPERM chmod-setuid=EPERM,.*mknod-setgid=EPERM$' sandboxed setid-mode "$work/shared"
check "setid-mode left no file behind" [ -z "$(find "$work/fs" "$work/shared" -name 'bk-setid-*')" ]
expect ERROR '^create ' as_root setid-mode "$work/absent/bk-selftest"

echo "== kernel surfaces"
expect 'ALLOWED|DENIED' '^(init_module=passed-privilege-check|ENOSYS )' as_root module
expect DENIED '^(EPERM|ENOSYS) ' as_nobody module
expect 'ALLOWED|DENIED' '^(kexec_load=passed-privilege-check|ENOSYS )' as_root kexec
expect DENIED '^(EPERM|ENOSYS) ' as_nobody kexec
expect ALLOWED '^prog_load=ok,map_create=ok$' as_root bpf
if sysctl_is kernel/unprivileged_bpf_disabled 0; then
	expect ALLOWED '^prog_load=ok' as_nobody bpf
else
	expect DENIED '^EPERM prog_load=EPERM,map_create=EPERM$' as_nobody bpf
fi
expect DENIED '^EPERM ' sandboxed bpf
expect ALLOWED '^io_uring_setup=ok$' as_root io-uring
if sysctl_is kernel/io_uring_disabled 0; then
	expect ALLOWED '^io_uring_setup=ok$' as_nobody io-uring
fi
expect DENIED '^SIGSYS ' sandboxed io-uring # the shim kills on io_uring_setup
expect ALLOWED '^userfaultfd=ok,userfaultfd-user-mode-only=ok$' as_root userfaultfd
expect ALLOWED 'userfaultfd-user-mode-only=ok' as_nobody userfaultfd
expect DENIED '^EPERM ' sandboxed userfaultfd
expect ALLOWED '^perf_event_open=ok$' as_root perf-event-open
if sysctl_at_most kernel/perf_event_paranoid 2; then
	expect ALLOWED '^perf_event_open=ok$' as_nobody perf-event-open
else
	expect DENIED '^(EACCES|EPERM) ' as_nobody perf-event-open
fi
expect DENIED '^EPERM perf_event_open=EPERM$' sandboxed perf-event-open
expect ALLOWED '^add_key=ok,keyctl-user-keyring=ok$' as_root keyctl
expect ALLOWED '^add_key=ok' as_nobody keyctl
expect DENIED '^EPERM add_key=EPERM,keyctl-user-keyring=EPERM$' sandboxed keyctl
expect ALLOWED '^open_by_handle_at' as_root open-by-handle
expect DENIED '^EPERM open_by_handle_at' as_nobody open-by-handle
expect DENIED '^EPERM open_by_handle_at' in_userns open-by-handle
expect ALLOWED '^swapon=passed-privilege-check\(EINVAL\),swapoff=passed-privilege-check\(EINVAL\)$' as_root swapon
expect DENIED '^EPERM swapon=EPERM,swapoff=EPERM$' as_nobody swapon
expect ALLOWED '^reboot=passed-privilege-check\(EINVAL\)$' as_root reboot
expect DENIED '^EPERM reboot=EPERM$' as_nobody reboot
expect DENIED '^EPERM reboot=EPERM$' in_userns reboot
expect ALLOWED '^settimeofday=ok,clock_settime=ok$' as_root settime
expect DENIED '^EPERM settimeofday=EPERM,clock_settime=EPERM$' as_nobody settime
expect DENIED '^EPERM ' in_userns settime
expect ALLOWED '^read-implies-exec=persona=0x400000,addr-no-randomize=persona=0x40000$' as_root personality
expect ALLOWED '^read-implies-exec=' as_nobody personality
expect DENIED '^EPERM read-implies-exec=EPERM,addr-no-randomize=EPERM$' sandboxed personality
expect ALLOWED '^read=ok$' as_root modify-ldt
expect DENIED '^EPERM read=EPERM$' sandboxed modify-ldt
expect ALLOWED '^get_mempolicy=passed-privilege-check\(ok\),openat2=passed-privilege-check\(ok\),clone3=passed-privilege-check\(EINVAL\)' as_root unlisted
expect DENIED '^ENOSYS get_mempolicy=ENOSYS,openat2=ENOSYS,clone3=ENOSYS,mbind=ENOSYS$' sandboxed unlisted
# i386 works wherever the kernel has IA32 emulation; x32 is rarely built in.
expect 'ALLOWED|DENIED' '^(i386=getpid=|ENOSYS |i386=SIGSEGV)' as_root foreign-arch
expect DENIED '^SIGSYS i386=SIGSYS,x32=SIGSYS$' sandboxed foreign-arch

echo "== identity"
expect ALLOWED '^CapInh=0+ CapPrm=[0-9a-f]*[1-9a-f]' as_root caps
expect ALLOWED 'CapEff=0+ .*NoNewPrivs=1 Seccomp=0$' as_nobody caps # no seccomp: not clean
expect DENIED '^caps-0-nnp-seccomp2 ' sandboxed caps
expect ALLOWED '^uid=0,0,0 ' as_root ids
expect DENIED '^uid=1001 gid=1001 no-supplementary-groups$' sandboxed ids
with_group() { setpriv --reuid=1001 --regid=1001 --groups=1001 "${no_privs[@]}" "$probe" "$@"; }
expect ALLOWED 'supplementary-groups=1$' with_group ids
suid=$work/bin/bk-probe-suid
cp "$probe" "$suid"
chmod 4755 "$suid"
nobody_keeping_nnp_off() { setpriv --reuid=65534 --regid=65534 --clear-groups "$probe" "$@"; }
expect ALLOWED '^euid=0 ' nobody_keeping_nnp_off setuid-exec "$suid"
expect DENIED '^euid=65534 ' as_nobody setuid-exec "$suid"
on_nosuid_mount() {
	unshare --mount sh -c 'mount --bind "$1" "$1" && mount -o remount,bind,nosuid "$1" &&
		exec setpriv --reuid=65534 --regid=65534 --clear-groups "$2" setuid-exec "$3"' \
		sh "$work/bin" "$probe" "$suid"
}
expect DENIED '^euid=65534 ' on_nosuid_mount
expect ERROR 'is not setuid-root' as_nobody setuid-exec "$probe"

echo "== file descriptors and the environment"
with_fd_7() { "$probe" "$@" 7</dev/null; }
expect ALLOWED '(^| |,)7->/dev/null' with_fd_7 fds
# Only 0-2, whatever this shell (or make's jobserver) holds open.
with_only_stdio() (
	for fd in /proc/self/fd/*; do
		fd=${fd##*/}
		[ "$fd" -gt 2 ] && eval "exec $fd>&-"
	done 2>/dev/null
	"$probe" "$@"
)
expect DENIED '^only-0-1-2$' with_only_stdio fds
with_stdin_closed() { with_only_stdio "$@" <&-; }
expect DENIED '^only-0-1-2 closed=0$' with_stdin_closed fds
with_secret_env() { BK_SELFTEST_TOKEN=$secret "$probe" "$@"; }
expect ALLOWED '^secret-in BK_SELFTEST_TOKEN$' with_secret_env env "$secret"
expect ALLOWED '^secret-in BK_SELFTEST_TOKEN$' with_secret_env env BK_SELFTEST_TOKEN
with_clean_env() { env -i PATH=/usr/bin:/bin "$probe" "$@"; }
expect DENIED '^no-match names=PATH$' with_clean_env env "$secret"
expect ERROR '^empty-secret$' as_root env ''

echo "== resource limits"
expect ALLOWED '^forked-50 ' as_root fork-bomb 50
few_processes() {
	prlimit --nproc=40:40 setpriv --reuid=64999 --regid=64999 --clear-groups "${no_privs[@]}" "$probe" "$@"
}
expect DENIED '^capped-at-[0-9]+ fork=EAGAIN$' few_processes fork-bomb 1000
check "the fork bomb reaped its children" bash -c '! ps -o pid= -u 64999 | grep -q .'
expect ALLOWED '^touched-64-MiB$' as_root memory-bomb 64
little_memory() { prlimit --as=$((256 << 20)) "$probe" "$@"; }
expect DENIED '^ENOMEM-at-[0-9]+-MiB$' little_memory memory-bomb 1024
expect ALLOWED '^wrote-4194304-bytes$' in_fs_dir fsize-bomb 4
small_files() { (cd "$work/fs" && prlimit --fsize=1048576 "$probe" "$@"); }
expect DENIED '^EFBIG-at-1048576-bytes$' small_files fsize-bomb 8
check "fsize-bomb left no file behind" [ -z "$(find "$work/fs" -name 'bk-probe-fsize.*')" ]

echo "== the supervisor passes a fatal signal through"
# tcp waits 2 s on the full backlog; kill its worker (the supervisor's child) meanwhile.
"$probe" tcp 127.0.0.1 "$tcp_open" >"$work/killed.out" 2>/dev/null &
supervisor=$!
worker=
for _ in $(seq 50); do
	worker=$(ps -o pid= --ppid "$supervisor" | tr -d ' ')
	[ -n "$worker" ] && break
	sleep 0.02
done
[ -n "$worker" ] && kill -KILL "$worker"
wait "$supervisor" 2>/dev/null
status=$?
died_silently_by_sigkill() { [ "$status" = 137 ] && [ ! -s "$work/killed.out" ]; }
check "a probe killed by SIGKILL dies by SIGKILL (status $status) and prints nothing" died_silently_by_sigkill

echo "== coverage"
untested=0
probes=$("$probe" list) && [ -n "$probes" ] || { echo "FAIL  bk-probe list names no probe"; untested=1; }
while read -r name _; do
	if [ -z "${allowed_seen[$name]:-}" ] && [ -z "${denied_seen[$name]:-}" ] && [ "$name" != whoami ]; then
		echo "FAIL  $name was never run"
		untested=$((untested + 1))
	elif [ -z "${allowed_seen[$name]:-}" ] && [ "$name" != whoami ]; then
		echo "note  $name: its ALLOWED path cannot be shown on this machine (the kernel lacks it)"
	elif [ -z "${denied_seen[$name]:-}" ] && [ "$name" != whoami ]; then
		echo "FAIL  $name: its DENIED path was never shown"
		untested=$((untested + 1))
	fi
done <<<"$probes"
failed=$((failed + untested))

echo "test-escape-selftest: $passed passed, $failed failed"
[ "$failed" = 0 ]
