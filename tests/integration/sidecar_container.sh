#!/bin/bash
# The sidecar container of the pod emulation when a capability list is given (bkit.Pod with
# caps=...): what a container runtime makes of deploy/sandbox/pod.yaml's sidecar, run inside
# the sidecar's own mount namespace (bkit.Pod's prefix) just before boxkited:
#   - the cgroup hierarchies read-only, as a non-privileged container's /sys/fs/cgroup is;
#   - uid 0 with `capabilities: {drop: [ALL], add: CAPS}`: the bounding set reduced to CAPS,
#     the inheritable and ambient sets empty, so that exec gives uid 0 exactly CAPS in its
#     permitted and effective sets (the runtime sets all of them to the list);
#   - allowPrivilegeEscalation true (no no_new_privs: boxkited sets it itself).
#
# usage: sidecar_container.sh CAP[,CAP...] -- COMMAND [ARGS...]   (CAP as in the manifest: SYS_ADMIN)
set -eu
caps=$1
shift
[ "$1" = "--" ] && shift
while read -r _ point _ opts _; do
	case $point in
	/sys/fs/cgroup/*) mount -o "remount,bind,ro" "$point" ;;
	esac
done < /proc/self/mounts
bounding=-all
for c in ${caps//,/ }; do
	bounding="$bounding,+${c,,}"
done
exec setpriv --bounding-set="$bounding" --inh-caps=-all --ambient-caps=-all -- "$@"
