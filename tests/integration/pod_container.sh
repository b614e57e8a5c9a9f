#!/bin/bash
# The sandbox container of the pod emulation (bkit.Pod): what a container runtime would make,
# run by `nsenter -t PAUSE -p -- unshare --mount --uts --ipc --propagation private -- $0 ...`,
# so it is in the pod's PID namespace with a parent outside it, in mount/UTS/IPC namespaces of
# its own. It builds a root, pivots into it and execs boxkite-init as uid 1001 with no
# capabilities and no_new_privs (runAsUser 1001, drop ALL, allowPrivilegeEscalation false).
#
# The root is like an image's: a tmpfs holding a marker file and the init, the host's /usr and
# /etc bound read-only, the merged-/usr links, a fresh /proc, a tmpfs /tmp, a minimal /dev (with a
# devpts of its own, as runc makes) and
# the workspace bound read-write; then the whole root is made read-only
# (readOnlyRootFilesystem). Unlike boxkited's local sandbox, nothing here is nosuid except /tmp,
# /proc and /dev: setuid binaries on the root and in /workspace are honoured by the kernel, so
# only no_new_privs can stop them (the test of that relies on it).
#
# usage: pod_container.sh ROOT WORKSPACE INIT MARKER
set -eu
root=$1 workspace=$2 init=$3 marker=$4

mount -t tmpfs -o mode=0755,size=16m bk-container-root "$root"
for d in usr etc; do
	mkdir "$root/$d"
	mount --bind "/$d" "$root/$d"
	mount -o remount,bind,ro,nodev "$root/$d"
done
for l in bin sbin lib lib32 lib64 libx32; do
	if [ -L "/$l" ]; then
		ln -s "$(readlink "/$l")" "$root/$l"
	elif [ -d "/$l" ]; then
		mkdir "$root/$l"
		mount --bind "/$l" "$root/$l"
		mount -o remount,bind,ro,nodev "$root/$l"
	fi
done
# /run/boxkite: the empty directory deploy/images/sandbox.Containerfile makes, where a granted exec
# finds the egress proxy's CA bundle.
mkdir -p "$root/proc" "$root/tmp" "$root/dev" "$root/workspace" "$root/bk" "$root/run/boxkite"
mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
mount -t tmpfs -o mode=1777,size=64m,nosuid,nodev tmpfs "$root/tmp"
mount -t tmpfs -o mode=0755,size=64k,nosuid bk-container-dev "$root/dev"
for n in null zero full random urandom tty; do
	touch "$root/dev/$n"
	mount --bind "/dev/$n" "$root/dev/$n"
done
# A container's own devpts, as runc makes it: /dev/pts and /dev/ptmx leading into it.
mkdir "$root/dev/pts"
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,nosuid,noexec devpts "$root/dev/pts"
ln -s pts/ptmx "$root/dev/ptmx"
mount --bind "$workspace" "$root/workspace"
cp "$init" "$root/bk/boxkite-init"
chmod 0755 "$root/bk/boxkite-init"
printf '%s\n' "$marker" > "$root/container-marker"
hostname bk-container
mount -o remount,ro "$root"

cd "$root"
pivot_root . .
umount -l .
cd /
exec setpriv --reuid=1001 --regid=1001 --clear-groups --inh-caps=-all --bounding-set=-all \
	--no-new-privs -- /bk/boxkite-init
