#!/bin/sh
# A scratch root for README.md's walkthrough, as a fresh machine would be: run inside
#   unshare --mount --pid --fork --kill-child --propagation private
# it mounts a tmpfs on ROOT that shows the host's /usr and /etc through overlays (writes, such as
# make install's /usr/local and bkctl keygen's /etc/boxkite, land in the tmpfs), the host's
# /dev and /sys, a fresh /proc, and empty /run, /tmp, /var and /root; REPO at its own path; then
# pivots into it and runs SCRIPT with bash in REPO, with a clean environment. Everything it
# mounts lives in this mount namespace and goes with it. With "net", the caller gave it a network
# namespace of its own (unshare --net): its loopback is brought up, so that what SCRIPT listens on
# is its own.
#   usage: scratch-root.sh ROOT REPO SCRIPT [net]
set -eu
R=$1 REPO=$2 SCRIPT=$3 NET=${4:-}
case $R in /?*) ;; *) echo "scratch-root.sh: ROOT must be an absolute path, not '$R'" >&2; exit 2 ;; esac

mount -t tmpfs -o mode=0755 boxkite-scratch "$R"
mkdir -p "$R/.upper/usr" "$R/.upper/etc" "$R/.work/usr" "$R/.work/etc" "$R/usr" "$R/etc" "$R/proc" \
	"$R/dev" "$R/sys" "$R/run" "$R/tmp" "$R/var/lib/dpkg" "$R/var/log" "$R/var/tmp" "$R/root" "$R/.old" \
	"$R$REPO"
chmod 1777 "$R/tmp" "$R/var/tmp"
chmod 0700 "$R/root"
for d in usr etc; do
	mount -t overlay -o "lowerdir=/$d,upperdir=$R/.upper/$d,workdir=$R/.work/$d" boxkite-scratch-$d "$R/$d"
done
# A fresh machine has none of boxkite's own files (a whiteout in the upper layer hides them; the
# overlays are checked first, so that nothing of the host's is ever removed).
mountpoint -q "$R/etc" && mountpoint -q "$R/usr"
rm -rf "$R/etc/boxkite" "$R/usr/local/bin/bkctl" "$R/usr/local/sbin/boxkited" "$R/usr/local/lib/libboxkite"* \
	"$R/usr/local/include/boxkite" "$R/usr/local/libexec/boxkite"
# Debian 12's /bin, /lib* are symlinks into /usr; anything else is shown as it is.
for d in bin sbin lib lib32 lib64 libx32; do
	if [ -L "/$d" ]; then
		ln -s "$(readlink "/$d")" "$R/$d"
	elif [ -d "/$d" ]; then
		mkdir "$R/$d" && mount --rbind "/$d" "$R/$d"
	fi
done
mount --rbind /dev "$R/dev"
mount --rbind /sys "$R/sys"
mount -t proc proc "$R/proc"
# make deps asks dpkg what is installed; nothing may change it.
mount --bind /var/lib/dpkg "$R/var/lib/dpkg"
mount -o remount,bind,ro "$R/var/lib/dpkg"
mount --bind "$REPO" "$R$REPO"
cp "$SCRIPT" "$R/walkthrough.sh"

if [ "$NET" = net ]; then
	ip link set lo up
fi

cd "$R"
pivot_root . .old
umount -l /.old
rmdir /.old
cd "$REPO"
exec env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 TERM=dumb \
	bash --noprofile --norc /walkthrough.sh </dev/null
